"""``git worktree prune`` runs only when a registration may be stale (every command repairs the
mirror's work trees, and most find nothing to prune): a work tree deleted by hand, or a
registration git could not read, is still pruned, so ``worktree add`` at the same place works."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from rebasectl.git import Repo as Door
from rebasectl.git.worktree import _may_need_pruning
from tests.harness.git import Repo


def _mirror(tmp: Path) -> tuple[Path, str]:
    src = Repo(tmp / "src")
    sha = src.commit("one", {"a.txt": "a\n"})
    bare = tmp / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src.path), str(bare)], check=True)
    return bare, sha


def _registered(bare: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(bare), "worktree", "list", "--porcelain"],
                         capture_output=True, text=True, check=True).stdout
    return [ln[9:] for ln in out.splitlines() if ln.startswith("worktree ")][1:]


def test_prune_only_when_a_tree_is_gone(tmp_path: Path) -> None:
    bare, sha = _mirror(tmp_path)
    door = Door(bare)
    assert not _may_need_pruning(bare)  # no work tree at all
    door.add_worktree(tmp_path / "t1", sha)
    door.add_worktree(tmp_path / "t2", sha)
    assert not _may_need_pruning(bare)
    shutil.rmtree(tmp_path / "t1")
    assert _may_need_pruning(bare)
    door.prune_worktrees()
    assert _registered(bare) == [str(tmp_path / "t2")]
    assert not _may_need_pruning(bare)
    door.add_worktree(tmp_path / "t2b", sha)
    shutil.rmtree(tmp_path / "t2b")
    door.add_worktree(tmp_path / "t2b", sha)  # the stale registration pruned first
    assert (tmp_path / "t2b" / "a.txt").read_text() == "a\n"


def test_an_unreadable_registration_leaves_it_to_git(tmp_path: Path) -> None:
    bare, sha = _mirror(tmp_path)
    Door(bare).add_worktree(tmp_path / "t", sha)
    (entry,) = (bare / "worktrees").iterdir()
    (entry / "gitdir").unlink()
    assert _may_need_pruning(bare)
    (entry / "gitdir").write_text("../relative/.git\n")
    assert _may_need_pruning(bare)
    assert _may_need_pruning(tmp_path / "t")  # not a bare repository: git decides
