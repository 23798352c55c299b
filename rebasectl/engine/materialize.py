"""Series -> one commit per patch on a base, without a work tree, in a constant number of git
processes.

The base's tree is listed once (``ls-tree -r``) into a Python tree state; each patch is applied
to it in Python the way ``git apply`` would (rebasectl/applier.py: exactly, with git's offsets and
no fuzz; then, when allowed, 3-way per file with ``git merge-file``); every commit — the patch's
own author and date as author *and* committer — goes into one ``git fast-import`` stream, so the
same series on the same base always gives the same commit shas and N patches cost a handful of
processes, not 3N. Where Python cannot answer as git would (a rename, a binary, a conflict to
explain), that patch goes through git: a scratch index holding the state, ``git apply --cached``
and the conflict engine, whose result is read back into the state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..git import Entry, Identity, Index, Repo
from ..git.fastimport import Change
from ..infra.errors import GitError
from ..infra.faults import boundary
from ..model import diffs
from ..model.ids import Oid
from ..model.patches import ALLOWED_MODES, Mode, Patch, rfc2822_to_raw
from ..model.series_patch import AboutPatch, SeriesPatch
from ..model.status import Applied
from .applier import NotExact, Unsupported, apply_file, apply_patch
from .conflicts import Engine, FileConflict, Labels
from .resolutions import Memory, blob_sha

StopStages = dict[str, dict[int, Entry | None]]


def stop_stages(index: Index, touched: Sequence[str],
                conflicts: Sequence[FileConflict]) -> StopStages:
    """What a conflicting merge left in ``index`` for the paths it touched: a conflict's
    unmerged stages, a merged file's entry, None for a file the patch removed (one
    ``ls-files``). Installed in the work tree's index, it is that merge made again, without
    making it again."""
    by_path = {c.path: c for c in conflicts}
    rest = [p for p in dict.fromkeys(touched) if p not in by_path]
    merged = index.entries(rest) if rest else {}
    stages: StopStages = {p: {0: merged.get(p)} for p in rest}
    stages.update({p: {0: None, **c.stages} for p, c in by_path.items()})
    return stages


@dataclass
class Step(AboutPatch):
    """What became of one patch (the patch held, not copied): its commit, or why there is
    none."""

    index: int  # 1-based position in the series
    patch: SeriesPatch
    status: Applied
    commit: Oid | None
    parent: Oid | None = None  # the commit it was applied on
    conflicts: tuple[FileConflict, ...] = ()
    followed: dict[str, str] = field(default_factory=dict)  # upstream renames followed
    # a stop: what its merge left in the index for each path it touched (stages as
    # ``Index.update`` takes them), for the work tree's index; None when not worked out
    staged: StopStages | None = None


@dataclass
class Materialised:
    base: Oid
    steps: list[Step] = field(default_factory=list)

    @property
    def tip(self) -> Oid:
        commits = [s.commit for s in self.steps if s.commit]
        return commits[-1] if commits else self.base

    @property
    def ok(self) -> bool:
        return all(s.status is not Applied.CONFLICT for s in self.steps)

    def first_conflict(self) -> Step | None:
        return next((s for s in self.steps if s.status is Applied.CONFLICT), None)


def identity_of(patch: Patch) -> Identity:
    return Identity(patch.author_name, patch.author_email, rfc2822_to_raw(patch.date))


def commit_patch(repo: Repo, tree: str, parent: str, patch: Patch) -> Oid:
    return repo.commit_tree(tree, [parent], patch.message, identity_of(patch))


OnStep = Callable[[Step], None]
# Given the index holding a conflict (unmerged stages) and the conflicts: resolve them all in the
# index (stage 0) and say True, or leave the index alone and say False (bump's rerere replay).
Resolver = Callable[[Index, list[FileConflict]], bool]


@dataclass
class Item:
    """One file of the tree state: its mode and its blob (sha), or its content not yet written."""

    mode: str
    blob: str | None = None
    data: bytes | None = None


class Postimages:
    """The blobs ``git apply --3way`` would have written so far in this run. Before it merges a
    file, git writes the file's postimage (the patch applied to its preimage blob) into the
    object store, clean apply or not; so when a later patch's preimage is an earlier patch's
    postimage on the series' own base (a patch on lines an earlier one wrote), git finds it and
    merges, even in a repository that never held the series on that base. The Python path
    writes nothing, so it keeps the recipe (postimage id -> preimage id and file diff) and
    rebuilds such a blob when asked, checked against its id: the answer does not depend on
    which blobs earlier commands happened to leave in the repository."""

    KEPT = 8  # rebuilt blobs kept: a chain asked again is rebuilt, memory stays bounded

    def __init__(self) -> None:
        self.recipes: dict[str, tuple[str, diffs.FileDiff]] = {}
        self.made: OrderedDict[str, bytes] = OrderedDict()

    def note(self, patch: Patch) -> None:
        """A patch applied 3-way: the postimages git would have written for its files."""
        for f in patch.files:  # a created file's recipe has no preimage ("")
            if f.new_blob and f.new_path is not None and not f.binary:
                self.recipes.setdefault(f.new_blob, (f.old_blob or "", f))

    def rebuild(self, sha: str, read: Callable[[str], bytes | None]) -> bytes | None:
        """The blob ``sha`` (an abbreviated id too) from its recipes: back along the chain of
        postimages to a preimage ``read`` (the repository) or the cache holds, then forward,
        each step checked against its id; None where the chain breaks. A loop, not recursion:
        a long series on one file is a long chain."""
        chain, data = self._chain(sha, read)
        if not chain and data is None:
            return None
        for want, f in reversed(chain):
            try:
                post = apply_file(data, f)
            except (NotExact, Unsupported):
                return None
            if post is None or not blob_sha(post).startswith(want):
                return None
            data = post
            self.made[want] = post
            while len(self.made) > self.KEPT:
                self.made.popitem(last=False)
        return data

    def _chain(self, sha: str, read: Callable[[str], bytes | None]
               ) -> tuple[list[tuple[str, diffs.FileDiff]], bytes | None]:
        """The recipes from ``sha`` back to a known preimage (newest first), and that preimage
        (None for a file the first recipe creates); ([], None) when there is no such chain."""
        chain: list[tuple[str, diffs.FileDiff]] = []
        want, seen = sha, set()
        while want not in self.made:
            key = self._recipe_for(want)
            if key is None or key in seen:
                return [], None
            seen.add(key)
            old, f = self.recipes[key]
            chain.append((want, f))
            if not old.strip("0"):
                return chain, None  # created by that patch: no preimage
            found = read(old)
            if found is not None:
                return chain, found
            want = old
        self.made.move_to_end(want)
        return chain, self.made[want]

    def _recipe_for(self, sha: str) -> str | None:
        """The recipe whose postimage id is ``sha``, where either may be abbreviated (index
        lines of hand-made patches are): the only one that matches, else None."""
        if sha in self.recipes:
            return sha
        found = [k for k in self.recipes if len(sha) >= 7 and len(k) >= 7
                 and (k.startswith(sha) or sha.startswith(k))]
        return found[0] if len(found) == 1 else None


class TreeState:
    """The tree of the commit being built on, as path -> Item. Blobs are read when needed
    through the repository's persistent reader and not kept: a long series touches thousands of
    files, and holding each base version would hold the whole tree."""

    def __init__(self, repo: Repo, base: str) -> None:
        self.repo = repo
        self.items = {p: Item(e.mode, e.blob) for p, e in repo.tree_entries(base).items()}
        self.postimages = Postimages()

    def read(self, path: str) -> bytes | None:
        """A file's content; None only when the state has no such file. A file the tree lists
        whose blob cannot be read is an error, never "absent" (hostile9 F4: objects looked for
        elsewhere made a stop without its conflict, and continue committed the patch without
        that file)."""
        item = self.items.get(path)
        if item is None:
            return None
        if item.data is not None:
            return item.data
        data = self.blob(item.blob or "")
        if data is None and item.mode in ALLOWED_MODES:
            raise GitError(f"{path}: its blob {item.blob} is not in {self.repo.path}, whose "
                           "tree names it (a damaged repository, or its objects looked for "
                           "elsewhere)")
        return data

    def blob(self, sha: str) -> bytes | None:
        """From the repository, else a postimage an earlier 3-way apply would have written."""
        found = self.repo.objects.blob(sha)
        return found if found is not None or not sha else \
            self.postimages.rebuild(sha, self.repo.objects.blob)

    def provide(self, patch: Patch) -> None:
        """Write the preimages of ``patch`` that only this run's postimages hold, before git
        applies it 3-way (as git would have them from its own earlier applies)."""
        missing = [f.old_blob for f in patch.files if f.old_blob and f.old_blob.strip("0")
                   and self.repo.objects.blob(f.old_blob) is None]
        made = [self.postimages.rebuild(sha, self.repo.objects.blob) for sha in missing]
        self.repo.hash_blobs([data for data in made if data is not None])

    def blob_of(self, path: str) -> str | None:
        """The blob id a path has in this state (computed for contents not yet written)."""
        item = self.items.get(path)
        if item is None:
            return None
        return item.blob if item.blob is not None else blob_sha(item.data or b"")

    def entries(self) -> dict[str, Entry]:
        """Every file with a blob sha (contents computed in Python are written first)."""
        pending = [(p, i) for p, i in self.items.items() if i.blob is None]
        shas = self.repo.hash_blobs([i.data or b"" for _, i in pending])
        for (_, item), sha in zip(pending, shas):
            item.blob = sha
        return {p: Entry(i.mode, i.blob or "") for p, i in self.items.items()}

    def take(self, index: Index, paths: Sequence[str]) -> list[Change]:
        """The index's stage-0 entries of ``paths`` back into the state (a patch git applied)."""
        found = index.entries(list(paths))
        changes = []
        for path in paths:
            entry = found.get(path)
            if entry is None:
                if self.items.pop(path, None) is not None:
                    changes.append(Change(path))
            elif self.items.get(path) != Item(entry.mode, entry.blob):
                self.items[path] = Item(entry.mode, entry.blob)
                changes.append(Change(path, entry.mode, blob=entry.blob))
        return changes


