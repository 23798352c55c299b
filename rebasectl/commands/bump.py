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

import difflib
import json
import os
import shlex
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import edits
from ..engine import serialize as engine_json
from ..engine.aftermerge import Risk, risks
from ..engine.attribution import (
    Attribution,
    Culprit,
    Culprits,
    RegionCulprits,
    Scan,
    UpstreamRange,
    attribute,
    relevant_stack,
)
from ..engine.carried import Carried, CarriedLines
from ..engine.conflicts import (
    WHOLE_FILE,
    ConflictKind,
    FileConflict,
    Labels,
    Region,
    engine_for,
    sides,
)
from ..engine.exchange import check_links_on, export_tree, load_patches
from ..engine.materialize import Materialised, Materializer, Step
from ..engine.proposals import (
    Earlier,
    GitOracle,
    Proposal,
    consistent,
    dropped,
    earlier_of,
    propose_file,
    superseded,
)
from ..engine.proposals.evidence import BothInsert, ContextOnly, Moved, Superseded, Upstream
from ..engine.resolutions import Memory
from ..engine.session import followed_words
from ..engine.state import Baseline, Carrying, TreeMap
from ..engine.worktrees import check_room, checkout, clear
from ..git import Index, Repo
from ..infra.artifacts import Artifacts
from ..infra.errors import ExitCode, RebasectlError
from ..infra.faults import boundary
from ..infra.progress import Counted
from ..model.dependencies import SeriesLines
from ..model.ids import Oid, short
from ..model.patches import Patch
from ..model.series import PATCH_DIR, Series, load
from ..model.series_patch import AboutPatch, SeriesPatch
from ..model.status import Applied, BumpStatus
from ..model.words import commits, upstream_lines
from ..model.workspace import Workspace
from ..report.markdown import code_span, escape
from ..report.names import NameUse, uses_of_removed
from . import serialize
from .serialize import region_id

Notify = Callable[[str], None]


FAILED = (BumpStatus.CONFLICT, BumpStatus.BLOCKED)


@dataclass
class PatchOutcome(AboutPatch):
    """What became of one patch (held, not copied) in a bump."""

    index: int
    patch: SeriesPatch
    status: BumpStatus
    how: Applied = Applied.CLEAN  # the materialiser's word: rerere = a recorded resolution
    conflicts: list[FileConflict] = field(default_factory=list)
    attribution: Attribution | None = None
    upstream_commit: Oid | None = None  # upstreamed: the commit holding the change
    carried: Carried | None = None  # the carried-lines engine's answer (conflicts, no-ops)
    hunk_lines: dict[str, int] = field(default_factory=dict)  # hunk header -> patch file line
    findings: list[NameUse] = field(default_factory=list)  # merged, but uses a removed name
    blocked_by: list[str] = field(default_factory=list)  # earlier failed patches it needs
    followed: dict[str, str] = field(default_factory=dict)  # upstream renames followed
    risks: list[Risk] = field(default_factory=list)  # checks after the merge (warnings)
    proposals: dict[str, Proposal] = field(default_factory=dict)  # region id -> proposal
    dropped: list[FileConflict] = field(default_factory=list)  # upstreamed: its merge's regions
    # (in bump.json as "dropped_regions" once --propose gave each its proposed drop)

    def region_count(self) -> int:
        """The regions of this patch's 3-way merge: each content region, one per file-level
        conflict (modify/delete, missing), an upstreamed patch's included (``dropped``): the
        count the answer keys and every surface of bump use."""
        return sum(len(c.regions) or 1 for c in [*self.conflicts, *self.dropped])

    @property
    def shown_status(self) -> str:
        """Its status for people (the terminal's table, the artifacts README): a ``clean``
        patch that applied only because a recorded resolution was replayed says so, as
        bump.json's ``how`` does (its ``status`` stays the contract's word)."""
        if self.status is BumpStatus.CLEAN and self.how in (Applied.RERERE, Applied.RECORDED):
            return f"clean ({self.how.value} resolution replayed)"
        return self.status.value

    def carrier_subject(self) -> str:
        """The subject of the upstream commit that carries an upstreamed patch (its culprit)."""
        culprits = self.attribution.culprits if self.attribution else []
        return culprits[0].subject if culprits else ""

    def upstreamed_line(self, total: int, carried: bool = False) -> str:
        """What became of an upstreamed patch and what to do (``carried``: the clean bump
        dropped it), in one line."""
        assert self.upstream_commit is not None
        subject = self.carrier_subject()
        n = self.region_count()
        had = f"; its {n} merge region{'' if n == 1 else 's'} already upstream" if n else ""
        head = f"{self.index}/{total} {self.id}: upstreamed by {self.upstream_commit.short()} " \
            f"{_clip(subject)}{had}"
        if carried:
            return f"{head}; dropped from the series (its entry and file removed)"
        return (f"{head}; drop it: a clean bump drops it itself, else `rebasectl skip` at "
                f"apply's stop on it, then `rebasectl export --drop {self.id}`")

    def region_culprits(self, c: FileConflict) -> list[list[Oid]]:
        att = self.attribution
        found = {id(rc.region): rc.commits for rc in att.regions} if att else {}
        return [found.get(id(r), []) for r in c.regions]

    def region_blocked(self, c: FileConflict) -> list[list[str]]:
        """Per region, the earlier failing patches whose lines it needs."""
        att = self.attribution
        found = {id(rc.region): rc.blocked_by for rc in att.regions} if att else {}
        return [found.get(id(r), []) for r in c.regions]


