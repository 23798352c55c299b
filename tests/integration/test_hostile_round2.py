"""Hostile round 2 (after the core rewrite, issues 15 and 18): one test per finding, plus guards
for what already holds.

Every finding test names its finding (``F<n>``) in its docstring and was seen failing on main at
d7c6fd9; the guard tests (``G<n>``) pass there and pin the fixes of issue 15/18. Synthetic
scenario: tests/sfix.py (patch 1 conflicts on ``new_base``; ``clean`` is an upstream commit on
which every patch applies). The tests at the end use the real mirror
(REBASECTL_MEGATRON_MIRROR) and skip without it.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.conftest import real_mirror
from tests.sfix import Scenario, copy, module_hermetic_git, snapshot, template_fixture
from tests.synth import Repo, lines, rebasectl

ROOT = Path(__file__).resolve().parents[2]
RESOLVED_A = lines(40, "a").replace("a 3\n", "PATCH 3 + UPSTREAM 3\n").replace("a 33\n", "UP 33\n")


@dataclass
class World:
    sc: Scenario
    clean: str  # an upstream commit on the base on which every patch applies


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    gen = template_fixture(tmp_path_factory, "round2")
    sc = next(gen)
    sc.up.checkout("-q", "-b", "clean-target", sc.base)
    clean = sc.up.commit("upstream: unrelated", {"z.txt": "z\n"})
    sc.up.checkout("main")
    yield World(sc, clean)
    gen.close()


def git(
    path: Path, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["git", "-C", str(path), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if check:
        assert proc.returncode == 0, (args, proc.stderr)
    return proc


def tree(series: Path) -> Path:
    return series / ".rebasectl" / "tree"


def run(
    series: Path, *args: str, want: int | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    r = rebasectl(series, *args, env=env)
    if want is not None:
        assert r.returncode == want, (args, r.returncode, r.stdout, r.stderr)
    return r


def conflicted(world: World, tmp_path: Path, name: str = "series") -> Path:
    """A series checkout stopped at patch 1's conflict on new_base."""
    series = tmp_path / name
    shutil.copytree(world.sc.series, series)
    run(series, "apply", "--base", world.sc.new_base, want=1)
    return series


def applied(world: World, tmp_path: Path, name: str = "series") -> Path:
    series = tmp_path / name
    shutil.copytree(world.sc.series, series)
    run(series, "apply", want=0)
    return series


def resolve_a(series: Path, add: bool = True) -> None:
    (tree(series) / "a.txt").write_text(RESOLVED_A)
    if add:
        git(tree(series), "add", "a.txt")


def commit_in(path: Path, message: str, files: dict[str, str]) -> str:
    for rel, text in files.items():
        (path / rel).write_text(text)
        git(path, "add", rel)
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD").stdout.strip()


def advised(message: str) -> list[str]:
    """The commands a message tells the user to run (text in backticks)."""
    return re.findall(r"`([^`]+)`", message)


# == findings ======================================================================================
def test_f1_forged_artifacts_mark_deletes_nothing_outside(world: World, tmp_path: Path) -> None:
    """F1: a `.rebasectl-artifacts.json` (a folder downloaded from CI, a tampered default
    `.rebasectl/bump`) that lists an absolute path or `../..` makes a bump delete those files,
    and rmdir their emptied folder, outside the artifacts folder."""
    series = copy(world.sc, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    vdir = tmp_path / "victimdir"
    vdir.mkdir()
    (vdir / "f.txt").write_text("precious\n")
    art = series / "art"
    art.mkdir()
    (art / ".rebasectl-artifacts.json").write_text(
        json.dumps({"tool": "rebasectl", "files": [str(victim), "../../victimdir/f.txt"]})
    )
    run(series, "bump", "--to", world.sc.new_base, "--artifacts", "art")
    assert victim.read_text() == "precious\n"
    assert (vdir / "f.txt").read_text() == "precious\n"


def test_f2_clean_bump_fails_after_moving_the_series(world: World, tmp_path: Path) -> None:
    """F2: artifacts folder of an earlier (conflicting) bump, in which the user saved a
    report.md: a clean bump exports (series.yaml moves to the new base), then refuses to
    overwrite report.md and exits 2 — a failed command that changed the series."""
    series = copy(world.sc, tmp_path)
    run(series, "bump", "--to", world.sc.new_base, "--artifacts", "art", want=1)
    (series / "art" / "report.md").write_text("my notes\n")
    before = snapshot(series)
    r = run(series, "bump", "--to", world.clean, "--artifacts", "art")
    assert (series / "art" / "report.md").read_text() == "my notes\n"
    if r.returncode != 0:
        assert snapshot(series) == before, f"exit {r.returncode} but the series changed: {r.stderr}"


def test_f3a_abort_in_moved_checkout_spares_the_new_checkout(world: World, tmp_path: Path) -> None:
    """F3a: `mv series series.old` mid-conflict, a fresh checkout at the old path with an
    unexported commit in its work tree; `rebasectl -C series.old abort` deletes the NEW
    checkout's work tree (and the commit with it), printing "aborted; removed <new path>"."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "series.old"
    old.rename(moved)
    fresh = applied(world, tmp_path)  # at the old path
    work = commit_in(tree(fresh), "my unexported work", {"work.txt": "precious\n"})
    run(moved, "abort")
    assert (tree(fresh) / "work.txt").read_text() == "precious\n"
    assert git(tree(fresh), "rev-parse", "HEAD").stdout.strip() == work


def test_f3b_continue_in_moved_checkout_spares_the_new_checkout(
    world: World, tmp_path: Path
) -> None:
    """F3b: as F3a, but `continue` in the moved checkout: it checks out its base in the NEW
    checkout's work tree (HEAD moved off the user's commit, work.txt gone from disk) and writes
    its conflict there."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "series.old"
    old.rename(moved)
    fresh = applied(world, tmp_path)
    work = commit_in(tree(fresh), "my unexported work", {"work.txt": "precious\n"})
    run(moved, "continue")
    assert git(tree(fresh), "rev-parse", "HEAD").stdout.strip() == work
    assert (tree(fresh) / "work.txt").read_text() == "precious\n"
    assert git(tree(fresh), "status", "--porcelain").stdout == ""


