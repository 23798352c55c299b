"""The commands, each one function: take the lock, finish or repair what an interrupted command
left, find the upstream, and call the stage that does the work (session, exchange, bump, ...).

Kept apart from ``cli.py`` so that the CLI only parses and renders, and so tests can call each
command's logic directly. What an interruption can leave, and what is done about it here before
any command goes on: a half-written export (rolled forward from its journal), git lock files of a
killed git (removed when no process has them open, and named), a ``git worktree add`` killed
while "initializing" (its registration and half-made directory removed), and registrations of
work trees whose directory is gone (pruned).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.exchange import Built, export_tree, import_range, load_patches
from ..engine.session import ApplyOutcome, Session, check_room
from ..engine.state import ApplyState, TreeMap, tolerant
from ..engine.upstream import choose_source, ensure_mirror, open_for, resolve
from ..git import Repo
from ..git.worktree import (
    Worktree,
    half_removed_worktrees,
    holders,
    initializing_worktrees,
    relink_moved,
    stale_git_locks,
)
from ..infra.errors import RebasectlError
from ..infra.fsutil import recover
from ..infra.lock import RepoLock
from ..model.ids import is_abbrev
from ..model.series import Series, load
from ..model.workspace import Workspace

if TYPE_CHECKING:
    from ..engine.abort import AbortResult

Notify = Callable[[str], None]


def _quiet(text: str) -> None:
    return None


@contextmanager
def locked(ws: Workspace, command: str, notify: Notify = _quiet) -> Iterator[None]:
    ws.ensure_state_dir()
    with RepoLock(ws.lock_file, command):
        recover(ws.root, ws.journal_dir)
        repair_git(ws, notify)
        yield


def repair_git(ws: Workspace, notify: Notify) -> None:
    """Clear what a killed git left in the mirror and its work trees (see the module doc)."""
    if not (ws.mirror / "HEAD").exists():
        return
    locks = _after_running_git(ws, notify)
    for lock in locks:
        lock.unlink(missing_ok=True)
        notify(f"removed {lock}, left by an interrupted git")
    for reg in initializing_worktrees(ws.mirror):
        try:
            half = Path((reg / "gitdir").read_text().strip()).parent
        except OSError:
            half = None
        shutil.rmtree(reg, ignore_errors=True)
        notify(f"removed the half-made work tree registration {reg.name}, left by an "
               "interrupted `git worktree add`")
        if half is not None and half.is_dir() and ws.inside_state(half):
            shutil.rmtree(half, ignore_errors=True)
    known = _known_trees(ws)
    for tree in known:  # before the prune, which would drop a moved tree's entry
        if relink_moved(ws.mirror, tree, ws.root):
            notify(f"relinked {tree} to {ws.mirror} (the checkout was moved)")
    for half in half_removed_worktrees(ws.mirror):
        # only under .rebasectl/: a --worktree elsewhere whose .git is gone may be the person's
        # own doing, with their files in it; prune forgets it and it is left as it is
        if ws.inside_state(half):
            shutil.rmtree(half, ignore_errors=True)
            notify(f"removed the rest of {half}, left by an interrupted `git worktree remove`")
    Worktree.prune(Repo(ws.mirror).runner)


def _after_running_git(ws: Workspace, notify: Notify, patience: float = 60.0) -> list[Path]:
    """The git lock files in the mirror, once no git holds them. A git still at work there is
    most often one a killed rebasectl started (a checkout that outlives it): it is waited for,
    up to ``patience`` seconds, rather than sending the person away to rerun."""
    deadline = time.monotonic() + patience
    said = False
    while True:
        locks = stale_git_locks([ws.mirror])
        busy = holders(locks)
        if not busy:
            return locks
        lock, pid = next(iter(busy.items()))
        if time.monotonic() > deadline:
            raise RebasectlError(f"git (pid {pid}) is still working in {lock.parent}: wait for "
                                 "it to finish, then rerun")
        if not said:
            notify(f"waiting for git (pid {pid}), still working in {lock.parent}")
            said = True
        time.sleep(0.1)


def _known_trees(ws: Workspace) -> list[Path]:
    """The work trees this checkout's state names (an unreadable state names none: abort
    clears it)."""
    trees = [ws.default_tree, ws.base_tree]
    state, _ = tolerant(ApplyState.load, ws.apply_state)
    tmap, _ = tolerant(TreeMap.load, ws.tree_map)
    trees += [Path(state.worktree)] if state else []
    trees += [tmap.worktree] if tmap else []
    return list(dict.fromkeys(trees))


def source(ws: Workspace, upstream: str | None) -> str | None:
    """``--upstream``, with a relative local path taken from ``-C`` (as git does)."""
    if upstream is None or "://" in upstream or ":" in upstream.split("/", 1)[0]:
        return upstream
    candidate = ws.path(upstream)
    return str(candidate) if candidate.exists() else upstream


def fetch(ws: Workspace, upstream: str | None) -> str:
    with locked(ws, "fetch"):
        series_url = load(ws.root, check_files=False).upstream.url \
            if ws.series_file.exists() else None
        chosen = choose_source(source(ws, upstream), series_url)
        if chosen is None:
            raise RebasectlError("no upstream: pass --upstream URL|PATH")
        return str(ensure_mirror(ws, chosen, update=True).path)


def mirror_for(ws: Workspace, series: Series, upstream: str | None, revs: list[str]) -> Repo:
    return open_for(ws, source(ws, upstream), series.upstream.url, revs)


def _mirror(ws: Workspace) -> Repo:
    """The mirror an apply in progress works in; gone, its work tree is no git checkout any
    more, so the way on is to start the apply again."""
    if not (ws.mirror / "HEAD").exists():
        state, _ = tolerant(ApplyState.load, ws.apply_state)
        base = f" --base {state.base[:12]}" if state else ""
        raise RebasectlError(f"no upstream mirror ({ws.mirror} is gone) and the apply in "
                             f"progress needs it: `rebasectl abort`, then `rebasectl apply{base} "
                             "--upstream URL|PATH` starts it again")
    return Repo(ws.mirror, upstream=True)


def apply(ws: Workspace, base: str | None, upstream: str | None, worktree: Path | None,
          notify: Notify = _quiet) -> ApplyOutcome:
    with locked(ws, "apply", notify):
        series = load(ws.root)
        loaded = load_patches(ws, series)  # bad or hostile patch files are refused before git
        rev = base or series.upstream.base
        repo = mirror_for(ws, series, upstream, [rev, series.upstream.base])
        sha = resolve(repo, rev, what="base")
        if sha != series.upstream.base and repo.resolve(series.upstream.base):
            _seed_blobs(repo, series.upstream.base, loaded)
        target = ws.path(worktree) if worktree else ws.default_tree
        return Session(ws, repo, notify).start(sha, target.resolve(), loaded)


def _seed_blobs(repo: Repo, base: str, loaded: list[Any]) -> None:
    """The series on its own base, in memory: it writes every patch's preimage and result blob
    into the mirror, which git's 3-way merge on another base needs."""
    from ..engine.materialize import Materializer

    Materializer(repo).run(base, [(lp.entry.id, lp.patch) for lp in loaded], three_way=False,
                           keep_going=True)


