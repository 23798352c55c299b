"""Answers the git door keeps within one process are answers that cannot change: a full sha's
tree, and whether one full sha descends from another, until a fetch deepens a shallow history.
Each caller still gets its own copy, and a fetch forgets ancestry it said no to."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rebasectl.git import Repo as GitRepo
from tests.harness.git import Repo


def test_a_kept_tree_is_a_copy_per_caller(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    sha = up.commit("one", {"a.txt": "a\n", "b.txt": "b\n"})
    repo = GitRepo(up.path)
    first = repo.tree_entries(sha)
    first.pop("a.txt")  # a caller changing its answer changes nobody else's
    assert sorted(repo.tree_entries(sha)) == ["a.txt", "b.txt"]
    up.commit("two", {"c.txt": "c\n"})
    assert sorted(repo.tree_entries("HEAD")) == ["a.txt", "b.txt", "c.txt"]  # a name: asked
    assert sorted(repo.tree_entries(sha)) == ["a.txt", "b.txt"]


def test_a_fetch_forgets_ancestry_a_shallow_history_hid(tmp_path: Path) -> None:
    """In a shallow clone the cut-off commit's parent is unknown, so it is no ancestor; once a
    fetch deepens the history, the same question gets the true answer."""
    up = Repo(tmp_path / "up")
    old = up.commit("old", {"a.txt": "1\n"})
    up.commit("mid", {"a.txt": "2\n"})
    up.commit("new", {"a.txt": "3\n"})
    new = up.head()
    shallow = tmp_path / "shallow.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--depth", "1", f"file://{up.path}",
                    str(shallow)], check=True)
    subprocess.run(["git", "-C", str(shallow), "config", "remote.origin.url",
                    f"file://{up.path}"], check=True)
    repo = GitRepo(shallow)
    assert not repo.history.is_ancestor(old, new)  # `old` is not even there
    subprocess.run(["git", "-C", str(shallow), "fetch", "-q", "--unshallow", "origin",
                    "+refs/heads/*:refs/heads/*"], check=True)
    repo.fetch()  # (the deepening came from outside; a fetch of ours is what forgets)
    assert repo.history.is_ancestor(old, new)


def test_a_grep_of_a_commit_is_kept_in_the_mirror_and_a_cut_answer_is_asked_again(
        tmp_path: Path) -> None:
    """Which files of the stop's tip hold the conflict's lines (0.2-0.4 s of git grep on
    Megatron) is asked by every command that shows the stop: the mirror keeps the answer per
    full sha and set of lines. A kept answer is what the next process reads; one cut short is
    asked of git again; a name (which may move) is never kept."""
    up = Repo(tmp_path / "up")
    sha = up.commit("one", {"a.py": "x = 1\ny = 2\n", "b.py": "y = 2\n"})
    mirror = tmp_path / "mirror.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(up.path), str(mirror)], check=True)
    needles = ["y = 2", "z = 3"]
    assert GitRepo(mirror, upstream=True).history.files_holding(sha, needles) == {
        "y = 2": ["a.py", "b.py"], "z = 3": []}
    (kept,) = (mirror / "rebasectl-kept").iterdir()
    assert kept.name.startswith(f"grep-{sha}-")
    kept.write_bytes(f"{sha}:c.py\0z = 3\n".encode() + b"\0#end")  # an answer git would not give
    assert GitRepo(mirror, upstream=True).history.files_holding(sha, needles) == {
        "y = 2": [], "z = 3": ["c.py"]}
    kept.write_bytes(f"{sha}:c.py\0z = 3\n".encode())  # cut short: no end mark
    assert GitRepo(mirror, upstream=True).history.files_holding(sha, needles)["y = 2"] == [
        "a.py", "b.py"]
    assert GitRepo(mirror, upstream=True).history.files_holding("HEAD", needles)["y = 2"] == [
        "a.py", "b.py"]
    assert len(list((mirror / "rebasectl-kept").iterdir())) == 1


def test_a_hooks_object_directory_does_not_reach_the_object_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git sets GIT_OBJECT_DIRECTORY and alternates in hooks (a push's quarantine). The git
    runner scrubs them; the persistent reader (GitPython, which starts from os.environ) must
    not see them either, or the mirror's objects look missing (hostile9 F4: a stop written
    without its conflict, then committed without that file)."""
    up = Repo(tmp_path / "up")
    sha = up.commit("one", {"a.txt": "a\n"})
    empty = tmp_path / "empty-objects"
    empty.mkdir()
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(empty))
    monkeypatch.setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", str(empty))
    monkeypatch.setenv("GIT_COMMON_DIR", str(empty))  # hostile10 B8
    assert GitRepo(up.path).objects.blob(f"{sha}:a.txt") == b"a\n"
    assert GitRepo(up.path).commit(sha).subject == "one"
