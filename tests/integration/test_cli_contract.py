"""The command line's contract: bad input is exit 2 and one line, `--json` gives one JSON
document on every exit, a conflict on an ASCII terminal is still exit 1, relative paths are
taken from -C, and a failed fetch changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.harness.cli import one_error, run
from tests.harness.git import Repo, git, lines
from tests.harness.scenes import (
    World,
    applied,
    conflicted,
)
from tests.sfix import copy


def test_duplicate_file_spelled_dot_slash_is_refused_by_check(world: World, tmp_path: Path) -> None:
    """`file: ./0002-add-e.patch` on a second entry names a file already listed: `check` refuses it
    (exit 2, "twice") before anything applies it twice."""
    series = copy(world.sc, tmp_path)
    text = (series / "series.yaml").read_text()
    text = text.replace("file: 0003-touch-b.patch", "file: ./0002-add-e.patch")
    text = text.replace("title: 'compat: touch b'", "title: 'feat: add e'")
    (series / "series.yaml").write_text(text)
    r = run(series, "check")
    assert r.returncode == 2 and "twice" in r.stderr, (r.returncode, r.stdout, r.stderr)


def test_non_ascii_conflict_path_on_an_ascii_terminal_is_exit_1(tmp_path: Path) -> None:
    """A conflict in `ä.txt` with PYTHONIOENCODING=ascii: apply stops at the conflict with its state
    saved and exits 1 (a conflict), never 2 (which a script reads as "bad input, nothing done")."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"ä.txt": lines(10)})
    up.branch("feature")
    new = up.commit("upstream", {"ä.txt": lines(10).replace("line 3\n", "upstream\n")})
    up.checkout("feature")
    up.commit("change ä", {"ä.txt": lines(10).replace("line 3\n", "patch\n")})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    r = run(series, "apply", "--base", new, env={"PYTHONIOENCODING": "ascii"})
    assert (series / ".rebasectl" / "apply-state.json").exists()
    assert r.returncode == 1, r.stderr


def test_large_series_yaml_duplicate_is_found(world: World, tmp_path: Path) -> None:
    """A 4 MB series.yaml (read in several chunks) with 3,000 more entries after a duplicate
    file at line 53: `check` names the duplicate. Each added entry carries a long `why:` so the
    file is large in bytes without 30,000 entries of parse work; how long `check` takes on the
    30,000-entry file is measured by `python bench/budgets.py --only large-series-yaml`."""
    series = copy(world.sc, tmp_path)
    entry = (
        "- id: p{i}\n  file: 0001-change-a-line-3.patch\n  title: t\n  kind: fix\n"
        "  why: '{why}'\n  upstream: null\n  drop_when: null\n  absorbs: []\n  tests: []\n"
    )
    why = "a reason that goes on " * 60
    with (series / "series.yaml").open("a") as fh:
        fh.write("".join(entry.format(i=i, why=why) for i in range(3000)))
    assert (series / "series.yaml").stat().st_size > 4_000_000
    r = run(series, "check", want=2)
    assert r.stderr == (
        "rebasectl: error: series.yaml:53: patch file '0001-change-a-line-3.patch' listed twice "
        "(first at line 8)\n"), r.stderr


@pytest.mark.parametrize(
    "args,want",
    [
        (["status", "--json"], 0),
        (["check", "--json"], 0),
        (["apply", "--json"], 0),
        (["apply", "--json", "--base", "NEW"], 1),
        (["continue", "--json"], 2),
        (["skip", "--json"], 2),
        (["bump", "--to", "NEW", "--json"], 1),
        (["bump", "--to", "nope", "--json"], 2),
        (["blame", "nope", "--json"], 2),
        (["blame", "change-a-line-3", "--to", "NEW", "--json"], 1),  # it conflicts there
        (["report", "--json"], 2),
        (["apply", "--json", "--base", "nope"], 2),
        (["status", "--json", "--bogus"], 2),
        (["check", "--apply", "--json"], 0),
        (["test", "--json", "--tree", "nope"], 2),
        (["report", "--format", "json", "--old-series", ".", "--new-series", "."], 0),
    ],
)
def test_json_on_every_exit(world: World, tmp_path: Path, args: list[str], want: int) -> None:
    """--json gives one JSON document on stdout on exit 0, 1 and 2."""
    series = copy(world.sc, tmp_path)
    r = run(series, *[world.sc.new_base if a == "NEW" else a for a in args], want=want)
    data = json.loads(r.stdout)
    assert isinstance(data, dict) and ("schema" in data or "id" in data)


def test_json_continue_and_skip_in_a_conflict(world: World, tmp_path: Path) -> None:
    """continue --json on an unresolved conflict (exit 1) and skip --json (exit 0)."""
    series = conflicted(world, tmp_path)
    r = run(series, "continue", "--json", want=1)
    assert json.loads(r.stdout)["exit_code"] == 1
    r = run(series, "skip", "--json", want=0)
    assert json.loads(r.stdout)["result"] == "clean"


def test_failed_fetch_keeps_the_mirror_url(world: World, tmp_path: Path) -> None:
    """A fetch from an unreachable URL fails (exit 2) and leaves the mirror's URL."""
    series = applied(world, tmp_path)
    mirror = series / ".rebasectl" / "upstream.git"
    url = git(mirror, "config", "remote.origin.url").stdout
    run(series, "fetch", "--upstream", "https://127.0.0.1:9/nope.git", want=2)
    assert git(mirror, "config", "remote.origin.url").stdout == url
    run(series, "bump", "--to", world.clean, want=0)


def test_bad_input_is_exit_2_one_line(world: World, tmp_path: Path) -> None:
    """A 300-character patch file name, git missing from PATH, an http:// upstream: exit 2,
    one line, no traceback."""
    series = copy(world.sc, tmp_path)
    text = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text(
        text.replace("file: 0003-touch-b.patch", f"file: {'x' * 300}.patch")
    )
    r = run(series, "check", want=2)
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    (series / "series.yaml").write_text(text)
    bindir = tmp_path / "nogit"
    bindir.mkdir()
    exe = shutil.which("rebasectl")
    assert exe
    r = subprocess.run(
        [exe, "-C", str(series), "apply"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(bindir)},
        check=False,
    )
    assert r.returncode == 2, r.stderr
    one_error(r.stderr)
    r = run(series, "fetch", "--upstream", "http://example.com/x.git", want=2)
    assert "transport refused" in r.stderr


def test_relative_upstream_is_taken_from_c(world: World, tmp_path: Path) -> None:
    """`-C series apply --upstream ../up` takes ../up from the series directory."""
    series = copy(world.sc, tmp_path)
    up = tmp_path / "up"
    shutil.copytree(world.sc.up.path, up)
    r = subprocess.run(
        ["rebasectl", "-C", str(series), "apply", "--upstream", "../up"],
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
