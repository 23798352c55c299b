"""A folder of bump artifacts that rebasectl owns, and nothing else.

``bump --artifacts DIR`` writes bump.json, README.md, report.md/json, test.json and
``conflicts/NN-id/...``. The folder is taken only when it is new, empty, or marked as ours by an
earlier bump (``.rebasectl-artifacts.json``, which lists every file we wrote). Then we replace
or remove only files of that list: a README.md or a ``conflicts/keep.txt`` a person put there is
never touched, and a folder that was not ours is refused before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import RebasectlError
from .fsutil import atomic_write

MARK = ".rebasectl-artifacts.json"


class Artifacts:
    def __init__(self, root: Path, previous: set[str]) -> None:
        self.root = root
        self.previous = previous
        self.written: list[str] = []

    @classmethod
    def claim(cls, root: Path) -> Artifacts:
        """The folder, if it is ours to write: new, empty, or marked by an earlier bump."""
        mark = root / MARK
        if root.exists() and not root.is_dir():
            raise RebasectlError(f"--artifacts {root}: exists and is not a directory")
        if mark.is_file():
            try:
                listed = json.loads(mark.read_text())["files"]
                previous = {str(p) for p in listed if isinstance(p, str)}
            except (OSError, ValueError, KeyError, TypeError):
                raise RebasectlError(f"{mark}: unreadable; remove it (and the files a bump "
                                     "wrote) or pick a new --artifacts folder") from None
            return cls(root, previous)
        if root.is_dir() and any(root.iterdir()):
            raise RebasectlError(f"--artifacts {root}: the folder has files rebasectl did not "
                                 "write; pick a new or empty folder")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RebasectlError(f"--artifacts {root}: cannot create it: {exc.strerror}"
                                 ) from None
        return cls(root, set())

    def check_writable(self) -> None:
        """Fail before anything else changes (a clean bump moves series.yaml afterwards)."""
        probe = self.root / ".rebasectl-probe"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise RebasectlError(f"--artifacts {self.root}: not writable ({exc.strerror})"
                                 ) from None

    def write(self, rel: str, data: bytes) -> Path:
        target = self.root / rel
        if rel not in self.previous and (target.exists() or target.is_symlink()):
            raise RebasectlError(f"{target}: exists and was not written by rebasectl; "
                                 "refusing to overwrite it")
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
        self.written.append(rel)
        return target

    def finish(self) -> None:
        """Remove what an earlier bump wrote and this one did not; record this one's files."""
        for rel in sorted(self.previous - set(self.written)):
            stale = self.root / rel
            if stale.is_file():
                stale.unlink()
            parent = stale.parent
            while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        atomic_write(self.root / MARK, json.dumps({"tool": "rebasectl",
                                                   "files": sorted(self.written)},
                                                  indent=1).encode())
