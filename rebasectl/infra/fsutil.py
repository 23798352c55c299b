"""Atomic file updates: single files via rename, several files as one journaled transaction.

``export`` and ``import`` rewrite patches/ and series.yaml. A crash or SIGKILL halfway must never
leave a mixture of old and new files, so (as StGit does for its stack) every change is first
staged complete under ``.rebasectl/txn/``, then a journal is written that lists the moves, then the
moves happen. ``recover`` rolls an interrupted transaction forward: each step is idempotent.

The journal also names what each destination held before (its digest): a file a person changed
after the kill (neither what it was nor what the transaction writes) is copied to a folder of
its own under the keep folder (``.rebasectl/overwritten/``, as ``export --force`` keeps what it
writes over) before the move, and the roll-forward says so (``Finished``): the series is whole
again, one export's files, and nothing of the person's is lost.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import RebasectlError
from .faults import boundary

JOURNAL = "journal.json"


def atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise RebasectlError(f"{path}: cannot write: {exc.strerror}") from None


def read_regular(path: Path) -> bytes:
    """The bytes of a regular file (a symlink to one is fine). A FIFO, socket or device is
    refused before it is read: reading a FIFO blocks until someone writes to it, so every
    command hung on a series.yaml that was one. Opened non-blocking, checked with ``fstat`` on
    the open file (no window between a check and the open). ``FileNotFoundError`` and other
    ``OSError``s are the caller's to word; a file of another kind raises ``IsADirectoryError``'s
    sibling: ``OSError(EINVAL)`` with ``not a regular file`` as its strerror."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)",
                          str(path))
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def fresh_folder(parent: Path) -> Path:
    """A new folder under ``parent`` named by the time (``20261201-235012``, then ``-2``,
    ``-3``... when taken): where a copy of what is about to be written over goes."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    dest, n = parent / stamp, 2
    while dest.exists():
        dest, n = parent / f"{stamp}-{n}", n + 1
    dest.mkdir(parents=True)
    return dest


@dataclass
class Finished:
    """What a roll-forward did: ``what`` (export, import) began at ``at`` (UTC, as the journal
    says; None for a journal written before it said so); files written and deleted; the files
    a person had changed since, copied first into ``folder`` (relative paths, ``kept``); those
    they had deleted since, written again (``rewritten``)."""

    what: str
    at: str | None
    written: int = 0
    deleted: int = 0
    kept: list[str] = field(default_factory=list)
    folder: Path | None = None
    rewritten: list[str] = field(default_factory=list)


class FileTransaction:
    """Collect writes and deletes under ``root``; ``commit`` applies them all or (after a crash)
    ``recover`` finishes them. ``keep_dir``: where a file changed by a person while the
    transaction was under way is copied before it is written over; ``what`` names the
    transaction (export, import) to whoever finishes it."""

    def __init__(self, root: Path, journal_dir: Path, keep_dir: Path, what: str) -> None:
        self.root = root
        self.journal_dir = journal_dir
        self.keep_dir = keep_dir
        self.what = what
        self.writes: dict[str, bytes] = {}
        self.deletes: set[str] = set()

    def write(self, rel: str, data: bytes) -> None:
        self.writes[rel] = data
        self.deletes.discard(rel)

    def delete(self, rel: str) -> None:
        if rel not in self.writes:
            self.deletes.add(rel)

    def changed(self) -> dict[str, str | None]:
        """Paths whose bytes would change (deleted or different content), each with the
        digest of what it holds now (None: no file)."""
        out: dict[str, str | None] = {}
        for rel, data in self.writes.items():
            now = _read(self.root / rel)
            if now != data:
                out[rel] = _digest(now)
        for rel in self.deletes:
            if (self.root / rel).exists():
                out[rel] = _digest(_read(self.root / rel))
        return dict(sorted(out.items()))

    def commit(self) -> list[str]:
        before = self.changed()
        changed = list(before)
        if not changed:
            return []
        _check_writable(self.root, changed)
        if self.journal_dir.exists():
            shutil.rmtree(self.journal_dir)
        staged = self.journal_dir / "staged"
        moves: list[list[str]] = []
        try:
            staged.mkdir(parents=True)
            for i, rel in enumerate(r for r in changed if r in self.writes):
                tmp = staged / f"{i:05d}"
                tmp.write_bytes(self.writes[rel])
                moves.append([str(tmp.relative_to(self.journal_dir)), rel])
                boundary("txn-stage")
        except OSError as exc:  # disk full, quota: nothing has been moved yet
            shutil.rmtree(self.journal_dir, ignore_errors=True)
            raise RebasectlError(f"{self.journal_dir}: cannot stage the new files: "
                                 f"{exc.strerror}; nothing was changed") from None
        deletes = [r for r in changed if r in self.deletes]
        journal = {"moves": moves, "deletes": deletes, "before": before, "what": self.what,
                   "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
        atomic_write(self.journal_dir / JOURNAL, json.dumps(journal).encode())
        _roll_forward(self.root, self.journal_dir, self.keep_dir)
        return changed


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _check_writable(root: Path, rels: list[str]) -> None:
    """Every target directory exists as a directory (or can be made) and takes a new file: tried
    for real, because permission bits say nothing for root or on read-only mounts. A failure here,
    before the journal exists, leaves every file as it was."""
    probed: set[Path] = set()
    for rel in rels:
        parent = (root / rel).parent
        probe = parent
        while not probe.exists() and probe != root:
            probe = probe.parent
        if probe in probed:
            continue
        probed.add(probe)
        real_root = root.resolve()
        if probe.resolve() != real_root and real_root not in probe.resolve().parents:
            raise RebasectlError(f"{probe}: leads outside the repository (symlink?); refusing "
                                 "to write there")
        if not probe.is_dir():
            raise RebasectlError(f"{probe}: not a directory")
        try:
            fd, name = tempfile.mkstemp(prefix=".rebasectl-probe-", dir=probe)
        except OSError as exc:
            raise RebasectlError(f"{probe}: not writable ({exc.strerror})") from None
        os.close(fd)
        os.unlink(name)


def plain_relative(rel: object) -> bool:
    """A path a file on disk may name for us: relative, in normal form (no ``..``, ``.`` or
    empty parts), no backslash or NUL. Checked here once for every such file (the export
    journal, the artifacts mark)."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\0" in rel:
        return False
    return not rel.startswith("/") and all(p not in ("", ".", "..") for p in rel.split("/"))


