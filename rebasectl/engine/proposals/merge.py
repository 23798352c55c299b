"""A finer 3-way merge of one conflict region: the edits of both sides, line by line.

git's merge marks a region as soon as both sides change lines that touch: two insertions at the
same point, an edit next to an edit, a block that upstream re-indented while the patch changed one
line of it. Those are the mechanical conflicts a person resolves without thinking, and this module
resolves them the same way, saying which case it was, and refuses everything else:

* each side's change against the preimage is a list of ``Edit``s (a replaced range of preimage
  lines, an insertion is an empty range); upstream's side is compared with whitespace collapsed,
  so a re-indented or re-spaced line is context, not an edit (upstream's text is kept);
* a replaced block that grew is split into what was inserted before it, the lines that replace
  it one for one, and what was inserted after it, when that alignment is close (so an argument
  list that both sides extend reads as two insertions at one point, not as two rewrites);
* edits that overlap are a real conflict: no result. Insertions at the same point are both kept,
  upstream's first (the order is stated in the evidence); the patch's new lines follow upstream's
  re-indentation of the lines around them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from ...model.pysyntax import import_names
from ..carried import telling

CLOSE = 0.6  # how alike two lines must be to count as one line rewritten
CLOSE_PAIRED = 0.5  # the same, when a block is rewritten into as many lines (count aligns it)


def norm(line: str) -> str:
    """A line with its whitespace collapsed (re-indenting or re-spacing changes nothing)."""
    return " ".join(line.split())


def indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


@dataclass(frozen=True)
class Edit:
    """Preimage lines ``[start, end)`` replaced by ``lines`` (``start == end``: an insertion)."""

    start: int
    end: int
    lines: tuple[str, ...]

    @property
    def insertion(self) -> bool:
        return self.start == self.end


@dataclass
class Merged:
    lines: list[str]
    same_point: list[tuple[int, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)
    patch_edits: int = 0
    upstream_edits: int = 0
    reindented: int = 0  # patch lines moved to upstream's indentation
    wrapped: int = 0  # upstream's edits made inside a block the patch opened around them


def edits(base: list[str], other: list[str], *, loose: bool) -> list[Edit]:
    """``other``'s changes to ``base`` (``loose``: whitespace-only changes are not edits)."""
    key = norm if loose else (lambda s: s.rstrip())
    a, b = [key(x) for x in base], [key(x) for x in other]
    out: list[Edit] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            out += _split(base, other, i1, i2, j1, j2)
    return out


def _split(base: list[str], other: list[str], i1: int, i2: int, j1: int, j2: int) -> list[Edit]:
    """A replaced block, as finer edits when its lines align closely (see the module doc)."""
    n, m = i2 - i1, j2 - j1
    whole = [Edit(i1, i2, tuple(other[j1:j2]))]
    if n == 0 or m == 0 or m < n:
        return whole
    best, at = -1.0, 0
    for k in range(m - n + 1):
        score = min(_alike(base[i1 + t], other[j1 + k + t]) for t in range(n))
        if score > best:
            best, at = score, k
    if best < (CLOSE_PAIRED if m == n else CLOSE):
        return whole
    out = [Edit(i1, i1, tuple(other[j1:j1 + at]))] if at else []
    out += [Edit(i1 + t, i1 + t + 1, (other[j1 + at + t],)) for t in range(n)
            if norm(base[i1 + t]) != norm(other[j1 + at + t])]
    tail = tuple(other[j1 + at + n:j2])
    return out + ([Edit(i2, i2, tail)] if tail else [])


def _alike(a: str, b: str) -> float:
    return SequenceMatcher(None, norm(a), norm(b), autojunk=False).ratio()


def _clash(u: Edit, p: Edit) -> bool:
    """Do two edits touch the same preimage lines (insertions strictly inside a range do)?"""
    if u.insertion and p.insertion:
        return False
    if u.insertion:
        return p.start < u.start < p.end
    if p.insertion:
        return u.start < p.start < u.end
    return u.start < p.end and p.start < u.end


def merge(base: list[str], ours: list[str], theirs: list[str]) -> Merged | None:
    """The region resolved with both sides' edits, or None when they overlap. A line the patch
    only re-indented (it wrapped it in a new block) is context for the patch: upstream's text
    of it is kept, at the patch's indentation."""
    up = edits(base, ours, loose=True)
    shifts = _shifts(base, theirs)
    pa = [e for e in edits(base, theirs, loose=True) if e not in up]
    if any(_clash(u, p) for u in up for p in pa):
        return None
    walk = _Walk(base, up, pa, shifts, _upstream_text(base, ours),
                 Merged([], patch_edits=len(pa) + sum(1 for d in shifts.values() if d[0]),
                        upstream_edits=len(up)))
    for i in range(len(base) + 1):
        if not walk.gap(i) or (i < len(base) and not walk.line(i)):
            return None
    return walk.out


