"""Resolution proposals: for each open conflict region, the first rule that holds, with evidence.

The conflict engine says where a patch and upstream collide; this engine says what a maintainer
would most likely write there, and why, so that the mechanical regions (an argument both sides
appended to, a block upstream re-indented, a change upstream already made) cost a glance instead
of an edit. ``rules`` holds the per-region rules; this module reads the regions out of the
marked-up files, gives the rules upstream's history (``GitOracle``), decides the per-patch rule
``superseded`` (every region of the patch is one upstream already made: drop the patch), and
renders each proposal as the diff that accepting it makes to the marked-up file.

Region ids are ``<patch-id>/<path>/<n>`` (``n`` counts the file's regions from 1, in file
order): the same series on the same base and target gives the same regions, so the same ids.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...git import Repo
from ...model.diffs import parse
from ...model.status import ProposalState
from .. import serialize
from ..carried import CarriedLines, Change
from ..conflicts import ConflictKind, FileConflict, marked_blocks
from . import evidence
from .evidence import BothInsert, Evidence, Superseded, Upstream
from .merge import norm
from .rules import Case, Earlier, Found, Oracle, Sides, first, item_names, names

STATES = tuple(ProposalState)


@dataclass
class Proposal:
    id: str
    patch_id: str
    path: str
    n: int
    rule: str
    lines: list[str]
    evidence: Evidence
    marked: list[str]  # the region as the marked-up file holds it, markers included
    port: dict[str, Any] | None = None
    state: ProposalState = ProposalState.PROPOSED

    @property
    def diff(self) -> str:
        """What accepting does to the region (and, for ``moved``, to the code's new place)."""
        whole = max(len(self.marked), len(self.lines))  # the region shown whole
        out = list(difflib.unified_diff(self.marked, self.lines, f"a/{self.path}",
                                        f"b/{self.path}", lineterm="", n=whole))
        if self.port:
            out += difflib.unified_diff(self.port["old"], self.port["new"],
                                        f"a/{self.port['path']}", f"b/{self.port['path']}",
                                        lineterm="", n=0)
        return "\n".join(out) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "rule": self.rule, "state": self.state.value,
                "evidence": evidence.to_json(self.evidence), "diff": self.diff,
                "lines": self.lines, "port": self.port}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Proposal:
        pid, _, rest = str(data["id"]).partition("/")
        path, _, n = rest.rpartition("/")
        rule = str(data["rule"])
        return cls(str(data["id"]), pid, path, int(n), rule, list(data["lines"]),
                   evidence.from_json(rule, data["evidence"]), list(data.get("marked") or []),
                   data.get("port"), ProposalState(str(data.get("state", "proposed"))))


@dataclass
class Block:
    """One ``<<<<<<<`` ... ``>>>>>>>`` block of a marked-up file (0-based line span)."""

    start: int
    end: int
    sides: Sides
    marked: list[str] = field(default_factory=list)


def blocks(text: str) -> list[Block]:
    """The conflict blocks of a marked-up file, in file order, as the one marker scanner
    (``conflicts.marked_blocks``) reads them."""
    lines = text.split("\n")
    out: list[Block] = []
    for start, end, parts in marked_blocks(_b(lines)):
        ours, base, theirs = (_s(parts[k]) for k in ("ours", "base", "theirs"))
        out.append(Block(start - 1, end - 1, Sides(ours, base, theirs), lines[start - 1:end]))
    return out


