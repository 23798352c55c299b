"""The console script's entry: Ctrl-C is one line from the first moment, not a traceback.

Importing the CLI (click, and what it pulls in) takes a while; a SIGINT in that window used to
print a ``KeyboardInterrupt`` traceback. This module, tiny and imported first, installs a handler
that exits 130 with one line until ``cli.main`` installs its own (which saves state first).
"""

from __future__ import annotations

import os
import signal
import sys

EARLY = "rebasectl: error: interrupted before the command began (nothing changed): run it again\n"


def _early(signum: int, frame: object) -> None:
    sys.stderr.write(EARLY)
    os._exit(130)


def main() -> None:
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.SIG_IGN:  # ignored (a background job): it stays ignored
        signal.signal(signal.SIGINT, _early)
    from .infra.faults import boundary  # os and signal only: the window stays small

    boundary("start")
    from .cli import install_interrupt_handler
    from .cli import main as cli_main
    from .infra.errors import Interrupted

    try:
        install_interrupt_handler(previous)
        boundary("ready")
        cli_main()
    except Interrupted:  # after the handler is on, before the command's own mapping of it
        sys.stderr.write(EARLY)
        sys.exit(130)
    finally:  # the exit code is decided: a Ctrl-C now must not kill Python's shutdown (exit -2)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
