"""``import``: a series built from a commit range."""

from __future__ import annotations

from pathlib import Path

from ..engine.exchange import (
    Imported,
    import_range,
)
from ..model.workspace import Workspace
from .common import (
    locked,
)


def do_import(ws: Workspace, rev_range: str, repo: Path, branch: str | None) -> Imported:
    with locked(ws, "import"):
        return import_range(ws, ws.path(repo), rev_range, branch)
