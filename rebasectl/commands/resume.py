"""What follows a stop: ``continue`` (commit the resolution and go on), ``skip`` (leave the patch
out of this apply), ``abort`` (give the apply up) and ``forget`` (take recorded resolutions
back). Each returns what happened; ``abort_lines`` is how abort says it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..engine.session import ApplyOutcome, Session
from ..git import Repo
from ..infra.errors import RebasectlError
from ..model.ids import short
from ..model.series import load
from ..model.workspace import Workspace
from .common import (
    Notify,
    apply_mirror,
    in_progress,
    locked,
    quiet,
)

if TYPE_CHECKING:
    from ..engine.abort import AbortResult


def cont(ws: Workspace, allow_empty: bool = False, notify: Notify = quiet) -> ApplyOutcome:
    with locked(ws, "continue", notify):
        in_progress(ws)
        return Session(ws, apply_mirror(ws), notify).resume(allow_empty=allow_empty)


def skip(ws: Workspace, notify: Notify = quiet) -> ApplyOutcome:
    with locked(ws, "skip", notify):
        in_progress(ws)
        return Session(ws, apply_mirror(ws), notify).skip()


def abort(ws: Workspace, notify: Notify = quiet) -> AbortResult:
    from ..engine.abort import abort as abort_apply

    with locked(ws, "abort", notify):
        return abort_apply(ws)


def forget(ws: Workspace, named: Sequence[str], everything: bool) -> tuple[int, int]:
    """Drop recorded resolutions (see resolutions.Memory.forget): of the ``named`` patches,
    which must be the series', or of all. Returns (records, rerere records) forgotten."""
    from ..engine.resolutions import Memory

    if not named and not everything:
        raise RebasectlError("name the patches whose resolutions to forget (or --all)")
    patch_ids = None if everything else set(named)
    with locked(ws, "forget"):
        if patch_ids is not None:
            known = {p.id for p in load(ws.root, check_files=False).patches}
            unknown = sorted(patch_ids - known)
            if unknown:
                raise RebasectlError(f"no patch {', '.join(unknown)} in series.yaml")
        records, ids = Memory(ws.resolutions).forget(patch_ids)
        rerere = Repo(ws.mirror).forget_rerere(ids) if (ws.mirror / "HEAD").exists() else 0
        return records, rerere


def abort_lines(result: AbortResult) -> list[str]:
    """What abort did, one line each: the trees removed or left, the state cleared, and where
    the untracked files and commits of a removed tree were kept."""
    restored = result.restored[0] if result.restored else None
    lines = [f"aborted; removed {path}" for path in result.removed if path != restored]
    if result.restored is not None:
        path, tip = result.restored
        lines.append(f"aborted; put {path} back at {short(tip)}, as it was before the apply")
    if result.remake is not None:
        path, base, default = result.remake
        where = "" if default else f" --worktree {path}"
        lines.append(f"the work tree this apply replaced is gone from the mirror: `rebasectl "
                     f"apply --base {short(base)}{where}` makes it again")
    lines += [f"aborted; left {path} as it is (not a work tree rebasectl made)"
              for path in result.left]
    if not result.removed and not result.left:
        lines.append("aborted; cleared " + ", ".join(p.name for p in result.cleared))
    if result.kept is not None:
        what = [f"{n} {noun}" for n, noun in ((result.kept_tree, "file(s), all of them (git "
                                               "could not read the tree), under tree/"),
                                              (result.kept_files, "untracked file(s)"),
                                              (result.kept_edits, "file(s) you changed "
                                               "(copies in edited/)"),
                                              (result.kept_commits, "commit(s)")) if n]
        hint = " (`git am` the commits in commits/; where it stops at an empty one, `git am " \
            "--allow-empty` records it)" if result.kept_commits else ""
        lines.append(f"kept {' and '.join(what)} of the removed work tree in {result.kept}{hint}")
    if result.stashes and result.restored is None:
        tree = result.removed[0]
        lines.append(f"{result.stashes} stash(es) made in the work tree stay in the mirror "
                     f"(`git --git-dir={result.mirror} reflog show refs/stash`): once an apply has "
                     f"made the tree again, `git -C {tree} stash pop` brings the newest back")
    return lines
