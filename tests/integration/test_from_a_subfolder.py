"""Commands run from a subfolder of the checkout. Every stop says "resolve in
<checkout>/.rebasectl/tree: ... then `rebasectl continue`"; a person who does that from inside the
tree got 'rebasectl: error: no apply in progress (start one with `rebasectl apply`)' (exit 2), and
``status`` there 'series.yaml: not found in .../.rebasectl/tree (run `rebasectl import` to create
one)': advice that, followed, starts over or makes a second series inside the Megatron tree. Now
the checkout is found above the folder, as git finds its repository; paths given on the command
line stay relative to where the command was started; import, which creates a series, does not
look above."""

from __future__ import annotations

from pathlib import Path

from tests.harness.cli import fails, ok, run
from tests.harness.git import git
from tests.harness.scenes import World, conflicted, resolve_a, tree


def test_continue_from_inside_the_work_tree(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    assert "apply in progress" in ok(tree(series), "status").stdout
    resolve_a(series)
    ok(tree(series), "continue")
    assert "apply in progress" not in ok(series, "status").stdout
    assert git(tree(series), "status", "--porcelain").stdout == ""


def test_paths_stay_relative_to_the_folder_started_in(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    sub = series / "notes"
    sub.mkdir()
    run(sub, "abort", want=0)
    out = sub / "report.md"
    ok(sub, "report", "--old-series", "..", "--new-series", "..", "-o", "report.md")
    assert out.is_file() and not (series / "report.md").exists()


def test_import_makes_its_series_where_it_is_started(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    fresh = series / "sub"
    fresh.mkdir()
    before = (series / "series.yaml").read_bytes()
    fails(fresh, 2, "import", "nope..nope2")
    assert (series / "series.yaml").read_bytes() == before
