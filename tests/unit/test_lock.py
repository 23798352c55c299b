"""Concurrency (issue 7): one mutating rebasectl at a time per repository.

A second command while one runs is refused (exit 2) with a line naming the holder (command, pid);
a lock left by a process that died (SIGKILL, crash) is no obstacle. The running command is frozen
with SIGSTOP at an exact point through the fault hook, so the overlap is certain, not timed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebasectl.infra.lock import LockedError, RepoLock
from tests.harness.cli import one_error, popen, spawn
from tests.harness.cli import run as rebasectl
from tests.harness.process import resume, wait_stopped
from tests.sfix import Scenario, copy, snapshot, template_fixture, tree_of


@pytest.fixture(scope="module")
def tpl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """tests/sfix.py's scenario, built once per module: no test writes to its upstream."""
    yield from template_fixture(tmp_path_factory, "lock")


def _scene(tpl: Scenario, tmp_path: Path) -> Scenario:
    """The scenario with a fresh copy of its series checkout (the series each test changes)."""
    return dataclasses.replace(tpl, series=copy(tpl, tmp_path))


def test_second_holder_refused_then_free(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    first = RepoLock(path, "apply")
    first.acquire()
    try:
        with pytest.raises(LockedError) as info:
            RepoLock(path, "export").acquire()
        assert f"`rebasectl apply` (pid {os.getpid()}" in info.value.message
    finally:
        first.release()
    with RepoLock(path, "export") as again:
        assert again.held
        assert json.loads(path.read_text())["command"] == "export"
    assert path.read_text() == ""  # released: no holder named any more


def test_stale_lock_file_of_dead_process_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = tmp_path / "lock"
    path.write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename,
                                "command": "apply", "since": 0}))
    with RepoLock(path, "import") as lock:
        assert lock.held
        assert json.loads(path.read_text())["pid"] == os.getpid()


def test_garbage_lock_file_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    path.write_bytes(b"\x00\xffnot json")
    with RepoLock(path, "apply") as lock:
        assert lock.held


@pytest.mark.parametrize("second", [["export"], ["import", "HEAD~1..HEAD"], ["abort"], ["apply"]])
def test_two_commands_at_once(tpl: Scenario, tmp_path: Path, second: list[str]) -> None:
    sc = _scene(tpl, tmp_path)
    before = snapshot(sc.series)
    first = popen(sc.series, "apply", "--upstream", str(sc.up.path),
                  env={"REBASECTL_FAULT": "stop@commit:2"})
    try:
        wait_stopped(first)
        args = [*second, "--repo", str(sc.up.path)] if second[0] == "import" else second
        r = rebasectl(sc.series, *args)
        assert r.returncode == 2, r.stderr
        one_error(r.stderr)
        assert f"`rebasectl apply` (pid {first.pid}" in r.stderr
        assert snapshot(sc.series) == before
    finally:
        resume(first)
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert tree_of(sc.series / ".rebasectl" / "tree") == sc.up.tree("feature")
    # and now that it is done, the same command goes through
    assert rebasectl(sc.series, "export").returncode == 0


