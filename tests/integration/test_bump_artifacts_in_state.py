"""``bump --artifacts`` inside ``.rebasectl/`` (rebasectl's own state): ``--artifacts
.rebasectl/tree`` was taken (a new folder), the bump wrote README.md, bump.json and conflicts/
where the work tree lives, and every later ``apply`` and ``bump`` ended '.rebasectl/tree exists
and is not a rebasectl work tree; pick another --worktree or move it away' (bump has no
--worktree). Now such a folder is refused up front (exit 2, one line), and only the default
``.rebasectl/bump`` is taken inside the state."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.harness.cli import one_error, run
from tests.harness.scenes import World


@pytest.mark.parametrize("inside", [".rebasectl/tree", ".rebasectl/base-tree", ".rebasectl/x",
                                    ".rebasectl"])
def test_artifacts_inside_the_state_are_refused(world: World, tmp_path: Path,
                                                inside: str) -> None:
    series = tmp_path / "series"
    shutil.copytree(world.sc.series, series)
    r = run(series, "bump", "--to", world.sc.new_base, "--artifacts", inside, want=2)
    one_error(r.stderr, "--artifacts", ".rebasectl")
    assert not (series / ".rebasectl" / "tree").exists()
    assert not (series / ".rebasectl" / "x").exists()
    run(series, "apply", "--base", world.sc.new_base, want=1)  # the work tree's place is free
    run(series, "abort", want=0)
    run(series, "bump", "--to", world.sc.new_base, want=1)  # the default folder still works
    assert (series / ".rebasectl" / "bump" / "bump.json").is_file()
