"""The conflict engine: what git's own 3-way merge says when a patch meets a tree.

One question, one engine: given a scratch index holding a tree and a patch, which files merge
and which conflict, and where. ``apply`` writes its answer into the work tree (markers, unmerged
index entries), ``bump`` into its artifacts, ``blame`` and the report read its regions, so they
all show the same conflicts with the same extents and the same labels.

How it decides, per file (a whole-patch ``git apply --3way`` is all or nothing: one file that
upstream deleted, and nothing applies):

* the file merges (``git apply --cached --3way`` of that file's diff succeeds): staged;
* it conflicts: git leaves stages 1 (the patch's preimage), 2 (upstream: the tree) and 3 (the
  patch's result); the marked-up file is ``git merge-file --diff3`` of those three blobs with the
  labels ``upstream <sha>``, ``patch preimage`` and ``patch <id>``, and each ``<<<<<<<`` block is
  a ``Region`` (its lines in the marked-up file, in upstream's file and in the preimage);
* the patch changes a file the tree no longer has: *modify/delete* (stages 1 and 3, as git
  leaves it), with the upstream commit that deleted it and, when rename detection finds one, the
  path it moved to;
* the patch creates a file the tree already has: *add/add* (stages 2 and 3, empty base);
* git cannot merge because the patch's preimage blob is unknown (a hand-written patch): the
  hunks that do not apply, as *no-base* regions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from .diffs import FileDiff, Hunk, text_lines
from .git import Entry, Index, Repo, Stages
from .patches import Patch

MARK_START, MARK_BASE, MARK_SEP, MARK_END = b"<<<<<<< ", b"||||||| ", b"=======", b">>>>>>> "


class ConflictKind(str, Enum):
    CONTENT = "content"
    MODIFY_DELETE = "modify/delete"  # the patch changes a file upstream deleted
    DELETE_MODIFY = "delete/modify"  # the patch deletes a file upstream changed
    ADD_ADD = "add/add"
    NO_BASE = "no-base"  # the patch's preimage is unknown: hunks that do not apply


@dataclass(frozen=True)
class Labels:
    upstream: str  # "upstream 3346fa8a2614"
    patch: str  # "patch mtp-rl"
    base: str = "patch preimage"

    def triple(self) -> tuple[str, str, str]:
        return self.upstream, self.base, self.patch


@dataclass(frozen=True)
class Region:
    """One conflict block. Lines are 1-based and inclusive; ``None`` where a side is empty."""

    start: int  # the ``<<<<<<<`` line in the marked-up file
    end: int  # the ``>>>>>>>`` line
    ours: tuple[int, int] | None  # upstream's lines (stage 2 file)
    base: tuple[int, int] | None  # the preimage's lines (stage 1 file): what the patch needed
    hunks: tuple[str, ...] = ()  # the patch's hunk headers that touch ``base``

    def to_json(self) -> dict[str, object]:
        return {"start": self.start, "end": self.end, "upstream_lines": _pair(self.ours),
                "preimage_lines": _pair(self.base), "hunks": list(self.hunks)}


def _pair(span: tuple[int, int] | None) -> list[int] | None:
    return list(span) if span else None


@dataclass
class FileConflict:
    path: str
    kind: ConflictKind
    regions: tuple[Region, ...] = ()
    content: bytes | None = None  # what the work tree gets: markers, or the patched file
    stages: dict[int, Entry] = field(default_factory=dict)
    deleted_by: str | None = None  # modify/delete: the upstream commit that removed the file
    moved_to: str | None = None  # ... and where rename detection found it

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "kind": self.kind.value,
                "regions": [r.to_json() for r in self.regions],
                "hunks": sorted({h for r in self.regions for h in r.hunks}),
                "deleted_by": self.deleted_by, "moved_to": self.moved_to}


@dataclass
class Merge:
    """A patch merged onto the tree in an index: conflicts (empty when it merged)."""

    conflicts: list[FileConflict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.conflicts


# -- the engine ------------------------------------------------------------------------------------
class Engine:
    """Merges patches onto trees held in scratch indexes of ``repo``."""

    def __init__(self, repo: Repo, *, deleted_by: Callable[[str], str | None] | None = None,
                 moved: Callable[[str], str | None] | None = None) -> None:
        self.repo = repo
        self.deleted_by = deleted_by or (lambda path: None)
        self.moved = moved or (lambda path: None)

    def merge(self, index: Index, patch: Patch, labels: Labels) -> Merge:
        """Apply ``patch`` to ``index``: exactly, else 3-way, else file by file. The index ends
        with every merged file staged and, for each conflict, its unmerged stages."""
        if patch.is_empty or index.apply(patch.diff).ok:
            return Merge()
        snapshot = index.write_tree()
        if index.apply(patch.diff, three_way=True).ok:
            return Merge()
        index.read_tree(snapshot)
        present = index.entries([p for f in patch.files for p in (f.old_path, f.new_path) if p])
        merge = Merge()
        for f in patch.files:
            conflict = self._file(index, f, present, labels)
            if conflict is not None:
                merge.conflicts.append(conflict)
        if merge.conflicts:
            index.update({c.path: {0: None, **c.stages} for c in merge.conflicts})
        return merge

    def _file(self, index: Index, f: FileDiff, present: dict[str, Entry],
              labels: Labels) -> FileConflict | None:
        if f.old_path is not None and f.old_path not in present:
            return self._modify_delete(f)
        if f.old_path is None and f.new_path in present:
            return self._add_add(index, f, present[f.path], labels)
        one = f.render()
        if index.apply(one).ok or index.apply(one, three_way=True).ok:
            return None
        if f.new_path is None:
            return self._delete_modify(index, f, present[f.path])
        stages = index.unmerged().get(f.path)
        if stages is None or stages.ours is None:
            return self._no_base(index, f)
        return self._content(f, stages, labels)

    # -- kinds ---------------------------------------------------------------------------------
    def _content(self, f: FileDiff, stages: Stages, labels: Labels) -> FileConflict:
        base = self._blob(stages.base)
        ours, theirs = self._blob(stages.ours), self._blob(stages.theirs)
        text, _ = self.repo.merge_file(ours, base, theirs, labels.triple())
        regions = find_regions(text, text_lines(ours), text_lines(base), f.hunks)
        return FileConflict(f.path, ConflictKind.CONTENT, tuple(regions), text,
                            dict(stages.entries))

    def _modify_delete(self, f: FileDiff) -> FileConflict:
        """Stage 1: the preimage, stage 3: the patch's result (written to the work tree, as git
        does), no stage 2: upstream has no such file."""
        path = f.old_path or f.path
        stages: dict[int, Entry] = {}
        content: bytes | None = None
        if f.old_blob and self.repo.objects.blob(f.old_blob) is not None:
            stages[1] = Entry(f.old_mode or "100644", f.old_blob)
            result = self._patched(f, stages[1])
            if result is not None:
                stages[3] = result
                content = self.repo.objects.blob(result.blob)
        region = Region(0, 0, None, (1, max(1, sum(h.old_len for h in f.hunks))),
                        tuple(h.header for h in f.hunks))
        return FileConflict(path, ConflictKind.MODIFY_DELETE, (region,), content, stages,
                            self.deleted_by(path), self.moved(path))

    def _patched(self, f: FileDiff, pre: Entry) -> Entry | None:
        """The file the patch makes from its preimage (git apply on a one-entry index)."""
        if f.new_path is None:
            return None
        with self.repo.index() as scratch:
            scratch.set_entries({f.old_path or f.path: pre})
            if not scratch.apply(f.render()).ok:
                return None
            return scratch.entries([f.new_path]).get(f.new_path)

    def _delete_modify(self, index: Index, f: FileDiff, ours: Entry) -> FileConflict:
        """The patch deletes a file upstream changed: stage 1 the preimage, stage 2 upstream's
        file (left in the work tree), no stage 3."""
        stages = {2: ours}
        if f.old_blob and self.repo.objects.blob(f.old_blob) is not None:
            stages[1] = Entry(f.old_mode or ours.mode, f.old_blob)
        return FileConflict(f.path, ConflictKind.DELETE_MODIFY, (), self._blob(ours), stages)

    def _add_add(self, index: Index, f: FileDiff, ours: Entry, labels: Labels) -> FileConflict:
        theirs = b"".join(ln[1:] + b"\n" for h in f.hunks for ln in h.lines if ln[:1] == b"+")
        ours_data = self._blob(ours)
        if ours_data == theirs:
            return FileConflict(f.path, ConflictKind.ADD_ADD, (), theirs, {0: ours})
        text, _ = self.repo.merge_file(ours_data, b"", theirs, labels.triple())
        stages = {2: ours, 3: Entry(f.new_mode or "100644", self.repo.hash_blob(theirs))}
        regions = find_regions(text, text_lines(ours_data), [], f.hunks)
        return FileConflict(f.path, ConflictKind.ADD_ADD, tuple(regions), text, stages)

    def _no_base(self, index: Index, f: FileDiff) -> FileConflict:
        """Without the preimage git cannot merge: name the hunks that do not apply (each tried on
        its own against the tree)."""
        bad = [h for h in f.hunks if not index.apply(f.render([h]), check=True).ok] or \
            list(f.hunks)
        regions = tuple(Region(0, 0, None, h.old_span, (h.header,)) for h in bad)
        present = index.entries([f.path]).get(f.path)
        return FileConflict(f.path, ConflictKind.NO_BASE, regions, None,
                            {2: present} if present else {})

    def _blob(self, entry: Entry | None) -> bytes:
        if entry is None:
            return b""
        return self.repo.objects.blob(entry.blob) or b""


# -- regions ---------------------------------------------------------------------------------------
def find_regions(text: bytes, ours: list[bytes], base: list[bytes],
                 hunks: tuple[Hunk, ...]) -> list[Region]:
    """The ``<<<<<<<`` blocks of a ``merge-file --diff3`` output, each located in upstream's file
    and in the preimage (blocks appear in file order, so each is searched after the last)."""
    regions: list[Region] = []
    at_ours = at_base = 0
    for start, end, ours_part, base_part in _blocks(text_lines(text)):
        ours_span, at_ours = _locate(ours, ours_part, at_ours)
        base_span, at_base = _locate(base, base_part, at_base)
        touching = tuple(h.header for h in hunks if base_span and _overlaps(h.old_span, base_span))
        regions.append(Region(start, end, ours_span, base_span, touching))
    return regions


def _blocks(lines: list[bytes]) -> list[tuple[int, int, list[bytes], list[bytes]]]:
    """(start, end, upstream lines, preimage lines) per conflict block (1-based lines)."""
    out = []
    i = 0
    while i < len(lines):
        if not lines[i].startswith(MARK_START):
            i += 1
            continue
        start, part = i, "ours"
        sections: dict[str, list[bytes]] = {"ours": [], "base": [], "theirs": []}
        i += 1
        while i < len(lines) and not lines[i].startswith(MARK_END):
            if lines[i].startswith(MARK_BASE):
                part = "base"
            elif lines[i] == MARK_SEP:
                part = "theirs"
            else:
                sections[part].append(lines[i])
            i += 1
        out.append((start + 1, i + 1, sections["ours"], sections["base"]))
        i += 1
    return out


def _locate(lines: list[bytes], block: list[bytes], after: int) -> tuple[tuple[int, int] | None,
                                                                          int]:
    if not block:
        return None, after
    for k in range(after, len(lines) - len(block) + 1):
        if lines[k: k + len(block)] == block:
            return (k + 1, k + len(block)), k + len(block)
    return None, after


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def kinds_summary(conflicts: list[FileConflict]) -> str:
    return ", ".join(f"{c.path} ({c.kind.value})" for c in conflicts)


__all__ = ["ConflictKind", "Engine", "FileConflict", "Labels", "Merge", "Region",
           "find_regions", "kinds_summary"]
