"""A proposal's evidence: one typed record per rule, what the rules write and what its readers
(bump's README and stop lines, the per-patch ``consistent``/``superseded``) ask, attribute by
attribute, instead of keys of a mapping.

The JSON is the proposal's file format (bump.json's proposals, proposals.json, the resolve
board that ``Proposal.from_json`` reads back), so the record's writer (``to_json``) and its
reader (``from_json``) live here side by side, like the proposal's own. Each rule's keys are
written in the order they always were, a key a rule leaves out stays out (``None`` here), so
the same proposal gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Upstream:
    """``already-upstream``: upstream's side already makes the patch's change, brought by
    ``commit``. ``how`` says what matched: ``lines`` (the carried-lines engine: its commit's
    ``subject`` and the ``share`` of the telling lines), ``items`` or ``names`` (the ``names``
    the patch adds, found in upstream's ``lines``); ``patch``: the whole patch is carried (a
    patch the bump drops)."""

    commit: str
    how: str
    names: tuple[str, ...] = ()
    lines: tuple[str, ...] | None = None
    subject: str | None = None
    share: float | None = None


@dataclass(frozen=True)
class Superseded:
    """``superseded``: every region of the patch is one upstream already made: drop the patch.
    ``of``: the region's own ``already-upstream`` evidence (``how`` ``patch`` when the
    carried-lines engine found the whole patch); ``commits``: every commit its regions' lines
    came with."""

    commits: tuple[str, ...]
    of: Upstream

    @property
    def commit(self) -> str:
        return self.of.commit


@dataclass(frozen=True)
class Insertion:
    """One point where both sides insert: after this preimage line, each side's lines."""

    after_preimage_line: int
    upstream: tuple[str, ...]
    patch: tuple[str, ...]


@dataclass(frozen=True)
class BothInsert:
    """``both-insert``: both sides only insert, at the same points; ``order`` says which
    side's lines come first."""

    order: str
    insertions: tuple[Insertion, ...]


@dataclass(frozen=True)
class ContextOnly:
    """``context-only``: the patch's edit made on upstream's text; ``context`` is the rule's own
    sentence. ``wrapped``/``reindented``: how many of upstream's edits went inside a block the
    patch opened / patch lines took upstream's indentation; ``needs``/``on``: the earlier
    patches (which do not apply) whose lines the region holds, and what the edit was made on."""

    context: str
    wrapped: int | None = None
    reindented: int | None = None
    needs: tuple[str, ...] | None = None
    on: str | None = None


@dataclass(frozen=True)
class Moved:
    """``moved``: the code the patch edits is now at ``to``:``line`` (``commit`` moved it, when
    a culprit did); ``block``: the lines found there, or ``call``: the callee whose arguments
    the patch extends."""

    to: str
    line: int
    commit: str | None
    block: tuple[str, ...] | None = None
    call: str | None = None


@dataclass(frozen=True)
class Recorded:
    """``recorded``: a resolution rerere recorded earlier; ``by`` says whose."""

    by: str


Evidence = Upstream | Superseded | BothInsert | ContextOnly | Moved | Recorded


def _present(**keys: Any) -> dict[str, Any]:
    """The keys a rule wrote (``None``: left out), in the order given; tuples as lists."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in keys.items() if v is not None}


def _upstream(ev: Upstream) -> dict[str, Any]:
    if ev.how == "lines":
        return {"commit": ev.commit, "subject": ev.subject, "how": ev.how, "share": ev.share,
                "names": list(ev.names)}
    return {"commit": ev.commit, "how": ev.how, "names": list(ev.names),
            **_present(lines=ev.lines)}


def to_json(ev: Evidence) -> dict[str, Any]:
    """The evidence as the proposal's JSON holds it."""
    if isinstance(ev, Upstream):
        return _upstream(ev)
    if isinstance(ev, Superseded):
        if ev.of.how == "patch":
            return {"drop": True, "commit": ev.of.commit, "commits": list(ev.commits),
                    "subject": ev.of.subject, "how": ev.of.how, "names": list(ev.of.names)}
        return {**_upstream(ev.of), "drop": True, "commits": list(ev.commits)}
    if isinstance(ev, BothInsert):
        return {"order": ev.order,
                "insertions": [{"after_preimage_line": i.after_preimage_line,
                                "upstream": list(i.upstream), "patch": list(i.patch)}
                               for i in ev.insertions]}
    if isinstance(ev, ContextOnly):
        return _present(context=ev.context, wrapped=ev.wrapped, reindented=ev.reindented,
                        needs=ev.needs, on=ev.on)
    if isinstance(ev, Moved):
        return {"to": ev.to, "line": ev.line, "commit": ev.commit,
                **_present(block=ev.block, call=ev.call)}
    return {"by": ev.by}


def _strs(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"a list was expected, not {value!r}")
    return tuple(str(x) for x in value)


def _opt(value: Any, kind: type) -> Any:
    return None if value is None else kind(value)


def _read_upstream(data: Mapping[str, Any]) -> Upstream:
    lines = data.get("lines")
    return Upstream(str(data["commit"]), str(data["how"]), _strs(data.get("names") or []),
                    None if lines is None else _strs(lines), _opt(data.get("subject"), str),
                    _opt(data.get("share"), float))


def from_json(rule: str, data: Mapping[str, Any]) -> Evidence:
    """The record ``to_json`` wrote for a proposal of ``rule``; ValueError, KeyError or
    TypeError when it is not one (a file edited by hand, or from another version)."""
    if rule == "already-upstream":
        return _read_upstream(data)
    if rule == "superseded":
        return Superseded(_strs(data["commits"]), _read_upstream(data))
    if rule == "both-insert":
        return BothInsert(str(data["order"]), tuple(
            Insertion(int(i["after_preimage_line"]), _strs(i["upstream"]), _strs(i["patch"]))
            for i in data["insertions"]))
    if rule == "context-only":
        needs = data.get("needs")
        return ContextOnly(str(data["context"]), _opt(data.get("wrapped"), int),
                           _opt(data.get("reindented"), int),
                           None if needs is None else _strs(needs), _opt(data.get("on"), str))
    if rule == "moved":
        block = data.get("block")
        return Moved(str(data["to"]), int(data["line"]), _opt(data.get("commit"), str),
                     None if block is None else _strs(block), _opt(data.get("call"), str))
    if rule == "recorded":
        return Recorded(str(data["by"]))
    raise ValueError(f"{rule!r}: not a rule of a proposal")


def insertions(at: Sequence[tuple[int, Sequence[str], Sequence[str]]]) -> tuple[Insertion, ...]:
    """The merge's same-point insertions (preimage line, upstream's lines, the patch's)."""
    return tuple(Insertion(n, tuple(a), tuple(b)) for n, a, b in at)
