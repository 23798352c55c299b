"""Object ids: one definition of what a sha is, how it is shortened, and git's two constants.

Shas travel as text everywhere (git's output, state files, JSON, report tables), so ``Oid`` is a
``str`` whose construction proves it is a full lower-case sha: an ``Oid`` serialises, formats,
hashes and compares exactly as the text it was made from, which keeps every ``--json`` output and
golden file byte for byte what a plain ``str`` gave, while code that holds one needs no second
check. ``SHORT`` is the one abbreviation length of every table and message.
"""

from __future__ import annotations

import re

SHORT = 12  # the abbreviation shown to people (tables, messages, marker labels)
SHORT_PROSE = 9  # in running text (the report's sentences, where a sha is quoted in passing)
FULL = re.compile(r"[0-9a-f]{40}")  # a full sha: the only form stored or compared
ABBREV = re.compile(r"[0-9a-f]{7,40}")  # what a person may type for one commit


def is_full(text: str) -> bool:
    """Whether ``text`` is a full lower-case sha (what state files and series.yaml must hold)."""
    return FULL.fullmatch(text) is not None


def is_abbrev(text: str) -> bool:
    """Whether ``text`` reads as a sha, full or abbreviated (a revision git needs no fetch for)."""
    return ABBREV.fullmatch(text) is not None


def short(sha: str) -> str:
    """The abbreviation people read; for a ``str`` that may not be an ``Oid`` (a label, a
    revision the user typed), which is shortened the same way."""
    return sha[:SHORT]


def prose(sha: str) -> str:
    """The shorter abbreviation of running text (the report's sentences); for a ``str`` that
    may be empty (a side with no commit)."""
    return sha[:SHORT_PROSE]


class Oid(str):
    """A full object id. Made only from a full sha (``ValueError`` otherwise: untrusted input
    is checked where it is read, with its own message, before it becomes an ``Oid``)."""

    __slots__ = ()

    def __new__(cls, value: str) -> Oid:
        if not is_full(value):
            raise ValueError(f"not a full sha: {value!r}")
        return super().__new__(cls, value)

    def short(self) -> str:
        return short(self)

    def prose(self) -> str:
        return prose(self)


ZERO = Oid("0" * 40)  # the null id: "no object" (git's own null sha)
EMPTY_TREE = Oid("4b825dc642cb6eb9a060e54bf8d69288fbee4904")  # the tree with no entries
