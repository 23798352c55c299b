"""Where the two sides of a report come from (docs/design.md, ``report`` inputs).

Each side is one of: a revision of this repository (``--old-rev/--new-rev``; default old = the
series at HEAD when the working copy's base differs from HEAD's, else the series just before the
last first-parent commit that changed the base; default new = the working copy), a series
directory (``--old-series/--new-series``) or a commit range ``A..B`` in a git
repository (``--old-range/--new-range`` with ``--repo``). A series is materialised on its own
base in the upstream mirror (3-way, the way ``apply`` does) to get one commit per patch; a range
already is one. Nothing here writes to the user's checkout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..engine.attribution import blockers
from ..engine.exchange import linear, load_patches, load_series_dir, parse_range
from ..engine.materialize import Materialised, Materializer
from ..engine.upstream import open_for
from ..git import Repo
from ..infra.errors import RebasectlError
from ..model.dependencies import SeriesLines
from ..model.ids import Oid
from ..model.patches import PatchError
from ..model.patches import parse as parse_patch
from ..model.series import PATCH_DIR, SERIES_FILE, Series, load, parse
from ..model.series_patch import SeriesPatch
from ..model.status import Applied
from ..model.workspace import Workspace
from .model import Side


@dataclass(frozen=True)
class Choice:
    """What the user asked for one side: kind is default | rev | series | range."""

    kind: str
    value: str = ""


def choose(side: str, rev: str | None, series_dir: str | None, rng: str | None) -> Choice:
    given = [(k, v) for k, v in (("rev", rev), ("series", series_dir), ("range", rng)) if v]
    if len(given) > 1:
        names = " and ".join(f"--{side}-{k}" for k, _ in given)
        raise RebasectlError(f"{names}: give at most one input for the {side} side")
    if not given:
        return Choice("default")
    kind, value = given[0]
    return Choice(kind, str(value))


@dataclass
class _Loaded:
    """A side before it has commits: a series + patches (to materialise) or a range."""

    label: str
    series: Series | None = None
    patches: list[SeriesPatch] | None = None
    base: Oid | None = None
    commits: list[Oid] | None = None
    working_copy: bool = False  # this checkout's series: export writes it


def resolve_sides(ws: Workspace, old: Choice, new: Choice, repo: Path | None,
                  upstream: str | None) -> tuple[Repo, Side, Side, Repo | None]:
    """The git holding both sides' commits, the two sides, and the git holding the upstream
    history between the bases when that is another one."""
    if repo is not None and "range" not in (old.kind, new.kind):
        raise RebasectlError("--repo goes with --old-range/--new-range")
    range_git = _range_repo(ws, repo) if "range" in (old.kind, new.kind) else None
    loaded = {}
    for name, choice in (("old", old), ("new", new)):
        if choice.kind == "range":
            assert range_git is not None
            loaded[name] = _range(range_git, choice.value, hint=repo is None)
        elif choice.kind == "series":
            loaded[name] = _series_dir(Path(choice.value))
        elif choice.kind == "rev":
            loaded[name] = _at_rev(ws, choice.value)
        elif name == "new":
            loaded[name] = _working_copy(ws)
        else:
            sha, label = default_old_rev(ws)
            loaded[name] = _at_rev(ws, sha, label)
    o, n = loaded["old"], loaded["new"]
    if range_git is not None:
        git = range_git
    else:
        assert o.series is not None and n.series is not None
        git = open_for(ws, upstream, n.series.upstream.url or o.series.upstream.url,
                       [o.series.upstream.base, n.series.upstream.base])
    sides = []
    for name, side in (("old", o), ("new", n)):
        if side.commits is None:
            assert side.series is not None and side.patches is not None
            base = side.series.upstream.base
            if git.resolve(base) is None:
                where = "the upstream mirror" if range_git is None else str(range_git.path)
                raise RebasectlError(f"{name} side: base {base.short()} not found in {where}: "
                                     "run `rebasectl fetch` or pass --upstream")
            done = Materializer(git).run(base, side.patches, keep_going=True)
            if not done.ok:
                raise RebasectlError(f"{name} side ({side.label}) on its own base "
                                     f"{base.short()}: {not_applying(side.patches, done)}"
                                     f"{_way_on(side.working_copy, done)}")
            side.base = base
            side.commits = [s.commit for s in done.steps if s.commit]
        assert side.base is not None
        sides.append(Side(side.base, list(side.commits), side.series, side.label))
    return git, sides[0], sides[1], None


def not_applying(patches: list[SeriesPatch], done: Materialised) -> str:
    """The patches of a series that do not apply, each failing one with its files, or, when a
    region of its conflict needs lines or files of an earlier failing patch, blocked by that
    one (a bump's ``blocked``, e.g. a series exported after an apply that skipped a patch). A
    patch that merged is not named, whatever its hunks' context held: git merged it too."""
    failed = [s.id for s in done.steps if s.status is Applied.CONFLICT]
    lines = SeriesLines(patches)
    said = []
    for pos, step in enumerate(done.steps):
        if step.status is not Applied.CONFLICT:
            continue
        needs = blockers(lines, pos, step.conflicts, failed)
        if needs:
            said.append(f"patch {step.index} '{step.id}' is blocked by {', '.join(needs)} "
                        "(it needs their lines or files)")
        else:
            paths = ", ".join(c.path for c in step.conflicts)
            said.append(f"patch {step.index} '{step.id}' does not apply ({paths})")
    return "; ".join(said)


def _way_on(working_copy: bool, done: Materialised) -> str:
    """The way past a series side that does not apply (hostile7 #7: an export keeps a patch
    skipped at its conflict as it was). The report pairs one commit per patch of each side (every
    patch is in one mapping entry, numbered by its place in the series), so it cannot go on
    without one: the working copy's way on is to drop it from the series or to resolve it."""
    failed = [s.id for s in done.steps if s.status is Applied.CONFLICT]
    if not working_copy or not failed:
        return ": the report needs every patch of a side applied"
    drops = " ".join(f"--drop {pid}" for pid in failed)
    return (f": the report needs every patch applied; `rebasectl export {drops}` leaves "
            f"{'it' if len(failed) == 1 else 'them'} out of the series, or resolve: "
            "`rebasectl apply`, then `rebasectl continue` and `rebasectl export`")


def _range_repo(ws: Workspace, repo: Path | None) -> Repo:
    """The git the ranges are read from: --repo, else this checkout (said when it is none);
    what the report writes (its merges' objects) goes aside, never into it."""
    try:
        git = Repo.open(repo if repo is not None else ws.root)
    except RebasectlError:
        if repo is not None:
            raise
        raise RebasectlError(f"--old-range/--new-range are read from a git repository and "
                             f"{ws.root} is none: pass --repo PATH") from None
    git.write_aside()  # someone's repository: read, never written
    return git


def _range(git: Repo, spec: str, hint: bool = False) -> _Loaded:
    """A commit range; when its tip holds a series.yaml, that series' entries give the
    commits their intent (why, drop_when), matched as for a materialised series. ``hint``:
    the range was looked for in this checkout because no --repo was given (say so)."""
    try:
        base, tip = parse_range(git, spec)
    except RebasectlError as exc:
        if hint and "unknown revision" in str(exc):
            raise RebasectlError(f"{exc} (no --repo given: the ranges are read from this "
                                 "checkout; pass --repo PATH for the repository that has them)"
                                 ) from None
        raise
    commits = [c.sha for c in linear(git, base, tip, f"range {spec!r}")]
    text = git.objects.blob(f"{tip}:{SERIES_FILE}")
    series = None
    if text is not None:
        series = parse(text.decode("utf-8", errors="replace"), git.path, check_files=False,
                       name=f"{spec.split('..')[1]}:{SERIES_FILE}")
    return _Loaded(spec, series, base=base, commits=commits)


def _series_dir(path: Path) -> _Loaded:
    if not path.is_dir():
        raise RebasectlError(f"{path}: not a series directory")
    series, loaded = load_series_dir(path)
    return _Loaded(str(path), series, loaded)


def _working_copy(ws: Workspace) -> _Loaded:
    series = load(ws.root)
    return _Loaded("working copy", series, load_patches(ws, series), working_copy=True)


def _repo(ws: Workspace) -> Repo:
    try:
        return Repo.open(ws.root)
    except RebasectlError:
        raise RebasectlError(f"{ws.root}: not a git repository, so there is no earlier series; "
                             "pass --old-series or --old-range") from None


def _at_rev(ws: Workspace, rev: str, label: str | None = None) -> _Loaded:
    git = _repo(ws)
    sha = git.resolve(rev)
    if sha is None:
        raise RebasectlError(f"revision {rev!r} not found in {ws.root}")
    text = git.objects.blob(f"{sha}:{SERIES_FILE}")
    if text is None:
        raise RebasectlError(f"{rev}: no {SERIES_FILE} in this revision")
    series = parse(text.decode("utf-8", errors="replace"), ws.root, check_files=False,
                   name=f"{rev}:{SERIES_FILE}")
    patches = []
    for entry in series.patches:
        where = f"{rev}:{PATCH_DIR}/{entry.file}"
        data = git.objects.blob(f"{sha}:{PATCH_DIR}/{entry.file}")
        if data is None:
            raise PatchError(f"{where}: not found in this revision")
        patches.append(SeriesPatch(entry, parse_patch(data, where)))
    return _Loaded(label or f"{rev} ({sha.short()})", series, patches)


def default_old_rev(ws: Workspace) -> tuple[Oid, str]:
    """The default old side (docs/design.md, ``report`` inputs) and the label that says which
    rule took it: the series at HEAD when the working copy pins another base than HEAD (a bump
    exported, not yet committed); else the series just before the newest commit of HEAD's
    first-parent history that changed the base. A merge on that history is compared with its
    first parent only (what it brought in), and the root commit changed nothing: it has no
    earlier series."""
    current = load(ws.root, check_files=False).upstream.base
    git = _repo(ws)
    head = git.resolve("HEAD")
    if head is None:
        raise RebasectlError("no commits in this repository yet: pass --old-rev, --old-series "
                             "or --old-range")
    if _base_at(git, ws, head) != current:
        return head, (f"HEAD ({head.short()}; the working copy's base {current.short()} differs "
                      "from HEAD's: a bump not yet committed)")
    parents = git.history.parents_of
    for sha in reversed(git.history.rev_list(["HEAD"], first_parent=True, paths=[SERIES_FILE])):
        first = parents(sha)[:1]
        if not first:
            break  # the root commit: nothing before it
        before = _base_at(git, ws, first[0])
        if before is not None and before != _base_at(git, ws, sha):
            return first[0], (f"{first[0].short()} (the series before {sha.short()}, the last "
                              "commit that changed the base)")
    raise RebasectlError(f"no earlier base than {current.short()} in this repository's history "
                         f"of {SERIES_FILE}: pass --old-rev, --old-series or --old-range")


def _base_at(git: Repo, ws: Workspace, sha: str) -> Oid | None:
    """The base series.yaml pins at ``sha``; None when it has none or cannot be read."""
    text = git.objects.blob(f"{sha}:{SERIES_FILE}")
    if text is None:
        return None
    try:
        return parse(text.decode("utf-8", errors="replace"), ws.root,
                     check_files=False).upstream.base
    except RebasectlError:
        return None


def report_text(ws: Workspace, old: Choice, new: Choice, repo: Path | None,
                upstream: str | None, fmt: str, verbose: bool = False) -> tuple[str, int]:
    """Resolve the two sides, build the report, render it (the caller holds the lock when the
    sides are series of this checkout); with the number of entries it asks a person to review
    (the exit code's question: 1 = differences that need a human)."""
    from .build import build_report
    from .html import render_html
    from .markdown import render_markdown
    from .serialize import to_json

    git, o, n, up = resolve_sides(ws, old, new, repo, upstream)
    report = build_report(git, o, n, up)
    review = len(report.to_review)
    if fmt == "json":
        return to_json(report), review
    if fmt == "html":
        return render_html(report), review
    return render_markdown(report, verbose=verbose), review
