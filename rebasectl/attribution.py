"""Which upstream commits broke a patch: ``first_break``, ``permanent_break`` and ``culprits``.

Breaks are found by a scan, not a bisection: upstream reverts and re-lands changes, so "applies"
is not monotonic along the first-parent chain and a binary search can land on either side of a
revert. The status of a patch can only change at a commit that changes one of its files (or the
files of the earlier patches it sits on), so we walk exactly those commits, and apply the patch,
on top of those earlier patches, to a sparse index holding just those files; states that repeat
(a revert restores the same blobs) are decided once. ``first_break`` is the first commit at which
the patch stops applying, ``permanent_break`` the one after which it never applies again.

Culprits are the commits that changed the lines the patch needs (the context and removed lines of
its failing hunks). ``git blame --reverse`` gives, for each such line of the old base, the last
commit in which it still existed; the commits after it that change the file changed the line. A
merge there is opened up: the commits of its other side that touch the file (side branches of
merges included), narrowed to those whose diff removes the line's text when any does. Lines that
are not in the old base at all come from an earlier patch of the series: the patch is then
``blocked_by`` that patch.

Absorption: a patch already contained in the new base (same patch-id as an upstream commit,
reverse-applies cleanly, or empty after a 3-way apply) is ``upstreamed``; ``absorbed_by`` names
the upstream commit.
"""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .gitio import Git
from .materialize import Conflict
from .patches import Patch, split_file_diff

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_INDEX = re.compile(rb"(?m)^index ([0-9a-f]+)\.\.([0-9a-f]+)")


@dataclass(frozen=True)
class CommitRef:
    commit: str
    subject: str

    def to_json(self) -> dict[str, str]:
        return {"commit": self.commit, "subject": self.subject}


@dataclass(frozen=True)
class Culprit:
    commit: str
    subject: str
    path: str

    def to_json(self) -> dict[str, str]:
        return {"commit": self.commit, "subject": self.subject, "path": self.path}


@dataclass
class Attribution:
    """Why one patch no longer applies between two upstream bases."""

    first_break: CommitRef | None = None
    permanent_break: CommitRef | None = None
    culprits: list[Culprit] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)  # ids of earlier patches it needs
    touching: list[str] = field(default_factory=list)  # first-parent commits touching its files
    states: int = 0  # distinct states applied during the scan (for the benchmark)


class UpstreamRange:
    """``old..new`` of an upstream and what every attribution in it shares (parents, subjects)."""

    def __init__(self, git: Git, old: str, new: str) -> None:
        self.git = git
        self.old = old
        self.new = new
        self.spec = f"{old}..{new}"
        self._parents: dict[str, tuple[str, ...]] | None = None
        self._children: dict[str, list[str]] | None = None
        self._subjects: dict[str, str] = {}
        self._file_log: dict[str, list[tuple[str, bytes]]] = {}
        self._between: dict[tuple[str, str, str], list[str]] = {}
        self._order: list[str] | None = None

    @property
    def parents(self) -> dict[str, tuple[str, ...]]:
        if self._parents is None:
            self._parents = self.git.parents_in(self.spec)
        return self._parents

    @property
    def children(self) -> dict[str, list[str]]:
        if self._children is None:
            kids: dict[str, list[str]] = {}
            for commit, parents in self.parents.items():
                for parent in parents:
                    kids.setdefault(parent, []).append(commit)
            self._children = kids
        return self._children

    def count(self) -> int:
        return len(self.parents)

    def subject(self, commit: str) -> str:
        if commit not in self._subjects:
            self.load_subjects([commit])
        return self._subjects[commit]

    def load_subjects(self, commits: Iterable[str]) -> None:
        missing = [c for c in dict.fromkeys(commits) if c not in self._subjects]
        for info in self.git.commits(missing):
            self._subjects[info.sha] = info.subject

    def ref(self, commit: str) -> CommitRef:
        return CommitRef(commit, self.subject(commit))

    def between(self, keeper: str, parent: str, path: str) -> list[str]:
        """Commits of ``keeper..parent`` that touch ``path`` (one side of a merge)."""
        key = (keeper, parent, path)
        if key not in self._between:
            self._between[key] = self.git.rev_list([f"{keeper}..{parent}"], paths=[path])
        return self._between[key]

    def order(self) -> list[str]:
        """The commits of the range, oldest first (topological)."""
        if self._order is None:
            self._order = self.git.rev_list([self.spec])
        return self._order

    def file_log(self, path: str) -> list[tuple[str, bytes]]:
        """(commit, diff of ``path``) for every non-merge commit of the range touching it."""
        return self.paths_log([path])

    def paths_log(self, paths: Sequence[str]) -> list[tuple[str, bytes]]:
        """(commit, diff limited to ``paths``), newest first, for the non-merge commits of the
        range touching them (asked of git once per set of paths)."""
        key = "\0".join(sorted(paths))
        if key not in self._file_log:
            self._file_log[key] = self.git.log_patches(self.spec, sorted(paths))
        return self._file_log[key]


