"""Output: rich tables and a live status line on a terminal, plain text otherwise, JSON for scripts.

Commands return plain data; this module decides how it looks. Progress goes to stderr: on a
terminal one rich status line that changes with each step; off a terminal (CI logs) one plain
``rebasectl: <step>`` line per step, and the elapsed time at the end, so a long bump is never
silent. Errors go to stderr as one line (plus indented detail lines when there are several facts).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_consoles: dict[str, Any] = {}


def _console(stderr: bool) -> Any:
    key = "err" if stderr else "out"
    if key not in _consoles:
        from rich.console import Console  # ~60 ms: only when something is printed richly

        _consoles[key] = Console(stderr=stderr, highlight=False, soft_wrap=True)
    return _consoles[key]


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if is_terminal(sys.stdout):
        from rich.table import Table

        t = Table(title=title, show_edge=False, header_style="bold")
        for col in columns:
            t.add_column(col)
        for row in rows:
            t.add_row(*(visible(str(c)) for c in row))
        _console(False).print(t)
        return
    if title:
        print(title)
    widths = [max(len(str(c)) for c in [col, *(r[i] for r in rows)])
              for i, col in enumerate(columns)]
    print("  ".join(col.ljust(w) for col, w in zip(columns, widths)).rstrip())
    for row in rows:
        print(visible("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip()))


_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]
            if chr(c) not in "\n\t"}
# bidirectional overrides and isolates, which reorder what follows them on the screen
_CONTROL.update({c: f"\\u{c:04x}" for c in [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                                             *range(0x2066, 0x206A)]})


def visible(text: str) -> str:
    """``text`` with control characters written as ``\\xNN`` (bidirectional overrides as
    ``\\uNNNN``): a path or subject from an upstream (a file named with ``ESC[31m``, or a
    U+202E that shows what follows backwards) must not drive the person's terminal."""
    return text.translate(_CONTROL)


def line(text: str = "") -> None:
    print(visible(text))


def error(text: str) -> None:
    lines = visible(text).splitlines() or ["error"]
    sys.stderr.write(f"rebasectl: error: {lines[0]}\n")
    for extra in lines[1:]:
        sys.stderr.write(f"  {extra}\n")


def note(text: str) -> None:
    sys.stderr.write(f"{visible(text)}\n")


HOLD_S = 0.5  # news of the first half second waits: a quick failure stays one line


class Progress:
    """Step-by-step news of a long command, on stderr. The first lines are held back for half a
    second: a command that fails at once (bad input) prints its one error line and nothing else;
    one that goes on prints everything, live, and one that succeeds quickly prints its news at
    the end. On a terminal a live bar (spinner, the command, how far: patch 3 of 9, test 120 of
    340, and the elapsed time) stays at the bottom and each step prints above it as a plain
    line; counted steps (``Counted``) also move the bar. Off a terminal every step is one plain
    line."""

    def __init__(self, label: str, quiet: bool = False) -> None:
        self.label = label
        self.quiet = quiet
        self.started = time.monotonic()
        self.bar: Any = None
        self.task: Any = None
        self.held: list[str] | None = []

    def __call__(self, text: str) -> None:
        if self.quiet:
            return
        if self.held is not None and self.elapsed < HOLD_S:
            self.held.append(text)
            return
        self.flush()
        self._show(text)

    def flush(self) -> None:
        for text in self.held or []:
            self._show(text)
        self.held = None

    def _show(self, text: str) -> None:
        done, total = getattr(text, "done", None), getattr(text, "total", None)
        if self.bar is not None:
            if done is not None:
                self.bar.update(self.task, completed=done, total=total)
            self.bar.console.print(f"rebasectl: {visible(str(text))}", highlight=False,
                                   markup=False, soft_wrap=True)
        else:
            sys.stderr.write(f"rebasectl: {visible(str(text))}\n")
            sys.stderr.flush()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started


def _live_bar() -> Any:
    """rich's progress display on stderr: spinner, step, bar, done/total, elapsed time."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.progress import Progress as Bar

    return Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(bar_width=24),
               MofNCompleteColumn(), TimeElapsedColumn(), console=_console(True),
               transient=True)


@contextmanager
def progress(label: str, *, quiet: bool = False) -> Iterator[Progress]:
    """A ``Progress`` for the duration of a command; its elapsed time is printed at the end."""
    news = Progress(label, quiet)
    if is_terminal(sys.stderr) and not quiet:
        with _live_bar() as bar:
            news.bar, news.task = bar, bar.add_task(label, total=None)
            yield news
            news.flush()
        news.bar = None
    else:
        yield news
    if not quiet:
        news.flush()
        sys.stderr.write(f"rebasectl: {label}: {news.elapsed:.1f} s\n")