@dataclass
class BumpResult:
    old: Oid
    new: Oid
    upstream_commits: int
    patches: list[PatchOutcome]
    artifacts: Path
    reproduce: str
    worktree: Path | None = None
    changed: list[str] = field(default_factory=list)
    test: Any = None  # testing.TestRun when --test ran

    @property
    def clean(self) -> bool:
        return all(p.status not in FAILED for p in self.patches)

    @property
    def exit_code(self) -> ExitCode:
        if not self.clean:
            return ExitCode.CONFLICT
        failed = self.test is not None and self.test.result == "failed"
        return ExitCode.TESTS_FAILED if failed else ExitCode.OK

    def failing(self) -> list[PatchOutcome]:
        return [p for p in self.patches if p.status in FAILED]

    def upstreamed(self) -> list[PatchOutcome]:
        return [p for p in self.patches if p.status is BumpStatus.UPSTREAMED]

    def summary(self) -> str:
        """The one count line: failing patches and their regions, then upstreamed patches and
        theirs, then every region of the merges (the answer keys' count)."""
        failing, ups = self.failing(), self.upstreamed()
        blocked = sum(1 for p in failing if p.status is BumpStatus.BLOCKED)
        mine = sum(p.region_count() for p in failing)
        text = (f"{len(failing)} of {len(self.patches)} patches fail ({len(failing) - blocked} "
                f"conflict, {blocked} blocked), {mine} region{'' if mine == 1 else 's'}")
        if ups:
            theirs = sum(p.region_count() for p in ups)
            text += (f"; {len(ups)} upstreamed ({theirs} region{'' if theirs == 1 else 's'}, "
                     f"upstream's already); {mine + theirs} merge regions in all")
        return text

    def annotations(self) -> list[str]:
        """One short ``file:line: message`` per conflict region (CI annotates the patch file)."""
        out = []
        for p in self.patches:
            for c in p.conflicts:
                for r in c.regions or [None]:
                    out.append(annotation(p, c, r))
            out += [f"{PATCH_DIR}/{p.file}:1: patch {p.index} {p.id}: warning: {f.text()}"
                    for f in p.findings]
            out += [f"{PATCH_DIR}/{p.file}:{p.hunk_lines.get(r.hunk, 1)}: patch {p.index} "
                    f"{p.id}: warning: {r.text()}" for r in p.risks]
        return out

    def risk_lines(self) -> list[str]:
        """The checks after the merge, one line each."""
        total = len(self.patches)
        return [f"{p.index}/{total} {p.id}: {r.text()}" for p in self.patches for r in p.risks]

    def warning_lines(self) -> list[str]:
        """Every warning, one line each: the checks after the merge, then the names the patch
        unbinds that the merged file still uses (``risks.txt``; the terminal shows a few)."""
        total = len(self.patches)
        return self.risk_lines() + [f"{p.index}/{total} {p.id}: {f.text()}"
                                    for p in self.patches for f in p.findings]

    def region_lines(self) -> list[str]:
        """One line per region, for a person: where it is in upstream's file and in the marked
        file, labelled, and why (what ``regions.txt`` holds; the terminal shows a few)."""
        total = len(self.patches)
        return [f"{p.index}/{total} {p.id}: {_where(c, r)}{_why(p, c, r)}"
                for p in self.failing() for c in p.conflicts for r in c.regions or [None]]

    def patch_lines(self) -> list[str]:
        """One line per failing patch: status, regions, first culprit (or its blocker)."""
        total, out = len(self.patches), []
        for p in self.failing():
            n = sum(len(c.regions) or 1 for c in p.conflicts)
            head = f"{p.index}/{total} {p.id}: {p.status.value}"
            if p.blocked_by:
                head += f" by {', '.join(p.blocked_by)}"
            first = p.attribution.culprits[0] if p.attribution and p.attribution.culprits \
                else None
            gone = next((c.deleted_by for c in p.conflicts if c.deleted_by), None)
            why = f"; first culprit {first.commit.short()} {_clip(first.subject)}" if first else \
                f"; deleted upstream by {gone.short()}" if gone else ""
            out.append(f"{head}; {n} region{'' if n == 1 else 's'}{why}")
        return out


def _clip(text: str, width: int = 60) -> str:
    """``text`` cut at a word to fit ``width``, marked with ``...`` (no half word, no dangling
    ``(`` or backquote)."""
    if len(text) <= width:
        return text
    cut = text[:width - 3].rsplit(" ", 1)[0].rstrip(" ([{`'\",;:-")
    return f"{cut}..."


def _where(c: FileConflict, r: Region | None) -> str:
    """``path``: upstream lines (the target's file) and work-tree lines (the file with
    markers), each labelled; a huge region also names the lines in it that differ."""
    if c.kind in WHOLE_FILE or r is None:
        return f"{c.path}: {c.kind.value}"
    up = upstream_lines(r.ours)
    marked = f", work tree lines {r.start}-{r.end} with markers" if r.start else ""
    trim = _trimmed(c, r)
    return f"{c.path}: {c.kind.value}, {up}{marked}{trim}"


