"""``Repo.write_aside``: a repository the tool reads but does not own (``report --repo``, the
shared read-only mirror, the user's checkout) keeps its object store as it was, while every git
the Repo starts (and its object reader) sees what it wrote; the folder goes with the Repo."""

from __future__ import annotations

import gc
from pathlib import Path

from rebasectl.git import Entry
from rebasectl.git import Repo as GitRepo
from tests.harness.git import Repo, git


def test_objects_written_aside_are_read_here_and_never_land_in_the_repository(
        tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
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
