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


def test_in_the_way_names_the_persons_untracked_files_not_the_moves(tmp_path: Path) -> None:
    """Before the move (hostile6 #4: git's raw refusal, exit 2): the person's y.py where the
    target adds one, and n.py where the next stop writes, are named; a killed move's cut-short
    x.py and an unrelated notes.md are not; nothing is touched."""
    repo, old, new = _two_commits(tmp_path / "r")
    root = tmp_path / "r"
    (root / "pkg").mkdir()
    (root / "pkg/x.py").write_text(BIG[:100])
    (root / "y.py").write_text("my own y\n")
    (root / "n.py").write_text("my n\n")
    (root / "notes.md").write_text("mine\n")
    found = Worktree(root).in_the_way(new, ["n.py"])
    assert sorted(found.untracked) == ["n.py", "y.py"] and found.changed == []
    assert (root / "y.py").read_text() == "my own y\n" and (root / "pkg/x.py").exists()
    (root / "y.py").unlink()
    (root / "n.py").unlink()
    assert not Worktree(root).in_the_way(new, ["n.py"])
    Worktree(root).move_to(new)
    assert (root / "pkg/x.py").read_text() == BIG and (root / "notes.md").read_text() == "mine\n"


# -- tracked files: what a killed move wrote vs the person's edits (Worktree.in_the_way) --------
def _three_files(path: Path) -> tuple[Repo, str, str]:
    repo = Repo(path)
    old = repo.commit("old", {"m.py": "m\n", "k.py": "k\n", "s.py": "s\n", "gone.py": "g\n"})
    repo.git("rm", "-q", "gone.py")
    new = repo.commit("new", {"m.py": "m\n" + BIG, "k.py": "k\n", "s.py": "s2\n"})
    repo.git("checkout", "-q", "--detach", old)
    return repo, old, new


def test_a_killed_moves_tracked_writes_are_put_back_and_edits_stop_it(tmp_path: Path) -> None:
    """m.py cut short on its way to the target's content and gone.py deleted by the move are
    the move's (put back, the move goes through); the person's edit of s.py (which the move
    changes) and of k.py (which the next stop writes) block it and stay as they are."""
    repo, old, new = _three_files(tmp_path / "r")
    root = tmp_path / "r"
    (root / "m.py").write_text(("m\n" + BIG)[:300])
    (root / "gone.py").unlink()
    (root / "s.py").write_text("s, mine\n")
    (root / "k.py").write_text("k, mine\n")
    tree = Worktree(root)
    assert sorted(tree.in_the_way(new, ["k.py"]).changed) == ["k.py", "s.py"]
    assert (root / "s.py").read_text() == "s, mine\n" and (root / "k.py").read_text() == "k, mine\n"
    assert (root / "m.py").read_text() == "m\n" and (root / "gone.py").read_text() == "g\n"
    repo.git("checkout", "-q", "--", "s.py")
    assert not tree.in_the_way(new, [])  # k.py: only the next stop writes it
    tree.move_to(new)
    assert (root / "m.py").read_text() == "m\n" + BIG and not (root / "gone.py").exists()
    assert (root / "k.py").read_text() == "k, mine\n"
    assert repo.git("rev-parse", "HEAD") == new


def test_a_staged_change_is_never_taken_for_the_moves(tmp_path: Path) -> None:
    """A staged change whose file holds the target's content is the person's (a killed move
    never writes the index): it blocks the move."""
    repo, old, new = _three_files(tmp_path / "r")
    (tmp_path / "r/s.py").write_text("s2\n")
    repo.git("add", "s.py")
    assert Worktree(tmp_path / "r").in_the_way(new, []).changed == ["s.py"]
    assert repo.git("diff", "--cached", "--name-only") == "s.py"
