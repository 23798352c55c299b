"""Which patch of a series created or last changed which files and lines: read from the patches
themselves, no git.

A series is replayed hunk by hunk on line *owners*: each line of each file the series touches is
owned by the patch that last wrote it (``None``: upstream's line, as the old base had it). Before
each patch, the owners of the lines it needs (its preimage) are kept, so "which earlier patch
wrote the lines this hunk or this conflict region needs" is a lookup. The replay trusts the hunk
numbers: the series applies exactly on its old base (it was imported from, or exported onto, that
base); a file is only known as far as its hunks reach, which is all a question ever asks about.

A patch whose trouble comes from an earlier patch that failed or was left out is *blocked* by it:
its conflict region needs lines that patch wrote, or it changes a file that patch creates.
``bump``, ``blame``, ``apply`` and ``status`` ask the same model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .diffs import FileDiff, Hunk
from .patches import Patch
from .series_patch import SeriesPatch

Owners = list[str | None]


class SeriesLines:
    """Owners of every line the series touches, before each of its patches."""

    def __init__(self, stack: Sequence[SeriesPatch]) -> None:
        self.ids = [sp.id for sp in stack]
        self.before: list[dict[str, Owners]] = []  # per position: path -> owners of its lines
        self.creators: list[dict[str, str]] = []  # per position: path -> the patch creating it
        owners: dict[str, Owners] = {}
        created: dict[str, str] = {}
        for sp in stack:
            self.before.append({f.old_path: list(owners.get(f.old_path, []))
                                for f in sp.files if f.old_path})
            self.creators.append(dict(created))
            for f in sp.files:
                _replay(owners, created, sp.id, f)

    def owners(self, pos: int, path: str, lines: Iterable[int]) -> list[str]:
        """Ids of the earlier patches that wrote these preimage lines of ``path`` (1-based),
        in series order."""
        have = self.before[pos].get(path, [])
        found = {have[n - 1] for n in lines if 0 < n <= len(have) and have[n - 1]}
        return [pid for pid in self.ids if pid in found]

    def creator(self, pos: int, path: str) -> str | None:
        """The earlier patch that creates ``path`` (the old base has no such file)."""
        return self.creators[pos].get(path)

    def hunk_needs(self, pos: int, f: FileDiff, hunks: Sequence[Hunk] | None = None) -> list[str]:
        """The earlier patches whose lines (or file) these hunks of ``f`` need."""
        path = f.old_path
        if path is None:
            return []
        maker = self.creator(pos, path)
        lines = [n for h in (f.hunks if hunks is None else hunks)
                 for n in range(h.old_span[0], h.old_span[1] + 1) if h.old_len]
        found = self.owners(pos, path, lines)
        return [pid for pid in self.ids if pid in found or pid == maker]

    def blockers(self, pos: int, patch: Patch, gone: Iterable[str]) -> list[str]:
        """The patches of ``gone`` (failed or left out) this patch needs."""
        out = set(gone)
        found = {pid for f in patch.files for pid in self.hunk_needs(pos, f) if pid in out}
        return [pid for pid in self.ids if pid in found]


def _replay(owners: dict[str, Owners], created: dict[str, str], pid: str, f: FileDiff) -> None:
    """One file's change on the owners: hunks from the bottom up, so numbers stay valid."""
    if f.old_path is None:
        new = f.new_path or ""
        owners[new] = [pid] * sum(h.counts[0] for h in f.hunks)
        created[new] = pid
        return
    have = owners.pop(f.old_path, [])
    maker = created.pop(f.old_path, None)
    if f.new_path is None:
        return
    for h in sorted(f.hunks, key=lambda h: h.old_start, reverse=True):
        start = h.old_start - 1 if h.old_len else h.old_start
        if len(have) < start + h.old_len:
            have.extend([None] * (start + h.old_len - len(have)))
        old = iter(have[start:start + h.old_len])
        segment: Owners = []
        for ln in h.lines:
            tag = ln[:1]
            if tag == b" ":
                segment.append(next(old, None))
            elif tag == b"-":
                next(old, None)
            elif tag == b"+":
                segment.append(pid)
        have[start:start + h.old_len] = segment
    owners[f.new_path] = have
    if maker is not None:
        created[f.new_path] = maker


__all__ = ["SeriesLines"]
