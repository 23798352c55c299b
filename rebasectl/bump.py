"""The bump pipeline: materialise -> attribute -> export -> report -> test.

``bump --to REV`` applies the series onto REV in memory (each patch 3-way on top of the ones
before it; a failing one is left out and the next go on). A patch whose change REV already has is
``upstreamed``. When every other patch applies, the work tree moves to REV + the series, the series
is exported (series.yaml's base becomes REV), the rebase report is written, and ``--test`` runs the
regression suite. When some do not, nothing in the checkout changes; each failing patch gets its
breaks and culprits (``attribution``), and the artifacts folder holds what a person needs to
resume: the failing patch, its failing hunks, the files with conflict markers, the culprits, and
the one command that reproduces the conflict locally.
"""

from __future__ import annotations

import json
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import session
from .attribution import (
    Attribution,
    Culprit,
    UpstreamRange,
    absorbed_by,
    attribute,
    landing,
    reverse_applies,
    same_patch_id,
)
from .errors import RebasectlError
from .exchange import LoadedPatch, export_tree, load_patches, save_tree_map
from .fsutil import atomic_write
from .gitio import Git
from .materialize import Conflict, Materialised, materialise
from .patches import Patch, split_file_diff
from .series import PATCH_DIR, Series, load
from .upstream import choose_source, ensure_mirror, open_for, resolve
from .workspace import Workspace

SCHEMA = "rebasectl.bump/1"
COMMIT_ID = re.compile(r"[0-9a-f]{7,40}")  # a (short) sha names one commit: no fetch needed


@dataclass(frozen=True)
class Marker:
    """Where a conflict sits, for annotations: a file of this repo (the patch) and of upstream."""

    patch_file: str  # patches/NNNN-id.patch
    patch_line: int  # the failing hunk's @@ line in the patch file
    path: str  # upstream path
    line: int  # the conflict's line in REV's version of it (0: unknown)
    hunk: str


@dataclass
class PatchOutcome:
    index: int
    id: str
    subject: str
    file: str
    status: str  # clean | conflict | upstreamed | empty
    conflicts: tuple[Conflict, ...] = ()
    attribution: Attribution | None = None
    upstream_commit: str | None = None  # upstreamed: the commit holding the change
    markers: list[Marker] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        att = self.attribution
        return {
            "index": self.index, "id": self.id, "subject": self.subject, "status": self.status,
            "conflicts": [{"path": c.path, "hunks": list(c.hunks)} for c in self.conflicts],
            "first_break": att.first_break.to_json() if att and att.first_break else None,
            "permanent_break": att.permanent_break.to_json()
            if att and att.permanent_break else None,
            "culprits": [c.to_json() for c in att.culprits] if att else [],
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
        return all(p.status != "conflict" for p in self.patches)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "from": self.old, "to": self.new,
                "upstream_commits": self.upstream_commits,
                "result": "clean" if self.clean else "conflicts",
                "patches": [p.to_json() for p in self.patches]}


# -- the pipeline ------------------------------------------------------------------------------
def plan(git: Git, old: str, new: str, loaded: list[LoadedPatch]) -> tuple[
        list[PatchOutcome], Materialised, UpstreamRange]:
    """Materialise on ``new`` and classify every patch; attribute those that fail."""
    stack = [(lp.entry.id, lp.patch) for lp in loaded]
    # The series on its old base first: it puts every patch's preimage blob into the mirror, so
    # the 3-way applies below and the line mapping of attribution have them.
    materialise(git, old, stack, three_way=False, keep_going=True)
    mat = materialise(git, new, stack, three_way=True, keep_going=True)
    rng = UpstreamRange(git, old, new)
    failed = [s.id for s in mat.steps if s.status == "conflict"]
    outcomes: list[PatchOutcome] = []
    for pos, (lp, step) in enumerate(zip(loaded, mat.steps)):
        patch = lp.patch
        out = PatchOutcome(step.index, step.id, patch.subject, lp.entry.file, "clean")
        if patch.is_empty:
            out.status = "empty"
        elif step.status == "empty" or (step.status == "conflict" and _absorbed(rng, patch)):
            out.status = "upstreamed"
            out.upstream_commit = absorbed_by(rng, patch)
            # the 3-way apply of an absorbed patch succeeds (empty): it "breaks" where upstream's
            # copy of the change reaches the first-parent chain
            first = permanent = landing(rng, out.upstream_commit) if out.upstream_commit else None
            rng.load_subjects([c for c in (first, out.upstream_commit) if c])
            out.attribution = Attribution(
                first_break=rng.ref(first) if first else None,
                permanent_break=rng.ref(permanent) if permanent else None,
                culprits=_absorbing(rng, out.upstream_commit, patch))
        elif step.status == "conflict":
            out.status = "conflict"
            out.conflicts = step.conflicts
            out.attribution = attribute(rng, stack, pos, step.conflicts, failed)
            _inherit(out.attribution, [o for o in outcomes if o.id in out.attribution.blocked_by])
        outcomes.append(out)
    return outcomes, mat, rng


