"""Which changed lines tell, and how much of one change another holds.

Two questions the report's pairing and export's fold detection both ask: "is this changed line
significant" (a blank, a bracket or ``else:`` says nothing about which patch it came from) and
"is patch A contained in patch B" (most of A's significant lines are among B's). They are
answered here once, with one threshold, so that a fold the report shows and one export finds
cannot disagree. A third, the report's "lost in resolution" asks: does a line survive in a
rewritten one (``survives``: a parameter kept in a signature upstream widened). A fourth, the
applier's: is a file a patch creates one it deletes, moved (``same_file``, git's threshold).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from .diffs import FileDiff

CONTAIN = 0.5  # share of a patch's significant lines found in another: it is contained there
_WORD = re.compile(r"[A-Za-z_]{3}")
# a line's tokens: words, quoted strings whole, any other character alone
_TOKEN = re.compile(r"""\w+|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|\S""")
_OPEN, _CLOSE = "([{", ")]}"
_MAX_TOKENS = 400  # a longer rewritten line (minified, generated) is not compared: not "kept"


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


RENAMED = 0.5  # git's default rename threshold (-M50%)


def same_file(old: bytes, new: bytes) -> float:
    """How alike two versions of a file are, close to git's rename score: the lines they share
    over the longer one's line count. A file a patch creates scoring ``RENAMED`` or more against
    one it deletes is that file, moved (``git am -3`` merges it so)."""
    a, b = Counter(old.splitlines()), Counter(new.splitlines())
    longest = max(sum(a.values()), sum(b.values()))
    return sum((a & b).values()) / longest if longest else 1.0


def survives(line: str, rewritten: str) -> bool:
    """Whether ``line``'s content is all in ``rewritten``, which only adds whole items where
    adding one keeps the others' meaning: every token of ``line`` in order, and each run of
    added tokens balanced, delimited by a comma (or filling an empty list), and either
    parameters of a ``def`` line or keyword arguments (``name=value``, ``**kw``) of a call.
    A parameter kept in a signature upstream widened survives (June: ``def __init__(self,
    allow_partial_load: bool = False):`` in ``def __init__(self, cache_metadata: bool = False,
    allow_partial_load: bool = False):``); a changed value, a dropped token, a ``not``, a
    wrapping call, a positional argument or a list item (a shape ``[s, b, h]`` that gained a
    dimension) does not: precision over recall, since a line wrongly said to survive hides a
    real loss."""
    old, new = _TOKEN.findall(line), _TOKEN.findall(rewritten)
    if not old or len(new) > _MAX_TOKENS or Counter(old) - Counter(new):
        return False
    where = _insertable(old)

    @functools.cache
    def fits(i: int, j: int, gap_ok: bool) -> bool:
        """old[i:] is new[j:] with whole items added (a gap never right after a gap)."""
        if j == len(new):
            return i == len(old)
        if i < len(old) and old[i] == new[j] and fits(i + 1, j + 1, True):
            return True
        empty = 0 < i < len(old) and old[i - 1] == "(" and old[i] == ")"
        return gap_ok and where[i] != "" and any(
            fits(i, k, False) for k in _item_ends(new, j, empty, where[i] == "params"))

    return fits(0, 0, True)


def _insertable(tokens: Sequence[str]) -> list[str]:
    """Per position of ``tokens`` (0..len), what an item added there would be: "params"
    (directly in a ``def``'s parameter list), "args" (directly in other parentheses: a
    call's arguments) or "" (elsewhere: top level, a list, a dict, a subscript)."""
    is_def = tokens[:1] == ["def"] or tokens[:2] == ["async", "def"]
    stack: list[str] = []
    first_paren = True
    out = [""]
    for tok in tokens:
        if tok in _OPEN:
            stack.append("params" if tok == "(" and is_def and first_paren and not stack
                         else "args" if tok == "(" else "")
            first_paren = first_paren and tok != "("
        elif tok in _CLOSE and stack:
            stack.pop()
        out.append(stack[-1] if stack else "")
    return out


def _item_ends(new: Sequence[str], j: int, empty: bool, params: bool) -> Iterator[int]:
    """Each ``k`` such that ``new[j:k]`` is whole items: balanced, delimited by a comma (or
    filling an empty list: ``empty``), each a parameter (``params``) or a keyword argument."""
    def allowed(piece: Sequence[str]) -> bool:
        return params or not piece or _keyword(piece)

    depth, start = 0, j
    for k in range(j, len(new)):
        depth += (new[k] in _OPEN) - (new[k] in _CLOSE)
        if depth < 0:
            return
        if depth == 0 and new[k] == ",":
            if not allowed(new[start:k]):
                return
            start = k + 1
        if depth == 0 and (new[j] == "," or new[k] == "," or empty) and \
                allowed(new[start:k + 1]):
            yield k + 1


def _keyword(item: Sequence[str]) -> bool:
    """Whether a call's argument (its tokens) is ``name=value``, ``*args`` or ``**kw``."""
    if item[0] == "*":
        return True
    return len(item) > 2 and item[0].isidentifier() and item[1] == "=" and item[2] != "="
