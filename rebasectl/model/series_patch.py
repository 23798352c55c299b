"""The one model of "a patch of the series": what the loader reads, and what the engine, the
session, the bump and the report hold when they speak of a patch.

A patch is its series.yaml entry (``PatchEntry``: id, file, title and the metadata a person
keeps: kind, why, where it was proposed upstream, when to drop it, what it absorbs, its tests)
joined to its patch file's content (``Patch``: author, date, message, diff). Neither half is
copied anywhere: a stop, a bump's outcome or a materialised step *holds* the ``SeriesPatch``
and adds only what became of it in that run. Those words are one enum per question in
``model/status.py`` (``Applied``; ``BumpStatus`` with ``blocked`` and ``upstreamed``;
``MappingStatus``; ``ProposalState``: proposed, accepted, verified, hand-resolved): what became
of a patch belongs to the run that did it, never to the patch, which is the same patch in every
run. A series in order (a *stack*) is a sequence of ``SeriesPatch``: the materialiser, the
attribution and the line owners (``SeriesLines``) take that, never (id, patch) pairs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .diffs import FileDiff
from .patches import Patch
from .series import PatchEntry


def file_digest(data: bytes) -> str:
    """The one name of a patch file's bytes (sha1, hex): what an apply records of the files it
    read, and what export compares a file on disk with to see whether a person edited it."""
    return hashlib.sha1(data).hexdigest()


@dataclass(frozen=True)
class SeriesPatch:
    entry: PatchEntry
    patch: Patch
    digest: str = ""  # file_digest of the file's bytes as the loader read them ("" unknown)

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def file(self) -> str:
        """The patch file, relative to ``patches/``."""
        return self.entry.file

    @property
    def subject(self) -> str:
        """The patch's own subject (its file's, which ``title:`` in series.yaml mirrors)."""
        return self.patch.subject

    @property
    def diff(self) -> bytes:
        return self.patch.diff

    @property
    def files(self) -> tuple[FileDiff, ...]:
        return self.patch.files

    def paths(self) -> list[str]:
        return self.patch.paths()

    @property
    def is_empty(self) -> bool:
        return self.patch.is_empty

    @property
    def upstream(self) -> str | None:
        """Where it was proposed upstream (series.yaml's ``upstream:``), once it is."""
        return self.entry.upstream

    @property
    def drop_when(self) -> str | None:
        return self.entry.drop_when


class AboutPatch:
    """What a run's record about one patch (a stop, a bump's outcome) answers through the patch
    it holds: its id, file and subject, read from the ``SeriesPatch``, never copied."""

    patch: SeriesPatch

    @property
    def id(self) -> str:
        return self.patch.id

    @property
    def file(self) -> str:
        return self.patch.file

    @property
    def subject(self) -> str:
        return self.patch.subject
