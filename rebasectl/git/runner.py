"""The one place that starts git.

Argument lists only (never a shell string). Two environments: a hermetic one for everything whose
output must be canonical (no system or global config, C locale: a user's ``diff.algorithm`` or
``format.signature`` must not change patch bytes), and the user's own for talking to a remote
(``url.<base>.insteadOf``, proxies, credentials), limited to safe transports and never prompting.
A failure is a ``GitError`` that quotes git's message whole (trimmed) and names the real
subcommand, never ``-c``; a missing git is one line too.

The one piece of the person's config the hermetic environment lets in is ``safe.directory``
(docs/design.md, "the git door"): git reads it only from protected config, which the hermetic
environment hides, so without it a shared mirror someone else owns could never be read. It is read
only once a git has refused a repository for its ownership, then that git is run again.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..infra.errors import GitError, Interrupted

_INTERRUPTS = (-signal.SIGINT, -signal.SIGTERM, -signal.SIGHUP)


def check_interrupted(code: int) -> None:
    """A git killed by Ctrl-C (the terminal signals the whole group) is an interruption, never
    an answer or a git failure: the command stops as Ctrl-C stops it (exit 130)."""
    if code in _INTERRUPTS:
        raise Interrupted()

ALLOWED_PROTOCOLS = "file:git:https:ssh"
SCRUBBED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
          "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE",
          "GIT_QUARANTINE_PATH")  # what a hook's git sets for itself, never for rebasectl
MAX_MESSAGE = 600  # characters of git's stderr kept in an error


_USER_CONFIG = ("GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",  # a person's command-scope config
                "GIT_DIFF_OPTS", "GIT_EXTERNAL_DIFF", "GIT_NOTES_REF",  # and what changes output
                "GIT_ATTR_SOURCE")
_DUBIOUS = re.compile(r"detected dubious ownership in repository at '([^\n]*)'")
_PROTECTED = ("system", "global", "command")  # the scopes git reads safe.directory from
_safe: tuple[str, ...] | None = None  # the person's safe.directory values, once read
_safe_lock = threading.Lock()


def network_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """For clone and fetch: the user's git config applies, only the allowed transports do."""
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL=ALLOWED_PROTOCOLS)
    env.update(extra or {})
    return env


def hermetic_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment in which no system or global git config can change git's output, and
    nothing changes what a sha means: replace refs and grafts are ignored (an upstream's
    ``refs/replace/<base>`` would swap the pinned base's content)."""
    env = {k: v for k, v in network_env().items()
           if k not in _USER_CONFIG and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}
    env.update(_command_scope(_safe or ()))
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, LC_ALL="C", LANG="C",
               GIT_OPTIONAL_LOCKS="0", GIT_NO_REPLACE_OBJECTS="1", GIT_GRAFT_FILE=os.devnull)
    env.update(extra or {})
    return env


def _command_scope(values: Sequence[str]) -> dict[str, str]:
    """Git's command scope (``GIT_CONFIG_COUNT``, git 2.31+): hooks off (a hook the person's
    ``init.templateDir`` or anyone put in the mirror must not run, nor fail, rebasectl's git:
    hostile12 #6), then the ``safe.directory`` values in their order (an empty value clears
    those before it, as in git)."""
    pairs = [("core.hooksPath", os.devnull), *(("safe.directory", v) for v in values)]
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for n, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"] = key, value
    return env


def forget_safe_directories() -> None:
    """The next command reads the person's ``safe.directory`` afresh (the CLI calls this as
    each command starts: a test runs many in one process, the person edits their config
    between two)."""
    global _safe
    with _safe_lock:
        _safe = None


def safe_directories() -> tuple[str, ...]:
    """The person's ``safe.directory`` values from the scopes git honours it in (system, global,
    their own command scope), read with their environment, once per command. Everything else
    of their config stays out of the hermetic environment."""
    global _safe
    with _safe_lock:
        if _safe is None:
            _safe = _read_safe_directories()
        return _safe


def _read_safe_directories() -> tuple[str, ...]:
    try:  # at / : a repository's own config is not protected, and is dropped by scope anyway
        proc = subprocess.run(["git", "config", "-z", "--show-scope", "--get-all",
                               "safe.directory"], cwd="/", env=network_env(),
                              capture_output=True, check=False)
    except FileNotFoundError:
        return ()
    fields = proc.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return tuple(value for scope, value in zip(fields[0::2], fields[1::2], strict=False)
                 if scope in _PROTECTED)


def ownership_refusal(stderr: bytes) -> str | None:
    """git's refusal of a repository someone else owns, quoted, with the advice that works
    (rebasectl honours the person's safe.directory); None for any other failure."""
    found = _DUBIOUS.search(stderr.decode(errors="replace"))
    if found is None:
        return None
    where = found.group(1)
    return (f"detected dubious ownership in repository at '{where}' (another user owns it): "
            f"if you trust it, `git config --global --add safe.directory {shlex.quote(where)}`")


