"""The bump pipeline: materialise -> attribute -> export -> report -> test.

``bump --to REV`` applies the series onto REV in memory (each patch on top of the ones before it;
a failing one is left out and the next go on), replaying resolutions rerere recorded at earlier
bumps. A patch whose change REV already has is ``upstreamed``. When every other patch applies, the
work tree moves to REV + the series, the series is exported (series.yaml's base becomes REV), the
rebase report is written and ``--test`` runs the regression suite. When some do not, nothing in
the checkout changes; each failing patch gets its conflict regions (the conflict engine's, as
``apply --base REV`` will leave them), its breaks and, per region, the upstream commits that
changed its lines (the attribution engine); the artifacts folder holds the marked-up files, the
patch, a README and bump.json, and the one command that reproduces the conflict locally.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.attribution import Attribution, Culprit, UpstreamRange, attribute, landing
from ..engine.carried import Carried, CarriedLines
from ..engine.conflicts import ConflictKind, FileConflict, Labels, Region, engine_for
from ..engine.exchange import LoadedPatch, export_tree, load_patches
from ..engine.materialize import Materialised, Materializer, Step
from ..engine.resolutions import Memory
from ..engine.state import TreeMap
from ..engine.worktrees import check_room, checkout, clear
from ..git import Index, Repo
from ..infra.artifacts import Artifacts
from ..infra.errors import ExitCode, RebasectlError
from ..model.series import PATCH_DIR, Series, load
from ..model.status import Applied, BumpStatus
from ..model.words import commits
from ..model.workspace import Workspace
from ..report.names import NameUse, uses_of_removed

SCHEMA = "rebasectl.bump/1"
Notify = Callable[[str], None]


@dataclass
class PatchOutcome:
    index: int
    id: str
    subject: str
    file: str
    status: BumpStatus
    conflicts: list[FileConflict] = field(default_factory=list)
    attribution: Attribution | None = None
    upstream_commit: str | None = None  # upstreamed: the commit holding the change
    carried: Carried | None = None  # the carried-lines engine's answer (conflicts, no-ops)
    hunk_lines: dict[str, int] = field(default_factory=dict)  # hunk header -> patch file line
    findings: list[NameUse] = field(default_factory=list)  # merged, but uses a removed name

    def to_json(self) -> dict[str, Any]:
        att = self.attribution
        regions = {id(r.region): r for r in att.regions} if att else {}
        return {
            "index": self.index, "id": self.id, "subject": self.subject,
            "status": self.status.value,
            "conflicts": [{**c.to_json(), "regions": [
                {**r.to_json(), "culprits": regions[id(r)].commits if id(r) in regions else []}
                for r in c.regions]} for c in self.conflicts],
            "first_break": att.first_break.to_json() if att and att.first_break else None,
            "permanent_break": att.permanent_break.to_json()
            if att and att.permanent_break else None,
            "culprits": [c.to_json() for c in att.culprits] if att else [],
            "blocked_by": att.blocked_by if att else [],
            "upstream_commit": self.upstream_commit,
            "carried": self.carried.to_json() if self.carried else None,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass
class BumpResult:
    old: str
    new: str
    upstream_commits: int
    patches: list[PatchOutcome]
    artifacts: Path
    reproduce: str
    worktree: Path | None = None
    changed: list[str] = field(default_factory=list)
    test: Any = None  # testing.TestRun when --test ran

    @property
    def clean(self) -> bool:
        return all(p.status is not BumpStatus.CONFLICT for p in self.patches)

    @property
    def exit_code(self) -> ExitCode:
        if not self.clean:
            return ExitCode.CONFLICT
        failed = self.test is not None and self.test.result == "failed"
        return ExitCode.TESTS_FAILED if failed else ExitCode.OK

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "from": self.old, "to": self.new,
                "upstream_commits": self.upstream_commits,
                "result": "clean" if self.clean else "conflicts",
                "reproduce": self.reproduce, "artifacts": str(self.artifacts),
                "patches": [p.to_json() for p in self.patches]}

    def annotations(self) -> list[str]:
        """One short ``file:line: message`` per conflict region (CI annotates the patch file)."""
        out = []
        for p in self.patches:
            for c in p.conflicts:
                for r in c.regions or [None]:
                    out.append(annotation(p, c, r))
            out += [f"{PATCH_DIR}/{p.file}:1: patch {p.index} {p.id}: warning: {f.text()}"
                    for f in p.findings]
        return out


def annotation(p: PatchOutcome, c: FileConflict, region: Region | None) -> str:
    """``patches/FILE:LINE: patch N id: ...``. The file line is upstream's (where the region
    is in the new base); the marked copy (apply's work tree, ``conflicts/.../files/``) holds it
    at ``region.start``, which is said too, since the two differ by the markers above it."""
    where = f"{c.path}:{region.ours[0] if region and region.ours else 1}"
    marked = f", line {region.start} with markers" if region and region.start else ""
    what = f"{c.kind.value} conflict at {where}{marked}"
    culprits = _region_culprits(p, region)
    if c.kind is ConflictKind.MODIFY_DELETE:
        gone = f" (deleted by {c.deleted_by[:12]})" if c.deleted_by else ""
        moved = f", moved to {c.moved_to}" if c.moved_to else ""
        near = f"; its code is now in {c.code_in[0]}" if c.code_in else ""
        what, culprits = f"modify/delete: {c.path}{gone}{moved}{near}", []
    if culprits:
        more = f" and {len(culprits) - 1} more" if len(culprits) > 1 else ""
        what += f"; changed upstream by {culprits[0][:12]}{more}"
    line = _patch_line(p, region)
    return f"{PATCH_DIR}/{p.file}:{line}: patch {p.index} {p.id}: {what}"


def _region_culprits(p: PatchOutcome, region: Region | None) -> list[str]:
    if p.attribution is None or region is None:
        return []
    return next((rc.commits for rc in p.attribution.regions if rc.region is region), [])


def _patch_line(p: PatchOutcome, region: Region | None) -> int:
    return p.hunk_lines.get(region.hunks[0] if region and region.hunks else "", 1)


# -- the pipeline ----------------------------------------------------------------------------------
class Planner:
    """Materialise the series on the new base, classify every patch, attribute the failures."""

    def __init__(self, repo: Repo, old: str, new: str, notify: Notify,
                 memory: Memory | None = None) -> None:
        self.repo, self.old, self.new, self.notify = repo, old, new, notify
        self.memory = memory
        self.rng = UpstreamRange(repo, old, new)
        self.carried = CarriedLines(self.rng)
        self.engine = engine_for(repo, old, new)

    def run(self, loaded: list[LoadedPatch]) -> tuple[list[PatchOutcome], Materialised]:
        stack = [(lp.entry.id, lp.patch) for lp in loaded]
        # the series on its old base first: it puts every patch's preimage blob in the mirror,
        # so the 3-way merges below and the line mapping of attribution have them
        self.notify(f"materialising {len(stack)} patches on the old base {self.old[:12]}")
        Materializer(self.repo).run(self.old, stack, three_way=False, keep_going=True)
        self.notify(f"applying {len(stack)} patches on {self.new[:12]}")
        labels = Labels(f"upstream {self.new[:12]}", "")
        mat = Materializer(self.repo, lambda pid: Labels(labels.upstream, f"patch {pid}"),
                           self.engine, self._replay, self.memory).run(
            self.new, stack, keep_going=True, on_step=self._announce(len(stack)))
        failed = [s.id for s in mat.steps if s.status is Applied.CONFLICT]
        if failed:
            self.notify(f"attributing {len(failed)} failing patches over "
                        f"{commits(self.rng.count())}")
        outcomes = [self._classify(lp, step) for lp, step in zip(loaded, mat.steps)]
        self._attribute(outcomes, stack, failed)
        for out, lp, step in zip(outcomes, loaded, mat.steps):
            if step.commit and out.status is not BumpStatus.UPSTREAMED:
                out.findings = uses_of_removed(self.repo, lp.patch, step.commit, self.old,
                                               self.new)
        return outcomes, mat

    def _attribute(self, outcomes: list[PatchOutcome], stack: list[Any],
                   failed: list[str]) -> None:
        """The failing patches' attributions, side by side (each is git processes, mostly
        waiting); then each inherits what broke the earlier patches it needs."""
        todo = [(pos, o) for pos, o in enumerate(outcomes) if o.status is BumpStatus.CONFLICT]

        def one(item: tuple[int, PatchOutcome]) -> Attribution:
            pos, out = item
            return attribute(self.rng, stack, pos, out.conflicts, failed)

        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 2))) as pool:
            for (_, out), att in zip(todo, pool.map(one, todo)):
                out.attribution = att
        for out in outcomes:
            if out.attribution is not None and out.status is BumpStatus.CONFLICT:
                _inherit(out.attribution, [o for o in outcomes
                                           if o.id in out.attribution.blocked_by])

    def _announce(self, total: int) -> Callable[[Step], None]:
        return lambda step: self.notify(f"Applying ({step.index}/{total}) {step.id}: "
                                        f"{step.status.value}")

    def _replay(self, index: Index, conflicts: list[FileConflict]) -> bool:
        """Resolutions recorded by rerere at an earlier apply resolve every conflict: staged."""
        files = {c.path: c.content for c in conflicts if c.kind is ConflictKind.CONTENT
                 and c.content is not None}
        if len(files) != len(conflicts):
            return False
        resolved = self.repo.rerere_replay(index, files)
        return set(resolved) == set(files) and not index.unmerged()

    def _classify(self, lp: LoadedPatch, step: Step) -> PatchOutcome:
        out = PatchOutcome(step.index, step.id, lp.patch.subject, lp.entry.file, BumpStatus.CLEAN)
        if lp.patch.is_empty:
            out.status = BumpStatus.EMPTY
        elif step.status is Applied.RERERE:
            out.status = BumpStatus.RESOLVED
        elif step.status in (Applied.NOOP, Applied.CONFLICT):
            out.carried = self.carried.patch(lp.patch)
            if out.carried.commit is not None:
                self._upstreamed(out, lp, out.carried.commit)
            elif step.status is Applied.NOOP:
                out.status = BumpStatus.NOOP
            else:
                out.status = BumpStatus.CONFLICT
                out.conflicts = list(step.conflicts)
                out.hunk_lines = hunk_lines(lp)
        return out

    def _upstreamed(self, out: PatchOutcome, lp: LoadedPatch, commit: str) -> None:
        """Upstream carries the patch's lines: named by the commit that brought them."""
        out.status, out.upstream_commit = BumpStatus.UPSTREAMED, commit
        first = landing(self.rng, commit)
        out.attribution = Attribution(
            first_break=self.rng.ref(first), permanent_break=self.rng.ref(first),
            culprits=[Culprit(commit, self.rng.subject(commit), lp.patch.paths()[0])])