def _inherit(att: Attribution, blockers: list[PatchOutcome]) -> None:
    """A patch that needs lines of an earlier failing patch is broken by what broke that one."""
    seen = {c.commit for c in att.culprits}
    for blocker in blockers:
        for culprit in blocker.attribution.culprits if blocker.attribution else []:
            if culprit.commit not in seen:
                seen.add(culprit.commit)
                att.culprits.append(culprit)


def _absorbing(rng: UpstreamRange, commit: str | None, patch: Patch) -> list[Culprit]:
    if commit is None:
        return []
    return [Culprit(commit, rng.subject(commit), next(iter(patch.file_diffs()), ""))]


def _absorbed(rng: UpstreamRange, patch: Patch) -> bool:
    return reverse_applies(rng.git, rng.new, patch) or same_patch_id(rng, patch) is not None


def bump(ws: Workspace, to_rev: str, upstream: str | None, artifacts: Path | None, *,
         run_tests: bool = False) -> BumpResult:
    from .actions import locked  # actions imports session; keep the import graph one-way

    with locked(ws, "bump"):
        if session.load_state(ws) is not None:
            raise RebasectlError("an apply is in progress: `rebasectl continue` or `abort` it "
                                 "before a bump")
        series = load(ws.root)
        loaded = load_patches(ws, series)
        git = _mirror(ws, upstream, series, to_rev)
        old = resolve(git, series.upstream.base, what="base")
        new = resolve(git, to_rev, what="--to revision")
        if not git.is_ancestor(old, new):
            raise RebasectlError(f"--to {to_rev}: {new[:12]} does not contain the pinned base "
                                 f"{old[:12]} (a bump moves the base forward)")
        outcomes, mat, rng = plan(git, old, new, loaded)
        out_dir = (artifacts or ws.state_dir / "bump").resolve()
        reproduce = reproduce_command(new, upstream)
        result = BumpResult(old, new, rng.count(), outcomes, out_dir, reproduce)
        _clear(out_dir)
        if not result.clean:
            by_id = {lp.entry.id: lp for lp in loaded}
            parents = _parents_at(mat)
            merged = {out.id: conflict_files(git, parents[out.id], by_id[out.id].patch)
                      for out in outcomes if out.status == "conflict"}
            for out in outcomes:
                if out.status == "conflict":
                    out.markers = _markers(by_id[out.id], out.conflicts, merged[out.id])
            write_conflict_artifacts(out_dir, result, by_id, merged)
            return result
        _carry(ws, git, series, loaded, result)
        _write_json(out_dir / "bump.json", result.to_json())
        write_report(ws, git, series, loaded, result)
    if run_tests:
        result.test = _run_tests(ws, result)
    return result


def _mirror(ws: Workspace, upstream: str | None, series: Series, to_rev: str,
            from_rev: str | None = None) -> Git:
    """The mirror holding the revisions; fetched first when ``to_rev`` is a name (a branch or
    tag moves: a bump to `dev` means upstream's `dev` now, not the cached one)."""
    git = open_for(ws, upstream, series.upstream.url, [from_rev or series.upstream.base, to_rev])
    if not COMMIT_ID.fullmatch(to_rev):
        # an existing mirror is fetched from where it came from unless --upstream or
        # $REBASECTL_UPSTREAM say otherwise (series.yaml's url must not re-point a local mirror)
        git = ensure_mirror(ws, choose_source(upstream, None), update=True)
    return git


