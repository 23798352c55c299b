"""``apply``: the series materialised in a work tree, stopping at a conflict the way ``git am -3``
does; with ``--install``, the finished tree made this Python environment's megatron."""

from __future__ import annotations

from pathlib import Path

from ..engine.exchange import (
    check_links_on,
    load_patches,
)
from ..engine.materialize import Materializer
from ..engine.session import ApplyOutcome, Session
from ..engine.upstream import on_upstream, resolve
from ..git import Repo
from ..model.ids import Oid
from ..model.series import load
from ..model.series_patch import SeriesPatch
from ..model.workspace import Workspace
from .common import (
    Notify,
    apply_mirror,
    locked,
    mirror_for,
    quiet,
)


def apply(ws: Workspace, base: str | None, upstream: str | None, worktree: Path | None,
          notify: Notify = quiet, propose: bool = False) -> ApplyOutcome:
    """``propose``: at a stop, the proposals of its regions too (shown; nothing written to the
    work tree)."""
    with locked(ws, "apply", notify):
        outcome = _apply(ws, base, upstream, worktree, notify)
        if propose and outcome.stop is not None:
            from ..engine import resolving

            notify("proposing resolutions")
            board = resolving.for_stop(ws, apply_mirror(ws))
            outcome.proposals = [p.to_json() for p in board.proposals]
        return outcome


def _apply(ws: Workspace, base: str | None, upstream: str | None, worktree: Path | None,
           notify: Notify) -> ApplyOutcome:
    series = load(ws.root)
    loaded = load_patches(ws, series)  # bad or hostile patch files are refused before git
    rev = base or series.upstream.base
    repo = mirror_for(ws, series, upstream, [rev, series.upstream.base])
    sha = resolve(repo, rev, what="base")
    if base is not None:
        on_upstream(repo, base, sha, "--base")
    check_links_on(repo, sha, loaded)
    if sha != series.upstream.base and repo.resolve(series.upstream.base):
        _seed_blobs(repo, series.upstream.base, loaded)
    target = ws.path(worktree) if worktree else ws.default_tree
    return Session(ws, repo, notify).start(sha, target.resolve(), loaded,
                                           series.upstream.base)


def _seed_blobs(repo: Repo, base: Oid, loaded: list[SeriesPatch]) -> None:
    """The series on its own base, in memory: it writes every patch's preimage and result blob
    into the mirror, which git's 3-way merge on another base needs."""

    Materializer(repo).run(base, loaded, three_way=False, keep_going=True)


def install(outcome: ApplyOutcome) -> Path | None:
    """``apply --install``: the finished work tree made this Python environment's ``megatron``
    (a .pth file, returned); nothing while the apply is stopped at a conflict."""
    if outcome.stop is not None:
        return None
    from ..infra.pyenv import install_tree

    return install_tree(outcome.worktree)