def hunk_lines(lp: LoadedPatch) -> dict[str, int]:
    """Each hunk header -> its line in the patch file (for annotations)."""
    rendered = lp.patch.render()
    diff_at = rendered.rfind(lp.patch.diff) if lp.patch.diff else -1
    first = rendered.count(b"\n", 0, diff_at) + 1 if diff_at >= 0 else 1
    return {h.header: first + h.line - 1 for f in lp.patch.files for h in f.hunks}


def _inherit(att: Attribution, blockers: list[PatchOutcome]) -> None:
    """A patch that needs lines of an earlier failing patch is broken by what broke that one."""
    seen = {c.commit for c in att.culprits}
    for blocker in blockers:
        for culprit in blocker.attribution.culprits if blocker.attribution else []:
            if culprit.commit not in seen:
                seen.add(culprit.commit)
                att.culprits.append(culprit)


def reproduce_command(new: str, upstream: str | None) -> str:
    extra = f" --upstream {shlex.quote(upstream)}" if upstream else ""
    return f"rebasectl apply --base {new}{extra}"


def bump(ws: Workspace, repo: Repo, series: Series, new: str, *, upstream: str | None,
         artifacts: Path | None, notify: Notify, run_tests: bool = False) -> BumpResult:
    """The whole bump under the caller's lock (see ``run``, the command)."""
    old = series.upstream.base
    loaded = load_patches(ws, series)
    out = Artifacts.claim((artifacts or ws.default_artifacts).resolve())
    out.check_writable()
    outcomes, mat = Planner(repo, old, new, notify, Memory(ws.resolutions)).run(loaded)
    result = BumpResult(old, new, UpstreamRange(repo, old, new).count(), outcomes, out.root,
                        reproduce_command(new, upstream))
    if not result.clean:
        write_conflicts(out, result, {lp.entry.id: lp for lp in loaded})
        out.finish()
        return result
    carry(ws, repo, result, mat, notify)
    out.write("bump.json", (json.dumps(result.to_json(), indent=2) + "\n").encode())
    notify("writing the rebase report")
    write_report(ws, repo, series, loaded, result, out)
    if run_tests:
        from ..engine.testing import run_tests as run_suite

        notify("running the regression suite on the bumped tree")
        assert result.worktree is not None
        result.test = run_suite(ws, result.worktree, against="patched", device=None,
                                patch_id=None)
        out.write("test.json", (json.dumps(result.test.to_json(), indent=2) + "\n").encode())
    out.finish()
    return result


