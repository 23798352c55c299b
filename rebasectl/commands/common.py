"""What every command does first, in one place: take the checkout's lock, finish or undo what a
killed command left, and find the upstream mirror.

What an interruption can leave, and what is done about it here before any command goes on: a
half-written export (rolled forward from its journal, which is said: ``finished_words``; a file
changed by hand since the kill is copied under ``.rebasectl/overwritten/`` first), git lock
files of a killed git (removed when no process has them open, and named), a ``git worktree
add`` killed while "initializing" (its registration and half-made directory removed), and
registrations of work trees whose directory is gone (pruned). Read-only commands (status,
check) only roll a half-written export forward (``finish_interrupted_write``, which the front
runs before every command).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..engine.state import ApplyState, TreeMap, tolerant
from ..engine.upstream import choose_source, ensure_mirror, open_for
from ..engine.worktrees import keep_unlinked
from ..git import Repo
from ..git.worktree import (
    half_removed_worktrees,
    holders,
    initializing_worktrees,
    relink_moved,
    stale_git_locks,
)
from ..infra.errors import RebasectlError
from ..infra.faults import boundary
from ..infra.fsutil import Finished, recover
from ..infra.lock import RepoLock
from ..model.ids import is_abbrev, short
from ..model.series import Series
from ..model.workspace import Workspace

Notify = Callable[[str], None]
SHOWN = 5  # the files a line names before "..."


def quiet(text: str) -> None:
    return None


@contextmanager
def locked(ws: Workspace, command: str, notify: Notify = quiet) -> Iterator[None]:
    ws.ensure_state_dir()
    with RepoLock(ws.lock_file, command):
        _finish(ws, notify)
        repair_git(ws, notify)
        yield


def _finish(ws: Workspace, notify: Notify) -> None:
    done = recover(ws.root, ws.journal_dir, ws.overwritten)
    if done is not None:
        notify(finished_words(ws, done))


def finished_words(ws: Workspace, done: Finished) -> str:
    """The line that says an interrupted export (import) was finished, and where the files a
    person changed after the interruption went: the journal's version of each was written
    (the series is one export's again), theirs kept to bring their change back from."""
    when = f" at {done.at}" if done.at else ""
    counts = f"{done.written} more file{'s' if done.written != 1 else ''} written"
    counts += f", {done.deleted} deleted" if done.deleted else ""
    if not done.written and not done.deleted:  # it had written them all, not its journal end
        counts = "every file had been written before the interruption"
    text = f"finished the {done.what} interrupted{when}: {counts}"
    if done.folder is not None:
        more = len(done.kept) - SHOWN
        shown = ", ".join(done.kept[:SHOWN] + ([f"and {more} more"] if more > 0 else []))
        text += (f"; {shown} had been changed since the interruption: your version is kept in "
                 f"{done.folder.relative_to(ws.root)}/ (bring your change back from there)")
    if done.rewritten:
        text += (f"; {', '.join(done.rewritten)} had been deleted since the interruption and "
                 "is written again (`rebasectl export --drop ID` leaves a patch out)")
    return text


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
        if ws.inside_state(half):  # its files kept unless an abort is finishing the removal
            kept = None if ws.aborting.exists() else keep_unlinked(ws, half)
            shutil.rmtree(half, ignore_errors=True)
            notify(f"removed the rest of {half}, left by an interrupted `git worktree remove`"
                   if kept is None else f"{half} had lost its .git (git cannot tell your files "
                   f"from the series'): its files were moved to {kept}")
    Repo(ws.mirror).prune_worktrees()


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
            boundary("git-wait")
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
    """``--upstream``, with a relative local path taken from ``-C`` (as git does); an empty one
    is refused (it named the series folder itself, or was taken for none)."""
    if upstream is not None and not upstream.strip():
        raise RebasectlError("--upstream is empty: give the upstream's URL or path")
    if upstream is None or "://" in upstream or ":" in upstream.split("/", 1)[0]:
        return upstream
    candidate = ws.path(upstream)
    return str(candidate) if candidate.exists() else upstream


def mirror_for(ws: Workspace, series: Series, upstream: str | None, revs: list[str]) -> Repo:
    return open_for(ws, source(ws, upstream), series.upstream.url, revs)


def apply_mirror(ws: Workspace) -> Repo:
    """The mirror an apply in progress works in; gone, its work tree is no git checkout any
    more, so the way on is to start the apply again."""
    if not (ws.mirror / "HEAD").exists():
        state, _ = tolerant(ApplyState.load, ws.apply_state)
        base = f" --base {short(state.base)}" if state else ""
        raise RebasectlError(f"no upstream mirror ({ws.mirror} is gone) and the apply in "
                             f"progress needs it: `rebasectl abort`, then `rebasectl apply{base} "
                             "--upstream URL|PATH` starts it again")
    return Repo(ws.mirror, upstream=True)


ABORT_INTERRUPTED = ("an abort was interrupted (the work tree may be half removed): "
                     "`rebasectl abort` finishes it")


def in_progress(ws: Workspace) -> None:
    """An apply to go on with: there is one, and no abort of it was interrupted (its tree may
    be half removed: only abort finishes that)."""
    if ws.aborting.exists():
        raise RebasectlError(ABORT_INTERRUPTED)
    if not ws.apply_state.exists():
        raise RebasectlError("no apply in progress (start one with `rebasectl apply`)")


def finish_interrupted_write(ws: Workspace, notify: Notify = quiet, *, command: str) -> None:
    """Roll an export/import that was interrupted halfway forward before reading the series, so
    that read-only commands never show a mixture of old and new files. The front calls this
    before every command, ``notify`` its way of saying so (some commands have no news of
    their own to pass it through). The lock names ``command``, the one the person ran: a
    second rebasectl meanwhile is told to wait for it, never for a command that does not
    exist."""
    if ws.journal_dir.exists():
        ws.ensure_state_dir()
        with RepoLock(ws.lock_file, command):
            _finish(ws, notify)


def fetched_mirror(ws: Workspace, upstream: str | None, series: Series, to_rev: str,
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
