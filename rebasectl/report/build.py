"""Build the report model from two materialised series.

``lineage.pair`` decides which old patch became which new one; this module adds the facts the
report states around each entry, every one of them read from git or series.yaml: files and +/-
per side, identical hunks and the interdiff of the others, the upstream commits between the two
bases that changed the lines a patch sits on (blame on the new base, reverse blame from the old
one, side branches of merges included), and the mechanical checks (redundant added lines, stale
identifiers in a message, partial reverts of upstream removals).
"""

from __future__ import annotations

import difflib
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from .. import lineage
from ..attribution import Culprits
from ..attribution import UpstreamRange as Range
from ..conflicts import Region
from ..diffs import FileDiff, Hunk, LineMap, merge_spans
from ..git import Repo
from ..lineage import Change, Group, hunk_lines
from .model import (
    Entry,
    FileCompare,
    FileStat,
    Finding,
    PatchInfo,
    Report,
    Side,
    SideInfo,
    UpstreamCommit,
    UpstreamRange,
)

ATTRIBUTE = ("modified", "merged", "split")
MAX_FINDINGS = 8  # per kind and entry; the count of the rest is stated


def build_report(git: Repo, old: Side, new: Side, upstream_git: Repo | None = None) -> Report:
    """The report for ``old`` -> ``new``; ``upstream_git`` (default ``git``) holds both bases
    and the upstream history between them."""
    up = upstream_git or git
    old_changes = lineage.load_changes(git, "old", old.commits, old.series)
    new_changes = lineage.load_changes(git, "new", new.commits, new.series)
    groups = lineage.pair(git, old_changes, new_changes, old.base, new.base)
    related = old.base != new.base and up.history.is_ancestor(old.base, new.base)
    ctx = _Ctx(git, up, old.base, new.base, related, {c.index: c for c in old_changes},
               {c.index: c for c in new_changes})
    ctx.prefetch(old_changes + new_changes)
    entries = tuple(ctx.entry(g) for g in groups)
    upstream = UpstreamRange(up.history.count(f"{old.base}..{new.base}") if related else 0,
                             up.files_changed(old.base, new.base) if old.base != new.base else 0)
    return Report(_side_info(up, old, old_changes), _side_info(up, new, new_changes), upstream,
                  entries)


def iso_date(raw: str) -> str:
    seconds, tz = raw.split()
    sign = 1 if tz[0] == "+" else -1
    offset = timedelta(hours=int(tz[1:3]), minutes=int(tz[3:5])) * sign
    return datetime.fromtimestamp(int(seconds), timezone(offset)).isoformat()


def _side_info(up: Repo, side: Side, changes: list[Change]) -> SideInfo:
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


