"""Resolving a stopped patch: continue's guards, skip, scratch files, recorded resolutions (rerere
and whole ones) replayed by apply and bump and taken back by forget, conflict lines that
point at markers.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.harness.cli import run
from tests.harness.git import git
from tests.harness.scenes import (
    RESOLVED_A,
    Two,
    World,
    advised,
    conflicted,
    copy_two,
    resolve_a,
    resolve_all,
    tree,
)
from tests.sfix import Scenario, copy


def test_reset_hard_mid_conflict_advice_never_commits_a_revert(
    world: World, tmp_path: Path
) -> None:
    """`git reset --hard HEAD~1` in the work tree mid-conflict: continue advises no `reset --soft`
    for a HEAD that is not built on the tip (doing so would commit patch 1 as a revert of the
    upstream commit); the advised commands (abort, apply --base) stop at patch 1's conflict
    again."""
    series = conflicted(world, tmp_path)
    git(tree(series), "reset", "-q", "--hard", "HEAD~1")
    r = run(series, "continue", want=1)
    assert not [c for c in advised(r.stderr) if "reset --soft" in c], r.stderr
    commands = [c for c in advised(r.stderr) if c.startswith("rebasectl ")]
    assert [c.split()[1] for c in commands] == ["abort", "apply"], r.stderr
    for command in commands:
        last = run(series, *command.split()[1:])
    assert last.returncode == 1, last.stderr
    assert "<<<<<<<" in (tree(series) / "a.txt").read_text()


def test_bump_replays_recorded_resolutions(world: World, tmp_path: Path) -> None:
    """A conflict resolved once (apply --base, resolve, continue: rerere records it) is resolved
    by a later `bump --to` the same revision from the recording, not reported again (the bump's
    rerere runs in a work tree of its own, from the bare mirror)."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    run(series, "continue", want=0)
    r = run(series, "bump", "--to", world.sc.new_base, "--json")
    patch1 = json.loads(r.stdout)["patches"][0]
    # DESIGN's statuses only: clean (nothing left for a person), how the replay did it beside
    assert (patch1["status"], patch1["how"]) == ("clean", "rerere"), (patch1, r.stderr[-500:])
    statuses = {"clean", "conflict", "blocked", "upstreamed", "empty"}
    assert {p["status"] for p in json.loads(r.stdout)["patches"]} <= statuses


def test_forget_takes_back_a_wrong_resolution(world: World, tmp_path: Path) -> None:
    """A resolution committed once (here a wrong one) is replayed by every later `apply --base`
    and bump until `rebasectl forget` takes it back; after it, the conflict stops again for a
    new resolution (no hand deletion of .rebasectl/resolutions/ or rr-cache)."""
    series = conflicted(world, tmp_path)
    (tree(series) / "a.txt").write_text(RESOLVED_A.replace("PATCH 3 + UPSTREAM 3", "WRONG"))
    git(tree(series), "add", "a.txt")
    run(series, "continue", want=0)
    r = run(series, "apply", "--base", world.sc.new_base, want=0)
    assert "recorded" in r.stderr
    helps = [run(series, "--help").stdout]
    for command in ("apply", "continue", "skip", "abort", "bump"):
        helps.append(run(series, command, "--help").stdout)
    text = "\n".join(helps).lower()
    assert "forget" in text or "no-replay" in text or "--no-rerere" in text, (
        "no way to forget a recorded resolution"
    )
    # the way to forget it works: the next apply stops at the conflict again, then records anew
    run(series, "forget", "change-a-line-3", want=0)
    r = run(series, "apply", "--base", world.sc.new_base, want=1)
    assert "<<<<<<<" in (tree(series) / "a.txt").read_text(), r.stderr
    resolve_a(series)
    run(series, "continue", want=0)
    r = run(series, "apply", "--base", world.sc.new_base, want=0)
    assert "PATCH 3 + UPSTREAM 3" in (tree(series) / "a.txt").read_text()


def test_skip_and_continue_keep_scratch_files_out(world: World, tmp_path: Path) -> None:
    """Scratch files (notes.txt, a.txt.orig) during a resolution: continue commits neither, skip
    keeps them on disk."""
    series = conflicted(world, tmp_path)
    (tree(series) / "notes.txt").write_text("notes\n")
    (tree(series) / "a.txt.orig").write_text("orig\n")
    resolve_a(series)
    run(series, "continue", want=0)
    files = git(tree(series), "ls-files").stdout.split()
    assert "notes.txt" not in files and "a.txt.orig" not in files
    assert (tree(series) / "notes.txt").exists()
    s2 = conflicted(world, tmp_path, "s2")
    (tree(s2) / "notes.txt").write_text("notes\n")
    run(s2, "skip", want=0)
    assert (tree(s2) / "notes.txt").read_text() == "notes\n"


def test_continue_refuses_an_untouched_conflict_and_a_users_commit(
    world: World, tmp_path: Path
) -> None:
    """continue refuses an untouched conflict (exit 1) and a `git commit` made instead of `git add`
    (HEAD moved, exit 1 too: the apply stays stopped; the user's commit is not adopted as the
    patch)."""
    series = conflicted(world, tmp_path)
    r = run(series, "continue", want=1)
    assert "a.txt" in r.stderr
    resolve_a(series)
    git(tree(series), "commit", "-q", "-m", "resolved")
    r = run(series, "continue", want=1)
    assert "HEAD moved" in r.stderr
    soft = [c for c in advised(r.stderr) if "reset --soft" in c]
    subprocess.run(soft[0], shell=True, check=True, capture_output=True)
    run(series, "continue", want=0)
    subjects = git(tree(series), "log", "--format=%s", "-5").stdout.splitlines()
    assert "resolved" not in subjects and "[1/5] fix: change a line 3" in subjects


