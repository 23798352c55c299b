"""Fault injection for the interruption tests: die at a named boundary, the way a user's Ctrl-C or
a crash would.

The kill tests must stop rebasectl exactly at each boundary that matters (after each patch commit,
after each state save, in the middle of an export transaction), which a timer cannot hit
reliably. The code calls ``boundary(name)`` at those points; it does nothing unless the
environment variable ``REBASECTL_FAULT`` is ``SIGNAL@NAME:N`` (``kill@commit:2``,
``int@txn-move:1``): then the N-th time boundary NAME is reached the process sends itself SIGKILL
(``kill``), SIGINT (``int``) or SIGSTOP (``stop``: frozen while holding the lock, for the
concurrency tests). Boundaries: ``commit`` (materialise made a patch commit),
``state`` (apply state saved), ``worktree`` (work tree moved to the new tip), ``tree-cleared``
(a clean bump removed the old work tree, the new one not yet made), ``carried`` (a clean
bump's new tree checked out, the series not yet exported), ``merged`` (a stop's merge made,
the state not yet naming its paths), ``resolved`` (a
resolution committed by ``continue``), ``abort-removing`` (abort kept the person's files and is
about to remove the work tree), ``txn-stage`` (a file staged), ``txn-move`` (a staged file
moved into place), ``git-wait`` (a command found a live git holding a lock in the mirror and
waits for it), ``report`` (a report's inputs chosen, nothing read yet), ``start`` (the
console script's early Ctrl-C handler is on, the CLI not yet imported) and ``ready`` (the CLI's
own handler is on, the command not yet started).
"""

from __future__ import annotations

import os
import signal

ENV = "REBASECTL_FAULT"
_seen: dict[str, int] = {}


def boundary(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    how, _, rest = spec.partition("@")
    point, _, count = rest.partition(":")
    if point != name:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if str(_seen[name]) != (count or "1"):
        return
    sig = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}.get(how, signal.SIGINT)
    os.kill(os.getpid(), sig)
