"""Whole-output snapshots of the report on the fixed synthetic pair of ``report_pair``: markdown,
markdown ``--verbose``, HTML and JSON. A refactor that changes what the report says shows up here
as a diff of the output. To accept a change on purpose: ``REBASECTL_UPDATE_GOLDEN=1 pytest
tests/unit/test_report_golden.py`` and review the diff of ``tests/golden/report/`` like code.
"""

from __future__ import annotations

from pathlib import Path

from rebasectl.report import render_html, render_markdown, to_json
from tests import goldens
from tests.unit.report_pair import build_pair

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "report"


def test_golden_outputs(tmp_path: Path) -> None:
    report = build_pair(tmp_path)
    outputs = {"pair.md": render_markdown(report),
               "pair.verbose.md": render_markdown(report, verbose=True),
               "pair.html": render_html(report), "pair.json": to_json(report)}
    goldens.check(GOLDEN, outputs)


def test_golden_pair_states_each_part(tmp_path: Path) -> None:
    """What the snapshot is for: every status and finding the report knows, on one pair."""
    report = build_pair(tmp_path)
    statuses = {e.status for e in report.mapping}
    assert statuses == {"identical", "modified", "merged", "dropped", "equivalent", "new", "empty"}
    kinds = {f.kind for e in report.mapping for f in e.findings}
    assert kinds == {"lost-in-resolution", "stale-message", "redundant", "partial-revert",
                     "removed-name-used"}
    merged = next(e for e in report.mapping if e.status == "merged")
    assert merged.evidence.to_json()["folded"]["3"]["rule"] == "lineage"
    assert report.mapping[0].moved and not report.mapping[0].review.needed
