"""The only place that runs git.

Everything rebasectl does to a repository goes through ``Git``: argument lists only (never a
shell string), a fixed environment for the commands whose output must be canonical (user config
such as ``diff.algorithm`` or ``format.signature`` must not change patch bytes), and explicit
identities and dates for every commit we create so that materialising the same series twice gives
the same shas. GitPython is used to open and validate repositories; plumbing runs as subprocesses.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import git as gitpython

from .errors import GitError

NULL_SHA = "0" * 40
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

# Options that make `git diff` output canonical whatever the user's configuration says.
CANONICAL_DIFF = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--full-index",
    "--diff-algorithm=myers",
    "--unified=3",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--no-relative",
    "--ignore-submodules=none",
)

ALLOWED_PROTOCOLS = "file:git:http:https:ssh"


def hermetic_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment in which no system or global git config can change git's output."""
    env = dict(os.environ)
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_TERMINAL_PROMPT="0",
        GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS,
        LC_ALL="C",
        LANG="C",
    )
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(key, None)
    if extra:
        env.update(extra)
    return env


@dataclass(frozen=True)
class Identity:
    """Author (and, for commits we create, also committer) of a commit."""

    name: str
    email: str
    date: str  # git's raw "<unix seconds> <+hhmm>"

    def env(self) -> dict[str, str]:
        return {
            "GIT_AUTHOR_NAME": self.name,
            "GIT_AUTHOR_EMAIL": self.email,
            "GIT_AUTHOR_DATE": self.date,
            "GIT_COMMITTER_NAME": self.name,
            "GIT_COMMITTER_EMAIL": self.email,
            "GIT_COMMITTER_DATE": self.date,
        }


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    tree: str
    parents: tuple[str, ...]
    author: Identity
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n\n", 1)[0].replace("\n", " ").strip()


@dataclass(frozen=True)
class ApplyResult:
    ok: bool
    conflicted_paths: tuple[str, ...]
    stderr: str


