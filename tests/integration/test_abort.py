"""abort keeps what only the removed work tree held, and its advice works: a commit the person
made there comes back with the `git am` abort names; untracked and ignored files are moved to
the folder it prints; nothing is said about commits when there were none."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from tests.harness.cli import run
from tests.harness.cli import run as rebasectl
from tests.harness.git import git_out
from tests.harness.scenes import Two, World, advised, applied, conflicted, copy_two, tree
from tests.sfix import Scenario, copy


def test_abort_says_only_what_it_kept(sc: Scenario, tmp_path: Path) -> None:
    series = copy(sc, tmp_path)
    assert rebasectl(series, "apply", "--base", sc.new_base).returncode == 1
    (series / ".rebasectl" / "tree" / "NOTES.md").write_text("notes\n")
    r = rebasectl(series, "abort")
    assert r.returncode == 0, r.stderr
    assert "kept 1 untracked file(s) of the removed work tree in" in r.stdout
    assert "commit" not in r.stdout
    kept = Path(r.stdout.split(" in ")[-1].strip())
    assert (kept / "untracked" / "NOTES.md").read_text() == "notes\n"
    assert not (kept / "commits").exists()


def test_abort_of_a_tree_with_a_person_s_commit(sc: Scenario, tmp_path: Path) -> None:
    series = copy(sc, tmp_path)
    assert rebasectl(series, "apply", "--base", sc.new_base).returncode == 1
    tree = series / ".rebasectl" / "tree"
    tip = git_out(tree, "rev-parse", "HEAD")
    (tree / "mine.txt").write_text("my work\n")
    (tree / "backup~").write_text("editor backup\n")
    (tree / ".gitignore").write_text("*~\n")
    (tree / "a.txt").write_text("resolved by hand, then committed instead of continued\n")
    git_out(tree, "add", "mine.txt", "a.txt")
    git_out(
        tree,
        "-c",
        "user.name=Me",
        "-c",
        "user.email=me@example.com",
        "commit",
        "-q",
        "-m",
        "wip: my work",
    )
    r = rebasectl(series, "abort")
    assert r.returncode == 0, r.stderr
    found = re.search(r" in (\S+) \(", r.stdout)
    assert found, r.stdout
    kept = Path(found.group(1))
    assert "1 commit(s)" in r.stdout and "`git am` the commits in commits/" in r.stdout
    assert (kept / "untracked" / "backup~").read_text() == "editor backup\n"
    assert (kept / "untracked" / ".gitignore").exists()
    # the advice, followed: a checkout of the tip takes the kept commit with `git am`
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(series / ".rebasectl" / "upstream.git"), str(clone)], check=True
    )
    git_out(clone, "checkout", "-q", "--detach", sc.new_base)
    patches = sorted((kept / "commits").glob("*.patch"))
    assert len(patches) == 1
    git_out(
        clone,
        "-c",
        "user.name=Me",
        "-c",
        "user.email=me@example.com",
        "am",
        "-q",
        *map(str, patches),
    )
    assert (clone / "mine.txt").read_text() == "my work\n"
    assert git_out(clone, "log", "-1", "--format=%s") == "wip: my work"
    assert git_out(clone, "rev-parse", "HEAD~1") == tip  # only the person's commit was kept


# -- what abort keeps --
def test_abort_keeps_untracked_files(world: World, tmp_path: Path) -> None:
    """Notes written in the work tree during a resolution (untracked) are never deleted unseen by
    abort: it keeps them (somewhere in the checkout) or refuses."""
    series = conflicted(world, tmp_path)
    (tree(series) / "NOTES.md").write_text("my notes on the resolution\n")
    r = run(series, "abort")
    kept = [
        p
        for p in series.rglob("*")
        if p.is_file() and p.read_bytes() == b"my notes on the resolution\n"
    ]
    assert kept or r.returncode != 0, "abort deleted the untracked NOTES.md"


def test_abort_keeps_ignored_files(
    two_conflicts: Two, tmp_path: Path
) -> None:
    """abort keeps the untracked files of the tree it removes under .rebasectl/aborted/, those the
    upstream's .gitignore covers included (Megatron-LM ignores `local/`, `logs`, `runs/`, `*~`,
    `*.swp`: notes kept in local/ during a resolution, an editor's backup of the file being
    resolved)."""
    series = copy_two(two_conflicts, tmp_path)
    run(series, "apply", "--base", two_conflicts.new_base, want=1)
    (tree(series) / "local").mkdir()
    (tree(series) / "local" / "notes.md").write_text("how I resolved a.txt\n")
    (tree(series) / "a.txt~").write_text("my half-done resolution\n")
    run(series, "abort", want=0)
    kept = [p.name for p in (series / ".rebasectl" / "aborted").rglob("*") if p.is_file()]
    assert "notes.md" in kept and "a.txt~" in kept, kept


# -- abort puts back the work tree the apply replaced (hostile5 finding 3) -------------------------
def _apply_over_an_applied_tree(world: World, tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """An applied checkout (its tree at the series tip, as `apply --install` leaves it), then an
    apply onto new_base that stops: (series, the old tip, the old tree's files)."""
    series = applied(world, tmp_path)
    old_tip = git_out(tree(series), "rev-parse", "HEAD")
    files = {p: (tree(series) / p).read_text()
             for p in git_out(tree(series), "ls-files").splitlines()}
    run(series, "apply", "--base", world.sc.new_base, want=1)
    assert git_out(tree(series), "rev-parse", "HEAD") != old_tip
    return series, old_tip, files


def test_abort_puts_back_the_tree_the_apply_replaced(world: World, tmp_path: Path) -> None:
    """abort deleted the tree that was there before the apply (breaking the `import megatron`
    an `apply --install` had set up, which names that path). Now the tree is back, at the same
    path and commit, clean, and the commands that use it work as before."""
    series, old_tip, files = _apply_over_an_applied_tree(world, tmp_path)
    r = run(series, "abort", want=0)
    assert f"put {tree(series)} back at {old_tip[:12]}" in r.stdout, r.stdout
    assert "removed" not in r.stdout, r.stdout
    assert git_out(tree(series), "rev-parse", "HEAD") == old_tip
    assert git_out(tree(series), "status", "--porcelain") == ""
    assert {p: (tree(series) / p).read_text() for p in files} == files
    assert (series / ".rebasectl" / "tree.json").is_file()
    run(series, "export", want=0)  # the map still names the tree: nothing to export, no error
    run(series, "apply", "--base", world.sc.new_base, want=1)  # and it is replaceable again


def test_abort_names_the_apply_that_makes_a_lost_tree_again(world: World,
                                                            tmp_path: Path) -> None:
    """When the replaced tree's commit is gone from the mirror (here: the map names a commit
    the mirror never had), abort cannot put it back; its line names the apply that makes it
    again, and following it does (the same commit: applies are deterministic)."""
    series, old_tip, files = _apply_over_an_applied_tree(world, tmp_path)
    tmap = series / ".rebasectl" / "tree.json"
    data = json.loads(tmap.read_text())
    data["commits"][-1][1] = "0" * 40
    tmap.write_text(json.dumps(data))
    r = run(series, "abort", want=0)
    advice = [line for line in r.stdout.splitlines() if "makes it again" in line]
    assert len(advice) == 1, r.stdout
    (command,) = advised(advice[0])
    assert command.startswith("rebasectl apply --base "), command
    run(series, *shlex.split(command)[1:], want=0)
    assert git_out(tree(series), "rev-parse", "HEAD") == old_tip
    assert {p: (tree(series) / p).read_text() for p in files} == files


def test_abort_keeps_an_empty_commit_with_its_message(sc: Scenario, tmp_path: Path) -> None:
    """An empty commit of the person's (a marker, a note to self) was kept as an empty file:
    format-patch leaves empty commits out unless told, and the message was lost. It is kept
    whole, and the advice (`git am --allow-empty`) brings it back."""
    series = copy(sc, tmp_path)
    assert rebasectl(series, "apply", "--base", sc.new_base).returncode == 1
    tree = series / ".rebasectl" / "tree"
    tip = git_out(tree, "rev-parse", "HEAD")
    git_out(tree, "reset", "-q", "--hard")  # the stop given up by hand: the commit is empty
    git_out(tree, "-c", "user.name=Me", "-c", "user.email=me@example.com", "commit", "-q",
            "--allow-empty", "-m", "note: look at a.txt again", "-m", "before the bump")
    r = rebasectl(series, "abort")
    assert r.returncode == 0 and "where it stops at an empty one, `git am --allow-empty` " \
        "records it" in r.stdout, r.stdout
    found = re.search(r" in (\S+) \(", r.stdout)
    assert found, r.stdout
    (patch,) = sorted((Path(found.group(1)) / "commits").glob("*.patch"))
    assert b"look at a.txt again" in patch.read_bytes()
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(series / ".rebasectl" / "upstream.git"),
                    str(clone)], check=True)
    git_out(clone, "checkout", "-q", "--detach", tip)
    who = ["-c", "user.name=Me", "-c", "user.email=me@example.com"]
    stopped = subprocess.run(["git", "-C", str(clone), *who, "am", "-q", str(patch)],
                             capture_output=True, text=True)
    assert stopped.returncode != 0 and "Patch is empty" in stopped.stdout + stopped.stderr
    git_out(clone, *who, "am", "--allow-empty")
    assert git_out(clone, "log", "-1", "--format=%s%n%n%b").startswith(
        "note: look at a.txt again\n\nbefore the bump")
    assert git_out(clone, "rev-parse", "HEAD~1") == tip
