"""What holds an apply in progress before ``continue`` or ``skip`` may move its work tree, read
from the state and the tree as they are now: a HEAD the person moved (a commit made in the tree,
a checkout), and, after a refusal, which of the files it named are still in the way.

One owner for both, so that ``continue``, ``skip`` and ``status`` say the same thing. A HEAD
that is not where this apply left it is never reset: moving the tree on would leave the
person's commits behind, reachable only from git's reflog (hostile7 finding 3). Where the tree
may stand: at a stop, on the tip the patch waits on; otherwise on the base or one of the
commits the state records (a run refused or killed before it moved the tree leaves it behind
the tip; ``continue`` moves it on).
"""

from __future__ import annotations

from pathlib import Path

from ..git import InTheWay, TreeStatus, Worktree
from ..model.ids import Oid
from .state import ApplyState


def unregistered(tree: Worktree, mirror: Path, state: ApplyState) -> str | None:
    """The refusal, with its way out, when the tree's registration in the mirror is gone (a
    command pruned it while the tree was moved aside, or it was removed by hand): git cannot
    read the tree, its index (the stop's unmerged entries) went with the registration, and
    nothing can relink it; a checkout moved with its mirror still has its registration there,
    under the same name, and ``continue`` relinks that one."""
    admin = tree.named_admin()
    if admin is None or admin.exists() or (mirror / "worktrees" / admin.name).is_dir():
        return None
    where = "" if tree.path.resolve() == (mirror.parent / "tree").resolve() else \
        f" --worktree {tree.path}"  # not the default tree: the apply must name it again
    return (f"{tree.path}: its registration in the mirror is gone (git cannot read the tree, "
            "nor the stop's index): `rebasectl abort` keeps every file of it (under "
            f".rebasectl/aborted/), then `rebasectl apply --base {state.base.short()}{where}` "
            "stops there again (resolutions continue recorded are replayed)")


def head_moved(tree: Worktree, state: ApplyState, command: str = "continue") -> str | None:
    """The refusal, with its way out, when the work tree's HEAD is not where this apply left
    it; None when it is (or there is no tree to speak of: a missing or half-made one is made
    again). ``command``: the one the person ran, named again in the advice at a stop."""
    head = tree.head() if tree.exists else None
    if head is None:
        return None
    if state.current is not None and state.in_tree:
        return None if head == state.tip else stop_moved(tree, state, head, command)
    recorded = [state.base, *(Oid(sha) for _, sha in state.done)]
    if head in recorded:
        return None
    return left_behind(tree, state, head, recorded)


def stop_moved(tree: Worktree, state: ApplyState, head: Oid | None, command: str) -> str:
    """At a stop: commit only on the tip the patch stopped at. A HEAD that moved forward (a
    `git commit` of the resolution) is undone with ``reset --soft``, which keeps that work
    staged; one that moved anywhere else (a `git reset --hard`, a checkout) took the conflict
    with it, and ``reset --soft`` would stage a revert of upstream's lines, so the advice is to
    start the patch again."""
    moved = f"{tree.path}: HEAD moved to {head.short() if head else '?'} while patch " \
        f"{state.current} waits on {state.tip.short()}"
    if head is not None and tree.descends_from(state.tip):
        return (f"{moved}: `git -C {tree.path} reset --soft {state.tip.short()}` keeps your "
                f"resolution staged; then `rebasectl {command}` (or `rebasectl abort`)")
    return (f"{moved}, which is not built on it, so the conflict is gone from the work tree: "
            f"`rebasectl abort`, then `rebasectl apply --base {state.base.short()}` stops at "
            "the patch again (resolutions continue recorded are replayed)")


def left_behind(tree: Worktree, state: ApplyState, head: Oid, recorded: list[Oid]) -> str:
    """No conflict in the tree (a refusal, an interruption): HEAD moved off the commit the
    apply left it on. Built on one of the apply's commits (the person committed there), ``reset
    --soft`` back to it keeps the commits' changes staged, and the next ``continue`` carries
    them or refuses them as in the way, with its own way past; built on none, ``abort`` keeps
    what only the tree holds (its commits as ``git format-patch`` files) and the apply starts
    again."""
    moved = f"{tree.path}: HEAD moved to {head.short()}"
    on = next((r for r in reversed(recorded) if tree.descends_from(r)), None)
    if on is None:
        return (f"{moved}, which is not built on this apply's commits (continue would take the "
                "work tree away from it): `rebasectl abort` keeps the commits and files only "
                "the work tree holds (under .rebasectl/aborted/), then `rebasectl apply --base "
                f"{state.base.short()}` starts again (resolutions continue recorded are "
                "replayed)")
    where = next((f"{state.position(pid)}/{len(state.ids)} {pid}" for pid, sha in state.done
                  if sha == on), "the base")
    return (f"{moved}: your commit(s) on {where} ({on.short()}), where this apply left the "
            "work tree (continue would leave them behind): "
            f"`git -C {tree.path} reset --soft {on.short()}` keeps their changes, staged; then "
            "`rebasectl continue`")


def still_in_the_way(tree: Worktree, state: ApplyState, status: TreeStatus) -> InTheWay:
    """Of the files the last refusal named (``state.refused_paths``), those still where they
    were in the way: a changed one still changed (staged or not), an untracked one still
    there (on disk or added to the index)."""
    found = InTheWay()
    dirty = {*status.changed, *status.unmerged}
    for kind, path in state.refused_paths:
        if kind == "changed" and path in dirty:
            found.changed.append(path)
        elif kind == "untracked" and ((tree.path / path).exists() or
                                      (tree.path / path).is_symlink() or path in dirty):
            found.untracked.append(path)
    return found