class Git:
    """One repository (bare or with a work tree) and the git commands rebasectl needs on it."""

    def __init__(self, path: Path, *, hermetic: bool = True) -> None:
        self.path = Path(path)
        self.hermetic = hermetic

    # -- running -------------------------------------------------------------------------------
    def run(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = hermetic_env(env) if self.hermetic else {**os.environ, **(env or {})}
        try:
            proc = subprocess.run(
                ["git", *args],
                cwd=str(cwd or self.path),
                input=input,
                env=full_env,
                capture_output=True,
                check=False,
            )
        except FileNotFoundError as exc:
            raise GitError(f"cannot run git in {cwd or self.path}: {exc.strerror}") from exc
        if check and proc.returncode != 0:
            msg = proc.stderr.decode(errors="replace").strip().splitlines()
            detail = msg[-1] if msg else f"exit {proc.returncode}"
            raise GitError(f"git {args[0]} failed: {detail}")
        return proc

    def out(self, args: Sequence[str], **kw: object) -> str:
        return self.run(args, **kw).stdout.decode(errors="replace").strip()  # type: ignore[arg-type]

    # -- repositories --------------------------------------------------------------------------
    @staticmethod
    def open(path: Path) -> Git:
        """Open an existing repository (bare or not); a clear error if it is not one."""
        try:
            gitpython.Repo(str(path), search_parent_directories=False)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
            raise GitError(f"{path}: not a git repository") from None
        return Git(Path(path).resolve())

    @staticmethod
    def init_bare_clone(source: str, dest: Path) -> Git:
        Git(dest.parent).run(["clone", "--mirror", "--quiet", "--", source, str(dest)])
        return Git(dest)

    def fetch_all(self) -> None:
        self.run(["fetch", "--prune", "--quiet", "origin"])

    def set_remote_url(self, url: str) -> None:
        self.run(["remote", "set-url", "origin", "--", url])

    def remote_url(self) -> str | None:
        proc = self.run(["config", "--get", "remote.origin.url"], check=False)
        return proc.stdout.decode().strip() or None

    # -- revisions -----------------------------------------------------------------------------
    def resolve(self, rev: str) -> str | None:
        if rev.startswith("-"):
            return None
        proc = self.run(
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
            check=False,
        )
        sha = proc.stdout.decode().strip()
        return sha if proc.returncode == 0 and len(sha) == 40 else None

    def is_ancestor(self, a: str, b: str) -> bool:
        return self.run(["merge-base", "--is-ancestor", a, b], check=False).returncode == 0

    def merge_base(self, a: str, b: str) -> str | None:
        proc = self.run(["merge-base", a, b], check=False)
        return proc.stdout.decode().strip() or None

    def rev_list(
        self,
        spec: Sequence[str],
        *,
        first_parent: bool = False,
        reverse: bool = True,
        paths: Sequence[str] = (),
    ) -> list[str]:
        args = ["rev-list"]
        if first_parent:
            args.append("--first-parent")
        if reverse:
            args.append("--reverse")
        args += [*spec]
        if paths:
            args += ["--", *paths]
        out = self.out(args)
        return out.split() if out else []

    def commits(self, shas: Sequence[str]) -> list[CommitInfo]:
        """Metadata of many commits in one git process."""
        if not shas:
            return []
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%ad%x00%B%x00%x01"
        out = self.run(
            ["log", "--no-walk=unsorted", "--date=raw", f"--format={fmt}", "--stdin"],
            input="\n".join(shas).encode(),
        ).stdout
        infos: list[CommitInfo] = []
        for record in out.decode("utf-8", errors="replace").split("\x00\x01"):
            record = record.lstrip("\n")
            if not record:
                continue
            sha, tree, parents, an, ae, ad, body = record.split("\x00", 6)
            infos.append(
                CommitInfo(
                    sha,
                    tree,
                    tuple(parents.split()),
                    Identity(an, ae, ad),
                    body.rstrip("\n") + "\n",
                )
            )
        by_sha = {i.sha: i for i in infos}
        return [by_sha[s] for s in shas]

    def commit(self, sha: str) -> CommitInfo:
        return self.commits([sha])[0]

    def diff(self, old: str, new: str, paths: Sequence[str] = ()) -> bytes:
        """Canonical patch text between two trees/commits (binary diffs shown as 'Binary files')."""
        args = ["diff", *CANONICAL_DIFF, old, new]
        if paths:
            args += ["--", *paths]
        return self.run(args).stdout

    def patch_id(self, diff: bytes) -> str | None:
        if not diff.strip():
            return None
        out = self.run(["patch-id", "--stable"], input=diff).stdout.decode().split()
        return out[0] if out else None

    def cat_blob(self, rev_path: str) -> bytes | None:
        proc = self.run(["cat-file", "blob", rev_path], check=False)
        return proc.stdout if proc.returncode == 0 else None

    def tree_of(self, rev: str) -> str:
        return self.out(["rev-parse", f"{rev}^{{tree}}"])

    # -- building commits without a work tree --------------------------------------------------
    def read_tree(self, index: Path, tree: str) -> None:
        self.run(["read-tree", tree], env={"GIT_INDEX_FILE": str(index)})

    def apply_to_index(
        self, index: Path, patch: bytes, *, three_way: bool, check_only: bool = False
    ) -> ApplyResult:
        args = ["apply", "--cached", "--whitespace=nowarn"]
        if check_only:
            args.append("--check")
        if three_way:
            args.append("--3way")
        proc = self.run(args, input=patch, env={"GIT_INDEX_FILE": str(index)}, check=False)
        conflicted: tuple[str, ...] = ()
        if proc.returncode != 0 and three_way:
            conflicted = tuple(self.unmerged_paths(index))
        return ApplyResult(proc.returncode == 0, conflicted, proc.stderr.decode(errors="replace"))

    def unmerged_paths(self, index: Path | None = None) -> list[str]:
        env = {"GIT_INDEX_FILE": str(index)} if index else None
        out = self.out(["ls-files", "--unmerged", "-z"], env=env)
        paths: list[str] = []
        for entry in out.split("\0"):
            if "\t" in entry:
                path = entry.split("\t", 1)[1]
                if path not in paths:
                    paths.append(path)
        return paths

    def unmerged_stages(self, index: Path | None, path: str) -> dict[int, str]:
        env = {"GIT_INDEX_FILE": str(index)} if index else None
        out = self.out(["ls-files", "--unmerged", "-z", "--", path], env=env)
        stages: dict[int, str] = {}
        for entry in out.split("\0"):
            if "\t" in entry:
                meta = entry.split("\t", 1)[0].split()
                stages[int(meta[2])] = meta[1]
        return stages

    def write_tree(self, index: Path) -> str:
        return self.out(["write-tree"], env={"GIT_INDEX_FILE": str(index)})

    def commit_tree(
        self, tree: str, parents: Sequence[str], message: str, identity: Identity
    ) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        return self.out(args, input=message.encode(), env=identity.env())

    def update_ref(self, ref: str, sha: str) -> None:
        self.run(["update-ref", ref, sha])

    def delete_ref(self, ref: str) -> None:
        self.run(["update-ref", "-d", ref], check=False)

    # -- work trees ----------------------------------------------------------------------------
    def worktree_add(self, path: Path, commit: str) -> Git:
        self.run(["worktree", "add", "--detach", "--quiet", str(path), commit])
        return Git(path)

    def worktree_remove(self, path: Path) -> None:
        self.run(["worktree", "remove", "--force", str(path)], check=False)
        self.run(["worktree", "prune"], check=False)

    def head(self) -> str:
        return self.out(["rev-parse", "HEAD"])

    def reset_hard(self, commit: str) -> None:
        self.run(["reset", "--hard", "--quiet", commit])
        self.run(["clean", "-fdq"])

    def apply_to_worktree(self, patch: bytes) -> ApplyResult:
        proc = self.run(
            ["apply", "--index", "--3way", "--whitespace=nowarn"], input=patch, check=False
        )
        conflicted = tuple(self.unmerged_paths()) if proc.returncode != 0 else ()
        return ApplyResult(proc.returncode == 0, conflicted, proc.stderr.decode(errors="replace"))

    def stage_all(self) -> None:
        self.run(["add", "--all", "--", "."])

    def index_tree(self) -> str:
        return self.out(["write-tree"])

    def is_clean(self) -> bool:
        return not self.out(["status", "--porcelain", "--untracked-files=no"])

    # -- history questions (attribution and the report) ---------------------------------------
    def log_touching(
        self, rev_range: str, paths: Sequence[str], *, first_parent: bool
    ) -> list[str]:
        args = ["log", "--format=%H", "--reverse"]
        if first_parent:
            args.append("--first-parent")
        args += [rev_range, "--", *paths]
        out = self.out(args)
        return out.split() if out else []

    def count(self, rev_range: str) -> int:
        return int(self.out(["rev-list", "--count", rev_range]) or 0)

    def files_changed(self, old: str, new: str) -> int:
        out = self.out(["diff", "--name-only", "--no-renames", old, new])
        return len(out.splitlines()) if out else 0
