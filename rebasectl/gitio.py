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


def network_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """For clone and fetch: the user's git config applies (``url.<base>.insteadOf``, proxies,
    credentials), but only the allowed transports, and never a prompt."""
    env = dict(os.environ)
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
        env.pop(key, None)
    if extra:
        env.update(extra)
    return env


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
        full_env = hermetic_env(env) if self.hermetic else network_env(env)
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
        import git as gitpython  # imported here: it costs ~45 ms at startup

        try:
            gitpython.Repo(str(path), search_parent_directories=False)
        except (gitpython.InvalidGitRepositoryError, gitpython.NoSuchPathError):
            raise GitError(f"{path}: not a git repository") from None
        return Git(Path(path).resolve())

    @staticmethod
    def init_bare_clone(source: str, dest: Path) -> Git:
        # the user's config applies to talking to the upstream (url.<base>.insteadOf, proxies)
        Git(dest.parent, hermetic=False).run(["clone", "--mirror", "--quiet", "--", source,
                                              str(dest)])
        return Git(dest)

    def fetch_all(self) -> None:
        Git(self.path, hermetic=False).run(["fetch", "--prune", "--quiet", "origin"])

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
        # parallel checkout (one worker per core): the checkout is most of an apply's time
        self.run(["-c", "checkout.workers=0", "worktree", "add", "--detach", "--quiet", str(path),
                  commit])
        return Git(path)

    def worktree_remove(self, path: Path) -> None:
        self.run(["worktree", "remove", "--force", str(path)], check=False)
        self.run(["worktree", "prune"], check=False)

    def head(self) -> str:
        return self.out(["rev-parse", "HEAD"])

    def reset_hard(self, commit: str) -> None:
        self.run(["-c", "checkout.workers=0", "reset", "--hard", "--quiet", commit])
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

    # -- report: pickaxe, blame, dates ---------------------------------------------------------
    def pickaxe(self, rev_range: str, needle: str, path: str) -> list[str]:
        """Commits in ``rev_range`` (oldest first, side branches included) that changed the
        number of occurrences of ``needle`` in ``path``."""
        out = self.out(["log", "--format=%H", "--reverse", "--no-renames", f"-S{needle}",
                        rev_range, "--", path])
        return out.split() if out else []

    def blame_commits(self, rev: str, path: str, ranges: Sequence[tuple[int, int]], *,
                      since: str | None = None, reverse: bool = False) -> list[str]:
        """For each line in ``ranges`` (1-based, inclusive) of ``path`` at ``rev``, the commit
        blame names (``--reverse``: the last commit where the line still was); lines older than
        ``since`` come back as ``since`` itself (boundary)."""
        if not ranges:
            return []
        args = ["blame", "--porcelain", "--no-progress"]
        for start, end in ranges:
            args += ["-L", f"{start},{end}"]
        if reverse:
            args += ["--reverse", f"{since}..{rev}"]
        elif since:
            args.append(f"{since}..{rev}")
        else:
            args.append(rev)
        proc = self.run([*args, "--", path], check=False)
        if proc.returncode != 0:
            return []
        shas: list[str] = []
        boundary: set[str] = set()
        current = ""
        for line in proc.stdout.decode(errors="replace").split("\n"):
            head = line.split(" ", 1)[0]
            if len(head) == 40 and all(c in "0123456789abcdef" for c in head):
                current = head
                shas.append(current)
            elif line == "boundary":
                boundary.add(current)
        return [since if (s in boundary and since) else s for s in shas]

    def first_touching_after(self, rev_range: str, path: str) -> str | None:
        """The oldest commit in ``rev_range`` (ancestry path) that changed ``path``."""
        out = self.out(["log", "--format=%H", "--reverse", "--ancestry-path", rev_range, "--",
                        path])
        return out.split()[0] if out else None

    def committer_date(self, rev: str) -> str:
        """Committer date of ``rev`` in strict ISO 8601."""
        return self.out(["log", "-1", "--format=%cI", rev, "--"])

    # -- attribution (bump / blame) -------------------------------------------------------------
    def parents_in(self, rev_range: str) -> dict[str, tuple[str, ...]]:
        """Every commit of ``rev_range`` (all branches of it) -> its parents."""
        out = self.out(["rev-list", "--parents", rev_range])
        return {f[0]: tuple(f[1:]) for f in (ln.split() for ln in out.splitlines()) if f}

    def blobs_at(self, rev: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
        """path -> (mode, blob) at ``rev`` for those of ``paths`` that exist there."""
        if not paths:
            return {}
        out = self.run(["ls-tree", "-z", "--full-tree", rev, "--", *paths]).stdout.decode()
        found: dict[str, tuple[str, str]] = {}
        for entry in out.split("\0"):
            if "\t" in entry:
                meta, path = entry.split("\t", 1)
                mode, kind, blob = meta.split()
                if kind == "blob":
                    found[path] = (mode, blob)
        return found

    def raw_changes(self, rev_range: str, paths: Sequence[str], *,
                    first_parent: bool) -> list[tuple[str, dict[str, tuple[str, str] | None]]]:
        """Oldest first: (commit, {path: (mode, new blob) or None when deleted}) for each commit of
        ``rev_range`` that changes ``paths`` (a merge on the first-parent chain: vs. its first
        parent)."""
        args = ["log", "--reverse", "--raw", "--no-abbrev", "--no-renames", "--format=%x00%H"]
        if first_parent:
            args.append("--first-parent")
        out = self.run([*args, rev_range, "--", *paths]).stdout.decode(errors="replace")
        result: list[tuple[str, dict[str, tuple[str, str] | None]]] = []
        for record in out.split("\0")[1:]:
            lines = record.strip("\n").splitlines()
            if not lines:
                continue
            changes: dict[str, tuple[str, str] | None] = {}
            for ln in lines[1:]:
                if not ln.startswith(":") or "\t" not in ln:
                    continue
                meta, path = ln[1:].split("\t", 1)
                _, new_mode, _, new_blob, status = meta.split()[:5]
                changes[path] = None if status.startswith("D") else (new_mode, new_blob)
            result.append((lines[0].strip(), changes))
        return result

    def index_from_entries(self, index: Path, entries: Mapping[str, tuple[str, str]]) -> None:
        """A fresh index holding only ``entries`` (path -> (mode, blob)): a sparse stage on which
        ``git apply --cached`` decides exactly as on the full tree for those paths."""
        index.unlink(missing_ok=True)
        data = "".join(f"{mode} {blob}\t{path}\0" for path, (mode, blob) in sorted(entries.items()))
        self.run(["update-index", "-z", "--index-info"], input=data.encode(),
                 env={"GIT_INDEX_FILE": str(index)})

    def applies_to_index(self, index: Path, patch: bytes, *, three_way: bool) -> bool:
        """``apply_to_index`` for a yes/no answer: the same apply, without listing conflicts."""
        args = ["apply", "--cached", "--whitespace=nowarn", *(["--3way"] if three_way else [])]
        proc = self.run(args, input=patch, env={"GIT_INDEX_FILE": str(index)}, check=False)
        return proc.returncode == 0

    def applies_files(self, index: Path, files: Sequence[Path]) -> bool:
        """Whether the patch files apply exactly, in order, one on top of the other (all or
        nothing: the index is unchanged when any does not)."""
        proc = self.run(["apply", "--cached", "--whitespace=nowarn", "--", *map(str, files)],
                        env={"GIT_INDEX_FILE": str(index)}, check=False)
        return proc.returncode == 0

    def reverse_applies(self, index: Path, patch: bytes) -> bool:
        proc = self.run(["apply", "--cached", "--check", "--reverse", "--whitespace=nowarn"],
                        input=patch, env={"GIT_INDEX_FILE": str(index)}, check=False)
        return proc.returncode == 0

    def blame_reverse(self, old: str, new: str, path: str,
                      ranges: Sequence[tuple[int, int]]) -> dict[int, str]:
        """For lines of ``path`` at ``old``: the last commit of ``old..new`` in which each line
        still existed (``new`` itself when it survived)."""
        return self._blame(["--reverse"], old, new, path, ranges)

    def blame_forward(self, old: str, new: str, path: str,
                      ranges: Sequence[tuple[int, int]]) -> dict[int, str]:
        """For lines of ``path`` at ``new``: the commit that wrote each (side branches of merges
        included); lines older than ``old`` come back as a boundary commit outside the range."""
        return self._blame([], old, new, path, ranges)

    def _blame(self, extra: Sequence[str], old: str, new: str, path: str,
               ranges: Sequence[tuple[int, int]]) -> dict[int, str]:
        """{line number in the blamed file: commit} from ``git blame --porcelain``."""
        args = ["blame", "--porcelain", *extra, f"{old}..{new}"]
        for start, end in ranges:
            args += ["-L", f"{start},{end}"]
        proc = self.run([*args, "--", path], check=False)
        found: dict[int, str] = {}
        if proc.returncode != 0:
            return found
        for ln in proc.stdout.decode(errors="replace").splitlines():
            parts = ln.split()  # header: sha, line in the commit, line in the blamed file, [n]
            if len(parts) >= 3 and len(parts[0]) == 40 and all(c in "0123456789abcdef"
                                                                for c in parts[0]):
                found[int(parts[2])] = parts[0]
        return found

    def log_patches(self, rev_range: str, paths: Sequence[str], *,
                    no_merges: bool = True) -> list[tuple[str, bytes]]:
        """(commit, its diff limited to ``paths``) for the commits of ``rev_range`` touching
        them, newest first."""
        args = ["log", "-p", *CANONICAL_DIFF, "--format=%x00%x01%H"]
        if no_merges:
            args.append("--no-merges")
        out = self.run([*args, rev_range, "--", *paths]).stdout
        result: list[tuple[str, bytes]] = []
        for record in out.split(b"\0\x01")[1:]:
            head, _, body = record.partition(b"\n")
            result.append((head.decode().strip(), body.strip(b"\n") + b"\n"))
        return result

    def patch_ids_of(self, diffs: Sequence[tuple[str, bytes]]) -> dict[str, str]:
        """patch-id (stable) -> commit for (commit, diff) pairs, in one git process; for a
        patch-id several commits share (a cherry-pick), the last of ``diffs`` (with ``git log``
        order, the oldest: the one that landed it first)."""
        text = b"".join(b"commit " + sha.encode() + b"\n" + diff for sha, diff in diffs if diff)
        if not text:
            return {}
        out = self.run(["patch-id", "--stable"], input=text).stdout.decode().split("\n")
        ids: dict[str, str] = {}
        for ln in out:
            parts = ln.split()
            if len(parts) == 2:
                ids[parts[0]] = parts[1]
        return ids

    def merge_file(self, ours: bytes, base: bytes, theirs: bytes,
                   labels: tuple[str, str, str]) -> tuple[bytes, int]:
        """``git merge-file -p --diff3``: the merged text with conflict markers, and how many
        conflicts it has."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="rebasectl-merge-") as tmp:
            names = []
            for name, data in (("ours", ours), ("base", base), ("theirs", theirs)):
                path = Path(tmp) / name
                path.write_bytes(data)
                names.append(str(path))
            args = ["merge-file", "-p", "--diff3"]
            for label in labels:
                args += ["-L", label]
            proc = self.run([*args, *names], check=False)
        if proc.returncode < 0 or proc.returncode > 127:
            raise GitError(f"git merge-file failed: {proc.stderr.decode(errors='replace')}")
        return proc.stdout, proc.returncode

    def patch_ids_by_commit(self, diffs: Sequence[tuple[str, bytes]]) -> dict[str, str]:
        """commit -> stable patch-id for (commit, diff) pairs, in one git process (commits with
        an empty diff have none)."""
        text = b"".join(b"commit " + sha.encode() + b"\n" + diff for sha, diff in diffs
                        if diff.strip())
        if not text:
            return {}
        out = self.run(["patch-id", "--stable"], input=text).stdout.decode().split("\n")
        return {parts[1]: parts[0] for parts in (ln.split() for ln in out) if len(parts) == 2}

    def cat_blobs(self, specs: Sequence[str]) -> dict[str, bytes | None]:
        """``REV:PATH`` -> blob bytes (None when missing or not a blob), in one git process."""
        wanted = [s for s in dict.fromkeys(specs) if "\n" not in s]
        if not wanted:
            return {}
        out = self.run(["cat-file", "--batch"], input=("\n".join(wanted) + "\n").encode()).stdout
        result: dict[str, bytes | None] = {}
        pos = 0
        for spec in wanted:
            end = out.index(b"\n", pos)
            head = out[pos:end].decode(errors="replace").split()
            pos = end + 1
            if len(head) == 3 and head[1] in ("blob", "tree", "commit", "tag"):
                size = int(head[2])
                result[spec] = out[pos:pos + size] if head[1] == "blob" else None
                pos += size + 1
            else:  # "<spec> missing" / "ambiguous"
                result[spec] = None
        return result
