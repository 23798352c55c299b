"""``.rebasectl`` on another file system than the checkout (a symlink to another mount, a
mounted volume): export stages its files under ``.rebasectl/txn`` and moves them into patches/
and series.yaml, which a rename cannot do across file systems. The move copies then, and an
export interrupted there (or left by an older rebasectl) is finished by the next command."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.cli import run as rebasectl
from tests.harness.git import git_out as git
from tests.sfix import Scenario, copy

ELSEWHERE = [Path("/dev/shm"), Path(tempfile.gettempdir()), Path("/var/tmp")]


@pytest.fixture
def elsewhere(tmp_path: Path) -> Iterator[Path]:
    """A folder on another file system than tmp_path: a tmpfs (/dev/shm) when the tests' tmp
    is on disk, the disk's tmp when the tests' tmp is in memory (tests/conftest.py)."""
    here = os.stat(tmp_path).st_dev
    found = [d for d in ELSEWHERE if d.is_dir() and os.access(d, os.W_OK)
             and os.stat(d).st_dev != here]
    if not found:
        pytest.skip("no writable folder on another file system than the tests' tmp")
    where = Path(tempfile.mkdtemp(prefix="rebasectl-otherfs-", dir=found[0]))
    yield where
    shutil.rmtree(where, ignore_errors=True)


def run(series: Path, *args: str, want: int = 0, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    r = rebasectl(series, *args, env=env, timeout=300)
    assert r.returncode == want, (args, r.returncode, r.stdout, r.stderr)
    return r


def _state_elsewhere(sc: Scenario, tmp_path: Path, elsewhere: Path) -> Path:
    series = copy(sc, tmp_path)
    shutil.rmtree(series / ".rebasectl", ignore_errors=True)  # import's stats cache
    os.symlink(elsewhere, series / ".rebasectl")
    run(series, "apply", "--upstream", str(sc.up.path))
    tree = series / ".rebasectl" / "tree"
    (tree / "a.txt").write_text((tree / "a.txt").read_text().replace("a 7\n", "EDIT 7\n"))
    git(tree, "commit", "-q", "-a", "--amend", "--no-edit")
    return series


def test_export_with_state_on_another_filesystem(sc: Scenario, tmp_path: Path,
                                                 elsewhere: Path) -> None:
    """Finding 8: export failed after writing its journal (cross-device rename), and from then
    on every command failed the same way until .rebasectl/txn was deleted by hand."""
    series = _state_elsewhere(sc, tmp_path, elsewhere)
    run(series, "export")
    assert any("EDIT 7" in p.read_text() for p in (series / "patches").iterdir())
    assert not (elsewhere / "txn").exists()
    run(series, "status")
    assert "0 files changed" in run(series, "export").stdout


def test_an_export_killed_while_moving_is_finished(sc: Scenario, tmp_path: Path,
                                                   elsewhere: Path) -> None:
    """Killed between two moves (journal written, staged files on the other file system): the
    next command rolls the export forward, and the series is the exported one."""
    series = _state_elsewhere(sc, tmp_path, elsewhere)
    r = rebasectl(series, "export", env={"REBASECTL_FAULT": "kill@txn-move:1"})
    assert r.returncode == -9, (r.returncode, r.stderr)
    assert (elsewhere / "txn" / "journal.json").exists()
    run(series, "status")
    assert not (elsewhere / "txn").exists()
    assert any("EDIT 7" in p.read_text() for p in (series / "patches").iterdir())
    assert "0 files changed" in run(series, "export").stdout
