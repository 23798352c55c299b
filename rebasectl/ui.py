"""Output: rich tables and progress on a terminal, plain text otherwise, JSON for scripts.

Commands return plain data; this module decides how it looks. Errors go to stderr as one line.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if out.is_terminal:
        t = Table(title=title, show_edge=False, header_style="bold")
        for col in columns:
            t.add_column(col)
        for row in rows:
            t.add_row(*(str(c) for c in row))
        out.print(t)
        return
    if title:
        print(title)
    widths = [
        max(len(str(c)) for c in [col, *(r[i] for r in rows)]) for i, col in enumerate(columns)
    ]
    print("  ".join(col.ljust(w) for col, w in zip(columns, widths)).rstrip())
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())


def line(text: str = "") -> None:
    if out.is_terminal:
        out.print(text, markup=False)
    else:
        print(text)


def error(text: str) -> None:
    first = text.splitlines()[0] if text else "error"
    rest = text.splitlines()[1:]
    sys.stderr.write(f"rebasectl: error: {first}\n")
    for extra in rest:
        sys.stderr.write(f"  {extra}\n")


def note(text: str) -> None:
    sys.stderr.write(f"{text}\n")


@contextmanager
def progress(label: str) -> Iterator[None]:
    if err.is_terminal:
        with err.status(label):
            yield
    else:
        yield