def test_f3c_moved_checkout_continue_keeps_resolution(world: World, tmp_path: Path) -> None:
    """F3c: `mv` of the checkout mid-conflict, then the resolution edited in the moved work
    tree: `continue` re-creates a work tree at the OLD path (outside the checkout), reports a
    fresh conflict there and ignores the resolution."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "moved"
    old.rename(moved)
    resolve_a(moved, add=False)  # git itself no longer works in the moved tree
    run(moved, "continue")
    assert not old.exists(), f"continue created {old}"
    head = git(tree(moved), "show", "HEAD:a.txt", check=False).stdout
    on_disk = (tree(moved) / "a.txt").read_text()
    assert RESOLVED_A in (head, on_disk), "the resolution in the moved work tree is gone"


def test_f3d_moved_checkout_abort_then_apply(world: World, tmp_path: Path) -> None:
    """F3d: after `mv` mid-conflict, `abort` then `apply` must work with no hand work; apply
    fails "…/.rebasectl/tree is a git repository that rebasectl did not make; pick another
    --worktree"."""
    old = conflicted(world, tmp_path)
    moved = tmp_path / "moved"
    old.rename(moved)
    run(moved, "abort", want=0)
    run(moved, "apply", want=0)
    assert not old.exists(), f"abort/apply created {old}"


def test_f4_reset_hard_then_the_advice_commits_a_revert(world: World, tmp_path: Path) -> None:
    """F4: `git reset --hard HEAD~1` in the work tree mid-conflict; continue advised `git -C …
    reset --soft <tip>` ("keeps your resolution staged"); doing so and continuing committed
    patch 1 as a revert of the upstream commit (UP 33 -> a 33) without its own change, exit 0.
    Now: no `reset --soft` for a HEAD that is not built on the tip; the advised commands
    (abort, apply --base) stop at patch 1's conflict again."""
    series = conflicted(world, tmp_path)
    git(tree(series), "reset", "-q", "--hard", "HEAD~1")
    r = run(series, "continue", want=2)
    assert not [c for c in advised(r.stderr) if "reset --soft" in c], r.stderr
    commands = [c for c in advised(r.stderr) if c.startswith("rebasectl ")]
    assert [c.split()[1] for c in commands] == ["abort", "apply"], r.stderr
    for command in commands:
        last = run(series, *command.split()[1:])
    assert last.returncode == 1, last.stderr
    assert "<<<<<<<" in (tree(series) / "a.txt").read_text()


def test_f5_export_drops_a_patch_named_in_another_message(world: World, tmp_path: Path) -> None:
    """F5: patch add-e dropped in the work tree (git rebase -i `drop`) while a later patch's
    message mentions its subject: export calls it "folded into change-a-line-30 (absorbs:
    add-e)", deletes patches/0002-add-e.patch and its entry without --drop, exit 0; the survivor
    holds none of its change (e.txt)."""
    series = applied(world, tmp_path)
    wt = tree(series)
    git(
        wt,
        "commit",
        "-q",
        "--amend",
        "-m",
        "feat: change a line 30\n\nIndependent of 'feat: add e', which we used to need.\n",
    )
    git(wt, "rebase", "-q", "-i", "HEAD~4", env={"GIT_SEQUENCE_EDITOR": "sed -i '1s/^pick/drop/'"})
    r = run(series, "export")
    assert (series / "patches" / "0002-add-e.patch").exists(), r.stdout
    assert "id: add-e" in (series / "series.yaml").read_text()
    assert r.returncode == 1, (r.stdout, r.stderr)


def test_f6_skip_killed_after_its_state_save(world: World, tmp_path: Path) -> None:
    """F6: skip SIGKILLed right after it saved "patch 1 skipped" and before it reset the work
    tree (REBASECTL_FAULT=kill@state:1; the random kill trials hit it 4 times in 20): every
    `continue` fails "git read-tree failed: fatal: You need to resolve your current index
    first" (exit 2)."""
    series = conflicted(world, tmp_path)
    r = run(series, "skip", env={"REBASECTL_FAULT": "kill@state:1"})
    assert r.returncode == -9, r.stderr
    run(series, "continue", want=0)
    assert git(tree(series), "status", "--porcelain").stdout == ""


