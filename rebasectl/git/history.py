"""Questions about an upstream's history, one parser per git output format.

``rev-list`` (ranges, first-parent chains, parents), ``log --raw`` (which commits change which
files, and to what blob), ``log -p`` (the commits' own diffs, for patch-ids and line texts),
``blame`` forward and reverse (porcelain), ``patch-id --stable``, and rename detection between
two trees. Attribution, the conflict engine and the report ask these; nothing else runs ``log``.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..infra.errors import RebasectlError
from ..infra.fsutil import atomic_write
from ..model.ids import ZERO, Oid, is_full
from .runner import Runner

# Options that make `git diff`/`git log -p` output canonical whatever the user's config says.
CANONICAL_DIFF = ("--no-color", "--no-ext-diff", "--no-textconv", "--no-renames", "--full-index",
                  "--diff-algorithm=myers", "--unified=3", "--src-prefix=a/", "--dst-prefix=b/",
                  "--no-relative", "--ignore-submodules=none")
# a merge on the first-parent chain is compared with its first parent
FIRST_PARENT = ("--first-parent", "--diff-merges=first-parent")


@dataclass(frozen=True)
class FileChange:
    """One file of one commit in ``log --raw``: its new mode and blob, or None when deleted."""

    path: str
    mode: str | None
    blob: str | None
    status: str  # A, M, D, T


@dataclass(frozen=True)
class RawCommit:
    commit: Oid
    changes: tuple[FileChange, ...]


_END = b"\0#end"  # a kept answer is whole only when it ends with this


def _read_kept(path: Path | None) -> bytes | None:
    """A kept answer, or None when there is none or it was cut short."""
    try:
        data = path.read_bytes() if path is not None else None
    except OSError:
        return None
    return data[: -len(_END)] if data is not None and data.endswith(_END) else None


def _keep(path: Path | None, raw: bytes) -> None:
    """Kept for the next process (``atomic_write``: whole, then renamed in); a folder that
    cannot take it costs only the next process asking git again."""
    if path is None:
        return
    with contextlib.suppress(OSError, RebasectlError):
        path.parent.mkdir(exist_ok=True)
        atomic_write(path, raw + _END)


class History:
    """``store``: a folder where answers about two full shas are kept between processes (the
    cached mirror's; commits never change, and each command of one bump asks again)."""

    def __init__(self, runner: Runner, store: Path | None = None) -> None:
        self.runner = runner
        self.store = store
        self._renames: dict[tuple[str, str], dict[str, str]] = {}
        self._ancestry: dict[tuple[str, str], bool] = {}

    # -- revisions -----------------------------------------------------------------------------
    def rev_list(self, spec: Sequence[str], *, first_parent: bool = False, reverse: bool = True,
                 paths: Sequence[str] = ()) -> list[Oid]:
        args = ["rev-list", *(["--first-parent"] if first_parent else []),
                *(["--reverse"] if reverse else []), *spec, "--", *paths]
        return [Oid(s) for s in self.runner.out(args).split()]

    def count(self, spec: str) -> int:
        return int(self.runner.out(["rev-list", "--count", spec]) or 0)

    def brought_by(self, merge: str, exclude: Sequence[str] = ()) -> int:
        """How many commits a merge brings from its other side(s): those it reaches that its
        first parent and ``exclude`` do not, merges left out (the merge itself and any its side
        holds), as git format-patch counts them: one patch each."""
        out = self.runner.out(["rev-list", "--count", "--no-merges", merge, f"^{merge}^1",
                               *(f"^{e}" for e in exclude), "--"])
        return int(out or 0)

    def forget(self) -> None:
        """After a fetch: a shallow history may have grown deeper, and an ancestry it answered
        no to may be yes now."""
        self._ancestry.clear()

    def is_ancestor(self, a: str, b: str) -> bool:
        """Is ``a`` ``b`` or an ancestor of it (kept for two full shas: it cannot change)."""
        if (a, b) in self._ancestry:
            return self._ancestry[(a, b)]
        found = self.runner.ok(["merge-base", "--is-ancestor", a, b])
        if is_full(a) and is_full(b):
            self._ancestry[(a, b)] = found
        return found

    def parents(self, spec: str) -> dict[Oid, tuple[Oid, ...]]:
        """Every commit of ``spec`` (all branches of it) -> its parents, oldest first (the
        order ``rev-list --reverse`` gives: one process answers both)."""
        out = self.runner.out(["rev-list", "--reverse", "--parents", spec])
        return {Oid(f[0]): tuple(map(Oid, f[1:])) for f in (ln.split() for ln in out.splitlines())
                if f}

    def parents_of(self, sha: str) -> tuple[Oid, ...]:
        """One commit's parents, first parent first (none for a root commit)."""
        fields = self.runner.out(["rev-list", "--parents", "-n", "1", sha]).split()
        return tuple(map(Oid, fields[1:]))

    def first_parent_chain(self, spec: str) -> list[Oid]:
        return self.rev_list([spec], first_parent=True)

    # -- what changed ----------------------------------------------------------------------------
    def raw_changes(self, spec: str, paths: Sequence[str], *,
                    first_parent: bool) -> list[RawCommit]:
        """Oldest first: each commit of ``spec`` that changes ``paths`` (no rename detection),
        with each changed file's new state; a merge on the first-parent chain is taken against
        its first parent."""
        args = ["log", "--reverse", "--raw", "-z", "--no-abbrev", "--no-renames",
                "--format=%x01%H", *(FIRST_PARENT if first_parent else ()), spec, "--", *paths]
        out = self.runner.run(args).stdout.decode("utf-8", errors="surrogateescape")
        result: list[RawCommit] = []
        for record in out.split("\x01")[1:]:
            head, _, rest = record.partition("\0")  # "<sha>\0\n:meta\0path\0..."
            fields = rest.strip("\0\n").split("\0")
            changes = []
            for meta, path in zip(fields[0::2], fields[1::2]):
                _, new_mode, _, new_blob, status = meta.lstrip(":").split()[:5]
                gone = status.startswith("D")
                changes.append(FileChange(path, None if gone else new_mode,
                                          None if gone else new_blob, status[0]))
            if not result or result[-1].commit != head.strip():  # -m repeats merges per parent
                result.append(RawCommit(Oid(head.strip()), tuple(changes)))
        return result

    def patches(self, spec: str, paths: Sequence[str], *, no_merges: bool = True,
                context: int = 3, full_history: bool = False) -> list[tuple[Oid, bytes]]:
        """(commit, its diff limited to ``paths``), newest first, for the commits of ``spec``
        touching them. ``context`` 0 for a caller that reads only the added and removed lines
        (the same lines: context changes how hunks are cut, not what changed).
        ``full_history``: every commit that changes one of the files, none left out by history
        simplification (which, for several files, would depend on which files are asked)."""
        diff = [f"--unified={context}" if a == "--unified=3" else a for a in CANONICAL_DIFF]
        args = ["log", "-p", *diff, "--format=%x00%x01%H",
                *(["--no-merges"] if no_merges else []),
                *(["--full-history"] if full_history else []), spec, "--", *paths]
        out = self.runner.run(args).stdout
        result: list[tuple[Oid, bytes]] = []
        for record in out.split(b"\0\x01")[1:]:
            head, _, body = record.partition(b"\n")
            result.append((Oid(head.decode().strip()), body.strip(b"\n") + b"\n"))
        return result

    def pickaxe(self, spec: str, needle: str, path: str) -> list[Oid]:
        """Commits of ``spec`` (oldest first, side branches included) that changed the number of
        occurrences of ``needle`` in ``path``."""
        return [Oid(s) for s in self.runner.out(["log", "--format=%H", "--reverse",
                                                 "--no-renames", f"-S{needle}", spec, "--",
                                                 path]).split()]

    def commit_diffs(self, shas: Sequence[str]) -> dict[str, bytes]:
        """sha -> its canonical diff against its first parent (the empty tree for a root), for
        many commits in one ``git log`` process."""
        if not shas:
            return {}
        args = ["log", "--no-walk=unsorted", "--stdin", "-p", "--root", *CANONICAL_DIFF,
                "--diff-merges=first-parent", "--format=%x00%x01%H"]
        out = self.runner.run(args, input="\n".join(shas).encode() + b"\n").stdout
        found: dict[str, bytes] = {}
        for record in out.split(b"\0\x01")[1:]:
            head, _, body = record.partition(b"\n")
            body = body[1:] if body.startswith(b"\n") else body
            found[head.decode().strip()] = body
        return found

    def deleted_by(self, spec: str, path: str) -> Oid | None:
        """The commit of ``spec`` that deleted ``path`` (the newest such; on a merge's side
        branch when that is where it happened, else the merge that did it)."""
        for extra in ((), FIRST_PARENT):
            out = self.runner.out(["log", "--format=%H", *extra, "--diff-filter=D",
                                   "--no-renames", "-1", spec, "--", path])
            if out:
                return Oid(out.split()[0])
        return None

    def files_holding(self, rev: str, needles: Sequence[str]) -> dict[str, list[str]]:
        """needle -> the files of ``rev`` that hold that fixed string (one ``git grep``, kept
        in the store for a full sha: every command showing one stop asks it again, 0.2-0.4 s
        on Megatron)."""
        if not needles:
            return {}
        key = hashlib.sha256("\0".join(needles).encode("utf-8", "surrogateescape")).hexdigest()
        kept = self.store / f"grep-{rev}-{key[:32]}" if self.store and is_full(rev) else None
        raw = _read_kept(kept)
        if raw is None:
            proc = self.runner.run(["grep", "-F", "-z", *[a for n in needles
                                                          for a in ("-e", n)], rev, "--"],
                                   check=False)
            raw = proc.stdout
            if proc.returncode in (0, 1):  # found, or found nothing: both answers
                _keep(kept, raw)
        found: dict[str, list[str]] = {n: [] for n in needles}
        for line in raw.decode("utf-8", errors="surrogateescape").split("\n"):
            path, sep, text = line.partition("\0")
            if not sep:
                continue
            path = path.removeprefix(f"{rev}:")
            for n in needles:
                if n in text and path not in found[n]:
                    found[n].append(path)
        return found

    def renames(self, old: str, new: str) -> dict[str, str]:
        """old path -> new path for every file rename detection (git's default 50% similarity)
        finds between two trees (asked of git once per pair of full shas: the conflict engine
        and the carried-lines engine both follow renames of one bump)."""
        if (old, new) in self._renames:
            return dict(self._renames[(old, new)])
        found = self._find_renames(old, new)
        if is_full(old) and is_full(new):
            self._renames[(old, new)] = found
        return dict(found)

    def _find_renames(self, old: str, new: str) -> dict[str, str]:
        kept = self.store / f"renames-{old}-{new}" if self.store and is_full(old) and \
            is_full(new) else None
        raw = _read_kept(kept)
        if raw is None:
            raw = self.runner.run(["diff", "--name-status", "-z", "--find-renames", "-l0", old,
                                   new, "--"]).stdout
            _keep(kept, raw)
        fields = raw.decode("utf-8", errors="surrogateescape").strip("\0").split("\0")
        found, i = {}, 0
        while i < len(fields):
            status = fields[i]
            if status.startswith(("R", "C")):
                if status.startswith("R"):
                    found[fields[i + 1]] = fields[i + 2]
                i += 3
            else:
                i += 2
        return found

    # -- blame -----------------------------------------------------------------------------------
    def blame(self, old: str, new: str, path: str, ranges: Sequence[tuple[int, int]], *,
              reverse: bool = False) -> dict[int, Oid]:
        """Forward: for lines of ``path`` at ``new``, the commit of ``old..new`` that wrote each
        (side branches of merges included; older lines come back as a boundary commit).
        Reverse: for lines of ``path`` at ``old``, the last commit of ``old..new`` in which each
        still existed (``new`` itself when it survived)."""
        if not ranges:
            return {}
        args = ["blame", "--porcelain", *(["--reverse"] if reverse else []), f"{old}..{new}"]
        for start, end in ranges:
            args += ["-L", f"{start},{end}"]
        proc = self.runner.run([*args, "--", path], check=False)
        found: dict[int, Oid] = {}
        if proc.returncode != 0:
            return found
        for line in proc.stdout.decode(errors="replace").splitlines():
            parts = line.split()  # header: sha, line in the commit, line in the blamed file, [n]
            if len(parts) >= 3 and is_full(parts[0]):
                found[int(parts[2])] = Oid(parts[0])
        return found

    # -- patch-ids -------------------------------------------------------------------------------
    def patch_ids(self, diffs: Sequence[tuple[str, bytes]]) -> dict[str, str]:
        """commit -> stable patch-id for (commit, diff) pairs, in one git process (an empty
        diff has none)."""
        text = b"".join(b"commit " + sha.encode() + b"\n" + diff for sha, diff in diffs
                        if diff.strip())
        if not text:
            return {}
        out = self.runner.run(["patch-id", "--stable"], input=text).stdout.decode().split("\n")
        return {parts[1]: parts[0] for parts in (ln.split() for ln in out) if len(parts) == 2}

    def patch_id(self, diff: bytes) -> str | None:
        return self.patch_ids([(ZERO, diff)]).get(ZERO)
