"""On the real Megatron-LM mirror: import a range of upstream commits as a series, apply it, and
get the tip's tree back exactly; then the committed miles series applies exactly on 1dcf0da and
re-exports byte-identically. Skips without REBASECTL_MEGATRON_MIRROR."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.cli import run as rebasectl
from tests.june import copy_series

REPO = Path(__file__).resolve().parents[2]
BASE = "1dcf0dafa884ad52ffb243625717a3471643e087"


def _tree(repo: Path, rev: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "rev-parse", f"{rev}^{{tree}}"], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_import_then_apply_reproduces_the_tip_tree(mirror_path: Path, tmp_path: Path) -> None:
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{BASE}~25..{BASE}", "--repo", str(mirror_path))
    assert r.returncode == 0, r.stderr
    assert len(list((series / "patches").glob("*.patch"))) >= 20
    r = rebasectl(series, "apply", "--upstream", str(mirror_path))
    assert r.returncode == 0, r.stderr
    assert _tree(series / ".rebasectl" / "tree", "HEAD") == _tree(mirror_path, BASE)
    before = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    r = rebasectl(series, "export")
    assert r.returncode == 0, r.stderr
    assert {p.name: p.read_bytes() for p in (series / "patches").iterdir()} == before


def test_the_miles_series_applies_exactly_and_is_canonical(mirror_path: Path,
                                                            tmp_path: Path) -> None:
    series = copy_series(tmp_path / "miles", REPO)
    r = rebasectl(series, "check", "--apply", "--json", "--upstream", str(mirror_path))
    assert r.returncode == 0, r.stderr
    assert '"applies": true' in r.stdout and '"problems": []' in r.stdout
