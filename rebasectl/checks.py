"""``status`` and ``check``: what the series is, and whether it is valid (and applies).

``check --apply`` proves, without a work tree, that every patch applies exactly (no 3-way, no
fuzz) on the pinned base, and that every patch file is canonical: the commit it becomes renders
back to the same bytes, so a re-export would change nothing (the PR check relies on this).
"""

from __future__ import annotations

from typing import Any

from . import session
from .errors import ConflictError
from .exchange import load_patches, patch_from_commit
from .fsutil import recover
from .gitio import Git
from .lock import RepoLock
from .materialize import materialise
from .series import load
from .upstream import open_for, resolve
from .workspace import Workspace


def finish_interrupted_write(ws: Workspace) -> None:
    """Roll an export/import that was interrupted halfway forward before reading the series, so
    that read-only commands never show a mixture of old and new files."""
    if ws.journal_dir.exists():
        with RepoLock(ws.lock_file, "recover"):
            recover(ws.root, ws.journal_dir)


def status(ws: Workspace) -> dict[str, Any]:
    finish_interrupted_write(ws)
    series = load(ws.root)
    loaded = load_patches(ws, series)
    patches = []
    for number, lp in enumerate(loaded, start=1):
        files = lp.patch.files()
        patches.append(
            {
                "index": number,
                "id": lp.entry.id,
                "file": lp.entry.file,
                "title": lp.entry.title,
                "kind": lp.entry.kind,
                "files": len(files),
                "added": sum(f.added for f in files),
                "removed": sum(f.removed for f in files),
                "empty": lp.patch.is_empty,
            }
        )
    up = series.upstream
    return {
        "schema": "rebasectl.status/1",
        "upstream": {"name": up.name, "url": up.url, "branch": up.branch, "base": up.base},
        "patches": patches,
        "apply_in_progress": session.describe(ws),
    }


def check(ws: Workspace, apply: bool, upstream: str | None) -> dict[str, Any]:
    finish_interrupted_write(ws)
    series = load(ws.root)
    loaded = load_patches(ws, series)
    problems: list[str] = []
    for lp in loaded:
        if lp.patch.subject != lp.entry.title:
            problems.append(f"{lp.entry.id}: title in series.yaml differs from the patch subject")
    result: dict[str, Any] = {
        "schema": "rebasectl.check/1",
        "valid": True,
        "patches": len(loaded),
        "problems": problems,
    }
    if apply:
        ws.ensure_state_dir()
        with RepoLock(ws.lock_file, "check --apply"):  # it may create or fetch the mirror
            git = open_for(ws, upstream, series.upstream.url, [series.upstream.base])
        base = resolve(git, series.upstream.base, what="base")
        done = materialise(git, base, [(lp.entry.id, lp.patch) for lp in loaded], three_way=False)
        result["applies"] = done.ok
        result["tip"] = done.tip if done.ok else None
        result["steps"] = [{"index": s.index, "id": s.id, "status": s.status} for s in done.steps]
        stopped = done.first_conflict()
        if stopped is not None:
            where = "; ".join(f"{c.path} {' '.join(c.hunks)}".strip() for c in stopped.conflicts)
            raise ConflictError(
                f"patch {stopped.index} {stopped.id} does not apply exactly on {base[:12]}: {where}"
            )
        for lp, step in zip(loaded, done.steps):
            if step.commit is None:
                continue
            rendered = patch_from_commit(Git(git.path), git.commit(step.commit)).render()
            if rendered != (ws.patch_dir / lp.entry.file).read_bytes():
                problems.append(
                    f"{lp.entry.file}: not canonical (a re-export would rewrite it); "
                    "run `rebasectl apply` + `rebasectl export`"
                )
    if problems:
        result["valid"] = False
    return result
