"""The rules that propose a resolution for one conflict region, each with its evidence.

A rule looks at the region's three sides (upstream's lines, the patch's preimage, the patch's
result), the whole files around them and, through ``Oracle``, upstream's history. The first rule
that holds gives the proposal; a rule that is not sure says nothing, since a wrong proposal
costs the person more than a missing one (they must notice it, then undo it). No rule knows any
particular series, path or commit: the evidence comes from the merge and the history at hand.

Rules, in the order they are tried (``recorded`` and ``superseded`` are decided a level up, per
patch, in ``engine.proposals``):

* ``already-upstream``: every name the patch adds in the region is in upstream's side and none
  it removes is left there: upstream made the same change (perhaps worded or wrapped its own
  way). Upstream's side is kept; the evidence is the commit that brought those lines.
* ``both-insert``: both sides only insert, at the same point, and nothing else overlaps: both
  are kept, upstream's lines first. Refused when the two insertions hold an identical line or
  bind the same name (a duplicate Python would accept silently).
* ``context-only``: the patch's edits apply to upstream's side once upstream's own changes
  around them are taken as context: re-indentation and re-spacing (the patch's lines follow
  upstream's indentation) or a neighbouring line upstream changed.
* ``moved``: the lines the patch edits left upstream's side of the region and are now, as one
  block, in a file a culprit commit of the region touched (or elsewhere in this file): the
  region keeps upstream's side and the patch's edit is carried to the block's new place.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from ...model.pysyntax import import_names
from .evidence import BothInsert, ContextOnly, Evidence, Moved, Upstream, insertions
from .merge import (
    CLOSE,
    Edit,
    Merged,
    defined,
    edits,
    indent,
    layout_tokens,
    merge,
    norm,
    token_merge,
    twins,
)

NAME = re.compile(r"[A-Za-z_]\w*")
# names that say nothing about what a change is (Python's keywords and common builtins)
GENERIC = frozenset(keyword.kwlist) | frozenset(
    "self cls int str float bool bytes list dict set tuple object type len range print super "
    "isinstance getattr setattr hasattr Optional List Dict Tuple Any Union Callable".split())
TELLING = 12  # a line shorter than this (normalised) says too little to be searched for


@dataclass
class Sides:
    """One conflict block: upstream's lines, the patch's preimage and the patch's result."""

    ours: list[str]
    base: list[str]
    theirs: list[str]


@dataclass
class Case:
    """Everything a rule may look at for one region."""

    patch_id: str
    path: str
    n: int  # 1-based position of the region in its file
    sides: Sides
    ours_file: list[str]  # upstream's whole file
    base_file: list[str] = field(default_factory=list)  # the patch's whole preimage
    culprits: list[str] = field(default_factory=list)  # commits that changed its lines
    earlier: Earlier | None = None  # the earlier failing patches the region needs

    @property
    def id(self) -> str:
        return f"{self.patch_id}/{self.path}/{self.n}"


@dataclass
class Earlier:
    """What the earlier patches a region needs (they do not apply, so their lines are missing
    from upstream's side) bring to its file: the lines they add, and their own proposals there
    (upstream's side of each proposed region, the proposed lines, the proposal's id)."""

    patches: list[str]
    adds: frozenset[str]  # normalised lines those patches add to the file
    proposals: list[tuple[list[str], list[str], str]] = field(default_factory=list)


@dataclass
class Found:
    """What a rule concluded: the region's resolved lines and why."""

    rule: str
    lines: list[str]
    evidence: Evidence
    port: dict[str, Any] | None = None  # moved: the patch's edit carried to another place


class Oracle:
    """Upstream's history, as the rules need it (engine.proposals gives the real one)."""

    def region(self, path: str, base: list[str], theirs: list[str]) -> dict[str, Any] | None:
        """The carried-lines engine's verdict on a region's change (None: not carried)."""
        return None

    def brought(self, path: str, lines: list[str]) -> str | None:
        """The commit of the range that brought these (upstream) lines to ``path``."""
        return None

    def files(self, commits: Sequence[str]) -> dict[str, list[str]]:
        """The files the commits touched (path -> commits), as of the new upstream."""
        return {}

    def read(self, path: str) -> list[str] | None:
        """A file of the new upstream."""
        return None

    def blob(self, sha: str) -> list[str]:
        """A blob's lines (the preimage of a conflicted file)."""
        return []


def names(lines: Sequence[str]) -> set[str]:
    return {t for line in lines for t in NAME.findall(line.split("#")[0])}


