"""``rebasectl resolve --accept`` when the stopped patch has regions no rule proposes for: its
advice names the paths still open instead of a bare 'then `rebasectl continue`' that continue
refuses (found on our series at 3346fa8a2: accept --all took 2 of partial-ckpt-load's 6 regions
and said 'then `rebasectl continue`'; continue answered 'still unresolved: 3 paths')."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.cli import fails, ok, run
from tests.harness.git import Repo

SIG = "def build(\n    a: int = 0,\n    b: int = 0,\n) -> int:\n    return a + b\n"


def fork(tmp: Path) -> tuple[Path, Path, str]:
    """One patch: a parameter appended in mod.py (upstream appends its own there: both-insert)
    and x = 2 in other.py (upstream makes it x = 3: no proposal)."""
    up = Repo(tmp / "up")
    base = up.commit("base", {"mod.py": SIG, "other.py": "x = 1\n"})
    up.git("checkout", "-q", "-b", "fork")
    tip = up.commit("parameter c", {
        "mod.py": SIG.replace("    b: int = 0,\n", "    b: int = 0,\n    c: int = 0,\n"),
        "other.py": "x = 2\n"})
    up.checkout("main")
    new = up.commit("upstream", {
        "mod.py": SIG.replace("    b: int = 0,\n", "    b: int = 0,\n    e: int = 0,\n"),
        "other.py": "x = 3\n"})
    series = Repo(tmp / "series")
    series.commit("init", allow_empty=True)
    ok(series.path, "import", f"{base}..{tip}", "--repo", str(up.path))
    series.commit("series")
    return series.path, up.path, new


def test_accept_names_what_is_still_open(tmp_path: Path) -> None:
    series, up, new = fork(tmp_path)
    run(series, "apply", "--base", new, "--upstream", str(up), want=1)
    r = ok(series, "resolve", "--accept", "--all", "--json")
    board = json.loads(r.stdout)
    assert [p["state"] for p in board["proposals"]] == ["accepted"]
    assert board["unresolved"] == ["other.py"]
    r = ok(series, "resolve", "--list")
    last = r.stdout.strip().splitlines()[-1]
    assert "other.py" in last and "git add" in last, r.stdout
    # the advice is true: continue refuses until other.py is resolved
    assert "other.py" in fails(series, 1, "continue")
    (series / ".rebasectl" / "tree" / "other.py").write_text("x = 3\n")
    Repo.existing(series / ".rebasectl" / "tree").git("add", "other.py")
    r = ok(series, "resolve", "--list", "--json")
    assert json.loads(r.stdout)["unresolved"] == []
    assert ok(series, "resolve").stdout.strip().splitlines()[-1] == "then `rebasectl continue`"
    ok(series, "continue")