def subcommand(args: Sequence[str]) -> str:
    """The git command an argument list runs (``-c k=v`` and other global options skipped)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "-C", "--git-dir", "--work-tree"):
            skip = True
        elif not arg.startswith("-"):
            return arg
    return "git"


def describe_failure(args: Sequence[str], code: int, stderr: bytes) -> str:
    """``git <cmd> failed: <git's message>``: every line git wrote (hint: lines dropped), joined,
    trimmed to a readable length."""
    refusal = ownership_refusal(stderr)
    if refusal is not None:
        return f"git {subcommand(args)} failed: {refusal}"
    lines = [ln.strip() for ln in stderr.decode(errors="replace").splitlines()]
    lines = [ln for ln in lines if ln and not ln.startswith("hint:")]
    text = "; ".join(lines) or f"exit {code}"
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    return f"git {subcommand(args)} failed: {text}"


class Runner:
    """Runs git in one directory (a repository, or a work tree of one)."""

    def __init__(self, cwd: Path, *, network: bool = False) -> None:
        self.cwd = Path(cwd)
        self.network = network
        self.extra: dict[str, str] = {}  # for every git it starts (Repo.write_aside)

    def run(self, args: Sequence[str], *, input: bytes | None = None,
            env: Mapping[str, str] | None = None, check: bool = True,
            index: Path | None = None) -> subprocess.CompletedProcess[bytes]:
        extra = {**self.extra, **(env or {})}
        if index is not None:
            extra["GIT_INDEX_FILE"] = str(index)
        known = _safe
        proc = self._run(args, input, extra)
        if proc.returncode != 0 and not self.network and known is None \
                and ownership_refusal(proc.stderr) is not None and safe_directories():
            proc = self._run(args, input, extra)  # now with the person's safe.directory
        check_interrupted(proc.returncode)
        if check and proc.returncode != 0:
            raise GitError(describe_failure(args, proc.returncode, proc.stderr))
        return proc

    def _run(self, args: Sequence[str], input: bytes | None,
             extra: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        full_env = network_env(extra) if self.network else hermetic_env(extra)
        try:
            return subprocess.run(["git", *args], cwd=str(self.cwd), input=input, env=full_env,
                                  capture_output=True, check=False)
        except FileNotFoundError as exc:
            if not self.cwd.is_dir():
                raise GitError(f"{self.cwd}: no such directory") from None
            raise GitError("git is not installed or not on PATH: install git (2.30 or newer)"
                           ) from exc

    def popen(self, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """A long-running git fed through its stdin (fast-import), in the hermetic
        environment."""
        try:
            return subprocess.Popen(["git", *args], cwd=str(self.cwd), env=hermetic_env(self.extra),
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise GitError("git is not installed or not on PATH: install git (2.30 or newer)"
                           ) from None

    def start(self, args: Sequence[str]) -> Started:
        """A git that runs while Python goes on (a checkout overlapping the materialiser);
        ``Started.wait`` finishes it as ``run`` would."""
        try:
            proc = subprocess.Popen(["git", *args], cwd=str(self.cwd), env=hermetic_env(self.extra),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
        except FileNotFoundError:
            raise GitError("git is not installed or not on PATH: install git (2.30 or newer)"
                           ) from None
        return Started(args, proc)

    def out(self, args: Sequence[str], *, input: bytes | None = None,
            env: Mapping[str, str] | None = None, index: Path | None = None) -> str:
        proc = self.run(args, input=input, env=env, index=index)
        return proc.stdout.decode("utf-8", errors="surrogateescape").strip()

    def path(self, args: Sequence[str]) -> Path:
        """A path git prints on one line: only the line end removed (a folder may end in a
        space, which ``out``'s strip took: "not a git repository", hostile12)."""
        text = os.fsdecode(self.run(args).stdout)
        return Path(text[:-1] if text.endswith("\n") else text)

    def ok(self, args: Sequence[str], *, input: bytes | None = None,
           index: Path | None = None) -> bool:
        """Whether git succeeds (for yes/no questions such as ``merge-base --is-ancestor``)."""
        return self.run(args, input=input, check=False, index=index).returncode == 0


class Started:
    """A git started by ``Runner.start``."""

    def __init__(self, args: Sequence[str], proc: subprocess.Popen[bytes]) -> None:
        self.args, self.proc = list(args), proc

    def wait(self) -> None:
        """Until git is done; its failure raised as ``Runner.run`` raises it."""
        _, err = self.proc.communicate()
        check_interrupted(self.proc.returncode)
        if self.proc.returncode != 0:
            raise GitError(describe_failure(self.args, self.proc.returncode, err))