# -- the patches a patch sits on ---------------------------------------------------------------
def patch_paths(patch: Patch) -> list[str]:
    return list(patch.file_diffs())


def relevant_stack(stack: Sequence[tuple[str, Patch]], target: int) -> list[int]:
    """Positions (ascending, ``target`` last) of the earlier patches that share files with the
    target, directly or through each other: only they can change whether it applies."""
    files = set(patch_paths(stack[target][1]))
    chosen = [target]
    for pos in range(target - 1, -1, -1):
        paths = set(patch_paths(stack[pos][1]))
        if paths & files:
            chosen.append(pos)
            files |= paths
    return sorted(chosen)


# -- breaks ------------------------------------------------------------------------------------
def _applies(git: Git, index: Path, patch: Patch, *, keep: bool = True) -> bool:
    """The rule of ``materialise``: exactly, else 3-way. With ``keep`` the index holds the result,
    and is left as it was when the patch does not apply (a snapshot only on that path)."""
    if patch.is_empty or git.applies_to_index(index, patch.diff, three_way=False):
        return True
    snapshot = git.write_tree(index) if keep else None
    if git.applies_to_index(index, patch.diff, three_way=True):
        return True
    if snapshot is not None:
        git.read_tree(index, snapshot)
    return False


def stack_applies(git: Git, index: Path, entries: dict[str, tuple[str, str]],
                  patches: Sequence[Patch], files: Sequence[Path] = ()) -> bool:
    """Whether the last of ``patches`` applies on ``entries`` after the others (each applied when
    it can, left out when it cannot, as ``bump`` does). ``files``: the same patches written out;
    then the common cases take one git process (everything applies exactly) or three (the ones
    below apply exactly, the last one is tried exactly and 3-way)."""
    git.index_from_entries(index, entries)
    if files:
        if git.applies_files(index, files):
            return True
        if len(files) > 1 and git.applies_files(index, files[:-1]):
            return _applies(git, index, patches[-1], keep=False)
    for patch in patches[:-1]:
        _applies(git, index, patch)
    return _applies(git, index, patches[-1], keep=False)


def scan(rng: UpstreamRange, stack: Sequence[tuple[str, Patch]], target: int,
         ) -> tuple[list[tuple[str, bool]], int]:
    """Whether ``stack[target]`` applies at the old base and at every first-parent commit of the
    range that changes its files or those of the patches below it; and how many distinct states
    were tried."""
    git = rng.git
    positions = relevant_stack(stack, target)
    patches = [stack[p][1] for p in positions]
    paths = sorted({path for p in patches for path in patch_paths(p)})
    if not paths:
        return [(rng.old, True)], 0
    blobs = git.blobs_at(rng.old, paths)
    states: list[tuple[str, frozenset[tuple[str, tuple[str, str]]]]] = [
        (rng.old, frozenset(blobs.items()))]
    for commit, changes in git.raw_changes(rng.spec, paths, first_parent=True):
        for path, entry in changes.items():
            if entry is None:
                blobs.pop(path, None)
            else:
                blobs[path] = entry
        states.append((commit, frozenset(blobs.items())))
    distinct = list(dict.fromkeys(key for _, key in states))
    with tempfile.TemporaryDirectory(prefix="rebasectl-scan-") as tmp:
        files: list[Path] = []
        for number, patch in enumerate(patches):
            if not patch.is_empty:
                files.append(Path(tmp) / f"{number:04d}.patch")
                files[-1].write_bytes(patch.diff)

        def decide(item: tuple[int, frozenset[tuple[str, tuple[str, str]]]]) -> bool:
            number, key = item
            return stack_applies(git, Path(tmp) / f"index-{number}", dict(key), patches,
                                 files if len(files) == len(patches) else ())

        workers = min(len(distinct), max(1, (os.cpu_count() or 2)))
        if workers > 1:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                verdicts = list(pool.map(decide, enumerate(distinct)))
        else:
            verdicts = [decide(item) for item in enumerate(distinct)]
    decided = dict(zip(distinct, verdicts))
    return [(commit, decided[key]) for commit, key in states], len(distinct)