def carry(ws: Workspace, repo: Repo, result: BumpResult, mat: Materialised,
          notify: Notify) -> None:
    """Work tree at REV + the kept patches, then export (series.yaml's base becomes REV)."""
    kept = [s for s, p in zip(mat.steps, result.patches)
            if p.status is not BumpStatus.UPSTREAMED and s.commit]
    worktree = ws.default_tree.resolve()
    check_room(ws, worktree)  # never replace work that was not exported
    clear(ws, worktree)
    tip = kept[-1].commit if kept else result.new
    assert tip is not None
    notify(f"checking out {worktree}")
    checkout(ws, repo, worktree, tip)
    TreeMap(result.new, worktree, [(s.id, s.commit or "") for s in kept]).save(ws.tree_map)
    drops = [p.id for p in result.patches if p.status is BumpStatus.UPSTREAMED]
    _, _, changed = export_tree(ws, worktree, drops)
    result.worktree, result.changed = worktree, changed


def write_report(ws: Workspace, repo: Repo, old_series: Series, loaded: list[LoadedPatch],
                 result: BumpResult, out: Artifacts) -> None:
    """report.md / report.json of the bump: old series on the old base, new on the new."""
    from ..report import Side, build_report, render_markdown, to_json

    old_mat = Materializer(repo).run(result.old, [(lp.entry.id, lp.patch) for lp in loaded],
                                     keep_going=True)
    new_series = load(ws.root)
    tmap = TreeMap.load(ws.tree_map)
    new_commits = [c for _, c in tmap.commits] if tmap else []
    report = build_report(
        repo,
        old=Side(result.old, [s.commit for s in old_mat.steps if s.commit], old_series,
                 f"{old_series.upstream.name} {result.old[:12]}"),
        new=Side(result.new, new_commits, new_series,
                 f"{new_series.upstream.name} {result.new[:12]}"))
    out.write("report.md", render_markdown(report).encode())
    out.write("report.json", (to_json(report) + "\n").encode())


