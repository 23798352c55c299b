"""``blame``: the upstream commits that broke or touched one patch between two bases."""

from __future__ import annotations

from typing import Any

from ..engine.upstream import resolve
from ..infra.errors import RebasectlError
from ..model.ids import short
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
        return bumping.blame(ws, repo, series, patch_ref, old, new, notify)