def breaks(statuses: Sequence[tuple[str, bool]]) -> tuple[str | None, str | None]:
    """(first_break, permanent_break) from the scan: the first commit at which the patch stops
    applying, and the one after which it never applies again; None when it applies at the end
    (or never applied at all)."""
    if not statuses or statuses[-1][1]:
        return None, None
    first: str | None = None
    permanent: str | None = None
    for (_, before), (commit, now) in zip(statuses, statuses[1:]):
        if before and not now:
            if first is None:
                first = commit
            permanent = commit
    return first, permanent


def first_break(rng: UpstreamRange, stack: Sequence[tuple[str, Patch]], target: int) -> str | None:
    return breaks(scan(rng, stack, target)[0])[0]


def permanent_break(rng: UpstreamRange, stack: Sequence[tuple[str, Patch]],
                    target: int) -> str | None:
    return breaks(scan(rng, stack, target)[0])[1]


# -- culprits ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Hunk:
    path: str
    header: str
    start: int  # first preimage line (1-based)
    lines: tuple[str, ...]  # the preimage: context and removed lines, in order
    added: tuple[str, ...]


def hunks_of(patch: Patch) -> list[_Hunk]:
    result: list[_Hunk] = []
    for path, file_diff in patch.file_diffs().items():
        _, hunks = split_file_diff(file_diff)
        for raw in hunks:
            head, _, body = raw.partition(b"\n")
            m = _HUNK.match(head)
            if not m:
                continue
            pre: list[str] = []
            add: list[str] = []
            for ln in body.decode(errors="replace").split("\n"):
                if ln.startswith((" ", "-")):
                    pre.append(ln[1:])
                elif ln.startswith("+"):
                    add.append(ln[1:])
            result.append(_Hunk(path, head.decode(errors="replace"), int(m.group(1)),
                                tuple(pre), tuple(add)))
    return result


def _preimage_blob(patch: Patch, path: str) -> str | None:
    m = _INDEX.search(patch.file_diffs().get(path, b""))
    if not m or set(m.group(1)) == {ord("0")}:
        return None
    return m.group(1).decode()


def _removed_lines(diff: bytes) -> set[str]:
    return {ln[1:].decode(errors="replace").strip() for ln in diff.split(b"\n")
            if ln.startswith(b"-") and not ln.startswith(b"---")}


def _added_lines(diff: bytes) -> set[str]:
    return {ln[1:].decode(errors="replace").strip() for ln in diff.split(b"\n")
            if ln.startswith(b"+") and not ln.startswith(b"+++")}


def _meaningful(text: str) -> bool:
    return len(re.sub(r"[\s()\[\]{}:,.;#'\"]", "", text)) >= 4


