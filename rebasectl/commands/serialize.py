"""JSON = the documents of ``bump`` (``rebasectl.bump/1``: ``--json``, bump.json, each failing
patch's culprits.json) and ``blame`` (``rebasectl.blame/1``), serialised in one place.

They are built from the engine's records, whose shapes ``engine/serialize.py`` owns (a region,
a conflict, a culprit, a break, carried lines, a risk); this module adds only what the command
says on top: a patch's outcome with its regions' ids and proposals, the bump's summary, blame's
range. Keys are written in a fixed order, so the same result gives the same bytes (the golden
files hold them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..engine import serialize as engine

if TYPE_CHECKING:
    from ..engine.attribution import Attribution
    from ..engine.conflicts import FileConflict, Region
    from ..engine.proposals import Proposal
    from ..report.names import NameUse
    from .bump import BumpResult, PatchOutcome

BUMP_SCHEMA = "rebasectl.bump/1"
BLAME_SCHEMA = "rebasectl.blame/1"


def region_id(patch_id: str, path: str, n: int) -> str:
    """``<patch-id>/<path>/<n>``: n counts the file's regions from 1, in file order."""
    return f"{patch_id}/{path}/{n}"


def name_use(u: NameUse) -> dict[str, object]:
    return {"kind": "uses-removed-name", "path": u.path, "line": u.line, "name": u.name,
            "commit": u.commit}


def _proposal(p: Proposal | None) -> dict[str, Any]:
    return {"proposal": {k: v for k, v in p.to_json().items() if k != "id"}} if p else {}


def patch_outcome(p: PatchOutcome) -> dict[str, Any]:
    """One patch of the bump: its status, its conflicts region by region (with why, and the
    proposal when there is one), its breaks and culprits, what else was found."""
    att = p.attribution
    regions = {id(r.region): r for r in att.regions} if att else {}

    def region(c: FileConflict, n: int, r: Region) -> dict[str, Any]:
        rid = region_id(p.id, c.path, n)
        return {"id": rid, **engine.explained_region(r, regions.get(id(r))),
                **_proposal(p.proposals.get(rid))}

    return {
        "index": p.index, "id": p.id, "subject": p.subject,
        "status": p.status.value,
        "how": p.how.value,
        "conflicts": [{**engine.file_conflict(c),
                       "regions": [region(c, n, r) for n, r in enumerate(c.regions, 1)]}
                      for c in p.conflicts],
        "first_break": engine.commit_ref(att.first_break if att else None),
        "permanent_break": engine.commit_ref(att.permanent_break if att else None),
        "culprits": [engine.culprit(c) for c in att.culprits] if att else [],
        "blocked_by": p.blocked_by,
        "renames_followed": p.followed,
        "risks": [engine.risk(r) for r in p.risks],
        "upstream_commit": p.upstream_commit,
        "carried": engine.carried(p.carried) if p.carried else None,
        "findings": [name_use(f) for f in p.findings],
        **({"dropped_regions": [{**engine.file_conflict(c),
                                 "regions": [region(c, n, r) for n, r in enumerate(c.regions, 1)]}
                                for c in p.dropped]} if p.dropped else {}),
    }


def bump_result(b: BumpResult) -> dict[str, Any]:
    return {"schema": BUMP_SCHEMA, "from": b.old, "to": b.new,
            "upstream_commits": b.upstream_commits,
            "result": "clean" if b.clean else "conflicts",
            "reproduce": b.reproduce, "artifacts": str(b.artifacts),
            "patches": [patch_outcome(p) for p in b.patches]}


def blame(out: PatchOutcome, att: Attribution, failing: bool, old: str, new: str,
          upstream_commits: int, touching: list[tuple[str, str]]) -> dict[str, Any]:
    """One patch's outcome, its breaks and culprits (``touched_by`` when it still applies:
    the commits that changed its lines), and the first-parent commits touching its files."""
    data = patch_outcome(out)
    data.update(schema=BLAME_SCHEMA, **{"from": old, "to": new},
                upstream_commits=upstream_commits,
                culprits=[engine.culprit(c) for c in att.culprits] if failing else [],
                touched_by=[] if failing else [engine.culprit(c) for c in att.culprits],
                first_break=engine.commit_ref(att.first_break),
                permanent_break=engine.commit_ref(att.permanent_break),
                blocked_by=out.blocked_by,
                touching=[{"commit": c, "subject": s} for c, s in touching])
    return data
