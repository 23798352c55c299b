"""Pair and classify two materialised series: which old patch became which new one, and how.

git range-diff is one signal, not the answer (it is 1:1 only, calls a line-number-only move
unchanged and shows unmatched commits without content), so pairing here combines several, each
kept as evidence: patch-id, the multisets of added/removed lines (exact, and whitespace-normalised
for similarity), containment of one patch's changed lines in another's, file overlap, lineage
(series ids, ``absorbs:``, author + author date, PR tags such as ``(#6)``, subjects) and a 3-way
replay of the old patch on the new patch's parent. Two patches that share no file and no changed
line are never paired, whatever else says so.

Every group carries the rule that decided it as data (``evidence["rule"]`` and, for a patch
folded into an entry, ``evidence["folded"][i]["rule"]``); an unpaired patch carries the numbers
each rule saw for its nearest candidate, computed by the same predicates the pairing applies, so
what the report prints as the reason is what the code did.

Statuses: ``identical`` is the same change (same patch-id and the same +/- lines; a line shift is
the ``moved`` flag, not another status), ``equivalent`` the same +/- lines in another context,
``modified`` a change that differs. Used by ``report`` and ``bump``; knows git only through
``git.Repo``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine.attribution import UpstreamRange
from ..engine.carried import CARRIED_SHARE, CarriedLines
from ..engine.conflicts import Engine, Labels
from ..git import EMPTY_TREE, CommitInfo, Repo
from ..model.diffs import FileDiff, Hunk, parse
from ..model.ids import Oid, is_abbrev
from ..model.lines import CONTAIN, significant
from ..model.patches import Patch, raw_datetime
from ..model.series import PatchEntry, Series, slugify
from ..model.status import MappingStatus

_PR = re.compile(r"\(#(\d+)\)")
_PAREN = re.compile(r"\(([^()]*)\)")
_HASH_WORD = re.compile(r"#(\w+)")
_PREFIX = re.compile(r"^(\[[^\]]*\]\s*)+")

# thresholds (stated in the evidence they produce)
PAIR_SIMILARITY = 0.3  # dice of significant changed lines for a pair without lineage
# lineage signals that identify a patch across a rebase on their own (a subject can repeat)
STRONG = ("series_id", "absorbs", "author_date", "pr_tag")
# a fold by a stronger rule wins over one by a weaker rule
FOLD_RULES = ("absorbs", "containment", "lineage")


def text(line: bytes) -> str:
    return line.decode("utf-8", errors="replace")


def hunk_lines(h: Hunk) -> tuple[str, ...]:
    """A hunk's body as text lines with their tag (``\\`` lines left out)."""
    return tuple(text(ln) for ln in h.lines if ln[:1] != b"\\")


def changed(h: Hunk) -> tuple[str, ...]:
    return tuple(text(ln) for ln in h.changed)


def iso_date(raw: str) -> str:
    """A git date (``<seconds> <+hhmm>``) in ISO 8601 with its own offset."""
    return raw_datetime(raw).isoformat()


# -- one commit as a change ------------------------------------------------------------------------
@dataclass
class Change:
    """One commit of a materialised series, with what the pairing needs precomputed."""

    side: str  # old | new
    index: int  # 1-based
    sha: Oid
    info: CommitInfo
    parent: Oid
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

    @property
    def patch(self) -> Patch:
        """The commit as the patch it is (its author, date, message and diff): what the
        conflict engine and the carried-lines engine are asked about."""
        author = self.info.author
        return Patch(author.name, author.email, author.date.rfc2822(), self.info.message,
                     self.diff)

    def paths(self) -> set[str]:
        return {f.path for f in self.files}

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if f.path == path), None)


def load_changes(repo: Repo, side: str, commits: Sequence[str],
                 series: Series | None) -> list[Change]:
    """The commits of one side as changes, with patch-ids and the line multisets every pairing
    rule compares, computed once (pairing compares every old with every new patch)."""
    infos = repo.commits(list(commits))
    entries = _entries_for(infos, series)
    diffs = _diffs(repo, infos)
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


def _diffs(repo: Repo, infos: list[CommitInfo]) -> list[tuple[str, bytes]]:
    """Each commit's diff against its parent, all in one ``git log`` process."""
    found = repo.history.commit_diffs([i.sha for i in infos])
    return [(i.sha, found.get(i.sha) or b"") for i in infos]


