"""Pair and classify two materialised series: which old patch became which new one, and how.

git range-diff is one signal, not the answer (it is 1:1 only, calls a line-number-only move
unchanged and shows unmatched commits without content), so pairing here combines several, each
kept as evidence: patch-id, the multisets of added/removed lines (exact, and whitespace-normalised
for similarity), containment of one patch's changed lines in another's, file overlap, lineage
(series ids, ``absorbs:``, author + author date, PR tags such as ``(#6)``, subjects) and a 3-way
replay of the old patch on the new patch's parent. Two patches that share no file and no changed
line are never paired, whatever else says so.

Used by ``report`` and ``bump``; knows git only through ``gitio.Git``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .conflicts import Engine, Labels
from .diffs import FileDiff, Hunk, parse
from .git import EMPTY_TREE, CommitInfo, Repo
from .patches import Patch
from .series import PatchEntry, Series, slugify

_PR = re.compile(r"\(#(\d+)\)")
_PREFIX = re.compile(r"^(\[[^\]]*\]\s*)+")

# thresholds (documented in the evidence they produce)
PAIR_SIMILARITY = 0.3  # dice of significant changed lines for a pair without lineage
CONTAIN = 0.5  # share of a patch's significant lines found in another: merged / split


def text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


def hunk_lines(h: Hunk) -> tuple[str, ...]:
    """A hunk's body as text lines with their tag (``\\`` lines left out)."""
    return tuple(text(ln) for ln in h.lines if ln[:1] != b"\\")


def changed(h: Hunk) -> tuple[str, ...]:
    return tuple(text(ln) for ln in h.changed)


# -- one commit as a change ------------------------------------------------------------------------
@dataclass
class Change:
    """One commit of a materialised series, with what the pairing needs precomputed."""

    side: str  # old | new
    index: int  # 1-based
    sha: str
    info: CommitInfo
    parent: str
    diff: bytes
    patch_id: str | None
    files: tuple[FileDiff, ...]
    entry: PatchEntry | None
    exact: Counter[tuple[str, str]] = field(default_factory=Counter)  # (path, +/-line)
    sig: Counter[str] = field(default_factory=Counter)  # +/-normalised significant lines

    @property
    def empty(self) -> bool:
        return not self.files

    @property
    def subject(self) -> str:
        return self.info.subject

    @property
    def id(self) -> str:
        return self.entry.id if self.entry else slugify(self.subject)

    def paths(self) -> set[str]:
        return {f.path for f in self.files}

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if f.path == path), None)


def significant(line: str) -> str | None:
    """A changed line normalised for similarity, or None when it says too little to count
    (blank, brackets, ``else:``, short keywords)."""
    norm = " ".join(line[1:].split())
    if len(norm) < 8 or not re.search(r"[A-Za-z_]{3}", norm):
        return None
    return line[0] + norm


def load_changes(repo: Repo, side: str, commits: Sequence[str],
                 series: Series | None) -> list[Change]:
    infos = repo.commits(list(commits))
    entries = _entries_for(infos, series)
    diffs = [(i.sha, repo.commit_diff(i)) for i in infos]
    ids = repo.history.patch_ids(diffs)
    out: list[Change] = []
    for number, (info, entry, (_, diff)) in enumerate(zip(infos, entries, diffs), start=1):
        parent = info.parents[0] if info.parents else EMPTY_TREE
        files = parse(diff).files
        change = Change(side, number, info.sha, info, parent, diff,
                        ids.get(info.sha) if files else None, files, entry)
        for f in files:
            for h in f.hunks:
                for line in changed(h):
                    change.exact[(f.path, line)] += 1
                    s = significant(line)
                    if s:
                        change.sig[s] += 1
        out.append(change)
    return out


def _entries_for(infos: list[CommitInfo], series: Series | None) -> list[PatchEntry | None]:
    """The series.yaml entry of each commit: by position when the counts agree, else (a patch
    left out of a materialisation) by title, in order."""
    if series is None:
        return [None] * len(infos)
    entries = list(series.patches)
    if len(entries) == len(infos):
        return list(entries)
    out: list[PatchEntry | None] = []
    k = 0
    for info in infos:
        hit = next((j for j in range(k, len(entries)) if entries[j].title == info.subject), None)
        out.append(entries[hit] if hit is not None else None)
        if hit is not None:
            k = hit + 1
    return out


# -- pairing ---------------------------------------------------------------------------------------
@dataclass
class Group:
    """One mapping entry: old and new patch indices, status, evidence."""

    old: list[int]
    new: list[int]
    status: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)


def core_subject(subject: str) -> str:
    text = _PREFIX.sub("", subject).strip()
    text = _PR.sub("", text).strip()
    return text.lower()


