"""A proposal's evidence, typed for its readers: the rules write it as a mapping (the JSON of
bump.json's proposals, proposals.json and the resolve board, read back by ``Proposal.from_json``),
and what reads it (bump's README and stop lines, the per-patch ``consistent``/``superseded``)
asks ``ev.commit`` or ``ev.names`` here, with the default each key means when a rule left it
out, instead of ``.get`` calls of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProposalEvidence:
    data: Mapping[str, Any]

    @property
    def commit(self) -> str | None:
        """The upstream commit that brought the kept lines (already-upstream, moved)."""
        value = self.data.get("commit")
        return str(value) if value else None

    @property
    def commits(self) -> list[str]:
        """superseded: every commit its regions' lines came with."""
        return [str(c) for c in self.data.get("commits") or []]

    @property
    def names(self) -> list[str]:
        """already-upstream: the names upstream already binds."""
        return [str(n) for n in self.data.get("names") or []]

    @property
    def insertions(self) -> list[dict[str, Any]]:
        """both-insert: each insertion point with both sides' lines."""
        return list(self.data.get("insertions") or [])

    @property
    def order(self) -> str:
        return str(self.data.get("order", ""))

    @property
    def to(self) -> str:
        """moved: the file the code went to."""
        return str(self.data.get("to", ""))

    @property
    def line(self) -> int:
        return int(self.data.get("line") or 0)

    def context(self, default: str) -> str:
        """The rule's own sentence, when it wrote one."""
        return str(self.data.get("context", default))
