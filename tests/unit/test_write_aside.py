"""``Repo.write_aside``: a repository the tool reads but does not own (``report --repo``, the
shared read-only mirror, the user's checkout) keeps its object store as it was, while every git
the Repo starts (and its object reader) sees what it wrote; the folder goes with the Repo."""

from __future__ import annotations

import gc
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from rebasectl.git import Entry
from rebasectl.git import Repo as GitRepo
from tests.harness.git import Repo, git


@pytest.mark.parametrize("name", ["up", "a:b", 'quote"back\\slash'])
def test_objects_written_aside_are_read_here_and_never_land_in_the_repository(
        tmp_path: Path, name: str) -> None:
    """Also where the repository's path holds what an environment variable of paths would
    split (':', hostile11 #6) or what an alternates line must quote."""
    up = Repo(tmp_path / name / "up")
    base = up.commit("base", {"a.txt": "a\n"})
    repo = GitRepo.open(up.path)
    repo.write_aside()
    aside = Path(repo.runner.extra["GIT_OBJECT_DIRECTORY"])
    blob = repo.hash_blob(b"written aside\n")
    with repo.index() as index:  # the base's tree plus that blob, written aside too
        index.set_entries({**repo.tree_entries(base), "b.txt": Entry("100644", blob)})
        tree = index.write_tree()

    assert repo.objects.blob(blob) == b"written aside\n"
    assert repo.runner.ok(["cat-file", "-e", tree])
    for sha in (blob, tree):
        assert git(up.path, "cat-file", "-e", sha, check=False).returncode != 0
    assert aside.is_dir() and any(aside.rglob("*"))
    del repo, index
    gc.collect()
    assert not aside.exists()


def test_folders_left_by_processes_that_are_gone_are_swept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hostile11 #10: a SIGTERM or kill ends a report before its folder is removed; the next
    write_aside removes the day-old folders of this user's processes that are gone, never a live
    one's, nor a recent one whose pid may live in another pid namespace (hostile12 #5)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f"rebasectl-objects-{gone}-abc"
    live = tmp_path / f"rebasectl-objects-{os.getpid()}-def"
    other = tmp_path / "rebasectl-objects-x-ghi"  # not one of ours: no pid
    young = tmp_path / f"rebasectl-objects-{gone}-young"  # maybe another pid namespace's
    day_ago = time.time() - 2 * 24 * 3600
    for folder in (stale, live, other, young):
        (folder / "pack").mkdir(parents=True)
        if folder is not young:
            os.utime(folder, (day_ago, day_ago))
    up = Repo(tmp_path / "up")
    up.commit("base", {"a.txt": "a\n"})
    repo = GitRepo.open(up.path)
    repo.write_aside()
    assert not stale.exists() and live.is_dir() and other.is_dir() and young.is_dir()
    assert Path(repo.runner.extra["GIT_OBJECT_DIRECTORY"]).parent == tmp_path


def test_a_repository_whose_path_ends_in_a_space_is_found(tmp_path: Path) -> None:
    """hostile12: a path git printed was stripped of its trailing space (`rev-parse
    --absolute-git-dir`), and a range report on such a repository said "not a git repository"."""
    up = Repo(tmp_path / "up ")
    up.commit("base", {"a.txt": "a\n"})
    bare = tmp_path / "rep.git "
    git(tmp_path, "clone", "-q", "--bare", str(up.path), str(bare))
    assert GitRepo.open(up.path).git_dir() == up.path / ".git"
    assert GitRepo.open(bare).git_dir() == bare
    repo = GitRepo.open(bare)
    repo.write_aside()
    blob = repo.hash_blob(b"aside\n")
    assert repo.objects.blob(blob) == b"aside\n"
