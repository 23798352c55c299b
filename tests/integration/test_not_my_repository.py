"""A repository another user owns (a shared read-only mirror): git refuses it for its ownership
unless the person's protected config lists it in ``safe.directory``. rebasectl hides the person's
config from git (rebasectl/git/runner.py's hermetic environment) but for that one key: it quotes
git's refusal with advice that works, and once the person has followed it, rebasectl reads the
repository as git does (hostile11 finding 7).

The tests run as root (as here and in CI) and give the repository to uid 65534: git refuses a
repository root does not own as it refuses anyone else's (checked by ``_not_mine``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from rebasectl.git import runner as git_runner
from rebasectl.git.runner import Runner
from tests.harness.cli import run as rebasectl
from tests.sfix import Scenario, copy

NOBODY = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


def _not_mine(tmp: Path, sc: Scenario, *, shallow: bool = False) -> Path:
    """A bare clone of the scenario's upstream owned by nobody, which plain git refuses;
    ``shallow``: of depth 2, as the shared Megatron snapshot is (rebasectl copies its objects
    and fetches from it)."""
    path = tmp / "shared" / "upstream.git"
    how = ["--depth", "2", "--no-single-branch", f"file://{sc.up.path}"] if shallow \
        else [str(sc.up.path)]
    subprocess.run(["git", "clone", "-q", "--bare", *how, str(path)], check=True)
    for root, dirs, files in os.walk(path):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, NOBODY, NOBODY)
    plain = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                           text=True, check=False)
    assert plain.returncode != 0 and "dubious ownership" in plain.stderr, plain
    return path


def _follow(advice: str) -> None:
    """Run the command an error message advises (between backticks), exactly as given."""
    found = re.search(r"`(git config --global --add safe\.directory [^`]+)`", advice)
    assert found is not None, advice
    subprocess.run(shlex.split(found.group(1)), check=True)


@pytest.mark.parametrize("shallow", [False, True], ids=["whole", "shallow"])
def test_apply_upstream_someone_elses_mirror(sc: Scenario, tmp_path: Path, shallow: bool) -> None:
    """`apply --upstream MIRROR` said only "not a git repository", and no config could help:
    now git's reason and the safe.directory advice, which works."""
    mirror = _not_mine(tmp_path, sc, shallow=shallow)
    series = copy(sc, tmp_path)
    r = rebasectl(series, "apply", "--upstream", str(mirror))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"upstream {mirror}: git refuses it: detected dubious ownership in repository at " \
        f"'{mirror}'" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (series / ".rebasectl" / "upstream.git").exists()
    _follow(r.stderr)
    done = rebasectl(series, "apply", "--upstream", str(mirror))
    assert done.returncode == 0, (done.stdout, done.stderr)
    tree = series / ".rebasectl" / "tree"
    assert "PATCH 30" in (tree / "a.txt").read_text()  # the series applied on the mirror's base


def test_report_on_someone_elses_repository(sc: Scenario, tmp_path: Path) -> None:
    """`report --repo` on a repository another user owns: git's reason and advice; after it,
    the report."""
    repo = _not_mine(tmp_path, sc)
    ws = tmp_path / "ws"
    ws.mkdir()
    args = ("report", "--json", "--repo", str(repo), "--old-range", f"{sc.base}..feature~1",
            "--new-range", f"{sc.base}..feature")
    r = rebasectl(ws, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"{repo}: git refuses it: detected dubious ownership in repository at '{repo}'" \
        in r.stderr, r.stderr
    _follow(r.stderr)
    done = rebasectl(ws, *args)
    assert done.returncode in (0, 1), (done.stdout, done.stderr)  # 1: entries to review
    data = json.loads(done.stdout)
    assert data["old"]["base"] == sc.base and len(data["new"]["patches"]) == 5


def test_only_safe_directory_comes_in_and_only_when_needed(sc: Scenario,
                                                          tmp_path: Path) -> None:
    """The person's config stays out of git's way but for safe.directory (from their global
    config and their own GIT_CONFIG_COUNT), which is read only after git refused a repository
    for its ownership: a repository of one's own costs no extra git."""
    mine = tmp_path / "mine.git"
    shutil.copytree(_not_mine(tmp_path, sc), mine)  # a copy: root's own
    other = tmp_path / "shared" / "upstream.git"
    config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    config.write_text(f"[user]\n\tname = Leaked Name\n[safe]\n\tdirectory = {other}\n")
    own = {"GIT_CONFIG_COUNT": "2", "GIT_CONFIG_KEY_0": "core.abbrev",
           "GIT_CONFIG_VALUE_0": "12", "GIT_CONFIG_KEY_1": "safe.directory",
           "GIT_CONFIG_VALUE_1": "/elsewhere"}
    saved = {k: os.environ.get(k) for k in own}
    os.environ.update(own)
    try:
        git_runner.forget_safe_directories()
        assert Runner(mine).ok(["rev-parse", "HEAD"])
        assert git_runner._safe is None  # never read: nothing was refused
        assert Runner(other).ok(["rev-parse", "HEAD"])  # refused, then run again with them
        listed = Runner(other).out(["config", "--show-scope", "--list"]).splitlines()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
        git_runner.forget_safe_directories()
    assert [ln for ln in listed if not ln.startswith("local\t")] == [  # and hooks off
        f"command\tcore.hookspath={os.devnull}", f"command\tsafe.directory={other}",
        "command\tsafe.directory=/elsewhere"], listed
