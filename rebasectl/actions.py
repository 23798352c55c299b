"""The mutating commands, each one function: take the lock, finish any interrupted export, find
the upstream, and call the stage that does the work (session, exchange, upstream).

Kept apart from ``cli.py`` so that the CLI only parses and renders, and so tests can call each
command's logic directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import session
from .errors import RebasectlError
from .exchange import export_tree, import_range, load_patches, load_tree_map
from .fsutil import recover
from .gitio import Git
from .lock import RepoLock
from .series import Series, load
from .upstream import choose_source, ensure_mirror, open_for, resolve
from .workspace import Workspace


@contextmanager
def locked(ws: Workspace, command: str) -> Iterator[None]:
    ws.ensure_state_dir()
    with RepoLock(ws.lock_file, command):
        recover(ws.root, ws.journal_dir)
        yield


def fetch(ws: Workspace, upstream: str | None) -> str:
    with locked(ws, "fetch"):
        series_url = (
            load(ws.root, check_files=False).upstream.url if ws.series_file.exists() else None
        )
        source = choose_source(upstream, series_url)
        if source is None:
            raise RebasectlError("no upstream: pass --upstream URL|PATH")
        git = ensure_mirror(ws, source, update=True)
        return str(git.path)


def mirror_for(ws: Workspace, series: Series, upstream: str | None, revs: list[str]) -> Git:
    return open_for(ws, upstream, series.upstream.url, revs)


def apply(
    ws: Workspace, base: str | None, upstream: str | None, worktree: Path | None
) -> session.ApplyOutcome:
    with locked(ws, "apply"):
        series = load(ws.root)
        load_patches(ws, series)  # bad or hostile patch files are refused before git runs
        rev = base or series.upstream.base
        git = mirror_for(ws, series, upstream, [rev])
        sha = resolve(git, rev, what="base")
        return session.start(ws, git, sha, (worktree or ws.default_tree).resolve())


def _mirror(ws: Workspace) -> Git:
    if not (ws.mirror / "HEAD").exists():
        raise RebasectlError("no upstream mirror: run `rebasectl apply --upstream URL|PATH` first")
    return Git(ws.mirror)


def cont(ws: Workspace) -> session.ApplyOutcome:
    with locked(ws, "continue"):
        if session.load_state(ws) is None:
            raise RebasectlError("no apply in progress")
        return session.resume(ws, _mirror(ws))


def skip(ws: Workspace) -> session.ApplyOutcome:
    with locked(ws, "skip"):
        if session.load_state(ws) is None:
            raise RebasectlError("no apply in progress")
        return session.skip(ws, _mirror(ws))


def abort(ws: Workspace) -> Path:
    with locked(ws, "abort"):
        git = Git(ws.mirror) if (ws.mirror / "HEAD").exists() else None
        return session.abort(ws, git)


def export(ws: Workspace, worktree: Path | None) -> tuple[Series, list[str]]:
    with locked(ws, "export"):
        if session.load_state(ws) is not None:
            raise RebasectlError(
                "an apply is in progress: finish it (`rebasectl continue`) or "
                "`rebasectl abort` before exporting"
            )
        tmap = load_tree_map(ws)
        path = worktree or (tmap.worktree if tmap else ws.default_tree)
        return export_tree(ws, path)


def do_import(
    ws: Workspace, rev_range: str, repo: Path, branch: str | None
) -> tuple[Series, list[str]]:
    with locked(ws, "import"):
        return import_range(ws, repo, rev_range, branch)


def test_tree(ws: Workspace, against: str, upstream: str | None, tree: Path | None) -> Path:
    """The tree ``rebasectl test`` runs on: given, or the patched work tree (applied if needed),
    or a checkout of the unpatched base."""
    if tree is not None:
        from .testing import check_tree

        return check_tree(tree)
    series = load(ws.root)
    if against == "base":
        with locked(ws, "test --against base"):
            git = mirror_for(ws, series, upstream, [series.upstream.base])
            base = resolve(git, series.upstream.base, what="base")
            from .testing import ensure_base_tree

            return ensure_base_tree(ws, git, base)
    tmap = load_tree_map(ws)
    if session.load_state(ws) is not None:
        raise RebasectlError("an apply is in progress: finish it before testing")
    if (
        tmap is not None
        and (tmap.worktree / ".git").exists()
        and tmap.base == series.upstream.base
    ):
        return tmap.worktree
    return apply(ws, None, upstream, None).worktree
