"""Real git repositories for tests, built in tmp dirs with a deterministic clock.

``Repo`` wraps one repository whose clock advances one minute per commit, so every history built
from the same calls has the same shas. ``git`` runs one git command that must succeed (its
``CompletedProcess`` is returned for the callers that read stderr or bytes).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def git(path: Path, *args: str, check: bool = True, input: bytes | str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``git -C path ARGS``; output decoded as UTF-8 (bytes git printed that are not UTF-8 kept
    as surrogates); with ``check`` a failure is an AssertionError naming it."""
    raw = subprocess.run(["git", "-C", str(path), *args], capture_output=True,
                         input=input.encode() if isinstance(input, str) else input,
                         env={**os.environ, **(env or {})}, check=False)
    proc = subprocess.CompletedProcess(raw.args, raw.returncode,
                                       raw.stdout.decode("utf-8", "surrogateescape"),
                                       raw.stderr.decode("utf-8", "surrogateescape"))
    if check:
        assert proc.returncode == 0, (args, proc.stderr)
    return proc


def git_out(path: Path, *args: str, input: bytes | str | None = None,
            env: dict[str, str] | None = None) -> str:
    """The stripped stdout of a git command that must succeed."""
    return git(path, *args, input=input, env=env).stdout.strip()


class Repo:
    def __init__(self, path: Path, *, bare: bool = False) -> None:
        self.path = path
        self.clock = 1767225600
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", *(["--bare"] if bare else []), "-b", "main")

    @classmethod
    def existing(cls, path: Path) -> Repo:
        """A repository that is already there (the real mirror, a work tree rebasectl made)."""
        repo = cls.__new__(cls)
        repo.path, repo.clock = path, 1767225600
        return repo

    def git(self, *args: str, input: bytes | None = None) -> str:
        env = dict(os.environ)
        stamp = f"{self.clock} +0000"
        env.update(GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        proc = subprocess.run(["git", *args], cwd=self.path, env=env, input=input,
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
        return proc.stdout.decode().strip()

    def write(self, files: dict[str, str | None]) -> None:
        for rel, content in files.items():
            target = self.path / rel
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)

    def commit(self, message: str, files: dict[str, str | None] | None = None, *,
               author: str | None = None, allow_empty: bool = False) -> str:
        """Stage everything (``add -A``) and commit it; the new commit's sha. One git process
        where the work tree has no file the index lacks (``commit -a`` stages the rest as
        ``add -A`` does), two otherwise; the sha is read from the ref's file (``head``)."""
        self.clock += 60
        if files:
            self.write(files)
        args = ["commit", "-q", "-m", message]
        if _all_tracked(self.path):
            args.append("-a")  # with no untracked file, what `add -A` stages is what -a does
        else:
            self.git("add", "-A")
        if allow_empty:
            args.append("--allow-empty")
        if author:
            args += ["--author", author]
        self.git(*args)
        return self.head()

    def head(self) -> str:
        """``git rev-parse HEAD``, read from the files git keeps where they answer it alone (a
        detached HEAD, or the loose ref HEAD names, which wins over packed-refs as it does for
        git): most commits of the suite's histories asked a git process only for this."""
        return _loose_head(self.path) or self.git("rev-parse", "HEAD")

    def tree(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", f"{rev}^{{tree}}")

    def checkout(self, *args: str) -> None:
        self.git("checkout", "-q", *args)

    def branch(self, name: str, rev: str = "HEAD") -> None:
        self.git("branch", "-f", name, rev)


def borrowing(mirror: Path, path: Path) -> Path:
    """A bare repository at ``path`` that reads ``mirror``'s packs (alternates, and its shallow
    list so history walks stop where the mirror's do) and writes its own: what a test needs to
    merge, apply 3-way or commit on the real upstream without writing into the shared mirror,
    which is read-only to everyone (conftest checks that a run leaves it as it found it).
    Only the packs: the mirror's history is packed, and loose objects there are what earlier
    runs wrote before that check existed; seen, they would let a test pass on blobs the tool
    should have made itself (hostile11 #9)."""
    git(path.parent, "init", "-q", "--bare", str(path))
    packs = path / "borrowed"
    packs.mkdir()
    (packs / "pack").symlink_to(mirror.resolve() / "objects" / "pack")
    (path / "objects" / "info" / "alternates").write_text(f"{packs}\n")
    if (mirror / "shallow").is_file():
        (path / "shallow").write_bytes((mirror / "shallow").read_bytes())
    return path


def _index_paths(index: Path) -> set[str] | None:
    """The paths of a version 2 or 3 index at stage 0 (sha-1), or None where it is anything
    else (another version or hash, a conflict stage, a file not read whole): then git is asked."""
    try:
        data = index.read_bytes()
    except OSError:
        return None
    if len(data) < 12 or data[:4] != b"DIRC" or int.from_bytes(data[4:8], "big") not in (2, 3):
        return None
    paths: set[str] = set()
    at = 12
    for _ in range(int.from_bytes(data[8:12], "big")):
        if at + 62 > len(data):
            return None
        flags = int.from_bytes(data[at + 60:at + 62], "big")
        if flags & 0x3000:  # a conflict stage
            return None
        start = at + 62 + (2 if flags & 0x4000 else 0)
        end = data.find(b"\0", start)
        if end < 0:
            return None
        paths.add(os.fsdecode(data[start:end]))
        at += (end - at + 8) // 8 * 8  # 1 to 8 NULs pad the entry to a multiple of 8
    return paths


def _all_tracked(path: Path) -> bool:
    """Whether every file and symlink of the work tree at ``path`` is in its index (a
    repository with a ``.git`` folder; a nested repository or anything unexpected is False)."""
    dot = path / ".git"
    if not dot.is_dir() or (dot / "config").is_file() and "objectformat" in \
            (dot / "config").read_text():
        return False
    tracked = _index_paths(dot / "index")
    if tracked is None:
        return False
    for root, dirs, names in os.walk(path):
        here = Path(root)
        if here == path:
            dirs.remove(".git")
        elif ".git" in dirs or ".git" in names:
            return False
        links = [d for d in dirs if (here / d).is_symlink()]
        for name in [*names, *links]:
            if (here / name).relative_to(path).as_posix() not in tracked:
                return False
    return True


def _git_dir(path: Path) -> Path | None:
    dot = path / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():
        text = dot.read_text()
        if text.startswith("gitdir: "):
            found = Path(text[len("gitdir: "):].strip())
            return found if found.is_absolute() else path / found
        return None
    return path if (path / "HEAD").is_file() and (path / "objects").is_dir() else None


def _loose_head(path: Path) -> str | None:
    """HEAD's sha from the repository's files, or None where they do not answer it alone (no
    loose ref, a symbolic ref to a symbolic ref, anything unexpected): then git is asked."""
    gitdir = _git_dir(path)
    if gitdir is None or os.environ.get("GIT_DIR"):
        return None
    try:
        head = (gitdir / "HEAD").read_text().strip()
        if _OID.fullmatch(head):
            return head
        if not head.startswith("ref: refs/"):
            return None
        ref = head[len("ref: "):]
        common = gitdir
        if (gitdir / "commondir").is_file():
            common = gitdir / (gitdir / "commondir").read_text().strip()
        for where in (gitdir, common):
            if (where / ref).is_file():
                value = (where / ref).read_text().strip()
                return value if _OID.fullmatch(value) else None
    except OSError:
        return None
    return None


def lines(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


def tree_of(path: Path, rev: str = "HEAD") -> str:
    return Repo.existing(path).tree(rev)


def head_of(path: Path) -> str:
    return Repo.existing(path).head()