@dataclass
class _Walk:
    """The merged region, built preimage line by preimage line."""

    base: list[str]
    up: list[Edit]
    pa: list[Edit]
    shifts: dict[int, tuple[int, str]]
    looks: list[str]
    out: Merged

    def gap(self, i: int) -> bool:
        """What both sides insert before preimage line ``i`` (False: no single answer)."""
        ins_u = [e for e in self.up if e.insertion and e.start == i]
        ins_p = [e for e in self.pa if e.insertion and e.start == i]
        opens = _opens(ins_p, self.shifts, i)
        for e in ins_u:
            lines = _shifted(e.lines, 0 if opens else _gap_shift(self.shifts, i))
            if lines is None:
                return False
            self.out.lines += lines
        for e in ins_p:
            self.out.lines += _reindent(e, self.base, self.looks, self.out)
        self.out.wrapped += bool(ins_u and opens)
        if ins_u and ins_p and not opens:
            self.out.same_point.append((i, sum((e.lines for e in ins_u), ()),
                                        sum((e.lines for e in ins_p), ())))
        return True

    def line(self, i: int) -> bool:
        """Preimage line ``i``: an edit's replacement (once, at its start) or the line itself."""
        covering = [e for e in self.up + self.pa if not e.insertion and e.start <= i < e.end]
        if not covering:
            self.out.lines.append(_context_line(i, self.base, self.looks, self.shifts,
                                                self.out))
            return True
        e = covering[0]
        if e.start != i:
            return True
        if e in self.up:
            lines = _upstream_lines(e, self.base, self.shifts)
            self.out.wrapped += _delta(self.shifts, i) != 0
        else:
            lines = _reindent(e, self.base, self.looks, self.out)
        if lines is None:
            return False
        self.out.lines += lines
        return True


def _shifts(base: list[str], theirs: list[str]) -> dict[int, tuple[int, str]]:
    """Preimage lines the patch changed in whitespace only: its indentation delta and text."""
    a, b = [norm(x) for x in base], [norm(x) for x in theirs]
    out: dict[int, tuple[int, str]] = {}
    for tag, i1, i2, j1, _ in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                if base[i1 + k].rstrip() != theirs[j1 + k].rstrip() and base[i1 + k].strip():
                    out[i1 + k] = (indent(theirs[j1 + k]) - indent(base[i1 + k]), theirs[j1 + k])
    return out


def _shifted(lines: tuple[str, ...], delta: int | None) -> tuple[str, ...] | None:
    """Lines moved ``delta`` columns (None: no single delta applies, so no result)."""
    if delta is None:
        return None
    if delta >= 0:
        return tuple(" " * delta + ln if ln.strip() else ln for ln in lines)
    if any(ln.strip() and indent(ln) < -delta for ln in lines):
        return None
    return tuple(ln[-delta:] if ln.strip() else ln for ln in lines)


def _delta(shifts: dict[int, tuple[int, str]], i: int) -> int:
    return shifts[i][0] if i in shifts else 0


def _gap_shift(shifts: dict[int, tuple[int, str]], i: int) -> int | None:
    """Upstream's lines inserted before preimage line ``i`` are taken where the patch moved
    neither neighbour (None otherwise: whether they belong in the patch's new block or after it
    is for a person)."""
    return 0 if _delta(shifts, i - 1) == _delta(shifts, i) == 0 else None


def _opens(ins_p: list[Edit], shifts: dict[int, tuple[int, str]], i: int) -> bool:
    """The patch opens a block at ``i`` (its insertion there ends with ``:``) and indents the
    preimage lines that follow into it: lines upstream inserted at ``i`` stay before it."""
    last = [ln for e in ins_p for ln in e.lines if ln.strip()][-1:]
    return bool(last) and last[0].rstrip().endswith(":") and _delta(shifts, i) > 0 and \
        _delta(shifts, i - 1) == 0


def _rewrites(e: Edit, base: list[str]) -> bool:
    """Each preimage line of the edit rewritten into one line like it (no line added)."""
    return len(e.lines) == e.end - e.start and all(
        _alike(base[e.start + k], x) >= CLOSE_PAIRED for k, x in enumerate(e.lines))


