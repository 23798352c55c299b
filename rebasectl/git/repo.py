"""One repository (the cached mirror, a user's fork, this series checkout) and what we do to it.

``Repo`` holds a ``Runner`` (plumbing), ``Objects`` (the persistent object reader), ``History``
(log, blame, patch-id) and makes scratch ``Index``es. Commits we create get the patch's author as
author *and* committer, with its date, so materialising the same series twice gives the same shas.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..infra.errors import GitError
from ..model.ids import EMPTY_TREE, Oid, is_full
from . import namespace
from .fastimport import FastImport
from .history import CANONICAL_DIFF, History
from .index import Entry, Index
from .objects import CommitInfo, Identity, Objects
from .runner import Runner, Started, ownership_refusal
from .worktree import Worktree, looks_bare, stash_count


def _reason(stderr: bytes) -> str:
    """git's message, its lines joined (``fatal: `` and hints dropped)."""
    lines = [ln.strip().removeprefix("fatal: ") for ln in stderr.decode(errors="replace")
             .splitlines()]
    return "; ".join(ln for ln in lines if ln and not ln.startswith("hint:")) or "no reason given"


def _files(ls_tree: bytes) -> dict[str, Entry]:
    """The blobs of ``ls-tree -z`` output: path -> (mode, blob); trees and submodules left out."""
    found: dict[str, Entry] = {}
    for record in ls_tree.decode("utf-8", errors="surrogateescape").split("\0"):
        if "\t" in record:
            meta, path = record.split("\t", 1)
            mode, kind, blob = meta.split()
            if kind == "blob":
                found[path] = Entry(mode, blob)
    return found


def _shallow_local(source: str) -> Path | None:
    """The git directory of ``source`` when it is a local shallow repository (bare or not):
    git's local clone copies the object files, but not from a shallow repository, which it
    packs and indexes whole instead (2 s for the Megatron snapshot every fetch uses)."""
    path = Path(source)
    if not path.is_absolute() or not path.is_dir():
        return None
    for git_dir in (path, path / ".git"):
        if (git_dir / "shallow").is_file() and (git_dir / "objects" / "pack").is_dir():
            return git_dir
    return None


def _copy_objects(git_dir: Path, dest: Path) -> None:
    """The source's packs and loose objects copied (never hard-linked: the mirror must not share
    a file with the user's repository). Anything missing, e.g. objects behind alternates, is
    fetched the ordinary way after."""
    src = git_dir / "objects"
    for item in sorted(src.iterdir()):
        if item.name == "pack":
            names = [f for f in item.iterdir() if f.suffix in (".idx", ".pack") and f.is_file()]
        elif len(item.name) == 2 and item.is_dir():
            names = [f for f in item.iterdir() if f.is_file()]
        else:
            continue
        (dest / "objects" / item.name).mkdir(exist_ok=True)
        for f in sorted(names, key=lambda f: f.suffix != ".pack"):  # each .idx after its pack
            shutil.copyfile(f, dest / "objects" / item.name / f.name)


def _seeded_clone(git_dir: Path, source: str, dest: Path) -> None:
    """What the clone + ``adopt_clone`` make, from a local shallow repository: a bare
    repository holding copies of its objects and its shallow list, whose fetch of the namespaced
    refs then finds every object present and transfers nothing."""
    Runner(dest.parent, network=True).run(["init", "--bare", "--quiet", "--template=", "--",
                                           str(dest)])  # no hooks or excludes of the person's
    _copy_objects(git_dir, dest)
    shutil.copyfile(git_dir / "shallow", dest / "shallow")
    runner = Runner(dest)
    runner.run(["config", "remote.origin.url", source])
    namespace.configure(runner)
    Runner(dest, network=True).run(["fetch", "--no-tags", "--quiet", "origin"])
    head = Runner(git_dir).run(["symbolic-ref", "-q", "HEAD"], check=False)
    namespace.adopt_head(runner, head.stdout.decode().strip())