def reproduce_command(new: str, upstream: str | None) -> str:
    extra = f" --upstream {shlex.quote(upstream)}" if upstream else ""
    return f"rebasectl apply --base {new}{extra}"


def _clear(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in ("bump.json", "README.md", "report.md", "report.json", "test.json"):
        (out_dir / name).unlink(missing_ok=True)
    conflicts = out_dir / "conflicts"
    if conflicts.is_dir():
        import shutil

        shutil.rmtree(conflicts)


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode())


def _parents_at(mat: Materialised) -> dict[str, str]:
    """Each patch's parent on the new base: the last commit made before it."""
    parents: dict[str, str] = {}
    tip = mat.base
    for step in mat.steps:
        parents[step.id] = tip
        if step.commit:
            tip = step.commit
    return parents


# -- clean: carry the series over --------------------------------------------------------------
def _carry(ws: Workspace, git: Git, series: Series, loaded: list[LoadedPatch],
           result: BumpResult) -> None:
    """Work tree at REV + the kept patches, then export (series.yaml's base becomes REV)."""
    kept = [(lp.entry.id, lp.patch) for lp, out in zip(loaded, result.patches)
            if out.status != "upstreamed"]
    final = materialise(git, result.new, kept, three_way=True)
    if not final.ok:  # cannot happen: the same patches applied a moment ago
        raise RebasectlError("the series stopped applying while carrying it over; rerun bump")
    worktree = ws.default_tree.resolve()
    session._check_room(ws, worktree)  # never replace work that was not exported
    session._clear(ws, worktree)
    session._checkout(git, worktree, final.tip)
    save_tree_map(ws, result.new, worktree, [(s.id, s.commit or "") for s in final.steps])
    _, changed = export_tree(ws, worktree)
    result.worktree = worktree
    result.changed = changed


def write_report(ws: Workspace, git: Git, old_series: Series, loaded: list[LoadedPatch],
                 result: BumpResult) -> None:
    """report.md / report.json of the bump, from the report module (old series on the old base,
    new series on the new one)."""
    try:
        from .report import Side, build_report, render_markdown, to_json
    except ImportError as exc:  # the report module is optional at this stage
        (result.artifacts / "report.md").write_text(f"report unavailable: {exc}\n")
        return
    old_mat = materialise(git, result.old, [(lp.entry.id, lp.patch) for lp in loaded],
                          three_way=True, keep_going=True)
    new_series = load(ws.root)
    new_commits = [c for _, c in _tree_commits(ws)]
    report = build_report(
        git,
        old=Side(result.old, [s.commit for s in old_mat.steps if s.commit], old_series,
                 f"{old_series.upstream.name} {result.old[:12]}"),
        new=Side(result.new, new_commits, new_series,
                 f"{new_series.upstream.name} {result.new[:12]}"),
        upstream_git=None,
    )
    atomic_write(result.artifacts / "report.md", render_markdown(report).encode())
    atomic_write(result.artifacts / "report.json", (to_json(report) + "\n").encode())


def _tree_commits(ws: Workspace) -> list[tuple[str, str]]:
    from .exchange import load_tree_map

    tmap = load_tree_map(ws)
    return list(tmap.commits) if tmap else []


def _run_tests(ws: Workspace, result: BumpResult) -> Any:
    try:
        from .testing import run_tests
    except ImportError:
        raise RebasectlError("--test: the regression runner (rebasectl.testing) is not "
                             "available in this install") from None
    assert result.worktree is not None
    run = run_tests(ws, result.worktree, against="patched", device=None, patch_id=None)
    _write_json(result.artifacts / "test.json", run.to_json())
    return run


