"""``status`` and ``check``: what the series is, and whether it is valid (and applies).

``status`` reads series.yaml and the patch files once each (no git): a series of any size answers
at once. With an apply stopped at a conflict it lists the unmerged paths of the work tree and the
kind of each conflict. ``check --apply`` proves, without a work tree, that every patch applies
exactly (no 3-way, no fuzz) on the pinned base, and that every patch file is canonical: the commit
it becomes renders back to the same bytes, so a re-export would change nothing.
"""

from __future__ import annotations

from typing import Any

from ..engine.exchange import check_links_on, load_patches, patch_from_commit, patch_stats
from ..engine.materialize import Materializer
from ..engine.state import ApplyState
from ..engine.upstream import open_for, resolve
from ..git import Repo, Worktree
from ..infra.fsutil import recover
from ..infra.lock import RepoLock
from ..model.series import load
from ..model.workspace import Workspace


def finish_interrupted_write(ws: Workspace) -> None:
    """Roll an export/import that was interrupted halfway forward before reading the series, so
    that read-only commands never show a mixture of old and new files."""
    if ws.journal_dir.exists():
        ws.ensure_state_dir()
        with RepoLock(ws.lock_file, "recover"):
            recover(ws.root, ws.journal_dir)


def status(ws: Workspace) -> dict[str, Any]:
    finish_interrupted_write(ws)
    series = load(ws.root)
    patches = []
    for number, (entry, st) in enumerate(zip(series.patches, patch_stats(ws, series)), start=1):
        patches.append({"index": number, "id": entry.id, "file": entry.file,
                        "title": entry.title, "kind": entry.kind, "files": st.files,
                        "added": st.added, "removed": st.removed, "empty": st.files == 0})
    up = series.upstream
    return {"schema": "rebasectl.status/1",
            "upstream": {"name": up.name, "url": up.url, "branch": up.branch, "base": up.base},
            "patches": patches, "apply_in_progress": describe_apply(ws)}


def describe_apply(ws: Workspace) -> dict[str, Any] | None:
    """The apply in progress: where it stopped, and the work tree's unmerged paths with the kind
    of each conflict (git's own view of the tree, read now)."""
    state = ApplyState.load(ws.apply_state)
    if state is None:
        return None
    kinds = {str(c.get("path")): str(c.get("kind")) for c in state.conflicts}
    tree = Worktree(ws.path(state.worktree))
    unmerged = tree.status().unmerged if tree.exists and state.in_tree else []
    return {"base": state.base, "worktree": state.worktree, "applied": len(state.done),
            "total": len(state.ids), "stopped_at": state.current, "skipped": state.skipped,
            "unmerged": [{"path": p, "kind": kinds.get(p, "content")} for p in unmerged],
            "conflicts": state.conflicts}


def check(ws: Workspace, apply: bool, upstream: str | None) -> dict[str, Any]:
    finish_interrupted_write(ws)
    series = load(ws.root)
    loaded = load_patches(ws, series)
    problems = [f"{lp.entry.id}: title in series.yaml differs from the patch subject"
                for lp in loaded if lp.patch.subject != lp.entry.title]
    result: dict[str, Any] = {"schema": "rebasectl.check/1", "valid": True,
                              "patches": len(loaded), "problems": problems}
    if apply:
        ws.ensure_state_dir()
        with RepoLock(ws.lock_file, "check --apply"):  # it may create or fetch the mirror
            repo = open_for(ws, upstream, series.upstream.url, [series.upstream.base])
        base = resolve(repo, series.upstream.base, what="base")
        check_links_on(repo, base, loaded)
        done = Materializer(repo).run(base, [(lp.entry.id, lp.patch) for lp in loaded],
                                      three_way=False)
        result["applies"] = done.ok
        result["tip"] = done.tip if done.ok else None
        result["steps"] = [s.to_json() for s in done.steps]
        stopped = done.first_conflict()
        if stopped is not None:
            where = "; ".join(f"{c.path} ({c.kind.value})" for c in stopped.conflicts) or \
                "it merges only with a 3-way merge"
            problems.append(f"patch {stopped.index} {stopped.id} does not apply exactly on "
                            f"{base[:12]}: {where}")
        else:
            problems += _not_canonical(ws, repo, loaded, done.steps)
    result["valid"] = not problems
    return result


def _not_canonical(ws: Workspace, repo: Repo, loaded: list[Any], steps: list[Any]) -> list[str]:
    out = []
    for lp, step in zip(loaded, steps):
        if step.commit is None:
            continue
        rendered = patch_from_commit(repo, repo.commit(step.commit)).render()
        if rendered != (ws.patch_dir / lp.entry.file).read_bytes():
            out.append(f"{lp.entry.file}: not canonical (a re-export would rewrite it); run "
                       "`rebasectl apply` + `rebasectl export`")
    return out
