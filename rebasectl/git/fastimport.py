"""Writing many commits with one git process: ``git fast-import``.

Materialising a series used to cost three git processes per patch (apply, write-tree,
commit-tree). The contents are now computed in Python (rebasectl/applier.py); this writes their
blobs, trees and commits in one stream. The commit objects are byte for byte what ``git
commit-tree`` makes from the same tree, parent, identities and message, so their shas are the
same whichever way a series is materialised.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..infra.errors import GitError
from ..model.diffs import quote_path
from ..model.ids import Oid
from ..model.patches import Mode
from .objects import Identity
from .runner import Runner, check_interrupted, describe_failure


@dataclass(frozen=True)
class Change:
    """One path of a commit: new content (``data``), an existing blob (``blob``), or gone."""

    path: str
    mode: str = Mode.REGULAR
    data: bytes | None = None
    blob: str | None = None

    @property
    def deleted(self) -> bool:
        return self.data is None and self.blob is None


class FastImport:
    """A stream of commits: ``commit`` returns a mark; ``close`` returns mark -> sha."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.tmp = tempfile.TemporaryDirectory(prefix="rebasectl-fi-")
        self.marks = Path(self.tmp.name) / "marks"
        self.ref = f"refs/rebasectl/import-{os.getpid()}-{time.monotonic_ns()}"
        self.proc = runner.popen(["fast-import", "--quiet", "--done",
                                  f"--export-marks={self.marks}"])
        self.next_mark = 1
        self.first = True

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
        except BrokenPipeError:
            self.close()  # raises with git's message

    def _mark(self) -> int:
        self.next_mark += 1
        return self.next_mark - 1

    def commit(self, parent: str | int, identity: Identity, message: str,
               changes: list[Change]) -> int:
        """A commit on ``parent`` (a sha, or the mark of a commit of this stream)."""
        blobs: dict[str, int] = {}
        for c in changes:
            if c.data is not None:
                mark = blobs[c.path] = self._mark()
                self._write(b"blob\nmark :%d\ndata %d\n" % (mark, len(c.data)) + c.data + b"\n")
        mark = self._mark()
        text = message.encode("utf-8", errors="surrogateescape")
        person = f"{identity.name} <{identity.email}> {identity.date}".encode(
            "utf-8", errors="surrogateescape")
        head = [f"commit {self.ref}".encode(), b"mark :%d" % mark, b"author " + person,
                b"committer " + person, b"data %d" % len(text)]
        self._write(b"\n".join(head) + b"\n" + text + b"\n")
        origin = f":{parent}" if isinstance(parent, int) else parent
        self._write(f"from {origin}\n".encode())
        for c in changes:
            path = quote_path(c.path).encode("utf-8", errors="surrogateescape")
            if c.deleted:
                self._write(b"D " + path + b"\n")
            else:
                ref = f":{blobs[c.path]}" if c.data is not None else c.blob
                self._write(f"M {c.mode} {ref} ".encode() + path + b"\n")
        self._write(b"\n")
        return mark

    def abort(self) -> None:
        """Give the stream up (the caller is failing or interrupted): git stops, nothing it
        wrote is named by a ref, and no error of its own hides the caller's."""
        try:
            self.proc.kill()
            self.proc.wait()
        finally:
            self.runner.run(["update-ref", "-d", self.ref], check=False)
            self.tmp.cleanup()

    def close(self) -> dict[int, Oid]:
        """Finish the stream; mark -> sha of everything written. The stream's branch is reset
        to nothing before its end, so git never writes the ref (the marks name the commits);
        only a failed stream is followed by a ``update-ref -d``, in case."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.write(f"reset {self.ref}\n\ndone\n".encode())
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        err = self.proc.stderr.read() if self.proc.stderr else b""
        code = self.proc.wait()
        try:
            check_interrupted(code)
            if code != 0:
                raise GitError(describe_failure(["fast-import"], code, err))
            marks: dict[int, Oid] = {}
            for line in self.marks.read_text().splitlines():
                mark, sha = line.split()
                marks[int(mark[1:])] = Oid(sha)
            return marks
        finally:
            if code != 0:
                self.runner.run(["update-ref", "-d", self.ref], check=False)
            self.tmp.cleanup()
