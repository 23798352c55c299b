"""``resolve``: the proposals of the stopped patch's regions (engine.resolving): list them,
accept some or all (written, staged, the patch's regression tests run), reject some."""

from __future__ import annotations

from ..engine import resolving
from ..infra.errors import RebasectlError
from ..model.workspace import Workspace
from .common import Notify, apply_mirror, in_progress, locked, quiet


def run(ws: Workspace, action: str, ids: list[str], everything: bool,
        notify: Notify = quiet) -> resolving.Board:
    with locked(ws, "resolve", notify):
        in_progress(ws)
        repo = apply_mirror(ws)
        if action == "accept":
            if not ids and not everything:
                raise RebasectlError("resolve --accept needs region ids or --all")
            return resolving.accept(ws, repo, ids, everything, notify)
        if action == "reject":
            if not ids:
                raise RebasectlError("resolve --reject needs region ids")
            return resolving.reject(ws, repo, ids)
        return resolving.board(ws, repo)