# -- conflicts: artifacts a person can resume from ---------------------------------------------
def _markers(lp: LoadedPatch, conflicts: tuple[Conflict, ...],
             merged: dict[str, tuple[bytes, list[int]]]) -> list[Marker]:
    """Conflict positions: each failing hunk's line in the patch file, and the conflict's line
    in the new upstream file (the n-th conflict of a 3-way merge of the patch onto its parent;
    0 when the merge could not even start)."""
    patch_file = f"{PATCH_DIR}/{lp.entry.file}"
    rendered = lp.patch.render()
    diffs = lp.patch.file_diffs()
    markers: list[Marker] = []
    for conflict in conflicts:
        _, hunks = split_file_diff(diffs.get(conflict.path, b""))
        lines = merged.get(conflict.path, (b"", []))[1]
        failing = set(conflict.hunks)
        found = 0
        for hunk in hunks:
            header = hunk.split(b"\n", 1)[0].decode(errors="replace")
            if failing and header not in failing:
                continue
            offset = rendered.find(hunk)
            pline = rendered.count(b"\n", 0, offset) + 1 if offset >= 0 else 1
            uline = lines[min(found, len(lines) - 1)] if lines else 0
            markers.append(Marker(patch_file, pline, conflict.path, uline, header))
            found += 1
    return markers


def conflict_files(git: Git, parent: str, patch: Patch) -> dict[str, tuple[bytes, list[int]]]:
    """path -> (the file with diff3 conflict markers, line of each ``<<<<<<<``) for the files a
    3-way apply of ``patch`` on ``parent`` leaves conflicted."""
    files: dict[str, tuple[bytes, list[int]]] = {}
    with tempfile.TemporaryDirectory(prefix="rebasectl-conflict-") as tmp:
        index = Path(tmp) / "index"
        git.index_from_entries(index, git.blobs_at(parent, list(patch.file_diffs())))
        applied = git.apply_to_index(index, patch.diff, three_way=True)
        if applied.ok:
            return files
        for path in applied.conflicted_paths:
            stages = git.unmerged_stages(index, path)
            if 2 not in stages or 3 not in stages:
                continue
            base = (git.cat_blob(stages[1]) or b"") if 1 in stages else b""
            ours = git.cat_blob(stages[2]) or b""
            theirs = git.cat_blob(stages[3]) or b""
            text, _ = git.merge_file(ours, base, theirs,
                                     ("upstream", "patch preimage", "patch"))
            lines = [n for n, ln in enumerate(text.split(b"\n"), start=1)
                     if ln.startswith(b"<<<<<<< ")]
            files[path] = (text, lines)
    return files


def write_conflict_artifacts(out_dir: Path, result: BumpResult, by_id: dict[str, LoadedPatch],
                             merged: dict[str, dict[str, tuple[bytes, list[int]]]]) -> None:
    """bump.json, README.md and conflicts/NN-id/ (the patch, its failing hunks, the files with
    conflict markers, culprits.json)."""
    _write_json(out_dir / "bump.json", result.to_json())
    for out in result.patches:
        if out.status != "conflict":
            continue
        lp = by_id[out.id]
        folder = out_dir / "conflicts" / f"{out.index:02d}-{out.id}"
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / lp.entry.file, lp.patch.render())
        atomic_write(folder / "failing-hunks.diff", failing_hunks_text(lp.patch, out.conflicts))
        for path, (text, _) in merged[out.id].items():
            target = folder / "files" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(target, text)
        data = out.to_json()
        data["blocked_by"] = out.attribution.blocked_by if out.attribution else []
        data["markers"] = [m.__dict__ for m in out.markers]
        _write_json(folder / "culprits.json", data)
    atomic_write(out_dir / "README.md", conflict_readme(result).encode())


def failing_hunks_text(patch: Patch, conflicts: tuple[Conflict, ...]) -> bytes:
    wanted = {c.path: set(c.hunks) for c in conflicts}
    parts: list[bytes] = []
    for path, file_diff in patch.file_diffs().items():
        if path not in wanted:
            continue
        header, hunks = split_file_diff(file_diff)
        chosen = [h for h in hunks if not wanted[path]
                  or h.split(b"\n", 1)[0].decode(errors="replace") in wanted[path]]
        parts.append(header + b"".join(chosen or hunks))
    return b"".join(parts)


