"""What each command prints for a person (stdout), and the JSON of those that have it.

One function per result type. Every line states a fact of the result and, where the user has
something to do, the command that does it (each such piece of advice is exercised by a test).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from . import ui
from .commands import serialize
from .engine import serialize as engine_json
from .engine.conflicts import ConflictKind, FileConflict
from .model.ids import short
from .model.words import commits, count, upstream_lines


def json(data: Any) -> None:
    ui.emit_json(data)


def status(data: dict[str, Any]) -> None:
    up = data["upstream"]
    ui.line(f"upstream {up['name']} {up['url']} ({up['branch']}) base {short(up['base'])}")
    ui.table(None, ["#", "id", "kind", "files", "+", "-", "title"],
             [[p["index"], p["id"], p["kind"], p["files"], p["added"], p["removed"], p["title"]]
              for p in data["patches"]])
    progress = data["apply_in_progress"]
    if _status_notices(data, progress) and progress:
        _apply_progress(progress)


def _status_notices(data: dict[str, Any], progress: dict[str, Any] | None) -> bool:
    """What was left half done (an abort, a work tree, a bump) and stashed edits; False when
    nothing else status could say holds."""
    if data.get("abort_interrupted"):  # the tree may be half removed: nothing else holds
        ui.line("an abort was interrupted (the work tree may be half removed, no longer a git "
                "tree): `rebasectl abort` finishes it")
        return False
    if data.get("missing_worktree"):
        ui.line(f"the work tree {data['missing_worktree']} is missing (an apply or bump was "
                "interrupted while making it); the series is unchanged: `rebasectl apply` makes "
                "it again")
    if data.get("interrupted_bump"):
        bump = data["interrupted_bump"]
        ui.line(f"a bump to {short(bump['to'])} was interrupted while making the work tree "
                f"{bump['worktree']}; the series is unchanged: `rebasectl bump --to "
                f"{bump['to']}` does it again (or `rebasectl apply` for the pinned base)")
    if data.get("stashed"):
        _stashed(data["stashed"], in_progress=bool(progress))
    return True


def _apply_progress(progress: dict[str, Any]) -> None:
    """Where the apply in progress stands, and the one way on that is true now."""
    committed = progress.get("committed") or []
    stopped = progress["stopped_at"] if progress.get("conflict_written") and not committed \
        else None
    moved = progress.get("head_moved") if not committed else None  # continue's refusal now
    refused = progress.get("refused") if not stopped and not committed else None
    gone = progress.get("refused_gone") if not stopped and not committed else None
    where = f"stopped at {stopped}" if stopped else "HEAD moved" if moved else \
        "refused" if refused else "paused" if gone else "interrupted"
    ui.line(f"apply in progress on {short(progress['base'])}: "
            f"{progress['applied'] + len(committed)}/{progress['total']} applied, {where} in "
            f"{progress['worktree']}{_behind(progress, advise=not refused and not moved)}")
    for item in committed:
        ui.line(f"  {item['index']}/{progress['total']} {item['id']}: committed "
                f"{short(item['commit'])} (the run was interrupted before it said so)")
    for item in progress["unmerged"]:
        ui.line(f"  unmerged: {item['path']} ({item['kind']})")
    if progress["skipped"]:
        ui.line(f"  skipped: {', '.join(progress['skipped'])}")
    if progress.get("blocked_by"):
        ui.line(f"  {progress['stopped_at']} is blocked: it needs lines or files of skipped "
                f"patch(es) {', '.join(progress['blocked_by'])}")
    if progress.get("unregistered"):  # nothing relinks it: what continue and skip refuse
        ui.line(progress["unregistered"])
    elif progress.get("tree_missing"):  # nothing there to resolve in
        ui.line(f"the work tree {progress['tree_missing']} is missing or no longer a git tree: "
                "`rebasectl continue` makes it again where the apply stands (the stop written "
                "again; files left there are first moved under .rebasectl/aborted/)")
    elif progress.get("tree_error"):
        ui.line(f"the work tree could not be read ({progress['tree_error']}); a moved checkout "
                "is relinked by `rebasectl continue`")
    elif moved:  # whatever came before: continue refuses this first
        ui.line(moved)
    elif stopped:
        ui.line("resolve (edit, `git add`), then `rebasectl continue`; `rebasectl skip` leaves "
                "the patch out, `rebasectl abort` gives up")
    elif refused:  # nothing was interrupted: a run refused, its files are still in the way
        ui.line(f"going on was refused, and the reason still holds: {refused}; "
                "`rebasectl abort` gives up")
    elif gone:
        ui.line(f"the files the last refusal named ({', '.join(gone)}) are out of the way now: "
                "`rebasectl continue` checks the whole tree again and goes on if nothing else "
                "is in the way, `rebasectl abort` gives up")
    else:
        ui.line("`rebasectl continue` goes on from there, `rebasectl abort` gives up")


def _behind(progress: dict[str, Any], advise: bool = True) -> str:
    """The work tree short of the applied patches (made in memory; the run stopped before it
    moved the tree): where it is, and that continue moves it on (``advise``: not after a
    refusal, whose own way past comes first, nor when HEAD moved, which continue refuses)."""
    at = progress.get("tree_at")
    if at is None:
        return ""
    where = "the base" if at == 0 else f"{at}/{progress['total']} {progress['done_ids'][at - 1]}"
    return f" (the work tree is at {where}: `rebasectl continue` moves it on)" if advise else \
        f" (the work tree is at {where})"


def _stashed(stash: dict[str, Any], in_progress: bool) -> None:
    tree = stash["worktree"]
    when = "once the apply is done (not before: a stop's unmerged files refuse it)" \
        if in_progress else "brings them back"
    ui.line(f"{stash['count']} stash(es) in {tree} hold changes (`git -C {tree} stash list`): "
            f"`git -C {tree} stash pop` {when}")


def check(data: dict[str, Any]) -> None:
    for problem in data["problems"]:
        ui.line(f"problem: {problem}")
    verdict = "ok" if data["valid"] else "needs attention"
    extra = f", applies exactly on the base (tip {short(data['tip'])})" if data.get("tip") else ""
    ui.line(f"{data['patches']} patches: {verdict}{extra}")


# -- apply / continue / skip -----------------------------------------------------------------------
def conflict_lines(conflicts: list[FileConflict], why: Any = None) -> list[str]:
    """``path:line: kind ...`` per region, as a person (and an editor's quickfix) reads them:
    the line is the work tree's (the file with markers), upstream's lines said beside it, and
    (``why``: region -> its culprits) the upstream commits behind each region or the earlier
    patch it needs."""
    out = []
    for c in conflicts:
        if c.kind is ConflictKind.MODIFY_DELETE:
            by = f" by upstream {c.deleted_by.short()}" if c.deleted_by else " upstream"
            moved = f"; rename detection finds it at {c.moved_to}" if c.moved_to else ""
            near = f"; the lines it needs are now in {', '.join(c.code_in)}" \
                if c.code_in else ""
            out.append(f"{c.path}: modify/delete: the patch changes this file, deleted{by}"
                       f"{moved}{near}")
            continue
        if c.kind is ConflictKind.MISSING:
            rc = why(c.regions[0]) if why and c.regions else None
            maker = ", ".join(rc.blocked_by) if rc and rc.blocked_by else c.blocked_by
            made = f"earlier patch {maker} creates it and is not applied" if maker else \
                "upstream never had it"
            out.append(f"{c.path}: missing: the patch changes this file; {made}")
            continue
        if c.kind is ConflictKind.DELETE_MODIFY:
            rc = why(c.regions[0]) if why and c.regions else None
            verb = f"moves this file to {c.moved_to}" if c.moved_to else "deletes this file"
            out.append(f"{c.path}: delete/modify: the patch {verb}, which upstream "
                       f"changed{_stop_why(rc)}")
            continue
        for r in c.regions:
            line = r.start or (r.base[0] if r.base else 1)
            up = f" (work tree line; {upstream_lines(r.ours)})" if r.start and r.ours else ""
            hunks = ("; patch hunk" + ("s " if len(r.hunks) > 1 else " ") +
                     " and ".join(r.hunks)) if r.hunks else ""
            out.append(f"{c.path}:{line}: {c.kind.value} conflict{up}{hunks}"
                       f"{_stop_why(why(r) if why else None)}")
        if not c.regions:
            out.append(f"{c.path}: {c.kind.value} conflict")
    return out


def _stop_why(rc: Any) -> str:
    if rc is None:
        return ""
    if rc.blocked_by:
        return f"; needs lines of earlier patch {', '.join(rc.blocked_by)}, not applied"
    if rc.commits:
        return "; changed upstream by " + ", ".join(c.short() for c in rc.commits[:3]) + \
            (f" and {len(rc.commits) - 3} more" if len(rc.commits) > 3 else "")
    return "; no upstream commit found"


def apply_outcome(outcome: Any, as_json: bool) -> None:
    if as_json:
        ui.emit_json(engine_json.apply_outcome(outcome))
        return
    done = len(outcome.applied)
    skipped = f"; skipped: {', '.join(outcome.skipped)}" if outcome.skipped else ""
    if outcome.stop is None:
        ui.line(f"applied {done}/{outcome.total} on {outcome.base.short()}{skipped}: work tree "
                f"{outcome.worktree} at {outcome.tip.short()}")
        if outcome.skipped:
            ui.line("skipped patches stay in series.yaml; `rebasectl export` keeps them as "
                    "they are")
        return
    stop = outcome.stop
    ui.line(f"{done}/{outcome.total} committed{skipped}; stopped at {stop.index}/{stop.total} "
            f"{stop.id} ({stop.file}): {len(stop.conflicts)} file(s) conflict")
    if stop.blocked_by:
        ui.line(f"  blocked: it needs lines or files of skipped patch(es) "
                f"{', '.join(stop.blocked_by)}")
    if stop.upstream is not None:
        ui.line(f"  upstream carries it already: {stop.upstream.commit.short()} "
                f"{stop.upstream.subject}; `rebasectl skip` leaves it out of this apply, then "
                f"`rebasectl export --drop {stop.id}` drops it from the series")
    for text in conflict_lines(stop.conflicts, stop.why):
        ui.line(f"  {text}")
    ui.line(f"resolve in {outcome.worktree}: {'; '.join(_how_to_resolve(stop))}; then "
            "`rebasectl continue`; `rebasectl skip` leaves this patch out, `rebasectl abort` "
            "gives up")
    if outcome.proposals is not None:
        ui.line(f"{len(outcome.proposals)} region(s) with a proposed resolution"
                + (" (`rebasectl resolve --list` shows them, `rebasectl resolve --accept ID` "
                   "writes one)" if outcome.proposals else ""))
        for p in outcome.proposals:
            ui.line(f"  {p['id']}: {p['rule']}")


def _how_to_resolve(stop: Any) -> list[str]:
    """What to do with each kind of conflict the stop has, in the person's words: markers only
    where files have them."""
    kinds = {c.kind for c in stop.conflicts}
    how = []
    if kinds - {ConflictKind.MODIFY_DELETE, ConflictKind.DELETE_MODIFY}:
        how.append(f"edit the marked files (markers `upstream` vs `patch {stop.id}`) and "
                   "`git add` them")
    if ConflictKind.MODIFY_DELETE in kinds:
        how.append("a file upstream deleted is on disk as the patch left it: carry its change "
                   "where the code went, then `git rm` it (or `git add` it to keep it)")
    for c in stop.conflicts:
        old, new = shlex.quote(c.path), shlex.quote(c.moved_to or "")
        if c.kind is ConflictKind.DELETE_MODIFY and c.moved_to:
            how.append(f"{c.path} is upstream's file, which the patch moves to {c.moved_to}: "
                       f"carry upstream's changes (`git diff :1:{old} :2:{old}`) into "
                       f"{c.moved_to}, `git add {new}`, then `git rm {old}`")
        elif c.kind is ConflictKind.DELETE_MODIFY:
            how.append(f"{c.path} is upstream's file, which the patch deletes: `git rm {old}` "
                       "to delete it, or `git add` it to keep it")
    return how


def resolve(b: Any, as_json: bool) -> None:
    if as_json:
        ui.emit_json(b.to_json())
        return
    ui.line(f"{b.patch}: {b.regions} region(s), {len(b.proposals)} with a proposal")
    ui.table(None, ["region", "rule", "state", "evidence"],
             [[p.id, p.rule, p.state, _evidence(p)] for p in b.proposals])
    if b.tests:
        ui.line(f"regression tests: {b.tests.get('verdict') or b.tests.get('why')}")
    if any(p.state == "proposed" for p in b.proposals):
        ui.line("`rebasectl resolve --accept ID` (or `--accept --all`) writes and stages; "
                "the diff of each is in `rebasectl resolve --json`")
    elif b.unresolved:
        ui.line(f"still unresolved: {', '.join(b.unresolved)}: edit (or `git rm` a file you "
                "drop), `git add`, then `rebasectl continue`")
    else:
        ui.line("then `rebasectl continue`")


def _evidence(p: Any) -> str:
    from .commands.bump import evidence_line

    return evidence_line(p)


def imported(done: Any) -> None:
    """What import did, counted as what it is: patches, upstream's files they change and the
    files they create, the files it wrote; an empty commit said in words (it stays, as a patch
    with no diff); each merge it flattened into one patch, with what that patch holds."""
    series = done.series
    n = done.new_files
    new = f" and creating {n} new file{'s' if n != 1 else ''}" if n else ""
    ui.line(f"imported {count(len(series.patches), 'patch', 'patches')} on "
            f"{series.upstream.base.short()} "
            f"({series.upstream.name}), touching {done.upstream_files} upstream files{new}; "
            f"wrote {len(done.changed)} files (patches/ and series.yaml)")
    for pid in done.empty:
        ui.line(f"  {pid}: an empty commit (no changes): kept as a patch without a diff; "
                "bump reports it `empty`")
    for m in done.merges:
        ui.note(f"warning: {m.sha.short()} is a merge ({m.title}): its side brings "
                f"{m.brought} commits, and patches/{m.file} holds their combined diff "
                f"({m.files} files), not {m.brought} patches as git format-patch would give")
    if done.merges:
        base = done.base.short()
        ui.note(f"  for one patch per commit, make the range linear in a clone with a work tree "
                f"(`git switch -c linear {done.tip.short()} && git rebase {base}`: git rebase "
                "drops merges and replays their sides; it stops at each commit that conflicts "
                "with the commits replayed before it, which the merge had resolved once "
                "(`git show` of the merge shows how): resolve it, `git add` the files, `git "
                f"rebase --continue`), then `rebasectl import {base}..linear --repo CLONE`")


def export(series: Any, built: Any, changed: list[str]) -> None:
    ui.line(f"exported {count(len(series.patches), 'patch', 'patches')} on "
            f"{series.upstream.base.short()}; {count(len(changed), 'file')} changed")
    for path in changed:
        ui.line(f"  {path}")
    if built.overwritten is not None:
        ui.line(f"wrote over files edited by hand (--force); your versions are in "
                f"{built.overwritten}")
    for note in built.notes:
        ui.line(f"note: {note}")
    for pid in built.kept:
        ui.line(f"kept {pid} as it was: skipped at its conflict, it still does not apply on "
                f"{series.upstream.base.short()}, so the exported series stops there until it is "
                f"resolved (apply, then continue) or dropped (`--drop {pid}`)")
    for gone, survivor in built.folded.items():
        ui.line(f"folded {gone} into {survivor} (absorbs: {gone}; its tests carried over)")
    for pid in built.dropped:
        ui.line(f"dropped {pid}")
    for pid in built.new:
        ui.line(f"new patch {pid}")


def test_run(run: Any, path: Path) -> None:
    ui.table(f"regression tests against {run.against} ({path})",
             ["patch", "passed", "failed", "skipped", "patch failures", "harness failures"],
             [[p.id, p.passed, p.failed, p.skipped,
               sum(1 for f in p.failures if f.category.value == "patch"),
               sum(1 for f in p.failures if f.category.value == "harness")]
              for p in run.patches])
    for p in run.patches:
        for failure in p.failures:
            _failure_line(p.id, failure, failure.category.value)
    for failure in run.unmapped:
        _failure_line("(no series entry)", failure, "unmapped")
    if run.result == "failed" and run.against == "patched":
        ui.line(run.log_tail)


def _failure_line(owner: str, failure: Any, category: str) -> None:
    first = failure.message.splitlines()[0] if failure.message else ""
    kind = failure.kind.value if failure.kind else ""
    ui.line(f"FAILED {owner}: {failure.node} [{category}, {kind}] {failure.location}: {first}")


ANNOTATE_ENV = ("GITHUB_ACTIONS", "REBASECTL_ANNOTATE")  # CI: one annotation per region
SHOWN_REGIONS = 5  # a terminal run shows this many region lines, then where the rest are
SHOWN_RISKS = 2  # ... and this many warnings of the checks after the merge


def bump(result: Any, as_json: bool, verbose: bool = False, annotate: bool = False) -> None:
    """CI (``GITHUB_ACTIONS`` or ``REBASECTL_ANNOTATE`` set, or ``--annotations``): one
    ``patches/FILE:LINE:`` annotation per region on stderr. A terminal: a summary line, one line
    per failing patch, a few region lines and where the rest are (``-v``: every region)."""
    if annotate or any(os.environ.get(k) for k in ANNOTATE_ENV):
        for text in result.annotations():
            ui.note(text)
    elif not result.clean:
        _bump_summary(result, verbose)
    else:
        for text in result.warning_lines():
            ui.note(f"warning: {text}")
    if as_json:
        ui.emit_json(serialize.bump_result(result))
        return
    verdict = "clean" if result.clean else "conflicts"
    ui.line(f"bump {result.old.short()} -> {result.new.short()} "
            f"({commits(result.upstream_commits)}): {verdict}")
    ui.table(None, ["#", "id", "status", "first break", "regions", "culprits"],
             [[p.index, p.id, p.shown_status, _first(p), p.region_count(),
               len(p.attribution.culprits) if p.attribution else 0] for p in result.patches])
    for p in result.patches:
        for a, b in p.followed.items():
            ui.line(f"{p.index}/{len(result.patches)} {p.id}: followed upstream's rename "
                    f"{a} -> {b} (as `git am -3` carries it)")
    ui.line(f"artifacts: {result.artifacts}")
    for p in result.patches:
        for pr in p.proposals.values():
            ui.line(f"  proposal {pr.id}: {pr.rule}")
    if not result.clean:
        ui.line(f"reproduce and resolve: {result.reproduce}")
        return
    if result.worktree is None:
        ui.line("proposals only (--propose): nothing carried, nothing exported")
        return
    ui.line(f"series carried to {result.new.short()}; exported ({len(result.changed)} files "
            f"changed); work tree {result.worktree}")
    for p in result.upstreamed():
        ui.line(p.upstreamed_line(len(result.patches), carried=True))


def _bump_summary(result: Any, verbose: bool) -> None:
    regions = result.region_lines()
    ui.note(f"bump {result.old.short()} -> {result.new.short()}: {result.summary()}")
    for text in result.patch_lines():
        ui.note(f"  {text}")
    for p in result.upstreamed():
        ui.note(f"  {p.upstreamed_line(len(result.patches))}")
    risky = result.warning_lines()
    for text in risky if verbose else risky[:SHOWN_RISKS]:
        ui.note(f"  warning: {text}")
    if len(risky) > SHOWN_RISKS and not verbose:
        ui.note(f"  +{len(risky) - SHOWN_RISKS} more warnings: {result.artifacts / 'risks.txt'}")
    shown = regions if verbose else regions[:SHOWN_REGIONS]
    if shown:
        ui.note("  regions to resolve:" if len(shown) == len(regions) else
                f"  regions to resolve (the first {len(shown)} of {len(regions)}):")
    for text in shown:
        ui.note(f"    {text}")
    if len(regions) > len(shown):
        ui.note(f"  +{len(regions) - len(shown)} more: {result.artifacts / 'regions.txt'}")


def _first(p: Any) -> str:
    att = p.attribution
    return att.first_break.commit.short() if att and att.first_break else ""


def blame(data: dict[str, Any]) -> None:
    ui.line(f"{data['id']}: {data['status']} on {short(data['to'])} "
            f"({commits(data['upstream_commits'])} since {short(data['from'])})")
    if data["status"] == "upstreamed":
        _blame_upstreamed(data)
    else:
        _blame_breaks(data)
    if data.get("recorded_resolution"):
        ui.line("a resolution recorded in this checkout resolves this conflict (bump replays "
                "it; blame does not)")
    for c in data["conflicts"]:
        for r in c["regions"]:
            where = upstream_lines(r.get("upstream_lines"))
            marked = f", work tree lines {r['start']}-{r['end']} with markers" \
                if r.get("start") else ""
            why = f"needs lines of {', '.join(r['blocked_by'])}" if r.get("blocked_by") else \
                f"changed upstream by {', '.join(short(x) for x in r['culprits'])}" \
                if r.get("culprits") else "no upstream commit found"
            ui.line(f"  {c['path']}: {c['kind']}, {where}{marked}; {why}")
    ui.line(f"{len(data['touching'])} first-parent commits touch its files")


def _blame_upstreamed(data: dict[str, Any]) -> None:
    """Upstream carries the patch: the commit that brought its change, not a break."""
    commit = data["upstream_commit"]
    subject = next((c["subject"] for c in data["culprits"] if c["commit"] == commit), "")
    ui.line(f"upstream carries it: {short(commit)} {subject}".rstrip())


def _blame_breaks(data: dict[str, Any]) -> None:
    """The breaks and culprits, or, for a patch that applies, the commits that changed its
    lines; at a ``--from`` where the patch fails already no commit of the range broke it."""
    if not data.get("applies_at_from", True):
        ui.line(f"it does not apply at {short(data['from'])} already: no commit of the range "
                "broke it (blame it --from an older revision to find what did)")
    for key in ("first_break", "permanent_break"):
        if data[key]:
            ui.line(f"{key.replace('_', ' ')}: {short(data[key]['commit'])} "
                    f"{data[key]['subject']}")
    if data["blocked_by"]:
        ui.line(f"blocked: needs lines or files of earlier failing patch(es) "
                f"{', '.join(data['blocked_by'])}")
    for c in data["culprits"]:
        if not data.get("applies_at_from", True) and not c.get("by_first_break", True):
            ui.line(f"changed its lines since {short(data['from'])} {short(c['commit'])} "
                    f"{c['path']}: {c['subject']}")
            continue
        when = "" if c.get("by_first_break", True) else " (after the first break)"
        ui.line(f"culprit {short(c['commit'])} {c['path']}{when}: {c['subject']}")
    for c in data.get("touched_by", []):
        ui.line(f"changed its lines (it still applies) {short(c['commit'])} {c['path']}: "
                f"{c['subject']}")
