"""Work trees: the checkout an apply leaves for a person, and what a killed git leaves behind.

A work tree is a linked worktree of the cached mirror (``git worktree add``), so it shares the
mirror's objects and its ``rr-cache``: rerere is on in every command that touches it, and a
resolution recorded at one bump is replayed at the next, in any work tree. Status is read once
(``status --porcelain=v2 -z``) into ``TreeStatus``: unmerged paths, changed tracked paths,
untracked files (which rebasectl must never delete).

``stale_git_locks``/``clear_stale_git_state``: git takes ``*.lock`` files (``index.lock``,
``HEAD.lock``, ref locks) and marks a half-made worktree ``locked`` ("initializing"); a SIGKILL
leaves them, and every later git command fails. Under rebasectl's own lock no git of ours runs, so
a git lock that no live process has open is stale: it is removed, and named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..infra.fsutil import confined_parent
from ..model.ids import Oid, is_full
from .index import COPY_SUFFIX, Index
from .runner import Runner, Started

CHECKOUT = ("-c", "checkout.workers=0")  # parallel checkout: most of an apply's time
RERERE = ("-c", "rerere.enabled=true", "-c", "rerere.autoUpdate=true")
_RESOLVED = re.compile(r"^(?:Resolved|Staged) '(.+)' using previous resolution\.$")


@dataclass
class TreeStatus:
    unmerged: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # tracked, staged or not
    untracked: list[str] = field(default_factory=list)
    ignored: list[str] | None = None  # untracked files .gitignore hides; None: not asked

    @property
    def clean(self) -> bool:
        return not (self.unmerged or self.changed)


@dataclass
class InTheWay:
    """The person's files a move would overwrite: tracked ones with uncommitted changes, and
    untracked ones (which ``git stash`` would not bring back over the patch's own file)."""
    changed: list[str] = field(default_factory=list)
    untracked: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed or self.untracked)


def parse_status(out: bytes) -> TreeStatus:
    """``git status --porcelain=v2 -z`` records (renames carry a second path record)."""
    status = TreeStatus()
    records = out.decode("utf-8", errors="surrogateescape").split("\0")
    i = 0
    while i < len(records):
        rec = records[i]
        i += 1
        if not rec:
            continue
        kind = rec[0]
        if kind == "?":
            status.untracked.append(rec[2:])
        elif kind == "!":
            status.ignored = [*(status.ignored or []), rec[2:]]
        elif kind == "u":
            status.unmerged.append(rec.split(" ", 10)[10])
        elif kind == "1":
            status.changed.append(rec.split(" ", 8)[8])
        elif kind == "2":
            status.changed.append(rec.split(" ", 9)[9])
            i += 1  # the original path
    return status


def looks_bare(path: Path) -> bool:
    """``path`` is laid out as a bare repository (its HEAD and objects at the top), as the
    mirror rebasectl makes is: then it is its own git dir."""
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _may_need_pruning(git_dir: Path) -> bool:
    """False only when ``git worktree prune`` surely has nothing to do in the bare repository
    ``git_dir``: every registration under ``worktrees/`` names, in its ``gitdir`` file, a path
    that exists (git prunes the others). Anything unreadable or unexpected, a relative path
    (newer git can write those), or a directory that is not a bare repository: True, and git
    decides."""
    if not looks_bare(git_dir):
        return True
    try:
        entries = list((git_dir / "worktrees").iterdir())
    except FileNotFoundError:
        return False
    except OSError:
        return True
    for entry in entries:
        dotgit = _registered_dotgit(entry)
        if dotgit is None or not dotgit.is_absolute() or not dotgit.exists():
            return True
    return False


