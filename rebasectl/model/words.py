"""Phrases every layer's messages share, written once so that a count reads the same in bump's
progress, its artifacts README and the terminal (no git here: these are words, not questions)."""

from __future__ import annotations


def commits(n: int) -> str:
    """``1 upstream commit`` / ``1227 upstream commits``: how every message counts a range."""
    return f"{n} upstream commit{'' if n == 1 else 's'}"


def count(n: int, one: str, many: str | None = None) -> str:
    """``1 patch`` / ``9 patches``: a count with its noun agreeing."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def upstream_lines(span: tuple[int, int] | list[int] | None) -> str:
    """Where a region is in upstream's file, as every surface says it: ``upstream line 7``,
    ``upstream lines 7-9``, or ``no upstream lines`` (the region only adds)."""
    if not span:
        return "no upstream lines"
    first, last = span[0], span[1]
    return f"upstream line {first}" if first == last else f"upstream lines {first}-{last}"
