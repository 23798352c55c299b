"""Interruption (issue 7): SIGKILL or SIGINT at every boundary of apply, continue, export, import
and bump, then ``continue`` or a rerun must give exactly what an uninterrupted run gives (same
commits, same tree, same series bytes), and nothing of the user's is lost.

The process is stopped at exact boundaries with the ``REBASECTL_FAULT`` hook
(rebasectl/infra/faults.py):
``kill@commit:N`` is SIGKILL right after the N-th patch commit, ``int@txn-move:N`` SIGINT after
the N-th file of an export transaction moved into place, and so on. SIGINT must end with exit 130
and one line; SIGKILL ends the process with no chance to clean up.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.cli import ok, one_error, popen, run, spawn
from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo, git, lines
from tests.harness.process import resume, wait_stopped
from tests.harness.scenes import World, applied, conflicted, relocate, tree
from tests.sfix import Scenario, copy, head_of, make, module_hermetic_git, snapshot, tree_of

Point = tuple[str, str, int]  # (kill|int, boundary, n)


def matrix(kill: list[tuple[str, int]], interrupt: list[tuple[str, int]]) -> list[Point]:
    """SIGKILL at every boundary; SIGINT (whose clean-up path is shared by all boundaries) at a
    few of them, which keeps the suite fast on a 2-core CI machine."""
    return [("kill", p, n) for p, n in kill] + [("int", p, n) for p, n in interrupt]


def ids(points: list[Point]) -> list[str]:
    return [f"{h}-{p}{n}" for h, p, n in points]
RESOLVED_A = lines(40, "a").replace("a 3\n", "PATCH 3 + UPSTREAM 3\n").replace("a 33\n", "UP 33\n")


@dataclass
class Reference:
    sc: Scenario
    apply_tip: str  # apply on the pinned base
    cont_tip: str  # apply on new_base, resolve patch 1, continue
    exported: dict[str, bytes]  # the series after that continue + export
    imported: dict[str, bytes]  # a fresh import of the feature branch
    bump_to: str  # an upstream commit every patch applies on cleanly
    bumped: dict[str, bytes] | None  # the series after an uninterrupted bump (None: no bump)
    resolved: Path  # a series stopped at patch 1's conflict on new_base, resolved (git add)
    continued: Path  # the same after `continue`: ready to export


def _has_bump() -> bool:
    from rebasectl.cli import cli

    return "bump" in cli.commands


def _resolve(series: Path) -> None:
    tree = series / ".rebasectl" / "tree"
    (tree / "a.txt").write_text(RESOLVED_A)
    Repo.existing(tree).git("add", "a.txt")


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reference]:
    with module_hermetic_git(tmp_path_factory):
        tmp = tmp_path_factory.mktemp("ref")
        sc = make(tmp)
        # an upstream commit on which every patch still applies (a new unrelated file)
        sc.up.checkout("-q", "-b", "clean-target", sc.base)
        bump_to = sc.up.commit("upstream: unrelated", {"z.txt": "z\n"})
        sc.up.checkout("main")
        work = tmp / "work"
        shutil.copytree(sc.series, work)
        ok(work, "apply", "--upstream", str(sc.up.path))
        apply_tip = head_of(work / ".rebasectl" / "tree")
        ok(work, "abort") if (work / ".rebasectl" / "apply-state.json").exists() else None
        r = rebasectl(work, "apply", "--base", sc.new_base)
        assert r.returncode == 1, r.stderr
        _resolve(work)
        resolved = tmp / "resolved"
        relocate(work, resolved)
        ok(work, "continue")
        cont_tip = head_of(work / ".rebasectl" / "tree")
        continued = tmp / "continued"
        relocate(work, continued)
        ok(work, "export")
        exported = snapshot(work)
        fresh = tmp / "fresh"
        fresh.mkdir()
        ok(fresh, "import", f"{sc.base}..feature", "--repo", str(sc.up.path))
        imported = snapshot(fresh)
        bumped = None
        if _has_bump():
            bw = tmp / "bumped"
            shutil.copytree(sc.series, bw)
            ok(bw, "bump", "--to", bump_to, "--upstream", str(sc.up.path))
            bumped = snapshot(bw)
        yield Reference(sc, apply_tip, cont_tip, exported, imported, bump_to, bumped, resolved,
                        continued)


def _copy(ref: Reference, tmp_path: Path) -> Path:
    series = tmp_path / "series"
    shutil.copytree(ref.sc.series, series)
    return series


def _faulted(series: Path, how: str, point: str, n: int, *args: str) -> None:
    """Run a command that must die at the boundary: SIGKILL, or SIGINT -> 130 and one line."""
    r = rebasectl(series, *args, env={"REBASECTL_FAULT": f"{how}@{point}:{n}"})
    if how == "kill":
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
    else:
        assert r.returncode == 130, (r.returncode, r.stderr)
        one_error(r.stderr, "interrupted")


def _tree_state(series: Path) -> tuple[str, str, bool]:
    tree = series / ".rebasectl" / "tree"
    r = Repo.existing(tree)
    clean = r.git("status", "--porcelain") == ""
    return head_of(tree), tree_of(tree), clean


# -- apply -------------------------------------------------------------------------------------
APPLY_POINTS = [(*p, "continue") for p in matrix(
    [("commit", n) for n in range(1, 6)] + [("state", 1), ("state", 2), ("worktree", 1)],
    [("commit", 1), ("commit", 5), ("worktree", 1)])
] + [("kill", "commit", 2, "rerun"), ("kill", "commit", 4, "rerun"), ("int", "commit", 3, "rerun")]


@pytest.mark.parametrize("how,point,n,then", APPLY_POINTS,
                         ids=[f"{h}-{p}{n}-{t}" for h, p, n, t in APPLY_POINTS])
def test_apply_interrupted(ref: Reference, tmp_path: Path, how: str, point: str, n: int,
                           then: str) -> None:
    series = _copy(ref, tmp_path)
    before = snapshot(series)
    _faulted(series, how, point, n, "apply", "--upstream", str(ref.sc.up.path))
    if then == "continue":
        ok(series, "continue")
    else:
        ok(series, "apply")
    head, tree, clean = _tree_state(series)
    assert head == ref.apply_tip and clean
    assert tree == ref.sc.up.tree("feature")
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert snapshot(series) == before
    ok(series, "export")  # the tree map is complete: nothing to write
    assert snapshot(series) == before


# -- continue ----------------------------------------------------------------------------------
CONT_POINTS = matrix([("resolved", 1)] + [("commit", n) for n in range(1, 5)] + [("worktree", 1)],
                     [("resolved", 1), ("commit", 2), ("worktree", 1)])


def _prepared(src: Path, tmp_path: Path) -> Path:
    series = tmp_path / "series"
    relocate(src, series)
    return series


@pytest.mark.parametrize("how,point,n", CONT_POINTS, ids=ids(CONT_POINTS))
def test_continue_interrupted(ref: Reference, tmp_path: Path, how: str, point: str,
                              n: int) -> None:
    series = _prepared(ref.resolved, tmp_path)
    before = snapshot(series)
    _faulted(series, how, point, n, "continue")
    ok(series, "continue")
    head, _, clean = _tree_state(series)
    assert head == ref.cont_tip and clean
    assert snapshot(series) == before
    ok(series, "export")
    assert snapshot(series) == ref.exported


@pytest.mark.parametrize("how", ["kill", "int"])
def test_apply_interrupted_before_conflict_reaches_tree(ref: Reference, tmp_path: Path,
                                                       how: str) -> None:
    """Stopped after the state names the conflicting patch but before the conflict is in the
    work tree: continue must stop at that patch again, never commit it empty."""
    series = _copy(ref, tmp_path)
    _faulted(series, how, "worktree", 1, "apply", "--upstream", str(ref.sc.up.path),
             "--base", ref.sc.new_base)
    r = rebasectl(series, "continue")
    assert r.returncode == 1 and "stopped at 1/5 change-a-line-3" in r.stdout, r.stderr
    assert "<<<<<<<" in (series / ".rebasectl" / "tree" / "a.txt").read_text()
    _resolve(series)
    ok(series, "continue")
    assert _tree_state(series)[0] == ref.cont_tip


# -- export ------------------------------------------------------------------------------------
def _txn_points(count: int) -> list[tuple[str, int]]:
    return [("txn-stage", n) for n in range(1, count + 1)] + \
        [("txn-move", n) for n in range(1, count + 1)]


# the export after resolving patch 1 rewrites 3 files: its patch, patch 5 (3-way: new context
# line) and series.yaml (the base)
EXPORT_POINTS = [(*p, "status" if p[1] == "txn-move" else "export")
                 for p in matrix(_txn_points(3), [("txn-stage", 2), ("txn-move", 2)])]


@pytest.mark.parametrize("how,point,n,then", EXPORT_POINTS,
                         ids=[f"{h}-{p}{n}-{t}" for h, p, n, t in EXPORT_POINTS])
def test_export_interrupted(ref: Reference, tmp_path: Path, how: str, point: str, n: int,
                            then: str) -> None:
    series = _prepared(ref.continued, tmp_path)
    _faulted(series, how, point, n, "export")
    ok(series, then)  # any next command finishes (or discards) the interrupted transaction
    if then != "export":
        assert snapshot(series) == ref.exported  # rolled forward by a read-only command
        ok(series, "export")
    assert snapshot(series) == ref.exported
    assert not (series / ".rebasectl" / "txn").exists()


def test_export_reference_changes_two_files(ref: Reference) -> None:
    changed = {k for k in ref.exported if ref.exported[k] != snapshot(ref.sc.series).get(k)}
    assert changed == {"series.yaml", "patches/0001-change-a-line-3.patch",
                       "patches/0005-change-a-line-30.patch"}


# -- import ------------------------------------------------------------------------------------
# 6 files: 5 patches + series.yaml; SIGKILL after each move, and while staging
IMPORT_POINTS = matrix([("txn-stage", 1), ("txn-stage", 6)] + _txn_points(6)[6:],
                       [("txn-stage", 3), ("txn-move", 3)])


@pytest.mark.parametrize("how,point,n", IMPORT_POINTS, ids=ids(IMPORT_POINTS))
def test_import_interrupted(ref: Reference, tmp_path: Path, how: str, point: str, n: int) -> None:
    series = tmp_path / "fresh"
    series.mkdir()
    args = ("import", f"{ref.sc.base}..feature", "--repo", str(ref.sc.up.path))
    _faulted(series, how, point, n, *args)
    if point == "txn-move":
        ok(series, "status")  # rolls the transaction forward before reading
        assert snapshot(series) == ref.imported
    else:
        assert snapshot(series) == {}  # nothing half-written
    ok(series, *args)
    assert snapshot(series) == ref.imported


# -- bump --------------------------------------------------------------------------------------
BUMP_POINTS = matrix([("commit", n) for n in (1, 3, 5, 8)] + _txn_points(1),
                     [("commit", 4), ("txn-move", 1)])


@pytest.mark.parametrize("how,point,n", BUMP_POINTS, ids=ids(BUMP_POINTS))
def test_bump_interrupted(ref: Reference, tmp_path: Path, how: str, point: str, n: int) -> None:
    if ref.bumped is None:
        pytest.skip("no `bump` command in this build")
    series = _copy(ref, tmp_path)
    args = ("bump", "--to", ref.bump_to, "--upstream", str(ref.sc.up.path))
    r = rebasectl(series, *args, env={"REBASECTL_FAULT": f"{how}@{point}:{n}"})
    if r.returncode == 0:
        pytest.skip(f"bump reaches {point} fewer than {n} times")
    assert r.returncode in (-signal.SIGKILL, 130), r.stderr
    ok(series, *args)
    assert snapshot(series) == ref.bumped


def test_fault_spec_is_inert_elsewhere(ref: Reference, tmp_path: Path) -> None:
    """A boundary that is never reached changes nothing (the hook is off by default)."""
    series = _copy(ref, tmp_path)
    r = rebasectl(series, "apply", "--upstream", str(ref.sc.up.path),
                  env={"REBASECTL_FAULT": "kill@commit:99"})
    assert r.returncode == 0, r.stderr
    assert head_of(series / ".rebasectl" / "tree") == ref.apply_tip
    data = json.loads((series / ".rebasectl" / "tree.json").read_text())
    assert [c[0] for c in data["commits"]] == ["change-a-line-3", "add-e", "touch-b",
                                               "empty-marker", "change-a-line-30"]


CTRL_C_POINTS = ["commit1", "commit3", "commit5", "state1", "worktree1"]


@pytest.mark.parametrize("point", CTRL_C_POINTS)
def test_real_ctrl_c_to_the_process_group(ref: Reference, tmp_path: Path, point: str) -> None:
    """A terminal's Ctrl-C: SIGINT to rebasectl and its git children at once. The apply is held
    at a boundary (a ``stop`` fault point: whatever git it runs then is running), the whole
    process group gets SIGINT, then SIGCONT: exit 130 with one error line, no traceback; then a
    rerun finishes the apply."""
    series = _copy(ref, tmp_path)
    name, n = point.rstrip("0123456789"), point[len(point.rstrip("0123456789")):]
    proc = popen(series, "apply", "--upstream", str(ref.sc.up.path), start_new_session=True,
                 env={"REBASECTL_FAULT": f"stop@{name}:{n}"})
    wait_stopped(proc)
    os.killpg(proc.pid, signal.SIGINT)
    resume(proc, group=True)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, (proc.returncode, err)
    one_error(err, "interrupted")
    ok(series, "apply")
    head, tree, clean = _tree_state(series)
    assert head == ref.apply_tip and tree == ref.sc.up.tree("feature") and clean
    assert not (series / ".rebasectl" / "apply-state.json").exists()


def test_megatron_kill_at_patch_boundaries(mirror_path: Path, tmp_path: Path) -> None:
    """The real upstream: 15 Megatron-LM commits imported, apply killed after patch 4, 8 and 12
    in turn, continue; the tree is the original tip's, and export changes no byte."""
    m = Repo.existing(mirror_path)
    tip = m.git("rev-list", "--first-parent", "--reverse", "3714d81..1dcf0da").split()[14]
    series = tmp_path / "series"
    series.mkdir()
    ok(series, "import", f"3714d81..{tip}", "--repo", str(mirror_path))
    before = snapshot(series)
    for n in (4, 8, 12):
        _faulted(series, "kill", "commit", n, "apply", "--upstream", str(mirror_path))
        ok(series, "continue")
        assert tree_of(series / ".rebasectl" / "tree") == m.tree(tip)
        assert snapshot(series) == before
    ok(series, "export")
    assert snapshot(series) == before


