"""The report model: what a rebase did to a series, as plain data.

The markdown and HTML renderers read this model and nothing else, and the JSON output is this model
serialised (``to_json``), so the three formats can never disagree. Every value here was computed
from git or series.yaml by ``lineage``/``build``; nothing is free text written by a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..series import Series

SCHEMA = "rebasectl.report/1"
STATUSES = ("identical", "equivalent", "modified", "merged", "split", "dropped", "upstreamed",
            "new", "empty")


@dataclass(frozen=True)
class Side:
    """One materialised series: a base and one commit per patch (oldest first) in some git."""

    base: str
    commits: list[str]
    series: Series | None = None
    label: str = ""


@dataclass(frozen=True)
class FileStat:
    path: str
    added: int
    removed: int


@dataclass(frozen=True)
class PatchInfo:
    index: int  # 1-based position in its series
    id: str  # series.yaml id, else a slug of the subject
    commit: str | None
    subject: str
    author: str
    date: str  # author date, ISO 8601
    patch_id: str | None
    files: tuple[FileStat, ...]
    message: str = ""
    why: str = ""
    drop_when: str | None = None
    kind: str = ""


@dataclass(frozen=True)
class SideInfo:
    label: str
    base: str
    base_date: str
    base_subject: str
    patches: tuple[PatchInfo, ...]


@dataclass(frozen=True)
class UpstreamCommit:
    commit: str
    subject: str
    pr: str | None  # "#1234" when the subject names one
    paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class FileCompare:
    """One file of an entry: its +/- on each side and whether the change to it is the same."""

    path: str
    old_added: int
    old_removed: int
    new_added: int
    new_removed: int
    status: str  # identical | equivalent | modified | old-only | new-only
    identical_hunks: int = 0
    hunks_old: int = 0
    hunks_new: int = 0
    interdiff: str = ""  # diff of the two file diffs (line numbers stripped); "" when same


@dataclass(frozen=True)
class Finding:
    """A mechanically checked fact: kind is redundant | stale-message | partial-revert."""

    kind: str
    side: str  # old | new
    index: int
    path: str | None
    text: str
    commit: str | None = None  # the upstream commit involved, when there is one


@dataclass(frozen=True)
class Entry:
    old: tuple[int, ...]
    new: tuple[int, ...]
    status: str
    renumbered: bool = False
    message_changed: bool = False
    evidence: dict[str, Any] = field(default_factory=dict)
    details: str = ""
    files: tuple[FileCompare, ...] = ()
    upstream_commits: tuple[UpstreamCommit, ...] = ()
    findings: tuple[Finding, ...] = ()


@dataclass(frozen=True)
class UpstreamRange:
    commits: int
    files_changed: int


@dataclass(frozen=True)
class Report:
    old: SideInfo
    new: SideInfo
    upstream: UpstreamRange
    mapping: tuple[Entry, ...]
    schema: str = SCHEMA

    def entry_for_old(self, index: int) -> Entry:
        return next(e for e in self.mapping if index in e.old)

    def entry_for_new(self, index: int) -> Entry:
        return next(e for e in self.mapping if index in e.new)
