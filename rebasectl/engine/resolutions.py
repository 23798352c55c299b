"""Resolutions remembered per patch, so a conflict met again resolves itself.

git's rerere remembers textual conflict hunks, and rebasectl keeps it on. But the resolution of a
patch is often more than its conflict hunks: a modify/delete resolved by deleting the file and
carrying the change into the file where upstream moved the code (compat at the June bump) has no
conflict text at all, and touches a file the patch never named. So every resolution ``continue``
commits is also recorded whole: the patch (by the sha1 of its diff), the state it met (the blob
of each path the patch or its resolution touches, at the parent), and the resolved change. When
the same patch meets the same state again — at the next ``apply --base`` or ``bump`` onto that
upstream — the recorded change is applied instead of stopping.

Stored as one JSON file per resolution under ``.rebasectl/resolutions/`` (named by the patch's
sha1 and the state's), next to the mirror whose ``rr-cache`` holds rerere's half. Each record
also names the series id and rerere's ids of the conflicts it resolved, so that ``rebasectl
forget ID`` takes back a wrong resolution whole (git's ``rerere forget`` needs the conflict in
the work tree, and a replayed resolution never stops there).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..git import Repo
from ..infra.fsutil import atomic_write

BlobOf = Callable[[str], str | None]  # a path's blob sha in the state at hand (None: absent)


def blob_sha(data: bytes) -> str:
    """git's blob id of ``data`` (no process)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Resolution:
    patch: str  # sha1 of the original patch's diff
    state: dict[str, str | None]  # path -> blob at the parent it was resolved on
    diff: bytes  # the resolved change (parent -> resolution), canonical

    @property
    def key(self) -> str:
        text = json.dumps(sorted(self.state.items()), separators=(",", ":")).encode()
        return f"{self.patch[:20]}-{hashlib.sha1(text).hexdigest()[:20]}"


def patch_key(diff: bytes) -> str:
    return hashlib.sha1(diff).hexdigest()


class Memory:
    """The resolutions recorded in one checkout's ``.rebasectl/resolutions/``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def record(self, diff: bytes, state: Mapping[str, str | None], resolved: bytes, *,
               patch_id: str = "", rerere: list[str] | None = None) -> None:
        res = Resolution(patch_key(diff), dict(state), resolved)
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / f"{res.key}.json"
        try:  # a replay records again: rerere's ids of the first recording stay
            before = json.loads(target.read_text(encoding="utf-8", errors="surrogateescape"))
            kept = [i for i in before.get("rerere", []) if isinstance(i, str)]
        except (OSError, ValueError, AttributeError):
            kept = []
        data = {"patch": res.patch, "state": res.state, "id": patch_id,
                "rerere": list(dict.fromkeys([*kept, *(rerere or [])])),
                "diff": resolved.decode("utf-8", errors="surrogateescape")}
        atomic_write(target, json.dumps(data, indent=1).encode(
            "utf-8", errors="surrogateescape"))

    def find(self, diff: bytes, blob_of: BlobOf) -> bytes | None:
        """The recorded resolution of this patch for exactly this state, if any."""
        if not self.folder.is_dir():
            return None
        prefix = patch_key(diff)[:20]
        for path in sorted(self.folder.glob(f"{prefix}-*.json")):
            res = self._load(path)
            if res is not None and all(blob_of(p) == b for p, b in res.state.items()):
                return res.diff
        return None

    def find_at(self, repo: Repo, diff: bytes, commit: str) -> bytes | None:
        """``find`` for the state of ``commit``'s files (each path read from it once)."""
        seen: dict[str, str | None] = {}

        def blob_of(path: str) -> str | None:
            if path not in seen:
                entry = repo.entries_at(commit, [path]).get(path)
                seen[path] = entry.blob if entry else None
            return seen[path]

        return self.find(diff, blob_of)

    def forget(self, patch_ids: set[str] | None) -> tuple[int, list[str]]:
        """Remove the records of these series ids (None: all); returns how many went and the
        rerere ids they name (their ``rr-cache`` entries must go too)."""
        gone, rerere = 0, []
        for path in sorted(self.folder.glob("*.json")) if self.folder.is_dir() else []:
            try:
                data = json.loads(path.read_text(encoding="utf-8", errors="surrogateescape"))
                pid, ids = str(data.get("id", "")), data.get("rerere", [])
            except (OSError, ValueError, AttributeError):
                pid, ids = "", []
            if patch_ids is None or pid in patch_ids:
                path.unlink()
                gone += 1
                rerere += [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
        return gone, rerere

    @staticmethod
    def _load(path: Path) -> Resolution | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8", errors="surrogateescape"))
            state = {str(k): (None if v is None else str(v)) for k, v in data["state"].items()}
            return Resolution(str(data["patch"]), state,
                              str(data["diff"]).encode("utf-8", errors="surrogateescape"))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # a damaged record is ignored: the conflict then stops as usual