# -- already-upstream ------------------------------------------------------------------------------
def already_upstream(case: Case, oracle: Oracle) -> Found | None:
    """Upstream made the patch's change here: its lines are upstream (the carried-lines
    engine says so, naming the commit), or every name the patch adds is in upstream's side and
    none it removes is left there, and a commit of the range brought those lines."""
    s = case.sides
    verdict = oracle.region(case.path, s.base, s.theirs)
    if verdict is not None:
        return Found("already-upstream", list(s.ours),
                     Upstream(str(verdict["commit"]), "lines", subject=verdict.get("subject"),
                              share=verdict.get("share")))
    items = _same_items(s)
    if items:
        commit = oracle.brought(case.path, _items_lines(s.ours, items))
        if commit is not None:
            return Found("already-upstream", list(s.ours),
                         Upstream(commit, "items", tuple(sorted(items)),
                                  tuple(_items_lines(s.ours, items))))
    added = names(s.theirs) - names(s.base)
    removed = names(s.base) - names(s.theirs)
    ours = names(s.ours)
    if not added - GENERIC or not added <= ours or removed & ours:
        return None
    holding = _holding(s.ours, added - GENERIC)
    commit = oracle.brought(case.path, holding)
    if commit is None:  # no commit, no verdict
        return None
    return Found("already-upstream", list(s.ours),
                 Upstream(commit, "names", tuple(sorted(added)), tuple(holding)))


def _holding(lines: list[str], wanted: set[str]) -> list[str]:
    return [ln for ln in lines if names([ln]) & wanted]


def _same_items(s: Sides) -> set[str]:
    """The patch only inserts items (parameters, keyword arguments, a docstring's argument
    entries) and upstream's side has, new, an item of each of those names: upstream added the
    same parameter or documented the same argument in its own words (the free text differs, so
    the names rule does not see it). Empty when that is not the whole of the patch's change."""
    ops = [op for op in SequenceMatcher(None, s.base, s.theirs, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if not ops or any(tag != "insert" for tag, *_ in ops):
        return set()
    inserted = [ln for _, _, _, j1, j2 in ops for ln in s.theirs[j1:j2] if ln.strip()]
    heads = [ln for ln in inserted if _entry(ln)]
    if not heads or inserted[0] != heads[0] or \
            not all(_entry(ln) or indent(ln) > indent(heads[0]) for ln in inserted):
        return set()
    wanted = item_names(inserted)
    fresh = item_names(s.ours) - item_names(s.base)
    return wanted if wanted <= fresh else set()


def _entry(line: str) -> bool:
    """An item of a list: a docstring's argument entry, or a parameter or keyword argument
    (``name: T = x,``, ``name=x,``), not a statement (``name = x``)."""
    return bool(ARG_DOC.match(line) or ITEM.match(line) and line.rstrip().endswith(","))


def _items_lines(lines: list[str], wanted: set[str]) -> list[str]:
    return [ln for ln in lines if item_names([ln]) & wanted]


# -- both-insert / context-only --------------------------------------------------------------------
def module_names(lines: Sequence[str]) -> set[str]:
    """Names a file binds at its top level: imports (``import a.b``, ``from x import y as
    z``) and top-level ``def``/``class``: a second binding of one is silent in Python."""
    out: set[str] = set()
    for line in lines:
        if line[:1].isspace():
            continue
        words = line.replace("(", " ").replace(":", " ").split()
        words = words[1:] if words[:1] == ["async"] else words
        if len(words) > 1 and words[0] in ("def", "class"):
            out.add(words[1])
        else:
            out.update(import_names(line))
    return out


ITEM = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\):|:[^=]*=|=)")


def item_names(lines: Sequence[str]) -> set[str]:
    """The name each inserted item is about: a parameter, a keyword argument, a documented
    argument."""
    return {m.group(1) for m in (ITEM.match(x) for x in lines) if m}


def merged(case: Case, oracle: Oracle) -> Found | None:
    s = case.sides
    result = merge(s.base, s.ours, s.theirs)
    if result is None:
        within = token_merge(s.base, s.ours, s.theirs)
        if within is None:
            return None
        return Found("context-only", within,
                     ContextOnly("the patch's change within its lines, made on upstream's "
                                 "text of them (re-wrapped or re-indented)"))
    if not result.patch_edits:
        return None
    if result.same_point:
        found = _both(result, s) or _beside(result, s)
        if found is None:
            return None
        inserted = [ln for _, _, b in result.same_point for ln in b]
        if module_names(inserted) & module_names(case.ours_file):
            return None
        # an item named after something upstream brought to the file since: upstream's own
        # take on it may be there already (a person looks)
        fresh = names(case.ours_file) - names(case.base_file) if case.base_file else set()
        return None if item_names(inserted) & fresh else found
    return _context(result, s) or _beside(result, s) or _neighbours(result, s)


