"""An abort killed while it removed the work tree (hostile6 finding 8): the tree was left without
its .git, and status said "stopped at ... resolve (edit, `git add`), then `rebasectl continue`"
in a directory that was no longer a git tree (git there read the series checkout). Now status
and continue name the rerun of abort, and the rerun finishes: the tree removed, the one the apply
replaced put back, nothing taken from the series checkout."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.harness.cli import ok, one_error, run
from tests.harness.git import git, git_out
from tests.harness.scenes import World, advised, applied, tree


def killed_mid_removal(series: Path) -> None:
    """abort killed as it starts removing the tree, then the state a `git worktree remove`
    killed part way leaves: the .git link and some files gone, the registration still there."""
    r = run(series, "abort", env={"REBASECTL_FAULT": "kill@abort-removing"})
    assert r.returncode == -9, (r.returncode, r.stderr)
    (tree(series) / ".git").unlink()
    shutil.rmtree(tree(series) / "c")


def test_status_after_an_abort_killed_mid_removal_names_abort(world: World,
                                                              tmp_path: Path) -> None:
    series = applied(world, tmp_path)
    before = git_out(tree(series), "rev-parse", "HEAD")
    run(series, "apply", "--base", world.sc.new_base, want=1)
    (tree(series) / "notes.txt").write_text("mine\n")
    killed_mid_removal(series)
    out = ok(series, "status").stdout
    last = out.strip().splitlines()[-1]
    assert "abort was interrupted" in last and "resolve" not in out, out
    assert advised(last) == ["rebasectl abort"], last
    refused = run(series, "continue")
    assert refused.returncode != 0
    assert advised(one_error(refused.stderr, "abort was interrupted")) == ["rebasectl abort"]
    again = ok(series, *advised(last)[0].split()[1:])
    assert "put " in again.stdout and "back at" in again.stdout, again.stdout
    assert "commit" not in again.stdout, again.stdout  # none of the series checkout's
    assert git_out(tree(series), "rev-parse", "HEAD") == before
    git(tree(series), "diff", "--quiet", "HEAD")  # whole again: c/ is back
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert not (series / ".rebasectl" / "aborting").exists()
    status = ok(series, "status").stdout
    assert "abort" not in status and "apply in progress" not in status, status
    kept = list((series / ".rebasectl" / "aborted").rglob("notes.txt"))
    assert [p.read_text() for p in kept] == ["mine\n"]  # kept by the first run


def test_an_abort_killed_after_the_state_went_is_finished(world: World, tmp_path: Path) -> None:
    """Only the marker left: the rerun removes it and says nothing more was to do."""
    series = applied(world, tmp_path)
    (series / ".rebasectl" / "aborting").touch()
    assert "abort was interrupted" in ok(series, "status").stdout
    ok(series, "abort")
    assert "abort" not in ok(series, "status").stdout


def test_status_says_when_the_work_tree_is_behind_the_applied_patches(world: World,
                                                                      tmp_path: Path) -> None:
    """apply --base killed after it made every patch's commit (in memory, saved) and before it
    moved the work tree off the base: status said "5/5 applied" of a tree at the bare base
    (hostile6 #8). Now it says where the tree is, and its advice finishes the apply."""
    series = applied(world, tmp_path)
    killed = run(series, "apply", "--base", world.clean, env={"REBASECTL_FAULT": "kill@state:3"})
    assert killed.returncode == -9, killed.stderr
    assert git_out(tree(series), "rev-parse", "HEAD") == world.clean  # the scene meant
    out = ok(series, "status").stdout
    line = next(x for x in out.splitlines() if x.startswith("apply in progress"))
    assert "5/5 applied" in line and "the work tree is at the base" in line, out
    assert advised(line) == ["rebasectl continue"], line
    ok(series, "continue")
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert git_out(tree(series), "rev-list", "--count", f"{world.clean}..HEAD") == "5"
    assert "work tree is at" not in ok(series, "status").stdout
