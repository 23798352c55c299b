"""Series -> one commit per patch on a base, without a work tree.

Each patch is applied with ``git apply --cached`` to a private index (exactly first: no fuzz, the
way ``check --apply`` proves a series; then 3-way from the blob ids in the patch, which is how
``apply`` and ``bump`` carry a series to a new base), written as a tree and committed with the
patch's own author and date as both author and committer. So the same series on the same base
always gives the same commit shas, and nothing touches a checkout.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .faults import boundary
from .gitio import Git, Identity
from .patches import Patch, rfc2822_to_raw, split_file_diff


@dataclass(frozen=True)
class Conflict:
    path: str
    hunks: tuple[str, ...]  # the "@@ ... @@" headers of the patch hunks that do not apply


@dataclass(frozen=True)
class Step:
    """What became of one patch: its commit, or why there is none."""

    index: int  # 1-based position in the series
    id: str
    subject: str
    status: str  # clean | 3way | empty | conflict
    commit: str | None
    conflicts: tuple[Conflict, ...] = ()


@dataclass
class Materialised:
    base: str
    steps: list[Step] = field(default_factory=list)

    @property
    def tip(self) -> str:
        commits = [s.commit for s in self.steps if s.commit]
        return commits[-1] if commits else self.base

    @property
    def ok(self) -> bool:
        return all(s.status != "conflict" for s in self.steps)

    def first_conflict(self) -> Step | None:
        return next((s for s in self.steps if s.status == "conflict"), None)


def identity_of(patch: Patch) -> Identity:
    return Identity(patch.author_name, patch.author_email, rfc2822_to_raw(patch.date))


def commit_patch(git: Git, tree: str, parent: str, patch: Patch) -> str:
    return git.commit_tree(tree, [parent], patch.message, identity_of(patch))


def materialise(
    git: Git,
    base: str,
    patches: Sequence[tuple[str, Patch]],
    *,
    three_way: bool = True,
    keep_going: bool = False,
    start_index: int = 1,
) -> Materialised:
    """Apply ``patches`` in order on ``base``. Stops at the first conflict unless ``keep_going``,
    in which case a failing patch is left out and the next ones go on top of the last good one."""
    result = Materialised(base)
    with tempfile.TemporaryDirectory(prefix="rebasectl-") as tmp:
        index = Path(tmp) / "index"
        parent = base
        tree = git.tree_of(base)
        git.read_tree(index, tree)
        for offset, (pid, patch) in enumerate(patches):
            number = start_index + offset
            if patch.is_empty:
                commit = commit_patch(git, tree, parent, patch)
                result.steps.append(Step(number, pid, patch.subject, "empty", commit))
                parent = commit
                boundary("commit")
                continue
            status = "clean"
            applied = git.apply_to_index(index, patch.diff, three_way=False)
            if not applied.ok and three_way:
                git.read_tree(index, tree)
                applied = git.apply_to_index(index, patch.diff, three_way=True)
                status = "3way"
            if not applied.ok:
                git.read_tree(index, tree)
                conflicts = failing_hunks(git, index, patch)
                result.steps.append(Step(number, pid, patch.subject, "conflict", None, conflicts))
                if not keep_going:
                    break
                continue
            new_tree = git.write_tree(index)
            commit = commit_patch(git, new_tree, parent, patch)
            if new_tree == tree:
                status = "empty"
            result.steps.append(Step(number, pid, patch.subject, status, commit))
            parent, tree = commit, new_tree
            boundary("commit")
    return result


def failing_hunks(git: Git, index: Path, patch: Patch) -> tuple[Conflict, ...]:
    """Which hunks of ``patch`` do not apply to the tree in ``index`` (each tried on its own)."""
    conflicts: list[Conflict] = []
    for path, file_diff in patch.file_diffs().items():
        header, hunks = split_file_diff(file_diff)
        if not hunks:
            if not git.apply_to_index(index, file_diff, three_way=False, check_only=True).ok:
                conflicts.append(Conflict(path, ()))
            continue
        bad = []
        for hunk in hunks:
            if not git.apply_to_index(index, header + hunk, three_way=False, check_only=True).ok:
                bad.append(hunk.split(b"\n", 1)[0].decode(errors="replace"))
        if bad:
            conflicts.append(Conflict(path, tuple(bad)))
    if not conflicts:  # each hunk fits alone, not all together: name every file
        conflicts = [Conflict(path, ()) for path in patch.file_diffs()]
    return tuple(conflicts)