def _beside(result: Merged, s: Sides) -> Found | None:
    """The patch only inserts lines, and what upstream changed is the line each insertion
    stands beside (before or after it: the hunk's context), rewritten into a line like it (an
    import list grown, a signature re-wrapped, a class renamed), perhaps with list items of its
    own at the same point: the insertion goes beside upstream's text of that line. Refused when
    the inserted lines use a name upstream's rewrite took away."""
    up, pa = edits(s.base, s.ours, loose=True), edits(s.base, s.theirs, loose=False)
    if not pa or not all(p.insertion for p in pa):
        return None
    rewrites = _runs([u for u in up if not u.insertion])
    if not rewrites or any(u.insertion and not any(p.start == u.start for p in pa) for u in up):
        return None
    inserted = [ln for p in pa for ln in p.lines]
    defs = _definitions(tuple(inserted))
    for u in rewrites:
        if not any(p.start in (u.start, u.end) for p in pa):
            return None  # an upstream change away from the patch's insertions
        old = " ".join(norm(x) for x in s.base[u.start:u.end])
        new = " ".join(norm(x) for x in u.lines)
        if SequenceMatcher(None, old, new, autojunk=False).ratio() < CLOSE:
            return None
        if not defs and not names([old]) <= names([new]):
            return None  # renamed, not grown or re-wrapped: what the insertion joins changed
    for _, a, b in result.same_point:
        same, bound = twins(a, b)
        if same or bound or not (_items(a) and _items(b)):
            return None
    if names(inserted) & (names(s.base) - names(s.ours)) or defined(tuple(inserted)) & \
            defined(tuple(s.ours)) or _flags(inserted) & _flags(s.ours):
        return None  # it uses a name upstream took away, or binds one upstream's side binds
    return Found("context-only", result.lines,
                 ContextOnly("upstream rewrote the line the patch's insertion stands beside: "
                             "the insertion goes beside upstream's text of it"))


def _runs(rewrites: list[Edit]) -> list[Edit]:
    """Rewrites of consecutive lines as one (a class line renamed and its docstring reworded)."""
    out: list[Edit] = []
    for u in rewrites:
        if out and out[-1].end == u.start:
            out[-1] = Edit(out[-1].start, u.end, out[-1].lines + u.lines)
        else:
            out.append(u)
    return out


def _alike_rewrite(e: Edit, base: list[str]) -> bool:
    """Each preimage line of the edit rewritten into one line like it."""
    return e.end - e.start == len(e.lines) > 0 and all(
        SequenceMatcher(None, norm(base[e.start + k]), norm(x), autojunk=False).ratio() >= CLOSE
        for k, x in enumerate(e.lines))


def _neighbours(result: Merged, s: Sides) -> Found | None:
    """Both sides rewrote lines, different ones next to each other, each line into one like it
    (upstream may also have added lines between them): git stops on the adjacency, a person
    keeps both rewrites. Upstream only adding lines around the patch's rewrite is not this: its
    new lines were written against the line as it was. Refused when the patch's lines use a
    name upstream took away."""
    up, pa = edits(s.base, s.ours, loose=True), edits(s.base, s.theirs, loose=False)
    if result.same_point or not pa or not all(_alike_rewrite(p, s.base) for p in pa):
        return None
    rewrites = [u for u in up if not u.insertion]
    if not rewrites or not all(_alike_rewrite(u, s.base) for u in rewrites):
        return None
    if names([x for p in pa for x in p.lines]) & (names(s.base) - names(s.ours)):
        return None
    return Found("context-only", result.lines,
                 ContextOnly("upstream rewrote the lines next to the patch's: both rewrites "
                             "kept"))


