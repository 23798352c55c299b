"""Build the report model from two materialised series.

``lineage.pair`` decides which old patch became which new one; this module adds the facts the
report states around each entry, every one of them read from git or series.yaml: files and +/-
per side, the interdiff of the files whose change differs with the upstream commits that forced
each of its hunks (``interdiff``: the one attribution engine), the mechanical checks
(``findings``), and the review decision a maintainer reads first: whether to look, why in a few
words, and the commit that forced it.

The work that takes time (one blame per file and side, file histories, one ``git grep`` per name a
patch removes, the size of the range) is gathered first and run on threads, while the main thread
replays the modified pairs and reads files for the other checks (the threads read objects through
the range's own reader, so the two never share one).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..engine.attribution import Culprits
from ..engine.attribution import UpstreamRange as Range
from ..engine.carried import CarriedLines
from ..engine.carried import Change as CarriedChange
from ..git import Repo
from ..model.ids import Oid
from ..model.status import MappingStatus
from . import findings as checks
from . import lineage, names
from .evidence import Evidence
from .interdiff import FilePlan, Jobs, effective, plan_file
from .lineage import Change, Group, iso_date
from .model import (
    Entry,
    FileCompare,
    FileStat,
    Finding,
    Links,
    MessageChange,
    PatchInfo,
    Report,
    Review,
    Side,
    SideInfo,
    UpstreamCommit,
    UpstreamRange,
)
from .reasons import describe, review

__all__ = ["build_report", "iso_date", "pr_number"]


def build_report(git: Repo, old: Side, new: Side, upstream_git: Repo | None = None) -> Report:
    """The report for ``old`` -> ``new``; ``upstream_git`` (default ``git``) holds both bases
    and the upstream history between them."""
    up = upstream_git or git
    old_changes = lineage.load_changes(git, "old", old.commits, old.series)
    new_changes = lineage.load_changes(git, "new", new.commits, new.series)
    groups = lineage.pair(git, old_changes, new_changes, old.base, new.base, replay=False)
    related = old.base != new.base and up.history.is_ancestor(old.base, new.base)
    ctx = _Ctx(git, up, old.base, new.base, related, old_changes, new_changes)
    entries, upstream = ctx.entries(groups)
    return Report(_side_info(up, old, old_changes), _side_info(up, new, new_changes), upstream,
                  entries, links=_links(new, old))


def _links(*sides: Side) -> Links:
    """The web pages the series names (the new side's series.yaml first)."""
    series = [s.series for s in sides if s.series is not None]
    return Links(next((x.upstream.web for x in series if x.upstream.web), ""),
                 next((x.fork_web for x in series if x.fork_web), ""))


def _side_info(up: Repo, side: Side, changes: list[Change]) -> SideInfo:
    """One side as the report states it (author, ISO date, files, series.yaml intent)."""
    base_info = up.commit(side.base) if up.resolve(side.base) else None
    patches = tuple(
        PatchInfo(index=c.index, id=c.id, commit=c.sha, subject=c.subject,
                  author=f"{c.info.author.name} <{c.info.author.email}>",
                  date=iso_date(c.info.author.date), patch_id=c.patch_id,
                  files=tuple(FileStat(f.path, f.added, f.removed) for f in c.files),
                  message=c.info.message, why=c.entry.why if c.entry else "",
                  drop_when=c.entry.drop_when if c.entry else None,
                  kind=c.entry.kind if c.entry else "")
        for c in changes)
    return SideInfo(side.label, side.base, iso_date(base_info.committer_date) if base_info else "",
                    base_info.subject if base_info else "", patches)


def pr_number(subject: str) -> str | None:
    m = re.search(r"\(#(\d+)\)|[Mm]erge pull request #(\d+)|!(\d+)\b", subject)
    if not m:
        return None
    num = next(g for g in m.groups() if g)
    return ("!" if m.group(3) else "#") + num


def _workers(tasks: int) -> int:
    return max(1, min(tasks, os.cpu_count() or 2))


class _Ctx:
    """One report's inputs and the file reader its checks share."""

    def __init__(self, git: Repo, up: Repo, old_base: Oid, new_base: Oid, related: bool,
                 old: list[Change], new: list[Change]) -> None:
        self.git, self.up = git, up
        self.old_base, self.new_base, self.related = old_base, new_base, related
        self.old, self.new = old, new
        self.rng = Range(up, old_base, new_base)
        self.carried = CarriedLines(self.rng)
        self._lines: dict[tuple[str, str], list[str] | None] = {}

    def lines(self, rev: str, path: str) -> list[str] | None:
        """A file at a revision as lines, read once per report (several checks read the same
        files)."""
        key = (rev, path)
        if key not in self._lines:
            repo = self.up if rev in (self.old_base, self.new_base) else self.git
            data = repo.objects.blob(f"{rev}:{path}")
            self._lines[key] = None if data is None else \
                data.decode("utf-8", errors="replace").split("\n")
        return self._lines[key]

    def deleted(self, path: str) -> tuple[bool, Oid | None]:
        """Whether upstream deleted ``path`` between the bases (the old base has it, the new
        base has it under no name: a rename is followed) and, when the new base descends from
        the old, the commit that did, as bump names it for a modify/delete."""
        if self.lines(self.old_base, path) is None or \
                self.lines(self.new_base, self.carried.at_new(path)) is not None:
            return False, None
        if not self.related:
            return True, None
        return True, self.up.history.deleted_by(f"{self.old_base}..{self.new_base}", path)

    def entries(self, groups: list[Group]) -> tuple[tuple[Entry, ...], UpstreamRange]:
        """The entries and the upstream range. The slow git questions (blames, histories, greps,
        the range's size) run on threads while this thread replays the modified pairs and
        runs the checks that only read files."""
        jobs = Jobs() if self.related else None
        plans = [self.plan(g, jobs) for g in groups]
        blames = jobs.tasks(Culprits(self.rng)) if jobs else []
        with ThreadPoolExecutor(max_workers=_workers(len(blames) + 1)) as pool:
            size = pool.submit(self._range)
            blamed = [pool.submit(task) for task in blames]
            late = _Late(self)
            for g in groups:
                late.ask(g)
            slow = [pool.submit(task) for task in late.tasks]
            for g in groups:
                if g.status == MappingStatus.MODIFIED and len(g.old) == len(g.new) == 1:
                    lineage.replay_into(self.git, self.old[g.old[0] - 1],
                                        self.new[g.new[0] - 1], g.evidence)
            found = [self.findings(g) for g in groups]
            if jobs is not None:
                jobs.take([f.result() for f in blamed])
            late.take([f.result() for f in slow])
            upstream = size.result()
        entries = tuple(self.entry(g, p, f + late.found(g), jobs)
                        for g, p, f in zip(groups, plans, found))
        return entries, upstream

    def _range(self) -> UpstreamRange:
        """How far apart the bases are: commits between them and files that differ."""
        up, old, new = self.up, self.old_base, self.new_base
        return UpstreamRange(up.history.count(f"{old}..{new}") if self.related else 0,
                             up.files_changed(old, new) if old != new else 0)

    def plan(self, g: Group, jobs: Jobs | None) -> list[FilePlan]:
        """The file comparisons of an entry with both sides; an identical entry asks no blame."""
        olds = [self.old[i - 1] for i in g.old]
        news = [self.new[j - 1] for j in g.new]
        if not (olds and news):
            return []
        paths = sorted({f.path for c in olds + news for f in c.files})
        return [plan_file(p, effective(self.git, olds, self.old, p),
                          effective(self.git, news, self.new, p),
                          jobs if g.status != MappingStatus.IDENTICAL else None) for p in paths]

    def findings(self, g: Group) -> list[Finding]:
        """The checks that only read files; an old side's finding the new side repeats is said
        once, and lines lost are looked for only where the change differs."""
        olds = [self.old[i - 1] for i in g.old]
        news = [self.new[j - 1] for j in g.new]
        new_side = [x for c in news for x in checks.stale_message(c, self.lines)]
        new_side += [x for c in news for x in checks.redundant(c, self.lines)]
        new_side += [x for c in news for x in checks.in_file_uses(c, self.name_uses(c))]
        old_side = [x for c in olds for x in checks.stale_message(c, self.lines)]
        if olds and news and g.status not in (MappingStatus.IDENTICAL, MappingStatus.EQUIVALENT):
            old_side += checks.lost(olds, news, self.new_base, self.lines, self.deleted)
        return checks.once(*checks.standing(old_side, new_side))

    def name_uses(self, c: Change) -> list[names.NameUse]:
        """Uses left in the patched files of names the patch unbinds (the bump's check), not
        counting names the file binds again; blamed only when there are any (blame is slow)."""
        if c.empty:
            return []
        left = {(u.path, u.line, u.name) for u in names.uses_of_removed(self.git, c, c.sha)
                if not checks.rebound(u.name, self.lines(c.sha, u.path) or [])}
        if not left or not self.related:
            return [names.NameUse(p, n, name, None) for p, n, name in sorted(left)]
        blamed = names.uses_of_removed(self.git, c, c.sha, self.old_base, self.new_base)
        return [u for u in blamed if (u.path, u.line, u.name) in left]

    def entry(self, g: Group, plans: list[FilePlan], found: list[Finding],
              jobs: Jobs | None) -> Entry:
        """One mapping entry from its group, its file plans (answered) and its findings."""
        olds = [self.old[i - 1] for i in g.old]
        news = [self.new[j - 1] for j in g.new]
        files: list[FileCompare] = []
        lines: Counter[Oid] = Counter()
        paths: dict[Oid, list[str]] = {}
        for plan in plans:
            compare, counted = plan.result(jobs or Jobs())
            files.append(compare)
            lines.update(counted)
            for commit in counted:
                paths.setdefault(commit, []).append(compare.path)
        commits = tuple(UpstreamCommit(c, self.rng.subject(c), pr_number(self.rng.subject(c)),
                                       tuple(paths[c]), lines[c]) for c in self.rng.order(lines))
        message = message_change(olds, news)
        evidence = Evidence.of(g.evidence)
        moved = evidence.moved
        assert g.status is not None, "pair() decides every group's status"
        rev: Review = review(g.status, evidence, tuple(files), tuple(found), commits, moved)
        renumbered = bool(g.old and g.new and min(g.old) != min(g.new))
        return Entry(tuple(g.old), tuple(g.new), g.status, renumbered,
                     message != MessageChange(), evidence,
                     describe(g.status, evidence, g.old, g.new), tuple(files), commits,
                     tuple(found), moved, message, rev)


class _Late:
    """The checks that ask git slow questions (a file's history for partial reverts, ``git
    grep`` for removed names), gathered to run on threads with the blames."""

    def __init__(self, ctx: _Ctx) -> None:
        self.ctx = ctx
        self.tasks: list[Callable[[], Any]] = []
        self._asks: list[tuple[int, Callable[[Any], list[Finding]]]] = []
        self._done: dict[int, list[Finding]] = {}

    def ask(self, g: Group) -> None:
        """Queue the slow checks of the group's new patches: partial reverts (a file history) and
        removed names (one ``git grep`` per patch for all the names it removes)."""
        ctx = self.ctx
        olds = [ctx.old[i - 1] for i in g.old]
        for j in g.new:
            c = ctx.new[j - 1]
            if ctx.related:
                for path, change in checks.resolution_lines(c, olds, ctx.carried.at_new):
                    self._revert(id(g), c, path, change)
            removed = checks.removed_names(c, ctx.lines)
            if removed:
                self._removed(id(g), c, removed)

    def _revert(self, key: int, c: Change, path: str, change: CarriedChange) -> None:
        """The lines the resolution wrote that re-add what a commit of the range removed: the
        carried-lines engine's answer, bump's rule (one history of the file), asked of a patch
        made on the new base (a line it removes there and adds is moved)."""
        carried = self.ctx.carried
        self.tasks.append(lambda: carried.removed_upstream(change, on_target=True))
        self._asks.append((key, lambda found: checks.partial_revert(c, path, found)))

    def _removed(self, key: int, c: Change, items: list[checks.Removed]) -> None:
        history = self.ctx.git.history
        names = list(dict.fromkeys(item.name for item in items))
        self.tasks.append(lambda: history.files_holding(c.sha, names))
        self._asks.append((key, lambda files: [f for item in items
                                               for f in self._uses(c, item, files[item.name])]))

    def _uses(self, c: Change, item: checks.Removed, files: list[str]) -> list[Finding]:
        """The finding for a removed name, if code of the tree after the patch still uses it,
        with the upstream commit that wrote the first use (forward blame)."""
        found = checks.uses(item, [f for f in files if f.endswith(".py")], c.sha,
                            self.ctx.lines, checks.own_lines(c))
        if not found:
            return []
        commit = None
        if self.ctx.related:
            path, n = found[0]
            blamed = self.ctx.rng.blamed(path, [n], reverse=False)
            commit = next((x for x in blamed.values() if x in self.ctx.rng.parents), None)
        return [checks.name_used(c, item, found, commit)]

    def take(self, answers: list[Any]) -> None:
        for (key, finish), answer in zip(self._asks, answers):
            self._done.setdefault(key, []).extend(finish(answer))

    def found(self, g: Group) -> list[Finding]:
        return self._done.get(id(g), [])


# -- the commit message ----------------------------------------------------------------------------
_NUMBERING = re.compile(r"^\[(?:PATCH\s*)?\d+/\d+\]\s*")
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z-]*):\s+\S")