GIT_KILLED_IN_WORKTREE_REMOVE = """#!/bin/sh
# a `git worktree remove` SIGKILLed after it deleted the work tree's .git, before the rest
for last; do :; done
case " $* " in *" worktree remove "*) rm -f "$last/.git"; kill -9 $PPID; exit 137;; esac
exec {git} "$@"
"""


def test_f7_apply_killed_while_removing_the_old_tree(world: World, tmp_path: Path) -> None:
    """F7: apply --base SIGKILLed (or Ctrl-C) while `git worktree remove` deletes the previous
    work tree (the kill trials hit it 5 times in 20): the rerun and continue fail "git worktree
    failed: fatal: '…/.rebasectl/tree' already exists"; abort prints "aborted; removed …/tree"
    but leaves it; then every apply fails "…/tree exists and is not a rebasectl work tree"."""
    series = applied(world, tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text(GIT_KILLED_IN_WORKTREE_REMOVE.format(git=shutil.which("git")))
    fake.chmod(0o755)
    r = run(
        series,
        "apply",
        "--base",
        world.sc.new_base,
        env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"},
    )
    assert r.returncode == -9, r.stderr
    r = run(series, "apply", "--base", world.sc.new_base)
    if "apply is in progress" in r.stderr:
        r = run(series, "continue")
    assert r.returncode == 1, r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


def test_f8_unreadable_apply_state_abort_clears_it(world: World, tmp_path: Path) -> None:
    """F8: an unreadable apply-state.json: every command (status included) says "`rebasectl
    abort` clears it", and abort fails with that same message (exit 2)."""
    series = conflicted(world, tmp_path)
    (series / ".rebasectl" / "apply-state.json").write_text("{garbage")
    r = run(series, "status", want=2)
    assert "rebasectl abort" in r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


def test_f9_unreadable_tree_map_abort_clears_it(world: World, tmp_path: Path) -> None:
    """F9: an unreadable tree.json (wrong types): apply, export and test say "`rebasectl abort`
    clears it"; abort says "no apply in progress" (exit 2) and leaves it, so apply stays
    refused."""
    series = applied(world, tmp_path)
    (series / ".rebasectl" / "tree.json").write_text("[1, 2]")
    r = run(series, "apply", want=2)
    assert "`rebasectl abort` clears it" in r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


def test_f10_second_worktree_blocks_the_default_one(world: World, tmp_path: Path) -> None:
    """F10: apply, then `apply --base CLEAN --worktree ../wt2`, export: from then on `apply`
    (and bump) refuse ".rebasectl/tree has changes or commits that were not exported:
    `rebasectl export` them, or remove the work tree" — export succeeds and changes nothing,
    abort says "no apply in progress": only a hand `rm` gets out."""
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


def test_f11_duplicate_file_spelled_dot_slash(world: World, tmp_path: Path) -> None:
    """F11: `file: ./0002-add-e.patch` for a second entry passes `check` (exit 0, "5 patches:
    ok"); apply then says "touch-b: every conflict resolved by a recorded resolution (rerere);
    committed" and in the same run fails "the resolution leaves nothing of the patch" (exit 2)."""
    series = copy(world.sc, tmp_path)
    text = (series / "series.yaml").read_text()
    text = text.replace("file: 0003-touch-b.patch", "file: ./0002-add-e.patch")
    text = text.replace("title: 'compat: touch b'", "title: 'feat: add e'")
    (series / "series.yaml").write_text(text)
    r = run(series, "check")
    assert r.returncode == 2 and "twice" in r.stderr, (r.returncode, r.stdout, r.stderr)


def test_f12_mirror_gone_mid_conflict_advice_loops(world: World, tmp_path: Path) -> None:
    """F12: .rebasectl/upstream.git removed during a conflict: continue says "no upstream
    mirror: run `rebasectl apply --upstream URL|PATH` first"; that apply fails "an apply is in
    progress: `rebasectl continue`, `skip` or `abort` it" (exit 2)."""
    series = conflicted(world, tmp_path)
    shutil.rmtree(series / ".rebasectl" / "upstream.git")
    r = run(series, "continue", want=2)
    for command in advised(r.stderr):
        if command.startswith("rebasectl "):
            args = command.replace("URL|PATH", str(world.sc.up.path)).split()[1:]
            r2 = run(series, *args)
            assert r2.returncode != 2, (command, r2.stderr)


def test_f13_abort_claims_removing_what_it_left(world: World, tmp_path: Path) -> None:
    """F13: apply-state.json naming another directory (/tmp/victim): abort rightly leaves it,
    but prints "aborted; removed <victim>", and leaves the real .rebasectl/tree behind."""
    series = conflicted(world, tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f.txt").write_text("precious\n")
    state = series / ".rebasectl" / "apply-state.json"
    data = json.loads(state.read_text())
    data["worktree"] = str(victim)
    state.write_text(json.dumps(data))
    r = run(series, "abort")
    assert (victim / "f.txt").read_text() == "precious\n"
    assert f"removed {victim}" not in r.stdout + r.stderr


def test_f14_abort_deletes_untracked_files(world: World, tmp_path: Path) -> None:
    """F14: notes written in the work tree during a resolution (untracked): abort removes the
    whole work tree with them, without a word (apply and skip refuse or keep such files)."""
    series = conflicted(world, tmp_path)
    (tree(series) / "NOTES.md").write_text("my notes on the resolution\n")
    r = run(series, "abort")
    kept = [
        p
        for p in series.rglob("*")
        if p.is_file() and p.read_bytes() == b"my notes on the resolution\n"
    ]
    assert kept or r.returncode != 0, "abort deleted the untracked NOTES.md"


def test_f15_non_ascii_conflict_path_on_ascii_terminal(tmp_path: Path) -> None:
    """F15: PYTHONIOENCODING=ascii, a conflict in `ä.txt`: apply stops at the conflict (state
    saved, apply in progress) but exits 2 "cannot print in this terminal's encoding" — a script
    reads "bad input, nothing done"."""
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


def test_f16_large_series_yaml_is_slow(world: World, tmp_path: Path) -> None:
    """F16: a 4 MB series.yaml (30 000 entries) with a duplicate file at line 53: `check` takes
    12.9 s of CPU (24 s wall on 2 busy cores) to say so; a 5.4 MB one with one long `why:`
    6 s. (pure-Python yaml.compose; libyaml is installed)."""
    series = copy(world.sc, tmp_path)
    entry = (
        "- id: p{i}\n  file: 0001-change-a-line-3.patch\n  title: t\n  kind: fix\n"
        "  why: ''\n  upstream: null\n  drop_when: null\n  absorbs: []\n  tests: []\n"
    )
    with (series / "series.yaml").open("a") as fh:
        for i in range(30000):
            fh.write(entry.format(i=i))
    assert (series / "series.yaml").stat().st_size > 4_000_000
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = run(series, "check", want=2)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert "listed twice" in r.stderr
    assert cpu < 4.0, f"check of a 4 MB series.yaml took {cpu:.1f} s of CPU"


def test_f17_git_am_k_applies_exported_crlf_patches(tmp_path: Path) -> None:
    """F17: README said "`git am -k` applies them too" — not a patch whose content has CRLF
    lines (carried byte for byte, rightly): `git am -k` fails "patch does not apply" (it needs
    --keep-cr). The README now gives the command that works; this runs that command."""
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"`(git am [^`]+)` applies them too", readme)
    assert command, "README no longer says how to git am the patches"
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"crlf.txt": "x\r\ny\r\n"})
    up.branch("feature")
    up.checkout("feature")
    up.commit("crlf change", {"crlf.txt": "x\r\nY changed\r\n"})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(up.path), str(clone))
    git(clone, "checkout", "-q", base)
    patch = next((series / "patches").glob("*.patch"))
    r = git(clone, *command.group(1).split()[1:], "-q", str(patch), check=False)
    assert r.returncode == 0, r.stderr


