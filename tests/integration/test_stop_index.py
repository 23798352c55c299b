"""At a stop, the work tree holds what git's own 3-way apply leaves: the stopped patch's paths
in the work tree's index carry the same stages (conflict: base, ours, theirs; a file merged
cleanly, added or removed: its one entry or none) as ``git apply -3 --index`` of the patch file
on the same tip, and the files merged without a conflict have the same bytes. (The stop installs
the stages the materialiser's merge left, rather than merging a second time.)"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.harness.cli import run
from tests.harness.git import Repo, git, lines

A, B = lines(40, "a"), lines(40, "b")
PATHS = ["a.txt", "b.txt", "d.txt", "n.txt"]


def _stages(tree: Path) -> list[str]:
    return sorted(git(tree, "ls-files", "-s", "--", *PATHS).stdout.splitlines())


def test_a_stop_leaves_the_index_git_apply_3_leaves(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": A, "b.txt": B, "d.txt": "gone soon\n"})
    up.branch("feature")
    up.commit("upstream", {"a.txt": A.replace("a 3\n", "UP 3\n"),
                           "b.txt": B.replace("b 1\n", "UP b 1\n")})
    tip = up.head()
    up.checkout("feature")
    up.commit("fix: everything at once", {"a.txt": A.replace("a 3\n", "P 3\n"),
                                          "b.txt": B.replace("b 30\n", "P b 30\n"),
                                          "n.txt": "new\n", "d.txt": None})
    up.checkout("main")
    series = tmp_path / "series"
    series.mkdir()
    assert run(series, "import", f"{base}..feature", "--repo", str(up.path)).returncode == 0
    r = run(series, "apply", "--base", tip, "--upstream", str(up.path))
    assert r.returncode == 1, r.stderr
    tree = series / ".rebasectl" / "tree"
    (patch,) = (series / "patches").iterdir()
    ref = tmp_path / "ref"
    git(up.path, "worktree", "add", "-q", "--detach", str(ref), tip)
    git(ref, "apply", "-3", "--index", str(patch), check=False)
    assert _stages(tree) == _stages(ref)
    assert sorted(ln.split()[2] for ln in _stages(tree) if ln.endswith("a.txt")) == ["1", "2", "3"]
    for path in ("b.txt", "n.txt"):
        assert (tree / path).read_bytes() == (ref / path).read_bytes()
    assert not (tree / "d.txt").exists() and not (ref / "d.txt").exists()
    shutil.rmtree(ref)