def test_reapply_killed_before_the_old_tree_is_cleared(ref: Reference, tmp_path: Path) -> None:
    """apply, edit a patch, apply again killed right after its state is saved (the old work tree
    still there): continue must apply the edited patch, not adopt the old tree's commits (which
    a later export would write back over the edit)."""
    series = _copy(ref, tmp_path)
    ok(series, "apply", "--upstream", str(ref.sc.up.path))
    p2 = series / "patches" / "0002-add-e.patch"
    p2.write_bytes(p2.read_bytes().replace(b"+new file\n", b"+edited by hand\n"))
    edited = snapshot(series)
    _faulted(series, "kill", "state", 1, "apply")
    ok(series, "continue")
    assert (series / ".rebasectl" / "tree" / "e.txt").read_text() == "edited by hand\n"
    ok(series, "export")
    assert b"+edited by hand\n" in (series / "patches" / "0002-add-e.patch").read_bytes()
    assert snapshot(series)["series.yaml"] == edited["series.yaml"]


# -- interrupted at the boundaries the random kill trials found --
def test_skip_killed_after_its_state_save_continues(world: World, tmp_path: Path) -> None:
    """skip SIGKILLed right after it saved "patch 1 skipped" and before it reset the work tree
    (REBASECTL_FAULT=kill@state:1; random kill trials hit this point often): `continue`
    finishes the apply."""
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


