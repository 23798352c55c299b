"""abort after a person began resolving: their edits to the conflicted files went with the work
tree, unsaid (found on June's 24-patch bump: half a hand resolution of a region, then `rebasectl
abort`: 'aborted; removed .../.rebasectl/tree', the edit nowhere; rerere records nothing before
``continue``). Now each tracked file changed since the stop is copied under edited/ of the folder
abort names, and said; files as the stop left them are not kept, and nothing more is said.

``continue`` and ``skip`` threw away unstaged edits to files the stop does not touch (hostile5
finding 1): now they leave them where they are, as git am does, refuse when a later patch would
write over one (with a way past it that works), and skip keeps a copy of a resolution begun in
the stop's own files."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from tests.harness.cli import ok, one_error, run
from tests.harness.git import Repo, git, git_out
from tests.harness.scenes import (
    Two,
    World,
    advised,
    conflicted,
    copy_two,
    resolve_a,
    resolve_all,
    tree,
)


def kept_folder(stdout: str) -> Path:
    found = re.search(r".* in (\S+)", stdout.splitlines()[-1])
    assert found, stdout
    return Path(found.group(1))


def test_abort_keeps_a_resolution_in_progress(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    a = tree(series) / "a.txt"
    half = a.read_text().replace("=======", "======= (my notes: keep both)", 1)
    a.write_text(half)
    state = series / ".rebasectl" / "apply-state.json"
    stopped = state.stat().st_mtime_ns
    os.utime(a, ns=(stopped + 10**9, stopped + 10**9))  # edited a second after the stop
    out = ok(series, "abort").stdout
    assert "1 file(s) you changed (copies in edited/)" in out, out
    assert (kept_folder(out) / "edited" / "a.txt").read_text() == half


def test_abort_of_a_tree_git_cannot_read_keeps_all_of_it(world: World, tmp_path: Path) -> None:
    """The tree's registration in the mirror is gone (moved aside while a command pruned it, or
    removed by hand): git can tell nothing of the tree, so abort keeps every file of it, not
    none (hostile9 F1: the hand resolution and an untracked file were deleted)."""
    import shutil

    series = conflicted(world, tmp_path)
    a = tree(series) / "a.txt"
    half = a.read_text().replace("=======", "======= (my careful port)", 1)
    a.write_text(half)
    (tree(series) / "NOTES.txt").write_text("notes\n")
    (admin,) = (series / ".rebasectl" / "upstream.git" / "worktrees").iterdir()
    shutil.rmtree(admin)
    gone = "its registration in the mirror is gone"
    assert gone in ok(series, "status").stdout.splitlines()[-1]
    for command in ("continue", "skip"):  # refused, with the way out status names
        line = one_error(run(series, command, want=1).stderr, gone, "rebasectl abort")
    assert (tree(series) / "a.txt").read_text() == half
    out = ok(series, "abort").stdout
    assert "all of them (git could not read the tree" in out, out
    kept = kept_folder(out) / "tree"
    assert (kept / "a.txt").read_text() == half
    assert (kept / "NOTES.txt").read_text() == "notes\n"
    assert not tree(series).exists()
    advised = line.split("then `", 1)[1].split("`", 1)[0].split()  # the advice works
    assert run(series, *advised[1:], want=1).returncode == 1
    assert "<<<<<<< " in (tree(series) / "a.txt").read_text()


def test_a_tree_that_lost_its_git_link_keeps_its_files(world: World, tmp_path: Path) -> None:
    """The work tree's .git deleted (its registration intact): git can tell nothing of it, so
    continue and abort keep every file before they remove it, never delete them (hostile10
    B1: "left by an interrupted `git worktree remove`", resolution and untracked files gone)."""
    for command, want in (("continue", 1), ("abort", 0)):
        series = conflicted(world, tmp_path, f"s-{command}")
        a = tree(series) / "a.txt"
        half = a.read_text().replace("=======", "======= (my careful port)", 1)
        a.write_text(half)
        (tree(series) / "NOTES.txt").write_text("notes\n")
        (tree(series) / ".git").unlink()
        assert "no longer a git tree" in ok(series, "status").stdout.splitlines()[-1]
        run(series, command, want=want)
        (kept,) = (series / ".rebasectl" / "aborted").glob("*/tree")
        assert (kept / "a.txt").read_text() == half, command
        assert (kept / "NOTES.txt").read_text() == "notes\n", command


def test_abort_right_after_the_stop_keeps_nothing(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    out = ok(series, "abort").stdout
    assert "kept" not in out and "edited" not in out, out
    assert not (series / ".rebasectl" / "aborted").exists() or not any(
        (series / ".rebasectl" / "aborted").rglob("edited"))


# -- continue and skip keep the person's other edits (hostile5 finding 1) -------------------------
# Patch 1 (a.txt) stops on new_base; patch 3 changes b.txt line 10; no patch touches c/d.txt.
NOTE = "# my note\n"


def follow(series: Path, message: str) -> None:
    """Run every command a message advises, in order (git ones as written, rebasectl ones
    through the in-process CLI), each of which must succeed."""
    commands = advised(message)
    assert commands, message
    for command in commands:
        argv = shlex.split(command)
        if argv[0] == "git":
            git(series, *argv[1:])
        else:
            assert argv[0] == "rebasectl", command
            ok(series, *argv[1:])


def added(path: Path, text: str = NOTE) -> str:
    """``text`` appended to the file at ``path``: the person's unstaged edit; returns the
    file's new content."""
    path.write_text(path.read_text() + text)
    return path.read_text()


