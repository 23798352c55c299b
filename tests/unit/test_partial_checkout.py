"""A work tree whose ``read-tree -u`` was killed mid-way (the CI kill trial
``test_random_kill[15-apply-SIGINT-1.45s]``: apply interrupted while moving the tree to the tip,
then rerun): git had written some of the files the tip adds, and not the index that tracks them.
The same move must then go through, writing those files whole, while an untracked file that is
the person's (other content, or a path the move does not add) stops it or is left alone, as git
would. The killed state is built here exactly as git leaves it: files on disk, index and HEAD
still at the old commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebasectl.git import Worktree
from rebasectl.infra.errors import GitError
from tests.harness.git import Repo

BIG = "".join(f"line {i}\n" for i in range(400))


def _two_commits(path: Path) -> tuple[Repo, str, str]:
    repo = Repo(path)
    old = repo.commit("old", {"a.py": "a\n"})
    new = repo.commit("new", {"a.py": "a\nb\n", "pkg/x.py": BIG, "y.py": "y\n"})
    repo.git("checkout", "-q", "--detach", old)
    return repo, old, new


def test_files_a_killed_move_wrote_are_written_whole(tmp_path: Path) -> None:
    repo, old, new = _two_commits(tmp_path / "r")
    (tmp_path / "r/pkg").mkdir()
    (tmp_path / "r/pkg/x.py").write_text(BIG[: len(BIG) // 3])  # the write cut short
    (tmp_path / "r/y.py").write_text("y\n")  # written whole
    (tmp_path / "r/notes.md").write_text("mine\n")  # the person's
    Worktree(tmp_path / "r").move_to(new)
    assert repo.git("rev-parse", "HEAD") == new
    assert (tmp_path / "r/pkg/x.py").read_text() == BIG
    assert repo.git("status", "--porcelain", "--untracked-files=all") == "?? notes.md"
    assert (tmp_path / "r/notes.md").read_text() == "mine\n"


def test_an_untracked_file_of_the_persons_still_stops_the_move(tmp_path: Path) -> None:
    repo, old, new = _two_commits(tmp_path / "r")
    (tmp_path / "r/y.py").write_text("my own y\n")
    with pytest.raises(GitError, match="y.py"):
        Worktree(tmp_path / "r").move_to(new)
    assert (tmp_path / "r/y.py").read_text() == "my own y\n"
    assert repo.git("rev-parse", "HEAD") == old
