"""A file the base's tree lists whose blob cannot be read is an error naming it, never a file
read as absent (hostile9 F4: a stop was saved without its conflict, and continue committed the
patch without that file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebasectl.engine.materialize import Materializer
from rebasectl.git import Repo as GitRepo
from rebasectl.infra.errors import GitError
from rebasectl.model.ids import Oid
from rebasectl.model.patches import parse
from rebasectl.model.series import PatchEntry
from rebasectl.model.series_patch import SeriesPatch
from tests.harness.git import Repo, git, lines

A = lines(20, "a")


def test_a_listed_blob_that_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": A, "b.txt": "b\n"})
    up.commit("fix: one", {"a.txt": A.replace("a 3\n", "P 3\n")})
    data = up.git("format-patch", "--full-index", "--stdout", "-1").encode() + b"\n"
    patch = parse(data, "1.patch")
    blob = git(up.path, "rev-parse", f"{base}:a.txt").stdout.strip()
    (up.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()  # the base's a.txt is gone

    with pytest.raises(GitError, match=f"a.txt: its blob {blob} is not in"):
        Materializer(GitRepo(up.path)).run(Oid(base), [SeriesPatch(
            PatchEntry("one", "1.patch", patch.subject), patch)])
