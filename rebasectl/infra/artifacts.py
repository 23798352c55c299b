"""A folder of bump artifacts that rebasectl owns, and nothing else.

``bump --artifacts DIR`` writes bump.json, README.md, report.md/json, test.json and
``conflicts/NN-id/...``. The folder is taken only when it is new, empty, or marked as ours by an
earlier bump (``.rebasectl-artifacts.json``, which lists every file we wrote with its sha256).
A file counts as ours only while it still holds the bytes we wrote: one a person edited (their
notes saved over report.md) or put there (a README.md, ``conflicts/keep.txt``) is never replaced
or removed. The mark is data from disk (a folder downloaded from CI, a tampered default folder),
so every name in it must be a plain relative path that stays inside the folder; anything else
makes the folder refused, before anything is written.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .errors import RebasectlError
from .fsutil import Confined, atomic_write, plain_relative

MARK = ".rebasectl-artifacts.json"
IGNORE = ".gitignore"  # the folder ignores itself, as .rebasectl/ is ignored: never clutter
IGNORE_TEXT = b"# written by rebasectl: bump artifacts, not sources\n*\n"
# what a bump may write at the top of the folder; checked before the series moves
TOP_LEVEL = ("bump.json", "README.md", "report.md", "report.json", "test.json")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_mark(mark: Path) -> dict[str, str]:
    """The files an earlier bump wrote, by relative path, with their sha256."""
    try:
        files = json.loads(mark.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        files = None
    if not isinstance(files, dict) or not all(
            plain_relative(k) and isinstance(v, str) for k, v in files.items()):
        raise RebasectlError(f"{mark}: not a list of files rebasectl wrote; pick a new "
                             "--artifacts folder (nothing in this one was touched)")
    return files


class Artifacts:
    def __init__(self, root: Path, previous: dict[str, str]) -> None:
        self.root = root
        self.previous = previous
        self.written: dict[str, str] = {}

    @classmethod
    def claim(cls, root: Path) -> Artifacts:
        """The folder, if it is ours to write: new, empty, or marked by an earlier bump."""
        mark = root / MARK
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise RebasectlError(f"--artifacts {root}: exists and is not a directory")
        if mark.is_file() and not mark.is_symlink():
            taken = cls(root, _read_mark(mark))
            taken._ignore()
            return taken
        for half in root.glob(f".{MARK}.tmp-*") if root.is_dir() else []:
            half.unlink()  # a mark half-written by a killed bump: the folder was ours
        if root.is_dir() and any(root.iterdir()):
            raise RebasectlError(f"--artifacts {root}: the folder has files rebasectl did not "
                                 "write; pick a new or empty folder")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RebasectlError(f"--artifacts {root}: cannot create it: {exc.strerror}"
                                 ) from None
        made = cls(root, {})
        made._mark({})  # ours from the first moment: a bump killed next leaves a folder it owns
        made._ignore()
        return made

    def _ignore(self) -> None:
        """Write the folder's own .gitignore (``*``), so that ``--artifacts out/`` in a checkout
        is not left untracked; one a person put there is theirs and stays as it is."""
        target = self._inside(IGNORE)
        if target.exists() or target.is_symlink():
            if self._is_ours(IGNORE):
                self.written[IGNORE] = self.previous[IGNORE]
            return
        self.write(IGNORE, IGNORE_TEXT)

    def check_writable(self) -> None:
        """Fail before anything else changes (a clean bump moves series.yaml afterwards): the
        folder must take a file, and no top-level name may hold a file that is not ours."""
        for rel in TOP_LEVEL:
            self._check_ours(rel)
        self._mark(self.previous)  # the write test leaves nothing behind, even when killed

    def _inside(self, rel: str) -> Path:
        """``root/rel``, refused when a link on the way leads out of the folder."""
        if Confined(self.root).resolve(rel) is None:
            raise RebasectlError(f"{self.root / rel}: a link on the way leads out of "
                                 f"{self.root}; refusing to write there")
        return self.root / rel

    def _is_ours(self, rel: str) -> bool:
        """Does root/rel hold exactly what this or an earlier bump wrote there?"""
        target = self._inside(rel)
        recorded = self.written.get(rel) or self.previous.get(rel)
        if recorded is None or target.is_symlink() or not target.is_file():
            return False
        return _digest(target.read_bytes()) == recorded

    def _check_ours(self, rel: str) -> None:
        target = self._inside(rel)
        if (target.exists() or target.is_symlink()) and not self._is_ours(rel):
            raise RebasectlError(f"{target}: exists and is not what rebasectl wrote there "
                                 "(edited or someone else's); move it or pick another "
                                 "--artifacts folder")

    def write(self, rel: str, data: bytes) -> Path:
        self._check_ours(rel)
        target = self._inside(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)
        self.written[rel] = _digest(data)
        return target

    def finish(self) -> None:
        """Remove what an earlier bump wrote and this one did not (when unchanged since);
        record this one's files."""
        for rel in sorted(set(self.previous) - set(self.written)):
            if not self._is_ours(rel):
                continue
            stale = self.root / rel
            stale.unlink()
            parent = stale.parent
            while parent != self.root and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent
        self._mark(self.written)

    def _mark(self, files: dict[str, str]) -> None:
        """Record ``files`` (relative path -> sha256) as what rebasectl wrote here."""
        data = json.dumps({"tool": "rebasectl", "files": dict(sorted(files.items()))}, indent=1)
        try:
            atomic_write(self.root / MARK, data.encode())
        except RebasectlError as exc:
            raise RebasectlError(f"--artifacts {self.root}: not writable ({exc})") from None
