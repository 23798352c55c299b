"""Phrases every layer's messages share, written once so that a count reads the same in bump's
progress, its artifacts README and the terminal (no git here: these are words, not questions)."""

from __future__ import annotations


def commits(n: int) -> str:
    """``1 upstream commit`` / ``1227 upstream commits``: how every message counts a range."""
    return f"{n} upstream commit{'' if n == 1 else 's'}"
