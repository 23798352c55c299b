"""The evidence of one mapping entry, typed: what the pairing rule saw (``lineage`` writes it as
it decides) read through one record, so the report's sentences, review decision and views ask
``ev.line_shift`` or ``ev.nearest.similarity`` instead of ``ev.get("line_shift")`` in twenty
places with twenty defaults.

The record keeps the evidence exactly as the pairing wrote it (keys sorted): the JSON contract
(``rebasectl.report/1``: ``evidence`` is an open object whose keys depend on the rule) is that
mapping, and ``to_json`` is its one serialisation, so report.json is byte for byte what it was.
Every key a reader uses has its typed accessor here, with the default it means when absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RuleMatch:
    """How one pairing or fold rule matched (the entry's own rule, or one folded patch's), with
    the numbers it saw."""

    data: Mapping[str, Any]

    @property
    def rule(self) -> str | None:
        value = self.data.get("rule")
        return None if value is None else str(value)

    @property
    def similarity(self) -> float:
        return float(self.data.get("similarity", 0.0))

    @property
    def contained(self) -> float:
        return float(self.data.get("contained", 0.0))

    @property
    def lineage(self) -> dict[str, Any]:
        return dict(self.data.get("lineage") or {})

    @property
    def cited(self) -> list[str]:
        return [str(c) for c in self.data.get("cited") or []]


@dataclass(frozen=True)
class Nearest(RuleMatch):
    """An unpaired patch's nearest candidate on the other side and what each rule saw there."""

    @property
    def index(self) -> int:
        return int(self.data["index"])

    @property
    def pair_rule(self) -> str | None:
        value = self.data.get("pair_rule")
        return None if value is None else str(value)

    @property
    def taken_by(self) -> list[int]:
        return [int(k) for k in self.data.get("taken_by") or []]


@dataclass(frozen=True)
class ReplayConflict:
    """One file where the old patch, replayed 3-way on the new parent, conflicts."""

    path: str
    kind: str
    hunks: tuple[str, ...]


@dataclass(frozen=True)
class Evidence(RuleMatch):
    """The whole evidence of an entry (see the module doc)."""

    data: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Evidence:
        return cls(dict(sorted(raw.items())))

    def to_json(self) -> dict[str, Any]:
        """The one serialisation (report.json's ``evidence``)."""
        return dict(self.data)

    def items(self) -> list[tuple[str, Any]]:
        return list(self.data.items())

    # -- identical / equivalent / modified pairs ---------------------------------------------------
    @property
    def moved(self) -> bool:
        return bool(self.data.get("moved"))

    @property
    def line_shift(self) -> int:
        """The lines every hunk moved by (0: not moved, or moved by several: ``line_shifts``)."""
        return int(self.data.get("line_shift") or 0)

    @property
    def line_shifts(self) -> dict[str, list[int]]:
        """Per file, the distinct shifts of its hunks (0: in place), when they differ."""
        found = self.data.get("line_shifts") or {}
        return {str(k): [int(d) for d in v] for k, v in found.items()}

    def shift_words(self, *, files: bool) -> str:
        """How far the hunks moved, true of every hunk: ``hunks moved by +88 lines`` (all
        alike), else the range of those that moved (``some hunks moved by +57 to +235 lines``
        when others stayed in place), with ``files`` each file's own after it (``moe_layer.py
        +88; router.py +57, +235; rollout_routing_replay.py in place``). Empty: not moved."""
        if self.line_shift:
            return f"hunks moved by {self.line_shift:+d} lines"
        moved = sorted({d for per in self.line_shifts.values() for d in per if d})
        if not moved:
            return ""
        some = "some " if any(0 in per for per in self.line_shifts.values()) else ""
        span = f"{moved[0]:+d}" + (f" to {moved[-1]:+d}" if len(moved) > 1 else "")
        words = f"{some}hunks moved by {span} lines"
        if files:
            words += " (" + "; ".join(f"{path.rsplit('/', 1)[-1]} {_file_shifts(per)}"
                                      for path, per in self.line_shifts.items()) + ")"
        return words

    @property
    def changed_lines_equal(self) -> bool:
        return bool(self.data.get("changed_lines_equal"))

    @property
    def whitespace_differs(self) -> bool:
        return bool(self.data.get("whitespace_differs"))

    @property
    def replay(self) -> str:
        """reproduces | conflicts | differs, or "" when the pair was not replayed."""
        return str(self.data.get("replay") or "")

    @property
    def replay_conflicts(self) -> list[ReplayConflict]:
        return [ReplayConflict(str(c["path"]), str(c["kind"]), tuple(c["hunks"]))
                for c in self.data.get("replay_conflicts") or []]

    # -- merged / split ----------------------------------------------------------------------------
    def folded(self, key: str) -> dict[str, RuleMatch]:
        """``folded`` (merged) or ``split_off`` (split): each joined patch's index (as text)
        -> the rule that joined it."""
        return {k: RuleMatch(v) for k, v in (self.data.get(key) or {}).items()}

    @property
    def by_patch(self) -> dict[str, Any]:
        return dict(self.data.get("by_patch") or {})

    # -- unpaired ----------------------------------------------------------------------------------
    @property
    def nearest(self) -> Nearest | None:
        near = self.data.get("nearest")
        return Nearest(near) if near else None

    # -- upstreamed --------------------------------------------------------------------------------
    @property
    def upstream_commit(self) -> str:
        return str(self.data.get("upstream_commit") or "")

    @property
    def upstream_subject(self) -> str:
        return str(self.data.get("upstream_subject") or "")

    @property
    def how(self) -> str:
        return str(self.data.get("how") or "")

    @property
    def carried_lines(self) -> tuple[int, int]:
        found, total = self.data.get("carried_lines") or (0, 0)
        return int(found), int(total)

    @property
    def telling_line(self) -> str:
        return str(self.data.get("telling_line") or "")

    @property
    def threshold(self) -> float:
        return float(self.data.get("threshold", 0.8))


def _file_shifts(shifts: list[int]) -> str:
    """One file's hunk shifts: ``+57, +235``, ``in place``, or ``+57, and in place``."""
    moved = ", ".join(f"{d:+d}" for d in shifts if d)
    still = "in place" if 0 in shifts else ""
    return f"{moved}, and {still}" if moved and still else moved or still