def _both(result: Merged, s: Sides) -> Found | None:
    """Same-point insertions; everything else of both sides must be insertions too."""
    up, pa = edits(s.base, s.ours, loose=True), edits(s.base, s.theirs, loose=False)
    defs = all(_definitions(a) and _definitions(b) for _, a, b in result.same_point)
    if not all(e.insertion for e in (pa if defs else up + pa)):
        return None
    for _, a, b in result.same_point:
        same, bound = twins(a, b)
        if same or bound and not (_arm(a) and _arm(b)) or not (_items(a) and _items(b)):
            return None
        if _positional(a) and _positional(b):
            return None  # both add positional items: their order is what callers bind to
    return Found("both-insert", result.lines,
                 BothInsert("upstream's lines first, then the patch's",
                            insertions(result.same_point)))


FLAG = re.compile(r"""['"](--?[A-Za-z][\w-]*)['"]""")


def _flags(lines: Sequence[str]) -> set[str]:
    """Command-line flags the lines name (a second ``add_argument`` of one is an error)."""
    return {m.group(1) for x in lines for m in FLAG.finditer(x)}


def _arm(lines: tuple[str, ...]) -> bool:
    """An ``elif``/``case`` arm: arms of one chain bind the same names by design (only one
    runs), so a name both bind is no duplicate."""
    body = [norm(x) for x in lines if x.strip()]
    return bool(body) and body[0].startswith(("elif ", "case "))


ARG_DOC = re.compile(r"^\s*\*{0,2}\w+ \([^)]*\):")
POSITIONAL = re.compile(r"^\s*[A-Za-z_]\w*\s*:[^=]+,\s*(?:#.*)?$")


def _positional(lines: tuple[str, ...]) -> bool:
    """Any line a parameter without a default (``name: T,``): two sides adding such parameters
    at one point change which value each position of a call binds to, so their order is not a
    matter of taste. (A bare ``name,`` may be a list's element as well as an argument.)"""
    return any(POSITIONAL.match(x) for x in lines)


def _items(lines: tuple[str, ...]) -> bool:
    """Insertions that read as items of a list: arguments, parameters, dict entries, imports,
    ``elif``/``case`` arms, a docstring's argument entries: lines whose order among their
    neighbours does not matter."""
    body = [norm(x.split("  #")[0]) for x in lines if x.strip()]
    if not body:
        return False
    if ARG_DOC.match(lines[0]) and _arg_docs([x for x in lines if x.strip()]):
        return True
    if all(x.startswith(("import ", "from ")) for x in body):
        return True
    if _definitions(lines):
        return True
    if all(x.endswith(",") and not x.startswith(("#", '"', "'")) for x in body):
        return True
    head = body[0]
    return head.startswith(("elif ", "case ")) and len(body) <= 3


TOP = ("def ", "async def ", "class ", "@")


def _definitions(lines: tuple[str, ...]) -> bool:
    """Whole top-level definitions (functions, classes, their decorators and bodies): Python
    binds them by name, so their order among other definitions does not matter, nor does a
    rewrite of the next definition's header (module_names refuses a name bound twice)."""
    body = [x for x in lines if x.strip()]
    if not body or not body[0].startswith(TOP) or lines[-1].strip():
        return False
    return all(x[0].isspace() or x.startswith(TOP) or x.startswith(")") for x in body)


def _arg_docs(lines: list[str]) -> bool:
    """Each line an argument's entry (``name (type): text``) or the continuation of one
    (indented deeper than the entry)."""
    at = indent(lines[0])
    return all(ARG_DOC.match(x) and indent(x) == at or indent(x) > at for x in lines)


def _context(result: Merged, s: Sides) -> Found | None:
    """The patch's edits land on upstream's side unchanged but for indentation, and upstream's
    own edits in the region do not meet them: it only re-indented or re-spaced around them, or
    it rewrote lines that the patch only wrapped in a block of its own (those keep upstream's
    text at the patch's indentation)."""
    if result.wrapped:
        return Found("context-only", result.lines,
                     ContextOnly("upstream rewrote lines the patch only wrapped in a block: "
                                 "upstream's text of them, at the patch's indentation",
                                 wrapped=result.wrapped))
    if edits(s.base, s.ours, loose=True) or not (result.reindented or
                                                 _respaced(s.base, s.ours)):
        return None
    return Found("context-only", result.lines,
                 ContextOnly("upstream re-indented or re-spaced the lines around the patch's "
                             "edit", reindented=result.reindented))


def _respaced(base: list[str], ours: list[str]) -> bool:
    a, b = [norm(x) for x in base], [norm(x) for x in ours]
    return a == b and base != ours