def test_f19_bump_replays_recorded_resolutions(world: World, tmp_path: Path) -> None:
    """F19: a conflict resolved once (apply --base, resolve, continue: rerere records it, and
    a second `apply --base` replays it) is reported again by `bump --to` the same revision as
    a conflict: the bump's rerere runs `git --work-tree TMP rerere` from the bare mirror and git
    says "error: could not open 'a.txt'", so it never resolves anything (issue 18: "after abort,
    the same bump replays the recorded resolutions")."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    run(series, "continue", want=0)
    r = run(series, "bump", "--to", world.sc.new_base, "--json")
    patch1 = json.loads(r.stdout)["patches"][0]
    assert patch1["status"] == "resolved", (patch1["status"], r.stderr[-500:])


def test_f22_a_wrong_resolution_cannot_be_forgotten(world: World, tmp_path: Path) -> None:
    """F22 (new in 380f5d6, resolutions remembered whole): a resolution committed once (here a
    wrong one) is replayed by every later `apply --base`/bump ("resolved as recorded at an
    earlier apply"), and no command or option forgets it (git has `rerere forget`): to redo the
    resolution the user must delete .rebasectl/resolutions/ (and rr-cache) by hand."""
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


GIT_CTRL_C_IN_FAST_IMPORT = """#!/bin/sh
# Ctrl-C while git fast-import reads the commits: rebasectl gets SIGINT while it writes the
# stream, then fast-import dies of the same SIGINT (the order forced, the outcome as a terminal's)
case " $* " in *" fast-import "*)
  trap '' INT; sleep 0.5; kill -INT $PPID; sleep 1; trap - INT; kill -INT $$; exit 1;;
