"""``status``: what the series is (series.yaml and the patch files, no git: any size answers at
once) and, with an apply stopped at a conflict, the work tree's unmerged paths and the kind of
each conflict."""

from __future__ import annotations

from typing import Any

from ..engine.attribution import blockers
from ..engine.exchange import load_patches, patch_stats
from ..engine.holdups import unregistered
from ..engine.serialize import recorded_conflicts
from ..engine.state import ApplyState, Carrying, TreeMap, tolerant
from ..git import Worktree
from ..git.worktree import linked_elsewhere
from ..infra.errors import GitError
from ..model.dependencies import SeriesLines
from ..model.series import load
from ..model.workspace import Workspace
from .common import (
    finish_interrupted_write,
)


def status(ws: Workspace) -> dict[str, Any]:
    finish_interrupted_write(ws, command="status")
    series = load(ws.root)
    patches = []
    for number, (entry, st) in enumerate(zip(series.patches, patch_stats(ws, series)), start=1):
        patches.append({"index": number, "id": entry.id, "file": entry.file,
                        "title": entry.title, "kind": entry.kind, "files": st.files,
                        "added": st.added, "removed": st.removed, "empty": st.files == 0})
    up = series.upstream
    return {"schema": "rebasectl.status/1",
            "upstream": {"name": up.name, "url": up.url, "branch": up.branch, "base": up.base},
            "patches": patches, "apply_in_progress": (progress := describe_apply(ws)),
            "missing_worktree": None if progress else missing_worktree(ws),
            "interrupted_bump": None if progress else interrupted_bump(ws),
            "stashed": stashed(ws, progress), "abort_interrupted": ws.aborting.exists()}