def _why(p: PatchOutcome, c: FileConflict, r: Region | None) -> str:
    rc = _region_info(p, r if r is not None or c.kind not in WHOLE_FILE or not c.regions
                      else c.regions[0])
    if c.kind is ConflictKind.MISSING:
        return f"; the file is created by earlier patch {c.blocked_by}, which failed" \
            if c.blocked_by else "; the file is not in the tree"
    if c.kind is ConflictKind.MODIFY_DELETE:
        return _gone_words(c)
    if rc and rc.blocked_by:
        return f"; needs lines of earlier patch {', '.join(rc.blocked_by)}, which failed"
    if rc and rc.commits:
        more = f" and {len(rc.commits) - 1} more" if len(rc.commits) > 1 else ""
        return f"; changed upstream by {rc.commits[0].short()}{more}"
    return "; no upstream commit found"


def _gone_words(c: FileConflict) -> str:
    gone = f"; deleted upstream by {c.deleted_by.short()}" if c.deleted_by else \
        "; deleted upstream"
    moved = f", moved to {c.moved_to}" if c.moved_to else ""
    near = f"; its code is now in {c.code_in[0]}" if c.code_in else ""
    return gone + moved + near


HUGE = 40  # a region longer than this is also shown trimmed to the lines that differ


def differing(c: FileConflict, r: Region) -> list[tuple[int, int]]:
    """For a huge region: the work-tree lines of its patch side that the patch changed (its
    side against the preimage's, diffed): what a person has to carry, trimmed out of the many
    lines upstream rewrote around it. Empty for a small region."""
    if not c.content or not r.start or r.end - r.start <= HUGE:
        return []
    _, base, theirs, theirs_at = sides(c.content, r)
    spans = []
    matcher = difflib.SequenceMatcher(None, base, theirs, autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            first = theirs_at + j1
            spans.append((first, max(first, theirs_at + j2 - 1)))
    return spans


def _trimmed(c: FileConflict, r: Region) -> str:
    spans = differing(c, r)
    if not spans:
        return ""
    shown = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans[:3])
    more = f" and {len(spans) - 3} more" if len(spans) > 3 else ""
    return f" (the patch's change: work tree lines {shown}{more})"


def annotation(p: PatchOutcome, c: FileConflict, region: Region | None) -> str:
    """``patches/FILE:LINE: patch N id: ...``: the line of the patch file is the region's
    hunk; the message says where the region is, in upstream's file and in the marked copy
    (apply's work tree, ``conflicts/.../files/``), each labelled, and why."""
    if c.kind in WHOLE_FILE or region is None:
        what = f"{c.kind.value}: {c.path}{_why(p, c, region)}"
    else:
        up = f"{c.path}:{region.ours[0]} (upstream)" if region.ours else f"{c.path}"
        marked = f", line {region.start} with markers" if region.start else ""
        what = f"{c.kind.value} conflict at {up}{marked}{_why(p, c, region)}"
    return f"{PATCH_DIR}/{p.file}:{_patch_line(p, region)}: patch {p.index} {p.id}: {what}"


def _region_info(p: PatchOutcome, region: Region | None) -> RegionCulprits | None:
    if p.attribution is None or region is None:
        return None
    return next((rc for rc in p.attribution.regions if rc.region is region), None)


def _patch_line(p: PatchOutcome, region: Region | None) -> int:
    return p.hunk_lines.get(region.hunks[0] if region and region.hunks else "", 1)


