"""Between commits and the series: read the patch files of a series, ``import`` a commit range as
a series, ``export`` the work tree's commits back to patches/ and series.yaml.

Metadata in series.yaml (why, kind, tests, ...) belongs to a patch id and survives both ways: a
commit is matched to its entry by the id recorded when it was applied, else by its subject, else it
gets a new id from its subject. Files are written in one transaction (fsutil), so an interrupted
export leaves either the old series or the new one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import RebasectlError
from .fsutil import FileTransaction, atomic_write
from .gitio import CommitInfo, Git
from .patches import Patch, PatchError, parse, raw_to_rfc2822
from .series import (
    PATCH_DIR,
    SERIES_FILE,
    PatchEntry,
    Series,
    Upstream,
    dump,
    load,
    patch_filename,
    slugify,
)
from .workspace import Workspace


@dataclass(frozen=True)
class LoadedPatch:
    entry: PatchEntry
    patch: Patch


def load_patches(ws: Workspace, series: Series) -> list[LoadedPatch]:
    loaded = []
    for entry in series.patches:
        path = ws.patch_dir / entry.file
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PatchError(f"{PATCH_DIR}/{entry.file}: cannot read: {exc.strerror}") from None
        loaded.append(LoadedPatch(entry, parse(data, f"{PATCH_DIR}/{entry.file}")))
    return loaded


def load_series_dir(directory: Path) -> tuple[Series, list[LoadedPatch]]:
    ws = Workspace(directory)
    series = load(directory)
    return series, load_patches(ws, series)


def patch_from_commit(git: Git, info: CommitInfo) -> Patch:
    parent = info.parents[0] if info.parents else None
    diff = (
        git.diff(parent, info.sha)
        if parent
        else git.diff("4b825dc642cb6eb9a060e54bf8d69288fbee4904", info.sha)
    )
    return Patch(
        info.author.name, info.author.email, raw_to_rfc2822(info.author.date), info.message, diff
    )


# -- tree map: which commit of the work tree is which patch -------------------------------------
@dataclass(frozen=True)
class TreeMap:
    """Which commit of the work tree is which patch (written by apply, read by export)."""

    base: str
    worktree: Path
    commits: list[tuple[str, str]]  # (patch id, commit sha), in order

    @property
    def tip(self) -> str:
        return self.commits[-1][1] if self.commits else self.base


def save_tree_map(
    ws: Workspace, base: str, worktree: Path, commits: Sequence[tuple[str, str]]
) -> None:
    ws.ensure_state_dir()
    data = {"base": base, "worktree": str(worktree), "commits": [list(c) for c in commits]}
    atomic_write(ws.state_dir / "tree.json", json.dumps(data, indent=1).encode())


def load_tree_map(ws: Workspace) -> TreeMap | None:
    try:
        data = json.loads((ws.state_dir / "tree.json").read_text())
        return TreeMap(
            str(data["base"]),
            Path(str(data["worktree"])),
            [(str(pid), str(sha)) for pid, sha in data["commits"]],
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- building a series from commits ------------------------------------------------------------
def series_from_commits(
    git: Git,
    base: str,
    shas: Sequence[str],
    upstream: Upstream,
    previous: Series | None,
    known_ids: dict[str, str],
) -> tuple[Series, dict[str, bytes]]:
    """Entries + canonical file bytes for ``shas`` on ``base``; metadata carried from
    ``previous`` by id (``known_ids``: sha -> id), else by title."""
    old_by_id = {p.id: p for p in previous.patches} if previous else {}
    old_by_title = {p.title: p for p in previous.patches} if previous else {}
    infos = git.commits(list(shas))
    entries: list[PatchEntry] = []
    files: dict[str, bytes] = {}
    used: set[str] = set()
    for number, info in enumerate(infos, start=1):
        patch = patch_from_commit(git, info)
        old = old_by_id.get(known_ids.get(info.sha, "")) or old_by_title.get(patch.subject)
        if old is not None and old.id in used:
            old = None
        pid = old.id if old else _unique(slugify(patch.subject), used | set(old_by_id))
        used.add(pid)
        name = patch_filename(number, pid)
        if old is not None:
            entry = old.with_changes(file=name, title=patch.subject)
        else:
            entry = PatchEntry(
                id=pid, file=name, title=patch.subject, kind=_guess_kind(patch.subject)
            )
        entries.append(entry)
        files[name] = patch.render()
        try:  # refuse now what the series could not load back (binaries, unsafe paths)
            parse(files[name], f"{PATCH_DIR}/{name}")
        except PatchError as exc:
            raise PatchError(f"commit {info.sha[:12]} ({patch.subject}): {exc.message}") from None
    return Series(
        Upstream(upstream.name, upstream.url, upstream.branch, base), tuple(entries)
    ), files


def _unique(slug: str, used: set[str]) -> str:
    if slug not in used:
        return slug
    n = 2
    while f"{slug}-{n}" in used:
        n += 1
    return f"{slug}-{n}"


def _guess_kind(subject: str) -> str:
    low = subject.lower()
    for prefix, kind in (
        ("fix", "fix"),
        ("revert", "fix"),
        ("backport", "backport"),
        ("compat", "compat"),
        ("tmp", "temporary"),
        ("temp", "temporary"),
    ):
        if low.split("]")[-1].strip().startswith(prefix):
            return kind
    return "feature"


def write_series(ws: Workspace, series: Series, files: dict[str, bytes]) -> list[str]:
    """Replace patches/ and series.yaml with ``series``/``files`` in one transaction; returns the
    paths whose bytes changed."""
    txn = FileTransaction(ws.root, ws.journal_dir)
    # only files the current series lists are ours to remove or replace: a patch file someone
    # put in patches/ without listing it is never deleted, and never silently overwritten
    listed: set[str] = set()
    try:
        current = _maybe_load(ws)
        listed = {e.file for e in current.patches} if current else set()
    except RebasectlError:
        pass
    existing = {p.name for p in ws.patch_dir.glob("*.patch")} if ws.patch_dir.is_dir() else set()
    clash = sorted((existing - listed) & set(files))
    if clash:
        raise RebasectlError(f"{PATCH_DIR}/{clash[0]}: not listed in {SERIES_FILE} and would be "
                             "overwritten; move it out of the way first")
    for name in sorted(existing & listed):
        txn.delete(f"{PATCH_DIR}/{name}")
    for name, data in files.items():
        txn.write(f"{PATCH_DIR}/{name}", data)
    txn.write(SERIES_FILE, dump(series))
    ws.ensure_state_dir()
    return txn.commit()


def import_range(
    ws: Workspace, repo: Path, rev_range: str, branch: str | None
) -> tuple[Series, list[str]]:
    if rev_range.count("..") != 1 or "..." in rev_range:
        raise RebasectlError(f"range {rev_range!r}: expected BASE..TIP")
    start, tip = rev_range.split("..")
    if not start or not tip:
        raise RebasectlError(f"range {rev_range!r}: expected BASE..TIP")
    git = Git.open(repo)
    base = git.resolve(start)
    end = git.resolve(tip)
    if base is None or end is None:
        raise RebasectlError(
            f"range {rev_range!r}: unknown revision {start if base is None else tip!r} in {repo}"
        )
    if not git.is_ancestor(base, end):
        raise RebasectlError(f"range {rev_range!r}: {start} is not an ancestor of {tip}")
    shas = git.rev_list([f"{base}..{end}"], first_parent=True)
    previous = _maybe_load(ws)
    url = git.remote_url() or str(repo.resolve())
    if previous is not None:
        upstream = previous.upstream
        if branch:
            upstream = Upstream(upstream.name, upstream.url, branch, upstream.base)
    else:
        name = Path(url.rstrip("/")).name.removesuffix(".git").lower() or "upstream"
        upstream = Upstream(name, url, branch or "main", base)
    series, files = series_from_commits(git, base, shas, upstream, previous, {})
    changed = write_series(ws, series, files)
    return series, changed


def _maybe_load(ws: Workspace) -> Series | None:
    if not ws.series_file.exists():
        return None
    return load(ws.root, check_files=False)


def export_tree(ws: Workspace, worktree: Path) -> tuple[Series, list[str]]:
    previous = load(ws.root, check_files=False)
    tree_map = load_tree_map(ws)
    if tree_map is None or not (worktree / ".git").exists():
        raise RebasectlError(f"no work tree at {worktree}: run `rebasectl apply` first")
    git = Git(worktree)
    if not git.is_clean():
        raise RebasectlError(f"{worktree} has uncommitted changes: commit them (`git commit "
                             "--amend` into a patch, or a new commit for a new patch), or discard "
                             "them, then export")
    base = tree_map.base
    head = git.head()
    if not git.is_ancestor(base, head):
        raise RebasectlError(f"{worktree}: HEAD is not based on {base[:12]}")
    shas = git.rev_list([f"{base}..{head}"], first_parent=True)
    merges = [s for s in git.commits(shas) if len(s.parents) > 1]
    if merges:
        raise RebasectlError(
            f"{worktree}: merge commit {merges[0].sha[:12]} between base and HEAD; "
            "a series is a straight line of commits"
        )
    in_tree = set(shas)
    known = {sha: pid for pid, sha in tree_map.commits if sha in in_tree}
    known.update(_matched_by_diff(ws, git, previous, [s for s in shas if s not in known], known))
    series, files = series_from_commits(git, base, shas, previous.upstream, previous, known)
    changed = write_series(ws, series, files)
    save_tree_map(ws, base, worktree, [(p.id, s) for p, s in zip(series.patches, shas)])
    return series, changed


def _matched_by_diff(
    ws: Workspace, git: Git, previous: Series, shas: list[str], known: dict[str, str]
) -> dict[str, str]:
    """Commits the tree map does not know (amended, reworded) that carry exactly the diff of a
    patch of the series keep that patch's id, and with it its metadata."""
    if not shas:
        return {}
    taken = set(known.values())  # ids of the commits still in the tree
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
    for info in git.commits(shas):
        if not by_diff or not info.parents:
            continue
        pid = by_diff.pop(git.diff(info.parents[0], info.sha), None)
        if pid is not None:
            found[info.sha] = pid
    return found
