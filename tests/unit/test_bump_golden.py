"""Whole-output snapshot of a conflicting bump on the fixed synthetic scenario (tests/sfix.py):
the artifacts README a person reads first, the summary table on stdout and the
``patches/FILE:LINE:`` annotations CI turns into review comments. A change to what a bump says
shows up as a diff here. To accept one on purpose: ``REBASECTL_UPDATE_GOLDEN=1 pytest
tests/unit/test_bump_golden.py`` and review the diff of ``tests/golden/bump/`` like code.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import goldens
from tests.harness.cli import run as rebasectl
from tests.sfix import Scenario, copy, template_fixture

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "bump"


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    yield from template_fixture(tmp_path_factory, "bumpgolden")


def _stable(text: str, tmp: Path) -> str:
    """Paths of this run's tmp dir and the closing timing line made run-independent."""
    text = text.replace(str(tmp), "TMP")
    return re.sub(r"(?m)^rebasectl: bump to \S+: [\d.]+ s$", "rebasectl: bump to REV: T s", text)


def test_golden_conflicting_bump(sc: Scenario, tmp_path: Path) -> None:
    series = copy(sc, tmp_path)
    r = rebasectl(series, "bump", "--to", sc.new_base, "--artifacts", "out", "--annotations")
    assert r.returncode == 1, r.stderr
    outputs = {
        "README.md": _stable((series / "out" / "README.md").read_text(), tmp_path),
        "stdout.txt": _stable(r.stdout, tmp_path),
        "annotations.txt": "".join(ln + "\n" for ln in r.stderr.splitlines()
                                   if ln.startswith("patches/")),
    }
    goldens.check(GOLDEN, outputs)
    assert outputs["annotations.txt"], "a conflicting bump annotates its patch files"