# -- conflicts: artifacts a person can resume from -------------------------------------------------
def write_conflicts(out: Artifacts, result: BumpResult, by_id: dict[str, LoadedPatch]) -> None:
    """bump.json, README.md and conflicts/NN-id/ (the patch, the marked-up files, culprits)."""
    out.write("bump.json", (json.dumps(result.to_json(), indent=2) + "\n").encode())
    for p in result.patches:
        if p.status is not BumpStatus.CONFLICT:
            continue
        folder = f"conflicts/{p.index:02d}-{p.id}"
        patch = by_id[p.id].patch
        out.write(f"{folder}/{by_id[p.id].entry.file}", patch.render())
        out.write(f"{folder}/failing-hunks.diff", failing_hunks(patch, p.conflicts))
        for c in p.conflicts:
            if c.content is not None:
                out.write(f"{folder}/files/{c.path}", c.content)
        out.write(f"{folder}/culprits.json",
                  (json.dumps(p.to_json(), indent=2) + "\n").encode())
    out.write("README.md", conflict_readme(result).encode())


def failing_hunks(patch: Any, conflicts: list[FileConflict]) -> bytes:
    """The patch's hunks that meet a conflict region (whole files for file-level conflicts)."""
    parts = []
    for c in conflicts:
        f = patch.model.file(c.path)
        if f is None:
            continue
        wanted = {h for r in c.regions for h in r.hunks}
        parts.append(f.render([h for h in f.hunks if h.header in wanted] or None))
    return b"".join(parts)


def conflict_readme(result: BumpResult) -> str:
    bad = [p for p in result.patches if p.status is BumpStatus.CONFLICT]
    lines = [f"# Bump {result.old[:12]} -> {result.new[:12]}: {len(bad)} patch(es) do not apply",
             "", f"{commits(result.upstream_commits)} in the range.", "",
             "Reproduce locally (stops at the first conflict in `.rebasectl/tree`, with markers "
             "and unmerged entries as git leaves them):", "", "```", result.reproduce, "```", "",
             "| # | patch | status | first break | permanent break |", "|---|---|---|---|---|"]
    for p in result.patches:
        att = p.attribution
        fb = f"`{att.first_break.commit[:12]}`" if att and att.first_break else ""
        pb = f"`{att.permanent_break.commit[:12]}`" if att and att.permanent_break else ""
        lines.append(f"| {p.index} | {p.id} | {p.status.value} | {fb} | {pb} |")
    for p in bad:
        lines += _readme_patch(p)
    warned = [(p, f) for p in result.patches for f in p.findings]
    if warned:
        lines += ["", "## Merged, but uses a name the patch removes", ""]
        lines += [f"- {p.id}: `{f.path}:{f.line}` uses `{f.name}`" +
                  (f" (upstream `{f.commit[:12]}`)" if f.commit else "") for p, f in warned]
    return "\n".join(lines) + "\n"


