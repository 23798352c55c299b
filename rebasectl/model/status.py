"""The words rebasectl uses for what became of a patch: one enum per question, each value the
exact word the state files, the JSON and the goldens carry (``str`` enums: a member serialises as
its value, so adopting one changes no byte of any output).

- ``Applied``: how a patch came to be committed, or that it was not (apply-state's ``how``,
  the materialiser's steps, apply's progress lines).
- ``BumpStatus``: one patch's outcome in a bump (``bump.json``'s ``status``).
- ``MappingStatus``: how an old patch relates to the new series (the report's ``mapping``).
- ``ProposalState``: where a proposed resolution of a conflict stands.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A ``str`` enum that also prints as its word (``str()``, f-strings, ``%s``), as
    Python 3.11's ``StrEnum`` does; 3.10 is still supported."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Applied(Word):
    """How a patch came to be committed. The materialiser says the first five (and
    ``CONFLICT``); the work tree's session adds how a stop was resolved."""

    CLEAN = "clean"  # applied exactly, as git apply
    MERGED = "3way"  # applied with git's 3-way merge, no conflict left
    EMPTY = "empty"  # no diff (a marker commit)
    NOOP = "no-op"  # applied and changed nothing: the tree already has it
    RERERE = "rerere"  # conflicted; resolutions recorded earlier resolved every conflict
    RECORDED = "recorded"  # conflicted; a whole resolution recorded at an earlier apply replayed
    RESOLVED = "resolved"  # conflicted; a person resolved it and ran continue
    ADOPTED = "applied"  # a commit of ours found in the work tree after a kill (or an old state)
    CONFLICT = "conflict"  # not applied: it stops here


class BumpStatus(Word):
    """One patch's outcome when the series is carried onto a new upstream: exactly the
    contract's words (DESIGN: ``clean|conflict|blocked|upstreamed|empty``). How a ``clean``
    patch applied (a recorded resolution replayed, or it changed nothing) is bump.json's
    ``how``, an ``Applied`` word: a consumer switching on the status needs no other word."""

    CLEAN = "clean"  # carried with nothing left for a person (``how`` says the way)
    CONFLICT = "conflict"
    BLOCKED = "blocked"  # needs lines of an earlier patch that failed (or was left out)
    UPSTREAMED = "upstreamed"  # upstream carries its lines, with the commit that did
    EMPTY = "empty"


class MappingStatus(Word):
    """How patches of the old series map to the new one (one entry of the report's mapping)."""

    IDENTICAL = "identical"
    EQUIVALENT = "equivalent"
    MODIFIED = "modified"
    MERGED = "merged"
    SPLIT = "split"
    DROPPED = "dropped"
    UPSTREAMED = "upstreamed"
    NEW = "new"
    EMPTY = "empty"


class ProposalState(Word):
    """Where a proposed resolution of a conflict stands."""

    PROPOSED = "proposed"  # written by a rule, not yet looked at
    ACCEPTED = "accepted"  # a person took it
    VERIFIED = "verified"  # taken, and the patch's tests pass on it
    HAND_RESOLVED = "hand-resolved"  # a person resolved the conflict instead
