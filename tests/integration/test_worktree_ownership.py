"""Work trees stay the person's: a moved or copied checkout, a work tree outside the checkout, a
second work tree, untracked files in the finished tree; nothing is deleted or taken over, and
each situation gets out with rebasectl commands alone.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from tests.harness.cli import one_error, run
from tests.harness.git import git
from tests.harness.scenes import (
    RESOLVED_A,
    World,
    advised,
    applied,
    commit_in,
    conflicted,
    resolve_a,
    tree,
)
from tests.sfix import Scenario, copy, snapshot


def test_abort_in_a_moved_checkout_spares_the_new_checkout(world: World, tmp_path: Path) -> None:
    """`mv series series.old` mid-conflict, a fresh checkout at the old path with an unexported
    commit in its work tree: `rebasectl -C series.old abort` leaves the new checkout's work tree
    (and that commit) alone."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "series.old"
    old.rename(moved)
    fresh = applied(world, tmp_path)  # at the old path
    work = commit_in(tree(fresh), "my unexported work", {"work.txt": "precious\n"})
    run(moved, "abort")
    assert (tree(fresh) / "work.txt").read_text() == "precious\n"
    assert git(tree(fresh), "rev-parse", "HEAD").stdout.strip() == work


def test_continue_in_a_moved_checkout_spares_the_new_checkout(
    world: World, tmp_path: Path
) -> None:
    """As above, but `continue` in the moved checkout: the new checkout's work tree keeps its HEAD
    and files; no conflict is written there."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "series.old"
    old.rename(moved)
    fresh = applied(world, tmp_path)
    work = commit_in(tree(fresh), "my unexported work", {"work.txt": "precious\n"})
    run(moved, "continue")
    assert git(tree(fresh), "rev-parse", "HEAD").stdout.strip() == work
    assert (tree(fresh) / "work.txt").read_text() == "precious\n"
    assert git(tree(fresh), "status", "--porcelain").stdout == ""


def test_continue_in_a_moved_checkout_keeps_the_resolution(world: World, tmp_path: Path) -> None:
    """`mv` of the checkout mid-conflict, then the resolution edited in the moved work tree:
    `continue` takes that resolution, in the moved work tree (no new work tree at the old path)."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "moved"
    old.rename(moved)
    resolve_a(moved, add=False)  # git itself no longer works in the moved tree
    run(moved, "continue")
    assert not old.exists(), f"continue created {old}"
    head = git(tree(moved), "show", "HEAD:a.txt", check=False).stdout
    on_disk = (tree(moved) / "a.txt").read_text()
    assert RESOLVED_A in (head, on_disk), "the resolution in the moved work tree is gone"


def test_abort_then_apply_in_a_moved_checkout_needs_no_hand_work(
    world: World, tmp_path: Path
) -> None:
    """After `mv` mid-conflict, `abort` then `apply` work with no hand work."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "moved"
    old.rename(moved)
    run(moved, "abort", want=0)
    run(moved, "apply", want=0)
    assert not old.exists(), f"abort/apply created {old}"


def test_a_second_worktree_leaves_the_default_one_usable(world: World, tmp_path: Path) -> None:
    """apply, then `apply --base CLEAN --worktree ../wt2`, export: `apply` works again, at worst
    after the rebasectl commands its refusal advises (never only a hand `rm`)."""
    series = applied(world, tmp_path)
    run(series, "apply", "--base", world.clean, "--worktree", str(tmp_path / "wt2"), want=0)
    run(series, "export", want=0)
    r = run(series, "apply")
    if r.returncode != 0:
        for command in advised(r.stderr):
            if command.startswith("rebasectl "):
                run(series, *command.split()[1:])
        r = run(series, "apply")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("how", ["apply", "apply-base", "bump-clean"])
def test_untracked_files_stop_apply_and_bump_and_survive(
    world: World, tmp_path: Path, how: str
) -> None:
    """An untracked file in the finished work tree stops a rerun of apply, apply --base and a
    clean bump (listed, exit 2) and survives."""
    series = applied(world, tmp_path)
    (tree(series) / "untracked.txt").write_text("mine\n")
    args = {
        "apply": ["apply"],
        "apply-base": ["apply", "--base", world.sc.new_base],
        "bump-clean": ["bump", "--to", world.clean],
    }[how]
    before = snapshot(series)
    r = run(series, *args, want=2)
    assert "untracked.txt" in r.stderr
    assert (tree(series) / "untracked.txt").read_text() == "mine\n"
    assert snapshot(series) == before


def test_a_worktree_turned_into_a_plain_folder_is_kept(
    sc: Scenario, tmp_path: Path
) -> None:
    """`apply --worktree ../wt`, then the user turns ../wt into a plain folder (`rm ../wt/.git`) and
    keeps working there: the next command of the checkout leaves the folder and its files; a
    folder outside .rebasectl/ with files rebasectl did not write is never deleted."""
    series = copy(sc, tmp_path)
    wt = tmp_path / "wt"
    run(series, "apply", "--worktree", str(wt), want=0)
    (wt / ".git").unlink()
    (wt / "mynotes.txt").write_text("precious\n")
    run(series, "apply")
    assert (wt / "mynotes.txt").is_file(), "the user's folder was deleted"


def test_a_copy_of_the_checkout_leaves_the_outside_worktree_alone(
    sc: Scenario, tmp_path: Path
) -> None:
    """`apply --base NEW --worktree ../wt` (stopped at a conflict), then `cp -r series copy`: a
    locking command in the copy does not relink ../wt to the copy's mirror (the original was
    never moved), so git keeps working in the original's work tree after `rm -rf copy`."""
    series = copy(sc, tmp_path)
    wt = tmp_path / "wt"
    run(series, "apply", "--base", sc.new_base, "--worktree", str(wt), want=1)
    link = (wt / ".git").read_text()
    dup = tmp_path / "copy"
    shutil.copytree(series, dup, symlinks=True)
    run(dup, "continue")  # refuses (unresolved), but ran the repair first
    shutil.rmtree(dup)
    assert (wt / ".git").read_text() == link
    assert git(wt, "status", "--porcelain", check=False).returncode == 0


