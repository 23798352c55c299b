"""The one view of a report that both renderers draw: what is said, in which order, what is
folded; never how it looks.

A document is a list of sections; a section holds paragraphs, bullet lists, tables, code and
folds. Text is a tuple of spans (plain, code, strong, a status, a link to a section, a commit).
``markdown.py`` and ``html.py`` only turn these into text, so the two formats hold the same
sections with the same words: the markdown leaves the folds out unless ``--verbose`` (they are
long: interdiffs, replay conflicts, evidence), the HTML folds them in ``<details>``.

The first screen decides: the verdict, then the mapping with one line per entry (status, review
yes/no, the reason in a few words, the upstream commits that forced it). Details follow.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import ids
from .evidence import Evidence
from .model import Entry, FileCompare, Finding, PatchInfo, Report

FILE_WORDS = {"identical": "identical", "moved": "same hunks, moved",
              "equivalent": "context moved (same +/- lines)",
              "modified": "modified", "old-only": "only in old", "new-only": "only in new"}
KIND_WORDS = {"redundant": "redundant", "stale-message": "stale message",
              "partial-revert": "partial revert", "lost-in-resolution": "lost in resolution",
              "removed-name-used": "upstream uses a name the patch removes"}
MAPPING = "mapping"


@dataclass(frozen=True)
class Span:
    """A piece of text: kind text | code | strong | status | link (``target`` an anchor) |
    commit (``target`` an upstream commit's full sha) | patch (a patch's commit, full sha in
    ``target``) | review (``target`` yes
    / no) | fork-text, upstream-text (a subject written in the fork or upstream: its ``#N`` are
    that repository's pull requests)."""

    text: str
    kind: str = "text"
    target: str = ""


Text = tuple[Span, ...]


@dataclass(frozen=True)
class Para:
    text: Text
    only: str = ""  # "markdown": advice about the command line, left out of the HTML page


@dataclass(frozen=True)
class Bullets:
    items: tuple[Text, ...]


@dataclass(frozen=True)
class Table:
    head: tuple[str, ...]
    rows: tuple[tuple[Text, ...], ...]
    name: str = ""  # what the table is (the HTML styles the mapping)


@dataclass(frozen=True)
class Code:
    text: str
    lang: str = ""  # "interdiff": a diff of two diffs (HTML shows it side by side)


@dataclass(frozen=True)
class Fold:
    """Detail a reader opens on demand: markdown shows it only with ``--verbose``."""

    summary: Text
    blocks: tuple[Block, ...]


Block = Para | Bullets | Table | Code | Fold


@dataclass(frozen=True)
class Section:
    anchor: str
    level: int
    title: Text
    blocks: tuple[Block, ...]
    back: bool = False  # ends with a way back to the mapping


@dataclass(frozen=True)
class Document:
    title: str
    sections: tuple[Section, ...]
    upstream_web: str = ""  # series.yaml's upstream.web: commit and PR links
    fork_web: str = ""  # series.yaml's fork.web: the patches' PR links


def t(text: str) -> Span:
    return Span(text)


def code(text: str) -> Span:
    return Span(text, "code")


def commit(sha: str) -> Span:
    """An upstream commit (the HTML links it to series.yaml's upstream.web)."""
    return Span(ids.prose(sha), "commit", sha)


def fork_text(text: str) -> Span:
    """A patch's subject: its ``#N`` are the fork's pull requests."""
    return Span(text, "fork-text")


def prose(text: str) -> Text:
    """A sentence of the model as spans: its `backticked` parts are code."""
    parts = re.split(r"`([^`]*)`", text)
    return tuple(Span(x, "code" if k % 2 else "text") for k, x in enumerate(parts) if x)


def _join(items: Sequence[Text], sep: str = ", ") -> Text:
    out: list[Span] = []
    for k, item in enumerate(items):
        if k:
            out.append(t(sep))
        out += item
    return tuple(out)


# -- the document ----------------------------------------------------------------------------------
def document(report: Report) -> Document:
    sections = [_head(report), _mapping(report), _entries_head()]
    sections += [_entry(report, k, e) for k, e in enumerate(report.mapping, start=1)]
    sections.append(_summary(report))
    return Document(f"Rebase report: {report.old.label or 'old'} → {report.new.label or 'new'}",
                    tuple(sections), report.links.upstream, report.links.fork)


def _verdict(report: Report) -> Text:
    """The decision in one line: how many entries to review, which, and what they are."""
    todo = report.to_review
    counts = Counter(report.mapping[k - 1].status for k in todo)
    rest = Counter(e.status for e in report.mapping if not e.review.needed)
    what = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    calm = ", ".join(f"{n} {s}" for s, n in sorted(rest.items()))
    if not todo:
        return (Span(f"Nothing to review: all {len(report.mapping)} entries carry the same "
                     "change or none", "strong"), t(f" ({calm})."))
    which = ", ".join(str(k) for k in todo)
    tail = f"; no review: {calm}" if calm else ""
    return (Span(f"Review {len(todo)} of {len(report.mapping)} entries", "strong"),
            t(f" ({which}): {what}{tail}."))


def _head(report: Report) -> Section:
    """The title (with the verdict), the two bases and the upstream range, and where the
    details are."""
    o, n, up = report.old, report.new, report.upstream
    sides = [(t(f"{word} "), commit(s.base), t(f" {s.base_date[:10]} + {len(s.patches)} "
                                                f"patches ({s.label or word})"))
             for word, s in (("old", o), ("new", n))]
    bases = sides[0] + (t(" → "),) + sides[1] + \
        (t(f"; upstream between: {up.commits} commits, {up.files_changed} files"),)
    tail = (t("Below: one section per entry; interdiffs, replay conflicts and evidence with "),
            code("--verbose"), t(" or in "), code("--format html"), t(", every fact in "),
            code("--format json"), t("."))
    todo = len(report.to_review)
    title = f"Rebase report: review {todo} of {len(report.mapping)} entries" if todo else \
        "Rebase report: nothing to review"
    return Section("top", 1, (t(title),),
                   (Para(_verdict(report)), Para(bases), Para(tail, only="markdown")))


def _who(e: Entry, report: Report) -> PatchInfo:
    return report.new.patches[e.new[0] - 1] if e.new else report.old.patches[e.old[0] - 1]


def _arrow(e: Entry) -> str:
    old = "+".join(map(str, e.old)) or "—"
    new = "+".join(map(str, e.new)) or "—"
    return f"{old} → {new}"


def _status(e: Entry) -> Text:
    flags = [f for f, on in (("moved", e.moved), ("renumbered", e.renumbered)) if on]
    return (Span(e.status, "status"),) + ((t(f" ({', '.join(flags)})"),) if flags else ())


def _forced(e: Entry, most: int = 2) -> Text:
    return _join([(commit(c),) for c in e.review.forced_by[:most]]) or (t("—"),)


def _mapping(report: Report) -> Section:
    """The first screen: one row per entry with status, review yes/no, why in a few words and
    the upstream commits that forced it; the rows to review first (each keeps its number)."""
    rows = []
    ranked = sorted(enumerate(report.mapping, start=1), key=lambda ke: not ke[1].review.needed)
    for k, e in ranked:
        rows.append(((Span(str(k), "link", f"e{k}"),), (fork_text(_who(e, report).subject),),
                     (t(_arrow(e)),), _status(e),
                     (Span("yes" if e.review.needed else "no", "review",
                           "yes" if e.review.needed else "no"),),
                     (t(e.review.summary),), _forced(e)))
    table = Table(("#", "patch", "old → new", "status", "review", "why", "forced by"),
                  tuple(rows), MAPPING)
    return Section(MAPPING, 2, (t("Mapping"),), (table,))


def _entries_head() -> Section:
    return Section("entries", 2, (t("Entries"),), ())


# -- one entry -------------------------------------------------------------------------------------
def _entry(report: Report, k: int, e: Entry) -> Section:
    """One entry's section: the rule that mapped it, its patches, the files that differ, its
    findings, the upstream commits, then the folded details."""
    title = (t(f"{k}. "), fork_text(_who(e, report).subject), t(" — "), Span(e.status, "status"))
    blocks: list[Block] = [Para(prose(e.details))]
    blocks += _patches(report, e)
    blocks += _files(e)
    blocks += _findings(e)
    blocks += _commits(e)
    blocks += _folds(e)
    return Section(f"e{k}", 3, title, tuple(blocks), back=True)


def _message(e: Entry) -> str:
    m = e.message
    parts = [w for w, on in (("subject", m.subject), ("body", m.body)) if on]
    parts += [f"+{x.split(':')[0]}" for x in m.trailers_added]
    parts += [f"-{x.split(':')[0]}" for x in m.trailers_removed]
    return "message changed: " + ", ".join(parts) if parts else ""


def _patch_line(side: str, p: PatchInfo) -> Text:
    added, removed = sum(f.added for f in p.files), sum(f.removed for f in p.files)
    size = f"{len(p.files)} file{'s' if len(p.files) != 1 else ''} +{added}/-{removed}" \
        if p.files else "no diff"
    return (t(f"{side} [{p.index}] "), Span(ids.prose(p.commit or ""), "patch", p.commit or ""),
            t(" "), fork_text(p.subject), t(f" ({p.date[:10]}; {size})"))


def _patches(report: Report, e: Entry) -> list[Block]:
    """The entry's patches (commit, subject, date, size), how the message changed, and the
    series.yaml intent."""
    items = [_patch_line("old", report.old.patches[i - 1]) for i in e.old]
    items += [_patch_line("new", report.new.patches[j - 1]) for j in e.new]
    if _message(e):
        items.append((t(_message(e)),))
    for j in e.new or e.old:
        p = (report.new.patches if e.new else report.old.patches)[j - 1]
        items += [(t(f"{word}: {text}"),) for word, text in (("why", p.why),
                                                              ("drop when", p.drop_when)) if text]
    return [Bullets(tuple(items))]


def _files(e: Entry) -> list[Block]:
    """Per file: +/- on each side, how the change compares, the commits that forced it (left
    out when every file is the same change)."""
    if not e.files or all(f.status in ("identical", "moved") for f in e.files):
        return []
    rows = tuple(((code(f.path),), (t(f"+{f.old_added}/-{f.old_removed}"),),
                  (t(f"+{f.new_added}/-{f.new_removed}"),),
                  (t(_file_change(f)),),
                  _join([(commit(c),) for c in f.commits[:3]]) or (t("—"),))
                 for f in e.files)
    return [Table(("file", "old", "new", "change", "forced by"), rows)]


def _file_change(f: FileCompare) -> str:
    """How one file's change compares, in words that do not read as a loss when nothing was
    lost: the same +/- lines in a moved context is "context moved", not "0 of 1 hunks kept"."""
    if f.status == "modified" and f.identical_hunks:
        return f"modified: {f.identical_hunks} of {f.hunks_old} hunks unchanged"
    return str(FILE_WORDS[f.status])


def _finding(f: Finding) -> Text:
    where = (t(" "), code(f.path)) if f.path else ()
    by = (t(" (upstream "), commit(f.commit), t(")")) if f.commit else ()
    side = f"{f.side} [{f.index}]"
    return (Span(KIND_WORDS.get(f.kind, f.kind), "strong"), t(f" ({side})")) + where + \
        (t(": "),) + prose(f.text) + by


def _findings(e: Entry) -> list[Block]:
    return [Bullets(tuple(_finding(f) for f in e.findings))] if e.findings else []


def _commits(e: Entry) -> list[Block]:
    """The upstream commits that forced the entry's difference, with the lines each forced."""
    if not e.upstream_commits:
        return []
    items = tuple((commit(c.commit), t(" "), Span(c.subject, "upstream-text"), t(" — "),
                   t(", ".join(p.rsplit("/", 1)[-1] for p in c.paths)),
                   t(f", {c.lines} line{'s' if c.lines != 1 else ''}"))
                  for c in e.upstream_commits)
    return [Para((t("Upstream commits that forced the difference:"),)), Bullets(items)]


def _folds(e: Entry) -> list[Block]:
    """The long details: interdiff hunks with their causes, replay conflicts, evidence."""
    out: list[Block] = []
    hunks: list[Block] = []
    for f in e.files:
        for h in f.hunks:
            by = _join([(commit(c),) for c in h.commits]) or (t("no upstream change"),)
            hunks.append(Para((code(f.path), t(f" {h.section} — forced by: ")) + by))
            hunks.append(Code(h.text, "interdiff"))
    if hunks:
        out.append(Fold((t(f"interdiff ({sum(len(f.hunks) for f in e.files)} hunks)"),),
                        tuple(hunks)))
    conflicts = e.evidence.replay_conflicts
    if conflicts:
        items = tuple((code(c.path), t(f" ({c.kind}): "),
                       t(", ".join(c.hunks) or "the file as a whole")) for c in conflicts)
        out.append(Fold((t("replay conflicts: the old patch on the new parent"),),
                        (Bullets(items),)))
    out.append(Fold((t("evidence"),), (Bullets(tuple(_evidence(e.evidence))),)))
    return out


def _evidence(ev: Evidence) -> list[Text]:
    """The evidence as key: value lines (nested values as compact JSON), not a dict dump."""
    out: list[Text] = []
    for key, value in ev.items():
        if key == "replay_conflicts":
            continue
        shown = value if isinstance(value, (str, int, float, bool)) or value is None else \
            json.dumps(value, ensure_ascii=False, sort_keys=True)
        out.append((t(f"{key}: "), code(str(shown))))
    return out


# -- summary ---------------------------------------------------------------------------------------
def _summary(report: Report) -> Section:
    """Counts by status, and the entries of each kind of finding."""
    statuses = Counter(e.status for e in report.mapping)
    rows = tuple(((Span(s, "status"),), (t(str(n)),),
                  (t(str(sum(len(e.old) for e in report.mapping if e.status == s))),),
                  (t(str(sum(len(e.new) for e in report.mapping if e.status == s))),))
                 for s, n in sorted(statuses.items()))
    blocks: list[Block] = [Table(("status", "entries", "old patches", "new patches"), rows)]
    kinds: dict[str, list[int]] = {}
    for k, e in enumerate(report.mapping, start=1):
        for f in e.findings:
            kinds.setdefault(f.kind, [])
            if k not in kinds[f.kind]:
                kinds[f.kind].append(k)
    if kinds:
        blocks.append(Table(("finding", "entries"), tuple(
            ((t(KIND_WORDS.get(kind, kind)),),
             _join([(Span(str(k), "link", f"e{k}"),) for k in ks]))
            for kind, ks in sorted(kinds.items()))))
    return Section("summary", 2, (t("Summary"),), tuple(blocks), back=True)