def _parts(message: str) -> tuple[str, str, list[str]]:
    """Subject (``[n/m]`` left out), body, trailers of a message."""
    text = _NUMBERING.sub("", message.strip())
    paragraphs = re.split(r"\n\s*\n", text)
    subject = " ".join(paragraphs[0].split())
    trailers: list[str] = []
    body: list[str] = []
    for para in paragraphs[1:]:
        lines = [ln.rstrip() for ln in para.strip().split("\n")]
        if lines and all(_TRAILER.match(ln) for ln in lines):
            trailers += lines
        else:
            body.append("\n".join(lines))
    return subject, "\n\n".join(body), trailers


def message_change(olds: list[Change], news: list[Change]) -> MessageChange:
    """What changed in the message between the sides (nothing when a side is missing)."""
    if not (olds and news):
        return MessageChange()
    a = [_parts(c.info.message) for c in olds]
    b = [_parts(c.info.message) for c in news]
    ta = {t for _, _, ts in a for t in ts}
    tb = {t for _, _, ts in b for t in ts}
    return MessageChange(sorted(s for s, _, _ in a) != sorted(s for s, _, _ in b),
                         sorted(x for _, x, _ in a) != sorted(x for _, x, _ in b),
                         tuple(sorted(tb - ta)), tuple(sorted(ta - tb)))
