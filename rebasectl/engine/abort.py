"""``rebasectl abort``: what it removes, and what it keeps.

Abort gives up the apply in progress: its state goes, and its work tree goes when it is one of
ours (registered in our mirror; a state file naming any other directory removes nothing there).
An unreadable state (a half-written or hand-edited ``apply-state.json`` or ``tree.json``) is
what every command points to abort for, so abort clears it too, taking the default work tree.

What the person had in a removed tree and cannot get back from the series is kept first, under
``.rebasectl/aborted/<time>/``: untracked files, ignored ones included (notes written during a
resolution, an editor's backups; moved, not copied, so a large file costs nothing; Python's
regenerable caches excepted), and commits no ref and no apply of ours reaches (``git
format-patch``, ready for ``git am``). Edits to the
conflicted files are the resolution being abandoned and go, as ``git rebase --abort`` drops
them.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..git.worktree import Worktree
from ..infra.errors import RebasectlError
from ..model.workspace import Workspace
from .state import ApplyState, TreeMap, tolerant
from .worktrees import clear, registered


@dataclass
class AbortResult:
    removed: list[Path] = field(default_factory=list)  # work trees removed
    left: list[Path] = field(default_factory=list)  # named by the state, not ours: untouched
    cleared: list[Path] = field(default_factory=list)  # state files removed
    kept: Path | None = None  # where untracked files / commits of removed trees were saved
    kept_files: int = 0
    kept_commits: int = 0


def abort(ws: Workspace) -> AbortResult:
    """Clear the apply in progress (or an unreadable state) under the caller's lock."""
    state, bad_state = tolerant(ApplyState.load, ws.apply_state)
    tmap, bad_map = tolerant(TreeMap.load, ws.tree_map)
    if state is None and not (bad_state or bad_map):
        raise RebasectlError("no apply in progress (start one with `rebasectl apply`)")
    tree = Path(state.worktree) if state is not None else ws.default_tree
    known = [t for t in (state.tip if state else None, tmap.tip if tmap else None) if t]
    result = AbortResult()
    if registered(ws, tree):  # also with the mirror gone: its .git names our mirror
        _keep(ws, Worktree(tree), known, result)
        clear(ws, tree)
        result.removed.append(tree)
    elif tree.exists():
        result.left.append(tree)
    stale_map = bad_map or (tmap is not None and
                            tmap.worktree.resolve() in [t.resolve() for t in result.removed])
    for path in [ws.apply_state] + ([ws.tree_map] if stale_map else []):
        if path.exists():
            path.unlink()
            result.cleared.append(path)
    return result


def _keep(ws: Workspace, tree: Worktree, known: Sequence[str], result: AbortResult) -> None:
    """Save what only this work tree holds (see the module doc) before it is removed."""
    dest = ws.aborted / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    try:
        untracked = [p for p in tree.status().untracked + tree.ignored() if not _cache(p)]
    except RebasectlError:
        untracked = []
    for rel in dict.fromkeys(untracked):
        target = dest / "untracked" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(tree.path / rel, target)
    commits = tree.save_commits(dest / "commits", known) if tree.head() else 0
    if not commits and (dest / "commits").is_dir():
        shutil.rmtree(dest / "commits")  # format-patch makes the folder before it finds none
    if untracked or commits:
        result.kept, result.kept_files, result.kept_commits = dest, len(untracked), commits


def _cache(path: str) -> bool:
    """Files Python makes and makes again (byte code, test caches): not worth keeping."""
    parts = path.split("/")
    return "__pycache__" in parts or ".pytest_cache" in parts or path.endswith((".pyc", ".pyo"))
