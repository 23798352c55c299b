"""``blame``: the upstream commits that broke or touched one patch between two bases."""

from __future__ import annotations

from typing import Any

from ..engine.upstream import resolve
from ..git.repo import Repo
from ..infra.errors import RebasectlError
from ..model.ids import Oid, short
from ..model.series import load
from ..model.workspace import Workspace
from .common import (
    Notify,
    fetched_mirror,
    locked,
    quiet,
)


def blame(ws: Workspace, patch_ref: str, from_rev: str | None, to_rev: str | None,
          upstream: str | None, notify: Notify = quiet) -> dict[str, Any]:
    from . import bump as bumping

    with locked(ws, "blame", notify):  # it may create or fetch the mirror
        series = load(ws.root)
        to_name = to_rev or series.upstream.branch
        repo = fetched_mirror(ws, upstream, series, to_name, notify, from_rev)
        old = resolve(repo, from_rev or series.upstream.base, what="--from revision")
        new = resolve(repo, to_name, what="--to revision")
        if not repo.history.is_ancestor(old, new):
            raise RebasectlError(f"--from {short(old)} is not an ancestor of --to {short(new)}")
        # a patch upstream carries at --from already was upstreamed after the series' base:
        # looked for from there, so that --from does not turn "upstreamed" into "conflict"
        since = _since(repo, series.upstream.base, old) if from_rev else None
        return bumping.blame(ws, repo, series, patch_ref, old, new, notify, since)


def _since(repo: Repo, base: str, old: Oid) -> Oid | None:
    """The series' base when it is an older ancestor of --from (else nothing to look back
    over: a --from older than the base, or a base the mirror does not have)."""
    try:
        at = resolve(repo, base, what="base")
    except RebasectlError:
        return None
    return at if at != old and repo.history.is_ancestor(at, old) else None