class Confined:
    """Paths under one root, symlinks followed, that must stay inside it. The root is
    resolved once and only the given parts are walked (one ``lstat`` each), which keeps a
    30 000-entry series.yaml cheap to check."""

    def __init__(self, root: Path) -> None:
        self.real = os.path.realpath(root)

    def contains(self, real: str) -> bool:
        return real == self.real or real.startswith(self.real.rstrip("/") + "/")

    def resolve(self, rel: str) -> str | None:
        """The real path of ``root/rel``, or None when a link on the way leads out."""
        path = self.real
        for part in rel.split("/"):
            if part in ("", "."):
                continue
            path = os.path.dirname(path) if part == ".." else os.path.join(path, part)
            if os.path.islink(path):
                path = os.path.realpath(path)
            if not self.contains(path):
                return None
        return path


def confined_parent(root: Path, rel: str) -> str:
    """The real path of ``root/rel``'s folder, resolved now (every link on the way followed),
    which must lie under ``root``'s real path: the check at write time, not only of the text
    (two links that each read as inside, ``a/b/c/s -> ../../..`` and ``t -> a/b/c/s/../../..``,
    put ``t/x.py`` three folders above the root)."""
    folder = os.path.dirname(rel)
    real = Confined(root).resolve(folder) if folder else os.path.realpath(root)
    if real is None:
        raise RebasectlError(f"{root / rel}: its folder leads outside {root} through a "
                             "symbolic link; refusing to write there")
    return real


def write_confined(root: Path, rel: str, data: bytes) -> None:
    """Write ``root/rel`` only inside ``root``: its folder's real path checked (and made) first,
    the file itself opened without following a link (a link there is replaced by the file, as
    git replaces it at a checkout)."""
    folder = confined_parent(root, rel)
    os.makedirs(folder, exist_ok=True)
    if confined_parent(root, rel) != folder:  # a link made while the folders were
        raise RebasectlError(f"{root / rel}: its folder changed while being made; refusing")
    target = os.path.join(folder, os.path.basename(rel))
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o666)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        os.unlink(target)
        fd = os.open(target, flags | os.O_EXCL, 0o666)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _inside(root: Path, rel: object) -> bool:
    """A journal entry names a file of the series itself: series.yaml or patches/NAME, inside
    the checkout once symlinks are resolved (a tampered journal must not reach anything
    else)."""
    if not plain_relative(rel):
        return False
    assert isinstance(rel, str)
    parts = rel.split("/")
    if not (rel == "series.yaml" or (len(parts) == 2 and parts[0] == "patches")):
        return False
    real = Confined(root).resolve(rel)
    return real is not None and os.path.dirname(real) in (
        os.path.realpath(root), os.path.realpath(root / "patches"))


@dataclass
class _Journal:
    moves: list[list[str]]
    deletes: list[str]
    before: dict[str, str | None] | None  # None: written before destinations were recorded
    what: str
    at: str | None


def _load_journal(root: Path, journal_dir: Path) -> _Journal:
    where = journal_dir / JOURNAL
    try:
        journal = json.loads(where.read_text())
        moves, deletes = journal["moves"], journal["deletes"]
        before, what, at = journal.get("before"), journal.get("what"), journal.get("at")
        ok = isinstance(moves, list) and isinstance(deletes, list) and all(
            isinstance(m, list) and len(m) == 2 and isinstance(m[0], str)
            and m[0].startswith("staged/") and "/" not in m[0][7:] and _inside(root, m[1])
            for m in moves) and all(_inside(root, d) for d in deletes)
        known = (before is None or (isinstance(before, dict) and all(
            v is None or isinstance(v, str) for v in before.values()))) and \
            isinstance(what or "", str) and isinstance(at or "", str)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RebasectlError(f"{where}: unreadable journal of an interrupted export/import "
                             f"({exc}); remove {journal_dir} and export again") from None
    if not ok:
        raise RebasectlError(f"{where}: the journal names files outside patches/ and "
                             f"series.yaml; nothing done: remove {journal_dir}")
    if not known:
        raise RebasectlError(f"{where}: unreadable journal of an interrupted export/import "
                             f"(its 'before', 'what' or 'at' is not what rebasectl writes); "
                             f"remove {journal_dir} and export again")
    return _Journal(moves, deletes, before, what or "export/import", at)


