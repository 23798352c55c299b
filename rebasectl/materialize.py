"""Series -> one commit per patch on a base, without a work tree.

All patches go through one scratch index: each is applied with ``git apply --cached`` (exactly
first: no fuzz, the way ``check --apply`` proves a series; then, when allowed, by the conflict
engine: 3-way from the blob ids in the patch, file by file), the index is written as a tree and
committed with the patch's own author and date as both author and committer. So the same series
on the same base always gives the same commit shas, and nothing touches a checkout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from .conflicts import Engine, FileConflict, Labels
from .faults import boundary
from .git import Identity, Index, Repo
from .patches import Patch, rfc2822_to_raw


class StepStatus(str, Enum):
    CLEAN = "clean"  # applied exactly
    MERGED = "3way"  # applied with git's 3-way merge
    EMPTY = "empty"  # the patch has no diff (a marker commit)
    NOOP = "no-op"  # it applied and changed nothing: the tree already has it
    RESOLVED = "rerere"  # it conflicted, and recorded resolutions resolved every conflict
    CONFLICT = "conflict"


@dataclass(frozen=True)
class Step:
    """What became of one patch: its commit, or why there is none."""

    index: int  # 1-based position in the series
    id: str
    subject: str
    status: StepStatus
    commit: str | None
    parent: str = ""  # the commit it was applied on
    tree: str = ""  # the commit's tree
    conflicts: tuple[FileConflict, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "id": self.id, "subject": self.subject,
                "status": self.status.value, "commit": self.commit,
                "conflicts": [c.to_json() for c in self.conflicts]}


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
        return all(s.status is not StepStatus.CONFLICT for s in self.steps)

    def first_conflict(self) -> Step | None:
        return next((s for s in self.steps if s.status is StepStatus.CONFLICT), None)


def identity_of(patch: Patch) -> Identity:
    return Identity(patch.author_name, patch.author_email, rfc2822_to_raw(patch.date))


def commit_patch(repo: Repo, tree: str, parent: str, patch: Patch) -> str:
    return repo.commit_tree(tree, [parent], patch.message, identity_of(patch))


OnStep = Callable[[Step], None]
# Given the index holding a conflict (unmerged stages) and the conflicts: resolve them all in the
# index (stage 0) and say True, or leave the index alone and say False (bump's rerere replay).
Resolver = Callable[[Index, list[FileConflict]], bool]


class Materializer:
    """Builds commits for patches on a base in ``repo``, through one scratch index."""

    def __init__(self, repo: Repo, labels: Callable[[str], Labels] | None = None,
                 engine: Engine | None = None, resolver: Resolver | None = None) -> None:
        self.repo = repo
        self.engine = engine or Engine(repo)
        self.labels = labels or (lambda pid: Labels("upstream", f"patch {pid}"))
        self.resolver = resolver

    def run(self, base: str, patches: Sequence[tuple[str, Patch]], *, three_way: bool = True,
            keep_going: bool = False, start_index: int = 1,
            on_step: OnStep | None = None) -> Materialised:
        """Apply ``patches`` in order on ``base``. Stops at the first conflict unless
        ``keep_going``: then a failing patch is left out and the next go on the last good one."""
        result = Materialised(base)
        with self.repo.index() as index:
            parent, tree = base, self.repo.tree_of(base)
            index.read_tree(tree)
            for offset, (pid, patch) in enumerate(patches):
                step = self._step(index, start_index + offset, pid, patch, parent, tree,
                                  three_way)
                result.steps.append(step)
                if on_step is not None:
                    on_step(step)
                if step.commit is not None:
                    parent, tree = step.commit, step.tree
                    boundary("commit")
                elif not keep_going:
                    break
        return result

    def _step(self, index: Index, number: int, pid: str, patch: Patch, parent: str, tree: str,
              three_way: bool) -> Step:
        if patch.is_empty:
            commit = commit_patch(self.repo, tree, parent, patch)
            return Step(number, pid, patch.subject, StepStatus.EMPTY, commit, parent, tree)
        status = StepStatus.CLEAN
        if not index.apply(patch.diff).ok:
            if not three_way:
                index.read_tree(tree)
                return self._conflict(index, number, pid, patch, parent, tree)
            merge = self.engine.merge(index, patch, self.labels(pid))
            status = StepStatus.MERGED
            if not merge.ok:
                if self.resolver is None or not self.resolver(index, merge.conflicts):
                    index.read_tree(tree)
                    return Step(number, pid, patch.subject, StepStatus.CONFLICT, None, parent,
                                conflicts=tuple(merge.conflicts))
                status = StepStatus.RESOLVED
        new_tree = index.write_tree()
        commit = commit_patch(self.repo, new_tree, parent, patch)
        return Step(number, pid, patch.subject,
                    StepStatus.NOOP if new_tree == tree else status, commit, parent, new_tree)

    def _conflict(self, index: Index, number: int, pid: str, patch: Patch, parent: str,
                  tree: str) -> Step:
        """Exact mode (``check --apply``): where the 3-way merge would conflict, or name every
        file that does not apply exactly."""
        merge = self.engine.merge(index, patch, self.labels(pid))
        index.read_tree(tree)
        conflicts = tuple(merge.conflicts)
        return Step(number, pid, patch.subject, StepStatus.CONFLICT, None, parent,
                    conflicts=conflicts)