def test_continue_leaves_an_unstaged_edit_where_it_is(world: World, tmp_path: Path) -> None:
    """The note in a file no patch touches was gone after `continue` (not committed, not in the
    tree, nowhere). As `git am --continue`: the index is committed, the edit stays unstaged."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    mine = added(tree(series) / "c" / "d.txt")
    ok(series, "continue")
    assert not (series / ".rebasectl" / "apply-state.json").exists()  # the apply finished
    assert (tree(series) / "c" / "d.txt").read_text() == mine
    assert git_out(tree(series), "status", "--porcelain") == "M c/d.txt"
    assert "my note" not in git_out(tree(series), "log", "-p", f"{world.sc.new_base}..HEAD")


def test_continue_refuses_when_a_later_patch_writes_the_edited_file(world: World,
                                                                     tmp_path: Path) -> None:
    """An edit to b.txt, which patch 3 changes: the move is refused before the file is touched,
    in one line naming it, after patch 1 was committed; the advice (stash, continue, stash
    pop) finishes the apply and gives the edit back on top of patch 3."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    b = tree(series) / "b.txt"
    mine = added(b)
    r = run(series, "continue", want=1)
    line = one_error(r.stderr, "b.txt", "in the way")
    assert "1/5 " in line and ": committed " in line
    assert b.read_text() == mine
    follow(series, line)
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert b.read_text().endswith(NOTE) and "PATCHED b 10" in b.read_text()
    assert git_out(tree(series), "stash", "list") == ""
    assert "PATCH 3 + UPSTREAM 3" in git_out(tree(series), "show", "HEAD:a.txt")


def test_skip_leaves_an_unrelated_edit_and_drops_the_patch(world: World, tmp_path: Path) -> None:
    """`skip` dropped an unstaged edit of another file with no copy; now it puts back only the
    stop's files (git am --skip does the same) and the edit stays."""
    series = conflicted(world, tmp_path)
    mine = added(tree(series) / "c" / "d.txt")
    ok(series, "skip")
    assert (tree(series) / "c" / "d.txt").read_text() == mine
    assert git_out(tree(series), "status", "--porcelain") == "M c/d.txt"
    assert "<<<<<<<" not in (tree(series) / "a.txt").read_text()


def test_skip_keeps_a_copy_of_a_resolution_in_progress(world: World, tmp_path: Path) -> None:
    """A hand resolution begun in the stop's file goes with the patch it resolves, as abort
    does, a copy is kept first and the folder named; the stop's files as written are not."""
    series = conflicted(world, tmp_path)
    a = tree(series) / "a.txt"
    half = a.read_text().replace("=======", "======= (my notes)", 1)
    a.write_text(half)
    stopped = (series / ".rebasectl" / "apply-state.json").stat().st_mtime_ns
    os.utime(a, ns=(stopped + 10**9, stopped + 10**9))
    r = ok(series, "skip")
    said = [line for line in (r.stdout + r.stderr).splitlines() if "edited since the stop" in line]
    assert said, r.stdout + r.stderr
    assert (kept_folder(said[0]) / "edited" / "a.txt").read_text() == half
    assert "my notes" not in a.read_text()