def _readme_patch(p: PatchOutcome) -> list[str]:
    att = p.attribution
    lines = ["", f"## {p.index}. {p.id}: {p.subject}", ""]
    for c in p.conflicts:
        lines.append(f"- `{c.path}`: {c.kind.value}" + _gone(c))
        for r in c.regions:
            culprits = _region_culprits(p, r)
            where = f"lines {r.start}-{r.end} of `files/{c.path}`" if r.start else "the file"
            who = ", ".join(f"`{x[:12]}`" for x in culprits) or "no upstream commit found"
            lines.append(f"  - {where}: changed upstream by {who}")
    if att and att.blocked_by:
        lines.append(f"- needs lines added by earlier failing patch(es): "
                     f"{', '.join(att.blocked_by)}")
    for key, ref in (("first break", att.first_break if att else None),
                     ("permanent break", att.permanent_break if att else None)):
        if ref:
            lines.append(f"- {key}: `{ref.commit[:12]}` {ref.subject}")
    for culprit in att.culprits if att else []:
        when = "" if culprit.by_first_break else " (after the first break)"
        lines.append(f"- culprit `{culprit.commit[:12]}` ({culprit.path}){when}: "
                     f"{culprit.subject}")
    lines.append(f"- files: `conflicts/{p.index:02d}-{p.id}/`")
    return lines


def _gone(c: FileConflict) -> str:
    if c.kind is not ConflictKind.MODIFY_DELETE:
        return ""
    by = f", deleted upstream by `{c.deleted_by[:12]}`" if c.deleted_by else ""
    to = f", moved to `{c.moved_to}`" if c.moved_to else ""
    near = "".join(f", the lines it needs are now in `{p}`" for p in c.code_in)
    return by + to + near


# -- blame: one patch ------------------------------------------------------------------------------
def blame(ws: Workspace, repo: Repo, series: Series, patch_ref: str, old: str, new: str,
          notify: Notify) -> dict[str, Any]:
    """Breaks and culprits of one patch (id or file name) between two upstream revisions."""
    loaded = load_patches(ws, series)
    pos = next((i for i, lp in enumerate(loaded)
                if patch_ref in (lp.entry.id, lp.entry.file, f"{PATCH_DIR}/{lp.entry.file}")),
               None)
    if pos is None:
        raise RebasectlError(f"no patch {patch_ref!r} in series.yaml (give an id or a file name)")
    planner = Planner(repo, old, new, notify)
    outcomes, _ = planner.run(loaded[:pos + 1])
    out = outcomes[-1]
    att = out.attribution
    if att is None or out.status is BumpStatus.UPSTREAMED:
        stack = [(lp.entry.id, lp.patch) for lp in loaded[:pos + 1]]
        touched = attribute(planner.rng, stack, pos, ())
        att = att or touched
        att.touching = touched.touching
    data = out.to_json()
    data.update(schema="rebasectl.blame/1", **{"from": old, "to": new},
                upstream_commits=planner.rng.count(),
                culprits=[c.to_json() for c in att.culprits],
                first_break=att.first_break.to_json() if att.first_break else None,
                permanent_break=att.permanent_break.to_json() if att.permanent_break else None,
                blocked_by=att.blocked_by,
                touching=[{"commit": c, "subject": planner.rng.subject(c)}
                          for c in att.touching])
    return data


# -- the command -----------------------------------------------------------------------------------
def run(ws: Workspace, to_rev: str, upstream: str | None, artifacts: Path | None,
        notify: Notify, run_tests: bool = False) -> BumpResult:
    """``bump --to REV``: the pipeline above under the lock, once the checkout allows it (no
    apply in progress, no unexported work in the default tree) and REV contains the base."""
    from ..engine.upstream import resolve
    from ..model.ids import short
    from .common import fetched_mirror, locked

    with locked(ws, "bump", notify):
        if ws.apply_state.exists():
            raise RebasectlError("an apply is in progress: `rebasectl continue` or `abort` it "
                                 "before a bump")
        series = load(ws.root)
        # the work tree's own check before anything is fetched or computed: a bump that would
        # replace unexported work is refused while everything is as the person left it
        check_room(ws, ws.default_tree.resolve())
        repo = fetched_mirror(ws, upstream, series, to_rev, notify)
        old = resolve(repo, series.upstream.base, what="base")
        new = resolve(repo, to_rev, what="--to revision")
        if not repo.history.is_ancestor(old, new):
            raise RebasectlError(f"--to {to_rev}: {short(new)} does not contain the pinned base "
                                 f"{short(old)} (a bump moves the base forward)")
        return bump(ws, repo, series, new, upstream=upstream,
                    artifacts=ws.path(artifacts) if artifacts else None, notify=notify,
                    run_tests=run_tests)
