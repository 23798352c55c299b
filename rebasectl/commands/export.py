"""``export``: patches/ and series.yaml written back from the work tree's commits."""

from __future__ import annotations

from pathlib import Path

from ..engine.exchange import (
    Built,
    export_tree,
)
from ..engine.state import TreeMap
from ..infra.errors import RebasectlError
from ..model.series import Series
from ..model.workspace import Workspace
from .common import (
    Notify,
    locked,
    quiet,
)


def export(ws: Workspace, worktree: Path | None, drops: list[str],
           notify: Notify = quiet, force: bool = False) -> tuple[Series, Built, list[str]]:
    """``force``: write over files edited by hand since the tree was built (copies kept)."""

    with locked(ws, "export", notify):
        if ws.apply_state.exists():
            raise RebasectlError("an apply is in progress: finish it (`rebasectl continue`, "
                                 "`skip`) or `rebasectl abort` before exporting")
        tmap = TreeMap.load(ws.tree_map)
        path = ws.path(worktree) if worktree else (tmap.worktree if tmap else ws.default_tree)
        return export_tree(ws, path, drops, force)