class _Ctx:
    def __init__(self, git: Repo, up: Repo, old_base: str, new_base: str, related: bool,
                 old: dict[int, Change], new: dict[int, Change]) -> None:
        self.git, self.up = git, up
        self.old_base, self.new_base, self.related = old_base, new_base, related
        self.old, self.new = old, new
        self._blob: dict[tuple[str, str], list[str] | None] = {}

    def prefetch(self, changes: list[Change]) -> None:
        """Nothing to do: blobs come from one persistent reader per repository."""

    def blob(self, rev: str, path: str) -> list[str] | None:
        key = (rev, path)
        if key not in self._blob:
            repo = self.up if rev in (self.old_base, self.new_base) else self.git
            data = repo.objects.blob(f"{rev}:{path}")
            self._blob[key] = None if data is None else \
                data.decode("utf-8", errors="replace").split("\n")
        return self._blob[key]

    # -- one entry ---------------------------------------------------------------------------
    def entry(self, g: Group) -> Entry:
        olds = [self.old[i] for i in g.old]
        news = [self.new[j] for j in g.new]
        renumbered = bool(g.old and g.new and min(g.old) != min(g.new))
        message_changed = bool(olds and news) and (
            sorted(_norm_msg(c.info.message) for c in olds)
            != sorted(_norm_msg(c.info.message) for c in news))
        files = compare_files(olds, news) if olds and news else ()
        commits: tuple[UpstreamCommit, ...] = ()
        if g.status in ATTRIBUTE and self.related:
            commits = self.attribute(olds, news)
        findings = self.findings(olds, news, g.status)
        return Entry(tuple(g.old), tuple(g.new), g.status, renumbered, message_changed,
                     dict(sorted(g.evidence.items())), details(g, olds, news, files), files,
                     commits, findings)

    # -- upstream attribution ----------------------------------------------------------------
    def attribute(self, olds: list[Change], news: list[Change]) -> tuple[UpstreamCommit, ...]:
        """The upstream commits that changed the lines the entry's patches sit on: the one
        attribution engine, on each hunk of the old patches (the lines they needed, followed
        from the old base) and of the new ones (upstream's lines they sit on now)."""
        rng = Range(self.up, self.old_base, self.new_base)
        finder = Culprits(rng)
        found: dict[str, set[str]] = {}
        for c in olds:
            for f in c.files:
                for h in f.hunks:
                    for sha in finder.for_region(f, Region(0, 0, None, h.old_span)):
                        found.setdefault(sha, set()).add(f.path)
        for c in news:
            for f in c.files:
                for span in self.ranges_in(c.parent, self.new_base, f):
                    for sha in finder.for_region(f, Region(0, 0, span, None)):
                        found.setdefault(sha, set()).add(f.path)
        if not found:
            return ()
        return tuple(UpstreamCommit(sha, rng.subject(sha), pr_number(rng.subject(sha)),
                                    tuple(sorted(found[sha]))) for sha in rng.order(found))

    def ranges_in(self, parent: str, base: str, f: FileDiff) -> list[tuple[int, int]]:
        """The lines of ``base``:path that ``f``'s hunks sit on (their pre-image), mapped from
        the patch's parent through the series' earlier patches when those changed the file."""
        there = self.blob(parent, f.path)
        here = self.blob(base, f.path)
        if there is None or here is None:
            return []
        spans = [h.old_span for h in f.hunks]
        if there != here:
            mapping = LineMap([x.encode() for x in there], [x.encode() for x in here])
            spans = [m for a, b in spans if (m := mapping.span(a, b)) is not None]
        n = len(here) - (1 if here and here[-1] == "" else 0)
        spans = [(max(1, a), min(b, n)) for a, b in spans if a <= n and b >= 1]
        return merge_spans(spans)

    # -- mechanical checks -------------------------------------------------------------------
    def findings(self, olds: list[Change], news: list[Change], status: str) -> tuple[Finding, ...]:
        out: list[Finding] = []
        for c in olds + news:
            out += stale_message(c)
        for c in news:
            out += self.redundant(c)
            if self.related:
                out += self.partial_revert(c)
        return tuple(out)

    def redundant(self, c: Change) -> list[Finding]:
        out: list[Finding] = []
        for f in c.files:
            base = self.blob(self.new_base, f.path)
            if not base:
                continue
            have = {x.strip() for x in base if len(x.strip()) >= 20}
            removed = {x[1:].strip() for h in f.hunks for x in hunk_lines(h) if x.startswith("-")}
            for h in f.hunks:
                for x in hunk_lines(h):
                    text = x[1:].strip()
                    if x.startswith("+") and text in have and text not in removed \
                            and _statement(text):
                        out.append(Finding("redundant", "new", c.index, f.path,
                                           f"added line already in the new base: {text}"))
        return _cap(out)

    def partial_revert(self, c: Change) -> list[Finding]:
        out: list[Finding] = []
        for f in c.files:
            before = self.blob(self.old_base, f.path)
            after = self.blob(self.new_base, f.path)
            if before is None:
                continue
            had = {x.strip() for x in before if len(x.strip()) >= 12}
            has = {x.strip() for x in (after or []) if x.strip()}
            candidates = sorted({x[1:].strip() for h in f.hunks for x in hunk_lines(h)
                                 if x.startswith("+") and x[1:].strip() in had
                                 and x[1:].strip() not in has})
            for text in candidates[:3]:
                shas = self.up.history.pickaxe(f"{self.old_base}..{self.new_base}", text,
                                               f.path)
                sha = shas[-1] if shas else None
                out.append(Finding("partial-revert", "new", c.index, f.path,
                                   f"re-adds a line upstream removed: {text}", sha))
            if len(candidates) > 3:
                out.append(Finding("partial-revert", "new", c.index, f.path,
                                   f"and {len(candidates) - 3} more such lines"))
        return out


def _statement(text: str) -> bool:
    """Whether a line stands alone: not a fragment of a longer expression such as an argument
    line (``cp_group=self.cp_group,``) or a call opener (``x, _ = roll_tensor(``), which a new
    call repeats from its neighbours without being redundant."""
    return not text.endswith((",", "(", "[", "{", "\\")) and not text.startswith((")", "]", "}"))


