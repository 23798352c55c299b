"""difflib's line matching, the same answers found faster.

Every alignment of two texts in rebasectl (regions placed where the merge put them, preimage
lines mapped onto a base, interdiffs) is ``difflib.SequenceMatcher(None, a, b, autojunk=False)``:
its blocks are what the goldens, the answer keys and the tests were written against, so they
must not change. Its cost is ``find_longest_match``, which walks every pair of equal lines in the
range asked (a blank line of a 3,000-line file meets hundreds of blank lines), at every step of
the recursion: a June bump spent more Python time there than anywhere else.

``Matcher`` answers ``find_longest_match`` exactly as difflib does (the longest block; on a tie
the one that starts first in ``a``, then in ``b``) from the *rare* lines only (those ``b`` holds
at most ``RARE`` times): every block holding a rare line is the run through one of its pairs,
followed once per diagonal. A block made only of popular lines is no longer than the longest
stretch of popular lines in ``a``; when the best rare block is longer than that stretch it is
the answer, else (short ranges of blank lines and brackets) difflib's own search decides.
``get_matching_blocks``, ``get_opcodes`` and ``ratio`` are difflib's, built on that answer.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence
from difflib import Match

RARE = 16  # a line ``b`` holds at most this many times anchors the search


class Matcher(difflib.SequenceMatcher[Hashable]):
    """``difflib.SequenceMatcher(None, a, b, autojunk=False)``, same blocks (see the module)."""

    a: Sequence[Hashable]  # difflib's own attributes, which typeshed does not declare
    b: Sequence[Hashable]
    b2j: dict[Hashable, list[int]]

    def __init__(self, a: Sequence[Hashable] = (), b: Sequence[Hashable] = ()) -> None:
        super().__init__(None, a, b, autojunk=False)

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> Match:
        a, b, b2j = self.a, self.b, self.b2j
        ahi = len(a) if ahi is None else ahi
        bhi = len(b) if bhi is None else bhi
        size, besti, bestj = 0, alo, blo
        popular = run = 0  # the longest stretch of popular lines of a[alo:ahi] (and the current)
        reach: dict[int, int] = {}  # diagonal (j - i) -> the last i of the run followed on it
        for i in range(alo, ahi):
            js = b2j.get(a[i])
            if js is None:
                run = 0
                continue
            if len(js) > RARE:
                run += 1
                popular = max(popular, run)
                continue
            run = 0
            for j in js:
                if j < blo or j >= bhi or reach.get(j - i, -1) >= i:
                    continue
                d, s, e = j - i, i, i + 1
                while s > alo and s + d > blo and a[s - 1] == b[s - 1 + d]:
                    s -= 1
                while e < ahi and e + d < bhi and a[e] == b[e + d]:
                    e += 1
                reach[d] = e - 1
                if e - s > size or e - s == size and (s, s + d) < (besti, bestj):
                    size, besti, bestj = e - s, s, s + d
        if size > popular:
            return Match(besti, bestj, size)
        if not popular:
            return Match(alo, blo, 0)
        return super().find_longest_match(alo, ahi, blo, bhi)


def matching_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Match]:
    """``difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()``."""
    return Matcher(a, b).get_matching_blocks()


__all__ = ["RARE", "Matcher", "matching_blocks"]