def _upstream_lines(e: Edit, base: list[str],
                    shifts: dict[int, tuple[int, str]]) -> tuple[str, ...] | None:
    """Upstream's rewrite of preimage lines, at the indentation the patch gave them: only a
    line-for-line rewrite follows the patch into its block (added lines might belong after)."""
    deltas = {_delta(shifts, k) for k in range(e.start, e.end)}
    if len(deltas) != 1:
        return None
    delta = deltas.pop()
    if delta == 0:
        return e.lines
    return _shifted(e.lines, delta) if _rewrites(e, base) else None


def _context_line(i: int, base: list[str], looks: list[str],
                  shifts: dict[int, tuple[int, str]], out: Merged) -> str:
    """A preimage line neither side rewrote: the patch's re-indented text of it, or upstream's
    re-spaced one, or both (upstream's text at the patch's indentation)."""
    if i not in shifts:
        return looks[i]
    if looks[i] == base[i]:
        return shifts[i][1]
    moved = _shifted((looks[i],), shifts[i][0])
    out.reindented += 1
    return moved[0] if moved else shifts[i][1]


def _upstream_text(base: list[str], ours: list[str]) -> list[str]:
    """Each preimage line as upstream now writes it (its re-indented text), else as it was."""
    a, b = [norm(x) for x in base], [norm(x) for x in ours]
    looks = list(base)
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            looks[i1:i2] = ours[j1:j2]
    return looks


def _reindent(e: Edit, base: list[str], looks: list[str], out: Merged) -> tuple[str, ...]:
    """The patch's new lines shifted by upstream's re-indentation of the lines around them."""
    near = [i for i in (e.start, e.start - 1, e.end) if 0 <= i < len(base) and base[i].strip()]
    if not near:
        return e.lines
    i = near[0]
    delta = indent(looks[i]) - indent(base[i])
    if delta == 0:
        return e.lines
    out.reindented += 1
    if delta > 0:
        return tuple(" " * delta + ln if ln.strip() else ln for ln in e.lines)
    if all(not ln.strip() or indent(ln) >= -delta for ln in e.lines):
        return tuple(ln[-delta:] if ln.strip() else ln for ln in e.lines)
    return e.lines


def defined(lines: tuple[str, ...]) -> set[str]:
    """Names the lines define or bind: functions, classes, assignments, parameters, keyword
    arguments, imports, command-line flags (read token by token)."""
    names: set[str] = set()
    for line in lines:
        text = line.strip()
        if text.startswith(("'--", '"--')):
            names.add(text[1:].split(text[0])[0])
            continue
        if text.startswith(("import ", "from ")):
            names.update(import_names(text))
            continue
        words = TOKEN.findall(text)
        words = words[1:] if words[:1] == ["async"] else words
        if len(words) > 1 and words[0] in ("def", "class"):
            names.add(words[1])
            continue
        words = words[2:] if words[:2] == ["self", "."] else words
        if len(words) > 1 and words[0].isidentifier() and (
                words[1] == ":" or (words[1] == "=" and words[2:3] != ["="])):
            names.add(words[0])
    return names


