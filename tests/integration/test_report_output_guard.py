"""``rebasectl report -o`` onto the series itself: ``-o series.yaml`` replaced series.yaml (an
export not yet committed) with the markdown report, exit 0, and every later command ended
'series.yaml:3: YAML syntax error'; ``-o patches/x.md`` put a stray file among the patch files.
Now series.yaml, anything under patches/ and under .rebasectl/ is refused (exit 2, one line,
the file untouched) and any other path is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness.cli import ok, one_error, run
from tests.harness.git import Repo


@pytest.fixture
def checkout(tmp_path: Path) -> tuple[Path, list[str]]:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.py": "x = 1\ny = 2\n"})
    up.commit("fix: y", {"a.py": "x = 1\ny = 3\n"})
    series = Repo(tmp_path / "series")
    series.commit("init", allow_empty=True)
    ok(series.path, "import", f"{base}..HEAD", "--repo", str(up.path))
    series.commit("series")
    rng = f"{base}..{up.head()}"
    return series.path, ["report", "--repo", str(up.path), "--old-range", rng, "--new-range", rng]


@pytest.mark.parametrize("target", ["series.yaml", "patches/r.md", "patches",
                                    ".rebasectl/r.md", "./series.yaml"])
def test_report_never_written_over_the_series(checkout: tuple[Path, list[str]],
                                              target: str) -> None:
    series, args = checkout
    before = {p: p.read_bytes() for p in series.rglob("*") if p.is_file() and ".git" not in p.parts}
    r = run(series, *args, "-o", target, want=2)
    one_error(r.stderr, "-o")
    after = {p: p.read_bytes() for p in series.rglob("*") if p.is_file() and ".git" not in p.parts
             and ".rebasectl" not in p.parts}
    assert after == {p: b for p, b in before.items() if ".rebasectl" not in p.parts}
    ok(series, "check")


def test_report_written_elsewhere(checkout: tuple[Path, list[str]]) -> None:
    series, args = checkout
    (series / "out").mkdir()
    ok(series, *args, "-o", "out/report.md")
    assert (series / "out" / "report.md").read_text().startswith("# ")
