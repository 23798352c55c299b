"""The git door: the only package that starts git.

- ``runner``: ``Runner`` runs git (hermetic or network environment, errors quoted whole);
- ``objects``: ``Objects``, one persistent ``cat-file`` per repository (GitPython), and the
  commit parser (``CommitInfo``, ``Identity``);
- ``index``: ``Index``, a scratch index (apply --cached, read/write-tree, unmerged stages);
- ``worktree``: ``Worktree`` (checkout, status, rerere) and the repair of what a killed git left;
- ``history``: ``History`` (rev-list, log, blame, patch-id, renames);
- ``repo``: ``Repo``, one repository holding all of the above.
"""

from ..model.ids import EMPTY_TREE  # git's constant, owned by model/ids.py
from .history import History, RawCommit
from .index import Entry, Index, Stages
from .objects import CommitInfo, Identity
from .repo import NotARepository, Repo
from .runner import Runner
from .worktree import InTheWay, TreeStatus, Worktree

__all__ = ["EMPTY_TREE", "CommitInfo", "Entry", "History", "Identity", "Index", "RawCommit",
           "InTheWay", "NotARepository", "Repo", "Runner", "Stages", "TreeStatus", "Worktree"]