def _in_progress(ws: Workspace) -> None:
    if not ws.apply_state.exists():
        raise RebasectlError("no apply in progress (start one with `rebasectl apply`)")


def cont(ws: Workspace, allow_empty: bool = False, notify: Notify = _quiet) -> ApplyOutcome:
    with locked(ws, "continue", notify):
        _in_progress(ws)
        return Session(ws, _mirror(ws), notify).resume(allow_empty=allow_empty)


def skip(ws: Workspace, notify: Notify = _quiet) -> ApplyOutcome:
    with locked(ws, "skip", notify):
        _in_progress(ws)
        return Session(ws, _mirror(ws), notify).skip()


def abort(ws: Workspace, notify: Notify = _quiet) -> AbortResult:
    from ..engine.abort import abort as abort_apply

    with locked(ws, "abort", notify):
        return abort_apply(ws)


def forget(ws: Workspace, patch_ids: set[str] | None) -> tuple[int, int]:
    """Drop recorded resolutions (see resolutions.Memory.forget); ids must be the series'."""
    from ..engine.resolutions import Memory

    with locked(ws, "forget"):
        if patch_ids is not None:
            known = {p.id for p in load(ws.root, check_files=False).patches}
            unknown = sorted(patch_ids - known)
            if unknown:
                raise RebasectlError(f"no patch {', '.join(unknown)} in series.yaml")
        records, ids = Memory(ws.resolutions).forget(patch_ids)
        rerere = Repo(ws.mirror).forget_rerere(ids) if (ws.mirror / "HEAD").exists() else 0
        return records, rerere


def export(ws: Workspace, worktree: Path | None, drops: list[str],
           notify: Notify = _quiet) -> tuple[Series, Built, list[str]]:
    from ..engine.state import TreeMap

    with locked(ws, "export", notify):
        if ws.apply_state.exists():
            raise RebasectlError("an apply is in progress: finish it (`rebasectl continue`, "
                                 "`skip`) or `rebasectl abort` before exporting")
        tmap = TreeMap.load(ws.tree_map)
        path = ws.path(worktree) if worktree else (tmap.worktree if tmap else ws.default_tree)
        return export_tree(ws, path, drops)


