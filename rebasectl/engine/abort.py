"""``rebasectl abort``: what it removes, and what it keeps.

Abort gives up the apply in progress: its state goes, and its work tree goes when it is one of
ours (registered in our mirror; a state file naming any other directory removes nothing there).
An unreadable state (a half-written or hand-edited ``apply-state.json`` or ``tree.json``) is
what every command points to abort for, so abort clears it too, taking the default work tree.

What the person had in a removed tree and cannot get back from the series is kept first, under
``.rebasectl/aborted/<time>/``: untracked files, ignored ones included (notes written during a
resolution, an editor's backups; moved, not copied, so a large file costs nothing; Python's
regenerable caches excepted), commits no ref and no apply of ours reaches (``git
format-patch``, ready for ``git am``), and under ``edited/`` a copy of each tracked file the
person changed: one the stop wrote when it changed after the stop (a hand resolution in
progress, an accepted proposal: newer than the apply state the stop wrote), any other changed
tracked file always (an edit ``continue`` left unstaged, as ``git am --continue`` does).
``git rebase --abort`` drops those edits; an hour of resolving a large patch is not the
series' to lose (rerere records nothing before ``continue``). Files as the stop left them are
the series' and go. A tree git can no longer read (its registration in the mirror pruned while
it was moved aside, or removed by hand) tells none of this: all its files are kept, under
``tree/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..git import Repo
from ..git.worktree import Worktree
from ..infra.errors import RebasectlError
from ..infra.faults import boundary
from ..model.workspace import Workspace
from .state import ApplyState, TreeMap, tolerant
from .worktrees import clear, kept_folder, move_files, registered


@dataclass
class AbortResult:
    removed: list[Path] = field(default_factory=list)  # work trees removed
    left: list[Path] = field(default_factory=list)  # named by the state, not ours: untouched
    cleared: list[Path] = field(default_factory=list)  # state files removed
    kept: Path | None = None  # where untracked files / commits of removed trees were saved
    kept_files: int = 0
    kept_commits: int = 0
    kept_edits: int = 0  # tracked files changed after the stop, copied under edited/
    kept_tree: int = 0  # files of a tree git could no longer read, all moved under tree/
    restored: tuple[Path, str] | None = None  # the tree the apply replaced, back at its tip
    remake: tuple[Path, str, bool] | None = None  # not restorable: (path, base, default tree?)
    stashes: int = 0  # git stash entries the removed tree's refusals advised: in the mirror
    mirror: Path | None = None  # where they are


def abort(ws: Workspace) -> AbortResult:
    """Clear the apply in progress (or an unreadable state) under the caller's lock. A marker
    (``ws.aborting``) stands from the first change to the last, so an abort killed mid-way
    (a work tree half removed, no longer a git tree) is named by status and finished by a
    rerun; a rerun takes nothing more from a tree without its ``.git`` (the first run kept what
    the person had before it removed anything)."""
    state, bad_state = tolerant(ApplyState.load, ws.apply_state)
    tmap, bad_map = tolerant(TreeMap.load, ws.tree_map)
    if state is None and not (bad_state or bad_map):
        if ws.aborting.exists():  # killed after the state went: nothing left but the marker
            ws.aborting.unlink()
            return AbortResult()
        raise RebasectlError("no apply in progress (start one with `rebasectl apply`)")
    rerun = ws.aborting.exists()  # finishing a killed abort: its first run kept what was kept
    ws.aborting.touch()
    result = _abort(ws, state, tmap, bad_map, rerun)
    ws.aborting.unlink(missing_ok=True)
    if result.removed and (ws.mirror / "HEAD").exists():  # refs/stash outlives the tree
        result.stashes, result.mirror = Repo(ws.mirror).stash_count(), ws.mirror
    return result


def _abort(ws: Workspace, state: ApplyState | None, tmap: TreeMap | None,
           bad_map: bool, rerun: bool = False) -> AbortResult:
    tree = Path(state.worktree) if state is not None else ws.default_tree
    known = [t for t in (state.tip if state else None, tmap.tip if tmap else None) if t]
    result = AbortResult()
    if registered(ws, tree):  # also with the mirror gone: its .git names our mirror
        stopped = ws.apply_state.stat().st_mtime_ns if state is not None else None
        if Worktree(tree).exists:  # without its .git, git would read the series checkout
            _keep(ws, Worktree(tree), known, result, stopped, state.written if state else [])
        boundary("abort-removing")
        unlinked = clear(ws, tree, keep=not rerun)  # a tree that lost its .git: files kept
        if unlinked is not None:
            result.kept, result.kept_tree = unlinked.parent, _count_files(unlinked)
        result.removed.append(tree)
    elif tree.exists():
        result.left.append(tree)
    if state is not None and tmap is not None and not tree.exists():
        _put_back(ws, tmap, tree, result)
    stale_map = bad_map or (tmap is not None and result.restored is None and
                            tmap.worktree.resolve() in [t.resolve() for t in result.removed])
    for path in [ws.apply_state] + ([ws.tree_map] if stale_map else []):
        if path.exists():
            path.unlink()
            result.cleared.append(path)
    return result


def _put_back(ws: Workspace, tmap: TreeMap, tree: Path, result: AbortResult) -> None:
    """The work tree this apply replaced (the tree map still names its tip: the map changes
    only when an apply finishes) made again at that commit, so everything is as before the
    apply, an ``apply --install``'s .pth included. When its commit is gone from the mirror,
    the apply that made it is named instead."""
    tip = tmap.tip_of(tree)
    if tip is None:
        return
    repo = Repo(ws.mirror) if (ws.mirror / "HEAD").exists() else None
    if repo is not None and repo.resolve(tip) == tip:
        repo.add_worktree(tree, tip)
        result.restored = (tree, tip)
    elif tmap.worktree.resolve() == tree.resolve():
        result.remake = (tree, tmap.base, tree.resolve() == ws.default_tree.resolve())


def _keep(ws: Workspace, tree: Worktree, known: Sequence[str], result: AbortResult,
          stopped: int | None, written: Sequence[str]) -> None:
    """Save what only this work tree holds (see the module doc) before it is removed."""
    dest = kept_folder(ws)
    try:
        status = tree.status()
        untracked = [p for p in status.untracked + tree.ignored() if not _cache(p)]
    except RebasectlError:  # git cannot read it (its registration pruned): none of it is told
        result.kept_tree = move_files(tree.path, dest / "tree")  # from the series': keep all
        result.kept = dest if result.kept_tree else None
        return
    edited = edited_files(tree.path, status.unmerged + status.changed, stopped, written) \
        if status else []
    copy_edited(tree.path, edited, dest)
    result.kept_edits = len(edited)
    for rel in dict.fromkeys(untracked):
        target = dest / "untracked" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(tree.path / rel, target)
    commits = tree.save_commits(dest / "commits", known) if tree.head() else 0
    if not commits and (dest / "commits").is_dir():
        shutil.rmtree(dest / "commits")  # format-patch makes the folder before it finds none
    if untracked or commits or edited:
        result.kept, result.kept_files, result.kept_commits = dest, len(untracked), commits


def _count_files(folder: Path) -> int:
    return sum(1 for f in folder.rglob("*") if f.is_file())


def copy_edited(root: Path, edited: Sequence[str], dest: Path) -> None:
    """Copies of ``edited`` (paths under ``root``) in ``dest/edited/``."""
    for rel in edited:
        target = dest / "edited" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)


def edited_files(root: Path, changed: Sequence[str], stopped: int | None,
                 written: Sequence[str]) -> list[str]:
    """The person's changes among the changed tracked files: one the stop wrote (``written``)
    when written again after the stop's state (by the person, or ``resolve --accept``), any
    other always; none without a state to date the stop by."""
    if stopped is None:
        return []
    out = []
    for rel in dict.fromkeys(changed):
        path = root / rel
        if path.is_file() and not path.is_symlink() and \
                (rel not in written or path.stat().st_mtime_ns > stopped):
            out.append(rel)
    return out


def _cache(path: str) -> bool:
    """Files Python makes and makes again (byte code, test caches): not worth keeping."""
    parts = path.split("/")
    return "__pycache__" in parts or ".pytest_cache" in parts or path.endswith((".pyc", ".pyo"))
