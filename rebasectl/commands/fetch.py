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


def fetch(ws: Workspace, upstream: str | None) -> tuple[str, bool, int]:
    """The mirror's path, whether this fetch created it (the first one clones), and how many
    of the upstream's branches and tags it moved, added or removed (0: up to date)."""
    with locked(ws, "fetch"):
        series_url = load(ws.root, check_files=False).upstream.url \
            if ws.series_file.exists() else None
        chosen = choose_source(source(ws, upstream), series_url)
        if chosen is None:
            raise RebasectlError("no upstream: pass --upstream URL|PATH")
        existing = mirror(ws)
        before = existing.upstream_refs() if existing is not None else {}
        repo = ensure_mirror(ws, chosen, update=True)
        after = repo.upstream_refs()
        changed = sum(1 for ref in {*before, *after} if before.get(ref) != after.get(ref))
        return str(repo.path), existing is None, changed
