"""Checks after a merge: risks a clean (or resolved) result can hide.

* **re-adds what upstream removed**: a patch adds lines an upstream commit of the range took out
  (the old base had them, the target does not). Carried as it is, the port silently reverts that
  commit, which is named (the carried-lines engine finds it).
* **lands beside an upstream duplicate**: a merged hunk's anchor (its removed lines with the two
  context lines before the change and the one after) occurs more times in the target's file than
  in the file the patch was written for: upstream copied the block, and git put the hunk at one
  copy (the nearest), perhaps not the one it was written for. The copy is
  named by its lines and by the upstream commit that wrote them (``git blame``).

bump runs both on every patch with a diff; each finding is a warning, not a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model.diffs import FileDiff, Hunk, text_lines
from ..model.ids import Oid
from ..model.patches import Patch
from .attribution import UpstreamRange
from .carried import CarriedLines, Change, telling


@dataclass(frozen=True)
class Risk:
    kind: str  # "re-adds-removed" | "duplicate-context"
    path: str
    commit: Oid | None
    subject: str
    hunk: str  # the patch's hunk header it concerns ("" for the whole file)
    detail: str
    also: tuple[Oid, ...] = ()  # re-adds: earlier commits that removed the same lines

    def text(self) -> str:
        who = f" {self.commit.short()} ({self.subject})" if self.commit else ""
        if self.kind == "re-adds-removed":
            before = f" (as {', '.join(c.short() for c in self.also)} had before)" \
                if self.also else ""
            return f"{self.path}: re-adds {self.detail}, which upstream{who} removed{before}"
        return f"{self.path}: hunk {self.hunk} {self.detail}" + \
            (f"; copied upstream by{who}" if self.commit else "")


def risks(carried: CarriedLines, patch: Patch, merged: bool) -> list[Risk]:
    """Both checks on one patch (the duplicate-context one only when it ``merged``: a conflict
    is looked at by a person anyway)."""
    out: list[Risk] = []
    rng = carried.rng
    for f in patch.files:
        if f.old_path is None or f.binary:
            continue
        for commit, lines, also in last_removers(carried.removed_upstream(Change.of_file(f))):
            first = lines[0].decode(errors="replace")
            shown = f"`{first[:77]}...`" if len(first) > 80 else f"`{first}`"
            more = f" and {len(lines) - 1} more line(s)" if len(lines) > 1 else ""
            out.append(Risk("re-adds-removed", f.path, commit, rng.subject(commit),
                            _adding(f, lines[0]), shown + more, also))
        if merged:
            out += _duplicates(rng, f)
    return out


def last_removers(found: list[tuple[Oid, list[bytes]]]
                  ) -> list[tuple[Oid, list[bytes], tuple[Oid, ...]]]:
    """Each re-added line under the last commit of the range that removed it (the removal
    that stands at the target), with the earlier commits that had removed the same lines:
    one warning for a change upstream made, reverted and made again (June: 300d1b6550b4 and
    its reapply 9d71cb1cd291), not one per removal. ``found`` is oldest first."""
    last = {line: commit for commit, lines in found for line in lines}
    out = []
    for commit, _ in found:
        mine = sorted(line for line, by in last.items() if by == commit)
        if mine:
            also = tuple(c for c, lines in found if c != commit and set(lines) & set(mine))
            out.append((commit, mine, also))
    return out


def _adding(f: FileDiff, line: bytes) -> str:
    """The header of the patch's first hunk that adds ``line`` (so an annotation lands on it),
    "" when none does (the whole file is meant)."""
    want = line.strip()
    for h in f.hunks:
        if any(ln[:1] == b"+" and ln[1:].strip() == want for ln in h.lines):
            return h.header
    return ""


def _duplicates(rng: UpstreamRange, f: FileDiff) -> list[Risk]:
    path = f.old_path or f.path
    pre = text_lines(rng.blob(f.old_blob)) if f.old_blob else []
    there = text_lines(rng.blob(f"{rng.new}:{path}"))
    if not pre or not there:
        return []
    out = []
    for h in f.hunks:
        block = _anchor(h)
        if len(block) < 3 or sum(1 for ln in block if telling(ln.strip())) < 2:
            continue
        mine, theirs = _count(pre, block), _count(there, block)
        if theirs[0] > max(1, mine[0]):
            out.append(_duplicate(rng, path, h, theirs[1]))
    return out


def _anchor(h: Hunk) -> list[bytes]:
    """The preimage lines a hunk is anchored by: its removed lines with the two context lines
    before the change and the one after (what git's merge matches it against)."""
    tags = [ln[:1] for ln in h.lines]
    changed = [i for i, t in enumerate(tags) if t in (b"+", b"-")]
    if not changed:
        return []
    lo, hi = changed[0], changed[-1]
    before = [i for i in range(lo) if tags[i] == b" "][-2:]
    after = [i for i in range(hi + 1, len(tags)) if tags[i] == b" "][:1]
    keep = before + [i for i in range(lo, hi + 1) if tags[i] in (b" ", b"-")] + after
    return [h.lines[i][1:] for i in sorted(keep)]


def _duplicate(rng: UpstreamRange, path: str, h: Hunk, at: list[int]) -> Risk:
    size = len(_anchor(h))
    spans = [(a, a + size - 1) for a in at]
    blamed = rng.blamed(path, {n for a, b in spans for n in range(a, b + 1)}, reverse=False)
    wrote = [c for c in blamed.values() if c in rng.parents]
    commit = max(set(wrote), key=wrote.count) if wrote else None
    where = ", ".join(f"{a}-{b}" for a, b in spans)
    return Risk("duplicate-context", path, commit, rng.subject(commit) if commit else "",
                h.header, f"needs lines that upstream's file now has {len(at)} times "
                          f"(lines {where}): check it landed in the copy it was written for")


def _count(lines: list[bytes], block: list[bytes]) -> tuple[int, list[int]]:
    """How many times ``block`` occurs in ``lines`` as a run, and at which 1-based lines."""
    first, n = block[0], len(block)
    hits = [i + 1 for i, ln in enumerate(lines) if ln == first and lines[i:i + n] == block]
    return len(hits), hits


__all__ = ["Risk", "risks"]
