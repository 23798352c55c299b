"""Symbolic links across a whole series: where each one really leads, once the links the series
made before it are followed.

Each patch's symlinks pass a text check on their own (``check_symlink``: the target, joined to
the link's folder and normalised, stays in the tree), but text does not follow links: with
``a/b/c/s -> ../../..`` (the root) a later ``t -> a/b/c/s/../../..`` reads as ``a`` and is three
folders above the root, and a patch that then writes ``t/x.py`` writes there. So the series is
walked in order, keeping every symlink it has made so far (the links of the base tree are
given when known), and each new link is resolved component by component through them, the way
the kernel would; a path a patch writes must not go through a link either (git refuses a path
"beyond a symbolic link"; the tree rebasectl builds must not hold one).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping

from .patches import SYMLINK, Patch, PatchError

MAX_HOPS = 40  # as the kernel's ELOOP


def link_target(f: object) -> str | None:
    """The target a symlink file diff leaves (its one added line), None when it has none."""
    for h in getattr(f, "hunks", ()):
        for ln in h.lines:
            if ln[:1] == b"+":
                return str(ln[1:].rstrip(b"\n").decode("utf-8", errors="surrogateescape"))
    return None


def resolve(path: str, links: Mapping[str, str]) -> str | None:
    """``path`` (relative to the root) with every link on the way followed; None when it
    leaves the tree or loops."""
    pending = [p for p in path.split("/") if p not in ("", ".")]
    done: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not done:
                return None
            done.pop()
            continue
        here = "/".join([*done, part])
        target = links.get(here)
        if target is None:
            done.append(part)
            continue
        hops += 1
        if hops > MAX_HOPS or target.startswith("/"):
            return None
        pending = [p for p in target.split("/") if p not in ("", ".")] + pending
    return "/".join(done)


def check_series(patches: Iterable[tuple[str, Patch]],
                 base_links: Mapping[str, str] | None = None) -> None:
    """Every symlink of the series, in order, resolved through the links made before it: one
    that leads out of the tree is refused, and so is a path written through a link. ``patches``:
    (where, patch) with ``where`` naming the file for the message."""
    links = dict(base_links or {})
    for where, patch in patches:
        for f in patch.model.files:
            if f.old_path and f.old_path != f.new_path:
                links.pop(f.old_path, None)
            if f.new_path is None:
                continue
            _check_beyond(f.new_path, links, where)
            if f.new_mode == SYMLINK or (f.new_mode is None and f.new_path in links):
                target = link_target(f)
                if target is None:
                    continue
                folder = posixpath.dirname(f.new_path)
                if resolve(posixpath.join(folder, target) if folder else target, links) is None:
                    raise PatchError(f"{where}: symlink {f.new_path} -> {target!r} leads "
                                     "outside the tree through the links before it")
                links[f.new_path] = target
            else:
                links.pop(f.new_path, None)


def _check_beyond(path: str, links: Mapping[str, str], where: str) -> None:
    parts = path.split("/")
    for k in range(1, len(parts)):
        if "/".join(parts[:k]) in links:
            raise PatchError(f"{where}: {path} is beyond the symbolic link "
                             f"{'/'.join(parts[:k])}")
