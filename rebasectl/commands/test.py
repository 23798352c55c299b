"""``test``: the regression suite on the tree it is asked for: given, the patched work tree
(applied first when needed), or a checkout of the unpatched base. ``prepare`` decides every tree
the run needs (the one tested and, for the patched tree, the unpatched base the default-path
checks compare it with), ``run`` runs the suite on them; cli.py only parses and renders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.edits import changed_since_built
from ..engine.state import TreeMap
from ..engine.upstream import resolve
from ..infra.errors import RebasectlError
from ..infra.progress import Notify
from ..model.series import load
from ..model.workspace import Workspace
from .apply import apply
from .common import (
    locked,
    mirror_for,
)

if TYPE_CHECKING:
    from ..engine.testing import TestRun


def test_tree(ws: Workspace, against: str, upstream: str | None, tree: Path | None) -> Path:
    """The tree ``rebasectl test`` runs on: given, or the patched work tree (applied if needed,
    and made again when a patch file or the list of patches changed since it was built: the
    series as it is now is what gets tested), or a checkout of the unpatched base."""
    from ..engine.testing import check_tree, ensure_base_tree

    if tree is not None:
        return check_tree(ws.path(tree))
    series = load(ws.root)
    if against == "base":
        with locked(ws, "test --against base"):
            repo = mirror_for(ws, series, upstream, [series.upstream.base])
            return ensure_base_tree(ws, repo, resolve(repo, series.upstream.base, what="base"))
    if ws.apply_state.exists():
        raise RebasectlError("an apply is in progress: finish it before testing")
    tmap = TreeMap.load(ws.tree_map)
    if tmap is not None and (tmap.worktree / ".git").exists() and \
            tmap.base == series.upstream.base and not (
                tmap.baseline and changed_since_built(ws, tmap.baseline, series)):
        return tmap.worktree
    outcome = apply(ws, None, upstream, None)  # made, or made again from the series as it is
    if outcome.stop is not None:
        raise RebasectlError(f"the series does not apply on its base: stopped at "
                             f"{outcome.stop.id}; resolve it (`rebasectl status`) first")
    return outcome.worktree


@dataclass(frozen=True)
class Trees:
    """The trees a run needs: the one tested (``tree``) and the unpatched base the default-path
    checks compare the patched tree with (``base``; None when it is not the patched work tree
    that is tested: ``--against base`` or ``--tree``)."""

    tree: Path
    base: Path | None = None


def prepare(ws: Workspace, against: str, upstream: str | None, tree: Path | None,
            jobs: int) -> Trees:
    """What must hold before the suite runs (``-j`` needs pytest-xdist), then the trees."""
    from ..engine.testing import preflight

    preflight(jobs)
    load(ws.root, check_tests=True)  # a test path that is not there: one line, before any work
    tested = test_tree(ws, against, upstream, tree)
    base = default_path_base(ws, upstream) if against == "patched" and tree is None else None
    return Trees(tested, base)


def default_path_base(ws: Workspace, upstream: str | None) -> Path:
    """The unpatched base checkout the regression suite's default-path checks compare the
    patched tree with (made once under .rebasectl/base-tree)."""
    from ..engine.testing import ensure_base_tree

    series = load(ws.root)
    with locked(ws, "test"):
        repo = mirror_for(ws, series, upstream, [series.upstream.base])
        return ensure_base_tree(ws, repo, resolve(repo, series.upstream.base, what="base"))


def run(ws: Workspace, trees: Trees, *, against: str, device: str | None,
        patch_id: str | None, jobs: int, multi_gpu: int | None,
        notify: Notify | None = None) -> TestRun:
    from ..engine.testing import run_tests

    return run_tests(ws, trees.tree, against=against, device=device, patch_id=patch_id,
                     jobs=jobs, multi_gpu=multi_gpu or 0, base_tree=trees.base, notify=notify)
