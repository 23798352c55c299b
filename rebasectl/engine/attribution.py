"""The one attribution engine: which upstream commits broke or changed a patch.

``bump``, ``blame``, ``apply`` (when it stops on a new base) and the report ask it the same
question and get the same answer.

Breaks are found by a scan, not a bisection: upstream reverts and re-lands changes, so "applies"
is not monotonic along the first-parent chain. Whether a patch applies can only change at a commit
that changes one of its files (or the files of the earlier patches it sits on): one
``git log --raw -- <those files>`` lists exactly those commits, and the patch (on top of those
earlier patches) is applied to a sparse index holding just those files at each distinct state
(a revert restores the same blobs: decided once). ``first_break`` is the first commit at which it
stops applying, ``permanent_break`` the one after which it never applies again.

Culprits are found per region, as the conflict engine reports it: the commits that changed the
lines the region covers. The preimage lines (what the patch needed) are mapped onto the old base
and followed with ``git blame --reverse``: the commits right after the last one that still had a
line changed it (a merge there is opened up to its side branch's commits that touch the file,
narrowed to those that removed the line's text). The upstream lines now in the region are
``git blame``d forward for the commits of the range that wrote them. Each culprit says whether it
came by the first break (an ancestor of it) or later; a patch that does not apply at the old
end already (``blame --from`` a revision where it fails) was broken by no commit of the range:
``applies_at_old`` is false and none of its culprits came by a break. A modify/delete names the
commit that deleted the file. A region whose preimage lines an earlier patch wrote, when that
patch failed or was left out (or a *missing* file that patch creates), is caused by that patch,
not by upstream: it has no upstream culprits and the patch is ``blocked_by`` it (the series' own
line model, model/dependencies.py, says which patch wrote which lines).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..git import Entry, Index, Repo
from ..model.dependencies import SeriesLines
from ..model.diffs import FileDiff, LineMap, spans, text_lines
from ..model.ids import Oid
from ..model.patches import Patch
from ..model.series_patch import SeriesPatch
from .applier import Unsupported, apply_patch
from .conflicts import WHOLE_FILE, ConflictKind, FileConflict, Region, applies


@dataclass(frozen=True)
class CommitRef:
    commit: Oid
    subject: str


@dataclass(frozen=True)
class Culprit:
    commit: Oid
    subject: str
    path: str
    by_first_break: bool = True  # an ancestor of the first break (else: landed after it)


@dataclass
class RegionCulprits:
    path: str
    region: Region
    commits: list[Oid]
    blocked_by: list[str] = field(default_factory=list)  # earlier failed patches it needs


@dataclass
class Attribution:
    """Why one patch no longer applies between two upstream bases."""

    first_break: CommitRef | None = None
    permanent_break: CommitRef | None = None
    culprits: list[Culprit] = field(default_factory=list)
    regions: list[RegionCulprits] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)  # ids of earlier patches it needs
    touching: list[Oid] = field(default_factory=list)  # first-parent commits touching its files
    states: int = 0  # distinct states applied during the scan (for the benchmark)
    # whether it applies at the range's old end: blame --from a revision where it already fails
    # has no break in the range (no commit of it broke the patch), only commits that changed it
    applies_at_old: bool = True


class UpstreamRange:
    """``old..new`` of an upstream and what every attribution in it shares."""

    def __init__(self, repo: Repo, old: Oid, new: Oid) -> None:
        self.repo = repo
        self.old, self.new = old, new
        self.spec = f"{old}..{new}"
        self._parents: dict[Oid, tuple[Oid, ...]] | None = None
        self._children: dict[Oid, list[Oid]] | None = None
        self._subjects: dict[str, str] = {}
        self._lock = threading.Lock()  # one object reader: callers may run on threads
        self._reader: Repo | None = None
        self._order: dict[str, int] | None = None
        self._count: int | None = None
        self._ancestors: dict[str, set[Oid]] = {}
        self.contents = Contents(repo)  # blobs, merges and file results every scan shares
        self._blames = _Blames()
        self._sides = _Sides()
        self._paths: set[str] = set()  # files reverse-blamed or expected to be: ``side`` reads

    @property
    def parents(self) -> dict[Oid, tuple[Oid, ...]]:
        if self._parents is None:
            self._parents = self.repo.history.parents(self.spec)
        return self._parents

    @property
    def children(self) -> dict[Oid, list[Oid]]:
        if self._children is None:
            kids: dict[Oid, list[Oid]] = {}
            for commit, parents in self.parents.items():
                for parent in parents:
                    kids.setdefault(parent, []).append(commit)
            self._children = kids
        return self._children

    def count(self) -> int:
        if self._count is None:
            self._count = self.repo.history.count(self.spec)
        return self._count

    def subject(self, commit: str) -> str:
        if commit not in self._subjects:
            self._subjects[commit] = self.repo.commit(commit).subject
        return self._subjects[commit]

    def ref(self, commit: Oid) -> CommitRef:
        return CommitRef(commit, self.subject(commit))

    def order(self, commits: Iterable[Oid]) -> list[Oid]:
        """``commits`` oldest first (topological order of the range; others last)."""
        if self._order is None:  # the parents' keys are in rev-list --reverse's order
            self._order = {c: i for i, c in enumerate(self.parents)}
        rank = self._order
        return sorted(set(commits), key=lambda c: (rank.get(c, len(rank)), c))

    def ancestors(self, commit: str) -> set[Oid]:
        """The commits of the range that ``commit`` contains (itself included): one
        ``rev-list`` per commit asked, however many culprits are checked against it."""
        with self._lock:
            if commit not in self._ancestors:
                self._ancestors[commit] = set(self.repo.history.rev_list(
                    [f"{self.old}..{commit}"], reverse=False))
            return self._ancestors[commit]

    def blob(self, spec: str) -> bytes | None:
        """A blob through the range's own persistent reader (not the repository's, which the
        caller's thread may be using), safe to call from several threads."""
        with self._lock:
            if self._reader is None:
                self._reader = Repo(self.repo.path)
            return self._reader.objects.blob(spec)

    def expect_blame(self, path: str, lines: Iterable[int], *, reverse: bool) -> None:
        """Lines of ``path`` a later ``blamed`` will be asked about (another patch's regions in
        the same file, another interdiff of it): the first ``blamed`` of the file asks git about
        them too, in the same process."""
        self._blames.expect((path, reverse), lines)
        if reverse:
            self._paths.add(path)

    def blamed(self, path: str, lines: Iterable[int], *, reverse: bool) -> dict[int, Oid]:
        """``git blame`` of ``old..new`` for ``lines`` of ``path`` (reversed: lines of the file
        at ``old``, each with the last commit that still had it; else lines at ``new``, each with
        the commit that wrote it), every line asked of git once per range, together with the
        lines expected of the file: one process per file and direction, however many patches or
        interdiffs ask (a line's answer does not depend on which other lines are asked). Safe to
        call from several threads."""
        def run(asked: set[int]) -> dict[int, Oid]:
            return self.repo.history.blame(self.old, self.new, path, spans(asked),
                                           reverse=reverse)

        if reverse:
            self._paths.add(path)
        return self._blames.get((path, reverse), set(lines), run)

    def changes(self, before: str, after: str, path: str) -> bool:
        """Whether ``path`` differs between two commits."""
        return self.blob(f"{before}:{path}") != self.blob(f"{after}:{path}")

    def side(self, keeper: str, child: str, path: str) -> list[tuple[Oid, set[bytes]]]:
        """The non-merge commits of ``keeper..child`` (``child`` a child of ``keeper``: itself,
        or the side branch a merge child brought in) that change ``path``, oldest first, each
        with the lines (stripped) it removed from it. One ``git log`` per (keeper, child) reads
        every file the range's reverse blames are about, not one per file (and no separate
        ``rev-list`` for the commits)."""
        def run(paths: list[str]) -> list[tuple[Oid, dict[str, set[bytes]]]]:
            found = self.repo.history.patches(f"{keeper}..{child}", paths, context=0,
                                              full_history=True)
            return [(c, _removed_per_file(d, paths)) for c, d in reversed(found)]

        return self._sides.get((keeper, child), path, self._paths, run)