def _cap(items: list[Finding]) -> list[Finding]:
    if len(items) <= MAX_FINDINGS:
        return items
    rest = len(items) - MAX_FINDINGS
    last = items[MAX_FINDINGS - 1]
    return items[:MAX_FINDINGS] + [Finding(last.kind, last.side, last.index, None,
                                           f"and {rest} more")]


_IDENT = re.compile(r"`([^`\n]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\(\))?")


def message_identifiers(message: str) -> list[str]:
    """Names in a commit message that look like code: `quoted`, snake_case, camelCase, dotted,
    or called()."""
    names: list[str] = []
    for m in _IDENT.finditer(message):
        quoted, word, call = m.group(1), m.group(2), m.group(3)
        if quoted:
            name = quoted.strip().rstrip("()")
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
                names.append(name)
            continue
        if not word:
            continue
        if call or _codeish(word):
            names.append(word)
    seen: list[str] = []
    for n in names:
        if n not in seen and not re.fullmatch(r"[0-9a-f]{7,40}", n):
            seen.append(n)
    return seen


_CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+")
# a file name ends at a word boundary: "triton.heuristics" does not name a file "triton.h"
_FILE = re.compile(r"[\w/.-]+\.(?:py|md|txt|yaml|yml|sh|json|toml|cfg|cu|cpp|h)(?![\w-])")
# product and project names that are CamelCase but never identifiers in a diff
_NAMES = frozenset({"PyTorch", "HuggingFace", "TensorFlow", "DeepSpeed", "GitHub", "GitLab",
                    "JavaScript", "TypeScript", "FlashAttention", "TransformerEngine"})


def _codeish(word: str) -> bool:
    """snake_case, CamelCase / lowerCamel (not acronyms such as RoPE or MoE), or a dotted path
    of such names; not file names, versions or abbreviations such as e.g."""
    if _FILE.fullmatch(word) or word in _NAMES or re.fullmatch(r"[\d.]+|[a-z]\.[a-z]", word):
        return False
    parts = word.split(".")
    if len(parts) > 1:
        return all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p) for p in parts) and \
            any(_codeish(p) or p.islower() and len(p) > 1 for p in parts[1:]) and \
            any("_" in p.strip("_") or _CAMEL.fullmatch(p) for p in parts)
    return ("_" in word.strip("_") and re.search(r"[A-Za-z]", word) is not None) or \
        _CAMEL.fullmatch(word) is not None


def stale_message(c: Change) -> list[Finding]:
    if c.empty:
        return []
    text = c.diff.decode("utf-8", errors="replace")
    out = []
    names = {f.path.rsplit("/", 1)[-1] for f in c.files} | {f.path for f in c.files}
    for m in _FILE.finditer(c.info.message):
        mentioned = m.group(0).strip("./")
        if mentioned not in names and mentioned.rsplit("/", 1)[-1] not in names \
                and not any(p.endswith(mentioned) for p in names):
            out.append(Finding("stale-message", c.side, c.index, None,
                               f"message names file `{mentioned}`, which its diff does not "
                               "change"))
    for name in message_identifiers(c.info.message):
        parts = [p for p in name.split(".") if p]
        if not any(p in text for p in parts[-1:]):
            out.append(Finding("stale-message", c.side, c.index, None,
                               f"message names `{name}`, which its diff does not contain"))
    return _cap(out)


_NUMBERING = re.compile(r"^\[(?:PATCH\s*)?\d+/\d+\]\s*")


def _norm_msg(message: str) -> str:
    """A message as compared for ``message_changed``: trailing blanks and a leading series
    number such as ``[4/8]`` left out (renumbering is its own flag, not a message change)."""
    text = _NUMBERING.sub("", message.strip())
    return "\n".join(line.rstrip() for line in text.split("\n"))


# -- file comparison and interdiff -----------------------------------------------------------------
def _hunks_by_path(changes: list[Change]) -> dict[str, list[Hunk]]:
    out: dict[str, list[Hunk]] = {}
    for c in changes:
        for f in c.files:
            out.setdefault(f.path, []).extend(f.hunks)
    return out