esac
exec {git} "$@"
"""


def test_f21_ctrl_c_during_fast_import_is_exit_2(tmp_path: Path) -> None:
    """F21 (new with git fast-import, 3c7f669): Ctrl-C while fast-import takes the commits (the
    kill trials: 5 of 31 SIGINTs, in apply --base, continue and bump): exit 2 "git fast-import
    failed: exit -2" instead of 130 "interrupted" (stream.close() in a `finally` raises over the
    Interrupted)."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": "a\n"})
    up.branch("feature")
    up.checkout("feature")
    up.commit("feat: a big file", {"big.txt": lines(200_000)})  # more than a pipe holds
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    run(series, "fetch", "--upstream", str(up.path), want=0)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text(GIT_CTRL_C_IN_FAST_IMPORT.format(git=shutil.which("git")))
    fake.chmod(0o755)
    r = subprocess.run(
        [shutil.which("rebasectl") or "rebasectl", "-C", str(series), "apply"],
        env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        start_new_session=True,
        check=False,
    )
    assert r.returncode == 130, (r.returncode, r.stderr)
    assert "interrupted" in r.stderr


def test_f20_python_applier_accepts_what_git_apply_refuses(tmp_path: Path) -> None:
    """F20 (new in 3c7f669, the Python applier): a patch with two hunks whose contexts meet
    once upstream deleted the code between them: `git apply` refuses it (a hunk may not match
    lines an earlier hunk wrote: git's LINE_PATCHED rule; `git am` fails), but `check --apply`
    says "applies exactly on the base" and `apply` calls it "clean". A fuzz of 5000 random
    cases found 2 such false "applies" (and 7 false "does not apply" around `\\ No newline`)."""
    o = (
        "def a():\n    x = 1\n    return x\n\n\ndef b():\n    y = 2\n    return y\n\n\n"
        "def c():\n    z = 3\n    return z\n"
    )
    up = Repo(tmp_path / "up")
    base = up.commit("O", {"m.py": o})
    up.branch("feature")
    new = up.commit(
        "upstream: drop b", {"m.py": o.replace("def b():\n    y = 2\n    return y\n\n\n", "")}
    )
    up.checkout("feature")
    up.commit("patch: x and z", {"m.py": o.replace("x = 1", "x = 10").replace("z = 3", "z = 30")})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    patch = next((series / "patches").glob("*.patch"))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(up.path), str(clone))
    git(clone, "checkout", "-q", new)
    assert git(clone, "apply", "--check", str(patch), check=False).returncode != 0
    r = run(series, "apply", "--base", new, "--json")
    status = json.loads(r.stdout)["patches"][0]["status"]
    assert status != "clean", "rebasectl applied as clean a patch `git apply` refuses"


# == guards: what issue 15/18 asked and now holds ==================================================
@pytest.mark.parametrize("where", ["art", "."])
def test_g1_artifacts_never_in_a_users_folder(world: World, tmp_path: Path, where: str) -> None:
    """G1: --artifacts at a folder with the user's README.md and conflicts/keep.txt (or `.`):
    refused, nothing touched."""
    series = copy(world.sc, tmp_path)
    folder = series / where
    (folder / "conflicts").mkdir(parents=True)
    (folder / "README.md").write_text("mine\n")
    (folder / "conflicts" / "keep.txt").write_text("keep\n")
    before = snapshot(series)
    r = run(series, "bump", "--to", world.sc.new_base, "--artifacts", where, want=2)
    assert "rebasectl did not write" in r.stderr
    assert (folder / "README.md").read_text() == "mine\n"
    assert (folder / "conflicts" / "keep.txt").read_text() == "keep\n"
    assert snapshot(series) == before


@pytest.mark.parametrize("how", ["apply", "apply-base", "bump-clean"])
def test_g2_untracked_files_stop_apply_and_bump(world: World, tmp_path: Path, how: str) -> None:
    """G2: an untracked file in the finished work tree stops a rerun of apply, apply --base and
    a clean bump (listed, exit 2) and survives."""
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


def test_g3_skip_and_continue_keep_scratch_files_out(world: World, tmp_path: Path) -> None:
    """G3: scratch files (notes.txt, a.txt.orig) during a resolution: continue commits neither,
    skip keeps them on disk."""
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


def test_g4_plain_diff_patch_refused_or_kept(world: World, tmp_path: Path) -> None:
    """G4: a `diff -u` patch with no mail header is refused (exit 2); with a mail header its
    content survives apply + export."""
    series = copy(world.sc, tmp_path)
    plain = (
        "--- a/b.txt\t2026-01-01 00:00:00\n+++ b/b.txt\t2026-01-01 00:00:00\n"
        "@@ -4,3 +4,3 @@\n b 4\n-b 5\n+PLAIN 5\n b 6\n"
    )
    (series / "patches" / "0006-plain.patch").write_text(plain)
    with (series / "series.yaml").open("a") as fh:
        fh.write(
            "- id: plain\n  file: 0006-plain.patch\n  title: plain diff\n  kind: fix\n"
            "  why: ''\n  upstream: null\n  drop_when: null\n  absorbs: []\n  tests: []\n"
        )
    run(series, "check", want=2)
    (series / "patches" / "0006-plain.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Q <q@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: plain diff\n\n"
        "body\n---\n" + plain
    )
    run(series, "apply", want=0)
    assert "PLAIN 5" in (tree(series) / "b.txt").read_text()
    run(series, "export", want=0)
    assert "+PLAIN 5" in (series / "patches" / "0006-plain.patch").read_text()
    run(series, "check", "--apply", want=0)


