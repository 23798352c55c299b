"""The cached upstream mirror: where the upstream comes from, creating and updating the bare
mirror under ``.rebasectl/upstream.git``, and resolving revisions in it.

Source precedence (docs/design.md): ``--upstream`` > ``REBASECTL_UPSTREAM`` > series.yaml's url.
Only https, ssh, git and file transports (and local paths, scp-style ``host:path``) are accepted:
a ``ext::`` or other ``transport::`` URL could run commands.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..git import NotARepository, Repo
from ..git.worktree import linked_to
from ..infra.errors import RebasectlError
from ..model.ids import Oid
from ..model.series import url_refusal
from ..model.workspace import Workspace

ENV_UPSTREAM = "REBASECTL_UPSTREAM"
_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:[^:]")


def choose_source(explicit: str | None, series_url: str | None) -> str | None:
    return explicit or os.environ.get(ENV_UPSTREAM) or series_url


def _not_our_own(ws: Workspace, src: str) -> None:
    """The series checkout, its state (the mirror) or a work tree of the mirror is no
    upstream: a fetch from it prunes the upstream's refs and takes the person's own branches
    and tags for the upstream's (hostile9 F6)."""
    path = Path(src[len("file://"):] if src.startswith("file://") else src)
    if not path.is_absolute():
        return
    path = path.resolve()
    root, state = ws.root.resolve(), ws.state_dir.resolve()
    if path in (root, root / ".git", state) or state in path.parents or \
            linked_to(ws.mirror, path):
        raise RebasectlError(f"upstream {src}: is this series' own checkout, mirror or work "
                             "tree, not the upstream: give the upstream's URL or path")


def validate_source(source: str, origin: str | None = None) -> str:
    """A URL or path we are willing to hand to git; a one-line refusal otherwise. A local path
    that is already the mirror's ``origin`` is not opened again (it was a repository when the
    mirror was made from it, and nothing is fetched from it unless asked)."""
    refusal = url_refusal(source)
    if refusal is not None:
        raise RebasectlError(f"upstream {source!r}: {refusal}")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", source) or _SCP.match(source):
        return source
    path = Path(source).expanduser()
    if not path.exists():
        raise RebasectlError(f"upstream {source}: no such path")
    if origin is not None and path.is_dir() and str(path.resolve()) == origin:
        return origin
    try:
        Repo.open(path)
    except NotARepository as exc:  # git's reason where it is one the person can act on
        why = exc.why if exc.why.startswith("git refuses it") else "not a git repository"
        raise RebasectlError(f"upstream {source}: {why}") from None
    return str(path.resolve())


def mirror(ws: Workspace) -> Repo | None:
    return Repo(ws.mirror, upstream=True) if (ws.mirror / "HEAD").exists() else None


def ensure_mirror(ws: Workspace, source: str | None, *, update: bool = False) -> Repo:
    """The mirror, created from ``source`` if absent, fetched when asked or when the source
    changed."""
    existing = mirror(ws)
    if existing is not None:
        if source is not None:
            origin = existing.remote_url()
            src = validate_source(source, origin)
            _not_our_own(ws, src)
            if origin != src:
                _fetch_from(existing, src)  # the mirror stays pointed where it was if this fails
                return existing
        if update:
            existing.fetch()
        return existing
    if source is None:
        raise RebasectlError(
            f"no upstream mirror yet: pass --upstream URL|PATH or set {ENV_UPSTREAM}"
        )
    src = validate_source(source)
    _not_our_own(ws, src)
    ws.ensure_state_dir()
    for stale in ws.stale_mirror_tmps():  # clones cut short by a kill
        if not _alive(stale.name.rsplit("-", 1)[1]):
            shutil.rmtree(stale, ignore_errors=True)
    tmp = ws.mirror_tmp(os.getpid())
    try:
        Repo.clone_mirror(src, tmp)
        try:
            os.replace(tmp, ws.mirror)
        except OSError:
            if not (ws.mirror / "HEAD").exists():  # not a concurrent clone that won the race
                raise RebasectlError(f"{ws.mirror}: cannot create the mirror there") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    made = Repo(ws.mirror, upstream=True)
    made.fetched = True
    return made


def _fetch_from(repo: Repo, source: str) -> None:
    """Fetch from another source and keep it as origin only once the fetch worked: a failed
    fetch from series.yaml's URL must not re-point a local mirror for good."""
    previous = repo.remote_url()
    repo.set_remote_url(source)
    try:
        repo.fetch()
    except RebasectlError:
        if previous is not None:
            repo.set_remote_url(previous)
        raise


def on_upstream(git: Repo, rev: str, sha: Oid, what: str) -> Oid:
    """``sha`` (what ``rev`` named), checked to be the upstream's: a tag or branch the person
    made in the work tree is a ref of the mirror too, and a bump onto it pinned a commit the
    upstream never had and called a patch "upstreamed" by the series' own commit (hostile9
    F3)."""
    if not git.on_upstream(sha):
        raise RebasectlError(f"{what} {rev!r} ({sha.short()}) is on no branch or tag of the "
                             "upstream (a commit of this checkout's own?): give one of the "
                             "upstream's, or `rebasectl fetch` if it is new there")
    return sha


def resolve(git: Repo, rev: str, *, what: str = "revision", source: str | None = None) -> Oid:
    """The commit ``rev`` names in the mirror. Text that cannot name one commit (empty, a range,
    an option) is said to be so: a fetch, the advice for a missing commit, would not help."""
    if not rev.strip() or ".." in rev or rev.startswith("-") or rev != rev.strip():
        raise RebasectlError(f"{what} {rev!r} is not a revision: give one commit, branch or tag "
                             "of the upstream (a range A..B is not one)")
    sha = git.resolve(rev)
    if sha is None:
        hint = (
            "run `rebasectl fetch --upstream URL|PATH`"
            if source is None
            else f"is it in {source}? run `rebasectl fetch`"
        )
        raise RebasectlError(f"{what} {rev!r} not found in the upstream mirror: {hint}")
    return sha


def open_for(ws: Workspace, explicit: str | None, series_url: str | None,
             needed: list[str]) -> Repo:
    """The mirror holding every revision in ``needed``; fetches once if one is missing."""
    source = choose_source(explicit, None)
    git = mirror(ws)
    if git is None:
        source = choose_source(explicit, series_url)
        git = ensure_mirror(ws, source)
    elif source is not None:
        git = ensure_mirror(ws, source)
    if all(git.resolve(r) for r in needed):
        return git
    fallback = choose_source(explicit, series_url)
    if fallback is not None:
        try:
            git = ensure_mirror(ws, fallback, update=True)
        except RebasectlError:
            pass
    return git


def _alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
