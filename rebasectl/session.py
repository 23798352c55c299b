"""An apply in progress: materialise into a work tree, stop at a conflict, and go on from there.

State lives in ``.rebasectl/apply-state.json`` and is written before every step that changes the
work tree, so a crash or Ctrl-C at any point leaves a state that ``continue`` resumes: commits that
reached the work tree's HEAD after the last save are recognised (they can only be the next patches,
in order) and adopted, and a missing or half-made work tree is made again from the recorded commits.
Two flags close the gaps between saves: ``cleared`` (an older work tree is gone, so commits found
in the tree are this apply's) and ``in_tree`` (the stopped patch's conflict reached the tree, so
``continue`` may commit what is there). A rerun of the same ``apply`` finishes an interrupted one.
``abort`` removes the work tree and the state; it never touches patches/ or series.yaml, and
nothing that rebasectl did not make (the checkout, a parent of it, another repository) is removed.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import ConflictError, RebasectlError
from .exchange import LoadedPatch, load_patches, load_tree_map, save_tree_map
from .faults import boundary
from .fsutil import atomic_write
from .gitio import Git
from .materialize import Conflict, commit_patch, materialise
from .series import load
from .workspace import Workspace


@dataclass
class ApplyState:
    base: str
    worktree: str
    ids: list[str]  # the whole series, in order
    done: list[list[str]] = field(default_factory=list)  # [id, commit] of applied patches
    skipped: list[str] = field(default_factory=list)
    current: str | None = None  # the patch stopped at (conflict in the work tree)
    conflicts: list[dict[str, object]] = field(default_factory=list)
    in_tree: bool = False  # the conflict of ``current`` has been written into the work tree
    cleared: bool = True  # the work tree is this apply's (an older one was removed first)

    def remaining(self) -> list[str]:
        finished = {i for i, _ in self.done} | set(self.skipped)
        return [i for i in self.ids if i not in finished]

    @property
    def tip(self) -> str:
        return self.done[-1][1] if self.done else self.base


@dataclass(frozen=True)
class ApplyOutcome:
    base: str
    worktree: Path
    tip: str
    steps: list[dict[str, object]]


def load_state(ws: Workspace) -> ApplyState | None:
    try:
        data = json.loads(ws.apply_state.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RebasectlError(
            f"{ws.apply_state}: unreadable apply state ({exc}); `rebasectl abort` clears it"
        ) from None
    try:
        return ApplyState(**data)
    except TypeError as exc:
        raise RebasectlError(
            f"{ws.apply_state}: unreadable apply state ({exc}); `rebasectl abort` clears it"
        ) from None


def save_state(ws: Workspace, state: ApplyState) -> None:
    ws.ensure_state_dir()
    atomic_write(ws.apply_state, json.dumps(asdict(state), indent=1).encode())
    boundary("state")


def _patches_by_id(ws: Workspace, state: ApplyState) -> dict[str, LoadedPatch]:
    series = load(ws.root)
    patches = {lp.entry.id: lp for lp in load_patches(ws, series)}
    if [p.id for p in series.patches] != state.ids:
        raise RebasectlError(
            "series.yaml changed since this apply started (patches added, removed or reordered): "
            "`rebasectl abort`, then apply again"
        )
    return patches


def start(ws: Workspace, git: Git, base: str, worktree: Path) -> ApplyOutcome:
    previous = load_state(ws)
    if previous is not None:
        if previous.current is None and previous.base == base and previous.worktree == str(
            worktree
        ):
            return resume(ws, git)  # the same apply, interrupted: a rerun finishes it
        raise RebasectlError("an apply is in progress: `rebasectl continue`, `skip` or `abort` it")
    series = load(ws.root)
    loaded = load_patches(ws, series)
    _check_room(ws, worktree)
    state = ApplyState(base, str(worktree), [lp.entry.id for lp in loaded], cleared=False)
    save_state(ws, state)  # from here on an interruption is finished by `continue` or a rerun
    _clear(ws, worktree)
    state.cleared = True
    save_state(ws, state)
    return _run(ws, git, state, {lp.entry.id: lp for lp in loaded})


def _check_room(ws: Workspace, worktree: Path) -> None:
    """Refuse to replace anything but a rebasectl work tree, and one that holds work that was
    never exported: the work tree is removed and made again, so a wrong ``--worktree`` (the
    checkout itself, a parent of it, another clone) must never get that far."""
    root = ws.root.resolve()
    where = worktree.resolve()
    if where == root or where in root.parents:
        raise RebasectlError(f"--worktree {worktree}: is the series checkout or holds it; "
                             "pick a directory of its own (default .rebasectl/tree)")
    if not worktree.exists():
        return
    if (worktree / ".git").exists() and not _is_our_worktree(ws, worktree):
        raise RebasectlError(f"{worktree} is a git repository that rebasectl did not make; "
                             "pick another --worktree")
    tmap = load_tree_map(ws)
    if (worktree / ".git").exists():
        tree_git = Git(worktree)
        tip = tmap.tip if tmap else None
        head = tree_git.run(["rev-parse", "HEAD"], check=False).stdout.decode().strip()
        if not tree_git.is_clean() or (tip is not None and head != tip):
            raise RebasectlError(
                f"{worktree} has changes or commits that were not exported: "
                "`rebasectl export` them, or remove the work tree"
            )
    elif worktree.is_dir() and any(worktree.iterdir()):
        raise RebasectlError(f"{worktree} exists and is not a rebasectl work tree")
    elif not worktree.is_dir():
        raise RebasectlError(f"{worktree} exists and is not a directory")


def _is_our_worktree(ws: Workspace, worktree: Path) -> bool:
    """A linked work tree of our mirror: its ``.git`` is a file naming a gitdir inside it."""
    dotgit = worktree / ".git"
    if not dotgit.is_file():
        return False
    try:
        text = dotgit.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return False
    if not text.startswith("gitdir: "):
        return False
    gitdir = Path(text[len("gitdir: "):])
    mirror = (ws.mirror / "worktrees").resolve()
    return mirror in gitdir.resolve().parents


def _clear(ws: Workspace, worktree: Path) -> None:
    if (worktree / ".git").exists() and ws.mirror.exists():
        Git(ws.mirror).worktree_remove(worktree)
    shutil.rmtree(worktree, ignore_errors=True)


def _run(
    ws: Workspace, git: Git, state: ApplyState, patches: dict[str, LoadedPatch]
) -> ApplyOutcome:
    """Apply the remaining patches in memory, move the work tree there, stop at a conflict."""
    worktree = Path(state.worktree)
    remaining = state.remaining()
    if state.current in remaining:
        remaining.remove(state.current)
    start_index = len(state.ids) - len(remaining) + 1
    result = materialise(
        git, state.tip, [(i, patches[i].patch) for i in remaining], start_index=start_index
    )
    for step in result.steps:
        if step.commit:
            state.done.append([step.id, step.commit])
    stopped = result.first_conflict()
    state.current = stopped.id if stopped else None
    state.conflicts = [asdict(c) for c in stopped.conflicts] if stopped else []
    state.in_tree = False
    save_state(ws, state)
    tree_git = _checkout(git, worktree, state.tip)
    boundary("worktree")
    if stopped is not None:
        tree_git.apply_to_worktree(patches[stopped.id].patch.diff)
        state.in_tree = True
        save_state(ws, state)
        raise ConflictError(
            _conflict_message(state, stopped.id, patches, stopped.conflicts),
        ) from None
    save_tree_map(ws, state.base, worktree, [(i, c) for i, c in state.done])
    ws.apply_state.unlink(missing_ok=True)
    return ApplyOutcome(state.base, worktree, state.tip, [asdict(s) for s in result.steps])


def _checkout(git: Git, worktree: Path, commit: str) -> Git:
    if (worktree / ".git").exists():
        tree_git = Git(worktree)
        tree_git.reset_hard(commit)
        return tree_git
    if worktree.exists():
        shutil.rmtree(worktree)
    git.run(["worktree", "prune"], check=False)
    worktree.parent.mkdir(parents=True, exist_ok=True)
    return git.worktree_add(worktree, commit)


def _conflict_message(
    state: ApplyState, pid: str, patches: dict[str, LoadedPatch], conflicts: tuple[Conflict, ...]
) -> str:
    number = state.ids.index(pid) + 1
    lp = patches[pid]
    lines = [
        f"patch {number}/{len(state.ids)} {pid} ({lp.entry.file}) does not apply: "
        f"{lp.patch.subject}"
    ]
    for c in conflicts:
        lines.append(f"  {c.path}: " + (", ".join(c.hunks) if c.hunks else "(whole file)"))
    lines.append(
        f"resolve in {state.worktree} (git add the files), then `rebasectl continue`; "
        "or `rebasectl skip` to drop this patch, `rebasectl abort` to give up"
    )
    return "\n".join(lines)


def _reconcile(ws: Workspace, git: Git, state: ApplyState) -> Git | None:
    """Adopt commits that reached the work tree after the last save; None if it is gone."""
    worktree = Path(state.worktree)
    if not state.cleared:  # interrupted before the old work tree went: its commits are not ours
        _clear(ws, worktree)
        state.cleared = True
        save_state(ws, state)
    if not (worktree / ".git").exists():
        return None
    tree_git = Git(worktree)
    head = tree_git.run(["rev-parse", "HEAD"], check=False).stdout.decode().strip()
    if head and head != state.tip and git.is_ancestor(state.tip, head):
        extra = tree_git.rev_list([f"{state.tip}..{head}"], first_parent=True)
        for pid, sha in zip(state.remaining(), extra):
            state.done.append([pid, sha])
            if state.current == pid:
                state.current = None
        save_state(ws, state)
    return tree_git


def resume(ws: Workspace, git: Git) -> ApplyOutcome:
    state = _require_state(ws)
    patches = _patches_by_id(ws, state)
    tree_git = _reconcile(ws, git, state)
    if state.current is not None:
        if tree_git is None or not state.in_tree:
            # the work tree is gone, or the conflict never reached it (interrupted before):
            # redo the stopped patch from scratch, which stops there again
            state.current = None
        else:
            _commit_resolution(ws, tree_git, state, patches)
    return _run(ws, git, state, patches)


def _commit_resolution(
    ws: Workspace, tree_git: Git, state: ApplyState, patches: dict[str, LoadedPatch]
) -> None:
    assert state.current is not None
    head = tree_git.run(["rev-parse", "HEAD"], check=False).stdout.decode().strip()
    if head != state.tip:  # the index would be committed on top of the wrong parent
        raise RebasectlError(
            f"{state.worktree}: HEAD moved to {head[:12] or '?'} while patch {state.current} "
            f"waits on {state.tip[:12]}; `git reset --keep {state.tip[:12]}` there (keeps your "
            "edits), or `rebasectl abort`"
        )
    unresolved = tree_git.unmerged_paths()
    if unresolved:
        raise ConflictError(
            f"still unresolved: {', '.join(unresolved)} (edit, `git add`, then "
            "`rebasectl continue`)"
        )
    tree_git.stage_all()
    markers = tree_git.run(["diff", "--cached", "--check", state.tip], check=False)
    if b"conflict marker" in markers.stdout:
        first = markers.stdout.decode(errors="replace").splitlines()[0]
        raise ConflictError(f"conflict markers left: {first}")
    tree = tree_git.index_tree()
    commit = commit_patch(tree_git, tree, state.tip, patches[state.current].patch)
    tree_git.run(["update-ref", "HEAD", commit])
    boundary("resolved")
    state.done.append([state.current, commit])
    state.current = None
    state.conflicts = []
    state.in_tree = False
    save_state(ws, state)


def skip(ws: Workspace, git: Git) -> ApplyOutcome:
    state = _require_state(ws)
    patches = _patches_by_id(ws, state)
    tree_git = _reconcile(ws, git, state)
    if state.current is None:
        raise RebasectlError("no patch is stopped at a conflict: nothing to skip")
    if tree_git is not None:
        tree_git.reset_hard(state.tip)
    state.skipped.append(state.current)
    state.current = None
    state.in_tree = False
    save_state(ws, state)
    return _run(ws, git, state, patches)


def abort(ws: Workspace, git: Git | None) -> Path:
    state = _require_state(ws)
    worktree = Path(state.worktree)
    foreign = (worktree / ".git").exists() and not _is_our_worktree(ws, worktree)
    holds_root = worktree.resolve() in (ws.root.resolve(), *ws.root.resolve().parents)
    if not foreign and not holds_root:  # never delete what rebasectl did not make
        if git is not None and (worktree / ".git").exists():
            git.worktree_remove(worktree)
        shutil.rmtree(worktree, ignore_errors=True)
    (ws.state_dir / "tree.json").unlink(missing_ok=True)
    ws.apply_state.unlink(missing_ok=True)
    return worktree


def _require_state(ws: Workspace) -> ApplyState:
    state = load_state(ws)
    if state is None:
        raise RebasectlError("no apply in progress")
    return state


def describe(ws: Workspace) -> dict[str, object] | None:
    state = load_state(ws)
    if state is None:
        return None
    return {
        "base": state.base,
        "worktree": state.worktree,
        "applied": len(state.done),
        "total": len(state.ids),
        "stopped_at": state.current,
        "skipped": state.skipped,
        "conflicts": state.conflicts,
    }