def test_g5_tampered_journal_and_lock(world: World, tmp_path: Path) -> None:
    """G5: an export journal naming a file outside the checkout, and `lock` as a symlink: both
    refused, the outside files untouched."""
    series = applied(world, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    txn = series / ".rebasectl" / "txn"
    (txn / "staged").mkdir(parents=True)
    (txn / "staged" / "00000").write_text("evil\n")
    (txn / "journal.json").write_text(
        json.dumps({"moves": [["staged/00000", f"../{victim.name}"]], "deletes": [str(victim)]})
    )
    run(series, "status", want=2)
    assert victim.read_text() == "precious\n"
    shutil.rmtree(txn)
    lock = series / ".rebasectl" / "lock"
    lock.unlink()
    lock.symlink_to(victim)
    run(series, "status")
    run(series, "apply", want=2)
    assert victim.read_text() == "precious\n"


def test_g6_continue_guards(world: World, tmp_path: Path) -> None:
    """G6: continue refuses an untouched conflict (exit 1) and a `git commit` made instead of
    `git add` (HEAD moved, exit 2; the user's commit is not adopted as the patch)."""
    series = conflicted(world, tmp_path)
    r = run(series, "continue", want=1)
    assert "a.txt" in r.stderr
    resolve_a(series)
    git(tree(series), "commit", "-q", "-m", "resolved")
    r = run(series, "continue", want=2)
    assert "HEAD moved" in r.stderr
    soft = [c for c in advised(r.stderr) if "reset --soft" in c]
    subprocess.run(soft[0], shell=True, check=True, capture_output=True)
    run(series, "continue", want=0)
    subjects = git(tree(series), "log", "--format=%s", "-5").stdout.splitlines()
    assert "resolved" not in subjects and "[1/5] fix: change a line 3" in subjects


def test_g7_export_after_skip_keeps_the_entry(world: World, tmp_path: Path) -> None:
    """G7: skip, then export: the skipped entry (file bytes, metadata) stays; `--drop` drops."""
    series = conflicted(world, tmp_path)
    before = snapshot(series)
    run(series, "skip", want=0)
    run(series, "export", want=0)
    after = snapshot(series)
    assert (
        after["patches/0001-change-a-line-3.patch"] == before["patches/0001-change-a-line-3.patch"]
    )
    assert "why: kept for the tests" in after["series.yaml"].decode()
    run(series, "export", "--drop", "change-a-line-3", want=0)
    assert not (series / "patches" / "0001-change-a-line-3.patch").exists()


def test_g8_fold_becomes_absorbs_with_tests(world: World, tmp_path: Path) -> None:
    """G8: `git rebase -i` fixup of touch-b into add-e: export writes `absorbs: [touch-b]` on
    add-e, carries touch-b's tests, removes touch-b's file."""
    series = copy(world.sc, tmp_path)
    text = (
        (series / "series.yaml")
        .read_text()
        .replace(
            "kind: compat\n  why: ''\n  upstream: null\n  drop_when: null\n  absorbs: []\n"
            "  tests: []",
            "kind: compat\n  why: ''\n  upstream: null\n  drop_when: null\n"
            "  absorbs: []\n  tests: [tests/regression/test_b.py]",
        )
    )
    (series / "series.yaml").write_text(text)
    (series / "tests" / "regression").mkdir(parents=True)
    (series / "tests" / "regression" / "test_b.py").write_text("")
    run(series, "apply", want=0)
    git(
        tree(series),
        "rebase",
        "-q",
        "-i",
        "HEAD~4",
        env={"GIT_SEQUENCE_EDITOR": "sed -i '2s/^pick/fixup/'"},
    )
    r = run(series, "export", want=0)
    assert "absorbs: touch-b" in r.stdout
    data = (series / "series.yaml").read_text()
    add_e = data.split("- id: add-e")[1].split("- id:")[0]
    assert "- touch-b" in add_e and "tests/regression/test_b.py" in add_e


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
        (["blame", "change-a-line-3", "--to", "NEW", "--json"], 0),
        (["report", "--json"], 2),
        (["apply", "--json", "--base", "nope"], 2),
        (["status", "--json", "--bogus"], 2),
        (["check", "--apply", "--json"], 0),
        (["test", "--json", "--tree", "nope"], 2),
        (["report", "--format", "json", "--old-series", ".", "--new-series", "."], 0),
    ],
)
def test_g9_json_on_every_exit(world: World, tmp_path: Path, args: list[str], want: int) -> None:
    """G9: --json gives one JSON document on stdout on exit 0, 1 and 2."""
    series = copy(world.sc, tmp_path)
    r = run(series, *[world.sc.new_base if a == "NEW" else a for a in args], want=want)
    data = json.loads(r.stdout)
    assert isinstance(data, dict) and ("schema" in data or "id" in data)