def test_skip_refuses_when_a_later_patch_writes_the_edited_file(world: World,
                                                                 tmp_path: Path) -> None:
    """skip's way past an edit in a later patch's file is the same as continue's, and works."""
    series = conflicted(world, tmp_path)
    b = tree(series) / "b.txt"
    mine = added(b)
    r = run(series, "skip", want=1)
    line = one_error(r.stderr, "b.txt", "in the way", "1/5 ", ": skipped")
    assert b.read_text() == mine
    follow(series, line)
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert b.read_text().endswith(NOTE) and "PATCHED b 10" in b.read_text()
    assert "PATCH 3\n" not in git_out(tree(series), "show", "HEAD:a.txt")  # patch 1 skipped


def test_abort_keeps_an_edit_continue_carried_to_the_next_stop(two_conflicts: Two,
                                                               tmp_path: Path) -> None:
    """An edit made at the first stop and left unstaged by `continue` is older than the second
    stop's state; abort at the second stop still keeps a copy of it."""
    series = copy_two(two_conflicts, tmp_path)
    run(series, "apply", "--base", two_conflicts.new_base, want=1)
    resolve_all(tree(series) / "a.txt", "RESOLVED 3\n")
    git(tree(series), "add", "a.txt")
    mine = added(tree(series) / ".gitignore", "build/\n")
    run(series, "continue", want=1)  # the second stop
    assert (tree(series) / ".gitignore").read_text() == mine
    out = ok(series, "abort").stdout
    assert (kept_folder(out) / "edited" / ".gitignore").read_text() == mine


def test_a_skipped_conflict_is_not_recorded_as_resolved(tmp_path: Path) -> None:
    """skip puts the stop's files back to HEAD; rerere, still watching that conflict, took
    those files for its resolution at the next stop's `git rerere`, and the next apply onto
    the same base "resolved" patch 1 with upstream's side (the real June bump: mla-rope-triton
    applied as empty). git am --skip forgets the conflict (rerere clear); skip must too:
    applying again (another work tree, the same mirror and rr-cache) stops at patch 1."""
    text = "".join(f"line {i}\n" for i in range(1, 30))
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": text, "b.txt": text})
    up.branch("feature")
    up.commit("upstream", {"a.txt": text.replace("line 3\n", "UP 3\n"),
                           "b.txt": text.replace("line 3\n", "UP 3\n")})
    new_base = up.head()
    up.checkout("feature")
    up.commit("fix: a", {"a.txt": text.replace("line 3\n", "PATCH 3\n")})
    up.commit("fix: b", {"b.txt": text.replace("line 3\n", "PATCH 3\n")})
    series = tmp_path / "series"
    series.mkdir()
    ok(series, "import", f"{base}..feature", "--repo", str(up.path))
    run(series, "apply", "--base", new_base, want=1)
    assert "stopped at 2/" in run(series, "skip", want=1).stdout  # rerere runs at this stop
    ok(series, "skip")
    again = run(series, "apply", "--base", new_base, "--worktree", str(tmp_path / "again"),
                want=1)
    assert "stopped at 1/" in again.stdout, again.stdout + again.stderr
    assert "recorded resolution" not in again.stderr


def test_the_advice_for_a_lost_registration_names_the_worktree(world: World,
                                                               tmp_path: Path) -> None:
    """A tree made with --worktree elsewhere whose registration is gone: the advised apply names
    that --worktree again, and works (hostile10 B9: it left it out)."""
    import shutil

    series = conflicted(world, tmp_path)
    run(series, "abort", want=0)
    elsewhere = tmp_path / "elsewhere"
    run(series, "apply", "--base", world.sc.new_base, "--worktree", str(elsewhere), want=1)
    (admin,) = (series / ".rebasectl" / "upstream.git" / "worktrees").iterdir()
    shutil.rmtree(admin)
    line = one_error(run(series, "continue", want=1).stderr, "registration in the mirror is gone")
    advised = line.split("then `", 1)[1].split("`", 1)[0].split()
    assert advised[-2:] == ["--worktree", str(elsewhere)], line
    ok(series, "abort")
    assert run(series, *advised[1:]).returncode == 1
    assert "<<<<<<< " in (elsewhere / "a.txt").read_text()
