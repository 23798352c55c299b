"""JSON = what the engine answers, serialised: one function per record, and the documents of
the commands that are the engine's answer as it stands (``apply``/``continue``/``skip``:
``rebasectl.apply/1``; ``check --apply``'s steps; ``test``: ``rebasectl.test/1``).

The records stay plain data (conflicts, regions, culprits, steps, carried lines, risks, test
results); their shape in every ``--json`` output, in bump.json and culprits.json, and in
apply-state.json's ``conflicts`` is written here and nowhere else, so a key cannot be spelled
two ways. Keys are written in a fixed order (the same result gives the same bytes). bump's and
blame's documents add the command's own keys on top (``commands/serialize.py``); the report has
its own (``report/serialize.py``). Two records keep their writer beside their reader, because
the JSON is also their file format: a proposal (``engine/proposals``) and the resolve board
(``engine/resolving.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .carried import CARRIED_SHARE
from .conflicts import ConflictKind, FileConflict, Region
from .testing import Category

if TYPE_CHECKING:
    from .aftermerge import Risk
    from .attribution import CommitRef, Culprit, RegionCulprits
    from .carried import Carried
    from .materialize import Step
    from .session import ApplyOutcome, Stop
    from .testing import CaseResult, PatchResult, TestRun

APPLY_SCHEMA = "rebasectl.apply/1"
TEST_SCHEMA = "rebasectl.test/1"


# -- conflicts -------------------------------------------------------------------------------------
def _span(span: tuple[int, int] | None) -> list[int] | None:
    return list(span) if span else None


def region(r: Region) -> dict[str, object]:
    return {"start": r.start, "end": r.end,
            "worktree_lines": [r.start, r.end] if r.start else None,
            "upstream_lines": _span(r.ours), "preimage_lines": _span(r.base),
            "hunks": list(r.hunks)}


def file_conflict(c: FileConflict) -> dict[str, object]:
    return {"path": c.path, "kind": c.kind.value,
            "regions": [region(r) for r in c.regions],
            "hunks": sorted({h for r in c.regions for h in r.hunks}),
            "deleted_by": c.deleted_by, "moved_to": c.moved_to,
            "code_now_in": c.code_in, "blocked_by": c.blocked_by}


def recorded_conflicts(records: list[dict[str, Any]]) -> list[FileConflict]:
    """``file_conflict``'s records read back, as far as apply-state.json keeps them: each
    file's path, kind and its regions' preimage lines (all that says which earlier patch a
    region needs); a record of an unknown kind is left out."""
    out = []
    for c in records:
        try:
            kind = ConflictKind(str(c.get("kind")))
        except ValueError:
            continue
        spans = [r.get("preimage_lines") for r in c.get("regions") or [] if isinstance(r, dict)]
        regions = tuple(Region(0, 0, None, (int(s[0]), int(s[1])) if s else None)
                        for s in spans)
        out.append(FileConflict(str(c.get("path")), kind, regions))
    return out


# -- attribution -----------------------------------------------------------------------------------
def commit_ref(ref: CommitRef | None) -> dict[str, str] | None:
    return {"commit": ref.commit, "subject": ref.subject} if ref is not None else None


def culprit(c: Culprit) -> dict[str, object]:
    return {"commit": c.commit, "subject": c.subject, "path": c.path,
            "by_first_break": c.by_first_break}


def region_culprits(rc: RegionCulprits) -> dict[str, object]:
    return {"path": rc.path, **region(rc.region), "culprits": rc.commits,
            "blocked_by": rc.blocked_by}


def explained_region(r: Region, rc: RegionCulprits | None) -> dict[str, Any]:
    """A conflict region with why it conflicts (apply's stop, bump's regions)."""
    return {**region(r), "culprits": rc.commits if rc else [],
            "blocked_by": rc.blocked_by if rc else []}


# -- what else the engine finds --------------------------------------------------------------------
def carried(c: Carried) -> dict[str, object]:
    return {"carried": c.carried, "commit": c.commit, "subject": c.subject,
            "share": round(c.share, 3), "found": c.found, "total": c.total,
            "how": c.how, "threshold": CARRIED_SHARE}


def risk(r: Risk) -> dict[str, object]:
    return {"kind": r.kind, "path": r.path, "commit": r.commit, "subject": r.subject,
            "hunk": r.hunk, "detail": r.detail, "also": list(r.also), "text": r.text()}


def step(s: Step) -> dict[str, object]:
    return {"index": s.index, "id": s.id, "subject": s.subject, "status": s.status.value,
            "commit": s.commit, "conflicts": [file_conflict(c) for c in s.conflicts]}


# -- apply / continue / skip -----------------------------------------------------------------------
def stop(s: Stop) -> dict[str, Any]:
    return {"index": s.index, "id": s.id, "file": s.file, "subject": s.subject,
            "blocked_by": s.blocked_by,
            "upstream_commit": s.upstream.commit if s.upstream else None,
            "conflicts": [{**file_conflict(c),
                           "regions": [explained_region(r, s.why(r)) for r in c.regions]}
                          for c in s.conflicts]}


def apply_outcome(o: ApplyOutcome) -> dict[str, Any]:
    return {"schema": APPLY_SCHEMA, "result": o.result.value, "base": o.base, "tip": o.tip,
            "worktree": str(o.worktree),
            "patches": [{"id": i, "status": how} for i, how in o.applied],
            "skipped": o.skipped, "stopped_at": stop(o.stop) if o.stop else None,
            **({"proposals": o.proposals} if o.proposals is not None else {})}


# -- test ------------------------------------------------------------------------------------------
def failure(f: CaseResult, category: Category | None = None) -> dict[str, Any]:
    return {"test": f.node, "kind": f.kind.value if f.kind else None,
            "category": (category or f.category).value, "message": f.message,
            "location": f.location}


def patch_result(p: PatchResult) -> dict[str, Any]:
    return {"id": p.id, "tests": p.tests, "passed": p.passed,
            "failed": p.failed, "skipped": p.skipped, "proving": p.proving,
            "failures": [f.node for f in p.failures],
            "categories": {c.value: sum(1 for f in p.failures if f.category is c)
                           for c in (Category.PATCH, Category.HARNESS)},
            "failure_details": [failure(f) for f in p.failures]}


def test_run(run: TestRun) -> dict[str, Any]:
    return {"schema": TEST_SCHEMA, "against": run.against, "tree": run.tree,
            "result": run.result, "patches": [patch_result(p) for p in run.patches],
            "uncovered": run.uncovered, "categories": run.categories(),
            "unmapped": [failure(f, Category.UNMAPPED) for f in run.unmapped]}