# -- moved -----------------------------------------------------------------------------------------
def moved(case: Case, oracle: Oracle) -> Found | None:
    """The block the patch edits is gone from upstream's side and is, once, somewhere else."""
    s = case.sides
    block = _edited_block(s)
    if block is None:
        return _moved_call(case, oracle)
    ours = {norm(x) for x in s.ours}
    if any(norm(x) in ours for x in block if len(norm(x)) >= TELLING):
        return None
    candidates = _candidates(case, oracle)
    hits = [(p, at, lines, c) for p, lines, c in candidates for at in _find(lines, block)]
    if len(hits) != 1:
        return None
    path, at, lines, commit = hits[0]
    ported = _port(s, block, lines, at)
    if ported is None:
        return None
    evidence = Moved(path, at + 1, commit, block=tuple(block))
    return Found("moved", list(s.ours), evidence, {"path": path, "line": at + 1,
                                                    "old": lines[at:at + len(block)],
                                                    "new": ported})


def _candidates(case: Case, oracle: Oracle) -> list[tuple[str, list[str], str | None]]:
    """Where moved code may be now: files the region's culprit commits touched, and this one."""
    out: list[tuple[str, list[str], str | None]] = []
    for path, commits in sorted(oracle.files(case.culprits).items()):
        lines = case.ours_file if path == case.path else oracle.read(path)
        if lines is not None:
            out.append((path, lines, commits[0] if commits else None))
    if not any(p == case.path for p, _, _ in out):
        out.append((case.path, case.ours_file, None))
    return out


KWARG = re.compile(r"^\s*\w+\s*=[^=].*,\s*$")
CALL_HEAD = re.compile(r"([A-Za-z_][\w.]*)\($")