def do_import(ws: Workspace, rev_range: str, repo: Path, branch: str | None) -> tuple[Series,
                                                                                      list[str]]:
    with locked(ws, "import"):
        return import_range(ws, ws.path(repo), rev_range, branch)


def test_tree(ws: Workspace, against: str, upstream: str | None, tree: Path | None) -> Path:
    """The tree ``rebasectl test`` runs on: given, or the patched work tree (applied if needed),
    or a checkout of the unpatched base."""
    from ..engine.state import TreeMap
    from ..engine.testing import check_tree, ensure_base_tree

    if tree is not None:
        return check_tree(ws.path(tree))
    series = load(ws.root)
    if against == "base":
        with locked(ws, "test --against base"):
            repo = mirror_for(ws, series, upstream, [series.upstream.base])
            return ensure_base_tree(ws, repo, resolve(repo, series.upstream.base, what="base"))
    if ws.apply_state.exists():
        raise RebasectlError("an apply is in progress: finish it before testing")
    tmap = TreeMap.load(ws.tree_map)
    if tmap is not None and (tmap.worktree / ".git").exists() and \
            tmap.base == series.upstream.base:
        return tmap.worktree
    outcome = apply(ws, None, upstream, None)
    if outcome.stop is not None:
        raise RebasectlError(f"the series does not apply on its base: stopped at "
                             f"{outcome.stop.id}; resolve it (`rebasectl status`) first")
    return outcome.worktree


def report(ws: Workspace, old: Any, new: Any, repo: Path | None, upstream: str | None,
           fmt: str, verbose: bool) -> str:
    """The report; under the lock when a side is a series of this checkout (an export may be
    half done; others must keep out), without it for commit ranges of another repository."""
    from ..report.inputs import report_text

    if not ws.series_file.exists():
        return report_text(ws, old, new, repo, source(ws, upstream), fmt, verbose)
    with locked(ws, "report"):
        return report_text(ws, old, new, repo, source(ws, upstream), fmt, verbose)


def bump(ws: Workspace, to_rev: str, upstream: str | None, artifacts: Path | None,
         notify: Notify = _quiet, run_tests: bool = False) -> Any:
    from . import bump as bumping

    with locked(ws, "bump", notify):
        if ws.apply_state.exists():
            raise RebasectlError("an apply is in progress: `rebasectl continue` or `abort` it "
                                 "before a bump")
        series = load(ws.root)
        # the work tree's own check before anything is fetched or computed: a bump that would
        # replace unexported work is refused while everything is as the person left it
        check_room(ws, ws.default_tree.resolve())
        repo = _bump_mirror(ws, upstream, series, to_rev, notify)
        old = resolve(repo, series.upstream.base, what="base")
        new = resolve(repo, to_rev, what="--to revision")
        if not repo.history.is_ancestor(old, new):
            raise RebasectlError(f"--to {to_rev}: {new[:12]} does not contain the pinned base "
                                 f"{old[:12]} (a bump moves the base forward)")
        return bumping.bump(ws, repo, series, new, upstream=upstream,
                            artifacts=ws.path(artifacts) if artifacts else None, notify=notify,
                            run_tests=run_tests)


def blame(ws: Workspace, patch_ref: str, from_rev: str | None, to_rev: str | None,
          upstream: str | None, notify: Notify = _quiet) -> dict[str, Any]:
    from . import bump as bumping

    with locked(ws, "blame", notify):  # it may create or fetch the mirror
        series = load(ws.root)
        to_name = to_rev or series.upstream.branch
        repo = _bump_mirror(ws, upstream, series, to_name, notify, from_rev)
        old = resolve(repo, from_rev or series.upstream.base, what="--from revision")
        new = resolve(repo, to_name, what="--to revision")
        if not repo.history.is_ancestor(old, new):
            raise RebasectlError(f"--from {old[:12]} is not an ancestor of --to {new[:12]}")
        return bumping.blame(ws, repo, series, patch_ref, old, new, notify)


def _bump_mirror(ws: Workspace, upstream: str | None, series: Series, to_rev: str,
                 notify: Notify, from_rev: str | None = None) -> Repo:
    """The mirror holding the revisions; fetched first when ``to_rev`` is a name (a branch moves:
    a bump to `dev` means upstream's `dev` now, not the cached one)."""
    repo = mirror_for(ws, series, upstream, [from_rev or series.upstream.base, to_rev])
    # a sha names one commit; a mirror made or fetched just now is as new as a fetch
    if not is_abbrev(to_rev) and not repo.fetched:
        notify(f"fetching the upstream ({to_rev} is a name: it may have moved)")
        # an existing mirror is fetched from where it came from unless --upstream or
        # $REBASECTL_UPSTREAM say otherwise (series.yaml's url must not re-point a local mirror)
        repo = ensure_mirror(ws, choose_source(source(ws, upstream), None), update=True)
    return repo