# -- the pipeline ----------------------------------------------------------------------------------
class Planner:
    """Materialise the series on the new base, classify every patch, attribute the failures."""

    def __init__(self, repo: Repo, old: Oid, new: Oid, notify: Notify,
                 memory: Memory | None = None, *, replay: bool = True,
                 since: Oid | None = None) -> None:
        """``memory`` and ``replay``: resolutions recorded at earlier applies (whole, and
        rerere's) are replayed, as bump does. Blame asks which upstream commits broke a patch,
        an answer no local record may change: without ``replay`` a conflict rerere would resolve
        stays a conflict, and ``rerere_would`` says that rerere would have resolved it.
        ``since``: an ancestor of ``old`` (the series' base, for ``blame --from``) from which a
        commit that carries a patch at ``old`` already is looked for: such a patch is
        upstreamed, whatever revision the range starts at."""
        self.repo, self.old, self.new, self.notify = repo, old, new, notify
        self.memory = memory
        self.replay = replay
        self.rerere_would = False
        self.rng = UpstreamRange(repo, old, new)
        self.carried = CarriedLines(self.rng)
        self.since = since
        self._since: CarriedLines | None = None
        self.engine = engine_for(repo, old, new)

    def run(self, loaded: list[SeriesPatch], only: int | None = None,
            numbers: list[int] | None = None) -> tuple[list[PatchOutcome], Materialised]:
        """Every patch classified; the failing ones attributed and the checks after the merge
        run. Blame asks about the one patch at position ``only``: only it is attributed and
        looked for removed names, and the checks after the merge (bump's warnings, not its
        question) are not run. ``numbers``: the patches' positions in the series (1-based),
        when ``loaded`` is part of it."""
        # the series on its old base first, unless the mirror has them: it puts every patch's
        # preimage blob in the mirror, so the 3-way merges and attribution's line mapping work
        pre = [f.old_blob or "" for lp in loaded for f in lp.files if f.old_path]
        if self.repo.missing_objects(pre):  # an imported series' blobs are there already
            self.notify(f"materialising {len(loaded)} patches on the old base {self.old.short()}")
            Materializer(self.repo).run(self.old, loaded, three_way=False, keep_going=True)
        asked = loaded[only].id if only is not None else None
        total = max(numbers or [len(loaded)])
        part = f" (of the first {total}: those that share files with {asked})" \
            if asked and total > len(loaded) else ""
        self.notify(f"applying {len(loaded)} patches on {self.new.short()}{part}")
        labels = Labels(f"upstream {self.new.short()}", "")
        mat = Materializer(self.repo, lambda pid: Labels(labels.upstream, f"patch {pid}"),
                           self.engine, self._replay if self.replay else self._probe,
                           self.memory if self.replay else None,
                           explain=lambda pid: asked is None or pid == asked).run(
            self.new, loaded, keep_going=True, on_step=self._announce(total), numbers=numbers)
        deps = SeriesLines(loaded)
        outcomes, failed = self._classify_all(loaded, mat, deps, only)
        for pos, out in enumerate(outcomes):
            for c in out.conflicts:
                if c.kind is ConflictKind.MISSING:
                    c.blocked_by = deps.creator(pos, c.path)
        todo = [pos for pos, o in enumerate(outcomes) if o.status in FAILED
                and (only is None or pos == only)]
        if todo:
            self.notify(f"attributing {len(todo)} failing patch(es) over "
                        f"{commits(self.rng.count())}")
        self._attribute(outcomes, loaded, failed, deps, todo)
        self._check(loaded, outcomes, mat, only)
        return outcomes, mat

    def _check(self, loaded: list[SeriesPatch], outcomes: list[PatchOutcome],
               mat: Materialised, only: int | None) -> None:
        """Names a merged patch removes that its file still uses; for a bump (``only`` None),
        the checks after the merge too (their histories read in one ``git log``)."""
        if only is None:
            self.carried.prefetch(path for lp in loaded for path in lp.patch.paths())
        for pos, (out, lp, step) in enumerate(zip(outcomes, loaded, mat.steps)):
            if only not in (None, pos):
                continue
            if step.commit and out.status is not BumpStatus.UPSTREAMED:
                out.findings = uses_of_removed(self.repo, lp.patch, step.commit, self.old,
                                               self.new)
            if only is None and out.status not in (BumpStatus.UPSTREAMED, BumpStatus.EMPTY):
                out.risks = risks(self.carried, lp.patch, merged=step.commit is not None)
                if out.risks and not out.hunk_lines:
                    out.hunk_lines = hunk_lines(lp)

    def _attribute(self, outcomes: list[PatchOutcome], stack: list[SeriesPatch], failed: list[str],
                   deps: SeriesLines, todo: list[int]) -> None:
        """The failing patches' attributions, side by side (each is git processes, mostly
        waiting). A region an earlier failed patch caused is that patch's: the patch is
        ``blocked``."""
        finder = Culprits(self.rng)
        for pos in todo:  # every failing patch's regions of a file blamed in one git each way
            for c in outcomes[pos].conflicts:
                f = stack[pos].patch.model.file(c.path)
                if f is not None and c.kind not in WHOLE_FILE:
                    finder.expect(f, c.regions)

        def one(pos: int) -> Attribution:
            return attribute(self.rng, stack, pos, outcomes[pos].conflicts, failed, deps,
                             finder=finder)

        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 2))) as pool:
            for pos, att in zip(todo, pool.map(one, todo)):
                out = outcomes[pos]
                out.attribution = att
                if att.blocked_by:
                    out.status = BumpStatus.BLOCKED
                    out.blocked_by = list(dict.fromkeys([*att.blocked_by, *out.blocked_by]))

    def _announce(self, total: int) -> Callable[[Step], None]:
        return lambda step: self.notify(Counted(
            f"Applying ({step.index}/{total}) {step.id}: "
            f"{step.status.value}{followed_words(step.followed)}", step.index, total))

    def _replay(self, index: Index, conflicts: list[FileConflict]) -> bool:
        """Resolutions recorded by rerere at an earlier apply resolve every conflict: staged."""
        files = {c.path: c.content for c in conflicts if c.kind is ConflictKind.CONTENT
                 and c.content is not None}
        if len(files) != len(conflicts):
            return False
        resolved = self.repo.rerere_replay(index, files)
        return set(resolved) == set(files) and not index.unmerged()

    def _probe(self, index: Index, conflicts: list[FileConflict]) -> bool:
        """``_replay`` asked, its answer kept in ``rerere_would`` and not taken: the conflict
        stays (only the asked patch's merge is explained, so the answer is about it)."""
        self.rerere_would = self._replay(index, conflicts)
        return False

    def _classify_all(self, loaded: list[SeriesPatch], mat: Materialised, deps: SeriesLines,
                      only: int | None) -> tuple[list[PatchOutcome], list[str]]:
        """Each patch's outcome, in series order, and the ids of those that failed. A patch whose
        merge conflicted because upstream already carries it (``upstreamed``) has not failed: a
        later patch needing its lines finds them upstream, so its regions are upstream's, not
        blocked by it. Blame asks it of the conflicting patches the asked one needs as well as
        of the asked one, so blame and bump agree on who blocks whom."""
        outcomes: list[PatchOutcome] = []
        failed: list[str] = []
        wanted: set[str] = set()
        if only is not None:
            conflicting = [s.id for s in mat.steps if s.status is Applied.CONFLICT]
            wanted = set(deps.blockers(only, loaded[only].patch, conflicting))
        for pos, (lp, step) in enumerate(zip(loaded, mat.steps)):
            asked = only in (None, pos) or step.id in wanted
            out = self._classify(lp, step, deps.blockers(pos, lp.patch, failed), asked)
            outcomes.append(out)
            if step.status is Applied.CONFLICT and out.status is not BumpStatus.UPSTREAMED:
                failed.append(step.id)
        return outcomes, failed

    def _classify(self, lp: SeriesPatch, step: Step, needs: list[str],
                  asked: bool = True) -> PatchOutcome:
        """Its status from the step; ``needs``: the failed earlier patches whose lines or files
        its hunks need (such a patch is never ``upstreamed``: its lines cannot be judged). One
        that merged all the same is ``clean``, as ``git am -3`` merges it (hostile11 #3): it is
        ``blocked`` only when a region of its conflict needs them (``_attribute``). Upstream's
        copy of its lines is looked for when it is ``asked`` about."""
        out = PatchOutcome(step.index, lp, BumpStatus.CLEAN, how=step.status)
        out.followed = dict(step.followed)
        if lp.patch.is_empty:
            out.status = BumpStatus.EMPTY
        elif step.status is Applied.CONFLICT:
            out.status = BumpStatus.CONFLICT
            out.conflicts = list(step.conflicts)
            out.hunk_lines = hunk_lines(lp)
            if not needs and asked:
                out.carried = self._carrier(lp)
                if out.carried.commit is not None:
                    out.dropped = out.conflicts  # shown with --propose: drops, commit named
                    out.conflicts, out.hunk_lines = [], {}
                    self._upstreamed(out, lp, out.carried.commit)
        elif step.status is Applied.NOOP and not needs:
            out.carried = self._carrier(lp)
            if out.carried.commit is not None:
                self._upstreamed(out, lp, out.carried.commit)
        return out

    def _carrier(self, lp: SeriesPatch) -> Carried:
        """Upstream's copy of the patch: brought by a commit of the range, else (with
        ``since``) by one before the range's old end, which carries it there already (blame
        --from a revision after that commit: the same answer as from the series' base)."""
        found = self.carried.patch(lp.patch)
        if found.commit is not None or self.since is None:
            return found
        if self._since is None:
            self._since = CarriedLines(UpstreamRange(self.repo, self.since, self.new))
        earlier = self._since.patch(lp.patch)
        if earlier.commit is None or not self.repo.history.is_ancestor(earlier.commit, self.old):
            return found
        return earlier

    def _upstreamed(self, out: PatchOutcome, lp: SeriesPatch, commit: Oid) -> None:
        """Upstream carries the patch's lines: named by the commit that brought them."""
        out.status, out.upstream_commit = BumpStatus.UPSTREAMED, commit
        # no break: the commit that upstreamed it is named as its culprit and upstream_commit
        out.attribution = Attribution(
            first_break=None, permanent_break=None,
            culprits=[Culprit(commit, self.rng.subject(commit), lp.patch.paths()[0])])