def compare_files(olds: list[Change], news: list[Change]) -> tuple[FileCompare, ...]:
    oh, nh = _hunks_by_path(olds), _hunks_by_path(news)
    out = []
    for path in sorted(set(oh) | set(nh)):
        a, b = oh.get(path, []), nh.get(path, [])
        oa, orm = sum(len(h.added) for h in a), sum(len(h.removed) for h in a)
        na, nrm = sum(len(h.added) for h in b), sum(len(h.removed) for h in b)
        bodies = [h.lines for h in b]
        same = 0
        for h in a:
            if h.lines in bodies:
                bodies.remove(h.lines)
                same += 1
        if not a:
            status = "new-only"
        elif not b:
            status = "old-only"
        elif [h.lines for h in a] == [h.lines for h in b]:
            status = "identical" if [h.header for h in a] == [h.header for h in b] \
                else "equivalent"
        elif sorted(x for h in a for x in h.changed) == sorted(x for h in b for x in h.changed):
            status = "equivalent"
        else:
            status = "modified"
        inter = "" if status == "identical" else interdiff(a, b, path)
        out.append(FileCompare(path, oa, orm, na, nrm, status, same, len(a), len(b), inter))
    return tuple(out)


def _strip_numbers(hunks: list[Hunk]) -> list[str]:
    lines: list[str] = []
    for h in hunks:
        tail = h.header.split("@@", 2)[-1].strip()
        lines.append("@@" + (f" {tail}" if tail else ""))
        lines.extend(hunk_lines(h))
    return lines


def interdiff(a: list[Hunk], b: list[Hunk], path: str) -> str:
    """The diff between the old and the new diff of one file (hunk line numbers left out, so
    only what changed in the change shows)."""
    diff = difflib.unified_diff(_strip_numbers(a), _strip_numbers(b), f"old/{path}",
                                f"new/{path}", n=2, lineterm="")
    return "\n".join(diff)


# -- the sentence of an entry ----------------------------------------------------------------------
def details(g: Group, olds: list[Change], news: list[Change],
            files: tuple[FileCompare, ...]) -> str:
    ev: dict[str, Any] = g.evidence
    s = g.status
    if s == "identical":
        return "Same patch-id and the same hunks at the same lines: the change is the same."
    if s == "empty":
        return "No diff against its parent (an empty commit, e.g. a marker)."
    if s in ("dropped", "new"):
        other = "new" if s == "dropped" else "old"
        near = ev.get("nearest")
        head = ("Not carried to the new series, and its added lines are not all in the new base."
                if s == "dropped" else "Not derived from any old patch.")
        if not near:
            return f"{head} No {other} patch shares a file or a changed line with it."
        lin = "; ".join(near["lineage"]) or "none"
        return (f"{head} Closest {other} patch: {near[other + '_index']} (shares "
                f"{len(near['files_shared'])} file(s) and {near['shared_lines']} changed "
                f"line(s), similarity {near['similarity']}; lineage: {lin}). Pairing needs "
                f"similarity >= {lineage.PAIR_SIMILARITY}, lineage, or containment >= "
                f"{lineage.CONTAIN}.")
    if s == "upstreamed":
        sha = ev.get("upstream_commit")
        who = (f" Upstream commit {sha[:12]} \"{ev.get('upstream_subject', '')}\" brought "
               f"`{ev.get('telling_line', '')}`." if sha else "")
        return f"Every line it adds is already in the new base.{who}"
    parts = []
    if ev.get("patch_id_equal") and ev.get("line_shift"):
        parts.append(f"Same patch-id; hunks moved by {ev['line_shift']:+d} lines "
                     "(range-diff would call this unchanged).")
    elif ev.get("patch_id_equal") and ev.get("whitespace_differs"):
        parts.append("Same patch-id; the hunks differ only in whitespace.")
    elif ev.get("changed_lines_equal"):
        parts.append("Same added and removed lines; only the context differs.")
    elif ev.get("replay") == "reproduces the new commit":
        parts.append("The old patch replayed 3-way on the new parent gives exactly the new "
                     "commit's tree.")
    if s in ("merged", "split"):
        many, one = (olds, news) if s == "merged" else (news, olds)
        word = "old" if s == "merged" else "new"
        parts.append(f"{len(many)} {word} patches ({', '.join(str(c.index) for c in many)}) "
                     f"correspond to {'new' if s == 'merged' else 'old'} "
                     f"{', '.join(str(c.index) for c in one)}.")
    if files:
        counts: dict[str, int] = {}
        for f in files:
            counts[f.status] = counts.get(f.status, 0) + 1
        parts.append("Files: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ".")
    return " ".join(parts)
