"""Between commits and the series: read the patch files of a series, ``import`` a commit range as
a series, ``export`` the work tree's commits back to patches/ and series.yaml.

Metadata in series.yaml (why, kind, tests, ...) belongs to a patch id and survives both ways: a
commit is matched to its entry by the id recorded when it was applied, else by carrying exactly
that patch's diff (amended message), else by its subject; otherwise it is a new patch with a new
id and file. Export never loses an entry: a patch skipped during the apply is kept as it was (its
file unchanged); one folded into another in the work tree becomes ``absorbs:`` on the survivor,
its tests carried over; any other entry that has no commit any more is dropped only when
``--drop ID`` names it (else export changes nothing and says what it would drop). Surviving
patches keep their file names. Files are written in one transaction (fsutil), so an interrupted
export leaves either the old series or the new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..git import CommitInfo, Repo, Worktree
from ..infra.errors import ExitCode, RebasectlError
from ..infra.fsutil import FileTransaction, atomic_write, read_regular
from ..model import lines, links
from ..model.ids import Oid, short
from ..model.lines import significant_lines
from ..model.patches import (
    READER_VERSION,
    SYMLINK,
    Patch,
    PatchError,
    diff_start_in_message,
    parse,
)
from ..model.series import (
    PATCH_DIR,
    SERIES_FILE,
    PatchEntry,
    Series,
    Upstream,
    dump,
    edit,
    load,
    patch_filename,
    slugify,
)
from ..model.series_patch import SeriesPatch, file_digest
from ..model.workspace import Workspace
from . import edits
from .edits import Planned
from .state import Baseline, TreeMap


def load_patches(ws: Workspace, series: Series) -> list[SeriesPatch]:
    loaded = []
    for entry in series.patches:
        path = ws.patch_dir / entry.file
        try:
            data = read_regular(path)
        except OSError as exc:
            raise PatchError(f"{PATCH_DIR}/{entry.file}: cannot read: {exc.strerror}") from None
        loaded.append(SeriesPatch(entry, parse(data, f"{PATCH_DIR}/{entry.file}"),
                                  file_digest(data)))
    links.check_series((f"{PATCH_DIR}/{lp.file}", lp.patch) for lp in loaded)
    return loaded


def check_links_on(repo: Repo, base: str, loaded: list[SeriesPatch]) -> None:
    """The series' symlinks checked again once the base is known: through the base tree's own
    links too (a patch writing ``lnk/x.py`` where the base has a link ``lnk``)."""
    found = {path: e for path, e in repo.tree_entries(base).items() if e.mode == SYMLINK}
    if not found:
        return
    blobs = repo.objects.blobs(e.blob for e in found.values())
    base_links = {path: (blobs.get(e.blob) or b"").decode("utf-8", errors="surrogateescape")
                  for path, e in found.items()}
    links.check_series(((f"{PATCH_DIR}/{lp.file}", lp.patch) for lp in loaded),
                       base_links)


@dataclass(frozen=True)
class Stats:
    files: int
    added: int
    removed: int

    @classmethod
    def of(cls, patch: Patch) -> Stats:
        return cls(len(patch.files), patch.model.added, patch.model.removed)


def patch_stats(ws: Workspace, series: Series) -> list[Stats]:
    """Files and +/- of every patch, for ``status``. A patch file is parsed (and so validated)
    once per content: the numbers are kept under ``.rebasectl/`` by the sha1 of its bytes (and
    the reader's version: a file a newer reader refuses is never read from the cache), and
    import and export record the files they write, so ``status`` on a long series reads bytes
    and hashes them, nothing more."""
    cache = _read_stats(ws.stats_cache)
    out: list[Stats] = []
    fresh = False
    for entry in series.patches:
        where = f"{PATCH_DIR}/{entry.file}"
        try:
            data = (ws.patch_dir / entry.file).read_bytes()
        except OSError as exc:
            raise PatchError(f"{where}: cannot read: {exc.strerror}") from None
        key = hashlib.sha1(data).hexdigest()
        if key not in cache:
            cache[key] = Stats.of(parse(data, where))
            fresh = True
        out.append(cache[key])
    if fresh:
        _write_stats(ws, cache)
    return out


def _read_stats(path: Path) -> dict[str, Stats]:
    try:
        raw = json.loads(path.read_text())
        if raw.get("reader") != READER_VERSION:  # read by an older reader: read again
            return {}
        return {k: Stats(*v) for k, v in raw["stats"].items()
                if isinstance(v, list) and len(v) == 3 and all(isinstance(n, int) for n in v)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _write_stats(ws: Workspace, cache: dict[str, Stats]) -> None:
    try:
        ws.ensure_state_dir()
        atomic_write(ws.stats_cache, json.dumps(
            {"reader": READER_VERSION,
             "stats": {k: [s.files, s.added, s.removed] for k, s in cache.items()}}).encode())
    except RebasectlError:
        pass  # a read-only checkout: status still works, it only parses again next time


def remember_stats(ws: Workspace, files: dict[str, bytes], stats: dict[str, Stats]) -> None:
    """What import/export just parsed, for the next ``status``."""
    cache = _read_stats(ws.stats_cache)
    for name, data in files.items():
        if name in stats:
            cache[hashlib.sha1(data).hexdigest()] = stats[name]
    _write_stats(ws, cache)


def load_series_dir(directory: Path) -> tuple[Series, list[SeriesPatch]]:
    ws = Workspace(directory)
    series = load(directory)
    return series, load_patches(ws, series)


def patch_from_commit(repo: Repo, info: CommitInfo, diff: bytes | None = None) -> Patch:
    return Patch(info.author.name, info.author.email, info.author.date.rfc2822(),
                 info.message, repo.commit_diff(info) if diff is None else diff)


# -- commits -> entries ----------------------------------------------------------------------------
@dataclass
class Built:
    """Entries and file bytes made from commits, and what export decided about the rest."""

    entries: list[PatchEntry]
    files: dict[str, bytes]
    kept: list[str] = field(default_factory=list)  # skipped: kept as they were
    folded: dict[str, str] = field(default_factory=dict)  # absorbed id -> survivor id
    dropped: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # said after the export
    overwritten: Path | None = None  # --force: where the hand-edited files were copied


def _unique(slug: str, used: set[str]) -> str:
    if slug not in used:
        return slug
    n = 2
    while f"{slug}-{n}" in used:
        n += 1
    return f"{slug}-{n}"


_KIND_WORDS = (("fix", "fix"), ("revert", "fix"), ("backport", "backport"), ("compat", "compat"),
               ("tmp", "temporary"), ("temp", "temporary"), ("feat", "feature"))


def guess_kind(subject: str) -> str:
    """A series entry's kind from its subject: a bracketed tag that names one (``[fix] ...``;
    ``[1/8]`` or ``[AMD]`` do not), else the words after the tags (``fix: ...``, ``Fix ...``)."""
    low = subject.lower()
    for tag in re.findall(r"\[([^\]]*)\]", low):
        for word, kind in _KIND_WORDS:
            if tag.strip() == word:
                return kind
    rest = low.split("]")[-1].strip()
    return next((kind for word, kind in _KIND_WORDS if rest.startswith(word)), "feature")


def _next_number(names: Sequence[str]) -> int:
    numbers = [int(m.group(1)) for n in names if (m := re.match(r"^(\d+)-", n))]
    return max(numbers, default=0) + 1


def entries_from_commits(repo: Repo, infos: list[CommitInfo], previous: Series | None,
                         ids: dict[str, str], stats: dict[str, Stats] | None = None,
                         parsed: dict[str, Patch] | None = None) -> tuple[list[PatchEntry],
                                                                          dict[str, bytes]]:
    """An entry and canonical file bytes per commit; metadata and file name carried from
    ``previous`` for the commits ``ids`` (sha -> id) names, else matched by subject. ``stats``
    and ``parsed`` (file -> ...) collect what reading each file back gave."""
    old_by_id = {p.id: p for p in previous.patches} if previous else {}
    old_by_title = {p.title: p for p in previous.patches} if previous else {}
    used: set[str] = set()
    names = [p.file for p in previous.patches] if previous else []
    entries: list[PatchEntry] = []
    files: dict[str, bytes] = {}
    diffs = repo.history.commit_diffs([i.sha for i in infos])  # one git process for all
    for info in infos:
        patch = patch_from_commit(repo, info, diffs.pop(info.sha))
        old = old_by_id.get(ids.get(info.sha, "")) or old_by_title.get(patch.subject)
        if old is not None and old.id in used:
            old = None
        if old is not None:
            entry = old.with_changes(title=patch.subject)
        else:
            pid = _unique(slugify(patch.subject), used | set(old_by_id))
            name = patch_filename(_next_number(names), pid)
            names.append(name)
            entry = PatchEntry(id=pid, file=name, title=patch.subject,
                               kind=guess_kind(patch.subject))
        used.add(entry.id)
        entries.append(entry)
        _writable_message(info, patch)
        files[entry.file] = patch.render()
        try:  # refuse now what the series could not load back
            back = parse(files[entry.file], f"{PATCH_DIR}/{entry.file}")
            if stats is not None:
                stats[entry.file] = Stats.of(back)
            if parsed is not None:
                parsed[entry.file] = back
        except PatchError as exc:
            raise PatchError(f"commit {short(info.sha)} ({patch.subject}): {exc.message}") from None
    return entries, files


def _writable_message(info: CommitInfo, patch: Patch) -> None:
    """A message that quotes a diff at the start of a line cannot be a patch file's message:
    the file's reader (and git am) take that line for the start of the diff. Refused by name
    before anything is written, rather than written as a file that reads back as another
    commit."""
    found = diff_start_in_message(patch.message)
    if found is not None:
        line, text = found
        raise PatchError(f"commit {short(info.sha)} ({patch.subject}): message line {line} "
                         f"{text[:60]!r} would be read as the start of the diff (git am reads "
                         "it so too): indent the quoted diff in that commit's message (git "
                         "rebase -i, reword), then run this again")


# -- writing ---------------------------------------------------------------------------------------
def write_series(ws: Workspace, series: Series, files: dict[str, bytes],
                 removed: Sequence[str] = (), what: str = "export") -> list[str]:
    """patches/ and series.yaml in one transaction: ``files`` written, the files of ``removed``
    entries deleted (only files the current series lists are ever deleted or replaced: a patch
    file someone put in patches/ without listing it is left alone, and never overwritten).
    ``what`` (export, import) names it to the command that finishes it after a kill.
    Returns the paths whose bytes changed."""
    current = _maybe_load(ws)
    listed = {e.file for e in current.patches} if current else set()
    existing = {p.name for p in ws.patch_dir.glob("*.patch")} if ws.patch_dir.is_dir() else set()
    clash = sorted((existing - listed) & set(files))
    if clash:
        raise RebasectlError(f"{PATCH_DIR}/{clash[0]}: not listed in {SERIES_FILE} and would be "
                             "overwritten; move it out of the way first")
    txn = FileTransaction(ws.root, ws.journal_dir, ws.overwritten, what)
    for name in removed:
        if name in listed:
            txn.delete(f"{PATCH_DIR}/{name}")
    for name, data in files.items():
        txn.write(f"{PATCH_DIR}/{name}", data)
    previous = read_regular(ws.series_file).decode("utf-8") if current else None
    txn.write(SERIES_FILE, edit(previous, series) if previous is not None else dump(series))
    ws.ensure_state_dir()
    return txn.commit()


def _maybe_load(ws: Workspace) -> Series | None:
    if not ws.series_file.exists():
        return None
    try:
        return load(ws.root, check_files=False)
    except RebasectlError:
        return None


# -- import ----------------------------------------------------------------------------------------
def parse_range(repo: Repo, spec: str) -> tuple[Oid, Oid]:
    """``BASE..TIP`` in ``repo``: both resolved, BASE an ancestor of TIP."""
    if spec.count("..") != 1 or "..." in spec:
        raise RebasectlError(f"range {spec!r}: expected BASE..TIP")
    start, tip = spec.split("..")
    if not start or not tip:
        raise RebasectlError(f"range {spec!r}: expected BASE..TIP")
    base, end = repo.resolve(start), repo.resolve(tip)
    if base is None or end is None:
        raise RebasectlError(f"range {spec!r}: unknown revision "
                             f"{start if base is None else tip!r} in {repo.path}")
    if not repo.history.is_ancestor(base, end):
        raise RebasectlError(f"range {spec!r}: {start} is not an ancestor of {tip}")
    return base, end


def linear(repo: Repo, base: str, tip: str, what: str) -> list[CommitInfo]:
    infos = repo.commits(repo.history.rev_list([f"{base}..{tip}"], first_parent=True))
    merges = [c for c in infos if len(c.parents) > 1]
    if merges:
        raise RebasectlError(f"{what}: merge commit {short(merges[0].sha)} in it; a series is a "
                             "straight line of commits")
    return infos


def upstream_name(repo: Repo) -> str:
    """The project's name: from the repository's origin URL (a mirror's, where it came from),
    else from its folder (a checkout's, not its ``.git``; a bare ``name.git``'s name)."""
    url = repo.remote_url()
    where = Path(url.rstrip("/")) if url else Path(repo.path)
    if where.name == ".git":
        where = where.parent
    return where.name.removesuffix(".git").lower() or "upstream"


@dataclass(frozen=True)
class Flattened:
    """A merge on the first-parent line of an imported range: one patch, its first-parent diff,
    holding what ``brought`` commits of its side did (git format-patch would give them one patch
    each and drop the merge)."""

    sha: Oid
    title: str
    brought: int
    file: str
    files: int


@dataclass(frozen=True)
class Imported:
    """What import did, counted as what it is: the files the patches change that upstream has
    (``upstream_files``) apart from those they create (``new_files``), the empty commits, and
    the merges it flattened."""

    series: Series
    changed: list[str]
    base: Oid
    tip: Oid
    upstream_files: int
    new_files: int
    empty: list[str]  # ids
    merges: list[Flattened]


def footprint(patches: Sequence[Patch]) -> tuple[set[str], set[str]]:
    """(upstream's files the patches change, the files they create), each path counted where
    the series first meets it: a file one patch adds and a later one changes is new, the
    target of a rename is new and its source upstream's."""
    upstream: set[str] = set()
    new: set[str] = set()
    for patch in patches:
        for f in patch.files:
            if f.old_path is not None and f.old_path not in new:
                upstream.add(f.old_path)
            if f.new_path is not None and f.new_path != f.old_path and \
                    f.new_path not in upstream:
                new.add(f.new_path)
    return upstream, new


def import_range(ws: Workspace, repo_path: Path, spec: str, branch: str | None) -> Imported:
    """The range's first-parent line as a series: a merge on it becomes one patch (its
    first-parent diff), so that applying the series gives TIP's tree exactly, and each such
    merge is reported (``Imported.merges``) with how many commits its side brings."""
    repo = Repo.open(repo_path)
    base, tip = parse_range(repo, spec)
    infos = repo.commits(repo.history.rev_list([f"{base}..{tip}"], first_parent=True))
    previous = _maybe_load(ws)
    if previous is not None:
        up = previous.upstream
        upstream = replace(up, branch=branch or up.branch, base=base)
    else:
        upstream = Upstream(upstream_name(repo), repo.remote_url() or str(repo.path),
                            branch or repo.head_branch() or "main", base)
    stats: dict[str, Stats] = {}
    parsed: dict[str, Patch] = {}
    entries, files = entries_from_commits(repo, infos, previous, {}, stats, parsed)
    series = Series(upstream, tuple(entries), fork_web=previous.fork_web if previous else "")
    gone = [e.file for e in previous.patches if e.file not in files] if previous else []
    changed = write_series(ws, series, files, gone, what="import")
    remember_stats(ws, files, stats)
    merges = [Flattened(i.sha, e.title, repo.history.brought_by(i.sha, [base]), e.file,
                        stats[e.file].files)
              for i, e in zip(infos, entries) if len(i.parents) > 1]
    touched, created = footprint([parsed[e.file] for e in entries])
    empty = [e.id for e in entries if parsed[e.file].is_empty]
    return Imported(series, changed, base, tip, len(touched), len(created), empty, merges)


# -- export ----------------------------------------------------------------------------------------
def export_tree(ws: Workspace, worktree: Path, drops: Sequence[str] = (),
                force: bool = False) -> tuple[Series, Built, list[str]]:
    """The work tree's commits written back as the series; nothing is written over a file a
    person edited since the tree was built unless ``force`` (see ``engine/edits``). The tree
    map is saved after the files, with what was written as its baseline: a kill between the
    two leaves the old baseline, against which the new files are export's own result, so a
    rerun goes through and nothing is lost."""
    previous = load(ws.root, check_files=False)
    tmap = TreeMap.load(ws.tree_map)
    done = _dropped_already(previous, tmap, drops)
    tree = Worktree(worktree)
    if tmap is None or not tree.exists:
        raise RebasectlError(f"no work tree at {worktree}: run `rebasectl apply` first")
    if tree.status().changed:
        raise RebasectlError(f"{worktree} has uncommitted changes: commit them (`git commit "
                             "--amend` into a patch, or a new commit for a new patch), or discard "
                             "them, then export")
    repo = Repo(worktree)
    head = tree.head() or tmap.base
    if not repo.history.is_ancestor(tmap.base, head):
        raise RebasectlError(f"{worktree}: HEAD is not based on {short(tmap.base)}")
    infos = linear(repo, tmap.base, head, str(worktree))
    present = {i.sha for i in infos}
    ids: dict[str, str] = {sha: pid for pid, sha in tmap.commits if sha in present}
    ids.update(_matched_by_diff(ws, repo, previous, [i for i in infos if i.sha not in ids], ids))
    carried = [i for i in infos if i.sha not in tmap.dropped]  # not dropped before
    stats: dict[str, Stats] = {}
    entries, files = entries_from_commits(repo, carried, previous, ids, stats)
    entries, carried = _without_gone_noops(previous, entries, files, carried, ids)
    built = Built(list(entries), files, notes=[
        f"{pid} was dropped already (the export that dropped it was interrupted and finished "
        "by this one)" for pid in done])
    _account(ws, previous, built, set(tmap.skipped), set(drops) - set(done))
    series = Series(replace(previous.upstream, base=tmap.base), tuple(built.entries),
                    fork_web=previous.fork_web)
    removed = [e.file for e in previous.patches if e.id in built.dropped or e.id in built.folded]
    plan = Planned(previous, series, built.files, removed)
    _guard(ws, tmap, head == tmap.tip_of(worktree), plan, built, force)
    changed = write_series(ws, series, built.files, removed)
    remember_stats(ws, built.files, stats)
    mapped = {i.sha: ids[i.sha] for i in infos if i.sha in ids}
    mapped.update({i.sha: e.id for e, i in zip(entries, carried)})
    TreeMap(tmap.base, worktree, [(mapped[i.sha], i.sha) for i in infos if i.sha in mapped],
            [k for k in built.kept], baseline=Baseline.written(series, built.files),
            dropped=_still_dropped(tmap, built, infos, carried, entries)).save(ws.tree_map)
    return series, built, changed


def _dropped_already(previous: Series, tmap: TreeMap | None, drops: Sequence[str]) -> list[str]:
    """The ``--drop`` ids series.yaml no longer lists while the work tree's map still names
    their commits: a rerun of an ``export --drop`` killed after it wrote the series (the journal
    finished it as this command began), which has nothing left to do for them. Any other id
    not in series.yaml is an error."""
    listed = {p.id for p in previous.patches}
    mapped = {pid for pid, _ in tmap.commits} if tmap is not None else set()
    unknown = [d for d in drops if d not in listed and d not in mapped]
    if unknown:
        raise RebasectlError(f"--drop {unknown[0]}: no such patch id in {SERIES_FILE}")
    return [d for d in drops if d not in listed]


def _still_dropped(tmap: TreeMap, built: Built, infos: Sequence[CommitInfo],
                   carried: Sequence[CommitInfo], entries: Sequence[PatchEntry]) -> list[str]:
    """The commits (shas, never ids: a new patch may take a dropped one's id, hostile12 #2) that
    stay in the work tree while the series no longer has their patch: dropped before, dropped
    now (an emptied patch named by ``--drop``), or left out as no-ops of a patch gone from the
    series. The next export leaves them out again instead of reading them as new patches."""
    kept = {i.sha for i in carried}
    dropped_now = {i.sha for e, i in zip(entries, carried) if e.id in built.dropped}
    return sorted(i.sha for i in infos if i.sha not in kept or i.sha in dropped_now or
                  i.sha in tmap.dropped)


def _without_gone_noops(previous: Series, entries: list[PatchEntry], files: dict[str, bytes],
                        carried: list[CommitInfo], ids: dict[str, str]
                        ) -> tuple[list[PatchEntry], list[CommitInfo]]:
    """Leave out a commit apply made for a patch series.yaml no longer lists, when it changes
    nothing: the patch was dropped (an export killed after it wrote the series but before the
    tree map, hostile12 #3); read back, it would be a new patch without a diff. A commit the
    person made is never left out (the tree map does not name it)."""
    listed = {p.id for p in previous.patches}
    keep = [(e, i) for e, i in zip(entries, carried)
            if not (ids.get(i.sha) == e.id and e.id not in listed and
                    parse(files[e.file], e.file).is_empty)]
    for e, _ in zip(entries, carried):
        if all(e is not k for k, _ in keep):
            files.pop(e.file, None)
    return [e for e, _ in keep], [i for _, i in keep]


def _guard(ws: Workspace, tmap: TreeMap, at_tip: bool, plan: Planned, built: Built,
           force: bool) -> None:
    """Refuse (exit 1, nothing written) to write over hand edits; with ``force``, keep a copy
    of each and go on. A tree map from before baselines: a note, and on as before."""
    if not edits.find_edits(ws, tmap, plan):
        built.notes.append("the work tree was built by an older rebasectl, which kept no record "
                           "of the files it read: hand edits to patches/ or series.yaml were "
                           "not checked")
        return
    if not plan.edits:
        return
    if not force:
        assert tmap.baseline is not None
        edits.readable(ws, plan)
        raise edits.refusal(ws, tmap, plan, edits.rebuildable(ws, tmap.baseline, at_tip, plan))
    built.overwritten = edits.keep_copies(ws, plan)


def _account(ws: Workspace, previous: Series, built: Built, skipped: set[str],
             drops: set[str]) -> None:
    """Every entry of the previous series is carried, kept (skipped), folded or dropped by name;
    anything else stops the export (exit 1) before a byte is written."""
    would_empty = _emptied(ws, previous, built, drops)
    present = {e.id for e in built.entries}
    missing = [e for e in previous.patches if e.id not in present and e.id not in built.dropped]
    would_drop: list[str] = []
    for entry in missing:
        if entry.id in drops:
            built.dropped.append(entry.id)
        elif entry.id in skipped:
            built.kept.append(entry.id)
        elif (survivor := _folded_into(ws, entry, built)) is not None:
            built.folded[entry.id] = survivor
        else:
            would_drop.append(entry.id)
    if would_drop:
        raise RebasectlError(
            f"export would drop {', '.join(would_drop)} (no commit in the work tree carries "
            f"{'it' if len(would_drop) == 1 else 'them'}): nothing written; "
            + " ".join(f"--drop {d}" for d in would_drop) + " to drop on purpose",
            ExitCode.CONFLICT)
    if would_empty:
        raise RebasectlError(
            f"export would write {', '.join(would_empty)} without "
            f"{'its' if len(would_empty) == 1 else 'their'} diff (the commit changes nothing "
            "on this base: upstream carries it, or a resolution took it out): nothing written; "
            + " ".join(f"--drop {d}" for d in would_empty) + " to drop on purpose",
            ExitCode.CONFLICT)
    _fold(previous, built)
    _keep_skipped(ws, previous, built)
    built.new = [e.id for e in built.entries if e.id not in {p.id for p in previous.patches}]


def _emptied(ws: Workspace, previous: Series, built: Built, drops: set[str]) -> list[str]:
    """Patches whose commit changes nothing on this base while their file had a diff: export
    would write them without it (hostile10 B6: applied on an upstream that already holds them,
    each is a no-op). Those ``--drop`` names are dropped here; the others are returned, and
    export refuses them as it refuses to drop an entry silently. An empty patch that was empty
    before (a marker) is written as it is."""
    before = {p.id: p for p in previous.patches}
    emptied: list[str] = []
    for entry in list(built.entries):
        old = before.get(entry.id)
        if old is None or not parse(built.files[entry.file], entry.file).is_empty:
            continue
        try:
            had = not parse((ws.patch_dir / old.file).read_bytes(), old.file).is_empty
        except (OSError, PatchError):
            had = False  # a file gone or unreadable: the commit is what there is
        if not had:
            continue
        if entry.id in drops:
            built.entries.remove(entry)
            built.files.pop(entry.file, None)
            built.dropped.append(entry.id)
        else:
            emptied.append(entry.id)
    return emptied


def _folded_into(ws: Workspace, entry: PatchEntry, built: Built) -> str | None:
    """The surviving patch that holds ``entry``'s change (most of its significant lines; for a
    patch with none, all its changed lines and its subject in the message, as a ``git rebase
    -i`` squash leaves it). A message that only mentions the subject is no fold: that patch
    was dropped, and export says so."""
    try:
        gone = parse((ws.patch_dir / entry.file).read_bytes(), entry.file)
    except (OSError, PatchError):
        return None
    mine, every = significant_lines(gone.files), _changed(gone)
    best: tuple[float, str] | None = None
    for survivor in built.entries:
        patch = parse(built.files[survivor.file], survivor.file)
        named = bool(gone.subject) and gone.subject in patch.message
        if mine:
            theirs = significant_lines(patch.files)
            share, holds = lines.share(mine, theirs), lines.contained(mine, theirs)
        else:
            share = 1.0
            holds = named and bool(every) and not every - _changed(patch)
        score = share + (0.5 if named else 0.0)
        if holds and (best is None or score > best[0]):
            best = (score, survivor.id)
    return best[1] if best else None


def _changed(diff: Patch) -> Counter[bytes]:
    return Counter(line for f in diff.files for h in f.hunks for line in h.changed)


def _fold(previous: Series, built: Built) -> None:
    by_id = {p.id: p for p in previous.patches}
    for gone, survivor in built.folded.items():
        k = next(i for i, e in enumerate(built.entries) if e.id == survivor)
        entry = built.entries[k]
        absorbed = by_id[gone]
        built.entries[k] = entry.with_changes(
            absorbs=tuple(dict.fromkeys([*entry.absorbs, gone, *absorbed.absorbs])),
            tests=tuple(dict.fromkeys([*entry.tests, *absorbed.tests])))


def _keep_skipped(ws: Workspace, previous: Series, built: Built) -> None:
    """Skipped entries go back where they were, with their file as it is; a Subject edited
    in that file since is its title too (series.yaml's title mirrors it, which check checks)."""
    order = {p.id: i for i, p in enumerate(previous.patches)}
    for pid in built.kept:
        entry = next(p for p in previous.patches if p.id == pid)
        try:
            built.files[entry.file] = read_regular(ws.patch_dir / entry.file)
        except OSError as exc:
            raise RebasectlError(f"{PATCH_DIR}/{entry.file}: cannot read ({exc.strerror}); "
                                 f"export keeps skipped {pid} as it is: put the file back, or "
                                 f"`--drop {pid}`") from None
        with contextlib.suppress(PatchError):  # a cut file: kept as it is, check names it
            subject = parse(built.files[entry.file], entry.file).subject
            entry = entry.with_changes(title=subject) if subject and subject != entry.title \
                else entry  # an emptied Subject is no title (hostile10 B7): check names it
        at = next((i for i, e in enumerate(built.entries)
                   if order.get(e.id, -1) > order[pid]), len(built.entries))
        built.entries.insert(at, entry)


def _matched_by_diff(ws: Workspace, repo: Repo, previous: Series, infos: list[CommitInfo],
                     known: dict[str, str]) -> dict[str, str]:
    """Commits the tree map does not know (amended, reworded) that carry exactly the diff of a
    patch of the series keep that patch's id, and with it its metadata."""
    taken = set(known.values())
    by_diff: dict[bytes, str] = {}
    for entry in previous.patches:
        if entry.id in taken:
            continue
        try:
            patch = parse((ws.patch_dir / entry.file).read_bytes(), entry.file)
        except (OSError, PatchError):
            continue
        if patch.diff.strip():
            by_diff.setdefault(patch.diff, entry.id)
    found: dict[str, str] = {}
    diffs = repo.history.commit_diffs([i.sha for i in infos]) if by_diff else {}
    for info in infos:
        pid = by_diff.pop(diffs.get(info.sha, b""), None) if info.parents else None
        if pid is not None:
            found[info.sha] = pid
    return found