def hunk_lines(lp: SeriesPatch) -> dict[str, int]:
    """Each hunk header -> its line in the patch file (for annotations)."""
    rendered = lp.patch.render()
    diff_at = rendered.rfind(lp.patch.diff) if lp.patch.diff else -1
    first = rendered.count(b"\n", 0, diff_at) + 1 if diff_at >= 0 else 1
    return {h.header: first + h.line - 1 for f in lp.patch.files for h in f.hunks}


def reproduce_command(new: str, upstream: str | None) -> str:
    extra = f" --upstream {shlex.quote(upstream)}" if upstream else ""
    return f"rebasectl apply --base {new}{extra}"


def propose(repo: Repo, carried: CarriedLines, outcomes: list[PatchOutcome],
            loaded: list[SeriesPatch], notify: Notify) -> None:
    """Each open region's proposal (engine.proposals), kept on its patch's outcome."""
    oracle = GitOracle(repo, carried.rng.new, carried)
    files = {lp.id: len(lp.patch.files) for lp in loaded}
    by_id = {lp.id: lp for lp in loaded}
    for out in outcomes:
        if out.status is BumpStatus.UPSTREAMED and out.upstream_commit and out.dropped:
            commit = out.upstream_commit
            subject = out.carried.subject if out.carried else ""
            out.proposals = {p.id: p for c in out.dropped
                             for p in dropped(out.id, c, commit, subject)}
            continue
        if out.status not in (BumpStatus.CONFLICT, BumpStatus.BLOCKED):
            continue
        notify(f"proposing resolutions for {out.id}")
        found: list[Proposal | None] = []
        for c in out.conflicts:
            earlier = [_earlier(needs, c.path, by_id, outcomes) if needs else None
                       for needs in out.region_blocked(c)]
            found += propose_file(out.id, c, out.region_culprits(c), oracle, earlier)
        consistent(found, out.conflicts, added_lines(by_id[out.id].patch))
        if len(out.conflicts) == files.get(out.id):
            superseded(found)
        out.proposals = {p.id: p for p in found if p is not None}


def added_lines(patch: Patch) -> list[bytes]:
    """Every line the patch adds, in every file."""
    return [ln for f in patch.model.files for h in f.hunks for ln in h.added]


def _earlier(needs: list[str], path: str, by_id: dict[str, SeriesPatch],
             outcomes: list[PatchOutcome]) -> Earlier:
    """What the earlier failing patches ``needs`` bring to ``path``: their added lines and
    their proposals there (made before: the outcomes are in series order)."""
    adds: list[bytes] = []
    for pid in needs:
        f = by_id[pid].patch.model.file(path) if pid in by_id else None
        adds += [ln for h in f.hunks for ln in h.added] if f is not None else []
    theirs = [pr for o in outcomes if o.id in needs for pr in o.proposals.values()
              if pr.path == path]
    return earlier_of(needs, adds, theirs)


