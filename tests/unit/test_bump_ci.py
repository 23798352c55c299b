"""The ci/ scripts run locally exactly as in Actions: bump.sh on a conflicting and on a clean
upstream (exit codes, GITHUB_OUTPUT, the PR body, and conflict lines that the problem matcher
turns into file:line annotations pointing at the failing hunk), pr-check.sh on a canonical and on
a hand-edited series (the workflows and the GitHub side: tests/unit/test_ci_jobs.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.harness.git import lines
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import conflicted_history, imported

CI = Path(__file__).resolve().parents[2] / "ci"


def run_script(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "REBASECTL": f"{sys.executable} -m rebasectl", **env}
    return subprocess.run(["bash", str(CI / name), *args], capture_output=True, text=True,
                          env=full, timeout=300, check=False)


def matcher() -> re.Pattern[str]:
    data = json.loads((CI / "problem-matchers" / "rebasectl.json").read_text())
    pattern = data["problemMatcher"][0]["pattern"][0]
    assert (pattern["file"], pattern["line"], pattern["message"]) == (1, 2, 3)
    return re.compile(pattern["regexp"])


def test_bump_sh_conflicts_annotate_the_failing_hunk(tmp_path: Path) -> None:
    fork, series, commits = conflicted_history(tmp_path)
    out = tmp_path / "gh-output"
    r = run_script("bump.sh", "main", env={
        "REBASECTL_DIR": str(series), "REBASECTL_UPSTREAM": str(fork.up.path),
        "ARTIFACTS": str(tmp_path / "art"), "GITHUB_OUTPUT": str(out)})
    assert r.returncode == 1, r.stderr
    assert "result=conflicts" in out.read_text() and "exit=1" in out.read_text()
    hits = [m for m in map(matcher().match, r.stderr.splitlines()) if m]
    assert {m.group(1) for m in hits} == {"patches/0001-one.patch",
                                          "patches/0003-two-on-top-of-one.patch"}
    for m in hits:
        text = (series / m.group(1)).read_text().split("\n")
        assert text[int(m.group(2)) - 1].startswith("@@ "), m.group(0)
        # patch one is broken by upstream's culprit; two is blocked by one (not by upstream)
        why = commits["culprit"][:12] if "0001" in m.group(1) else "earlier patch one"
        assert why in m.group(3), m.group(0)
    assert "Reproduce locally" in r.stdout  # README.md printed to the log
    assert json.loads((tmp_path / "art" / "rebasectl" / "bump.json").read_text())["result"] \
        == "conflicts"


def test_bump_sh_clean_writes_the_pr_body(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp_path, fork, shas[-1])
    fork.change("far away", {"a.txt": ("line 28\n", "line 28 x\n")})
    out = tmp_path / "gh-output"
    r = run_script("bump.sh", "main", env={
        "REBASECTL_DIR": str(series), "REBASECTL_UPSTREAM": str(fork.up.path),
        "ARTIFACTS": str(tmp_path / "art"), "GITHUB_OUTPUT": str(out)})
    assert r.returncode == 0, r.stderr
    assert f"result=clean\nto={fork.up.head()}\n" in out.read_text()
    body = (tmp_path / "art" / "pr-body.md").read_text()
    assert body == (tmp_path / "art" / "rebasectl" / "report.md").read_text() and body.strip()
    # a second run in the same folder: rebasectl's folder is its own, the script's files beside
    fork.change("further away", {"a.txt": ("line 29\n", "line 29 y\n")})
    r = run_script("bump.sh", "main", env={
        "REBASECTL_DIR": str(series), "REBASECTL_UPSTREAM": str(fork.up.path),
        "ARTIFACTS": str(tmp_path / "art"), "GITHUB_OUTPUT": str(out)})
    assert r.returncode == 0, r.stderr


def test_pr_check_sh(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp_path, fork, shas[-1])
    env = {"REBASECTL_DIR": str(series), "REBASECTL_UPSTREAM": str(fork.up.path)}
    r = run_script("pr-check.sh", env=env)
    assert r.returncode == 0, r.stderr
    assert "re-exports byte-identically" in r.stdout
    patch = series / "patches" / "0001-one.patch"
    patch.write_text(patch.read_text().replace("Subject: fix: one", "Subject:  fix: one"))
    r = run_script("pr-check.sh", env=env)
    assert r.returncode == 1
