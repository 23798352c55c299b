"""What the git door reads of a work tree from git's own files instead of asking a process
(several times per command), always agreeing with git: ``git worktree prune`` runs only when a
registration may be stale (a work tree deleted by hand, or a registration it cannot read, is
still pruned, so ``worktree add`` at the same place works); a tree's git dir and its HEAD are
what ``rev-parse`` says, detached, on a branch the person made, or moved by git itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from rebasectl.git import Repo as Door
from rebasectl.git import Worktree
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


def _rev_parse(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", *args], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_head_and_git_dir_agree_with_git(tmp_path: Path) -> None:
    bare, sha = _mirror(tmp_path)
    door = Door(bare)
    tree = door.add_worktree(tmp_path / "t", sha)
    assert tree.head() == _rev_parse(tree.path, "HEAD") == sha  # detached, from the file
    assert tree.git_dir() == Path(_rev_parse(tree.path, "--absolute-git-dir"))
    (tree.path / "b.txt").write_text("b\n")
    subprocess.run(["git", "-C", str(tree.path), "switch", "-q", "-c", "mine"], check=True)
    subprocess.run(["git", "-C", str(tree.path), "add", "b.txt"], check=True)
    subprocess.run(["git", "-C", str(tree.path), "-c", "user.name=t", "-c", "user.email=t@e",
                    "commit", "-q", "-m", "mine"], check=True)
    assert tree.head() == _rev_parse(tree.path, "HEAD") != sha  # on a branch: git resolves it
    subprocess.run(["git", "-C", str(tree.path), "checkout", "-q", "--detach", sha], check=True)
    assert tree.head() == sha
    plain = Repo(tmp_path / "plain")  # a .git directory, not a linked tree
    top = plain.commit("one", {"x.txt": "x\n"})
    assert Worktree(plain.path).head() == top
    assert Worktree(plain.path).git_dir() == Path(_rev_parse(plain.path, "--absolute-git-dir"))


def test_a_link_git_would_not_read_is_left_to_git(tmp_path: Path) -> None:
    """A `.git` link with spaces after the path: git strips only the line end and finds no
    repository, so the door must not read a HEAD there either (hostile9 F13)."""
    bare, sha = _mirror(tmp_path)
    tree = Door(bare).add_worktree(tmp_path / "t", sha)
    admin = tree.git_dir()
    (tree.path / ".git").write_text(f"gitdir: {admin}   \n")
    assert tree.git_dir_if_linked() is None and tree.head() is None
    (tree.path / ".git").write_text(f"gitdir: {admin}\r\n")
    assert tree.git_dir_if_linked() == admin and tree.head() == sha
