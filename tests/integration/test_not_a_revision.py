"""``bump --to``/``apply --base``/``blame --from`` given text that cannot name one commit (a range
``A..B``, an empty string, an option-like ``-x``) answered '... not found in the upstream mirror:
run `rebasectl fetch --upstream URL|PATH`': advice that, followed, changes nothing. Now one line,
exit 2, saying it is not a revision, with no fetch advice; a well-formed missing sha still gets
it. (``blame --from ''`` means the series' base, as no ``--from`` does.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.harness.cli import fails
from tests.harness.scenes import World, applied


@pytest.mark.parametrize("rev", ["a..b", "", "-x", " main"])
def test_not_a_revision(world: World, tmp_path: Path, rev: str) -> None:
    series = applied(world, tmp_path)
    first = yaml.safe_load((series / "series.yaml").read_text())["patches"][0]["id"]
    blame = [("blame", first, "--from", rev, "--to", "main")] if rev else []
    for args in [("bump", "--to", rev), *blame]:
        err = fails(series, 2, *args)
        assert "is not a revision" in err and "fetch" not in err, err


def test_a_missing_commit_still_names_fetch(world: World, tmp_path: Path) -> None:
    series = applied(world, tmp_path)
    err = fails(series, 2, "bump", "--to", "0123456789abcdef0123")
    assert "not found in the upstream mirror" in err and "fetch" in err, err
