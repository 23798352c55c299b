"""The one engine for "does upstream already carry these lines, and which commit brought them".

Asked by ``bump`` (a patch is ``upstreamed`` only with the commit named), by the proposals
(rules ``already-upstream`` and ``superseded``: one conflict region's lines) and by the report
(a dropped patch: was it upstreamed, by which commit). Its converse, "do these added lines put
back what a commit of the range removed" (``removed_upstream``), is bump's re-adds warning and
the report's partial revert.

The question is asked of *lines*: what a change adds and what it removes, in one file (or every
file of a patch). The evidence is the change's *telling* lines only (stripped; lines the
attribution engine would blame, ``worth_blaming``: at least ``TELLING_CHARS`` characters that
are not blanks or punctuation, so a ``)`` or ``else:`` tells nothing; nor, here, does a comment
line, ``# ...``: upstream lands a fix in its own words, without the fork's comments; a
``#include`` or ``#define`` is code and counts):

* an added line the old file did not have must be in the target's file (a change that adds
  only short lines is judged by those lines: its removals alone prove nothing);
* a removed line the old file had, and that the change does not add back, must be gone from the
  target's file.

``share`` is the part of that evidence the target satisfies. The lines are carried when
``share >= CARRIED_SHARE`` **and** a commit of ``old..new`` is found that brought them: among
the commits that change those files, the one whose own diff adds most of the carried added lines
and removes most of the carried removed lines (on a tie, the oldest: the one that landed them,
not a later move). A commit with the same ``git patch-id`` as a whole patch is taken first.
No commit, no verdict: lines the target has but no commit of the range brought (they were
already there, or came by a way this engine cannot see) are not "carried", whatever the share,
so nobody is told "upstream has it" without being told where.

``CARRIED_SHARE`` is the one threshold (0.8): upstream rarely lands a change byte for byte
(a renamed variable, a reflowed call), and a change that is four fifths there is one to compare
with upstream's, not to carry again. Files renamed upstream are followed (rename detection
between ``old`` and ``new``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..git import Repo
from ..model import pysyntax
from ..model.diffs import FileDiff, Hunk, text_lines
from ..model.ids import Oid
from ..model.patches import Patch
from .attribution import UpstreamRange, worth_blaming

CARRIED_SHARE = 0.8  # the one threshold: the part of the telling lines the target must carry


def telling(line: bytes) -> bool:
    """Whether a (stripped) line is evidence: brackets, blank lines, ``pass`` tell nothing, and
    neither does a comment line (``# ...``): upstream lands a fix in its own words, so a fork's
    comments are not what it carries (June: upstream 2e4a5d48 made the gate TP slice fix of
    patch #22 line for line, without the patch's two comment lines)."""
    if line.startswith(b"# ") or line == b"#":
        return False
    return worth_blaming(line)


# a lone argument, parameter or list item (``qk_head_dim,``, ``cp_group=self.cp_group,``,
# ``"megatron.core",``, ``dims=-1,``), an opener (``include = [``) or a line of prose
# (``Defaults to False.``): each found in a thousand places
_PIECE = re.compile(
    rb"""^(?:[\w.]+(?:=[-\w.\[\]]+|:\s*[\w.\[\]]+|\s*=\s*[\[({])?|"[^"]*"|'[^']*'),?$""")
_PROSE = re.compile(rb"^[A-Za-z][\w\s,'-]*[.:]?$")
# an import statement is code, though its words read like prose (``import logging``)
_IMPORT = re.compile(pysyntax.IMPORT.encode())


def telling_alone(line: bytes) -> bool:
    """Whether a (stripped) line tells something read alone, out of its change: telling, and
    neither a lone argument or list item nor a line of prose, which many call sites and
    docstrings share. A change's evidence is judged as a whole (``telling``); one added line
    said to undo an upstream removal (``removed_upstream``) must tell on its own (June: the
    warning named ``Defaults to False.`` and ``cp_group=self.cp_group,``). An import is a
    statement, not prose (the grown June report: ``import logging``, which upstream fa9c71454
    removed from mlp.py, put back by a resolution)."""
    return telling(line) and not _PIECE.match(line) and not (
        _PROSE.match(line) and b" " in line and not _IMPORT.match(line))


def _evidence(added: Iterable[bytes]) -> set[bytes]:
    """The added lines that count: the telling ones; when a change adds only short lines
    (``x = 1`` replacing a line), those lines themselves, or its removals alone would decide and
    a patch replacing a line upstream replaced *differently* would read as carried."""
    plain = {t for t in (ln.strip() for ln in added) if t}
    return {t for t in plain if telling(t)} or plain


@dataclass(frozen=True)
class Carried:
    """The answer. ``commit`` is None when the lines are not carried (see the module)."""

    commit: Oid | None
    subject: str = ""
    share: float = 0.0  # the part of the evidence the target satisfies
    found: int = 0  # telling lines satisfied
    total: int = 0  # telling lines asked about
    how: str = ""  # "patch-id" | "lines" | "" (not carried)
    lines: tuple[bytes, ...] = field(default=(), repr=False)  # the satisfied added lines

    @property
    def carried(self) -> bool:
        return self.commit is not None


@dataclass(frozen=True)
class Change:
    """Lines one change adds to and removes from one file (``path``: the file's path at the old
    base; ``pre``: the file the change was made on, when known, else the old base's)."""

    path: str
    added: tuple[bytes, ...] = ()
    removed: tuple[bytes, ...] = ()

    @classmethod
    def of_file(cls, f: FileDiff, hunks: Sequence[Hunk] | None = None) -> Change:
        chosen = f.hunks if hunks is None else hunks
        return cls(f.old_path or f.path, tuple(ln for h in chosen for ln in h.added),
                   tuple(ln for h in chosen for ln in h.removed))

    @classmethod
    def of_sides(cls, path: str, base: Sequence[bytes], patch: Sequence[bytes]) -> Change:
        """A conflict region: the preimage's lines and the patch's lines of it."""
        had = {ln.strip() for ln in base}
        has = {ln.strip() for ln in patch}
        return cls(path, tuple(ln for ln in patch if ln.strip() not in had),
                   tuple(ln for ln in base if ln.strip() not in has))


class CarriedLines:
    """Answers for one upstream range; files and per-file histories read once and shared by
    every question (safe to ask from several threads)."""

    def __init__(self, rng: UpstreamRange) -> None:
        self.rng = rng
        self._lock = threading.Lock()
        self._texts: dict[str, set[bytes]] = {}
        self._diffs: dict[str, list[tuple[Oid, set[bytes], set[bytes]]]] = {}
        self._renames: dict[str, str] | None = None

    # -- questions ---------------------------------------------------------------------------------
    def patch(self, patch: Patch) -> Carried:
        """The whole patch: a same-patch-id commit, else its lines in every file."""
        if patch.is_empty or any(self._still_there(f) for f in patch.files):
            return Carried(None)
        by_lines = self.changes([Change.of_file(f) for f in patch.files])
        if by_lines.total and by_lines.share < CARRIED_SHARE:
            return by_lines  # a same-patch-id commit would have put its lines there
        same = self.same_patch_id(patch)
        if same is not None:
            return Carried(same, self.rng.subject(same), 1.0, by_lines.found, by_lines.total,
                           "patch-id", by_lines.lines)
        return by_lines

    def _still_there(self, f: FileDiff) -> bool:
        """A file the patch deletes that the target still has: upstream does not carry that
        deletion, whatever its lines (hostile12 #6: short lines tell nothing, so a deletion
        counted for nothing and its patch was dropped as upstreamed)."""
        if f.new_path is not None or f.old_path is None:
            return False
        return self.rng.blob(f"{self.rng.new}:{self.at_new(f.old_path)}") is not None

    def changes(self, changes: Iterable[Change]) -> Carried:
        """Lines of one or more files (a patch, a file's hunks, a conflict region)."""
        added: dict[str, set[bytes]] = {}
        removed: dict[str, set[bytes]] = {}
        total = found = 0
        for ch in changes:
            old = self._text(self.rng.old, ch.path)
            new = self._text(self.rng.new, self.at_new(ch.path))
            plus = _evidence(ch.added) - old
            minus = {t for t in (ln.strip() for ln in ch.removed) if telling(t)} & old
            minus -= {ln.strip() for ln in ch.added}
            total += len(plus) + len(minus)
            added.setdefault(ch.path, set()).update(plus & new)
            removed.setdefault(ch.path, set()).update(minus - new)
            found += len(plus & new) + len(minus - new)
        share = found / total if total else 0.0
        if not total or share < CARRIED_SHARE:
            return Carried(None, share=share, found=found, total=total)
        commit = self._bringer(added, removed)
        if commit is None:
            return Carried(None, share=share, found=found, total=total)
        lines = tuple(sorted(t for ts in added.values() for t in ts))
        return Carried(commit, self.rng.subject(commit), share, found, total, "lines", lines)

    def removed_upstream(self, change: Change, on_target: bool = False
                         ) -> list[tuple[Oid, list[bytes]]]:
        """The change's added lines that tell alone (``telling_alone``) that a commit of the
        range *removed* and the target does not have, grouped by that commit: a port of them
        reverts upstream (a patch that turns ``f(x)`` into ``f(x, weights_only=False)`` after
        upstream took that argument out). Bump asks it of a patch, the report of the lines a
        resolution wrote (the old patch's own left out): one rule for both warnings.
        ``on_target``: the change was made on a tree built on the target (the report's new
        patches); a line it removes from that file and adds is moved there, not put back (June:
        new patch 21 moves ``from ...spec_utils import ModuleSpec, build_module`` within
        attention.py; patch 18 put it back). A patch made on the old base (bump) that moves a
        line upstream has since removed does put it back on the target: its removal finds
        nothing there (June: deepseek-v4's ``tensor_shape = [...]`` into a branch).
        ``prefetch`` reads the histories of many files in one process."""
        new = self._text(self.rng.new, self.at_new(change.path))
        moved = {ln.strip() for ln in change.removed} if on_target else set()
        back = {t for t in (ln.strip() for ln in change.added) if telling_alone(t)} - new - moved
        if not back:
            return []
        found: dict[Oid, list[bytes]] = {}
        for commit, _, minus in self._history(change.path):
            hit = sorted(back & minus)
            if hit:
                found[commit] = hit
        return [(c, found[c]) for c in self.rng.order(found)]

    def same_patch_id(self, patch: Patch) -> Oid | None:
        """The commit of the range whose change to the patch's files has its patch-id (the
        first to land it, when it was reverted and landed again)."""
        history = self.rng.repo.history
        own = history.patch_id(patch.diff)
        if own is None:
            return None
        diffs = history.patches(self.rng.spec, patch.paths())
        ids = history.patch_ids(diffs)
        return next((c for c, _ in reversed(diffs) if ids.get(c) == own), None)

    # -- the evidence ------------------------------------------------------------------------------
    def at_new(self, path: str) -> str:
        """``path``'s name in the target (a file upstream renamed is followed)."""
        if self._text(self.rng.new, path) or self._text(self.rng.old, path) == set():
            return path
        with self._lock:
            if self._renames is None:
                self._renames = self.rng.repo.history.renames(self.rng.old, self.rng.new)
        return self._renames.get(path, path)

    def _text(self, rev: str, path: str) -> set[bytes]:
        key = f"{rev}:{path}"
        if key not in self._texts:
            data = self.rng.blob(key)
            self._texts[key] = {ln.strip() for ln in text_lines(data)}
        return self._texts[key]

    def _bringer(self, added: dict[str, set[bytes]], removed: dict[str, set[bytes]]) -> Oid | None:
        """The commit whose diffs add most of ``added`` and remove most of ``removed`` (oldest
        first on a tie)."""
        score: dict[Oid, int] = {}
        order: list[Oid] = []
        for path in sorted(set(added) | set(removed)):
            for commit, plus, minus in self._history(path):
                hit = len(added.get(path, set()) & plus) + len(removed.get(path, set()) & minus)
                if commit not in score:
                    order.append(commit)
                    score[commit] = 0
                score[commit] += hit
        ranked = self.rng.order(order)
        best = max((score[c] for c in ranked), default=0)
        return next((c for c in ranked if score[c] == best), None) if best else None

    def prefetch(self, paths: Iterable[str]) -> None:
        """The range's history of ``paths`` (as ``_history`` has it), read in one ``git log``."""
        wanted = sorted({p for p in paths if p not in self._diffs and p.isascii() and
                         not any(c in p for c in ' "\\\t')})  # git quotes those: read alone
        if not wanted:
            return
        rows: dict[str, list[tuple[Oid, set[bytes], set[bytes]]]] = {p: [] for p in wanted}
        for commit, diff in self.rng.repo.history.patches(self.rng.spec, wanted, context=0):
            for path, plus, minus in _per_file(diff):
                if path in rows:
                    rows[path].append((commit, plus, minus))
        self._diffs.update(rows)

    def _history(self, path: str) -> list[tuple[Oid, set[bytes], set[bytes]]]:
        """(commit, lines it added, lines it removed) for each non-merge commit of the range
        that changes ``path`` (or its new name)."""
        if path not in self._diffs:
            paths = sorted({path, self.at_new(path)})
            rows = []
            for commit, diff in self.rng.repo.history.patches(self.rng.spec, paths,
                                                              context=0):
                plus, minus = set(), set()
                for ln in diff.split(b"\n"):
                    if ln.startswith(b"+") and not ln.startswith(b"+++"):
                        plus.add(ln[1:].strip())
                    elif ln.startswith(b"-") and not ln.startswith(b"---"):
                        minus.add(ln[1:].strip())
                rows.append((commit, plus, minus))
            self._diffs[path] = rows
        return self._diffs[path]


def _per_file(diff: bytes) -> list[tuple[str, set[bytes], set[bytes]]]:
    """(path, added lines, removed lines) per file of a multi-file diff (stripped lines)."""
    out: list[tuple[str, set[bytes], set[bytes]]] = []
    for ln in diff.split(b"\n"):
        if ln.startswith(b"diff --git "):
            out.append(("", set(), set()))
        elif not out:
            continue
        elif ln.startswith((b"--- a/", b"+++ b/")) and not out[-1][0]:
            out[-1] = (ln[6:].decode("utf-8", errors="surrogateescape"), out[-1][1], out[-1][2])
        elif ln.startswith(b"+") and not ln.startswith(b"+++"):
            out[-1][1].add(ln[1:].strip())
        elif ln.startswith(b"-") and not ln.startswith(b"---"):
            out[-1][2].add(ln[1:].strip())
    return out


def reverse_applies(repo: Repo, rev: str, patch: Patch) -> bool:
    """Whether ``patch`` reverse-applies cleanly at ``rev`` (its exact result is there)."""
    if patch.is_empty:
        return False
    with repo.index() as index:
        index.set_entries(repo.entries_at(rev, patch.paths()))
        return index.apply(patch.diff, check=True, reverse=True).ok


__all__ = ["CARRIED_SHARE", "Carried", "CarriedLines", "Change", "reverse_applies", "telling"]
