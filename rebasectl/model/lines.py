"""Which changed lines tell, and how much of one change another holds.

Two questions the report's pairing and export's fold detection both ask: "is this changed line
significant" (a blank, a bracket or ``else:`` says nothing about which patch it came from) and
"is patch A contained in patch B" (most of A's significant lines are among B's). They are
answered here once, with one threshold, so that a fold the report shows and one export finds
cannot disagree.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from .diffs import FileDiff

CONTAIN = 0.5  # share of a patch's significant lines found in another: it is contained there
_WORD = re.compile(r"[A-Za-z_]{3}")


def significant(line: str) -> str | None:
    """A changed line (``+``/``-`` and its text) normalised for comparison, or None when it
    says too little to count (blank, brackets, ``else:``, short keywords)."""
    norm = " ".join(line[1:].split())
    if len(norm) < 8 or not _WORD.search(norm):
        return None
    return line[0] + norm


def significant_lines(files: Iterable[FileDiff]) -> Counter[str]:
    """The multiset of a diff's significant changed lines."""
    out: Counter[str] = Counter()
    for f in files:
        for h in f.hunks:
            for raw in h.changed:
                s = significant(raw.decode("utf-8", errors="replace"))
                if s:
                    out[s] += 1
    return out


def share(part: Counter[str], whole: Counter[str]) -> float:
    """How much of ``part``'s significant lines ``whole`` holds (0 when it has none)."""
    own = sum(part.values())
    return sum((part & whole).values()) / own if own else 0.0


def contained(part: Counter[str], whole: Counter[str]) -> bool:
    return share(part, whole) >= CONTAIN
