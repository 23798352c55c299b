"""The bump's artifacts folder: only a folder rebasectl made is ever emptied, a user's folder is
refused, and an unusable one is refused before the series moves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.cli import run
from tests.harness.git import lines
from tests.harness.scenes import (
    World,
)
from tests.sfix import copy, snapshot

ROOT = Path(__file__).resolve().parents[2]
JUNE = "3346fa8a2"
A = lines(40, "a")


def test_forged_artifacts_mark_deletes_nothing_outside(world: World, tmp_path: Path) -> None:
    """A `.rebasectl-artifacts.json` (a folder downloaded from CI, a tampered default
    `.rebasectl/bump`) that lists an absolute path or `../..` makes a bump delete nothing, and
    remove no folder, outside the artifacts folder."""
    series = copy(world.sc, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    vdir = tmp_path / "victimdir"
    vdir.mkdir()
    (vdir / "f.txt").write_text("precious\n")
    art = series / "art"
    art.mkdir()
    (art / ".rebasectl-artifacts.json").write_text(
        json.dumps({"tool": "rebasectl", "files": [str(victim), "../../victimdir/f.txt"]})
    )
    run(series, "bump", "--to", world.sc.new_base, "--artifacts", "art")
    assert victim.read_text() == "precious\n"
    assert (vdir / "f.txt").read_text() == "precious\n"


def test_clean_bump_never_fails_after_moving_the_series(world: World, tmp_path: Path) -> None:
    """An artifacts folder of an earlier (conflicting) bump in which the user saved a report.md:
    a clean bump into it keeps the user's report.md, and if it fails, it has not moved the
    series (a failed command leaves the series as it was)."""
    series = copy(world.sc, tmp_path)
    run(series, "bump", "--to", world.sc.new_base, "--artifacts", "art", want=1)
    (series / "art" / "report.md").write_text("my notes\n")
    before = snapshot(series)
    r = run(series, "bump", "--to", world.clean, "--artifacts", "art")
    assert (series / "art" / "report.md").read_text() == "my notes\n"
    if r.returncode != 0:
        assert snapshot(series) == before, f"exit {r.returncode} but the series changed: {r.stderr}"


@pytest.mark.parametrize("where", ["art", "."])
def test_artifacts_never_in_a_users_folder(world: World, tmp_path: Path, where: str) -> None:
    """--artifacts at a folder with the user's README.md and conflicts/keep.txt (or `.`):
    refused, nothing touched."""
    series = copy(world.sc, tmp_path)
    folder = series / where
    (folder / "conflicts").mkdir(parents=True)
    (folder / "README.md").write_text("mine\n")
    (folder / "conflicts" / "keep.txt").write_text("keep\n")
    before = snapshot(series)
    r = run(series, "bump", "--to", world.sc.new_base, "--artifacts", where, want=2)
    assert "rebasectl did not write" in r.stderr
    assert (folder / "README.md").read_text() == "mine\n"
    assert (folder / "conflicts" / "keep.txt").read_text() == "keep\n"
    assert snapshot(series) == before


def test_unusable_artifacts_refused_before_the_series_moves(
    world: World, tmp_path: Path
) -> None:
    """A clean bump whose --artifacts cannot be created fails before it changes the series."""
    series = copy(world.sc, tmp_path)
    before = snapshot(series)
    run(series, "bump", "--to", world.clean, "--artifacts", "series.yaml/out", want=2)
    assert snapshot(series) == before