class Worktree:
    """A checkout (of the mirror) that rebasectl manages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runner = Runner(path)

    @classmethod
    def add(cls, mirror: Runner, path: Path, commit: str) -> Worktree:
        cls.start_add(mirror, path, commit).wait()
        return cls(path)

    @classmethod
    def start_add(cls, mirror: Runner, path: Path, commit: str) -> Started:
        """``git worktree add`` of ``commit`` at ``path``, running while the caller goes on."""
        cls.prune(mirror)
        path.parent.mkdir(parents=True, exist_ok=True)
        return mirror.start([*CHECKOUT, "worktree", "add", "--detach", "--quiet", str(path),
                             commit])

    @staticmethod
    def remove(mirror: Runner, path: Path) -> None:
        mirror.run(["worktree", "remove", "--force", str(path)], check=False)
        Worktree.prune(mirror)

    @staticmethod
    def prune(mirror: Runner) -> None:
        """Drop registrations of work trees whose directory is gone (``git worktree prune``,
        run only when a registration may be stale: every command repairs, and most find
        nothing to prune)."""
        if _may_need_pruning(mirror.cwd):
            mirror.run(["worktree", "prune"], check=False)

    @property
    def exists(self) -> bool:
        return (self.path / ".git").exists()

    def head(self) -> Oid | None:
        """HEAD's commit. Detached, as rebasectl leaves its trees, it is the sha in the tree's
        own HEAD file (asked several times per command: no process); a branch checked out,
        or anything else, as git resolves it."""
        text = self._head_file()
        if is_full(text):
            return Oid(text)
        proc = self.runner.run(["rev-parse", "--verify", "-q", "HEAD"], check=False)
        sha = proc.stdout.decode().strip()
        return Oid(sha) if proc.returncode == 0 and sha else None

    def descends_from(self, commit: str) -> bool:
        """Is HEAD ``commit`` or built on it?"""
        return self.runner.ok(["merge-base", "--is-ancestor", commit, "HEAD"])

    def git_dir(self) -> Path:
        """The tree's own git dir (``git_dir_if_linked``, else as git finds it)."""
        return self.git_dir_if_linked() or self.runner.path(["rev-parse", "--absolute-git-dir"])

    def _link(self) -> str | None:
        """The path this tree's ``.git`` file names, read as git reads it (only the line end
        stripped); None when ``.git`` is no such link."""
        try:
            text = (self.path / ".git").read_text(errors="surrogateescape")
        except OSError:
            return None
        named = text.rstrip("\r\n")
        if not named.startswith("gitdir: ") or "\n" in named:
            return None
        return named[len("gitdir: "):]

    def named_admin(self) -> Path | None:
        """The admin dir this tree's ``.git`` link names (a relative one from the tree),
        whether or not it is there; None when ``.git`` is no such link."""
        link = self._link()
        return self.path / link if link is not None else None  # an absolute one as it is

    def git_dir_if_linked(self) -> Path | None:
        """The admin dir this tree's ``.git`` file names (a relative link from the tree, as
        git 2.48+ may write it), when it is a directory holding a HEAD, with no process. None
        for anything else (a ``.git`` directory, spaces git would not strip)."""
        admin = self.named_admin()
        return admin if admin is not None and (admin / "HEAD").is_file() else None

    def _head_file(self) -> str:
        """The tree's own HEAD file as written (a sha, or ``ref: ...``); "" when it is not a
        linked tree or cannot be read."""
        admin = self.git_dir_if_linked()
        try:
            return (admin / "HEAD").read_text(errors="replace").strip() if admin else ""
        except OSError:
            return ""

    def checked_out_branch(self) -> str | None:
        """The branch the person checked out in this tree (rebasectl keeps it detached), read
        from the tree's HEAD file; None when detached or not a linked tree."""
        text = self._head_file()
        return text[len("ref: refs/heads/"):] if text.startswith("ref: refs/heads/") else None

    def index(self) -> Index:
        """The work tree's own index, as an ``Index`` (stages, entries, update-index)."""
        return Index(self.runner, self.git_dir() / "index", of_worktree=True)

    def status(self, *, ignored: bool = False) -> TreeStatus:
        """What git status says; with ``ignored``, the ignored files too, one by one (what
        ``ignored`` lists, in the same process: ``traditional`` with every untracked file
        names each file of an ignored directory, as ``ls-files --others --ignored`` does).
        Unlike our other reads it may write the index back with the stat data it refreshed
        (git's own default, an optional lock skipped when another git holds it): after a
        checkout every entry can be racily clean, and a status that may not save what it
        learned hashes the whole tree again on every call (0.2 s on Megatron)."""
        out = self.runner.run(["status", "--porcelain=v2", "-z", "--untracked-files=all",
                               "--ignored=traditional" if ignored else "--ignored=no"],
                              env={"GIT_OPTIONAL_LOCKS": "1"}).stdout
        found = parse_status(out)
        if ignored and found.ignored is None:
            found.ignored = []
        return found

    def move_to(self, commit: str) -> None:
        """Index and files from HEAD to ``commit`` (a two-way merge: only changed files are
        written, and git refuses to overwrite an untracked file), then HEAD."""
        self.runner.run(["update-index", "-q", "--refresh"], check=False)  # stat info current
        self._drop_partial_checkout(commit)
        self.runner.run([*CHECKOUT, "read-tree", "-m", "-u", "HEAD", commit])
        self.set_head(commit)

    def _drop_partial_checkout(self, commit: str) -> None:
        """A ``read-tree -u`` killed mid-way has written some of the files ``commit`` adds but
        not the index that would track them: untracked, they make git refuse the same move
        forever. Such a file holds ``commit``'s content or the start of it (a write cut short);
        it is removed so the move writes it whole. Any other untracked file is the person's and
        stays, and git refuses as it would."""
        added = [p for p in self._names(["diff-tree", "-r", "-z", "--name-only", "--no-renames",
                                         "--diff-filter=A", "HEAD", commit, "--"], [])
                 if (self.path / p).is_file() and not (self.path / p).is_symlink()]
        if not added:
            return
        tracked = set(self._names(["ls-files", "-z", "--"], added))
        for path in added:
            if path not in tracked and self._reached(path, commit):
                (self.path / path).unlink()

    def discard_changes(self) -> None:
        """Back to HEAD: tracked changes, unmerged entries and files added to the index go;
        untracked files stay."""
        self.runner.run([*CHECKOUT, "reset", "--hard", "--quiet", "HEAD"])

    def restore(self, paths: Sequence[str]) -> None:
        """Exactly ``paths`` back to HEAD, index and files (unmerged entries included; a path
        HEAD lacks leaves both); every other file, tracked or not, is left as it is."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return
        in_head = set(self._names(["ls-tree", "-r", "-z", "--name-only", "HEAD", "--"], wanted))
        indexed = set(self._names(["ls-files", "-z", "--"], wanted))
        matched = [p for p in wanted if p in in_head or p in indexed]
        # git restore refuses an unmerged path HEAD lacks (a modify/delete stop, "DU"): its
        # entries are dropped and the stop's file removed, as restoring "nothing" means
        gone = [p for p in matched if p not in in_head]
        if gone:
            self.runner.run(["--literal-pathspecs", "update-index", "--force-remove", "--",
                             *gone])
            self.remove_files(gone)
        kept = [p for p in matched if p in in_head]
        if kept:
            self.runner.run(["--literal-pathspecs", "restore", "--source=HEAD", "--staged",
                             "--worktree", "--", *kept])

    def remove_files(self, paths: Sequence[str]) -> None:
        """Delete these files of the work tree (each folder checked to lie inside it; one that
        is not there, or is a folder, is left)."""
        for path in paths:
            target = Path(confined_parent(self.path, path)) / Path(path).name
            if target.is_file() or target.is_symlink():
                target.unlink()

    def _names(self, args: list[str], paths: Sequence[str]) -> list[str]:
        out = self.runner.run(["--literal-pathspecs", *args, *paths], check=False).stdout
        return [p for p in out.decode("utf-8", errors="surrogateescape").split("\0") if p]

    def in_the_way(self, target: str, also: Sequence[str],
                   status: TreeStatus | None = None) -> InTheWay:
        """The person's files that moving to ``target`` (and then writing ``also``) would
        overwrite, to be kept: tracked ones with uncommitted changes, and untracked ones where
        ``target`` adds a file or ``also`` writes one, ignored ones included (git refuses the
        first; the stop's write would replace the second unsaid). A file that already is
        ``target``'s, or the start of it, is what a move killed mid-way wrote, not an edit: a
        tracked one is put back as the index has it (a killed move never wrote the index), an
        untracked one is left for ``move_to`` to drop, so the move can run again. ``status``:
        the tree's status when the caller has just read it."""
        status = status if status is not None else self.status(ignored=True)
        hidden = status.ignored if status.ignored is not None else self.ignored()
        found = InTheWay(untracked=self._untracked_in_the_way(
            [*status.untracked, *hidden], target, also))
        changed = status.changed
        if not changed:
            return found
        moving = set(self._names(["diff-tree", "-r", "-z", "--name-only", "--no-renames",
                                  "HEAD", target, "--"], changed))
        staged = set(self._names(["diff", "--cached", "-z", "--name-only", "--no-renames",
                                  "HEAD", "--"], changed))
        for path in changed:
            if path in moving and path not in staged and self._reached(path, target):
                self.write_from_index([path])
            elif path in moving or path in also:
                found.changed.append(path)
        return found

    def _untracked_in_the_way(self, untracked: Sequence[str], target: str,
                              also: Sequence[str]) -> list[str]:
        """Untracked files at paths ``target`` adds or ``also`` names, other than a killed
        move's partial write (``target``'s content or its start)."""
        if not untracked:
            return []
        written = set(also) | set(self._names(
            ["diff-tree", "-r", "-z", "--name-only", "--no-renames", "--diff-filter=A",
             "HEAD", target, "--"], untracked))
        return [p for p in untracked if p in written and not self._reached(p, target)]

    def stashes(self) -> int:
        """How many ``git stash`` entries the tree's repository holds (``refs/stash`` is shared
        by every work tree of the mirror)."""
        return stash_count(self.runner)

    def _reached(self, path: str, target: str) -> bool:
        """Is the file at ``path`` ``target``'s content or the start of it (absent when
        ``target`` has none)?"""
        file = self.path / path
        blob = self.runner.run(["cat-file", "blob", f"{target}:{path}"], check=False)
        if blob.returncode != 0:
            return not file.exists() and not file.is_symlink()
        if not file.is_file() or file.is_symlink():
            return False
        return blob.stdout.startswith(file.read_bytes())

    def apply_index(self, diff: bytes) -> bool:
        """``git apply --index`` (exactly): files and index; False, and nothing changed, when it
        does not apply."""
        return self.runner.ok(["apply", "--index", "--whitespace=nowarn"], input=diff)

    def write_from_index(self, paths: list[str]) -> None:
        """The index's (stage 0) content of ``paths`` written to the files."""
        if paths:
            self.runner.run(["checkout-index", "-f", "-q", "--", *paths])

    def staged_markers(self, base: str) -> str | None:
        """``path:line`` of the first conflict marker staged since ``base``, if any."""
        proc = self.runner.run(["diff", "--cached", "--check", base], check=False)
        for line in proc.stdout.decode(errors="replace").splitlines():
            if "conflict marker" in line:
                return line.split(": ", 1)[0]
        return None

    def stage(self, paths: list[str]) -> None:
        """``git add -u``: the tracked paths' current content (deletions included); untracked
        files are never picked up here."""
        if paths:
            self.runner.run(["add", "-u", "--", *paths])

    def ignored(self) -> list[str]:
        """Untracked files the tree's ``.gitignore`` hides (a ``local/notes.md``, an editor's
        ``file~``): ``git status`` does not list them, yet they are the person's."""
        out = self.runner.run(["ls-files", "-z", "--others", "--ignored", "--exclude-standard"],
                              check=False).stdout
        return [p for p in out.decode("utf-8", errors="surrogateescape").split("\0") if p]

    def save_commits(self, dest: Path, known: Sequence[str]) -> int:
        """``git format-patch`` of the commits of HEAD that no ref of the mirror and none of
        ``known`` (tips of this checkout's applies) reach: work only this tree holds. An empty
        commit too (``--always``: format-patch leaves it out, and its message with it)."""
        self.runner.run(["format-patch", "--always", "--quiet", "-o", str(dest), "HEAD", "--not",
                         "--glob=refs/*", *known], check=False)
        return len(list(dest.glob("*.patch"))) if dest.is_dir() else 0

    def set_head(self, commit: str) -> None:
        self.runner.run(["update-ref", "--no-deref", "HEAD", commit])

    def rerere(self) -> list[str]:
        """Record the conflicts (and any resolutions) of the unmerged paths; returns the paths
        a recorded resolution resolved (and staged)."""
        proc = self.runner.run([*RERERE, "rerere"], check=False)
        lines = proc.stderr.decode(errors="replace").splitlines()
        return [m.group(1) for m in map(_RESOLVED.match, lines) if m]

    def rerere_forget_in_progress(self) -> None:
        """``git rerere clear``: the conflicts rerere is watching (``MERGE_RR``) are given up,
        as ``git am --skip`` gives them up. Without it the next ``git rerere`` takes the files
        put back to HEAD for the resolution of the skipped patch's conflicts, and replays that
        "resolution" (upstream's side) at the next apply: a skipped patch applied as empty.
        Resolutions recorded earlier stay."""
        self.runner.run([*RERERE, "rerere", "clear"], check=False)

    def rerere_ids(self) -> list[str]:
        """rerere's ids of the conflicts in progress (``MERGE_RR``: ``id TAB path NUL``)."""
        try:
            data = (self.git_dir() / "MERGE_RR").read_bytes()
        except OSError:
            return []
        return [rec.split(b"\t", 1)[0].decode() for rec in data.split(b"\0") if b"\t" in rec]


# -- what a killed git leaves ----------------------------------------------------------------------
_LOCK_NAMES = ("index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock",
               "shallow.lock", "MERGE_RR.lock", f"index{COPY_SUFFIX}.lock")


def stash_count(runner: Runner) -> int:
    """``git stash`` entries of the repository ``runner`` is in: ``refs/stash``'s reflog, shared
    by every work tree, so a stash outlives the tree it was made in (and ``stash list`` refuses
    a bare repository)."""
    proc = runner.run(["reflog", "show", "--format=%H", "refs/stash", "--"], check=False)
    return len(proc.stdout.split()) if proc.returncode == 0 else 0


def stale_git_locks(git_dirs: list[Path]) -> list[Path]:
    """Lock files git left in these git dirs (and their ``refs/`` and ``worktrees/*``)."""
    found: list[Path] = []
    for gd in git_dirs:
        if not gd.is_dir():
            continue
        candidates = [gd / n for n in _LOCK_NAMES]
        wt = gd / "worktrees"
        if wt.is_dir():
            candidates += [d / n for d in wt.iterdir() for n in _LOCK_NAMES]
        refs = gd / "refs"
        if refs.is_dir():
            candidates += list(refs.rglob("*.lock"))
        found += [c for c in candidates if c.exists()]
    return found


def holders(paths: list[Path]) -> dict[Path, int]:
    """Which live processes have one of ``paths`` open (Linux ``/proc``; elsewhere nothing is
    known, and the caller treats the lock as stale only when no git is running at all)."""
    wanted = {str(p.resolve()): p for p in paths}
    held: dict[Path, int] = {}
    proc = Path("/proc")
    if not proc.is_dir() or not wanted:
        return held
    for pid_dir in proc.iterdir():
        if not pid_dir.name.isdigit() or int(pid_dir.name) == os.getpid():
            continue
        try:
            fds = list((pid_dir / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target in wanted:
                held[wanted[target]] = int(pid_dir.name)
    return held


def initializing_worktrees(mirror: Path) -> list[Path]:
    """Registrations a killed ``git worktree add`` left ``locked`` ("initializing")."""
    wt = mirror / "worktrees"
    if not wt.is_dir():
        return []
    out = []
    for reg in wt.iterdir():
        lock = reg / "locked"
        try:
            if lock.is_file() and "initializing" in lock.read_text(errors="replace"):
                out.append(reg)
        except OSError:
            continue
    return out


def _registered_dotgit(reg: Path) -> Path | None:
    """The ``.git`` a registration (``worktrees/N``) names as its work tree's; a relative one
    (git 2.48+ with ``worktree.useRelativePaths``) from the registration, as git reads it."""
    try:
        named = Path((reg / "gitdir").read_text().strip())
    except OSError:
        return None
    return named if named.is_absolute() else reg / named


def _registrations(mirror: Path) -> list[tuple[Path, Path]]:
    """(registration, the ``.git`` it names) of every linked work tree of ``mirror``."""
    wt = mirror / "worktrees"
    found = [(reg, _registered_dotgit(reg)) for reg in (wt.iterdir() if wt.is_dir() else [])]
    return [(reg, dotgit) for reg, dotgit in found if dotgit is not None]


def registration(mirror: Path, path: Path) -> Path | None:
    """``mirror``'s registration of the work tree at ``path`` (a half-made one too)."""
    want = (path / ".git").resolve()
    return next((reg for reg, dotgit in _registrations(mirror) if dotgit.resolve() == want),
                None)


def linked_to(mirror: Path, path: Path) -> bool:
    """Is ``path`` a linked work tree of ``mirror``: its ``.git`` names a registration there
    (or, with no ``.git``, a registration names it)?"""
    admin = _gitdir_of(path)
    if admin is None:
        return registration(mirror, path) is not None
    return (mirror / "worktrees").resolve() in admin.resolve().parents


def half_removed_worktrees(mirror: Path) -> list[Path]:
    """Directories still registered whose ``.git`` is gone: a ``git worktree remove`` killed
    after it deleted the link and before the files (``prune`` would forget them, leaving a
    directory nobody owns)."""
    return [dotgit.parent for _, dotgit in _registrations(mirror)
            if dotgit.name == ".git" and not dotgit.exists() and dotgit.parent.is_dir()]


def _gitdir_of(path: Path) -> Path | None:
    """The admin dir a linked work tree's ``.git`` file names (None: not a linked tree): the
    one reader of the link, ``Worktree.named_admin``."""
    return Worktree(path).named_admin()


def linked_elsewhere(path: Path) -> Path | None:
    """The checkout the registration this tree's ``.git`` names belongs to, when that is
    another one (this tree was moved and a new checkout made where it was): git reading this
    tree would read that one's HEAD and index. None otherwise."""
    admin = Worktree(path).named_admin()
    named = _registered_dotgit(admin) if admin is not None and admin.is_dir() else None
    if named is None or named.resolve() == (path / ".git").resolve():
        return None
    return named.parent


def _links_back(admin: Path, path: Path) -> bool:
    """Does the registration ``admin`` (still there) name ``path`` as its work tree?"""
    named = _registered_dotgit(admin)
    return named is not None and named.resolve() == (path / ".git").resolve()


def relink_moved(mirror: Path, path: Path, root: Path) -> bool:
    """Point a work tree and its registration at each other again after ``mv`` of the checkout
    ``root`` (``mirror`` and, when inside ``root``, ``path`` moved with it; git's links are
    absolute, so both still name the old place, where another checkout may live by now).

    Only the exact picture a move leaves is relinked: the tree's ``.git`` names
    ``OLD/<mirror's place in root>/worktrees/N``, which is gone or now registers another tree
    (a checkout made at the old path), our mirror registers N, and that registration names the
    tree's old path under the same OLD. A copy of a checkout (``cp -r``) finds its state naming
    a tree that the original's mirror still owns, and leaves it alone. ``git worktree repair``
    is not used: given such a tree it rewrites the *other* checkout's links (git 2.39)."""
    admin = _gitdir_of(path)
    if admin is None or admin.parent.parent == mirror.resolve() or _links_back(admin, path):
        return False  # ours already, or another mirror's in good standing (a copied checkout)
    reg = mirror / "worktrees" / admin.name
    recorded = _registered_dotgit(reg)
    try:
        rel_mirror = mirror.resolve().relative_to(root)
    except ValueError:
        return False
    old_mirror = admin.parent.parent
    if old_mirror.parts[-len(rel_mirror.parts):] != rel_mirror.parts or \
            not (reg / "HEAD").is_file():
        return False
    old_root = Path(*old_mirror.parts[: -len(rel_mirror.parts)])
    try:
        old_path = old_root / path.resolve().relative_to(root)
    except ValueError:
        old_path = path.resolve()  # a --worktree outside the checkout stayed where it was
    if recorded != old_path / ".git":
        return False
    (path / ".git").write_text(f"gitdir: {reg.resolve()}\n")
    (reg / "gitdir").write_text(f"{(path / '.git').resolve()}\n")
    return True