def _moved_call(case: Case, oracle: Oracle) -> Found | None:
    """The patch only adds keyword arguments to a call that upstream moved out of the region
    (restructured the code around it): when the file holds one call of that callee, and it
    does not pass those names yet, the arguments are carried there; the region keeps
    upstream's side."""
    s = case.sides
    ops = [op for op in SequenceMatcher(None, s.base, s.theirs, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    if len(ops) != 1 or ops[0][0] != "insert":
        return None
    _, at, _, j1, j2 = ops[0]
    added = s.theirs[j1:j2]
    head = _call_head(s.base[:at], indent(added[0]))
    if not all(KWARG.match(x) for x in added) or head is None:
        return None
    callee = head + "("
    if any(callee in x for x in s.ours):
        return None  # the call is still in the region: not moved
    hits = [(p, i, lines, c) for p, lines, c in _candidates(case, oracle)
            for i, x in enumerate(lines) if x.rstrip().endswith(callee)]
    here = [h for h in hits if h[0] == case.path]  # restructured within its file, most likely
    hits = here or hits
    if len(hits) != 1:
        return None
    path, i, lines, commit = hits[0]
    end = next((k for k in range(i + 1, len(lines)) if lines[k].strip().startswith(")")
                and indent(lines[k]) == indent(lines[i])), None)
    passed = {x.split("=")[0].strip() for x in lines[i + 1:end or i] if "=" in x}
    if end is None or end == i + 1 or passed & {x.split("=")[0].strip() for x in added}:
        return None  # no argument list to extend, or the call passes those names already
    delta = indent(lines[i + 1]) - indent(added[0])
    moved_in = [" " * delta + x if delta >= 0 else x[-delta:] for x in added]
    evidence = Moved(path, end + 1, commit, call=head)
    return Found("moved", list(s.ours), evidence,
                 {"path": path, "line": i + 1, "old": lines[i:end + 1],
                  "new": lines[i:end] + moved_in + [lines[end]]})


def _call_head(before: list[str], depth: int) -> str | None:
    """The callee of the call whose arguments end ``before`` (its head line ends with ``(``
    and is indented less than the arguments)."""
    for x in reversed(before):
        if x.strip() and indent(x) < depth:
            m = CALL_HEAD.search(x.rstrip())
            return m.group(1) if m else None
    return None


def _edited_block(s: Sides) -> list[str] | None:
    """The preimage lines the patch replaces, framed by a line each side: what must be found
    elsewhere (at least two telling lines, so that one common line proves nothing)."""
    ops = SequenceMatcher(None, s.base, s.theirs, autojunk=False).get_opcodes()
    changed = [(i1, i2) for tag, i1, i2, _, _ in ops if tag != "equal"]
    if not changed:
        return None
    lo, hi = max(0, changed[0][0] - 1), min(len(s.base), changed[-1][1] + 1)
    block = s.base[lo:hi]
    if sum(len(norm(x)) >= TELLING for x in block) < 2:
        return None
    return block


def _find(lines: list[str], block: list[str]) -> list[int]:
    want = [norm(x) for x in block if x.strip()]
    have = [(i, norm(x)) for i, x in enumerate(lines) if x.strip()]
    keys = [h for _, h in have]
    out = []
    for k in range(len(keys) - len(want) + 1):
        if keys[k:k + len(want)] == want:
            out.append(have[k][0])
    return out


def _port(s: Sides, block: list[str], lines: list[str], at: int) -> list[str] | None:
    """The patch's edit of ``block`` made on its copy at ``lines[at:]`` (re-indented to it)."""
    if any(not x.strip() for x in block):
        return None
    there = lines[at:at + len(block)]
    delta = indent(there[0]) - indent(block[0])
    if any(indent(t) - indent(b) != delta for t, b in zip(there, block)):
        return None
    # the whole block locates the edit: its first line alone (an `else:`) may come earlier
    starts = [k for k in range(len(s.base) - len(block) + 1) if s.base[k:k + len(block)] == block]
    if len(starts) != 1:
        return None
    start = starts[0]
    ops = SequenceMatcher(None, s.base, s.theirs, autojunk=False).get_opcodes()
    new: list[str] = []
    for tag, i1, i2, j1, j2 in ops:
        lo, hi = max(i1, start), min(i2, start + len(block))
        if tag == "equal":
            new += [there[i - start] for i in range(lo, hi)]
        elif start <= i1 <= start + len(block):
            new += [(" " * delta + x if delta >= 0 else x[-delta:]) if x.strip() else x
                    for x in s.theirs[j1:j2]]
    return new


# -- a region that needs an earlier failing patch's lines ----------------------------------------
def on_earlier(case: Case, oracle: Oracle) -> Found | None:
    """The region's preimage lines that upstream's side lacks are all lines of the earlier
    patches it needs (they do not apply, so their lines are not there): the patch's change is
    made on upstream's side *as those patches would leave it*: their own lines where upstream's
    side is empty, else the one proposal of theirs for this same upstream text. It must edit
    those lines, or only add items of a list next to them: new statements next to another
    patch's lines may belong elsewhere once that patch is done again (a person places them)."""
    e, s = case.earlier, case.sides
    if e is None:
        return None
    up = {norm(x) for x in s.ours}
    missing = [norm(x) for x in s.base if x.strip() and norm(x) not in up]
    if not missing or any(x not in e.adds for x in missing):
        return None
    if not any(x.strip() for x in s.ours):
        carried, via = list(s.base), "their lines"
    else:
        mine = [norm(x) for x in s.ours if x.strip()]
        hits = [(lines, pid) for ours, lines, pid in e.proposals
                if [norm(x) for x in ours if x.strip()] == mine
                and set(missing) <= {norm(x) for x in lines}]
        if len(hits) != 1:
            return None
        carried, via = hits[0]
    result = merge(s.base, carried, s.theirs)
    pa = edits(s.base, s.theirs, loose=False)
    if result is None or result.same_point or not pa:
        return None
    if all(x.insertion for x in pa) and not all(_items(x.lines) for x in pa):
        return None
    return Found("context-only", result.lines,
                 ContextOnly(f"the region holds lines of {', '.join(e.patches)}, which does "
                             "not apply: the patch's change made on them as "
                             + ("that patch adds them" if via == "their lines" else
                                f"its proposal {via} resolves them"),
                             needs=tuple(e.patches), on=via))


def layout_only(case: Case, oracle: Oracle) -> Found | None:
    """The patch's change here is layout only (the same code tokens, re-wrapped or re-indented,
    a formatter's trailing comma), and upstream changed these lines: there is nothing of the
    patch's to carry, upstream's side is kept."""
    s = case.sides
    if not any(x.strip() for x in s.base) or s.base == s.theirs:
        return None
    if layout_tokens("\n".join(s.base)) != layout_tokens("\n".join(s.theirs)):
        return None
    return Found("context-only", list(s.ours),
                 ContextOnly("the patch only re-formats these lines (the same code): "
                             "upstream's side, its own text of them"))


RULES: list[Callable[[Case, Oracle], Found | None]] = [already_upstream, on_earlier,
                                                       layout_only, merged, moved]


def first(case: Case, oracle: Oracle) -> Found | None:
    for rule in RULES:
        found = rule(case, oracle)
        if found is not None:
            return found
    return None