def pr_tags(subject: str) -> set[str]:
    return set(_PR.findall(subject))


def lineage(o: Change, n: Change) -> list[str]:
    """Lineage signals between an old and a new patch (words, for the evidence)."""
    out: list[str] = []
    if o.entry and n.entry:
        if o.entry.id == n.entry.id:
            out.append(f"same series id '{o.entry.id}'")
        if o.entry.id in n.entry.absorbs:
            out.append(f"new '{n.entry.id}' absorbs '{o.entry.id}' (series.yaml)")
    if (o.info.author.name, o.info.author.date) == (n.info.author.name, n.info.author.date):
        out.append("same author and author date")
    tags = pr_tags(o.subject) & pr_tags(n.subject)
    if tags:
        out.append("same PR tag " + ", ".join(f"(#{t})" for t in sorted(tags, key=int)))
    if core_subject(o.subject) and core_subject(o.subject) == core_subject(n.subject):
        out.append("same subject")
    return out


@dataclass(frozen=True)
class Similarity:
    shared: int  # significant changed lines in both (multiset intersection)
    old_lines: int
    new_lines: int
    files_shared: tuple[str, ...]
    lineage: tuple[str, ...]

    @property
    def eligible(self) -> bool:
        """The one hard rule: no shared file and no shared line, no pairing."""
        return bool(self.files_shared) or self.shared > 0

    @property
    def solid(self) -> bool:
        """Enough overlap for line similarity alone to count: a shared file, or at least two
        shared lines (one common line such as ``import torch`` in two files is not)."""
        return bool(self.files_shared) or self.shared >= 2

    @property
    def dice(self) -> float:
        total = self.old_lines + self.new_lines
        return 2 * self.shared / total if total else 0.0

    @property
    def old_in_new(self) -> float:
        return self.shared / self.old_lines if self.old_lines else 0.0

    @property
    def new_in_old(self) -> float:
        return self.shared / self.new_lines if self.new_lines else 0.0

    def score(self, n_files: int) -> float:
        jacc = len(self.files_shared) / n_files if n_files else 0.0
        strong = sum(1.0 if "id" in w or "absorbs" in w else 0.5 for w in self.lineage)
        return self.dice + 0.25 * jacc + strong


def similarity(o: Change, n: Change) -> Similarity:
    shared = sum((o.sig & n.sig).values())
    return Similarity(shared, sum(o.sig.values()), sum(n.sig.values()),
                      tuple(sorted(o.paths() & n.paths())), tuple(lineage(o, n)))


def _sim_evidence(s: Similarity) -> dict[str, Any]:
    return {"shared_lines": s.shared, "old_lines": s.old_lines, "new_lines": s.new_lines,
            "similarity": round(s.dice, 3), "files_shared": list(s.files_shared),
            "lineage": list(s.lineage)}


