"""Paths git quotes or splits badly, through import, check, apply, continue, export, bump and
report (issue 13): a non-ASCII name (git C-quotes it: ``"\\303\\244.py"``), a name with a space
(git writes a tab after it on ``---``/``+++``) and one holding `` b/`` (which splits a
``diff --git a/x b/y`` line in two places). Every command must name them as they are on disk,
in text and JSON, and the patch files must round-trip byte for byte.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.harness.cli import ok, run
from tests.harness.git import Repo, lines

NAMES = ["ä.py", "with space.py", "dir b/x b/y.py"]


def _scenario(tmp_path: Path) -> tuple[Repo, str, str, Path]:
    """(upstream, base, new upstream, series): two patches touch all three files; upstream
    then changes line 3 of each, where patch 1 changed it too."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {n: lines(12, n[:3]) for n in NAMES})
    up.branch("feature")
    new = up.commit(
        "upstream: line 3", {n: lines(12, n[:3]).replace(f"{n[:3]} 3\n", "UP 3\n") for n in NAMES}
    )
    up.checkout("feature")
    up.commit(
        "feat: patch line 3", {n: lines(12, n[:3]).replace(f"{n[:3]} 3\n", "P 3\n") for n in NAMES}
    )
    up.commit(
        "feat: patch line 10",
        {
            n: lines(12, n[:3]).replace(f"{n[:3]} 3\n", "P 3\n").replace(f"{n[:3]} 10\n", "P 10\n")
            for n in NAMES
        },
    )
    series = tmp_path / "series"
    series.mkdir()
    return up, base, new, series


def _paths(obj: object) -> set[str]:
    """Every string value under a "path" key of a JSON document."""
    found: set[str] = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "path" and isinstance(v, str):
                found.add(v)
            found |= _paths(v)
    elif isinstance(obj, list):
        for v in obj:
            found |= _paths(v)
    return found


def test_awkward_paths_through_every_command(tmp_path: Path) -> None:
    up, base, new, series = _scenario(tmp_path)
    ok(series, "import", f"{base}..feature", "--repo", str(up.path))
    checkout = Repo(series)  # the series is a git checkout, as a fork keeps it
    checkout.commit("series on the old base")
    patches = sorted((series / "patches").glob("*.patch"))
    assert b'"a/\\303\\244.py"' in patches[0].read_bytes()  # git's quoting, as format-patch
    before = {p.name: p.read_bytes() for p in patches}
    ok(series, "check", "--apply", "--upstream", str(up.path))
    ok(series, "apply")
    tree = series / ".rebasectl" / "tree"
    assert all("P 10" in (tree / n).read_text() for n in NAMES)
    ok(series, "export")
    assert {p.name: p.read_bytes() for p in sorted((series / "patches").glob("*.patch"))} == before

    bump = json.loads(run(series, "bump", "--to", new, "--json", want=1).stdout)
    conflict = bump["patches"][0]["conflicts"]
    assert sorted(c["path"] for c in conflict) == sorted(NAMES)
    assert all(c["regions"] and c["regions"][0]["hunks"] for c in conflict)

    r = run(series, "apply", "--base", new, "--json", want=1)
    assert _paths(json.loads(r.stdout)) >= set(NAMES)
    status = json.loads(ok(series, "status", "--json").stdout)
    assert sorted(u["path"] for u in status["apply_in_progress"]["unmerged"]) == sorted(NAMES)
    for n in NAMES:
        (tree / n).write_text(lines(12, n[:3]).replace(f"{n[:3]} 3\n", "UP 3 + P 3\n"))
        subprocess.run(["git", "-C", str(tree), "add", "--", n], check=True)
    ok(series, "continue")
    assert all("P 10" in (tree / n).read_text() for n in NAMES)
    ok(series, "export")
    assert "UP 3 + P 3" in (series / "patches" / patches[0].name).read_text()
    checkout.commit("series on the new base")

    report = json.loads(run(series, "report", "--format", "json", want=1).stdout)  # to review
    named = _paths(report)
    assert set(NAMES) <= named and not any("\\" in p or p.endswith("\t") for p in named)
    text = run(series, "report", want=1).stdout
    assert all(n in text for n in NAMES) and "\\303" not in text
