"""The report model: what a rebase did to a series, as plain data.

The renderers read this model through one view (``view.py``) and nothing else, and the JSON output
is this model serialised (``to_json``), so the three formats can never disagree. Every value here
was computed from git or series.yaml by ``lineage``/``build``; the few sentences in it
(``details``, ``Review.summary``, ``Finding.text``) are written from those values, never read back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.ids import Oid
from ..model.series import Series
from ..model.status import MappingStatus
from .evidence import Evidence

SCHEMA = "rebasectl.report/1"


@dataclass(frozen=True)
class Side:
    """One materialised series: a base and one commit per patch (oldest first) in some git."""

    base: Oid
    commits: list[Oid]
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
    commit: Oid | None
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
    base: Oid
    base_date: str
    base_subject: str
    patches: tuple[PatchInfo, ...]


@dataclass(frozen=True)
class UpstreamCommit:
    commit: Oid
    subject: str
    pr: str | None  # "#1234" when the subject names one
    paths: tuple[str, ...] = ()
    lines: int = 0  # interdiff lines it changed (how much of the entry's difference it forced)


@dataclass(frozen=True)
class InterHunk:
    """One hunk of an interdiff (the diff between the old and the new diff of a file) and the
    upstream commits whose change to its differing lines forced it: reverse blame of the lines
    the old patch needed, forward blame of the upstream lines the new patch sits on. None when
    only the patch's own lines differ (a choice of whoever resolved it)."""

    section: str  # the function or class the hunk sits in, as the patch hunk names it
    text: str  # the interdiff lines, starting with their ``@@`` line
    old_lines: int  # differing lines of the old diff
    new_lines: int
    commits: tuple[Oid, ...] = ()


@dataclass(frozen=True)
class FileCompare:
    """One file of an entry: its +/- on each side and whether the change to it is the same."""

    path: str
    old_added: int
    old_removed: int
    new_added: int
    new_removed: int
    status: str  # identical | moved | equivalent | modified | old-only | new-only
    identical_hunks: int = 0
    hunks_old: int = 0
    hunks_new: int = 0
    interdiff: str = ""  # diff of the two file diffs (line numbers stripped); "" when same
    hunks: tuple[InterHunk, ...] = ()
    commits: tuple[Oid, ...] = ()  # upstream commits that forced its hunks, most lines first


@dataclass(frozen=True)
class Finding:
    """A mechanically checked fact. kind: redundant | stale-message | partial-revert |
    lost-in-resolution | removed-name-used; ``items`` are the names or lines it is about."""

    kind: str
    side: str  # old | new
    index: int
    path: str | None
    text: str
    commit: Oid | None = None  # the upstream commit involved, when there is one
    items: tuple[str, ...] = ()
    # the old side states the same (kind, file, items): true before this bump as well, so it is
    # said but is no reason to review the entry now
    standing: bool = False


@dataclass(frozen=True)
class MessageChange:
    """How the commit message changed between the sides (the ``[n/m]`` number left out)."""

    subject: bool = False
    body: bool = False
    trailers_added: tuple[str, ...] = ()
    trailers_removed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Review:
    """Whether a person must look at the entry, why (codes, see ``build.REASONS``), the reason
    in a few words, and the upstream commits that forced the difference (most lines first)."""

    needed: bool
    reasons: tuple[str, ...]
    summary: str
    forced_by: tuple[Oid, ...] = ()


@dataclass(frozen=True)
class Entry:
    old: tuple[int, ...]
    new: tuple[int, ...]
    status: MappingStatus
    renumbered: bool = False
    message_changed: bool = False
    evidence: Evidence = field(default_factory=Evidence)
    details: str = ""
    files: tuple[FileCompare, ...] = ()
    upstream_commits: tuple[UpstreamCommit, ...] = ()
    findings: tuple[Finding, ...] = ()
    moved: bool = False
    message: MessageChange = MessageChange()
    review: Review = Review(False, (), "")


@dataclass(frozen=True)
class UpstreamRange:
    commits: int
    files_changed: int


@dataclass(frozen=True)
class Links:
    """Web pages the HTML links to (series.yaml's optional ``upstream.web`` and ``fork.web``):
    upstream commits and ``#N`` in upstream subjects go to the upstream, ``#N`` in a patch's
    subject to the fork; empty: no links."""

    upstream: str = ""
    fork: str = ""


@dataclass(frozen=True)
class Report:
    old: SideInfo
    new: SideInfo
    upstream: UpstreamRange
    mapping: tuple[Entry, ...]
    schema: str = SCHEMA
    links: Links = field(default_factory=lambda: Links())

    @property
    def to_review(self) -> tuple[int, ...]:
        """Mapping positions (1-based) of the entries a person must look at."""
        return tuple(k for k, e in enumerate(self.mapping, start=1) if e.review.needed)