class NotARepository(GitError):
    """A path git will not open as a repository; ``why`` is git's reason (for a caller that
    names the path its own way, e.g. ``upstream PATH: ...``)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.why = why


_ASIDE = "rebasectl-objects-"  # + the pid of the process whose folder it is


_STALE_S = 24 * 3600  # an aside folder untouched this long, its process gone, is left over


def _sweep_asides(parent: Path) -> None:
    """Remove the ``write_aside`` folders of this user's processes that are gone: a SIGTERM or
    a kill ends a process before its finalizer runs (hostile11 #10), and nothing else would.
    Only folders a day old: a pid this process cannot see may be alive in another pid
    namespace (a container sharing TMPDIR) whose report still reads its folder (hostile12 #5)."""
    for folder in parent.glob(f"{_ASIDE}*-*"):
        pid = folder.name[len(_ASIDE):].split("-", 1)[0]
        try:
            info = folder.stat()
            if not pid.isdigit() or info.st_uid != os.getuid() or \
                    time.time() - info.st_mtime < _STALE_S:
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except OSError:
            continue  # alive under another user, or the folder went meanwhile


def _alternate(objects: Path) -> bytes:
    """One line of an alternates file naming ``objects``: as it is, or C-quoted as git reads a
    line that starts with a quote (a path holding a newline, a quote or a backslash)."""
    raw = os.fsencode(objects)
    if not any(c in raw for c in (b"\n", b'"', b"\\")):
        return raw + b"\n"
    quoted = raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\n", b"\\n")
    return b'"' + quoted + b'"\n'


class Repo:
    """``upstream``: the cached mirror, whose upstream refs live in rebasectl's namespace
    (git/namespace.py): names resolve there first."""

    def __init__(self, path: Path, *, upstream: bool = False) -> None:
        self.path = Path(path)
        self.upstream = upstream
        self.fetched = False  # fetched (or cloned) by this process: no need to fetch again
        self.runner = Runner(self.path)
        self.history = History(self.runner, self.path / "rebasectl-kept" if upstream else None)
        self._objects: Objects | None = None
        self._commits: set[str] = set()  # full shas known to name commits here
        self._trees: dict[str, dict[str, Entry]] = {}  # full sha -> tree_entries' answer

    @classmethod
    def open(cls, path: Path) -> Repo:
        """An existing repository (bare or not); a one-line error when it is not one, with
        git's own reason (e.g. "detected dubious ownership")."""
        path = Path(path)
        if not path.is_dir():
            raise NotARepository(path, "not a git repository (no such directory)")
        proc = Runner(path).run(["rev-parse", "--absolute-git-dir", "--is-inside-work-tree",
                                 "--show-cdup"], check=False)
        if proc.returncode != 0:
            refusal = ownership_refusal(proc.stderr)
            raise NotARepository(path, f"git refuses it: {refusal}" if refusal else
                                 f"not a git repository as git reads it: {_reason(proc.stderr)}")
        # the git dir; "true" and the way up to the top (git prints it only inside a work tree)
        found = proc.stdout.decode(errors="surrogateescape").split("\n")
        if len(found) > 2 and found[1] == "true":
            return cls((path / found[2]).resolve())  # what --show-toplevel says, one process less
        return cls(Path(found[0]))

    @classmethod
    def clone_mirror(cls, source: str, dest: Path) -> Repo:
        """A bare clone whose fetch specs are rebasectl's namespaced ones from the start (the
        user's config applies to the transport; a local source is hard-linked), then the
        branches a bare clone also copies dropped and HEAD pointed into the namespace, before
        anyone uses the clone."""
        seed = _shallow_local(source)
        if seed is not None:
            _seeded_clone(seed, source, dest)
        else:
            specs = [arg for spec in namespace.FETCH_SPECS
                     for arg in ("-c", f"remote.origin.fetch={spec}")]
            Runner(dest.parent, network=True).run(["clone", "--bare", "--no-tags", "--quiet",
                                                   "--template=",
                                                   "--origin", "origin", *specs, "--", source,
                                                   str(dest)])  # origin whatever the config
            namespace.adopt_clone(Runner(dest))
        repo = cls(dest, upstream=True)
        repo.fetched = True
        return repo

    def fetch(self) -> None:
        """The upstream's branches and tags into rebasectl's namespace only (a mirror of an
        older layout is reconfigured first): ``--prune`` deletes only refs a fetch made."""
        namespace.configure(self.runner)
        Runner(self.path, network=True).run(["fetch", "--prune", "--no-tags", "--quiet",
                                             "origin"])
        self.history.forget()
        self.fetched = True

    def remote_url(self) -> str | None:
        proc = self.runner.run(["config", "--get", "remote.origin.url"], check=False)
        return proc.stdout.decode().strip() or None

    def head_branch(self) -> str | None:
        """The branch HEAD names (a bare mirror's default branch), None when detached."""
        proc = self.runner.run(["symbolic-ref", "--short", "-q", "HEAD"], check=False)
        return proc.stdout.decode().strip() or None

    def set_remote_url(self, url: str) -> None:
        self.runner.run(["remote", "set-url", "origin", "--", url])

    @property
    def objects(self) -> Objects:
        if self._objects is None:  # the git dir when known; GitPython finds it otherwise
            self._objects = Objects(self.path, getattr(self, "_git_dir", None),
                                    self.runner.extra)
        return self._objects

    def write_aside(self) -> None:
        """Objects written from now on (a materialised side, a 3-way apply's blobs, a merge's
        trees) go to a temporary object directory that reads this repository's, removed when
        this Repo goes: a report reads someone's repository (``--repo``, a shared read-only
        mirror, the user's checkout) and must neither write there nor fail where it cannot."""
        found = self.runner.path(["rev-parse", "--git-path", "objects"])
        aside = Path(tempfile.mkdtemp(prefix=f"{_ASIDE}{os.getpid()}-"))
        weakref.finalize(self, shutil.rmtree, aside, True)
        _sweep_asides(aside.parent)
        (aside / "pack").mkdir()
        (aside / "info").mkdir()
        # an alternates file takes one path per line; GIT_ALTERNATE_OBJECT_DIRECTORIES would
        # split a path at ':' (hostile11 #6: a repository under "a:b" read as empty)
        (aside / "info" / "alternates").write_bytes(_alternate(self.path / found))
        self.runner.extra.update(GIT_OBJECT_DIRECTORY=str(aside))
        if self._objects is not None:
            self._objects.close()
            self._objects = None

    # -- revisions and trees -------------------------------------------------------------------
    def resolve(self, rev: str) -> Oid | None:
        """The commit ``rev`` names, or None (an option-like ``rev`` names nothing)."""
        if not rev or rev.startswith("-"):
            return None
        if rev in self._commits:  # a full sha asked again (a commit does not stop being one)
            return Oid(rev)
        if self.upstream:
            rev = namespace.dwim(self.runner, rev)
        proc = self.runner.run(["rev-parse", "--verify", "--quiet", "--end-of-options",
                                f"{rev}^{{commit}}"], check=False)
        sha = proc.stdout.decode().strip()
        if proc.returncode != 0 or not is_full(sha):
            return None
        if sha == rev:
            self._commits.add(sha)
        return Oid(sha)

    def upstream_refs(self) -> dict[str, str]:
        """The upstream's branches and tags in the namespace: ref -> sha."""
        out = self.runner.out(["for-each-ref", "--format=%(refname) %(objectname)",
                               namespace.UPSTREAM_REFS])
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def on_upstream(self, sha: str) -> bool:
        """Whether a branch or tag of the upstream (``namespace.UPSTREAM_REFS``) contains
        ``sha``; True for a mirror of the older layout, whose upstream refs are not told apart
        from the person's."""
        if not self.upstream:
            return True
        ns = namespace.UPSTREAM_REFS
        if not self.runner.out(["for-each-ref", "--count=1", "--format=%(refname)", ns]):
            return True
        return bool(self.runner.out(["for-each-ref", "--count=1", "--format=%(refname)",
                                     "--contains", sha, ns]))

    def tree_of(self, rev: str) -> str:
        return self.runner.out(["rev-parse", f"{rev}^{{tree}}"])

    def commit(self, rev: str) -> CommitInfo:
        return self.objects.commit(rev)

    def commits(self, revs: Sequence[str]) -> list[CommitInfo]:
        return self.objects.commits(revs)

    def missing_objects(self, shas: Sequence[str]) -> list[str]:
        """Those of ``shas`` (full or abbreviated) the repository does not have (one
        ``cat-file --batch-check``)."""
        wanted = list(dict.fromkeys(s for s in shas if s))
        if not wanted:
            return []
        out = self.runner.run(["cat-file", "--batch-check"],
                              input="".join(f"{s}\n" for s in wanted).encode()).stdout
        return [ln.split()[0] for ln in out.decode(errors="replace").splitlines()
                if ln.endswith((" missing", " ambiguous"))]

    def entries_at(self, rev: str, paths: Sequence[str]) -> dict[str, Entry]:
        """path -> (mode, blob) at ``rev`` for those of ``paths`` that are files there."""
        if not paths:
            return {}
        return _files(self.runner.run(["ls-tree", "-z", "--full-tree", rev, "--", *paths]).stdout)

    def tree_entries(self, rev: str) -> dict[str, Entry]:
        """Every file of ``rev``'s tree (``ls-tree -r``): path -> (mode, blob). A full sha's
        answer is kept for this process (apply asks it of the base twice: materialising and the
        link check); each caller gets its own dict."""
        if rev in self._trees:
            return dict(self._trees[rev])
        found = _files(self.runner.run(["ls-tree", "-r", "-z", "--full-tree", rev]).stdout)
        if is_full(rev):
            self._trees[rev] = found
        return dict(found)

    def hash_blobs(self, contents: Sequence[bytes]) -> list[str]:
        """Write blobs; their shas (one process for all)."""
        if not contents:
            return []
        with tempfile.TemporaryDirectory(prefix="rebasectl-blobs-") as tmp:
            paths = []
            for k, data in enumerate(contents):
                paths.append(Path(tmp) / str(k))
                paths[-1].write_bytes(data)
            out = self.runner.out(["hash-object", "-w", "--stdin-paths", "--no-filters"],
                                  input="\n".join(map(str, paths)).encode())
        return out.split()

    def diff(self, old: str, new: str, paths: Sequence[str] = ()) -> bytes:
        """Canonical diff between two trees or commits (binary changes as 'Binary files')."""
        return self.runner.run(["diff", *CANONICAL_DIFF, old, new, "--", *paths]).stdout

    def commit_diff(self, info: CommitInfo) -> bytes:
        return self.diff(info.parent or EMPTY_TREE, info.sha)

    def files_changed(self, old: str, new: str) -> int:
        """Files changed between two trees, counted as ``git diff --shortstat old new`` counts
        them (renames detected, git's default: a moved file is one file, not two), so the
        number a person checks with git is the number the report gives."""
        out = self.runner.out(["diff", "--name-only", "-z", "-M", old, new])
        return len([p for p in out.split("\0") if p])

    # -- writing objects -----------------------------------------------------------------------
    def commit_tree(self, tree: str, parents: Sequence[str], message: str,
                    identity: Identity) -> Oid:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return Oid(self.runner.out(args, input=message.encode("utf-8", errors="surrogateescape"),
                               env=identity.env()))

    def hash_blob(self, data: bytes) -> str:
        return self.runner.out(["hash-object", "-w", "--stdin"], input=data)

    def merge_file(self, ours: bytes, base: bytes, theirs: bytes,
                   labels: tuple[str, str, str]) -> tuple[bytes, int]:
        """``git merge-file -p --diff3``: the merged text with conflict markers, and how many
        conflicts it has (git's own 3-way merge, the one ``git apply -3`` uses)."""
        with tempfile.TemporaryDirectory(prefix="rebasectl-merge-") as tmp:
            names = []
            for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                (Path(tmp) / name).write_bytes(data)
                names.append(str(Path(tmp) / name))
            args = ["merge-file", "-p", "--diff3"]
            for label in labels:
                args += ["-L", label]
            proc = self.runner.run([*args, *names], check=False)
        if not 0 <= proc.returncode <= 127:
            raise GitError(f"git merge-file failed: {proc.stderr.decode(errors='replace')}")
        return proc.stdout, proc.returncode

    def apply3(self, path: str, ours: Entry, diff: bytes) -> bytes | None:
        """The file ``git apply --3way`` leaves when ``diff`` (one file's diff) meets ``ours``:
        conflict markers (diff3 style, git's labels ``ours``/``base``/``theirs``) exactly where
        git's own 3-way merge puts them; None when it does not conflict. rerere is off: on a
        conflict ``apply --3way`` runs it, and it would put a recorded resolution in place of the
        markers (and record this scratch conflict in the mirror's rr-cache)."""
        with tempfile.TemporaryDirectory(prefix="rebasectl-apply3-") as tmp:
            work = Path(tmp) / "work"
            work.mkdir()
            index = Path(tmp) / "index"
            env = {"GIT_DIR": str(self.git_dir()), "GIT_WORK_TREE": str(work)}
            runner = self._runner_in(work)
            runner.run(["update-index", "-z", "--index-info"], env=env, index=index,
                       input=f"{ours.mode} {ours.blob}\t{path}\0".encode(
                           "utf-8", errors="surrogateescape"))
            runner.run(["checkout-index", "-u", "-f", "--", path], env=env, index=index)
            proc = runner.run(["-c", "merge.conflictStyle=diff3", "-c", "rerere.enabled=false",
                               "apply", "--3way",
                               "--whitespace=nowarn"], input=diff, env=env, index=index,
                              check=False)
            if proc.returncode == 0:
                return None
            target = work / path
            return target.read_bytes() if target.is_file() else None

    def marked(self, index: Index, paths: Sequence[str]) -> dict[str, bytes]:
        """path -> the file with conflict markers (diff3 style, git's labels ``ours``/``base``/
        ``theirs``) that git's 3-way merge writes for each unmerged path of ``index``: what
        ``apply3`` gives, for many files in one process (``checkout --conflict=diff3`` runs the
        same merge as ``apply --3way``, on the stages the apply left). Paths git wrote nothing
        for are left out."""
        with tempfile.TemporaryDirectory(prefix="rebasectl-marked-") as tmp:
            env = {"GIT_DIR": str(self.git_dir()), "GIT_WORK_TREE": tmp}
            proc = self._runner_in(Path(tmp)).run(
                ["checkout", "--conflict=diff3", "--", *paths], env=env,
                index=index.path.resolve(), check=False)
            if proc.returncode != 0:
                return {}
            return {p: (Path(tmp) / p).read_bytes() for p in paths if (Path(tmp) / p).is_file()}

    def _runner_in(self, cwd: Path) -> Runner:
        """A runner for a scratch work tree of this repository (its objects go where this
        repository's go: ``write_aside``)."""
        runner = Runner(cwd)
        runner.extra.update(self.runner.extra)
        return runner

    def stash_count(self) -> int:
        """``git stash`` entries kept in this repository (worktree.stash_count)."""
        return stash_count(self.runner)

    def git_dir(self) -> Path:
        """Where git keeps this repository: the mirror is a bare repository, its own git dir
        (no process asked); anything else as git finds it."""
        if not hasattr(self, "_git_dir"):
            bare = self.path.resolve() if self.upstream and looks_bare(self.path) else None
            self._git_dir = bare or self.runner.path(["rev-parse", "--absolute-git-dir"])
        return self._git_dir

    def rerere_replay(self, index: Index, files: dict[str, bytes]) -> dict[str, bytes]:
        """Recorded resolutions (``rr-cache``) for the conflicted ``files`` (path -> content with
        markers) of ``index``: ``git rerere`` run on a scratch work tree holding just those
        files. Returns path -> resolved content for the paths it resolved (and stages them)."""
        if not files or not (self.path / "rr-cache").is_dir():
            return {}
        with tempfile.TemporaryDirectory(prefix="rebasectl-rerere-") as tmp:
            for path, data in files.items():
                target = Path(tmp) / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
            # rerere opens the conflicted files from the current directory, not --work-tree
            proc = self.runner.run(["-C", tmp, "--git-dir", str(self.git_dir()),
                                    "--work-tree", tmp, "-c", "rerere.enabled=true",
                                    "-c", "rerere.autoUpdate=true", "rerere"], check=False,
                                   index=index.path.resolve())
            (self.path / "MERGE_RR").unlink(missing_ok=True)  # no rerere "in progress" here
            said = proc.stderr.decode(errors="replace")
            return {path: (Path(tmp) / path).read_bytes() for path in files
                    if f"'{path}' using previous resolution" in said}

    def forget_rerere(self, ids: list[str]) -> int:
        """Drop rerere's records of these conflicts; returns how many. An id is ``<hash>`` or
        ``<hash>.<n>`` (the n-th variant, ``preimage.<n>`` in ``rr-cache/<hash>``, which rerere
        makes when one conflict text is met again); every variant of the hash goes, since any
        of them would resolve that conflict the forgotten way."""
        gone = 0
        for rid in ids:
            conflict, _, variant = rid.partition(".")
            named = is_full(conflict) and (not variant or variant.isdecimal())
            folder = self.path / "rr-cache" / conflict if named else None
            if folder is not None and folder.is_dir():
                shutil.rmtree(folder)
                gone += 1
        return gone

    # -- what the door hands out (callers never take the runner out to build these) -----------
    @contextmanager
    def index(self) -> Iterator[Index]:
        with Index.scratch(self.runner) as idx:
            yield idx

    def index_at(self, path: Path) -> Index:
        """A scratch index in a file the caller owns (one per worker of a parallel scan)."""
        return Index(self.runner, path)

    def fast_import(self) -> FastImport:
        """One ``git fast-import`` stream into this repository."""
        return FastImport(self.runner)

    def add_worktree(self, path: Path, commit: str) -> Worktree:
        """A work tree of this repository at ``path``, checked out at ``commit``."""
        return Worktree.add(self.runner, path, commit)

    def start_worktree(self, path: Path, commit: str) -> Started:
        """``add_worktree`` started, not waited for (its checkout runs while Python works)."""
        return Worktree.start_add(self.runner, path, commit)

    def remove_worktree(self, path: Path) -> None:
        Worktree.remove(self.runner, path)

    def prune_worktrees(self) -> None:
        Worktree.prune(self.runner)

    def close(self) -> None:
        if self._objects is not None:
            self._objects.close()