def test_read_only_status_runs_beside_a_holder(tpl: Scenario, tmp_path: Path) -> None:
    sc = _scene(tpl, tmp_path)
    first = popen(sc.series, "apply", "--upstream", str(sc.up.path),
                  env={"REBASECTL_FAULT": "stop@commit:1"})
    try:
        wait_stopped(first)
        r = rebasectl(sc.series, "status", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["apply_in_progress"]["total"] == 5
    finally:
        resume(first)
        first.communicate(timeout=120)
    assert first.returncode == 0


def test_lock_of_killed_command_is_recovered(tpl: Scenario, tmp_path: Path) -> None:
    sc = _scene(tpl, tmp_path)
    r = rebasectl(sc.series, "apply", "--upstream", str(sc.up.path),
                  env={"REBASECTL_FAULT": "kill@commit:3"})
    assert r.returncode == -signal.SIGKILL
    holder = json.loads((sc.series / ".rebasectl" / "lock").read_text())
    assert holder["command"] == "apply"  # the dead process's name is still in the file
    r = rebasectl(sc.series, "continue")
    assert r.returncode == 0, r.stderr
    assert tree_of(sc.series / ".rebasectl" / "tree") == sc.up.tree("feature")


def test_disk_full_while_staging_changes_nothing(tpl: Scenario, tmp_path: Path) -> None:
    """A write that fails halfway (here: a file-size limit, as a full disk would) is exit 2 with
    one line, and the series is as it was; the next export finishes normally."""
    import resource

    sc = _scene(tpl, tmp_path)
    assert rebasectl(sc.series, "apply", "--upstream", str(sc.up.path)).returncode == 0
    tree = sc.series / ".rebasectl" / "tree"
    (tree / "big.txt").write_text("x" * 4000 + "\n")
    subprocess.run(["git", "-C", str(tree), "add", "big.txt"], check=True)
    subprocess.run(["git", "-C", str(tree), "commit", "-q", "-m", "feat: big"], check=True)
    before = snapshot(sc.series)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))

    r = spawn(sc.series, "export", preexec_fn=limit)
    assert r.returncode == 2, r.stderr
    one_error(r.stderr, "nothing was changed")
    assert snapshot(sc.series) == before
    assert not (sc.series / ".rebasectl" / "txn").exists()
    assert rebasectl(sc.series, "export").returncode == 0
    assert "patches/0006-big.patch" in snapshot(sc.series)


@pytest.mark.parametrize("args", [["report", "--old-rev", "HEAD", "--new-rev", "HEAD"],
                                  ["blame", "p1"]])
def test_report_and_blame_wait_their_turn(tpl: Scenario, tmp_path: Path, args: list[str]) -> None:
    """report and blame read the series and may create or fetch the mirror: while another
    command holds the lock they are refused with the holder's name, like any other."""
    sc = _scene(tpl, tmp_path)
    holder = RepoLock(sc.series / ".rebasectl" / "lock", "export")
    (sc.series / ".rebasectl").mkdir(exist_ok=True)
    holder.acquire()
    try:
        r = rebasectl(sc.series, *args)
    finally:
        holder.release()
    assert r.returncode == 2, r.stderr
    assert "`rebasectl export`" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("where", ["index.lock", "worktrees/tree/index.rebasectl.lock"])
def test_git_lock_left_by_a_killed_git_is_removed(tpl: Scenario, tmp_path: Path,
                                                  where: str) -> None:
    """An index.lock in the mirror that no process holds (a git killed mid-write), or the lock
    of the copy of the work tree's index a stop's merge is made in (random-kill trial 32: a
    continue killed during that merge, and the next continue failed on git's "File exists"):
    the next command removes it, says so, and goes on."""
    sc = _scene(tpl, tmp_path)
    assert rebasectl(sc.series, "apply").returncode == 0
    lock = sc.series / ".rebasectl" / "upstream.git" / where
    lock.write_text("")
    r = rebasectl(sc.series, "apply", "--base", sc.new_base)
    assert r.returncode == 1, r.stderr
    assert not lock.exists() and f"removed {lock}" in r.stderr


def test_a_git_still_at_work_is_waited_for(tpl: Scenario, tmp_path: Path) -> None:
    """A git holding a lock in the mirror (here a process with packed-refs.lock open until the
    test lets it go, as a checkout a killed rebasectl started outlives it): the command waits for
    it, says so, and then runs, instead of sending the person away. Synchronised on the command
    itself: it stops at its ``git-wait`` fault point (reached only while it waits for a live
    holder), the holder is let go, and the command goes on."""
    sc = _scene(tpl, tmp_path)
    assert rebasectl(sc.series, "apply").returncode == 0
    lock = sc.series / ".rebasectl" / "upstream.git" / "packed-refs.lock"
    holder = subprocess.Popen([sys.executable, "-c",
                               "import sys; f = open(sys.argv[1], 'w'); "
                               "print('held', flush=True); sys.stdin.read()", str(lock)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    cmd = popen(sc.series, "abort", env={"REBASECTL_FAULT": "stop@git-wait:1"})
    try:
        wait_stopped(cmd)  # it found the holder alive and is waiting for it
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # the git finishes (and leaves its lock file, as a killed one would)
        holder.wait(timeout=60)
        resume(cmd)
    _, err = cmd.communicate(timeout=300)
    assert "waiting for git (pid" in err, err
    assert cmd.returncode == 2 and "no apply in progress" in err, err  # then ran as usual