class _Keeper:
    """Copies, into one fresh folder under ``keep_dir`` made at the first, of the destinations
    a person changed since the transaction began (see the module doc)."""

    def __init__(self, root: Path, keep_dir: Path, journal: _Journal, done: Finished,
                 journal_dir: Path) -> None:
        self.root, self.keep_dir, self.journal, self.done = root, keep_dir, journal, done
        self.journal_dir = journal_dir

    def keep(self, rel: str, new: Path | None) -> None:
        """Copy ``root/rel`` away when it is neither what it was before the transaction nor
        ``new``'s bytes (the staged file; None for a delete)."""
        before = self.journal.before
        if before is None or rel not in before:
            return  # a journal from before destinations were recorded: nothing to compare
        now = _read(self.root / rel)
        if now is None:
            if before[rel] is not None and new is not None:  # deleted by hand since
                self.done.rewritten.append(rel)
            return
        if _digest(now) == before[rel]:
            return
        if new is not None and _read(new) == now:
            return
        if self.done.folder is None:
            self.done.folder = fresh_folder(self.keep_dir)
        dest = self.done.folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(dest, now)
        self.done.kept.append(rel)
        # said by whichever finishing ends: a kill after this copy must not make it a silent one
        atomic_write(self.journal_dir / _KEPT, json.dumps(
            {"folder": str(self.done.folder), "kept": self.done.kept}).encode())

    @staticmethod
    def earlier(journal_dir: Path, done: Finished) -> None:
        """The copies an earlier finishing, killed, had made: named by this one."""
        try:
            data = json.loads((journal_dir / _KEPT).read_text())
            done.folder, done.kept = Path(data["folder"]), list(data["kept"])
        except (OSError, ValueError, KeyError, TypeError):
            return


_KEPT = "kept.json"  # in the journal folder: the copies a finishing made so far


def _roll_forward(root: Path, journal_dir: Path, keep_dir: Path) -> Finished:
    journal = _load_journal(root, journal_dir)
    done = Finished(journal.what, journal.at)
    _Keeper.earlier(journal_dir, done)
    keeper = _Keeper(root, keep_dir, journal, done, journal_dir)
    for tmp_rel, rel in journal.moves:
        tmp = journal_dir / tmp_rel
        target = root / rel
        if tmp.exists():
            try:
                keeper.keep(rel, tmp)
                _move_into_place(tmp, root, rel)
            except OSError as exc:
                raise RebasectlError(f"{target}: cannot write ({exc.strerror}); fix that and run "
                                     "any rebasectl command to finish the interrupted write"
                                     ) from None
            done.written += 1
        boundary("txn-move")
    for rel in journal.deletes:
        try:
            keeper.keep(rel, None)
            if (root / rel).exists():
                done.deleted += 1
            (root / rel).unlink(missing_ok=True)
        except OSError as exc:
            raise RebasectlError(f"{root / rel}: cannot delete ({exc.strerror}); fix that and run "
                                 "any rebasectl command to finish the interrupted write") from None
    shutil.rmtree(journal_dir, ignore_errors=True)
    return done


def _move_into_place(tmp: Path, root: Path, rel: str) -> None:
    """A staged file to ``root/rel``: renamed when it can be; when ``.rebasectl`` is on
    another file system (a symlink to another mount) the rename fails with EXDEV, so it is
    copied to a temporary beside the target, renamed there (atomic on the target's file system)
    and the staged copy removed. Either way the step can be repeated after a kill: the staged
    file goes last. The target's folder is checked by its real path at this moment."""
    folder = confined_parent(root, rel)
    os.makedirs(folder, exist_ok=True)
    target = os.path.join(folder, os.path.basename(rel))
    try:
        os.replace(tmp, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    beside = os.path.join(folder, f".{os.path.basename(rel)}.rebasectl-{os.getpid()}")
    try:
        shutil.copyfile(tmp, beside)
        with open(beside, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(beside, target)
    finally:
        if os.path.lexists(beside):
            os.unlink(beside)
    tmp.unlink()


def recover(root: Path, journal_dir: Path, keep_dir: Path) -> Finished | None:
    """Finish an interrupted transaction (journal written; what was done is returned) or
    discard one that never committed (None)."""
    if not journal_dir.exists():
        return None
    if (journal_dir / JOURNAL).exists():
        return _roll_forward(root, journal_dir, keep_dir)
    shutil.rmtree(journal_dir, ignore_errors=True)
    return None
