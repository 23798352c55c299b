"""``fetch``: create or update the cached mirror of the upstream."""

from __future__ import annotations

from ..engine.upstream import choose_source, ensure_mirror, mirror
from ..infra.errors import RebasectlError
from ..model.series import load
from ..model.workspace import Workspace
from .common import (
    locked,
    source,
)


def fetch(ws: Workspace, upstream: str | None) -> tuple[str, bool]:
    """The mirror's path, and whether this fetch created it (the first one clones)."""
    with locked(ws, "fetch"):
        series_url = load(ws.root, check_files=False).upstream.url \
            if ws.series_file.exists() else None
        chosen = choose_source(source(ws, upstream), series_url)
        if chosen is None:
            raise RebasectlError("no upstream: pass --upstream URL|PATH")
        created = mirror(ws) is None
        return str(ensure_mirror(ws, chosen, update=True).path), created