def test_continue_refuses_an_empty_resolution(world: World, tmp_path: Path) -> None:
    """A resolution that keeps upstream's file (nothing of the patch left): continue refuses
    (exit 1, as every refusal that leaves the apply stopped) and names skip and --allow-empty;
    `continue --allow-empty` then works."""
    series = conflicted(world, tmp_path)
    upstream_a = git(world.sc.up.path, "show", f"{world.sc.new_base}:a.txt").stdout
    (tree(series) / "a.txt").write_text(upstream_a)
    git(tree(series), "add", "a.txt")
    r = run(series, "continue", want=1)
    assert "rebasectl skip" in r.stderr and "--allow-empty" in r.stderr
    run(series, "continue", "--allow-empty", want=0)


def test_forget_drops_every_rerere_variant(
    two_conflicts: Two, tmp_path: Path
) -> None:
    """A conflict reached through `continue` (every stop after the first, as patches 2-5 of the
    real June bump) is recorded by rerere as two variants (preimage; preimage.1, postimage.1):
    `rebasectl forget` drops both, so the next `apply --base` stops at that conflict with its
    markers instead of rerere putting the forgotten resolution back."""
    series = copy_two(two_conflicts, tmp_path)
    nb = two_conflicts.new_base
    run(series, "apply", "--base", nb, want=1)
    resolve_all(tree(series) / "a.txt", "P 3 + UP 3\n")
    git(tree(series), "add", "a.txt")
    r = run(series, "continue", want=1)
    assert "stopped at 2/2 two" in r.stdout
    resolve_all(tree(series) / "a.txt", "WRONG 20\n")
    git(tree(series), "add", "a.txt")
    run(series, "continue", want=0)
    r = run(series, "forget", "two", want=0)
    r = run(series, "apply", "--base", nb, want=1)
    text = (tree(series) / "a.txt").read_text()
    assert "WRONG 20" not in text, f"the forgotten resolution came back: {r.stdout}"
    assert "<<<<<<< " in text


def test_conflict_lines_point_at_markers(two_conflicts: Two, tmp_path: Path) -> None:
    """Every `path:line` apply and continue print is the line of a `<<<<<<<` marker."""
    series = copy_two(two_conflicts, tmp_path)
    for step in ("apply", "continue"):
        if step == "apply":
            r = run(series, "apply", "--base", two_conflicts.new_base, want=1)
        else:
            resolve_all(tree(series) / "a.txt", "P 3 + UP 3\n")
            git(tree(series), "add", "a.txt")
            r = run(series, "continue", want=1)
        marked = (tree(series) / "a.txt").read_text().splitlines()
        spots = re.findall(r"a\.txt:(\d+): content conflict", r.stdout)
        assert spots, r.stdout
        for n in spots:
            assert marked[int(n) - 1].startswith("<<<<<<< "), (step, n)


def test_conflict_resolved_by_rerere_is_committed_and_said(sc: Scenario, tmp_path: Path) -> None:
    """When rerere resolves every file of the stopped patch (its whole-resolution record not
    matching), the patch is committed and the apply goes on, saying so (docs/design.md), never a
    stop that asks to edit markers that are not there."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--base", sc.new_base, want=1)
    resolve_all(tree(series) / "a.txt", "PATCH 3 + UPSTREAM 3\n")
    git(tree(series), "add", "a.txt")
    run(series, "continue", want=0)
    for record in (series / ".rebasectl" / "resolutions").glob("*.json"):
        record.unlink()
    r = run(series, "apply", "--base", sc.new_base)
    text = (tree(series) / "a.txt").read_text()
    if r.returncode == 1:  # stopped: then there must be something to edit, as the message says
        said = (r.stdout + r.stderr).replace(str(tmp_path), "TMP")
        assert "<<<<<<< " in text or "rerere" in said, (r.stdout, r.stderr)
    else:
        assert r.returncode == 0 and "PATCH 3 + UPSTREAM 3" in text, (r.stdout, r.stderr)


def test_a_branch_checked_out_at_a_stop_is_said_to_stay(world: World, tmp_path: Path) -> None:
    """The person checked out a branch of their own at the stop: continue goes on detached, as
    rebasectl keeps its tree, and says the branch stays where it is, with the command that
    moves it, which works (hostile9 F10: the branch was left behind without a word)."""
    series = conflicted(world, tmp_path)
    git(tree(series), "switch", "-q", "-c", "mine")
    at = git(tree(series), "rev-parse", "HEAD").stdout.strip()
    resolve_a(series)
    r = run(series, "continue", want=0)
    assert f"HEAD was on your branch mine: the apply goes on with HEAD detached and mine stays " \
        f"at {at[:12]}" in r.stderr, r.stderr
    assert git(tree(series), "rev-parse", "mine").stdout.strip() == at
    (advice,) = re.findall(r"`(git -C \S+ branch -f mine HEAD)`", r.stderr)
    subprocess.run(advice.split(), check=True)
    assert git(tree(series), "rev-parse", "mine").stdout.strip() == \
        git(tree(series), "rev-parse", "HEAD").stdout.strip()
