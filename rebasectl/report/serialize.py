"""JSON = the report model serialised, in the ``rebasectl.report/1`` shape of docs/design.md.

Keys are written in a fixed order and the output ends with one newline, so the same report always
gives the same bytes.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from .model import Entry, PatchInfo, Report, SideInfo


def _patch(p: PatchInfo) -> dict[str, Any]:
    return {"index": p.index, "id": p.id, "commit": p.commit, "subject": p.subject,
            "author": p.author, "date": p.date, "patch_id": p.patch_id,
            "files": [{"path": f.path, "added": f.added, "removed": f.removed} for f in p.files]}


def _side(s: SideInfo) -> dict[str, Any]:
    return {"label": s.label, "base": s.base, "base_date": s.base_date,
            "patches": [_patch(p) for p in s.patches]}


def _entry(e: Entry) -> dict[str, Any]:
    return {"old": list(e.old), "new": list(e.new), "status": e.status,
            "renumbered": e.renumbered, "message_changed": e.message_changed,
            "evidence": e.evidence, "details": e.details,
            "files": [asdict(f) for f in e.files],
            "upstream_commits": [{"commit": c.commit, "subject": c.subject, "pr": c.pr,
                                  "paths": list(c.paths)} for c in e.upstream_commits],
            "findings": [asdict(f) for f in e.findings]}


def to_data(report: Report) -> dict[str, Any]:
    return {"schema": report.schema, "old": _side(report.old), "new": _side(report.new),
            "upstream": {"commits": report.upstream.commits,
                         "files_changed": report.upstream.files_changed},
            "mapping": [_entry(e) for e in report.mapping]}


def to_json(report: Report) -> str:
    return json.dumps(to_data(report), indent=2, ensure_ascii=False) + "\n"
