"""One rebasectl command at a time per repository.

The lock is a file created with O_EXCL that names its holder (pid, command, start time). A second
command is refused with that name; a lock whose process is gone (crash, SIGKILL) is stale and is
taken over.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from .errors import RebasectlError


class LockedError(RebasectlError):
    pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RepoLock:
    def __init__(self, path: Path, command: str) -> None:
        self.path = path
        self.command = command
        self.held = False

    def holder(self) -> dict[str, object] | None:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def acquire(self) -> None:
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": self.command,
            "since": int(time.time()),
        }
        for _ in range(3):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self.holder()
                if holder is None:
                    # being written right now, or garbage: give the writer a moment
                    time.sleep(0.05)
                    if self.holder() is None:
                        self.path.unlink(missing_ok=True)
                    continue
                pid = int(str(holder.get("pid", 0)))
                same_host = holder.get("host") == socket.gethostname()
                if same_host and not _alive(pid):
                    self.path.unlink(missing_ok=True)  # stale: its process is gone
                    continue
                raise LockedError(
                    f"another rebasectl is running here: `{holder.get('command')}` (pid {pid}); "
                    f"wait for it, or remove {self.path} if that process is gone"
                ) from None
            with os.fdopen(fd, "w") as fh:
                json.dump(info, fh)
            self.held = True
            return
        raise LockedError(f"cannot take the lock {self.path}")

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RepoLock:
        self.acquire()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