class GitOracle(Oracle):
    """The rules' view of upstream's history through the git door (cached per bump)."""

    def __init__(self, repo: Repo, new: str, carried: CarriedLines) -> None:
        self.repo, self.new, self.carried = repo, new, carried
        self._diffs: dict[str, bytes] = {}
        self._files: dict[str, list[str] | None] = {}

    def _diff(self, commits: Sequence[str]) -> dict[str, bytes]:
        todo = [c for c in commits if c not in self._diffs]
        if todo:
            self._diffs.update(self.repo.history.commit_diffs(todo))
        return {c: self._diffs.get(c, b"") for c in commits}

    def region(self, path: str, base: list[str], theirs: list[str]) -> dict[str, Any] | None:
        found = self.carried.changes([Change.of_sides(path, _b(base), _b(theirs))])
        return serialize.carried(found) if found.carried else None

    def brought(self, path: str, lines: list[str]) -> str | None:
        return self.carried.changes([Change(path, tuple(_b(lines)))]).commit

    def files(self, commits: Sequence[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for commit, diff in self._diff(list(commits)).items():
            for path in parse(diff).paths() if diff else []:
                out.setdefault(path, []).append(commit)
        return out

    def blob(self, sha: str) -> list[str]:
        data = self.repo.objects.blob(sha) or b""
        return data.decode("utf-8", "surrogateescape").split("\n")

    def read(self, path: str) -> list[str] | None:
        if path not in self._files:
            data = self.repo.objects.blob(f"{self.new}:{path}")
            self._files[path] = None if data is None else \
                data.decode("utf-8", "surrogateescape").split("\n")
        return self._files[path]


def _b(lines: list[str]) -> list[bytes]:
    return [ln.encode("utf-8", "surrogateescape") for ln in lines]


def _s(lines: list[bytes]) -> list[str]:
    return [ln.decode("utf-8", "surrogateescape") for ln in lines]


def propose_file(patch_id: str, c: FileConflict, culprits: Sequence[Sequence[str]],
                 oracle: Oracle, earlier: Sequence[Earlier | None] = ()) -> list[Proposal | None]:
    """One entry per region of a content conflict: its proposal, or None. ``earlier``: per
    region, what the earlier failing patches it needs bring to the file (None: it needs none)."""
    if c.kind not in (ConflictKind.CONTENT, ConflictKind.ADD_ADD) or c.content is None:
        return [None] * len(c.regions)
    text = c.content.decode("utf-8", "surrogateescape")
    found = blocks(text)
    pre, up = c.stages.get(1), c.stages.get(2)
    base_file = oracle.blob(pre.blob) if pre is not None else []
    ours_file = oracle.blob(up.blob) if up is not None else _upstream_file(text)
    out: list[Proposal | None] = []
    for n, block in enumerate(found, 1):
        case = Case(patch_id, c.path, n, block.sides, ours_file, base_file,
                    list(culprits[n - 1]) if n - 1 < len(culprits) else [],
                    earlier[n - 1] if n - 1 < len(earlier) else None)
        hit = first(case, oracle)
        out.append(None if hit is None else _proposal(case, hit, block))
    return out


def _proposal(case: Case, hit: Found, block: Block) -> Proposal:
    return Proposal(case.id, case.patch_id, case.path, case.n, hit.rule, hit.lines,
                    hit.evidence, block.marked, hit.port)


def _upstream_file(text: str) -> list[str]:
    """Upstream's file, rebuilt from the marked-up one (each block's upstream side)."""
    lines = text.split("\n")
    out: list[str] = []
    at = 0
    for start, end, parts in marked_blocks(_b(lines)):
        out += lines[at:start - 1] + _s(parts["ours"])
        at = end
    return out + lines[at:]


def earlier_of(patches: Sequence[str], adds: Sequence[bytes],
               proposals: Sequence[Proposal]) -> Earlier:
    """A region's ``Earlier``: the patches it needs, the lines they add to its file and their
    proposals there (each with upstream's side of its region, read from the marked block)."""
    sides = []
    for p in proposals:
        found = blocks("\n".join(p.marked))
        if found:
            sides.append((found[0].sides.ours, list(p.lines), p.id))
    text = (ln.decode("utf-8", "surrogateescape") for ln in adds)
    return Earlier(list(patches), frozenset(norm(x) for x in text if x.strip()), sides)


def consistent(props: list[Proposal | None], conflicts: Sequence[FileConflict] = (),
               added: Sequence[bytes] = ()) -> None:
    """One patch, one story. When upstream already made the patch's change about a name in one
    region, an insertion about that same name elsewhere in the patch (a parameter's docstring
    entry, its keyword at a call) is upstream's business too: that proposal is withdrawn. And
    an inserted item (a parameter, a keyword) whose name the patch uses nowhere but in regions
    left to a person (``conflicts``: the regions, in ``props``' order; ``added``: every line
    the patch adds) only makes sense with what that person decides there: withdrawn too."""
    made = {n for p in props if p is not None and isinstance(p.evidence, Upstream)
            for n in p.evidence.names}
    regions = region_additions(conflicts) if conflicts else []
    for i, p in enumerate(props):
        if p is None or not isinstance(p.evidence, BothInsert):
            continue
        inserted = [ln for at in p.evidence.insertions for ln in at.patch]
        if item_names(inserted) & made or \
                len(regions) == len(props) and (
                    _only_left(item_names(inserted), props, regions, added)
                    or _declared_left(inserted, props, regions)):
            props[i] = None


def region_additions(conflicts: Sequence[FileConflict]) -> list[list[str]]:
    """Per region (in ``propose_file``'s order), the lines the patch's side adds there."""
    out: list[list[str]] = []
    for c in conflicts:
        if c.kind not in (ConflictKind.CONTENT, ConflictKind.ADD_ADD) or c.content is None:
            out += [[] for _ in c.regions]
            continue
        for b in blocks(c.content.decode("utf-8", "surrogateescape")):
            before = set(b.sides.base)
            out.append([x for x in b.sides.theirs if x not in before])
    return out


def _only_left(wanted: set[str], props: list[Proposal | None], regions: list[list[str]],
               added: Sequence[bytes]) -> bool:
    """Some name of ``wanted`` is used by the patch in a region without a proposal, and by no
    line the patch adds outside its regions."""
    inside = {x for lines in regions for x in lines}
    outside = [x for x in (ln.decode("utf-8", "surrogateescape") for ln in added)
               if x not in inside]
    for name in wanted:
        left = any(name in names(lines) for p, lines in zip(props, regions) if p is None)
        if left and not any(name in names([x]) for x in outside):
            return True
    return False


KEYWORD = re.compile(r"^\s*(\w+)=[^=]")
DECLARED = re.compile(r"^\s*(\w+)\s*:")


def _declared_left(inserted: list[str], props: list[Proposal | None],
                   regions: list[list[str]]) -> bool:
    """A keyword argument the insertion passes is a parameter the patch declares in a region
    without a proposal: whether the callee keeps that parameter is for the person resolving
    that region, and the call must follow."""
    passed = {m.group(1) for m in (KEYWORD.match(x) for x in inserted) if m}
    declared = {m.group(1) for p, lines in zip(props, regions) if p is None
                for m in (DECLARED.match(x) for x in lines) if m}
    return bool(passed & declared)


def superseded(props: list[Proposal | None]) -> bool:
    """Every region of a patch is one upstream already made: the patch as a whole is redundant.
    Its proposals become one proposed drop, the commits named."""
    real = [p for p in props if p is not None]
    found = [p.evidence for p in real if isinstance(p.evidence, Upstream)]
    if not real or len(found) != len(props):
        return False
    commits = tuple(sorted({ev.commit for ev in found if ev.commit}))
    for p, ev in zip(real, found):
        p.rule = "superseded"
        p.evidence = Superseded(commits, ev)
    return True


def dropped(patch_id: str, c: FileConflict, commit: str, subject: str) -> list[Proposal]:
    """The regions of a patch the bump drops because upstream carries it (the carried-lines
    engine named ``commit``): each a proposed drop, upstream's side kept, the commit named."""
    if c.kind not in (ConflictKind.CONTENT, ConflictKind.ADD_ADD) or c.content is None:
        return []
    found = blocks(c.content.decode("utf-8", "surrogateescape"))
    return [Proposal(f"{patch_id}/{c.path}/{n}", patch_id, c.path, n, "superseded",
                     list(b.sides.ours),
                     Superseded((commit,), Upstream(commit, "patch", subject=subject)),
                     b.marked) for n, b in enumerate(found, 1)]


__all__ = ["STATES", "Block", "Earlier", "GitOracle", "Oracle", "Proposal", "blocks",
           "consistent", "dropped", "earlier_of", "propose_file", "superseded"]