def stashed(ws: Workspace, progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """``git stash`` entries in the work tree (the way past a refusal of continue/skip stashes
    the person's changes; they come back only by a pop once the apply is done): the tree and
    how many, or None."""
    where = progress["worktree"] if progress else None
    if where is None:
        tmap, _ = tolerant(TreeMap.load, ws.tree_map)
        where = str(tmap.worktree) if tmap is not None else None
    if where is None:
        return None
    tree = Worktree(ws.path(where))
    try:
        count = tree.stashes() if tree.exists else 0
    except GitError:
        return None
    return {"worktree": str(tree.path), "count": count} if count else None


def interrupted_bump(ws: Workspace) -> dict[str, str] | None:
    """A clean bump killed while it made the new work tree (engine/state.Carrying): the tree
    it was making and the revision, for the rerun that finishes it."""
    carrying, _ = tolerant(Carrying.load, ws.carrying)
    if carrying is None:
        return None
    return {"worktree": str(carrying.worktree), "to": str(carrying.to)}


def missing_worktree(ws: Workspace) -> str | None:
    """The work tree the last apply or bump recorded, when it is gone: a kill between removing
    the old tree and making the new one leaves tree.json naming nothing (nothing is lost: the
    series is unchanged and ``apply`` makes the tree again)."""
    tmap, _ = tolerant(TreeMap.load, ws.tree_map)  # an unreadable one is abort's to report
    if tmap is None or ws.path(tmap.worktree).exists() or ws.carrying.exists():
        return None
    return str(tmap.worktree)


def describe_apply(ws: Workspace) -> dict[str, Any] | None:
    """The apply in progress: where it stopped, and the work tree's unmerged paths with the kind
    of each conflict (git's own view of the tree, read now)."""
    state = ApplyState.load(ws.apply_state)
    if state is None:
        return None
    kinds = {str(c.get("path")): str(c.get("kind")) for c in state.conflicts}
    tree = Worktree(ws.path(state.worktree))
    unmerged: list[str] = []
    tree_error = None
    committed: list[dict[str, str]] = []
    held: dict[str, Any] = {"refused": state.refused}  # a state from before refused_paths
    other = linked_elsewhere(tree.path) if tree.exists else None
    if other is not None:  # git would read the other checkout's HEAD and index as this one's
        tree_error = f"it was moved: its .git names the registration of {other}"
    else:
        try:
            committed = _unrecorded(ws, state, tree)
            if tree.exists and not committed:
                held = _held(state, tree)
                unmerged = tree.status().unmerged if state.in_tree else []
        except GitError as e:  # a moved checkout's tree links to the old place: continue relinks
            tree_error = str(e)
    gone = unregistered(tree, ws.mirror, state) if tree.exists else None
    return {"base": state.base, "worktree": state.worktree, "applied": len(state.done),
            "done_ids": [pid for pid, _ in state.done],
            "total": len(state.ids), "stopped_at": state.current, "skipped": state.skipped,
            "committed": committed, "blocked_by": _blocked_by(ws, state),
            "unmerged": [{"path": p, "kind": kinds.get(p, "content")} for p in unmerged],
            "conflicts": state.conflicts, "tree_error": tree_error, "unregistered": gone,
            "tree_missing": None if tree.exists else str(tree.path),
            "conflict_written": state.in_tree, "refused": held.get("refused"),
            "refused_gone": held.get("refused_gone"), "head_moved": held.get("head_moved"),
            "tree_at": None if committed or tree_error else _tree_at(state, tree)}


def _held(state: ApplyState, tree: Worktree) -> dict[str, Any]:
    """What holds the apply now (engine/holdups): a HEAD the person moved (what continue would
    refuse, in its words), else the last refusal while its files are still in the way (its
    line, naming only those), or the files it named once none is (``refused_gone``)."""
    from ..engine.holdups import head_moved, still_in_the_way
    from ..engine.session import in_the_way_message

    moved = head_moved(tree, state)
    if moved:
        return {"head_moved": moved}
    if not state.refused or not state.refused_paths:  # none, or from before files were kept
        return {"refused": state.refused}
    still = still_in_the_way(tree, state, tree.status())
    if still:
        return {"refused": in_the_way_message(tree.path, still)}
    return {"refused_gone": [p for _, p in state.refused_paths]}


def _tree_at(state: ApplyState, tree: Worktree) -> int | None:
    """How many of the applied patches the work tree's HEAD holds, when it is behind the
    state (a run killed or refused before it moved the tree): 0 at the base, None when it is
    at the state's tip or elsewhere."""
    head = tree.head() if tree.exists else None
    if head is None or head == state.tip:
        return None
    if head == state.base:
        return 0
    return next((n for n, (_, sha) in enumerate(state.done, 1) if sha == head), None)


def _unrecorded(ws: Workspace, state: ApplyState, tree: Worktree) -> list[dict[str, str]]:
    """Patches committed in the work tree by a run interrupted before it recorded them (the
    line that said so never printed): ``continue`` records them and goes on."""
    if not tree.exists or tree.head() in (None, state.tip) or not (ws.mirror / "HEAD").exists():
        return []
    from ..engine.session import Session
    from ..git import Repo

    loaded = {lp.id: lp for lp in load_patches(ws, load(ws.root))}
    if [i for i in state.ids if i not in loaded]:
        return []  # series.yaml changed under the apply: continue says so
    found = Session(ws, Repo(ws.mirror)).unrecorded(state, tree, loaded)
    return [{"id": pid, "commit": sha, "index": str(state.position(pid))} for pid, sha in found]


def _blocked_by(ws: Workspace, state: ApplyState) -> list[str]:
    """The skipped patches whose lines or files a region of the stopped patch's conflict needs
    (read from the patch files and the stop's recorded regions, as apply's stop says it)."""
    if state.current is None or not state.skipped or state.current not in state.ids:
        return []
    loaded = {lp.id: lp for lp in load_patches(ws, load(ws.root))}
    if [i for i in state.ids if i not in loaded]:
        return []  # series.yaml changed under the apply: continue says so
    stack = [loaded[i] for i in state.ids]
    pos = state.ids.index(state.current)
    return blockers(SeriesLines(stack[:pos + 1]), pos, recorded_conflicts(state.conflicts),
                    state.missing())
