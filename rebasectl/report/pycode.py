"""Where a line sits in Python source, by indentation alone: its block and the functions and
classes around it. The report's checks need "the same block" (an added line the block already
holds is redundant; ``HAVE_X = False`` in a ``try:`` is not the one in its ``except:``) and "the
function a hunk sits in" (a message naming that function is not stale). A parser would refuse a
file with a conflict or a syntax error; indentation works on any text and is exact enough here.
"""

from __future__ import annotations

import re

from ..model.pysyntax import DEF

_HEADER = re.compile(DEF)  # groups: kind (def or class), name


def indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _blank(line: str) -> bool:
    return not line.strip()


def parent(lines: list[str], n: int) -> int | None:
    """The 1-based line of the block header holding line ``n`` (the nearest non-blank line
    above with less indentation), or None at module level."""
    own = indent(lines[n - 1])
    for k in range(n - 1, 0, -1):
        line = lines[k - 1]
        if not _blank(line) and indent(line) < own:
            return k
    return None


def block(lines: list[str], n: int) -> tuple[int, int]:
    """First and last line of the block holding line ``n`` (the whole file at module level)."""
    head = parent(lines, n)
    if head is None:
        return 1, len(lines)
    limit = indent(lines[head - 1])
    end = head
    for k in range(head + 1, len(lines) + 1):
        if not _blank(lines[k - 1]) and indent(lines[k - 1]) <= limit:
            break
        end = k
    return head + 1, end


def siblings(lines: list[str], n: int) -> list[int]:
    """Lines of the same block at the same indentation as line ``n`` (``n`` left out)."""
    first, last = block(lines, n)
    own = indent(lines[n - 1])
    return [k for k in range(first, last + 1)
            if k != n and not _blank(lines[k - 1]) and indent(lines[k - 1]) == own]


def enclosing(lines: list[str], n: int) -> list[tuple[str, str, int]]:
    """The ``def``/``class`` headers around line ``n``, innermost first: (kind, name, line)."""
    out: list[tuple[str, str, int]] = []
    k: int | None = n
    if 0 < n <= len(lines):
        m = _HEADER.match(lines[n - 1])
        if m:
            out.append((m.group(1), m.group(2), n))
    while k is not None and 0 < k <= len(lines):
        k = parent(lines, k)
        if k is None:
            break
        m = _HEADER.match(lines[k - 1])
        if m:
            out.append((m.group(1), m.group(2), k))
    return out


def body(lines: list[str], header: int) -> list[str]:
    """The header line and every line of its block."""
    limit = indent(lines[header - 1])
    out = [lines[header - 1]]
    for k in range(header + 1, len(lines) + 1):
        if not _blank(lines[k - 1]) and indent(lines[k - 1]) <= limit:
            break
        out.append(lines[k - 1])
    return out


def signature_of(lines: list[str], n: int) -> str | None:
    """The function whose parameter list holds line ``n``: its header is the block parent of
    ``n`` and its ``(`` has not closed before ``n``."""
    head = parent(lines, n)
    if head is None:
        return None
    m = _HEADER.match(lines[head - 1])
    if not m or m.group(1) != "def":
        return None
    opened = "".join(lines[head - 1:n - 1])
    return m.group(2) if opened.count("(") > opened.count(")") else None