class Materializer:
    """Builds commits for patches on a base in ``repo``."""

    def __init__(self, repo: Repo, labels: Callable[[str], Labels] | None = None,
                 engine: Engine | None = None, resolver: Resolver | None = None,
                 memory: Memory | None = None,
                 explain: Callable[[str], bool] | None = None) -> None:
        self.repo = repo
        self.engine = engine or Engine(repo)
        # which patches' conflicts are worked out (regions, markers); the others are only
        # known to conflict (blame asks about one patch: the ones before it just need a verdict)
        self.explain = explain or (lambda pid: True)
        self.labels = labels or (lambda pid: Labels("upstream", f"patch {pid}"))
        self.resolver = resolver
        self.memory = memory

    def run(self, base: Oid, patches: Sequence[SeriesPatch], *, three_way: bool = True,
            keep_going: bool = False, start_index: int = 1,
            on_step: OnStep | None = None, numbers: Sequence[int] | None = None) -> Materialised:
        """Apply ``patches`` in order on ``base``. Stops at the first conflict unless
        ``keep_going``: then a failing patch is left out and the next go on the last good one.
        Steps are numbered from ``start_index``, or by ``numbers`` (part of a series)."""
        result = Materialised(base)
        state = TreeState(self.repo, base)
        stream = self.repo.fast_import()
        marks: list[int | None] = []
        parent: str | int = base
        try:
            for offset, sp in enumerate(patches):
                number = numbers[offset] if numbers else start_index + offset
                step, changes = self._step(state, number, sp, three_way)
                mark = None
                if step.status is not Applied.CONFLICT:
                    patch = sp.patch
                    mark = stream.commit(parent, identity_of(patch), patch.message, changes)
                    parent = mark
                marks.append(mark)
                result.steps.append(step)
                if on_step is not None:
                    on_step(step)
                if mark is None and not keep_going:
                    break
        except BaseException:
            stream.abort()
            raise
        shas = stream.close()
        self._fill(result, marks, shas, base)
        return result

    @staticmethod
    def _fill(result: Materialised, marks: list[int | None], shas: dict[int, Oid],
              base: Oid) -> None:
        parent = base
        for step, mark in zip(result.steps, marks):
            step.parent = parent
            if mark is not None:
                step.commit = shas[mark]
                parent = step.commit
                boundary("commit")

    def _step(self, state: TreeState, number: int, sp: SeriesPatch,
              three_way: bool) -> tuple[Step, list[Change]]:
        def step(status: Applied, conflicts: tuple[FileConflict, ...] = ()) -> Step:
            return Step(number, sp, status, None, conflicts=conflicts)

        pid, patch = sp.id, sp.patch
        if patch.is_empty:
            return step(Applied.EMPTY), []
        followed: dict[str, str] = {}
        staged: StopStages = {}
        if three_way:
            state.postimages.note(patch)
        try:
            changes, status = self._python(state, patch, three_way)
        except (Unsupported, NotExact) as exc:
            # Python's NotExact in 3-way mode is git's answer already: the whole patch neither
            # applies nor merges, so git is only asked to explain it
            known = three_way and isinstance(exc, NotExact)
            changes, status, conflicts = self._git(state, pid, patch, three_way,
                                                   (followed, staged), known)
            if status is Applied.CONFLICT:
                done = step(status, conflicts)
                done.followed, done.staged = followed, (staged or None)
                return done, []
        if not changes and status is not Applied.RERERE:
            status = Applied.NOOP
        done = step(status)
        done.followed = followed
        return done, changes

    def _python(self, state: TreeState, patch: Patch,
                three_way: bool) -> tuple[list[Change], Applied]:
        """Exactly, else (when allowed) 3-way per file; NotExact when it conflicts."""
        def exact_only(ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
            return None

        status = Applied.CLEAN
        result = apply_patch(state.read, patch.files, state.blob, exact_only)
        if result is None and three_way:
            status = Applied.MERGED
            result = apply_patch(state.read, patch.files, state.blob, self._merge)
        if result is None:
            raise NotExact(patch.subject)
        return self._record(state, patch, result), status

    def _merge(self, ours: bytes, base: bytes, theirs: bytes) -> bytes | None:
        text, conflicts = self.repo.merge_file(ours, base, theirs, ("ours", "base", "theirs"))
        return None if conflicts else text

    @staticmethod
    def _record(state: TreeState, patch: Patch, result: dict[str, bytes | None]) -> list[Change]:
        changes = []
        for f in patch.files:
            path, data = f.path, result[f.path]
            old = state.items.get(f.old_path or path)
            if f.old_path and f.old_path != path:
                state.items.pop(f.old_path, None)
                changes.append(Change(f.old_path))
            if data is None:
                if state.items.pop(path, None) is not None:
                    changes.append(Change(path))
                continue
            mode = f.new_mode or (old.mode if old else Mode.REGULAR)
            if old is not None and old.mode == mode and state.read(path) == data:
                continue
            state.items[path] = Item(mode, None, data)
            changes.append(Change(path, mode, data=data))
        return changes

    def _git(self, state: TreeState, pid: str, patch: Patch, three_way: bool,
             found: tuple[dict[str, str], StopStages], known: bool = False
             ) -> tuple[list[Change], Applied, tuple[FileConflict, ...]]:
        """The patch through git: exactly, else the conflict engine (and its resolver). In
        exact mode a patch that only merges 3-way is a conflict with no region. ``found``
        gets the renames followed (old -> new path) and, at a 3-way stop, ``stop_stages``.
        ``known``: the whole patch is known not to apply nor merge (git is not asked
        again)."""
        followed, staged = found
        recorded = self.memory.find(patch.diff, state.blob_of) if three_way and \
            self.memory else None
        if known and recorded is None and not self.explain(pid):
            return [], Applied.CONFLICT, ()  # Python's verdict stands and nobody asks why
        if three_way:
            state.provide(patch)
        with self.repo.index() as index:
            index.set_entries(state.entries())
            if not known and index.apply(patch.diff).ok:
                return state.take(index, patch.paths()), Applied.CLEAN, ()
            if recorded is not None and index.apply(recorded).ok:
                paths = dict.fromkeys([*patch.paths(), *diffs.parse(recorded).paths()])
                return state.take(index, list(paths)), Applied.RERERE, ()
            if not self.explain(pid):
                if three_way and not known and index.apply(patch.diff, three_way=True).ok:
                    return state.take(index, patch.paths()), Applied.MERGED, ()
                return [], Applied.CONFLICT, ()
            merge = self.engine.merge(index, patch, self.labels(pid), tried=known)
            followed.update(merge.followed)
            touched = [*patch.paths(), *merge.followed.values()]
            if not three_way:
                return [], Applied.CONFLICT, tuple(merge.conflicts)
            if merge.ok:
                return state.take(index, touched), Applied.MERGED, ()
            if self.resolver is not None and self.resolver(index, merge.conflicts):
                return state.take(index, touched), Applied.RERERE, ()
            staged.update(stop_stages(index, touched, merge.conflicts))
            return [], Applied.CONFLICT, tuple(merge.conflicts)
