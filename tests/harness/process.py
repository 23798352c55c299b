"""Synchronising with a real rebasectl process on what it has done, never on time.

A test that signals, kills or races a real process waits for a state the process reached: it
stopped itself at a fault point (``REBASECTL_FAULT=stop@NAME:N``: SIGSTOP, seen in
/proc/PID/stat), or it printed a line. The only clock here is a generous deadline that turns a
hang into a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

DEADLINE_S = 300.0  # a hang becomes a failure; never a synchronisation


def state(pid: int) -> str:
    """The one-letter state of a process (R, S, T, Z ...)."""
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(") ", 1)[1][:1]


def wait_stopped(proc: subprocess.Popen[str], deadline: float = DEADLINE_S) -> None:
    """Until ``proc`` stopped itself (a ``stop@`` fault point); exiting first is a failure."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"exited before its fault point: {proc.returncode}")
        if state(proc.pid) == "T":
            return
        time.sleep(0.01)
    raise AssertionError(f"pid {proc.pid} never reached its fault point")


def resume(proc: subprocess.Popen[str], *, group: bool = False) -> None:
    """SIGCONT to a stopped process (or its whole process group)."""
    if group:
        os.killpg(proc.pid, signal.SIGCONT)
    else:
        proc.send_signal(signal.SIGCONT)


def read_until(proc: subprocess.Popen[str], needle: str) -> str:
    """stderr of ``proc`` read line by line until a line holds ``needle``; what was read.
    (Blocking reads: the process's exit closes the pipe, so this cannot hang past it.)"""
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return "".join(seen)
    raise AssertionError(f"stderr closed before a line with {needle!r}: {''.join(seen)}")
