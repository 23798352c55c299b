"""Whose work tree it is: the one rule by which apply, bump and abort decide what they may
replace or remove. A directory is ours only when it is a linked work tree of our mirror; an
empty directory may be taken; anything else (the series checkout, a repository rebasectl did not
make, a tree holding work never exported) is refused with the way out.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from ..git import Repo, Worktree
from ..git.worktree import linked_to, looks_bare, registration
from ..infra.errors import RebasectlError
from ..model.ids import short
from ..model.workspace import Workspace
from .state import Carrying, TreeMap, tolerant


def registered(ws: Workspace, worktree: Path) -> bool:
    """A linked work tree of our mirror. Only such a directory is ever removed."""
    return linked_to(ws.mirror, worktree)


def check_room(ws: Workspace, worktree: Path) -> None:
    """Refuse to replace anything but a rebasectl work tree, and one holding work that was never
    exported (commits, changes, untracked files)."""
    root, where = ws.root.resolve(), worktree.resolve()
    if where == root or where in root.parents:
        raise RebasectlError(f"--worktree {worktree}: is the series checkout or holds it; "
                             "pick a directory of its own (default .rebasectl/tree)")
    mixed = "the series' patches/" if _within(where, ws.patch_dir) else "the series' " \
        ".rebasectl/" if _within(where, ws.state_dir) and where != ws.default_tree.resolve() \
        else "a git repository's own folder (.git, or a bare repository)" if ".git" in \
        where.parts or any(looks_bare(a) for a in where.parents) else None
    if mixed is not None:  # in a git dir, git's next prune would delete it, files and all
        raise RebasectlError(f"--worktree {worktree}: inside {mixed}, which a work tree must "
                             "stay out of; pick a directory of its own (default "
                             ".rebasectl/tree)")
    if not worktree.exists() and not worktree.is_symlink():
        return
    if not registered(ws, worktree):
        if worktree.is_dir() and not any(worktree.iterdir()):
            return
        if not worktree.is_dir():
            raise RebasectlError(f"{worktree} exists and is not a directory")
        if (worktree / ".git").exists():
            raise RebasectlError(f"{worktree} is a git repository that rebasectl did not make; "
                                 "pick another --worktree")
        raise RebasectlError(f"{worktree} exists and is not a rebasectl work tree; "
                             "pick another --worktree or move it away")
    if half_made(ws, worktree):
        return  # an interrupted bump's own tree, made after the old one was checked and removed
    _check_exported(ws, Worktree(worktree))


def _within(path: Path, folder: Path) -> bool:
    """``path`` (resolved) is ``folder`` or under it."""
    top = folder.resolve()
    return path == top or top in path.parents


def half_made(ws: Workspace, worktree: Path) -> bool:
    """Is ``worktree`` the one an interrupted clean bump was making (engine/state.Carrying)?"""
    carrying, _ = tolerant(Carrying.load, ws.carrying)
    return carrying is not None and carrying.names(worktree)


def _check_exported(ws: Workspace, tree: Worktree) -> None:
    """Uncommitted changes and unexported commits are refused each with its own way out:
    export refuses uncommitted changes, so they are committed (or dropped) first."""
    tmap = TreeMap.load(ws.tree_map)
    head = tree.head()
    status = tree.status()
    if status.untracked:
        shown = ", ".join(status.untracked[:5]) + (" ..." if len(status.untracked) > 5 else "")
        raise RebasectlError(f"{tree.path} has untracked files that would be lost: {shown}; "
                             "commit them into a patch (git add, git commit --amend) and "
                             "`rebasectl export`, or move them out of the work tree")
    if status.changed or status.unmerged:
        changed = list(dict.fromkeys(status.unmerged + status.changed))
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        raise RebasectlError(f"{tree.path} has uncommitted changes to {shown}: "
                             f"`git -C {tree.path} commit -a --amend --no-edit` puts them in the "
                             "last patch, then `rebasectl export`; or "
                             f"`git -C {tree.path} reset --hard` drops them")
    tip = tmap.tip_of(tree.path) if tmap is not None else head
    if head != tip:
        drop = f", or `git -C {tree.path} reset --hard {short(tip)}` drops them" if tip else ""
        raise RebasectlError(f"{tree.path} has commits that were not exported: `rebasectl "
                             f"export` writes them into the series{drop}")


def kept_folder(ws: Workspace) -> Path:
    """Where abort (and skip, and a removal of a tree git can no longer read) keep what they
    take out of a work tree: one folder per run."""
    return ws.aborted / time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def keep_unlinked(ws: Workspace, worktree: Path) -> Path | None:
    """The files of a tree of ours that has lost its ``.git`` (deleted by hand, or a ``git
    worktree remove`` killed part way, which an abort in progress is finishing) moved to a
    kept folder rather than deleted: git can no longer tell the person's from the series'
    (hostile10 B1: a resolution and untracked files deleted). Where they went, or None. Not
    for the rest of a tree an abort is finishing to remove (its first run kept the person's)."""
    if (worktree / ".git").exists() or not worktree.is_dir() or not any(worktree.iterdir()):
        return None
    dest = kept_folder(ws) / "tree"
    move_files(worktree, dest)
    return dest


def move_files(tree: Path, dest: Path) -> int:
    """Every file of ``tree`` but its ``.git`` moved under ``dest`` (a rename each on one file
    system); how many files."""
    moved = 0
    for item in sorted(tree.iterdir()):
        if item.name == ".git":
            continue
        dest.mkdir(parents=True, exist_ok=True)
        moved += sum(1 for f in item.rglob("*") if f.is_file()) if item.is_dir() else 1
        shutil.move(item, dest / item.name)
    return moved


def clear(ws: Workspace, worktree: Path, *, keep: bool = True) -> Path | None:
    """Remove a work tree of ours (registered in our mirror) and its registration; anything
    else is left where it is. With ``keep``, a tree without its ``.git`` has its files kept
    first (``keep_unlinked``): where they went, or None."""
    ours = registered(ws, worktree) or registration(ws.mirror, worktree) is not None
    kept = keep_unlinked(ws, worktree) if keep and ours else None
    _remove(ws, worktree)
    return kept


def _remove(ws: Workspace, worktree: Path) -> None:
    reg = registration(ws.mirror, worktree)
    if registered(ws, worktree) or reg is not None:
        if (ws.mirror / "HEAD").exists():  # gone, there is no registration left to drop
            Repo(ws.mirror).remove_worktree(worktree)
        if reg is not None and reg.exists():
            shutil.rmtree(reg, ignore_errors=True)
        shutil.rmtree(worktree, ignore_errors=True)
    elif worktree.is_dir() and not any(worktree.iterdir()):
        worktree.rmdir()


def forget_half_made(ws: Workspace, worktree: Path) -> None:
    """An apply has replaced the tree an interrupted bump was making: nothing left to finish."""
    if half_made(ws, worktree):
        Carrying.remove(ws.carrying)


def checkout(ws: Workspace, repo: Repo, worktree: Path, commit: str) -> Worktree:
    """The work tree at ``commit``: moved there (git refuses to overwrite untracked files), or
    made anew."""
    tree = Worktree(worktree)
    if tree.exists and tree.head() is not None:
        tree.move_to(commit)
        return tree
    clear(ws, worktree)
    return repo.add_worktree(worktree, commit)
