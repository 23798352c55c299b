"""``check``: whether series.yaml and the patch files are valid; with ``--apply``, the proof,
without a work tree, that every patch applies exactly (no 3-way, no fuzz) on the pinned base and
that every patch file is canonical (the commit it becomes renders back to the same bytes, so a
re-export would change nothing)."""

from __future__ import annotations

from typing import Any

from ..engine import serialize
from ..engine.exchange import (
    check_links_on,
    load_patches,
    patch_from_commit,
)
from ..engine.materialize import Materializer
from ..engine.upstream import open_for, resolve
from ..git import Repo
from ..infra.lock import RepoLock
from ..model.ids import short
from ..model.series import load
from ..model.workspace import Workspace
from .common import (
    finish_interrupted_write,
)


def check(ws: Workspace, apply: bool, upstream: str | None) -> dict[str, Any]:
    finish_interrupted_write(ws, command="check")
    series = load(ws.root, check_tests=True)
    loaded = load_patches(ws, series)
    problems = [f"{lp.id}: title in series.yaml differs from the patch subject"
                for lp in loaded if lp.subject != lp.entry.title]
    result: dict[str, Any] = {"schema": "rebasectl.check/1", "valid": True,
                              "patches": len(loaded), "problems": problems}
    if apply:
        ws.ensure_state_dir()
        with RepoLock(ws.lock_file, "check --apply"):  # it may create or fetch the mirror
            repo = open_for(ws, upstream, series.upstream.url, [series.upstream.base])
        base = resolve(repo, series.upstream.base, what="base")
        check_links_on(repo, base, loaded)
        done = Materializer(repo).run(base, loaded, three_way=False)
        result["applies"] = done.ok
        result["tip"] = done.tip if done.ok else None
        result["steps"] = [serialize.step(s) for s in done.steps]
        stopped = done.first_conflict()
        if stopped is not None:
            where = "; ".join(f"{c.path} ({c.kind.value})" for c in stopped.conflicts) or \
                "it merges only with a 3-way merge"
            problems.append(f"patch {stopped.index} {stopped.id} does not apply exactly on "
                            f"{short(base)}: {where}")
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
        if rendered != (ws.patch_dir / lp.file).read_bytes():
            out.append(f"{lp.file}: not canonical (a re-export would rewrite it); run "
                       "`rebasectl apply` + `rebasectl export`")
    return out