def artifacts_folder(ws: Workspace, artifacts: Path | None) -> Path:
    """``--artifacts``, refused inside ``.rebasectl/`` (its work tree, mirror, state files live
    there: a bump's README written at .rebasectl/tree blocked every later apply) but for the
    default folder."""
    own = ws.default_artifacts.resolve()
    chosen = (artifacts or own).resolve()
    if ws.inside_state(chosen) and chosen != own and own not in chosen.parents:
        raise RebasectlError(f"--artifacts {chosen}: inside {ws.state_dir}, rebasectl's own "
                             "state; pick a folder outside it (or leave --artifacts out: "
                             f"{own})")
    return chosen


def bump(ws: Workspace, repo: Repo, series: Series, new: Oid, *, upstream: str | None,
         artifacts: Path | None, notify: Notify, run_tests: bool = False,
         proposals: bool = False) -> BumpResult:
    """The whole bump under the caller's lock (see ``run``, the command). ``proposals``: each open
    region's proposed resolution, shown (JSON, README, proposals.json), nothing written."""
    old = series.upstream.base
    loaded = load_patches(ws, series)
    check_links_on(repo, new, loaded)
    out = Artifacts.claim(artifacts_folder(ws, artifacts))
    out.check_writable()
    planner = Planner(repo, old, new, notify, Memory(ws.resolutions))
    outcomes, mat = planner.run(loaded)
    result = BumpResult(old, new, UpstreamRange(repo, old, new).count(), outcomes, out.root,
                        reproduce_command(new, upstream))
    if proposals:
        propose(repo, planner.carried, outcomes, loaded, notify)
    if not result.clean or proposals:  # --propose shows, never carries: nothing else written
        write_conflicts(out, result, {lp.id: lp for lp in loaded})
        out.finish()
        return result
    rerun = f"rebasectl bump --to {new}" + (f" --upstream {shlex.quote(upstream)}"
                                            if upstream else "")
    carry(ws, repo, result, mat, loaded, notify, rerun)
    out.write("bump.json", (json.dumps(serialize.bump_result(result), indent=2) + "\n").encode())
    out.write("risks.txt", "".join(f"{ln}\n" for ln in result.warning_lines()).encode())
    notify("writing the rebase report")
    write_report(ws, repo, series, loaded, result, out)
    if run_tests:
        from ..engine.testing import run_tests as run_suite

        notify("running the regression suite on the bumped tree")
        assert result.worktree is not None
        result.test = run_suite(ws, result.worktree, against="patched", device=None,
                                patch_id=None, notify=notify)
        test_json = json.dumps(engine_json.test_run(result.test), indent=2)
        out.write("test.json", (test_json + "\n").encode())
    out.finish()
    return result


def carry(ws: Workspace, repo: Repo, result: BumpResult, mat: Materialised,
          loaded: list[SeriesPatch], notify: Notify, rerun: str) -> None:
    """Work tree at REV + the kept patches, then export (series.yaml's base becomes REV). The
    tree map's baseline is the series as this bump read it (``loaded``), so its export, like
    every export, refuses to write over a patch file edited while the bump ran; ``rerun``
    (this bump's command) is the way out it then gives."""
    kept = [s for s, p in zip(mat.steps, result.patches)
            if p.status is not BumpStatus.UPSTREAMED and s.commit]
    worktree = ws.default_tree.resolve()
    check_room(ws, worktree)  # never replace work that was not exported
    clear(ws, worktree)
    boundary("tree-cleared")  # a kill here leaves no tree: status says so, apply makes it
    tip = kept[-1].commit if kept else result.new
    assert tip is not None
    Carrying(worktree, result.new).save(ws.carrying)  # from here the tree is this bump's
    notify(f"checking out {worktree}")
    checkout(ws, repo, worktree, tip)
    boundary("carried")  # a kill here: a tree at the new upstream, the old series.yaml
    TreeMap(result.new, worktree, [(s.id, s.commit) for s in kept if s.commit],
            baseline=Baseline.of(result.old, loaded)).save(ws.tree_map)
    drops = [p.id for p in result.patches if p.status is BumpStatus.UPSTREAMED]
    try:
        _, _, changed = export_tree(ws, worktree, drops)
    except edits.HandEdits as refused:
        raise edits.during_bump(refused, rerun) from None
    Carrying.remove(ws.carrying)
    result.worktree, result.changed = worktree, changed


def write_report(ws: Workspace, repo: Repo, old_series: Series, loaded: list[SeriesPatch],
                 result: BumpResult, out: Artifacts) -> None:
    """report.md / report.json of the bump: old series on the old base, new on the new."""
    from ..report import Side, build_report, render_markdown, to_json

    old_mat = Materializer(repo).run(result.old, loaded, keep_going=True)
    new_series = load(ws.root)
    tmap = TreeMap.load(ws.tree_map)
    new_commits = [c for _, c in tmap.commits] if tmap else []
    report = build_report(
        repo,
        old=Side(result.old, [s.commit for s in old_mat.steps if s.commit], old_series,
                 f"{old_series.upstream.name} {result.old.short()}"),
        new=Side(result.new, new_commits, new_series,
                 f"{new_series.upstream.name} {result.new.short()}"))
    out.write("report.md", render_markdown(report).encode())
    out.write("report.json", (to_json(report) + "\n").encode())