def _map_lines(old_text: list[str], pre_text: list[str]) -> dict[int, int]:
    """Preimage line number -> line number in ``old_text``, for the lines the two share."""
    if old_text == pre_text:
        return {i: i for i in range(1, len(pre_text) + 1)}
    mapping: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(None, old_text, pre_text, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            mapping[block.b + k + 1] = block.a + k + 1
    return mapping


def culprits(rng: UpstreamRange, stack: Sequence[tuple[str, Patch]], target: int,
             conflicts: Sequence[Conflict], failed_ids: Iterable[str] = (),
             since: Sequence[str] = ()) -> tuple[list[Culprit], list[str]]:
    """The upstream commits that changed the lines ``stack[target]`` needs in its failing hunks
    (all hunks of a conflicting file that names none; all hunks when ``conflicts`` is empty),
    and the ids of earlier patches whose lines it needs (among ``failed_ids`` when given).

    Lines are followed from the old base and from each commit in ``since`` (the parent of the
    permanent break: after a revert + re-land the lines that exist again are new lines to
    blame, so the re-land is found as well as the first landing)."""
    git = rng.git
    _, patch = stack[target]
    failing = {c.path: set(c.hunks) for c in conflicts}
    hunks = [h for h in hunks_of(patch)
             if not failing or (h.path in failing and (not failing[h.path]
                                                       or h.header in failing[h.path]))]
    paths = sorted({h.path for h in hunks} | set(failing))
    starts = list(dict.fromkeys([rng.old, *since]))
    blobs = {start: git.blobs_at(start, paths) for start in starts}
    new_blobs = git.blobs_at(rng.new, paths)
    found: dict[str, str] = {}  # commit -> path
    needs_from_stack: dict[str, set[str]] = {}
    by_path: dict[str, list[_Hunk]] = {}
    for h in hunks:
        by_path.setdefault(h.path, []).append(h)
    for path in paths:
        if path not in blobs[rng.old] or path not in new_blobs:
            for commit in _file_level(rng, path, created=path not in blobs[rng.old]):
                found.setdefault(commit, path)
            continue
        pre_id = _preimage_blob(patch, path)
        pre_raw = git.cat_blob(pre_id) if pre_id else None
        for start in starts:
            if path not in blobs[start]:
                continue
            ref_text = (git.cat_blob(blobs[start][path][1]) or b"").decode(
                errors="replace").split("\n")
            pre_text = pre_raw.decode(errors="replace").split("\n") if pre_raw is not None \
                else ref_text
            to_ref = _map_lines(ref_text, pre_text)
            wanted: dict[int, str] = {}
            for h in by_path.get(path, []):
                numbered = list(enumerate(h.lines, start=h.start)) or \
                    [(h.start, pre_text[h.start - 1] if 0 < h.start <= len(pre_text) else ""),
                     (h.start + 1, pre_text[h.start] if h.start < len(pre_text) else "")]
                for number, text in numbered:
                    if number in to_ref:
                        wanted[to_ref[number]] = text
                    elif start == rng.old and _meaningful(text):
                        needs_from_stack.setdefault(path, set()).add(text.strip())
            written: list[str] = []
            if start == rng.old:
                written = _rewritten(rng, path, new_blobs[path][1], ref_text,
                                     by_path.get(path, []), to_ref)
                for commit in written:
                    found.setdefault(commit, path)
            last = git.blame_reverse(start, rng.new, path, _ranges(sorted(wanted)))
            gone = {line: commit for line, commit in last.items() if commit != rng.new}
            if not gone:
                continue
            removed_by = {c: _removed_lines(d) for c, d in rng.file_log(path)}
            for line, keeper in sorted(gone.items()):
                candidates, opened = _successors(rng, keeper, path, removed_by)
                if opened and written:
                    continue  # a merge's other side, known precisely from the forward blame
                text = wanted.get(line, "").strip()
                strong = [c for c in candidates if text and text in removed_by.get(c, set())]
                for commit in strong or candidates:
                    found.setdefault(commit, path)
    rng.load_subjects(found)
    result = [Culprit(c, rng.subject(c), found[c]) for c in _topo_order(rng, found)]
    blocked = _blockers(stack, target, needs_from_stack, set(failed_ids))
    return result, blocked


def _rewritten(rng: UpstreamRange, path: str, new_blob: str, old_text: list[str],
               hunks: Sequence[_Hunk], to_old: dict[int, int]) -> list[str]:
    """Commits that wrote what the new file now has where a hunk's lines were: the hunk's span,
    widened to the nearest old lines that survive on each side, mapped into the new file and
    forward-blamed on its lines that are not from the old base. That names the commit that
    replaced a needed line or inserted lines among them (side branches included, no guessing
    by content); a plain deletion leaves nothing there and is found by the reverse blame."""
    new_text = (rng.git.cat_blob(new_blob) or b"").decode(errors="replace").split("\n")
    old_to_new = _map_lines(new_text, old_text)
    kept = set(old_to_new.values())
    lines: list[int] = []
    for h in hunks:
        olds = [to_old[n] for n in range(h.start, h.start + len(h.lines)) if n in to_old]
        if not olds:
            continue
        lo, hi = min(olds), max(olds)
        while lo > 1 and lo not in old_to_new:
            lo -= 1
        while hi < len(old_text) and hi not in old_to_new:
            hi += 1
        first = old_to_new.get(lo, 1)
        last = old_to_new.get(hi, len(new_text))
        lines += [n for n in range(first, last + 1) if n not in kept and n <= len(new_text)]
    if not lines:
        return []
    blamed = rng.git.blame_forward(rng.old, rng.new, path, _ranges(sorted(set(lines))))
    return [c for c in dict.fromkeys(blamed.values()) if c in rng.parents]


def _ranges(lines: Sequence[int]) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    for line in lines:
        if line <= 0:
            continue
        if ranges and line == ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], line)
        else:
            ranges.append((line, line))
    return ranges


def _successors(rng: UpstreamRange, keeper: str, path: str,
                removed_by: dict[str, set[str]]) -> tuple[list[str], bool]:
    """The commits right after ``keeper`` (the last one that had a line) that change ``path``:
    a non-merge child itself; for a merge child, the commits of its other side that touch the
    file (and the merge itself when its own resolution changed it); and whether a merge was
    opened up."""
    result: list[str] = []
    opened = False
    for child in rng.children.get(keeper, []):
        parents = rng.parents.get(child, ())
        if len(parents) <= 1:
            if child in removed_by:
                result.append(child)
            continue
        opened = True
        side: list[str] = []
        for parent in parents:
            if parent == keeper:
                continue
            side += [c for c in rng.between(keeper, parent, path) if c in removed_by]
        result += side or [child]
    return list(dict.fromkeys(result)), opened


