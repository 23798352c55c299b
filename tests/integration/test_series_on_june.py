"""The series on the next upstream: carried onto 3346fa8a2 with the kept resolutions (the
``june_carried`` fixture, tests/june.py), every patch either committed or skipped for the reason
its ``skip`` file gives; the export is stable (a second apply of the exported series on June is
clean); and the carried tree is a Megatron tree the regression suite can run on."""

from __future__ import annotations

import subprocess
from pathlib import Path

from rebasectl.model.series import load
from tests.harness.cli import run as rebasectl
from tests.june import JUNE, RESOLUTIONS, Carried, carry, copy_series, stopped_at


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True,
                          text=True).stdout


def test_every_patch_is_carried_or_skipped_for_a_reason(june_carried: Carried) -> None:
    ids = [e.id for e in load(june_carried.series).patches]
    subjects = _git(june_carried.tree, "log", "--format=%s", f"{JUNE}..HEAD").splitlines()
    assert len(subjects) + len(june_carried.skipped) == len(ids)
    for pid, why in june_carried.skipped.items():
        assert (RESOLUTIONS / pid / "skip").is_file() and len(why) > 40, pid
    # every kept resolution is used: one that no longer stops is stale
    kept = {p.name for p in RESOLUTIONS.iterdir() if p.is_dir()}
    assert kept == set(june_carried.resolved) | set(june_carried.skipped)
    assert f"base: {JUNE}" in (june_carried.series / "series.yaml").read_text()
    assert (june_carried.tree / "megatron" / "core" / "__init__.py").is_file()


def test_all_nine_patches_are_carried(june_carried: Carried) -> None:
    """Issue 24's acceptance needs the whole series on June: no patch left out by a ``skip``
    (mla-rope-triton was, until its fix was ported to upstream's rewritten q kernels)."""
    assert june_carried.skipped == {}
    subjects = _git(june_carried.tree, "log", "--format=%s", f"{JUNE}..HEAD").splitlines()
    assert len(subjects) == len(load(june_carried.series).patches) == 9


def test_the_carried_series_applies_clean_on_june(june_carried: Carried, tmp_path: Path,
                                                  mirror_path: Path) -> None:
    """What export wrote is a series on June: applying it again stops nowhere."""
    again = copy_series(tmp_path / "again", june_carried.series)
    out = carry(again, mirror_path, export=False)
    assert not out.resolved and set(out.skipped) == set(june_carried.skipped)
    if not out.skipped:
        assert stopped_at("\n".join(out.log)) is None
        r = rebasectl(again, "check", "--apply", timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