def test_apply_killed_while_removing_the_old_tree_recovers(world: World, tmp_path: Path) -> None:
    """apply --base SIGKILLed (or Ctrl-C) while `git worktree remove` deletes the previous work
    tree: the rerun and continue recover, abort removes what it says it removed, and apply works
    afterwards."""
    series = applied(world, tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "git"
    fake.write_text(GIT_KILLED_IN_WORKTREE_REMOVE.format(git=shutil.which("git")))
    fake.chmod(0o755)
    # a real process: the fake git SIGKILLs its parent
    r = spawn(series, "apply", "--base", world.sc.new_base,
              env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    assert r.returncode == -9, r.stderr
    r = run(series, "apply", "--base", world.sc.new_base)
    if "apply is in progress" in r.stderr:
        r = run(series, "continue")
    assert r.returncode == 1, r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


GIT_CTRL_C_IN_FAST_IMPORT = """#!/bin/sh
# Ctrl-C while git fast-import reads the commits: rebasectl gets SIGINT while it writes the
# stream (64 KiB of it read: it is writing), then fast-import dies of the same SIGINT once
# rebasectl has closed the stream (the order forced, the outcome as a terminal's)
case " $* " in *" fast-import "*)
  trap '' INT; head -c 65536 >/dev/null; kill -INT $PPID; cat >/dev/null
  trap - INT; kill -INT $$; exit 1;;
esac
exec {git} "$@"
"""


def test_ctrl_c_during_fast_import_is_exit_130(tmp_path: Path) -> None:
    """Ctrl-C while git fast-import takes the commits (apply --base, continue and bump): exit 130
    "interrupted", never exit 2 "git fast-import failed"."""
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


@pytest.mark.parametrize("point", ["start", "ready"])
def test_ctrl_c_while_the_console_script_starts_is_one_line(
    world: World, tmp_path: Path, point: str
) -> None:
    """Ctrl-C (SIGINT to the process group) while the console script starts: while the CLI is
    still being imported (``start``: only the early handler is on) and once its own handler is
    on but the command has not begun (``ready``): exit 130 and one line, no traceback. The
    process is held at the fault point, signalled there, then let go: no timing involved.
    (Earlier still, Python itself is starting: site's .pth files; a traceback there comes before
    any rebasectl code.)"""
    series = copy(world.sc, tmp_path)
    exe = shutil.which("rebasectl")
    assert exe
    p = subprocess.Popen(
        [exe, "-C", str(series), "status"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "REBASECTL_FAULT": f"stop@{point}:1"},
    )
    wait_stopped(p)
    os.killpg(p.pid, signal.SIGINT)
    resume(p, group=True)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, (p.returncode, err)
    one_error(err, "interrupted")


@pytest.mark.parametrize("point", ["merged", "state"])
def test_a_stop_killed_while_its_merge_is_made_goes_on(tmp_path: Path, point: str) -> None:
    """A patch with one file that conflicts and one that merges: killed once the stop's merge
    is made but before the state names its paths (``merged``), or just after (``state``), the
    work tree's index must not keep the merged file staged as if the person had staged it
    (continue called it "your uncommitted changes ... in the way"); continue stops at the same
    patch as an uninterrupted apply, with the same files."""
    from tests.unit.test_attribution import Fork
    from tests.unit.test_bump import imported

    fork = Fork(tmp_path, {"a.txt": lines(20, "a"), "b.txt": lines(20, "b")})
    (tip,) = fork.series([("feat: both", {"a.txt": ("a 3\n", "a 3 ours\n"),
                                          "b.txt": ("b 9\n", "b 9 ours\n")})])
    fork.change("upstream: a 3", {"a.txt": ("a 3\n", "a 3 theirs\n")})
    series = imported(tmp_path, fork, tip)
    whole = tmp_path / "whole"
    shutil.copytree(series, whole)
    rebasectl(whole, "apply", "--base", "main", "--upstream", str(fork.up.path), want=1)
    killed = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path),
                       env={"REBASECTL_FAULT": f"kill@{point}:2" if point == "state" else
                            f"kill@{point}:1"})
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    r = rebasectl(series, "continue")
    assert r.returncode == 1 and "stopped at 1/1 both" in r.stdout, (r.stdout, r.stderr)
    for t in (series, whole):
        status = git(t / ".rebasectl" / "tree", "status", "--porcelain").stdout
        assert status.splitlines() == ["UU a.txt", "M  b.txt"], status
    for name in ("a.txt", "b.txt"):
        assert (series / ".rebasectl" / "tree" / name).read_bytes() == \
            (whole / ".rebasectl" / "tree" / name).read_bytes()