# -- conflicts: artifacts a person can resume from -------------------------------------------------
def write_conflicts(out: Artifacts, result: BumpResult, by_id: dict[str, SeriesPatch]) -> None:
    """bump.json, README.md and conflicts/NN-id/ (the patch, the marked-up files, culprits)."""
    out.write("bump.json", (json.dumps(serialize.bump_result(result), indent=2) + "\n").encode())
    for p in result.patches:
        if p.status not in FAILED:
            continue
        folder = f"conflicts/{p.index:02d}-{p.id}"
        patch = by_id[p.id].patch
        out.write(f"{folder}/{by_id[p.id].entry.file}", patch.render())
        out.write(f"{folder}/failing-hunks.diff", failing_hunks(patch, p.conflicts))
        for c in p.conflicts:
            if c.content is not None:
                out.write(f"{folder}/files/{c.path}", c.content)
        out.write(f"{folder}/culprits.json",
                  (json.dumps(serialize.patch_outcome(p), indent=2) + "\n").encode())
    found = [{**pr.to_json(), "marked": pr.marked} for p in result.patches
             for pr in p.proposals.values()]
    if found:
        out.write("proposals.json", (json.dumps(found, indent=2) + "\n").encode())
    out.write("regions.txt", "".join(f"{ln}\n" for ln in result.region_lines()).encode())
    out.write("risks.txt", "".join(f"{ln}\n" for ln in result.warning_lines()).encode())
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
    bad = [p for p in result.patches if p.status in FAILED]
    lines = [f"# Bump {result.old.short()} -> {result.new.short()}: {len(bad)} patch(es) do not "
             "apply",
             "", f"{commits(result.upstream_commits)} in the range: {result.summary()}. A "
             "region is one conflict of a patch's 3-way merge (a file-level conflict counts "
             "one); an upstreamed patch's regions are upstream's own copy of its change.", "",
             "Reproduce locally (stops at the first conflict in `.rebasectl/tree`, with markers "
             "and unmerged entries as git leaves them):", "", "```", result.reproduce, "```", "",
             "| # | patch | status | regions | first break | permanent break |",
             "|---|---|---|---|---|---|"]
    for p in result.patches:
        att = p.attribution
        fb = f"`{att.first_break.commit.short()}`" if att and att.first_break else ""
        pb = f"`{att.permanent_break.commit.short()}`" if att and att.permanent_break else ""
        lines.append(f"| {p.index} | {escape(p.id, True)} | {p.shown_status} | "
                     f"{p.region_count()} | {fb} | {pb} |")
    for p in bad:
        lines += _readme_patch(p)
    for p in result.upstreamed():
        lines += _readme_upstreamed(p)
    if any(p.risks for p in result.patches):
        lines += ["", "## Risks after the merge", ""]
        lines += [f"- {text}" for text in result.risk_lines()]
    warned = [(p, f) for p in result.patches for f in p.findings]
    if warned:
        lines += ["", "## Merged, but uses a name the patch removes", ""]
        lines += [f"- {escape(p.id)}: {code_span(f'{f.path}:{f.line}')} uses "
                  f"{code_span(f.name)}" +
                  (f" (upstream `{f.commit.short()}`)" if f.commit else "") for p, f in warned]
    return "\n".join(lines) + "\n"


def _readme_patch(p: PatchOutcome) -> list[str]:
    att = p.attribution
    lines = ["", f"## {p.index}. {escape(p.id)}: {escape(p.subject)}", ""]
    if p.blocked_by:
        lines.append(f"- blocked: needs lines or files of earlier failing patch(es) "
                     f"{escape(', '.join(p.blocked_by))}; resolve those first")
    for c in p.conflicts:
        lines.append(f"- {code_span(c.path)}: {c.kind.value}" + _why(p, c, None)
                     if c.kind in WHOLE_FILE
                     else f"- {code_span(c.path)}: {c.kind.value}")
        for r in c.regions if c.kind not in WHOLE_FILE else ():
            up = upstream_lines(r.ours)
            where = f"work tree lines {r.start}-{r.end} of {code_span('files/' + c.path)} ({up})"
            where += _trimmed(c, r)
            lines.append(f"  - {where}{_why(p, c, r)}")
        for n, _ in enumerate(c.regions, 1):
            pr = p.proposals.get(region_id(p.id, c.path, n))
            if pr is not None:
                lines.append(f"  - {code_span(pr.id)}: {pr.state} ({pr.rule}): {evidence_line(pr)}")
    for key, ref in (("first break", att.first_break if att else None),
                     ("permanent break", att.permanent_break if att else None)):
        if ref:
            lines.append(f"- {key}: `{ref.commit.short()}` {escape(ref.subject)}")
    for culprit in att.culprits if att else []:
        when = "" if culprit.by_first_break else " (after the first break)"
        lines.append(f"- culprit `{culprit.commit.short()}` ({escape(culprit.path)}){when}: "
                     f"{escape(culprit.subject)}")
    lines.append(f"- files: {code_span(f'conflicts/{p.index:02d}-{p.id}/')}")
    return lines


def _readme_upstreamed(p: PatchOutcome) -> list[str]:
    """An upstreamed patch: the commit that carries it, and how it leaves the series."""
    assert p.upstream_commit is not None
    subject = p.carrier_subject()
    lines = ["", f"## {p.index}. {escape(p.id)}: upstreamed", "",
             f"- upstream `{p.upstream_commit.short()}` {escape(subject)} carries its change "
             "(not a break: nothing of the patch is left to carry)"]
    for c in p.dropped:
        for n, _ in enumerate(c.regions, 1):
            pr = p.proposals.get(region_id(p.id, c.path, n))
            what = f": {pr.rule}, {evidence_line(pr)}" if pr is not None else ""
            lines.append(f"  - {code_span(region_id(p.id, c.path, n))} is upstream's "
                         f"already{what}")
    lines.append("- drop it: a bump where every other patch applies drops it itself; here, "
                 "`rebasectl skip` at the stop `rebasectl apply` makes on it, then "
                 f"`rebasectl export --drop {p.id}` removes its entry and file")
    return lines


