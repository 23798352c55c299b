"""A scratch index: trees built, patched and merged without a work tree.

``Index`` is an index file of its own (in a temporary directory, or a work tree's real one) that
``git apply --cached``, ``read-tree``, ``write-tree`` and ``update-index`` act on. It is how a
series is materialised in memory, how ``check --apply`` proves a series, and where the conflict
engine lets git's own 3-way merge decide what conflicts. Unmerged entries are read back as
``Stages`` (1: the patch's preimage, 2: ours = upstream, 3: theirs = the patch's result).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..model.ids import ZERO
from .runner import Runner


@dataclass(frozen=True)
class Entry:
    mode: str
    blob: str


@dataclass
class Stages:
    """The unmerged entries of one path: stage number -> entry."""

    path: str
    entries: dict[int, Entry] = field(default_factory=dict)

    @property
    def base(self) -> Entry | None:
        return self.entries.get(1)

    @property
    def ours(self) -> Entry | None:
        return self.entries.get(2)

    @property
    def theirs(self) -> Entry | None:
        return self.entries.get(3)


@dataclass(frozen=True)
class ApplyResult:
    """What ``git apply`` said: ok, and its message when not."""

    ok: bool
    message: str = ""


def _ls_records(out: str) -> Iterator[tuple[str, str, int, str]]:
    """``ls-files -s -z`` records: (mode, blob, stage, path)."""
    for record in out.split("\0"):
        if "\t" not in record:
            continue
        meta, path = record.split("\t", 1)
        mode, blob, stage = meta.split()
        yield mode, blob, int(stage), path


COPY_SUFFIX = ".rebasectl"  # a staged copy's name: a git killed inside it leaves its .lock


class Index:
    def __init__(self, runner: Runner, path: Path, *, of_worktree: bool = False) -> None:
        self.runner = runner
        self.path = path
        self.of_worktree = of_worktree

    @classmethod
    @contextmanager
    def scratch(cls, runner: Runner) -> Iterator[Index]:
        with tempfile.TemporaryDirectory(prefix="rebasectl-index-") as tmp:
            yield cls(runner, Path(tmp) / "index")

    @contextmanager
    def staged_copy(self) -> Iterator[Index]:
        """A copy of this index beside it, for changes that must reach this index all at once
        (``install``) or not at all: a kill while they are made leaves this one as it was (a
        stop's merge takes seconds on Megatron, and its state is saved only once it is done)."""
        copy = Index(self.runner, self.path.with_name(self.path.name + COPY_SUFFIX),
                     of_worktree=self.of_worktree)
        shutil.copyfile(self.path, copy.path)
        try:
            yield copy
        finally:
            copy.path.unlink(missing_ok=True)

    def install(self, over: Index) -> None:
        """This index becomes ``over``'s file, in one rename (what git's own lock file does)."""
        os.replace(self.path, over.path)

    def _run(self, args: Sequence[str], *, input: bytes | None = None) -> str:
        return self.runner.out(args, input=input, index=self.path)

    def read_tree(self, tree: str) -> None:
        """The index becomes ``tree`` (unmerged entries dropped). A work tree's own index keeps
        the stat data of every entry whose content did not change (``--reset``, a one-tree
        merge): a plain ``read-tree`` forgets it for all of them, and every later ``git status``
        on a Megatron-sized tree hashes each file again (0.2 s a call, and our statuses never
        write the refreshed index back). A scratch index has no work tree for ``--reset``."""
        self._run(["read-tree", *(["--reset"] if self.of_worktree else []), tree])

    def set_entries(self, entries: Mapping[str, Entry]) -> None:
        """Exactly ``entries`` (path -> entry): a sparse stage on which ``git apply --cached``
        decides as on the full tree for those paths."""
        self.path.unlink(missing_ok=True)
        data = "".join(f"{e.mode} {e.blob}\t{p}\0" for p, e in sorted(entries.items()))
        self._run(["update-index", "-z", "--index-info"], input=data.encode(
            "utf-8", errors="surrogateescape"))

    def update(self, stages: Mapping[str, Mapping[int, Entry | None]]) -> None:
        """Replace the entries of each path by the given stages (0 = merged; 1, 2, 3 =
        unmerged; None = remove that stage)."""
        records = []
        for path, by_stage in stages.items():
            records.append(f"0 {ZERO}\t{path}\0")  # drop every stage of the path first
            for stage, entry in sorted(by_stage.items()):
                if entry is not None:
                    records.append(f"{entry.mode} {entry.blob} {stage}\t{path}\0")
        self._run(["update-index", "-z", "--index-info"],
                  input="".join(records).encode("utf-8", errors="surrogateescape"))

    def apply(self, patch: bytes, *, three_way: bool = False, check: bool = False,
              reverse: bool = False) -> ApplyResult:
        """``git apply --cached`` of ``patch``: exactly (no fuzz, offsets allowed), or with
        ``three_way`` from the blob ids in it, leaving unmerged entries where it conflicts.
        rerere stays out: a 3-way apply runs it when ``rr-cache`` exists, and a scratch merge
        must neither record nor replay resolutions (the work tree's own rerere does)."""
        args = ["-c", "rerere.enabled=false", "apply", "--cached", "--whitespace=nowarn"]
        args += [flag for flag, on in (("--3way", three_way), ("--check", check),
                                       ("--reverse", reverse)) if on]
        proc = self.runner.run(args, input=patch, check=False, index=self.path)
        return ApplyResult(proc.returncode == 0, proc.stderr.decode(errors="replace").strip())

    def apply_files(self, files: Sequence[Path]) -> bool:
        """Whether patch files apply exactly, in order, one on top of the other (all or
        nothing)."""
        return self.runner.ok(["apply", "--cached", "--whitespace=nowarn", "--",
                               *map(str, files)], index=self.path)

    def write_tree(self) -> str:
        return self._run(["write-tree"])

    def entries(self, paths: Sequence[str] = ()) -> dict[str, Entry]:
        """Stage-0 entries (all, or of ``paths``)."""
        out = self._run(["ls-files", "-s", "-z", "--", *paths])
        return {p: Entry(m, b) for m, b, stage, p in _ls_records(out) if stage == 0}

    def unmerged(self) -> dict[str, Stages]:
        out = self._run(["ls-files", "-u", "-z"])
        found: dict[str, Stages] = {}
        for mode, blob, stage, path in _ls_records(out):
            found.setdefault(path, Stages(path)).entries[stage] = Entry(mode, blob)
        return found
