"""Reading objects: one persistent ``git cat-file --batch`` per repository, through GitPython.

The report and attribution read hundreds of blobs and commits; a process per object was most of
their time. GitPython keeps one ``cat-file --batch`` process open per repository and hands back
raw object bytes, which is exactly what we need (and all we use it for: everything else is
plumbing through ``Runner``). Commits are parsed here from their raw bytes, so a message comes
back exactly as stored (no ``%B`` reformatting) and authors keep every byte of their name.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..infra.errors import GitError
from ..model.ids import Oid, is_full
from ..model.patches import EPOCH, RAW_DATE, RawDate
from .runner import SCRUBBED, hermetic_env

os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")  # a missing git is our one-line error


@dataclass(frozen=True)
class Identity:
    """Author (and, for commits we create, also committer) of a commit."""

    name: str
    email: str
    date: RawDate  # git's raw "<unix seconds> <+hhmm>"

    def env(self) -> dict[str, str]:
        return {"GIT_AUTHOR_NAME": self.name, "GIT_AUTHOR_EMAIL": self.email,
                "GIT_AUTHOR_DATE": self.date, "GIT_COMMITTER_NAME": self.name,
                "GIT_COMMITTER_EMAIL": self.email, "GIT_COMMITTER_DATE": self.date}


@dataclass(frozen=True)
class CommitInfo:
    sha: Oid
    tree: str
    parents: tuple[Oid, ...]
    author: Identity
    message: str
    committer_date: RawDate = EPOCH

    @property
    def subject(self) -> str:
        return self.message.split("\n\n", 1)[0].replace("\n", " ").strip()

    @property
    def parent(self) -> Oid | None:
        return self.parents[0] if self.parents else None


_PERSON = re.compile(rb"^(.*?) ?<([^<>]*)> (" + RAW_DATE.encode() + rb")$")


def parse_commit(sha: str, raw: bytes) -> CommitInfo:
    """A commit object's bytes: headers (continuation lines start with a space), a blank line,
    the message (in the ``encoding`` header's charset, UTF-8 otherwise)."""
    head, _, message = raw.partition(b"\n\n")
    fields: dict[bytes, list[bytes]] = {}
    for line in head.split(b"\n"):
        if line.startswith(b" "):
            continue  # gpgsig / mergetag continuation
        key, _, value = line.partition(b" ")
        fields.setdefault(key, []).append(value)
    encoding = (fields.get(b"encoding") or [b"utf-8"])[0].decode("ascii", errors="replace")
    author = _person(fields.get(b"author", [b""])[0], encoding)
    committer = _person(fields.get(b"committer", [b""])[0], encoding)
    try:
        text = message.decode(encoding, errors="surrogateescape")
    except LookupError:
        text = message.decode("utf-8", errors="surrogateescape")
    tree = fields.get(b"tree", [b""])[0].decode()
    parents = tuple(Oid(p.decode()) for p in fields.get(b"parent", []))
    return CommitInfo(Oid(sha), tree, parents, author, text.rstrip("\n") + "\n", committer.date)


def _person(value: bytes, encoding: str) -> Identity:
    m = _PERSON.match(value)
    if m is None:
        return Identity(value.decode("utf-8", errors="replace"), "", EPOCH)
    try:
        name = m.group(1).decode(encoding, errors="surrogateescape")
    except LookupError:
        name = m.group(1).decode("utf-8", errors="surrogateescape")
    return Identity(name, m.group(2).decode("utf-8", errors="surrogateescape"),
                    RawDate(m.group(3).decode()))


@contextlib.contextmanager
def _hooks_env_aside() -> Iterator[None]:
    """GitPython's Repo reads GIT_COMMON_DIR, GIT_WORK_TREE and GIT_OBJECT_DIRECTORY from the
    environment to find the repository: where a hook set them (rare), they are set aside while
    it looks (hostile10 B8: the series repo read as "not a git repository")."""
    saved = {k: os.environ.pop(k) for k in SCRUBBED if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _common_dir(git_dir: Path) -> str:
    """The repository's common dir as git finds it from the git dir alone (a linked work tree's
    ``commondir`` file; the git dir itself otherwise), whatever GIT_COMMON_DIR says."""
    try:
        named = (git_dir / "commondir").read_text().strip()
    except OSError:
        return str(git_dir)
    return str(git_dir / named) if named else str(git_dir)


def _outright(common_dir: str) -> dict[str, str]:
    """What the runner scrubs from git's environment cannot be unset for GitPython's process
    (it starts from os.environ), so where one is set (a hook's GIT_OBJECT_DIRECTORY, a
    quarantine's alternates) each is given this repository's own value: else the mirror's
    objects would look missing, and a stop would be written without its conflict."""
    if not any(k in os.environ for k in SCRUBBED):
        return {}
    return {"GIT_COMMON_DIR": common_dir, "GIT_OBJECT_DIRECTORY": f"{common_dir}/objects",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": "", "GIT_NAMESPACE": "",
            "GIT_QUARANTINE_PATH": ""}


class Objects:
    """Blobs and commits of one repository, read through one long-lived cat-file process.
    ``path`` is where the repository was opened; ``git_dir`` its git dir when the caller knows
    it, else the one GitPython finds; the cat-file process is told it outright."""

    def __init__(self, path: Path, git_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.path = path
        self.git_dir = git_dir or path
        self._given_dir = git_dir is not None
        self._env = env or {}  # the runner's own additions (Repo.write_aside)
        self._repo: Any = None
        self._lock = threading.Lock()  # one cat-file process: one question at a time

    def _git(self) -> Any:
        if self._repo is None:
            import git as gitpython  # ~50 ms: only when objects are read

            try:
                with _hooks_env_aside():
                    self._repo = gitpython.Repo(str(self.path), odbt=gitpython.GitCmdObjectDB)
            except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
                raise GitError(f"{self.git_dir}: not a git repository") from None
            env = {k: v for k, v in hermetic_env().items() if k.startswith(("GIT_", "LC_", "LANG"))}
            # the git dir outright: GitPython guesses a work tree (the parent) for a bare
            # repository without a config file, and git would find no repository there (its
            # git dir is right: a linked work tree's own, a bare one's path)
            env["GIT_DIR"] = str(self.git_dir if self._given_dir else self._repo.git_dir)
            env.update(_outright(_common_dir(Path(env["GIT_DIR"]))))
            env.update(self._env)
            self._repo.git.update_environment(**env)
        return self._repo.git

    def read(self, spec: str) -> tuple[str, str, bytes] | None:
        """(sha, type, data) of ``spec`` (a sha or ``REV:PATH``), None when it does not exist."""
        if "\n" in spec or not spec:
            return None
        try:
            with self._lock:
                sha, kind, _, data = self._git().get_object_data(spec)
        except ValueError:
            return None
        except Exception as exc:  # GitPython's own errors: the process died, git is missing
            raise GitError(f"git cat-file failed in {self.git_dir}: {exc}") from None
        return sha.decode(), kind.decode(), bytes(data)

    def blob(self, spec: str) -> bytes | None:
        found = self.read(spec)
        return found[2] if found is not None and found[1] == "blob" else None

    def blobs(self, specs: Iterable[str]) -> dict[str, bytes | None]:
        return {spec: self.blob(spec) for spec in dict.fromkeys(specs)}

    def commit(self, rev: str) -> CommitInfo:
        found = self.read(f"{rev}^{{commit}}") if not is_full(rev) \
            else self.read(rev)
        if found is None or found[1] != "commit":
            raise GitError(f"{rev}: not a commit in {self.git_dir}")
        return parse_commit(found[0], found[2])

    def commits(self, revs: Iterable[str]) -> list[CommitInfo]:
        return [self.commit(r) for r in revs]

    def close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None