def evidence_line(p: Proposal) -> str:
    """A proposal's evidence in one line (README, stop message)."""
    ev = p.evidence
    by = f" by {short(ev.commit)}" if isinstance(ev, (Upstream, Moved)) and ev.commit else ""
    if isinstance(ev, Superseded):
        return "the whole patch is upstream already: drop it (" + \
            ", ".join(short(c) for c in ev.commits) + ")"
    if isinstance(ev, Upstream):
        what = ", ".join(ev.names[:4]) or "the patch's lines"  # `how: lines` names none
        return f"upstream already has {what}{by}: keep upstream's side"
    if isinstance(ev, BothInsert):
        return "both sides insert here: both kept, " + ev.order
    if isinstance(ev, Moved):
        return f"the code moved to {ev.to}:{ev.line}{by}: the edit goes there"
    if isinstance(ev, ContextOnly):
        return ev.context
    return p.rule


# -- blame: one patch ------------------------------------------------------------------------------
def blame(ws: Workspace, repo: Repo, series: Series, patch_ref: str, old: Oid, new: Oid,
          notify: Notify, since: Oid | None = None) -> dict[str, Any]:
    """Breaks and culprits of one patch (id, file name, or the id as an older import cut it)
    between two upstream revisions: which upstream commits broke or touched it, an answer of
    upstream's alone, so resolutions recorded in this checkout are not replayed (the JSON's
    ``recorded_resolution`` says when one would resolve the conflict). Only that patch is
    attributed; the ones before it are only applied (a verdict each, no regions). A patch that
    applies has no culprits: the commits that changed its lines are ``touched_by``; an
    upstreamed one is named by the commit that carries it, as bump names it, also when that
    commit is older than ``old`` (``since``: where to look from, the series' base)."""
    loaded = load_patches(ws, series)
    pos = find_patch(loaded, patch_ref)
    planner = Planner(repo, old, new, notify, replay=False, since=since)
    stack = loaded[:pos + 1]
    keep = relevant_stack(stack, pos)  # the earlier patches that can change how it applies
    outcomes, mat = planner.run([loaded[k] for k in keep], only=len(keep) - 1,
                                numbers=[k + 1 for k in keep])
    out = outcomes[-1]
    att, touched = out.attribution, []
    if att is None:  # it applied: the commits that changed its lines
        att = attribute(planner.rng, stack, pos, ())
        if out.status not in FAILED:  # touched it, broke nothing
            touched, att.culprits = att.culprits, []
    elif out.status is BumpStatus.UPSTREAMED:
        att.touching = Scan(planner.rng, stack, pos).touching
    recorded = out.status in FAILED and (planner.rerere_would or _recorded(
        ws, repo, loaded[pos].patch, mat.steps[-1].parent))
    data = serialize.blame(out, att, att.culprits, touched, old, new, planner.rng.count(),
                           [(c, planner.rng.subject(c)) for c in att.touching], recorded)
    del data["risks"]  # bump's checks after the merge: not blame's question, not run
    return data


def _recorded(ws: Workspace, repo: Repo, patch: Patch, parent: Oid | None) -> bool:
    """Whether a resolution ``continue`` recorded for this patch on exactly this state (its
    files at ``parent``) is in this checkout: apply and bump would replay it."""
    return parent is not None and \
        Memory(ws.resolutions).find_at(repo, patch.diff, parent) is not None


def find_patch(loaded: list[SeriesPatch], ref: str) -> int:
    """The position of the patch ``ref`` names: its id, its file (with or without
    ``patches/``), or, for a long id, its id cut short or the whole subject's slug that import
    cut at 48 characters."""
    for i, lp in enumerate(loaded):
        if ref in (lp.id, lp.file, f"{PATCH_DIR}/{lp.file}"):
            return i
    cut = [i for i, lp in enumerate(loaded)
           if len(ref) >= 40 and lp.id.startswith(ref)
           or len(lp.id) >= 40 and ref.startswith(lp.id)]
    if len(cut) == 1:
        return cut[0]
    raise RebasectlError(f"no patch {ref!r} in series.yaml (give an id or a file name)")


# -- the command -----------------------------------------------------------------------------------
def run(ws: Workspace, to_rev: str, upstream: str | None, artifacts: Path | None,
        notify: Notify, run_tests: bool = False, proposals: bool = False) -> BumpResult:
    """``bump --to REV``: the pipeline above under the lock, once the checkout allows it (no
    apply in progress, no unexported work in the default tree) and REV contains the base."""
    from ..engine.upstream import on_upstream, resolve
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
        new = on_upstream(repo, to_rev, resolve(repo, to_rev, what="--to revision"), "--to")
        if not repo.history.is_ancestor(old, new):
            raise RebasectlError(f"--to {to_rev}: {short(new)} does not contain the pinned base "
                                 f"{short(old)} (a bump moves the base forward)")
        return bump(ws, repo, series, new, upstream=upstream,
                    artifacts=ws.path(artifacts) if artifacts else None, notify=notify,
                    run_tests=run_tests, proposals=proposals)
