"""A proposal's evidence is a typed record per rule (engine/proposals/evidence.py), written as
the JSON the rules wrote when it was a mapping: every shape a rule makes has its keys in the
same order, a key the rule leaves out stays out, and what is read back is the same record (the
resolve board rewrites what it loaded, so a round trip must give the same bytes)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rebasectl.engine.proposals import Proposal
from rebasectl.engine.proposals.evidence import (
    BothInsert,
    ContextOnly,
    Evidence,
    Insertion,
    Moved,
    Recorded,
    Superseded,
    Upstream,
    from_json,
    to_json,
)

SHA = "f4502eb1c92f77e0aa00aa00aa00aa00aa00aa00"
LINES = Upstream(SHA, "lines", subject="upstream: fix (#1)", share=0.875)
ITEMS = Upstream(SHA, "items", ("input_ids",), ("    input_ids (Tensor): ids.",))

# (rule, record, the JSON as the rules wrote it before the record existed: keys in order)
SHAPES: list[tuple[str, Evidence, dict[str, Any]]] = [
    ("already-upstream", LINES, {"commit": SHA, "subject": "upstream: fix (#1)", "how": "lines",
                                 "share": 0.875, "names": []}),
    ("already-upstream", Upstream(SHA, "lines"), {"commit": SHA, "subject": None,
                                                  "how": "lines", "share": None, "names": []}),
    ("already-upstream", ITEMS, {"commit": SHA, "how": "items", "names": ["input_ids"],
                                 "lines": ["    input_ids (Tensor): ids."]}),
    ("already-upstream", Upstream(SHA, "names", ("a", "b"), ("f(a, b)",)),
     {"commit": SHA, "how": "names", "names": ["a", "b"], "lines": ["f(a, b)"]}),
    ("superseded", Superseded((SHA, "c0ffee"), LINES),
     {"commit": SHA, "subject": "upstream: fix (#1)", "how": "lines", "share": 0.875,
      "names": [], "drop": True, "commits": [SHA, "c0ffee"]}),
    ("superseded", Superseded((SHA,), ITEMS),
     {"commit": SHA, "how": "items", "names": ["input_ids"],
      "lines": ["    input_ids (Tensor): ids."], "drop": True, "commits": [SHA]}),
    ("superseded", Superseded((SHA,), Upstream(SHA, "patch", subject="s")),
     {"drop": True, "commit": SHA, "commits": [SHA], "subject": "s", "how": "patch",
      "names": []}),
    ("both-insert", BothInsert("upstream's lines first, then the patch's",
                               (Insertion(3, ("    e: int = 0,",), ("    c: int = 0,",)),)),
     {"order": "upstream's lines first, then the patch's",
      "insertions": [{"after_preimage_line": 3, "upstream": ["    e: int = 0,"],
                      "patch": ["    c: int = 0,"]}]}),
    ("context-only", ContextOnly("said"), {"context": "said"}),
    ("context-only", ContextOnly("said", wrapped=2), {"context": "said", "wrapped": 2}),
    ("context-only", ContextOnly("said", reindented=0), {"context": "said", "reindented": 0}),
    ("context-only", ContextOnly("said", needs=("p1",), on="their lines"),
     {"context": "said", "needs": ["p1"], "on": "their lines"}),
    ("moved", Moved("b.py", 12, SHA, block=("x = 1", "y = 2")),
     {"to": "b.py", "line": 12, "commit": SHA, "block": ["x = 1", "y = 2"]}),
    ("moved", Moved("a.py", 40, None, call="build"),
     {"to": "a.py", "line": 40, "commit": None, "call": "build"}),
    ("recorded", Recorded("rerere: a resolution recorded earlier"),
     {"by": "rerere: a resolution recorded earlier"}),
]


@pytest.mark.parametrize(("rule", "record", "written"), SHAPES)
def test_each_shape_is_written_as_before_and_read_back(rule: str, record: Evidence,
                                                       written: dict[str, Any]) -> None:
    assert json.dumps(to_json(record), indent=2) == json.dumps(written, indent=2)
    loaded = from_json(rule, json.loads(json.dumps(written)))
    assert loaded == record
    assert json.dumps(to_json(loaded)) == json.dumps(written)


def test_a_proposal_round_trips_through_its_json_byte_for_byte() -> None:
    """What the resolve board saves and loads: the proposal's JSON, evidence included."""
    for rule, record, _ in SHAPES:
        p = Proposal("p/f.py/1", "p", "f.py", 1, rule, ["x = 1"], record,
                     ["<<<<<<< upstream", "x = 1", "=======", "x = 2", ">>>>>>> patch p"])
        data = json.loads(json.dumps({**p.to_json(), "marked": p.marked}))
        again = Proposal.from_json(data)
        assert again.evidence == record
        assert json.dumps(again.to_json()) == json.dumps(p.to_json())


@pytest.mark.parametrize(("rule", "data"), [
    ("moved", {"to": "a.py"}),  # no line
    ("both-insert", {"order": "x", "insertions": "not a list"}),
    ("already-upstream", {"commit": SHA, "how": "names", "names": "ab"}),
    ("guessed", {"by": "someone"}),
])
def test_evidence_that_is_no_rule_s_is_refused_as_the_board_expects(
        rule: str, data: dict[str, Any]) -> None:
    """The board treats a file it cannot read as no board (ValueError, KeyError, TypeError)."""
    with pytest.raises((ValueError, KeyError, TypeError)):
        from_json(rule, data)