def pair(git: Repo, old: list[Change], new: list[Change], old_base: str,
         new_base: str) -> list[Group]:
    """Pair the old and new changes into groups, each with a status and its evidence."""
    used_o: dict[int, Group] = {}
    used_n: dict[int, Group] = {}
    groups: list[Group] = []

    def add(group: Group) -> None:
        groups.append(group)
        for i in group.old:
            used_o[i] = group
        for j in group.new:
            used_n[j] = group

    # 1. the same change: patch-id
    for o in old:
        if o.empty:
            continue
        for n in new:
            if n.index in used_n or n.empty or o.patch_id != n.patch_id:
                continue
            ev: dict[str, Any] = {"patch_id": o.patch_id}
            add(Group([o.index], [n.index], _same_patch_id(o, n, ev), ev))
            break
    # 2. empty commits: paired by subject, else alone
    for o in old:
        if o.empty and o.index not in used_o:
            n_match = next((n for n in new if n.empty and n.index not in used_n
                            and core_subject(n.subject) == core_subject(o.subject)), None)
            add(Group([o.index], [n_match.index] if n_match else [], "empty",
                      {"empty": "no diff against its parent"}))
    # 3. one-to-one by score
    sims: dict[tuple[int, int], Similarity] = {}
    cands: list[tuple[float, int, int]] = []
    for o in old:
        for n in new:
            if o.empty or n.empty:
                continue
            s = similarity(o, n)
            sims[(o.index, n.index)] = s
            if o.index in used_o or n.index in used_n or not s.eligible:
                continue
            if (s.dice >= PAIR_SIMILARITY and s.solid) or s.lineage:
                cands.append((-s.score(len(o.paths() | n.paths())), o.index, n.index))
    for _, i, j in sorted(cands):
        if i in used_o or j in used_n:
            continue
        add(Group([i], [j], "", _sim_evidence(sims[(i, j)])))
    # 4. what is left of the old side: upstreamed, or folded into a new patch (merged)
    by_o = {c.index: c for c in old}
    by_n = {c.index: c for c in new}
    for o in old:
        if o.index in used_o or o.empty:
            continue
        hit = upstreamed(git, o, old_base, new_base)
        if hit is not None:
            # the same patch carried to the new base became an empty commit: same entry
            twin = next((n for n in new if n.empty and n.index not in used_n
                         and lineage(o, n)), None)
            if twin is not None:
                hit["new_commit_empty"] = True
            add(Group([o.index], [twin.index] if twin else [], "upstreamed", hit))
            continue
        best = _best([(sims[(o.index, n.index)].old_in_new, n.index, sims[(o.index, n.index)])
                      for n in new if not n.empty and _folds(sims[(o.index, n.index)], "old")])
        if best is None:
            continue
        j, s = best
        ev = _sim_evidence(s)
        ev["contained"] = round(s.old_in_new, 3)
        target = used_n.get(j)
        if target is None:
            add(Group([o.index], [j], "", ev))
        else:
            target.old.append(o.index)
            target.old.sort()
            target.evidence.setdefault("folded", {})[str(o.index)] = ev
            used_o[o.index] = target
    # 5. what is left of the new side: part of a split
    for n in new:
        if n.index in used_n or n.empty:
            continue
        best = _best([(sims[(o.index, n.index)].new_in_old, o.index, sims[(o.index, n.index)])
                      for o in old if not o.empty and _folds(sims[(o.index, n.index)], "new")])
        if best is None:
            continue
        i, s = best
        ev = _sim_evidence(s)
        ev["contained"] = round(s.new_in_old, 3)
        target = used_o[i] if i in used_o else None
        if target is None:
            add(Group([i], [n.index], "", ev))
        else:
            target.new.append(n.index)
            target.new.sort()
            target.evidence.setdefault("split_off", {})[str(n.index)] = ev
            used_n[n.index] = target
    # 6. the rest: empty / dropped / new
    for n in new:
        if n.empty and n.index not in used_n:
            add(Group([], [n.index], "empty", {"empty": "no diff against its parent"}))
    for o in old:
        if o.index not in used_o:
            near = [(sims[(o.index, n.index)], n.index) for n in new if not n.empty]
            add(Group([o.index], [], "dropped", _nearest(near, "new")))
    for n in new:
        if n.index not in used_n:
            near = [(sims[(o.index, n.index)], o.index) for o in old if not o.empty]
            add(Group([], [n.index], "new", _nearest(near, "old")))
    # statuses of the paired groups
    for g in groups:
        if g.status in ("empty", "upstreamed", "dropped", "new"):
            continue
        if len(g.old) > 1:
            g.status = "merged"
        elif len(g.new) > 1:
            g.status = "split"
        elif not g.status:
            g.status = classify(git, by_o[g.old[0]], by_n[g.new[0]], g.evidence)
    return order(groups)


def _folds(s: Similarity, part: str) -> bool:
    """Whether the ``part`` side's patch is contained enough in the other to join its entry
    (merged when part is old, split when new); ``absorbs:`` in series.yaml also counts."""
    if not s.eligible:
        return False
    if part == "old" and any("absorbs" in w for w in s.lineage):
        return True
    share = s.old_in_new if part == "old" else s.new_in_old
    return share >= CONTAIN and s.solid


def _nearest(near: list[tuple[Similarity, int]], other: str) -> dict[str, Any]:
    """Evidence for an unpaired patch: the closest patch of the other side that shares a file
    or a line (and why that was not enough), or that none does."""
    eligible = [(s, i) for s, i in near if s.eligible]
    if not eligible:
        return {"nearest": None}
    s, i = sorted(eligible, key=lambda t: (-t[0].shared, -len(t[0].files_shared), t[1]))[0]
    ev = _sim_evidence(s)
    ev[f"{other}_index"] = i
    return {"nearest": ev}


def _best(items: list[tuple[float, int, Similarity]]) -> tuple[int, Similarity] | None:
    if not items:
        return None
    score, idx, s = sorted(items, key=lambda t: (-t[0], t[1]))[0]
    return idx, s


def _line_shift(o: Change, n: Change) -> int:
    """How far the first hunk moved (0 when every hunk header is the same)."""
    oh = [h.header for f in o.files for h in f.hunks]
    nh = [h.header for f in n.files for h in f.hunks]
    if oh == nh:
        return 0
    for f in o.files:
        nf = n.file(f.path)
        if nf is None:
            continue
        for a, b in zip(f.hunks, nf.hunks):
            if a.header != b.header:
                return b.new_start - a.new_start
    return 0


