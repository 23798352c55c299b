"""JSON = the report model serialised, in the ``rebasectl.report/1`` shape of the design contract.

Keys are written in a fixed order and the output ends with one newline, so the same report always
gives the same bytes. The contract's keys come first; what the report adds (moved, review, files
with their interdiff hunks and causes, findings) follows them.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from .model import Entry, PatchInfo, Report, SideInfo


def _patch(p: PatchInfo) -> dict[str, Any]:
    return {"index": p.index, "id": p.id, "commit": p.commit, "subject": p.subject,
            "author": p.author, "date": p.date, "patch_id": p.patch_id,
            "files": [{"path": f.path, "added": f.added, "removed": f.removed} for f in p.files],
            "kind": p.kind, "why": p.why, "drop_when": p.drop_when, "message": p.message}


def _side(s: SideInfo) -> dict[str, Any]:
    return {"label": s.label, "base": s.base, "base_date": s.base_date,
            "base_subject": s.base_subject, "patches": [_patch(p) for p in s.patches]}


def _entry(e: Entry) -> dict[str, Any]:
    """An entry: the contract's keys first, then what the report adds."""
    return {"old": list(e.old), "new": list(e.new), "status": e.status,
            "renumbered": e.renumbered, "message_changed": e.message_changed,
            "evidence": e.evidence.to_json(), "details": e.details, "moved": e.moved,
            "message": asdict(e.message), "review": asdict(e.review),
            "files": [asdict(f) for f in e.files],
            "upstream_commits": [asdict(c) for c in e.upstream_commits],
            "findings": [asdict(f) for f in e.findings]}


def to_data(report: Report) -> dict[str, Any]:
    return {"schema": report.schema, "old": _side(report.old), "new": _side(report.new),
            "upstream": {"commits": report.upstream.commits,
                         "files_changed": report.upstream.files_changed},
            "mapping": [_entry(e) for e in report.mapping],
            "review": list(report.to_review)}


def to_json(report: Report) -> str:
    return json.dumps(to_data(report), indent=2, ensure_ascii=False) + "\n"
