"""The one-line evidence of an ``already-upstream`` proposal found by the carried-lines engine
(``how: lines``, no names) read 'upstream already has  by f4502eb1c92f: keep upstream's side' (a
hole where the names go) in ``rebasectl resolve`` and the bump README, on June's
support-partial-checkpoint-loading/.../distrib_optimizer.py/1. It says what upstream has."""

from __future__ import annotations

from rebasectl.commands.bump import evidence_line
from rebasectl.engine.proposals import Proposal
from rebasectl.engine.proposals.evidence import Upstream


def proposal(evidence: Upstream) -> Proposal:
    return Proposal("p/f.py/1", "p", "f.py", 1, "already-upstream", ["x = 1"], evidence,
                    ["<<<<<<< upstream", "x = 1", "=======", "x = 2", ">>>>>>> patch p"])


def test_lines_verdict_says_what_upstream_has() -> None:
    line = evidence_line(proposal(Upstream("f4502eb1c92f77e0", "lines", share=1.0)))
    assert "  " not in line, line
    assert line.startswith("upstream already has the patch's lines by f4502eb1c92f"), line


def test_names_verdict_names_them() -> None:
    line = evidence_line(proposal(Upstream("c0ffee00", "names", ("fast", "slow"))))
    assert line.startswith("upstream already has fast, slow by c0ffee0"), line