def _file_level(rng: UpstreamRange, path: str, *, created: bool) -> list[str]:
    """A file the patch creates that upstream added too, or one upstream deleted."""
    marker = b"--- /dev/null" if created else b"+++ /dev/null"
    return [c for c, d in rng.file_log(path) if marker in d][::-1]


def _topo_order(rng: UpstreamRange, commits: Iterable[str]) -> list[str]:
    wanted = set(commits)
    if not wanted:
        return []
    order = [c for c in rng.order() if c in wanted]
    return order + sorted(wanted - set(order))


def _blockers(stack: Sequence[tuple[str, Patch]], target: int, needs: dict[str, set[str]],
              failed: set[str]) -> list[str]:
    blocked: list[str] = []
    for pos in range(target):
        pid, patch = stack[pos]
        if failed and pid not in failed:
            continue
        diffs = patch.file_diffs()
        if any(needs.get(path, set()) & _added_lines(diffs[path]) for path in diffs):
            blocked.append(pid)
    return blocked


# -- absorption --------------------------------------------------------------------------------
def same_patch_id(rng: UpstreamRange, patch: Patch) -> str | None:
    """The upstream commit of the range whose change to the patch's files has its patch-id."""
    own = rng.git.patch_id(patch.diff)
    if own is None:
        return None
    return rng.git.patch_ids_of(rng.paths_log(patch_paths(patch))).get(own)


def absorbed_by(rng: UpstreamRange, patch: Patch) -> str | None:
    """The upstream commit of the range that holds ``patch``'s change: same patch-id (on the
    patch's files), else the one whose added lines cover most of the patch's."""
    if patch.is_empty:
        return None
    same = same_patch_id(rng, patch)
    if same is not None:
        return same
    wanted = {t for t in _added_lines(patch.diff) if _meaningful(t)} or _added_lines(patch.diff)
    best: tuple[int, str] | None = None
    for commit, diff in reversed(rng.paths_log(patch_paths(patch))):
        score = len(wanted & _added_lines(diff))  # oldest first: ties go to the one that landed it
        if score and (best is None or score > best[0]):
            best = (score, commit)
    return best[1] if best else None


def landing(rng: UpstreamRange, commit: str) -> str:
    """The first commit of the first-parent chain that contains ``commit`` (itself, or the merge
    that brought it in). Containment only grows along the chain, so a bisection is exact here."""
    chain = rng.git.rev_list([rng.spec], first_parent=True)
    lo, hi = 0, len(chain) - 1
    if not chain or not rng.git.is_ancestor(commit, chain[hi]):
        return commit
    while lo < hi:
        mid = (lo + hi) // 2
        if rng.git.is_ancestor(commit, chain[mid]):
            hi = mid
        else:
            lo = mid + 1
    return chain[lo]


def reverse_applies(git: Git, tree_commit: str, patch: Patch) -> bool:
    """Whether ``patch`` reverse-applies cleanly at ``tree_commit`` (its change is there)."""
    if patch.is_empty:
        return False
    paths = patch_paths(patch)
    with tempfile.TemporaryDirectory(prefix="rebasectl-rev-") as tmp:
        index = Path(tmp) / "index"
        git.index_from_entries(index, git.blobs_at(tree_commit, paths))
        return git.reverse_applies(index, patch.diff)


def attribute(rng: UpstreamRange, stack: Sequence[tuple[str, Patch]], target: int,
              conflicts: Sequence[Conflict], failed_ids: Iterable[str] = ()) -> Attribution:
    """Breaks and culprits of ``stack[target]`` across ``rng``."""
    statuses, tried = scan(rng, stack, target)
    first, permanent = breaks(statuses)
    since = [before for (before, _), (commit, _) in zip(statuses, statuses[1:])
             if commit == permanent and before != rng.old]
    found, blocked = culprits(rng, stack, target, conflicts, failed_ids, since)
    refs = [c for c in (first, permanent) if c]
    rng.load_subjects(refs)
    return Attribution(
        first_break=rng.ref(first) if first else None,
        permanent_break=rng.ref(permanent) if permanent else None,
        culprits=found,
        blocked_by=blocked,
        touching=[c for c, _ in statuses[1:]],
        states=tried,
    )