def test_g9b_json_continue_skip_in_a_conflict(world: World, tmp_path: Path) -> None:
    """G9b: continue --json on an unresolved conflict (exit 1) and skip --json (exit 0)."""
    series = conflicted(world, tmp_path)
    r = run(series, "continue", "--json", want=1)
    assert json.loads(r.stdout)["exit_code"] == 1
    r = run(series, "skip", "--json", want=0)
    assert json.loads(r.stdout)["result"] == "clean"


def test_g10_messages_round_trip(tmp_path: Path) -> None:
    """G10: a literal `=?utf-8?b?…?=` subject and author, a message quoting a diff: import,
    apply, export: messages, authors and patch bytes unchanged."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"f.txt": lines(20)})
    up.branch("feature")
    up.checkout("feature")
    up.commit(
        "=?utf-8?b?SGVsbG8=?= literal subject",
        {"f.txt": lines(20).replace("line 5\n", "five\n")},
        author="=?utf-8?q?Mall=C3=B6ry?= <m@example.com>",
    )
    up.commit(
        "quote a diff\n\ndiff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n"
        "@@ -1,3 +1,3 @@\n-line 1\n+one\n",
        {"f.txt": lines(20).replace("line 5\n", "five\n").replace("line 7\n", "seven\n")},
    )
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    before = snapshot(series)
    run(series, "apply", want=0)
    fmt = "%an%n%B"
    assert (
        git(tree(series), "log", f"--format={fmt}", "-2").stdout
        == git(up.path, "log", f"--format={fmt}", "-2", "feature").stdout
    )
    run(series, "export", want=0)
    assert snapshot(series) == before


def test_g11_failed_fetch_keeps_the_mirror_url(world: World, tmp_path: Path) -> None:
    """G11: a fetch from an unreachable URL fails (exit 2) and leaves the mirror's URL."""
    series = applied(world, tmp_path)
    mirror = series / ".rebasectl" / "upstream.git"
    url = git(mirror, "config", "remote.origin.url").stdout
    run(series, "fetch", "--upstream", "https://127.0.0.1:9/nope.git", want=2)
    assert git(mirror, "config", "remote.origin.url").stdout == url
    run(series, "bump", "--to", world.clean, want=0)


def test_g12_unusable_artifacts_refused_before_the_series_moves(
    world: World, tmp_path: Path
) -> None:
    """G12: a clean bump whose --artifacts cannot be created fails before it changes the
    series."""
    series = copy(world.sc, tmp_path)
    before = snapshot(series)
    run(series, "bump", "--to", world.clean, "--artifacts", "series.yaml/out", want=2)
    assert snapshot(series) == before