def _entries_for(infos: list[CommitInfo], series: Series | None) -> list[PatchEntry | None]:
    """The series.yaml entry of each commit: by title, in order (a materialisation that left a
    patch out, a range whose tip carries a series.yaml); by position when the counts agree and
    no title matches (subjects rewritten)."""
    if series is None:
        return [None] * len(infos)
    entries = list(series.patches)
    out: list[PatchEntry | None] = []
    k = 0
    for info in infos:
        hit = next((j for j in range(k, len(entries)) if entries[j].title == info.subject), None)
        out.append(entries[hit] if hit is not None else None)
        if hit is not None:
            k = hit + 1
    if len(entries) == len(infos) and not any(out):
        return list(entries)
    return out


# -- signals ---------------------------------------------------------------------------------------
@dataclass
class Group:
    """One mapping entry: old and new patch indices, status, evidence."""

    old: list[int]
    new: list[int]
    status: MappingStatus | None = None  # None until the pairing decides
    evidence: dict[str, Any] = field(default_factory=dict)


def core_subject(subject: str) -> str:
    body = _PREFIX.sub("", subject).strip()
    body = _PR.sub("", body).strip()
    return body.lower()


def pr_tags(subject: str) -> set[str]:
    return cited(subject)[0]


def cited(subject: str) -> tuple[set[str], set[str]]:
    """The PR numbers and the commit shas a subject cites in parentheses: ``(#6)``, ``(#17,
    #18)``, ``(#19, fp32 leaf detach)``, ``(#23924a0b6)``. Up to six digits is a PR number; seven
    to forty hex digits with a letter among them is a sha (all-digit ones stay PR numbers)."""
    prs: set[str] = set()
    shas: set[str] = set()
    for group in _PAREN.findall(subject):
        for word in _HASH_WORD.findall(group):
            low = word.lower()
            if low.isdigit() and len(low) <= 6:
                prs.add(str(int(low)))
            elif is_abbrev(low) and not low.isdigit():
                shas.add(low)
    return prs, shas


def lineage(o: Change, n: Change) -> dict[str, Any]:
    """Lineage signals between an old and a new patch, kind -> what matched."""
    out: dict[str, Any] = {}
    if o.entry and n.entry:
        if o.entry.id == n.entry.id:
            out["series_id"] = o.entry.id
        if o.entry.id in n.entry.absorbs:
            out["absorbs"] = o.entry.id
    if (o.info.author.name, o.info.author.date) == (n.info.author.name, n.info.author.date):
        out["author_date"] = f"{o.info.author.name} {iso_date(o.info.author.date)}"
    tags = pr_tags(o.subject) & pr_tags(n.subject)
    if tags:
        out["pr_tag"] = [f"#{t}" for t in sorted(tags, key=int)]
    if core_subject(o.subject) and core_subject(o.subject) == core_subject(n.subject):
        out["subject"] = core_subject(o.subject)
    return out


@dataclass(frozen=True)
class Similarity:
    shared: int  # significant changed lines in both (multiset intersection)
    old_lines: int
    new_lines: int
    files_shared: tuple[str, ...]
    lineage: dict[str, Any]

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

    def share(self, part: str) -> float:
        """How much of the ``part`` side's patch the other holds."""
        own = self.old_lines if part == "old" else self.new_lines
        return self.shared / own if own else 0.0

    def score(self, n_files: int) -> float:
        jacc = len(self.files_shared) / n_files if n_files else 0.0
        strong = sum(1.0 if k in ("series_id", "absorbs") else 0.5 for k in self.lineage)
        return self.dice + 0.25 * jacc + strong


def similarity(o: Change, n: Change) -> Similarity:
    shared = sum((o.sig & n.sig).values())
    return Similarity(shared, sum(o.sig.values()), sum(n.sig.values()),
                      tuple(sorted(o.paths() & n.paths())), lineage(o, n))


def pair_rule(s: Similarity) -> str | None:
    """The rule by which two patches pair one-to-one: similarity, else lineage, else none."""
    if not s.eligible:
        return None
    if s.dice >= PAIR_SIMILARITY and s.solid:
        return "similarity"
    return "lineage" if s.lineage else None


