"""One rebasectl command at a time per repository.

The lock is ``.rebasectl/lock``, held with ``flock``: the kernel drops it when its process dies
(crash, SIGKILL), so a lock left by a dead process is never in the way and never needs guessing
from pid liveness (pids are reused; an O_EXCL lock file is racy to take over). The file's content
names the holder (pid, host, command, start time), so a second command is refused with that name.
The file itself stays; only the flock on it means "held".
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from .errors import RebasectlError


class LockedError(RebasectlError):
    pass


class RepoLock:
    def __init__(self, path: Path, command: str) -> None:
        self.path = path
        self.command = command
        self.fd: int | None = None

    @property
    def held(self) -> bool:
        return self.fd is not None

    def holder(self) -> dict[str, object] | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise LockedError(f"{self.path}: cannot create the lock: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            holder = None
            for _ in range(20):  # the holder writes its name right after locking
                holder = self.holder()
                if holder is not None:
                    break
                time.sleep(0.01)
            who = (f"`rebasectl {holder.get('command')}` (pid {holder.get('pid')} on "
                   f"{holder.get('host')})") if holder else "another process"
            raise LockedError(f"another rebasectl is running in this repository: {who}; "
                              "wait for it to finish") from None
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": self.command,
                "since": int(time.time())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
        except OSError:
            pass
        os.close(self.fd)  # closing drops the flock
        self.fd = None

    def __enter__(self) -> RepoLock:
        self.acquire()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