class _Blames:
    """Blamed lines per (path, direction): answers kept, lines expected, one git at a time per
    file (a second thread asking about the same file waits for the first one's answer)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[tuple[str, bool], threading.Lock] = {}
        self._expected: dict[tuple[str, bool], set[int]] = {}
        self._asked: dict[tuple[str, bool], set[int]] = {}
        self._found: dict[tuple[str, bool], dict[int, Oid]] = {}

    def expect(self, key: tuple[str, bool], lines: Iterable[int]) -> None:
        with self._lock:
            self._expected.setdefault(key, set()).update(n for n in lines if n > 0)

    def get(self, key: tuple[str, bool], want: set[int],
            run: Callable[[set[int]], dict[int, Oid]]) -> dict[int, Oid]:
        want = {n for n in want if n > 0}
        with self._lock:
            file_lock = self._files.setdefault(key, threading.Lock())
        with file_lock:
            asked = self._asked.setdefault(key, set())
            found = self._found.setdefault(key, {})
            todo = want - asked
            if todo:
                with self._lock:
                    batch = todo | (self._expected.pop(key, set()) - asked)
                got = run(batch)
                if not got and batch != todo:  # git refuses a whole blame for a line past the
                    batch, got = todo, run(todo)  # end: the expected lines are left to their askers
                found.update(got)
                asked.update(batch)
            return {n: found[n] for n in want if n in found}


class _Sides:
    """``UpstreamRange.side`` answers per (keeper, child): files read so far, one git at a time
    per pair (a thread asking about a file of the same pair waits for the first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pairs: dict[tuple[str, str], threading.Lock] = {}
        self._found: dict[tuple[str, str], dict[str, list[tuple[Oid, set[bytes]]]]] = {}

    def get(self, pair: tuple[str, str], path: str, wanted: set[str],
            run: Callable[[list[str]], list[tuple[Oid, dict[str, set[bytes]]]]]
            ) -> list[tuple[Oid, set[bytes]]]:
        with self._lock:
            pair_lock = self._pairs.setdefault(pair, threading.Lock())
            others = set(wanted)
        with pair_lock:
            known = self._found.setdefault(pair, {})
            if path not in known:
                # paths git would quote are read alone (the diff header is then unquoted)
                batch = sorted({p for p in others | {path} if p not in known and _plain(p)}) \
                    if _plain(path) else [path]
                rows = run(batch)
                for p in batch:
                    known[p] = [(c, files[p]) for c, files in rows if p in files]
            return known[path]


def _plain(path: str) -> bool:
    """A path git writes unquoted in a diff header."""
    return path.isascii() and not any(c in path for c in ' "\\\t\n')


def _removed_per_file(diff: bytes, paths: Sequence[str]) -> dict[str, set[bytes]]:
    """path -> the lines (stripped) a commit's diff removed from it, for each file of the diff
    (a file it changes without removing lines maps to an empty set). One path asked alone:
    the whole diff is that file's."""
    out: dict[str, set[bytes]] = {}
    current: set[bytes] | None = out.setdefault(paths[0], set()) if len(paths) == 1 else None
    for ln in diff.split(b"\n"):
        if ln.startswith(b"diff --git a/") and len(paths) > 1:
            name = ln[len(b"diff --git a/"):].decode("utf-8", errors="surrogateescape")
            current = out.setdefault(name[:(len(name) - 3) // 2], set())
        elif current is not None and ln.startswith(b"-") and not ln.startswith(b"---"):
            current.add(ln[1:].strip())
    return out


# -- the patches a patch sits on -------------------------------------------------------------------
def relevant_stack(stack: Sequence[SeriesPatch], target: int) -> list[int]:
    """Positions (ascending, ``target`` last) of the earlier patches that share files with the
    target, directly or through each other: only they can change whether it applies."""
    files = set(stack[target].paths())
    chosen = [target]
    for pos in range(target - 1, -1, -1):
        paths = set(stack[pos].paths())
        if paths & files:
            chosen.append(pos)
            files |= paths
    return sorted(chosen)


class Contents:
    """Blob contents and 3-way merges, each asked of git once per scan (states share most of
    their blobs, and the same merge comes back at every state that did not change the file)."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.blobs: dict[str, bytes | None] = {}
        self.merges: dict[tuple[bytes, ...], bytes | None] = {}
        self.applied: dict[tuple[int, bytes | None], dict[str, bytes | None] | None] = {}

    def blob(self, sha: str) -> bytes | None:
        if sha not in self.blobs:
            self.blobs[sha] = self.repo.objects.blob(sha)
        return self.blobs[sha]

    def apply_file(self, f: FileDiff, data: bytes | None) -> dict[str, bytes | None] | None:
        """One file's diff on ``data`` (its file's content): path -> result, or None when it
        does not apply; asked once per (diff, input)."""
        key = (id(f), data)
        if key not in self.applied:
            src = f.old_path or f.path
            self.applied[key] = apply_patch(lambda path: data if path == src else None, [f],
                                            self.blob, self.merge)
        return self.applied[key]

    def merge(self, ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
        key = tuple(hashlib.sha1(x).digest() for x in (ours, base, theirs))
        if key not in self.merges:
            text, conflicts = self.repo.merge_file(ours, base, theirs, ("a", "b", "c"))
            self.merges[key] = None if conflicts else text
        return self.merges[key]


def python_decides(contents: Contents, entries: dict[str, Entry],
                   patches: Sequence[Patch]) -> bool:
    """``stack_applies`` without git processes (but for 3-way merges): each earlier patch
    applied when it can, the last one asked. Raises ``Unsupported`` where git must decide.
    Each file's result is kept by (its diff, its input): the states of a scan differ in one
    file at a time, so every other file of every patch is a lookup."""
    files: dict[str, bytes | None] = {}

    def read(path: str) -> bytes | None:
        if path in files:
            return files[path]
        entry = entries.get(path)
        return contents.blob(entry.blob) if entry else None

    for k, patch in enumerate(patches):
        result: dict[str, bytes | None] | None = {}
        for f in patch.files:
            assert result is not None
            got = contents.apply_file(f, result.get(f.old_path or f.path, b"") if
                                      (f.old_path or f.path) in result else
                                      read(f.old_path or f.path))
            if got is None:
                result = None
                break
            result.update(got)
        if k == len(patches) - 1:
            return result is not None
        if result is not None:
            files.update(result)
    return True


def stack_applies(index: Index, entries: dict[str, Entry], patches: Sequence[Patch],
                  files: Sequence[Path]) -> bool:
    """Whether the last of ``patches`` applies on ``entries`` after the others (each applied
    when it can, left out when it cannot, as bump does). The common cases take one git process
    (everything applies exactly) or three."""
    index.set_entries(entries)
    if files:
        if index.apply_files(files):
            return True
        if len(files) > 1 and index.apply_files(files[:-1]):
            return applies(index, patches[-1], keep=False)
    for patch in patches[:-1]:
        applies(index, patch)
    return applies(index, patches[-1], keep=False)


State = frozenset[tuple[str, Entry]]


class Scan:
    """The states a patch meets along the range: at the old base and after each first-parent
    commit that changes its files (or those of the earlier patches it sits on), each decided at
    most once (reverts restore earlier states), in parallel batches, and only as far as a
    question needs: ``breaks`` walks forward to the first break and back to the permanent one."""

    def __init__(self, rng: UpstreamRange, stack: Sequence[SeriesPatch], target: int) -> None:
        self.repo = rng.repo
        self.patches = [stack[p].patch for p in relevant_stack(stack, target)]
        paths = sorted({path for p in self.patches for path in p.paths()})
        self.states: list[tuple[Oid, State]] = []
        self.verdicts: dict[State, bool] = {}
        self.batch = max(1, os.cpu_count() or 2)
        self.contents = rng.contents
        if not paths:
            return
        entries = rng.repo.entries_at(rng.old, paths)
        self.states.append((rng.old, frozenset(entries.items())))
        for raw in rng.repo.history.raw_changes(rng.spec, paths, first_parent=True):
            for change in raw.changes:
                if change.mode is None or change.blob is None:
                    entries.pop(change.path, None)
                else:
                    entries[change.path] = Entry(change.mode, change.blob)
            self.states.append((raw.commit, frozenset(entries.items())))

    @property
    def touching(self) -> list[Oid]:
        return [c for c, _ in self.states[1:]]

    def decide(self, positions: Iterable[int]) -> None:
        keys = [k for k in dict.fromkeys(self.states[i][1] for i in positions)
                if k not in self.verdicts]
        if keys:
            self.verdicts.update(zip(keys, _decide(self.contents, keys, self.patches)))

    def applies(self, i: int) -> bool:
        self.decide([i])
        return self.verdicts[self.states[i][1]]

    def breaks(self) -> tuple[Oid | None, Oid | None]:
        """(first_break, permanent_break): the first commit at which the patch stops applying,
        and the one after which it never applies again; None when it applies at the end (or
        never applied at all)."""
        n = len(self.states)
        if n < 2 or self.applies(n - 1):
            return None, None
        first: Oid | None = None
        for i in range(1, n, self.batch):
            self.decide(range(i - 1, min(n, i + self.batch)))
            first = next((self.states[j][0] for j in range(i, min(n, i + self.batch))
                          if self.applies(j - 1) and not self.applies(j)), None)
            if first is not None:
                break
        last_good = None
        for j in range(n - 1, -1, -self.batch):
            self.decide(range(max(0, j - self.batch + 1), j + 1))
            last_good = next((k for k in range(j, max(-1, j - self.batch), -1)
                              if self.applies(k)), None)
            if last_good is not None:
                break
        return first, self.states[last_good + 1][0] if last_good is not None else None


def _decide(contents: Contents, distinct: list[State], patches: list[Patch]) -> list[bool]:
    """Each state decided in Python where it can be (``python_decides``), by git otherwise (the
    patch files and scratch indexes written only then: most scans never need them)."""
    scratch = _Scratch(contents.repo, patches)

    def decide(item: tuple[int, State]) -> bool:
        number, key = item
        try:
            return python_decides(contents, dict(key), patches)
        except Unsupported:
            return scratch.decide(number, dict(key))

    try:
        workers = min(len(distinct), max(1, os.cpu_count() or 2))
        if workers <= 1:
            return [decide(item) for item in enumerate(distinct)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(decide, enumerate(distinct)))
    finally:
        scratch.close()


class _Scratch:
    """The patch files and per-worker indexes git decides with, made on first use."""

    def __init__(self, repo: Repo, patches: list[Patch]) -> None:
        self.repo, self.patches = repo, patches
        self._lock = threading.Lock()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._files: list[Path] = []

    def decide(self, number: int, entries: dict[str, Entry]) -> bool:
        root = self._root()
        index = self.repo.index_at(root / f"index-{number}")
        whole = self._files if len(self._files) == len(self.patches) else []
        return stack_applies(index, entries, self.patches, whole)

    def _root(self) -> Path:
        with self._lock:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="rebasectl-scan-")
                for number, patch in enumerate(self.patches):
                    if not patch.is_empty:
                        self._files.append(Path(self._tmp.name) / f"{number:04d}.patch")
                        self._files[-1].write_bytes(patch.diff)
            return Path(self._tmp.name)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()


# -- culprits --------------------------------------------------------------------------------------
TELLING_CHARS = 4  # a line tells something when it has this many non-punctuation characters
_NOISE = re.compile(rb"[\s()\[\]{}:,.;#'\"]")


def worth_blaming(line: bytes) -> bool:
    """Whether a line can name its author: at least ``TELLING_CHARS`` characters that are not
    blanks, brackets or punctuation (a ``):`` or a blank line was last touched by whoever
    touched anything near it). The culprit search asks blame only about such lines, and so do
    the report's interdiffs; the carried-lines engine's ``telling`` is this test less comment
    lines."""
    return len(_NOISE.sub(b"", line)) >= TELLING_CHARS


class Culprits:
    """The commits that changed given lines of one file of the patch, across the range."""

    def __init__(self, rng: UpstreamRange) -> None:
        self.rng = rng
        self._maps: dict[tuple[str, str | None, str], tuple[list[bytes], list[bytes],
                                                             LineMap]] = {}

    def for_regions(self, f: FileDiff, regions: Sequence[Region]) -> list[list[Oid]]:
        """Per region of one file: its culprits. One reverse and one forward ``git blame`` for
        all the regions together (a blame over a thousand commits costs the same for one line
        as for many)."""
        wanted = [self._needed_lines(f, range(r.base[0], r.base[1] + 1)) if r.base else {}
                  for r in regions]
        back = self._reverse(f.old_path or f.path,
                             {k: v[1] for w in wanted for k, v in w.items()})
        forward = self.rng.blamed(f.path, _lines_of([r.ours for r in regions]), reverse=False)
        out = []
        for region, lines in zip(regions, wanted):
            found = [c for line in sorted(lines) for c in back.get(line, [])]
            if region.ours is not None:
                a, b = region.ours
                found += [c for n in range(a, b + 1) if (c := forward.get(n)) is not None
                          and c in self.rng.parents]
            out.append(list(dict.fromkeys(found)))
        return out

    def needed_lines(self, f: FileDiff, lines: Iterable[int]) -> dict[int, list[Oid]]:
        """Per preimage line of ``f`` (a line the patch needed), the commits that changed or
        removed it (lines that survived to the new base are left out). The report asks this
        of each line of an interdiff hunk; safe to call from several threads."""
        wanted = self._needed_lines(f, lines)
        back = self._reverse(f.old_path or f.path, {k: v[1] for k, v in wanted.items()})
        return {wanted[k][0]: commits for k, commits in back.items()}

    def written_lines(self, f: FileDiff, lines: Iterable[int]) -> dict[int, list[Oid]]:
        """Per preimage line of ``f`` (a patch on the new base, or on patches on it), the commit
        of the range that wrote it: mapped onto the new base and blamed forward."""
        at_base = self._written_at_base(f, lines)
        blamed = self.rng.blamed(f.old_path or f.path, at_base, reverse=False)
        return {at_base[m]: [c] for m, c in blamed.items()
                if m in at_base and c in self.rng.parents}

    def expect(self, f: FileDiff, regions: Sequence[Region]) -> None:
        """Tell the range the lines ``for_regions`` will blame for these regions of ``f``, so
        that every patch's regions in one file are blamed in one process each way."""
        back = self._needed_lines(f, _lines_of([r.base for r in regions]))
        self.rng.expect_blame(f.old_path or f.path, back, reverse=True)
        self.rng.expect_blame(f.path, _lines_of([r.ours for r in regions]), reverse=False)

    def expect_needed(self, f: FileDiff, lines: Iterable[int]) -> None:
        """``expect`` for a later ``needed_lines(f, lines)``."""
        self.rng.expect_blame(f.old_path or f.path, self._needed_lines(f, lines), reverse=True)

    def expect_written(self, f: FileDiff, lines: Iterable[int]) -> None:
        """``expect`` for a later ``written_lines(f, lines)``."""
        self.rng.expect_blame(f.old_path or f.path, self._written_at_base(f, lines),
                              reverse=False)

    def _written_at_base(self, f: FileDiff, lines: Iterable[int]) -> dict[int, int]:
        """Preimage lines of ``f`` mapped onto the new base: {new base line: preimage line}."""
        _, _, mapping = self._onto(f, self.rng.new)
        return {m: n for n in lines if (m := mapping.get(n)) is not None}

    def _onto(self, f: FileDiff, rev: str) -> tuple[list[bytes], list[bytes], LineMap]:
        """``f``'s file at ``rev``, its preimage, and the map of preimage lines onto it (made
        once per file and revision: every region of the file asks)."""
        key = (f.old_path or f.path, f.old_blob, rev)
        if key not in self._maps:
            there = text_lines(self.rng.blob(f"{rev}:{key[0]}"))
            pre = text_lines(self.rng.blob(f.old_blob)) if f.old_blob else there
            self._maps[key] = (there, pre, LineMap(pre, there))
        return self._maps[key]

    def _needed_lines(self, f: FileDiff, lines: Iterable[int]) -> dict[int, tuple[int, bytes]]:
        """Preimage lines mapped onto the old base: {old line: (preimage line, text)} (lines
        the old base never had are left out: an earlier patch wrote them)."""
        old, _, mapping = self._onto(f, self.rng.old)
        wanted: dict[int, tuple[int, bytes]] = {}
        for n in lines:
            line = mapping.get(n)
            if line is not None:
                wanted[line] = (n, old[line - 1])
        return wanted

    def _reverse(self, path: str, wanted: dict[int, bytes]) -> dict[int, list[Oid]]:
        """Old line -> the commits that changed it: right after the last commit that still had
        it (``blame --reverse``), taken run by run of lines that went at the same commit."""
        if not wanted:
            return {}
        last = self.rng.blamed(path, wanted, reverse=True)
        gone = {line: c for line, c in last.items() if c != self.rng.new and line in wanted}
        out: dict[int, list[Oid]] = {}
        for keeper, group in _runs(gone):
            texts = [t for t in (wanted[n].strip() for n in group) if worth_blaming(t)]
            commits = self._successors(keeper, path, texts)
            for n in group:
                out[n] = commits
        return out

    def _successors(self, keeper: Oid, path: str, texts: list[bytes]) -> list[Oid]:
        """The commits right after ``keeper`` (the last that had the lines) that change
        ``path``: a non-merge child that changed the file; for a merge child, its other side's
        commits that touch the file. When there are several, those that removed the most of the
        lines' ``texts`` (a common line such as ``action='store_true',`` alone decides nothing
        when another commit removed the whole block); when none removed them, the child (the
        merge) itself."""
        found: list[Oid] = []
        children: list[Oid] = []
        for child in self.rng.children.get(keeper, []):
            parents = self.rng.parents.get(child, ())
            if len(parents) <= 1:
                if self.rng.changes(keeper, child, path):
                    found.append(child)
                    children.append(child)
                continue
            side = [c for c, _ in self.rng.side(keeper, child, path)]
            found += side or [child]
            children.append(child)
        found = list(dict.fromkeys(found))
        if len(found) <= 1:
            return found
        if not texts:  # brackets and blank lines: nothing to tell the side commits apart
            return children
        removed: dict[str, set[bytes]] = {}
        for child in children:
            removed.update(self.rng.side(keeper, child, path))
        score = {c: sum(1 for t in texts if t in removed.get(c, set())) for c in found}
        best = max(score.values())
        # none of them removed the text: the merge that lost the lines is what changed them
        return [c for c in found if score[c] == best] if best else children


def _lines_of(items: Iterable[tuple[int, int] | None]) -> set[int]:
    """Every line of the given spans (None: no lines)."""
    return {n for span in items if span is not None for n in range(span[0], span[1] + 1)}


def _runs(lines: dict[int, Oid]) -> list[tuple[Oid, list[int]]]:
    """Consecutive lines with the same value, as (value, lines)."""
    out: list[tuple[Oid, list[int]]] = []
    for n in sorted(lines):
        if out and out[-1][0] == lines[n] and out[-1][1][-1] == n - 1:
            out[-1][1].append(n)
        else:
            out.append((lines[n], [n]))
    return out


def attribute(rng: UpstreamRange, stack: Sequence[SeriesPatch], target: int,
              conflicts: Sequence[FileConflict], failed_ids: Iterable[str] = (),
              deps: SeriesLines | None = None, *, breaks: bool = True,
              finder: Culprits | None = None) -> Attribution:
    """Breaks and culprits of ``stack[target]`` across ``rng``, region by region of
    ``conflicts`` (all the patch's hunks when there are none: what touched a clean patch).
    Regions that need lines of a patch of ``failed_ids`` are that patch's, not upstream's.
    Without ``breaks`` only the regions' culprits (an apply's stop: no scan). ``finder``: the
    culprit finder several patches' attributions share (``expect``)."""
    walk = Scan(rng, stack, target)
    first, permanent = walk.breaks() if breaks else (None, None)
    at_old = walk.applies(0) if breaks and walk.states else True
    patch = stack[target].patch
    lines = deps or SeriesLines(stack[:target + 1])
    regions = _regions(finder or Culprits(rng), patch, conflicts,
                       lambda path, span: _caused(lines, target, path, span, set(failed_ids)))
    paths: dict[Oid, str] = {}
    for rc in regions:
        for commit in rc.commits:
            paths.setdefault(commit, rc.path)
    att = Attribution(first_break=rng.ref(first) if first else None,
                      permanent_break=rng.ref(permanent) if permanent else None,
                      regions=regions, touching=walk.touching, states=len(walk.verdicts),
                      applies_at_old=at_old)
    for commit in rng.order(paths):
        # a patch that fails at the old end already was not broken by the range, unless it
        # applied again inside it and broke at ``first``
        by_break = commit in rng.ancestors(first) if first else at_old
        att.culprits.append(Culprit(commit, rng.subject(commit), paths[commit], by_break))
    blockers = {pid for rc in regions for pid in rc.blocked_by}
    att.blocked_by = [sp.id for sp in stack if sp.id in blockers]
    return att


Caused = Callable[[str, "tuple[int, int] | None"], list[str]]


def _caused(lines: SeriesLines, target: int, path: str, span: tuple[int, int] | None,
            gone: set[str]) -> list[str]:
    """The failed earlier patches that wrote a region's preimage lines (or create its file:
    ``span`` None)."""
    if span is None:
        maker = lines.creator(target, path)
        return [maker] if maker in gone else []
    return [p for p in lines.owners(target, path, range(span[0], span[1] + 1)) if p in gone]


def blockers(lines: SeriesLines, target: int, conflicts: Sequence[FileConflict],
             gone: Iterable[str]) -> list[str]:
    """The patches of ``gone`` (failed or left out) that caused a region of ``stack[target]``'s
    ``conflicts``: the patch is *blocked* by them. Only a conflict's regions count: a patch
    whose hunks need such a patch's lines but merged (as ``git am -3`` merges it) is not blocked
    (bump, blame, apply's stop and the report's refusal ask this)."""
    left = set(gone)
    found = {pid for c in conflicts for r in c.regions
             for pid in _needs(c, r, lambda path, span: _caused(lines, target, path, span, left))}
    return [pid for pid in lines.ids if pid in found]


def _needs(c: FileConflict, r: Region, caused: Caused) -> list[str]:
    """The failed earlier patches one region needs: a *missing* file's creator, a content
    region's preimage lines' writers; never a modify/delete's (upstream deleted the file)."""
    if c.kind is ConflictKind.MISSING:
        return caused(c.path, None)
    if c.kind in (ConflictKind.MODIFY_DELETE, ConflictKind.DELETE_MODIFY) or not r.base:
        return []
    return caused(c.path, r.base)


def _regions(finder: Culprits, patch: Patch, conflicts: Sequence[FileConflict],
             caused: Caused) -> list[RegionCulprits]:
    """Each region with its culprits (a clean patch: every hunk is a region of its
    preimage); a modify/delete's culprit is the commit that deleted the file; a region an
    earlier failed patch caused has that patch instead."""
    if not conflicts:
        conflicts = [FileConflict(f.path, ConflictKind.CONTENT,
                                  tuple(Region(0, 0, None, h.old_span, (h.header,))
                                        for h in f.hunks)) for f in patch.files]
    out: list[RegionCulprits] = []
    for c in conflicts:
        f = patch.model.file(c.path) or _followed(finder.rng, patch, c.path)
        if f is None:
            continue
        if c.kind in WHOLE_FILE:
            commits = [x for x in (c.deleted_by,) if x] if c.kind is not \
                ConflictKind.DELETE_MODIFY else _changed(finder.rng, c.path)
            out += [RegionCulprits(c.path, r, commits, _needs(c, r, caused)) for r in c.regions]
            continue
        own = [_needs(c, r, caused) for r in c.regions]
        asked = [r for r, b in zip(c.regions, own) if not b]
        found = iter(finder.for_regions(f, asked) if asked else [])
        for region, blocked in zip(c.regions, own):
            out.append(RegionCulprits(c.path, region, [] if blocked else next(found), blocked))
    return out


def _changed(rng: UpstreamRange, path: str) -> list[Oid]:
    """The commits of the range that changed ``path`` (side branches of merges included, oldest
    first): a delete/modify's culprits, the changes the patch's deletion would throw away."""
    return [rc.commit for rc in rng.repo.history.raw_changes(rng.spec, [path],
                                                              first_parent=False)]


def _followed(rng: UpstreamRange, patch: Patch, path: str) -> FileDiff | None:
    """The patch's file that upstream renamed to ``path`` (a stop followed it there), as a
    change from its own path to ``path``: the lines it needed are read in its path at the old
    base, the regions' lines in ``path`` at the new one (hostile9 F11: such a conflict named
    no commit)."""
    renamed = rng.repo.history.renames(rng.old, rng.new)
    for f in patch.files:
        if f.old_path is not None and renamed.get(f.old_path) == path:
            return replace(f, new_path=path)
    return None


# -- where a commit landed ------------------------------------------------------------------------
def landing(rng: UpstreamRange, commit: Oid) -> Oid:
    """The first commit of the first-parent chain that contains ``commit`` (itself, or the merge
    that brought it in). Containment only grows along the chain, so a bisection is exact here."""
    chain = rng.repo.history.first_parent_chain(rng.spec)
    if not chain or not rng.repo.history.is_ancestor(commit, chain[-1]):
        return commit
    lo, hi = 0, len(chain) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if rng.repo.history.is_ancestor(commit, chain[mid]):
            hi = mid
        else:
            lo = mid + 1
    return chain[lo]