def twins(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """Lines both insertions add (blank lines and lone brackets aside) and names both define."""
    same = {norm(x) for x in a if _telling(x)} & {norm(x) for x in b if _telling(x)}
    return same, defined(a) & defined(b)


def _telling(line: str) -> bool:
    """The carried-lines engine's test of a line that is evidence (one answer to "does this line
    say anything"), on a line of text."""
    return telling(norm(line).encode("utf-8", "surrogateescape"))


# -- within lines: a token change re-applied on upstream's re-wrapped text ----------------------
TOKEN = re.compile(r"\w+|[^\w\s]")


def _tokens(text: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in TOKEN.finditer(text)]


def _balanced(words: list[str]) -> bool:
    depth = 0
    for w in words:
        depth += (w in "([{") - (w in ")]}") if len(w) == 1 else 0
        if depth < 0:
            return False
    return depth == 0


def _layout(tokens: list[tuple[str, int, int]]) -> list[str]:
    """The tokens that are code: a trailing comma before a closing bracket is layout (a
    formatter adds it when it wraps a call one argument a line)."""
    words = [t[0] for t in tokens]
    return [w for i, w in enumerate(words)
            if not (w == "," and i + 1 < len(words) and words[i + 1] in ")]}")]


def layout_tokens(text: str) -> list[str]:
    """The code tokens of a text, layout aside (whitespace, a formatter's trailing comma)."""
    return _layout(_tokens(text))


Span = tuple[int, int, int, int]  # preimage tokens [i1, i2) became the patch's [j1, j2)


def _groups(ops: Sequence[tuple[str, int, int, int, int]], b: list[tuple[str, int, int]],
            p: list[tuple[str, int, int]]) -> list[Span] | None:
    """The patch's token edits, each closed under brackets: an edit that opens or closes a
    bracket on one side only is joined with the next (``g.rank())`` -> ``rank)`` is one edit,
    not two half-pairs), then trimmed of the tokens both ends share. None when no grouping
    balances."""
    out: list[Span] = []
    k = 0
    while k < len(ops):
        if ops[k][0] == "equal":
            k += 1
            continue
        m = k
        while (span := _trim(b, p, ops[k][1], ops[m][2], ops[k][3], ops[m][4])) is None:
            m += 1
            if m == len(ops):
                return None
        out.append(span)
        k = m + 1
    return out


def _trim(b: list[tuple[str, int, int]], p: list[tuple[str, int, int]],
          i1: int, i2: int, j1: int, j2: int) -> Span | None:
    while i1 < i2 and j1 < j2 and b[i2 - 1][0] == p[j2 - 1][0]:
        i2, j2 = i2 - 1, j2 - 1
    while i1 < i2 and j1 < j2 and b[i1][0] == p[j1][0]:
        i1, j1 = i1 + 1, j1 + 1
    if _balanced([t[0] for t in b[i1:i2]]) and _balanced([t[0] for t in p[j1:j2]]):
        return i1, i2, j1, j2
    return None


def _appends(bu: SequenceMatcher[str], b: list[tuple[str, int, int]]) -> bool:
    """Upstream's only change of code is tokens added after the preimage's last argument (at
    its end or before the brackets that close it): every preimage token is still there."""
    ops = [op for op in bu.get_opcodes() if op[0] != "equal"]
    return bool(ops) and all(tag == "insert" and all(t[0] in ")]}" for t in b[i1:])
                             for tag, i1, _, _, _ in ops)


def token_merge(base: list[str], ours: list[str], theirs: list[str]) -> list[str] | None:
    """The patch's changes of tokens *within* its lines, made on upstream's text of the same
    code when upstream changed only its layout (re-wrapped, re-indented). None when the patch
    adds or removes lines or upstream changed a token."""
    if len(base) != len(theirs) or not base:
        return None
    b_text, u_text, p_text = "\n".join(base), "\n".join(ours), "\n".join(theirs)
    b, u, p = _tokens(b_text), _tokens(u_text), _tokens(p_text)
    bu = SequenceMatcher(None, [t[0] for t in b], [t[0] for t in u], autojunk=False)
    if _layout(b) != _layout(u) and not _appends(bu, b):
        return None  # upstream changed the code, not only its layout: a person decides
    bp = SequenceMatcher(None, [t[0] for t in b], [t[0] for t in p], autojunk=False)
    to_u: dict[int, int] = {}  # base token -> upstream token, where both have it
    for i1, j1, size in bu.get_matching_blocks():
        for k in range(size):
            to_u[i1 + k] = j1 + k
    edits_p = _groups(bp.get_opcodes(), b, p)
    if not edits_p:
        return None  # no change, or one that splits a bracket pair: not sure what changed
    added_at = {i1 for tag, i1, _, _, _ in bu.get_opcodes() if tag == "insert"}
    if any(i1 == i2 and i1 in added_at for i1, i2, _, _ in edits_p):
        return None  # both sides add tokens at one point: which goes first is for a person
    out, at = [], 0
    for i1, i2, j1, j2 in edits_p:
        span = range(max(0, i1 - 1), min(len(b), i2 + 1))  # the edit and a token each side
        if any(k not in to_u for k in span):
            return None  # upstream changed a token the patch's edit touches or borders
        if i1 < i2 and to_u[i2 - 1] - to_u[i1] != i2 - 1 - i1:
            return None  # upstream added tokens inside the patch's edit
        if i1 < i2:
            start, end = u[to_u[i1]][1], u[to_u[i2 - 1]][2]
        else:
            start = end = u[to_u[i1 - 1]][2] if i1 > 0 else u[to_u[i1]][1]
        new = p_text[p[j1][1]:p[j2 - 1][2]] if j1 < j2 else ""
        if "\n" in new:
            return None
        if i1 == i2 and new and i1 > 0:
            gap = p_text[p[j1 - 1][2]:p[j1][1]] if j1 > 0 else ""
            new = gap + new
        out.append(u_text[at:start] + new)
        at = end
    out.append(u_text[at:])
    return "".join(out).split("\n")
