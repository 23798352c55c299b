"""Synthetic git histories for tests: small real repositories built in tmp dirs.

``Repo`` wraps one repository with a clock that advances one minute per commit, so every history
built from the same calls has the same shas. ``series_repo`` makes the user's series checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


class Repo:
    def __init__(self, path: Path, *, bare: bool = False) -> None:
        self.path = path
        self.clock = 1767225600
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", *(["--bare"] if bare else []), "-b", "main")

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
        self.clock += 60
        if files:
            self.write(files)
        self.git("add", "-A")
        args = ["commit", "-q", "-m", message]
        if allow_empty:
            args.append("--allow-empty")
        if author:
            args += ["--author", author]
        self.git(*args)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def tree(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", f"{rev}^{{tree}}")

    def checkout(self, *args: str) -> None:
        self.git("checkout", "-q", *args)

    def branch(self, name: str, rev: str = "HEAD") -> None:
        self.git("branch", "-f", name, rev)


def lines(n: int, prefix: str = "line") -> str:
    return "".join(f"{prefix} {i}\n" for i in range(1, n + 1))


def rebasectl(workdir: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real console script in a subprocess (exit codes, stderr, signals as a user sees)."""
    full = dict(os.environ)
    if env:
        full.update(env)
    return subprocess.run([sys.executable, "-m", "rebasectl", "-C", str(workdir), *args],
                          capture_output=True, text=True, env=full, timeout=timeout, check=False)