def conflict_readme(result: BumpResult) -> str:
    bad = [p for p in result.patches if p.status == "conflict"]
    lines = [f"# Bump {result.old[:12]} -> {result.new[:12]}: {len(bad)} patch(es) do not apply",
             "", f"{result.upstream_commits} upstream commits in the range.", "",
             "Reproduce locally (stops at the first conflict in `.rebasectl/tree`):", "",
             "```", result.reproduce, "```", "",
             "| # | patch | status | first break | permanent break | culprits |",
             "|---|---|---|---|---|---|"]
    for p in result.patches:
        att = p.attribution
        fb = f"`{att.first_break.commit[:12]}`" if att and att.first_break else ""
        pb = f"`{att.permanent_break.commit[:12]}`" if att and att.permanent_break else ""
        cul = ", ".join(f"`{c.commit[:12]}`" for c in att.culprits) if att else ""
        lines.append(f"| {p.index} | {p.id} | {p.status} | {fb} | {pb} | {cul} |")
    for p in bad:
        att = p.attribution
        lines += ["", f"## {p.index}. {p.id}: {p.subject}", ""]
        for c in p.conflicts:
            lines.append(f"- `{c.path}`: " + (", ".join(f"`{h}`" for h in c.hunks)
                                              or "(whole file)"))
        for m in p.markers:
            where = f"{m.path}:{m.line}" if m.line else m.path
            lines.append(f"- conflict at `{where}` (hunk at `{m.patch_file}:{m.patch_line}`)")
        if att and att.blocked_by:
            lines.append(f"- needs lines added by earlier failing patch(es): "
                         f"{', '.join(att.blocked_by)}")
        if att and att.first_break:
            lines.append(f"- first break: `{att.first_break.commit[:12]}` "
                         f"{att.first_break.subject}")
        if att and att.permanent_break:
            lines.append(f"- permanent break: `{att.permanent_break.commit[:12]}` "
                         f"{att.permanent_break.subject}")
        for culprit in att.culprits if att else []:
            lines.append(f"- culprit `{culprit.commit[:12]}` ({culprit.path}): {culprit.subject}")
        lines.append(f"- files: `conflicts/{p.index:02d}-{p.id}/`")
    return "\n".join(lines) + "\n"


# -- blame: one patch ----------------------------------------------------------------------------
def blame(ws: Workspace, patch_ref: str, from_rev: str | None, to_rev: str | None,
          upstream: str | None) -> dict[str, Any]:
    """Breaks and culprits of one patch (id or file name) between two upstream revisions."""
    from .actions import locked  # actions imports session; keep the import graph one-way

    with locked(ws, "blame"):  # it may create or fetch the mirror; an export may be half done
        return _blame(ws, patch_ref, from_rev, to_rev, upstream)


def _blame(ws: Workspace, patch_ref: str, from_rev: str | None, to_rev: str | None,
           upstream: str | None) -> dict[str, Any]:
    series = load(ws.root)
    loaded = load_patches(ws, series)
    pos = next((i for i, lp in enumerate(loaded)
                if patch_ref in (lp.entry.id, lp.entry.file, f"{PATCH_DIR}/{lp.entry.file}")),
               None)
    if pos is None:
        raise RebasectlError(f"no patch {patch_ref!r} in series.yaml (give an id or a file name)")
    to_name = to_rev or series.upstream.branch
    git = _mirror(ws, upstream, series, to_name, from_rev)
    old = resolve(git, from_rev or series.upstream.base, what="--from revision")
    new = resolve(git, to_name, what="--to revision")
    if not git.is_ancestor(old, new):
        raise RebasectlError(f"--from {old[:12]} is not an ancestor of --to {new[:12]}")
    outcomes, _, rng = plan(git, old, new, loaded[:pos + 1])
    out = outcomes[-1]
    att = out.attribution
    if att is None or out.status == "upstreamed":  # clean: what touched the lines it needs
        stack = [(lp.entry.id, lp.patch) for lp in loaded[:pos + 1]]
        touched = attribute(rng, stack, pos, ())
        att = att or touched
        att.touching = touched.touching
    rng.load_subjects(att.touching)
    return {
        "schema": "rebasectl.blame/1", "from": old, "to": new, "upstream_commits": rng.count(),
        "index": out.index, "id": out.id, "subject": out.subject, "status": out.status,
        "conflicts": [{"path": c.path, "hunks": list(c.hunks)} for c in out.conflicts],
        "first_break": att.first_break.to_json() if att.first_break else None,
        "permanent_break": att.permanent_break.to_json() if att.permanent_break else None,
        "culprits": [c.to_json() for c in att.culprits],
        "blocked_by": att.blocked_by,
        "touching": [{"commit": c, "subject": rng.subject(c)} for c in att.touching],
    }