def test_g13_bad_input_is_exit_2_one_line(world: World, tmp_path: Path) -> None:
    """G13: a 300-character patch file name, git missing from PATH, an http:// upstream: exit 2,
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
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    r = run(series, "fetch", "--upstream", "http://example.com/x.git", want=2)
    assert "transport refused" in r.stderr


def test_g18_continue_refuses_an_empty_resolution(world: World, tmp_path: Path) -> None:
    """G18: a resolution that keeps upstream's file (nothing of the patch left): continue
    refuses (exit 2) and names skip and --allow-empty; `continue --allow-empty` then works."""
    series = conflicted(world, tmp_path)
    upstream_a = git(world.sc.up.path, "show", f"{world.sc.new_base}:a.txt").stdout
    (tree(series) / "a.txt").write_text(upstream_a)
    git(tree(series), "add", "a.txt")
    r = run(series, "continue", want=2)
    assert "rebasectl skip" in r.stderr and "--allow-empty" in r.stderr
    run(series, "continue", "--allow-empty", want=0)


def test_g17_early_ctrl_c_is_one_line(world: World, tmp_path: Path) -> None:
    """G17: Ctrl-C (SIGINT to the process group) 40-200 ms after start: exit 130 and one line,
    no traceback. (Earlier, 10-30 ms, Python itself is still starting: site's .pth files, the
    console script's `import re`; a traceback there comes before any rebasectl code.)"""
    series = copy(world.sc, tmp_path)
    exe = shutil.which("rebasectl")
    assert exe
    for delay in (0.04, 0.07, 0.1, 0.13, 0.16, 0.2):
        p = subprocess.Popen(
            [exe, "-C", str(series), "status"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        time.sleep(delay)
        try:
            os.killpg(p.pid, 2)
        except ProcessLookupError:
            pass
        _, err = p.communicate(timeout=60)
        assert "Traceback" not in err, (delay, err)
        if p.returncode == 130:
            assert err.count("\n") == 1, (delay, err)


def test_g14_relative_upstream_from_c(world: World, tmp_path: Path) -> None:
    """G14: `-C series apply --upstream ../up` takes ../up from the series directory."""
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


# == the real tree =================================================================================
NEW = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"


@pytest.fixture(scope="module")
def real_bump(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    mirror = real_mirror()
    with module_hermetic_git(tmp_path_factory):
        root = tmp_path_factory.mktemp("real-bump")
        series = root / "series"
        series.mkdir()
        shutil.copy(ROOT / "series.yaml", series)
        shutil.copytree(ROOT / "patches", series / "patches")
        started = time.perf_counter()
        r = rebasectl(series, "bump", "--to", NEW, "--upstream", str(mirror), "--json", timeout=600)
        yield {
            "series": series,
            "run": r,
            "seconds": time.perf_counter() - started,
            "mirror": mirror,
        }


def _git_apply_3_regions(
    mirror: Path, work: Path, base: str, stack: list[Path], patch: Path, exclude: list[str]
) -> dict[str, list[tuple[int, int]]]:
    if not work.exists():
        git(mirror, "worktree", "add", "-q", "--detach", str(work), base)
    git(work, "reset", "-q", "--hard", base)
    git(work, "clean", "-fdq")
    for p in stack:
        git(work, "apply", "-3", "--index", str(p))
    git(
        work,
        "-c",
        "merge.conflictStyle=diff3",
        "apply",
        "-3",
        "--index",
        *[f"--exclude={e}" for e in exclude],
        str(patch),
        check=False,
    )
    out: dict[str, list[tuple[int, int]]] = {}
    for line in git(work, "status", "--porcelain").stdout.splitlines():
        if line[:2] != "UU":
            continue
        path = line[3:]
        start = 0
        for n, text in enumerate((work / path).read_text(errors="replace").split("\n"), 1):
            if text.startswith("<<<<<<< "):
                start = n
            elif text.startswith(">>>>>>> "):
                out.setdefault(path, []).append((start, n))
    return out


def test_g15_real_bump_regions_are_git_apply_3_regions(
    real_bump: dict[str, object], tmp_path: Path
) -> None:
    """G15 (issue 18 acceptance): every content region bump reports for 3346fa8a2 is the region
    `git apply -3` (diff3) marks for that patch on the same tree (failing patches left out,
    clean ones stacked); stderr under 8 KB; tokenizer.py named with its deleting commit."""
    r = real_bump["run"]
    assert isinstance(r, subprocess.CompletedProcess)
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.encode()) < 8192
    assert "tokenizer.py (deleted by 32570939300c)" in r.stderr
    data = json.loads(r.stdout)
    series = real_bump["series"]
    assert isinstance(series, Path)
    files = {
        p["id"]: p["file"] for p in yaml.safe_load((series / "series.yaml").read_text())["patches"]
    }
    mirror = series / ".rebasectl" / "upstream.git"
    work = tmp_path / "cmp"
    stack: list[Path] = []
    try:
        for p in data["patches"]:
            pf = series / "patches" / files[p["id"]]
            if p["status"] == "clean":
                stack.append(pf)
            if p["status"] != "conflict":
                continue
            mine = {
                c["path"]: [(x["start"], x["end"]) for x in c["regions"]]
                for c in p["conflicts"]
                if c["kind"] == "content"
            }
            exclude = [c["path"] for c in p["conflicts"] if c["kind"] != "content"]
            assert _git_apply_3_regions(mirror, work, NEW, stack, pf, exclude) == mine, p["id"]
    finally:
        git(mirror, "worktree", "remove", "--force", str(work), check=False)


def test_f18_real_bump_regions_without_a_patch_hunk(real_bump: dict[str, object]) -> None:
    """F18: two regions of the real bump name no patch hunk (`"hunks": []`) and are annotated at
    line 1 of the patch file: post-layernorm gpt_layer_specs.py (upstream 398-399) and mtp-rl
    multi_token_prediction.py (upstream 1628-1632); d7c6fd9 says every region names its hunk."""
    r = real_bump["run"]
    assert isinstance(r, subprocess.CompletedProcess)
    data = json.loads(r.stdout)
    empty = [
        (p["id"], c["path"], x["upstream_lines"])
        for p in data["patches"]
        for c in p["conflicts"]
        if c["kind"] == "content"
        for x in c["regions"]
        if not x["hunks"]
    ]
    assert empty == []


def test_g16_crlf_file_of_upstream_carried(tmp_path: Path) -> None:
    """G16: a patch to megatron/legacy/fp16_deprecated/loss_scaler.py (CRLF at 1dcf0da):
    exported, `check --apply` ok, re-applied byte for byte."""
    mirror = real_mirror()
    series = tmp_path / "series"
    series.mkdir()
    shutil.copy(ROOT / "series.yaml", series)
    shutil.copytree(ROOT / "patches", series / "patches")
    run(series, "apply", "--upstream", str(mirror), want=0)
    path = tree(series) / "megatron/legacy/fp16_deprecated/loss_scaler.py"
    data = path.read_bytes()
    assert b"\r\n" in data
    lines_ = data.split(b"\r\n")
    lines_[2] += b"  # patched"
    path.write_bytes(b"\r\n".join(lines_))
    git(tree(series), "commit", "-q", "-am", "fix: crlf file")
    want = path.read_bytes()
    run(series, "export", want=0)
    run(series, "check", "--apply", want=0)
    run(series, "apply", want=0)
    assert path.read_bytes() == want