def _same_patch_id(o: Change, n: Change, evidence: dict[str, Any]) -> str:
    """Same patch-id: identical only when the hunks are the same text at the same lines
    (patch-id ignores line numbers and whitespace; range-diff calls such moves unchanged)."""
    evidence["patch_id_equal"] = True
    shift = _line_shift(o, n)
    if shift:
        evidence["line_shift"] = shift
    same_text = [(f.path, [h.lines for h in f.hunks]) for f in o.files] == \
        [(f.path, [h.lines for h in f.hunks]) for f in n.files]
    if not same_text:
        evidence["whitespace_differs"] = True
    return "identical" if same_text and not shift else "equivalent"


def classify(git: Repo, o: Change, n: Change, evidence: dict[str, Any]) -> str:
    """identical / equivalent / modified for one old and one new patch."""
    if o.patch_id == n.patch_id and o.patch_id is not None:
        return _same_patch_id(o, n, evidence)
    evidence["patch_id_equal"] = False
    if o.exact == n.exact:
        evidence["changed_lines_equal"] = True
        return "equivalent"
    evidence["changed_lines_equal"] = False
    replay, conflicts = replay_tree(git, o, n.parent)
    evidence["replay"] = ("reproduces the new commit" if replay == n.info.tree
                          else "conflicts" if replay is None else "gives a different tree")
    if conflicts:
        evidence["replay_conflicts"] = conflicts
    return "equivalent" if replay == n.info.tree else "modified"


def replay_tree(git: Repo, o: Change, parent: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The tree of ``o``'s diff merged (the conflict engine) on ``parent``, or None and the
    conflicts (each file with its kind and the old patch's hunks in its regions)."""
    with git.index() as index:
        index.read_tree(git.tree_of(parent))
        merge = Engine(git).merge(index, Patch("", "", "", "", o.diff),
                                  Labels("upstream", f"patch {o.id}"))
        if merge.ok:
            return index.write_tree(), []
        return None, [{"path": c.path, "kind": c.kind.value,
                       "hunks": sorted({h for r in c.regions for h in r.hunks})}
                      for c in merge.conflicts]


def upstreamed(git: Repo, o: Change, old_base: str, new_base: str) -> dict[str, Any] | None:
    """Evidence that the new base already holds ``o``'s change (every added line present in
    its file there, no significant removed line left as often as before), with the upstream
    commit that brought its most telling added line; None otherwise."""
    if old_base == new_base:
        return None
    specs = [f"{rev}:{f.path}" for f in o.files for rev in (new_base, o.parent)]
    blobs = git.objects.blobs(specs)
    telling: list[tuple[str, str]] = []
    for f in o.files:
        after, before = (blobs.get(f"{rev}:{f.path}") for rev in (new_base, o.parent))
        have = Counter((after or b"").decode("utf-8", errors="replace").split("\n"))
        had = Counter((before or b"").decode("utf-8", errors="replace").split("\n"))
        added = {x[1:] for h in f.hunks for x in hunk_lines(h) if x.startswith("+")}
        for h in f.hunks:
            for line in changed(h):
                text = line[1:]
                if line.startswith("+"):
                    if have[text] <= 0:
                        return None
                    if significant(line):
                        telling.append((f.path, text))
                elif significant(line) and text not in added and have[text] >= had[text] > 0:
                    return None  # a line the patch removes is still there as often as before
    if not telling:  # nothing telling added: no way to name the upstream commit
        return None
    evidence: dict[str, Any] = {"contained_in_new_base": True}
    for path, line in sorted(set(telling), key=lambda t: (-len(t[1].strip()), t))[:3]:
        shas = git.history.pickaxe(f"{old_base}..{new_base}", line.strip(), path)
        if shas:
            info = git.commit(shas[0])
            evidence["upstream_commit"] = info.sha
            evidence["upstream_subject"] = info.subject
            evidence["telling_line"] = line.strip()
            break
    return evidence


def order(groups: list[Group]) -> list[Group]:
    """Mapping order: by old position; new-only entries after the entry holding the new patch
    just before them."""
    placed: list[tuple[tuple[int, int, int], Group]] = []
    new_pos: dict[int, int] = {}
    for g in groups:
        if g.old:
            for j in g.new:
                new_pos[j] = min(g.old)
    for g in groups:
        if g.old:
            placed.append(((min(g.old), 0, 0), g))
            continue
        j = min(g.new)
        anchor = max((v for k, v in new_pos.items() if k < j), default=0)
        placed.append(((anchor, 1, j), g))
    return [g for _, g in sorted(placed, key=lambda t: t[0])]
