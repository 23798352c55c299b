"""``rebasectl status`` after an apply killed between checking out the work tree and writing the
stopped patch's conflict into it (SIGKILL at 5 s of ``apply --base 3346fa8a2`` on our series):
status said 'stopped at partial-ckpt-load' while the tree held a half checkout (3065 staged
deletions, no conflict), and named no command. Now it says the apply was interrupted and
names ``rebasectl continue``/``abort``; ``continue`` writes the conflict. A stop names the
commands that go on from it."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

from tests.harness.cli import ok, one_error, run, spawn
from tests.harness.git import git_out
from tests.harness.scenes import World, advised, conflicted, resolve_a, tree


def test_status_after_a_kill_before_the_conflict_is_written(world: World,
                                                             tmp_path: Path) -> None:
    series = tmp_path / "series"
    shutil.copytree(world.sc.series, series)
    killed = run(series, "apply", "--base", world.sc.new_base,
                 env={"REBASECTL_FAULT": "kill@worktree"})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    out = ok(series, "status").stdout
    assert "stopped at" not in out, out
    line = next(x for x in out.splitlines() if x.startswith("apply in progress"))
    assert "interrupted" in line
    assert advised(out.strip().splitlines()[-1]) == ["rebasectl continue", "rebasectl abort"]
    run(series, "continue", want=1)  # the conflict is written now
    out = ok(series, "status").stdout
    assert "stopped at" in out and "unmerged: a.txt" in out, out
    assert {"rebasectl continue", "rebasectl skip", "rebasectl abort"} <= set(
        advised(out.strip().splitlines()[-1])), out


def test_continue_interrupted_after_its_commit_is_said_by_status_and_rerun(
        world: World, tmp_path: Path) -> None:
    """Ctrl-C right after `continue` committed patch 1 and before it saved that (hostile5,
    finding 12): the 'committed' line never printed, and status said 'stopped at' patch 1 with
    'resolve, then continue'. Now the one error line names status and the rerun; status says
    patch 1 is committed (as what it is); the rerun says it recorded it and finishes."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    r = run(series, "continue", env={"REBASECTL_FAULT": "int@resolved"}, want=130)
    line = one_error(r.stderr, "interrupted")
    assert advised(line) == ["rebasectl status"], line
    head = git_out(tree(series), "rev-parse", "--short=12", "HEAD")
    out = ok(series, "status").stdout
    assert "stopped at" not in out and "1/5 applied, interrupted" in out, out
    assert f"1/5 change-a-line-3: committed {head}" in out, out
    assert advised(out.strip().splitlines()[-1])[0] == "rebasectl continue", out
    again = ok(series, "continue")
    assert f"1/5 change-a-line-3: committed {head} before the last run was interrupted" in \
        again.stderr, again.stderr
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert "PATCH 3 + UPSTREAM 3" in git_out(tree(series), "show", f"{head}:a.txt")


def test_an_interruption_before_the_command_began_says_to_run_it_again(
        world: World, tmp_path: Path) -> None:
    """Ctrl-C while the CLI is still being imported: the one line says nothing changed and to
    run it again, and running it again works."""
    series = conflicted(world, tmp_path)
    r = run(series, "status", env={"REBASECTL_FAULT": "int@start"}, want=130)
    line = one_error(r.stderr, "interrupted before the command began", "run it again")
    assert "nothing changed" in line
    ok(series, "status")


def test_skip_interrupted_after_it_was_recorded(world: World, tmp_path: Path) -> None:
    """Ctrl-C right after `skip` saved the skip: status says the apply was interrupted and
    names continue; `skip` again names continue too (there is nothing left to skip, and
    skipping again must never take the next patch); following it finishes, patch 1 skipped."""
    series = conflicted(world, tmp_path)
    r = run(series, "skip", env={"REBASECTL_FAULT": "int@state"}, want=130)
    assert advised(one_error(r.stderr, "interrupted")) == ["rebasectl status"]
    out = ok(series, "status").stdout
    assert "0/5 applied, interrupted" in out and "skipped: change-a-line-3" in out, out
    assert advised(out.strip().splitlines()[-1])[0] == "rebasectl continue", out
    again = run(series, "skip", want=2)
    assert advised(one_error(again.stderr, "nothing to skip")) == ["rebasectl continue"]
    ok(series, "continue")
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert "PATCH 3\n" not in (tree(series) / "a.txt").read_text()
    assert "PATCHED b 10" in (tree(series) / "b.txt").read_text()


def test_a_background_job_that_ignores_ctrl_c_keeps_ignoring_it(world: World,
                                                                 tmp_path: Path) -> None:
    """A command started with SIGINT ignored (`rebasectl continue &` from a script: the shell
    ignores it for background jobs) is not one a Ctrl-C ends: the console script used to put
    its early handler in anyway, and a SIGINT then ended the command at once with "interrupted
    before the command began (nothing changed)", untrue mid-command and with no state saved.
    Here the SIGINT comes at the commit of the resolution: ignored, continue finishes."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    r = spawn(series, "continue", env={"REBASECTL_FAULT": "int@resolved"},
              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr
    assert "interrupted" not in r.stderr
    assert not (series / ".rebasectl" / "apply-state.json").exists()  # the apply finished


def test_an_interrupted_report_outside_a_checkout_says_to_run_it_again(
        world: World, tmp_path: Path) -> None:
    """hostile11 #11: a command that only reads (a range report, here in a folder that is no
    checkout) says so when interrupted, and its advice works; one that writes still names
    status."""
    up = world.sc.up.path
    report = ("report", "--old-range", f"{world.sc.base}..{world.sc.base}", "--new-range",
              f"{world.sc.base}..{world.clean}", "--repo", str(up))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = run(elsewhere, *report, env={"REBASECTL_FAULT": "int@report"}, want=130)
    line = one_error(r.stderr, "interrupted")
    assert "changes nothing" in line and "`rebasectl status`" not in line, line
    assert run(elsewhere, *report).returncode in (0, 1)
    series = conflicted(world, tmp_path)
    r = run(series, "report", env={"REBASECTL_FAULT": "int@report"}, want=130)
    assert "changes nothing" in one_error(r.stderr, "interrupted")  # in a checkout, too
    r = run(series, "skip", env={"REBASECTL_FAULT": "int@state"}, want=130)
    assert advised(one_error(r.stderr, "interrupted")) == ["rebasectl status"]