def fold_rule(s: Similarity, part: str) -> str | None:
    """The rule by which the ``part`` side's patch joins another's entry (merged when part is
    old, split when new): ``absorbs:`` in series.yaml, containment, or strong lineage."""
    if not s.eligible:
        return None
    if part == "old" and "absorbs" in s.lineage:
        return "absorbs"
    if s.share(part) >= CONTAIN and s.solid:
        return "containment"
    return "lineage" if any(k in s.lineage for k in STRONG) else None


def sim_evidence(s: Similarity) -> dict[str, Any]:
    return {"shared_lines": s.shared, "old_lines": s.old_lines, "new_lines": s.new_lines,
            "similarity": round(s.dice, 3), "files_shared": list(s.files_shared),
            "lineage": dict(s.lineage)}


# -- candidates ------------------------------------------------------------------------------------
class Candidates:
    """The (old, new) pairs the pairing compares, with their similarity, computed when asked.

    Comparing every old patch with every new one made a report on two ranges of 3,000 commits
    run for minutes. Every rule needs an *eligible* pair (a shared file or a shared significant
    line), and beyond that a rule needs shared lines (similarity, containment) or lineage. So a
    patch's candidates for a rule are read from inverted indexes, never from a scan of the
    other side: the patches holding one of its lines, and those sharing a lineage key (series
    id or ``absorbs:``, author + date, PR tag, subject). The lines are pruned by a size bound
    first (prefix filtering): a rule by lines needs at least ``ceil(0.15 x own lines)`` shared
    lines (dice >= 0.3 needs 0.15 x both sizes; containment 0.5 x its own), so a partner must
    hold one of the patch's rarest ``own - bound + 1`` lines, and the commonest lines (``import
    torch``) are not looked up. Patches paired by patch-id are never asked about, except as the
    target of a fold. Patches sharing only a file are read (from the path index) for one
    question: the nearest patch of one left unpaired. ``exhaustive`` compares every pair, as the
    tests' reference: both give the same groups and evidence.
    """

    def __init__(self, old: list[Change], new: list[Change], *, exhaustive: bool = False) -> None:
        self.old, self.new = old, new
        self.exhaustive = exhaustive
        self._sims: dict[tuple[int, int], Similarity | None] = {}
        self._paths = (_postings(old, lambda c: c.paths()), _postings(new, lambda c: c.paths()))
        self._lines = (_postings(old, lambda c: c.sig), _postings(new, lambda c: c.sig))
        self._keys = (_postings(old, lineage_keys), _postings(new, lineage_keys))

    def sim(self, i: int, j: int) -> Similarity | None:
        """The similarity of old ``i`` and new ``j`` when they are eligible, else None."""
        key = (i, j)
        if key not in self._sims:
            o, n = self.old[i - 1], self.new[j - 1]
            s = None if o.empty or n.empty else similarity(o, n)
            self._sims[key] = s if s is not None and s.eligible else None
        return self._sims[key]

    def _all(self, part: str) -> list[int]:
        return [x.index for x in (self.new if part == "old" else self.old)]

    def _rule_partners(self, c: Change, part: str) -> set[int]:
        """The other side's patches that may pair or fold with ``c`` (a superset)."""
        side = 1 if part == "old" else 0
        lines, keys = self._lines[side], self._keys[side]
        found: set[int] = set()
        own = sum(c.sig.values())
        bound = max(1, -(-15 * own // 100))  # ceil(0.15 x own), at least one line
        budget = own - bound + 1  # tokens of the prefix
        for line in sorted(c.sig, key=lambda ln: (len(lines.get(ln, ())), ln)):
            if budget <= 0:
                break
            found.update(lines.get(line, ()))
            budget -= c.sig[line]
        for key in lineage_keys(c):
            found.update(keys.get(key, ()))
        return found

    def of(self, c: Change, part: str) -> list[tuple[int, Similarity]]:
        """(other index, similarity) of every pair ``c`` may pair or fold in, in index order."""
        if c.empty:
            return []
        ks = self._all(part) if self.exhaustive else sorted(self._rule_partners(c, part))
        return self._eligible(c, part, ks)

    def _eligible(self, c: Change, part: str, ks: Any) -> list[tuple[int, Similarity]]:
        out = []
        for k in ks:
            s = self.sim(c.index, k) if part == "old" else self.sim(k, c.index)
            if s is not None:
                out.append((k, s))
        return out

    def pairs(self, olds: list[Change], free_new: set[int]
              ) -> list[tuple[tuple[int, int], Similarity]]:
        """The pairs of ``olds`` with the new patches in ``free_new`` that a rule may take."""
        return [((o.index, k), s) for o in olds for k, s in self.of(o, "old") if k in free_new]

    def nearest(self, c: Change, part: str) -> tuple[Similarity, int] | None:
        """The eligible patch of the other side nearest ``c``: most shared lines, then most
        shared files, then the lowest index. One sharing a line beats every one sharing only
        files, so the path index is read only when no line is shared."""
        if c.empty:
            return None
        side = 1 if part == "old" else 0
        if self.exhaustive:
            near = [(s, k) for k, s in self._eligible(c, part, self._all(part))]
        else:
            by_line: set[int] = set()
            for line in c.sig:
                by_line.update(self._lines[side].get(line, ()))
            if by_line:
                near = [(s, k) for k, s in self._eligible(c, part, by_line)]
            else:
                files = Counter(k for path in c.paths() for k in self._paths[side].get(path, ()))
                best = min(files.items(), key=lambda t: (-t[1], t[0]), default=None)
                near = [(s, k) for k, s in self._eligible(c, part, [best[0]])] if best else []
        if not near:
            return None
        return min(near, key=lambda t: (-t[0].shared, -len(t[0].files_shared), t[1]))


def lineage_keys(c: Change) -> set[Any]:
    """What ``lineage`` compares, as index keys: two patches with a lineage signal share one."""
    keys: set[Any] = set()
    if c.entry is not None:
        keys.add(("id", c.entry.id))
        if c.side == "new":
            keys.update(("id", a) for a in c.entry.absorbs)
    keys.add(("author", c.info.author.name, c.info.author.date))
    keys.update(("pr", t) for t in pr_tags(c.subject))
    if core_subject(c.subject):
        keys.add(("subject", core_subject(c.subject)))
    return keys


def _postings(changes: list[Change], keys: Any) -> dict[Any, list[int]]:
    """key -> indices of the changes that have it (an inverted index, indices ascending)."""
    out: dict[Any, list[int]] = {}
    for c in changes:
        if not c.empty:
            for key in keys(c):
                out.setdefault(key, []).append(c.index)
    return out


# -- pairing ---------------------------------------------------------------------------------------
class _Pairing:
    """The pairing steps over one old and one new series, in order of certainty."""

    def __init__(self, git: Repo, old: list[Change], new: list[Change], old_base: Oid,
                 new_base: Oid, *, exhaustive: bool = False) -> None:
        self.git, self.old, self.new = git, old, new
        self.old_base, self.new_base = old_base, new_base
        self.used_o: dict[int, Group] = {}
        self.used_n: dict[int, Group] = {}
        self.groups: list[Group] = []
        self.sims = Candidates(old, new, exhaustive=exhaustive)
        self.carried = (CarriedLines(UpstreamRange(git, old_base, new_base))
                        if old_base != new_base else None)

    def add(self, group: Group) -> None:
        self.groups.append(group)
        for i in group.old:
            self.used_o[i] = group
        for j in group.new:
            self.used_n[j] = group

    def same_patch_id(self) -> None:
        """Each old patch with the first new one of the same patch-id not yet taken (a dict of
        patch-id -> new patches in order: one pass, not old x new)."""
        by_id: dict[str | None, list[Change]] = {}
        for n in self.new:
            if not n.empty:
                by_id.setdefault(n.patch_id, []).append(n)
        for o in self.old:
            waiting = by_id.get(o.patch_id) if not o.empty else None
            if waiting:
                n = waiting.pop(0)
                self.add(Group([o.index], [n.index], None, {"rule": "patch_id"}))

    def empties(self) -> None:
        for o in self.old:
            if o.empty and o.index not in self.used_o:
                n_match = next((n for n in self.new if n.empty and n.index not in self.used_n
                                and core_subject(n.subject) == core_subject(o.subject)), None)
                self.add(Group([o.index], [n_match.index] if n_match else [], MappingStatus.EMPTY,
                               {"rule": "empty"}))

    def by_citation(self) -> None:
        """A patch whose subject cites two or more patches of the other side, by their PR tags
        or their shas (``feat: TMS regions (#17, #18)`` ← ``... (#17)`` + ``... (#18)``), takes
        them all: merged (or split) by what its authors wrote, provided each shares a file or a
        changed line with it. Runs before the content rules, which would pair it with one of
        them and call the other dropped."""
        for part, mine, others in (("new", self.new, self.old), ("old", self.old, self.new)):
            used_mine = self.used_n if part == "new" else self.used_o
            used_other = self.used_o if part == "new" else self.used_n
            for c in mine:
                if c.index in used_mine or c.empty:
                    continue
                hits = self._cited_by(c, part, [x for x in others if x.index not in used_other])
                if len(hits) < 2:
                    continue
                tags = sorted(f"#{t}" for t in cited(c.subject)[0] | cited(c.subject)[1])
                ev = {"rule": "citation", "cited": tags,
                      "by_patch": {str(k): how for k, how in hits}}
                many = [k for k, _ in hits]
                self.add(Group(many, [c.index], None, ev) if part == "new"
                         else Group([c.index], many, None, ev))

    def _cited_by(self, c: Change, part: str, others: list[Change]) -> list[tuple[int, str]]:
        """The patches of ``others`` that ``c``'s subject cites (a PR tag of theirs, or a prefix
        of their sha) and that share a file or a changed line with ``c``, with what matched.
        A subject citing fewer than two things takes nothing here (and asks no similarity)."""
        prs, shas = cited(c.subject)
        if len(prs) + len(shas) < 2:
            return []
        hits: list[tuple[int, str]] = []
        for other in others:
            tag = sorted(pr_tags(other.subject) & prs, key=int)
            sha = next((x for x in shas if other.sha.startswith(x)), None)
            if other.empty or not (tag or sha):
                continue
            s = (self.sims.sim(other.index, c.index) if part == "new"
                 else self.sims.sim(c.index, other.index))
            if s is not None:
                hits.append((other.index, f"#{tag[0]}" if tag else f"sha {sha}"))
        return hits

    def one_to_one(self) -> None:
        """Pairs by similarity or lineage, best score first, so a strong pair is never taken by a
        weaker candidate that happened to come first."""
        cands: list[tuple[float, int, int]] = []
        free_new = {n.index for n in self.new if n.index not in self.used_n}
        for (i, j), s in self.sims.pairs([o for o in self.old if o.index not in self.used_o],
                                         free_new):
            if pair_rule(s) is None:
                continue
            files = self.by_o(i).paths() | self.by_n(j).paths()
            cands.append((-s.score(len(files)), i, j))
        for _, i, j in sorted(cands):
            if i not in self.used_o and j not in self.used_n:
                chosen = self.sims.sim(i, j)
                assert chosen is not None  # a candidate: eligible
                self.add(Group([i], [j], None, {"rule": pair_rule(chosen),
                                                **sim_evidence(chosen)}))

    def by_o(self, i: int) -> Change:
        return self.old[i - 1]

    def by_n(self, j: int) -> Change:
        return self.new[j - 1]

    def upstreamed(self) -> None:
        """Unpaired old patches whose every added line the new base holds: upstream took them."""
        for o in self.old:
            if o.index in self.used_o or o.empty:
                continue
            hit = upstreamed(self.carried, o)
            if hit is None:
                continue
            # the same patch carried to the new base became an empty commit: same entry
            twin = next((n for n in self.new if n.empty and n.index not in self.used_n
                         and lineage(o, n)), None)
            if twin is not None:
                hit["new_commit_empty"] = True
            self.add(Group([o.index], [twin.index] if twin else [], MappingStatus.UPSTREAMED,
                           {"rule": "upstreamed", **hit}))

    def fold(self, part: str) -> None:
        """What is left of ``part``'s side joins the entry of the patch of the other side that
        holds it (merged when old patches fold, split when new ones do), else pairs with it."""
        mine, used_mine, used_other = ((self.old, self.used_o, self.used_n) if part == "old"
                                       else (self.new, self.used_n, self.used_o))
        for c in mine:
            if c.index in used_mine or c.empty:
                continue
            best = self._fold_target(c, part)
            if best is None:
                continue
            k, rule, s = best
            ev = {"rule": rule, **sim_evidence(s), "contained": round(s.share(part), 3)}
            target = used_other.get(k)
            if target is None:
                pair = ([c.index], [k]) if part == "old" else ([k], [c.index])
                self.add(Group(pair[0], pair[1], None, ev))
                continue
            side = target.old if part == "old" else target.new
            side.append(c.index)
            side.sort()
            key = "folded" if part == "old" else "split_off"
            target.evidence.setdefault(key, {})[str(c.index)] = ev
            used_mine[c.index] = target

    def _fold_target(self, c: Change, part: str) -> tuple[int, str, Similarity] | None:
        """The patch of the other side ``c`` joins: the strongest rule first (absorbs:, then
        containment, then lineage), then the largest share, then the lowest index."""
        found: list[tuple[int, float, int, str, Similarity]] = []
        for k, s in self.sims.of(c, part):
            rule = fold_rule(s, part)
            if rule is not None:
                found.append((FOLD_RULES.index(rule), -s.share(part), k, rule, s))
        if not found:
            return None
        _, _, k, rule, s = min(found, key=lambda t: (t[0], t[1], t[2]))
        return k, rule, s

    def rest(self) -> None:
        """What no rule took: empty commits alone, dropped old and new patches, each with why."""
        for n in self.new:
            if n.empty and n.index not in self.used_n:
                self.add(Group([], [n.index], MappingStatus.EMPTY, {"rule": "empty"}))
        for o in self.old:
            if o.index not in self.used_o:
                self.add(Group([o.index], [], MappingStatus.DROPPED, self.unpaired(o.index, "old")))
        for n in self.new:
            if n.index not in self.used_n:
                self.add(Group([], [n.index], MappingStatus.NEW, self.unpaired(n.index, "new")))

    def unpaired(self, index: int, part: str) -> dict[str, Any]:
        """Why no rule took this patch: its nearest patch of the other side (one that shares a
        file or a line) with what each rule saw there, and what the rules need."""
        mine = self.by_o(index) if part == "old" else self.by_n(index)
        found = self.sims.nearest(mine, part)
        needs = {"similarity": PAIR_SIMILARITY, "containment": CONTAIN, "lineage": list(STRONG)}
        if found is None:
            return {"rule": "unpaired", "nearest": None, "needs": needs}
        s, k = found
        taken = (self.used_n if part == "old" else self.used_o).get(k)
        nearest = {"index": k, **sim_evidence(s), "contained": round(s.share(part), 3),
                   "pair_rule": pair_rule(s), "fold_rule": fold_rule(s, part),
                   "taken_by": (taken.old if part == "old" else taken.new) if taken else None}
        return {"rule": "unpaired", "nearest": nearest, "needs": needs}


def pair(git: Repo, old: list[Change], new: list[Change], old_base: Oid,
         new_base: Oid, *, replay: bool = True, exhaustive: bool = False) -> list[Group]:
    """Pair the old and new changes into groups, each with a status and its evidence; without
    ``replay`` the caller replays the modified pairs (``replay_into``) when it suits it.
    ``exhaustive``: compare every old patch with every new one (the tests' reference for the
    pruned candidates, which must pair the same)."""
    p = _Pairing(git, old, new, old_base, new_base, exhaustive=exhaustive)
    p.same_patch_id()
    p.empties()
    p.by_citation()
    p.one_to_one()
    p.upstreamed()
    p.fold("old")
    p.fold("new")
    p.rest()
    for g in p.groups:
        if g.status:
            continue
        if len(g.old) > 1 or len(g.new) > 1:
            g.status = MappingStatus.MERGED if len(g.old) > 1 else MappingStatus.SPLIT
            olds = sum((p.by_o(i).exact for i in g.old), Counter[tuple[str, str]]())
            news = sum((p.by_n(j).exact for j in g.new), Counter[tuple[str, str]]())
            g.evidence["changed_lines_equal"] = olds == news
        else:
            o, n = p.by_o(g.old[0]), p.by_n(g.new[0])
            g.status = classify(o, n, g.evidence)
            if replay and g.status == MappingStatus.MODIFIED:
                replay_into(git, o, n, g.evidence)
    return order(p.groups)


def _moved(o: Change, n: Change) -> dict[str, list[int]] | None:
    """Per file, how far each of its hunks moved (in hunk order), or None when every hunk sits
    at the same lines."""
    shifts: dict[str, list[int]] = {}
    moved = False
    for f in o.files:
        nf = n.file(f.path)
        for a, b in zip(f.hunks, nf.hunks if nf else ()):
            moved = moved or (a.old_start, a.new_start) != (b.old_start, b.new_start)
            shifts.setdefault(f.path, []).append(b.new_start - a.new_start)
    return shifts if moved else None


def _shift_evidence(shifts: dict[str, list[int]], evidence: dict[str, Any]) -> None:
    """``line_shift`` when every hunk moved by the same number of lines; else ``line_shifts``:
    per file, the distinct shifts of its hunks, so that no sentence states one number for
    hunks that moved by several."""
    distinct = {d for per in shifts.values() for d in per}
    if len(distinct) == 1:
        evidence["line_shift"] = distinct.pop()
    else:
        evidence["line_shifts"] = {path: list(dict.fromkeys(per)) for path, per in shifts.items()}


def classify(o: Change, n: Change, evidence: dict[str, Any]) -> MappingStatus:
    """identical / equivalent / modified for one old and one new patch. Same patch-id and the
    same +/- lines is identical, moved or not (patch-id ignores line numbers and whitespace;
    +/- lines that differ in whitespace are a different change: indentation is code)."""
    same_id = o.patch_id == n.patch_id and o.patch_id is not None
    evidence["patch_id_equal"] = same_id
    evidence["changed_lines_equal"] = o.exact == n.exact
    if same_id:
        evidence["patch_id"] = o.patch_id
        shifts = _moved(o, n)
        evidence["moved"] = shifts is not None
        if shifts is not None:
            _shift_evidence(shifts, evidence)
        if o.exact == n.exact:
            return MappingStatus.IDENTICAL
        evidence["whitespace_differs"] = True
    elif o.exact == n.exact:
        return MappingStatus.EQUIVALENT
    return MappingStatus.MODIFIED


def replay_into(git: Repo, o: Change, n: Change, evidence: dict[str, Any]) -> None:
    """The old patch replayed 3-way on the new one's parent: whether that gives the new commit's
    tree, another, or conflicts (and where), as evidence of a modified pair."""
    replay, conflicts = replay_tree(git, o, n.parent)
    evidence["replay"] = ("reproduces" if replay == n.info.tree
                          else "conflicts" if replay is None else "differs")
    if conflicts:
        evidence["replay_conflicts"] = conflicts


def replay_tree(git: Repo, o: Change, parent: str) -> tuple[str | None, list[dict[str, Any]]]:
    """The tree of ``o``'s diff merged (the conflict engine) on ``parent``, or None and the
    conflicts (each file with its kind and the old patch's hunks in its regions)."""
    with git.index() as index:
        index.read_tree(git.tree_of(parent))
        # straight to the files: the whole-patch tries first only save processes when the
        # patch merges as a whole, which an old patch on a new parent rarely does; file by file
        # ends with the same index when it does (each file exactly, else 3-way, as a whole
        # ``apply --3way`` decides it)
        merge = Engine(git).merge(index, o.patch, Labels("upstream", f"patch {o.id}"),
                                  tried=True)
        if merge.ok:
            return index.write_tree(), []
        return None, [{"path": c.path, "kind": c.kind.value,
                       "hunks": sorted({h for r in c.regions for h in r.hunks})}
                      for c in merge.conflicts]


def upstreamed(carried: CarriedLines | None, o: Change) -> dict[str, Any] | None:
    """Evidence that upstream already carries ``o``'s change, from the one engine that answers
    it (engine/carried.py: a same-patch-id commit, or at least its share of the telling lines
    carried by the new base *and* the upstream commit that brought them); None otherwise, and
    always None when the two sides share their base (``carried`` is None)."""
    if carried is None:
        return None
    answer = carried.patch(o.patch)
    if not answer.carried:
        return None
    assert answer.commit is not None
    telling_line = max((ln.decode("utf-8", errors="replace") for ln in answer.lines),
                       key=lambda x: (len(x), x), default="")
    return {"upstream_commit": answer.commit, "upstream_subject": answer.subject,
            "how": answer.how, "carried_share": round(answer.share, 3),
            "carried_lines": [answer.found, answer.total], "threshold": CARRIED_SHARE,
            "telling_line": telling_line}


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
