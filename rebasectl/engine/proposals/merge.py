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
from dataclasses import dataclass, field
from difflib import SequenceMatcher

CLOSE = 0.6  # how alike two lines must be to count as one line rewritten


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
    if best < CLOSE:
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
    """The region resolved with both sides' edits, or None when they overlap."""
    up = edits(base, ours, loose=True)
    pa = [e for e in edits(base, theirs, loose=False) if e not in up]
    if any(_clash(u, p) for u in up for p in pa):
        return None
    looks = _upstream_text(base, ours)
    out = Merged([], patch_edits=len(pa), upstream_edits=len(up))
    for i in range(len(base) + 1):
        ins_u = [e for e in up if e.insertion and e.start == i]
        ins_p = [e for e in pa if e.insertion and e.start == i]
        for e in ins_u:
            out.lines += e.lines
        for e in ins_p:
            out.lines += _reindent(e, base, looks, out)
        if ins_u and ins_p:
            out.same_point.append((i, sum((e.lines for e in ins_u), ()),
                                   sum((e.lines for e in ins_p), ())))
        if i == len(base):
            break
        covering = [e for e in up + pa if not e.insertion and e.start <= i < e.end]
        if covering:
            e = covering[0]
            if e.start == i:
                out.lines += e.lines if e in up else _reindent(e, base, looks, out)
            continue
        out.lines.append(looks[i])
    return out


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


_DEFINES = (re.compile(r"^\s*(?:async\s+)?def\s+(\w+)"), re.compile(r"^\s*class\s+(\w+)"),
            re.compile(r"^\s*(?:self\.)?(\w+)\s*(?::[^=]*)?=(?!=)"),
            re.compile(r"^\s*(\w+)\s*:\s*[\w\[\], .|\"']+,?\s*$"),
            re.compile(r"^\s*(?:from\s+\S+\s+)?import\s+.*?(\w+)\s*,?\s*$"),
            re.compile(r"^\s*[\"'](--[\w-]+)[\"']"))


def defined(lines: tuple[str, ...]) -> set[str]:
    """Names the lines define or bind: functions, classes, assignments, parameters, kwargs,
    imports, command-line flags."""
    names = set()
    for line in lines:
        for pattern in _DEFINES:
            m = pattern.match(line)
            if m:
                names.add(m.group(1))
                break
    return names


def twins(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """Lines both insertions add (blank lines and lone brackets aside) and names both define."""
    same = {norm(x) for x in a if _telling(x)} & {norm(x) for x in b if _telling(x)}
    return same, defined(a) & defined(b)


def _telling(line: str) -> bool:
    s = norm(line)
    return len(s) > 3 and not re.fullmatch(r"[\W_]*(?:pass|else:|return|\w+:)?[\W_]*", s)


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


def token_merge(base: list[str], ours: list[str], theirs: list[str]) -> list[str] | None:
    """The patch's changes of tokens *within* its lines, made on upstream's text of the same
    code when upstream changed only its layout (re-wrapped, re-indented). None when the patch
    adds or removes lines or upstream changed a token."""
    if len(base) != len(theirs) or not base:
        return None
    b_text, u_text, p_text = "\n".join(base), "\n".join(ours), "\n".join(theirs)
    b, u, p = _tokens(b_text), _tokens(u_text), _tokens(p_text)
    if _layout(b) != _layout(u):
        return None  # upstream changed the code, not only its layout: a person decides
    bu = SequenceMatcher(None, [t[0] for t in b], [t[0] for t in u], autojunk=False)
    bp = SequenceMatcher(None, [t[0] for t in b], [t[0] for t in p], autojunk=False)
    to_u: dict[int, int] = {}  # base token -> upstream token, where both have it
    for i1, j1, size in bu.get_matching_blocks():
        for k in range(size):
            to_u[i1 + k] = j1 + k
    edits_p = [op for op in bp.get_opcodes() if op[0] != "equal"]
    if not edits_p:
        return None
    if not all(_balanced([t[0] for t in b[i1:i2]]) and _balanced([t[0] for t in p[j1:j2]])
               for _, i1, i2, j1, j2 in edits_p):
        return None  # an alignment that splits a bracket pair: not sure what changed
    out, at = [], 0
    for _, i1, i2, j1, j2 in edits_p:
        span = range(max(0, i1 - 1), min(len(b), i2 + 1))  # the edit and a token each side
        if any(k not in to_u for k in span):
            return None  # upstream changed a token the patch's edit touches or borders
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