def test_moved_checkout_skip_and_export_need_no_hand_work(sc: Scenario, tmp_path: Path) -> None:
    """mv of the checkout after apply, export in the moved one (nothing changed), apply --base NEW,
    mv again mid-conflict, skip, export: each works with no hand work."""
    series = copy(sc, tmp_path)
    run(series, "apply", want=0)
    moved = tmp_path / "s2"
    series.rename(moved)
    assert "0 files changed" in run(moved, "export", want=0).stdout
    run(moved, "apply", "--base", sc.new_base, want=1)
    again = tmp_path / "s3"
    moved.rename(again)
    run(again, "skip", want=0)
    r = run(again, "export", want=0)
    assert "kept change-a-line-3 as it was" in r.stdout
    assert "the exported series stops there" in r.stdout
    assert not moved.exists() and not series.exists()
    # what the export line says: apply stops at the kept patch, to be resolved there
    stop = run(again, "apply", want=1)
    assert "change-a-line-3" in stop.stderr + stop.stdout


def _do(series: Path, command: str) -> None:
    """One advised command, run as written (git) or through the CLI (rebasectl)."""
    argv = shlex.split(command)
    if argv[0] == "git":
        git(series, *argv[1:])
    else:
        assert argv[0] == "rebasectl", command
        run(series, *argv[1:], want=0)


@pytest.mark.parametrize("way", ["commit", "drop"])
def test_bump_over_uncommitted_edits_advises_what_works(world: World, tmp_path: Path,
                                                        way: str) -> None:
    """hostile5 finding 8: bump over a tree with an uncommitted edit advised `rebasectl export`,
    which refuses uncommitted changes. Now the refusal names the file and two ways out (amend
    the last patch and export; reset --hard), and each, followed, lets the bump through."""
    series = applied(world, tmp_path)
    (tree(series) / "c" / "d.txt").write_text("my edit\n")
    before = snapshot(series)
    r = run(series, "bump", "--to", world.clean, want=2)
    line = one_error(r.stderr, "uncommitted changes to c/d.txt")
    assert snapshot(series) == before and (tree(series) / "c" / "d.txt").read_text() == "my edit\n"
    commit, export, drop = advised(line)
    assert export == "rebasectl export" and "reset --hard" in drop, line
    for command in ([commit, export] if way == "commit" else [drop]):
        _do(series, command)
    run(series, "bump", "--to", world.clean, want=0)
    in_patches = any(b"+my edit" in data for name, data in snapshot(series).items()
                     if name.startswith("patches/"))
    assert in_patches == (way == "commit")


def test_bump_over_an_unexported_commit_advises_what_works(world: World, tmp_path: Path) -> None:
    """An unexported commit: its own refusal; `rebasectl export` keeps it (covered by
    test_refs_and_fetch), the reset the message names drops it, and the bump then goes on."""
    series = applied(world, tmp_path)
    commit_in(tree(series), "my unexported work", {"work.txt": "mine\n"})
    r = run(series, "bump", "--to", world.clean, want=2)
    line = one_error(r.stderr, "commits that were not exported")
    export, drop = advised(line)
    assert export == "rebasectl export" and "reset --hard" in drop, line
    _do(series, drop)
    run(series, "bump", "--to", world.clean, want=0)


@pytest.mark.parametrize("registration", ["absolute", "relative"])
def test_a_relative_git_link_is_read_as_git_reads_it(world: World, tmp_path: Path,
                                                     registration: str) -> None:
    """hostile10 B2: a work tree whose ``.git`` names its admin dir by a relative path (what git
    2.48+ writes with ``worktree.useRelativePaths``, with the registration's ``gitdir`` relative
    too) is the same tree to git and to rebasectl: the resolution staged there is what continue
    commits, never markers written back over it."""
    series = conflicted(world, tmp_path)
    work = tree(series)
    admin = Path(git(work, "rev-parse", "--absolute-git-dir").stdout.strip())
    (work / ".git").write_text(f"gitdir: {os.path.relpath(admin, work)}\n")
    if registration == "relative":
        (admin / "gitdir").write_text(f"{os.path.relpath(work / '.git', admin)}\n")
    resolve_a(series)
    assert git(work, "status", "--porcelain").stdout.startswith("M  a.txt")  # git reads it
    r = run(series, "continue")
    assert r.returncode == 0, r.stderr
    assert "<<<<<<<" not in (work / "a.txt").read_text()
    committed = {git(work, "show", f"{c}:a.txt", check=False).stdout
                 for c in git(work, "rev-list", "HEAD").stdout.split()}
    assert RESOLVED_A in committed
