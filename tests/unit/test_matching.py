"""model/matching.py gives difflib's blocks and opcodes, exactly (regions, line maps and the
report's interdiffs were written against difflib's answers), on texts built to hit every path:
rare anchors, stretches of popular lines longer than any rare block (difflib's own search), ties
between equal blocks, repeated copies, empty sides."""

from __future__ import annotations

import difflib
import random

import pytest

from rebasectl.model import matching
from rebasectl.model.matching import Matcher, matching_blocks


def _pair(rnd: random.Random) -> tuple[list[int], list[int]]:
    alpha = rnd.choice([2, 3, 5, 20, 60])
    weights = [rnd.random() ** 3 for _ in range(alpha)]  # a few letters very frequent
    a = rnd.choices(range(alpha), weights, k=rnd.randint(0, 60))
    if rnd.random() < 0.5:
        return a, rnd.choices(range(alpha), weights, k=rnd.randint(0, 60))
    b = list(a)  # an edited copy: long shared runs, as two versions of a file have
    for _ in range(rnd.randint(0, 6)):
        at, op = rnd.randint(0, len(b)), rnd.random()
        if op < 0.4:
            b[at:at] = rnd.choices(range(alpha), weights, k=rnd.randint(1, 4))
        elif op < 0.8:
            del b[at:at + rnd.randint(1, 4)]
        else:
            b[at:at] = b[:rnd.randint(0, 10)]  # a copied block: ties between equal blocks
    return a, b


@pytest.mark.parametrize("rare", [0, 1, 3, matching.RARE])
def test_same_blocks_as_difflib(monkeypatch: pytest.MonkeyPatch, rare: int) -> None:
    monkeypatch.setattr(matching, "RARE", rare)
    rnd = random.Random(rare)
    for _ in range(1000):
        a, b = _pair(rnd)
        want = difflib.SequenceMatcher(None, a, b, autojunk=False)
        got = Matcher(a, b)
        assert got.get_matching_blocks() == want.get_matching_blocks(), (a, b)
        assert got.get_opcodes() == want.get_opcodes(), (a, b)


def test_source_file_with_blank_lines() -> None:
    """A file and an edited copy: hundreds of blank lines and brackets (the case it is for)."""
    rnd = random.Random(7)
    old: list[bytes] = []
    for n in range(600):
        old += [f"def f{n}(x):".encode(), b"    return (", f"        x + {n}".encode(), b"    )",
                b""]
    new = list(old)
    for at in sorted(rnd.sample(range(len(new)), 40), reverse=True):
        new[at:at + rnd.randint(0, 3)] = [b"", f"    y = {at}".encode(), b"    )"]
    want = difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
    assert matching_blocks(old, new) == want
    assert matching_blocks(new, old) == \
        difflib.SequenceMatcher(None, new, old, autojunk=False).get_matching_blocks()
