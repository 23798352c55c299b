"""Interdiffs with provenance: what differs between the old and the new change to each file of an
entry, and which upstream commits forced each difference.

An interdiff here is a diff of two diffs: each side's hunks (context, removed and added lines,
``@@`` lines naming the function) compared as text, so a line-number move alone is no difference.
Every line of a side remembers where it came from: a context or removed line is a line of the
patch's preimage, i.e. upstream's code (plus earlier patches). So each interdiff hunk can be asked
of the one attribution engine (``attribution.Culprits``): the old side's differing preimage lines
are followed from the old base by reverse blame (who changed or removed them), the new side's are
blamed forward at the new base (who wrote them). A hunk whose differing lines are only the
patches' own added lines has no upstream cause: someone chose to change the patch.

Several patches of one side touching a file (a merge or a split) are compared as their combined
change (one ``git diff`` from the first one's parent to the last one) when no other patch of that
side touches the file in between, else hunk by hunk.

All blame questions of a report are gathered first (``Jobs``) and asked in parallel by the caller
(git does the work; the range's lock keeps the one object reader single-threaded): they are most of
the report's time.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..engine.attribution import Culprits, worth_blaming
from ..git import Repo
from ..model.diffs import FileDiff, Hunk, parse
from ..model.ids import Oid
from .lineage import Change
from .model import FileCompare, InterHunk

CONTEXT = 2  # interdiff lines kept around a difference


@dataclass(frozen=True)
class _Line:
    """One line of one side's change to a file: its text with its tag, the line of the patch's
    preimage it is (context and removed lines), and which of the side's file diffs holds it."""

    text: str
    pre: int | None
    src: int
    section: str


@dataclass
class Jobs:
    """Blame questions: (direction, file diff) -> preimage lines; answered by ``run``."""

    files: list[tuple[str, FileDiff]] = field(default_factory=list)
    lines: list[set[int]] = field(default_factory=list)
    answers: list[dict[int, list[Oid]]] = field(default_factory=list)

    def ask(self, direction: str, f: FileDiff, line: int) -> int:
        """Register one line of a blame question; returns the question's key."""
        key = next((k for k, (d, g) in enumerate(self.files) if d == direction and g is f), None)
        if key is None:
            self.files.append((direction, f))
            self.lines.append(set())
            key = len(self.files) - 1
        self.lines[key].add(line)
        return key

    def tasks(self, finder: Culprits) -> list[Callable[[], dict[int, list[Oid]]]]:
        """One reverse or forward blame per question, to run on threads (``take`` the
        answers in the same order)."""
        for (direction, f), lines in zip(self.files, self.lines):  # one blame per file
            expect = finder.expect_needed if direction == "needed" else finder.expect_written
            expect(f, lines)

        def task(k: int) -> Callable[[], dict[int, list[Oid]]]:
            direction, f = self.files[k]
            ask = finder.needed_lines if direction == "needed" else finder.written_lines
            return lambda: ask(f, sorted(self.lines[k]))

        return [task(k) for k in range(len(self.files))]

    def take(self, answers: Sequence[dict[int, list[Oid]]]) -> None:
        self.answers = list(answers)

    def commits(self, asked: Sequence[tuple[int, int]]) -> Counter[Oid]:
        """Upstream commits over the asked (question, line) pairs, with how many lines each."""
        found: Counter[Oid] = Counter()
        for key, line in asked:
            for commit in self.answers[key].get(line, []) if self.answers else []:
                found[commit] += 1
        return found


@dataclass
class _HunkPlan:
    section: str
    text: str
    old_lines: int
    new_lines: int
    asked: list[tuple[int, int]]


@dataclass
class FilePlan:
    """One file of an entry before attribution: its comparison and its interdiff hunks with
    the blame questions that will name their causes."""

    compare: FileCompare
    hunks: list[_HunkPlan]

    def result(self, jobs: Jobs) -> tuple[FileCompare, Counter[Oid]]:
        """The file's comparison with each hunk's causes, and how many lines each commit forced."""
        hunks: list[InterHunk] = []
        total: Counter[Oid] = Counter()
        for h in self.hunks:
            found = jobs.commits(h.asked)
            total.update(found)
            hunks.append(InterHunk(h.section, h.text, h.old_lines, h.new_lines,
                                   tuple(sorted(found, key=lambda c: (-found[c], c)))))
        c = self.compare
        return (FileCompare(c.path, c.old_added, c.old_removed, c.new_added, c.new_removed,
                            c.status, c.identical_hunks, c.hunks_old, c.hunks_new,
                            c.interdiff, tuple(hunks),
                            tuple(sorted(total, key=lambda x: (-total[x], x)))), total)


def effective(git: Repo, mine: Sequence[Change], series: Sequence[Change],
              path: str) -> list[FileDiff]:
    """The diffs of ``path`` by the patches ``mine`` of one side: their combined change when no
    other patch of ``series`` touches the file between the first and the last, else each."""
    touching = [c for c in mine if c.file(path) is not None]
    if len(touching) <= 1:
        return [f for c in touching if (f := c.file(path)) is not None]
    first, last = touching[0], touching[-1]
    others = {c.index for c in series} - {c.index for c in touching}
    if any(first.index < c.index < last.index and c.file(path) for c in series
           if c.index in others):
        return [f for c in touching if (f := c.file(path)) is not None]
    combined = parse(git.diff(first.parent, last.sha, [path])).files
    return list(combined[:1])


def _side_lines(files: Sequence[FileDiff]) -> list[_Line]:
    """One side's hunks of a file as lines, each with its preimage line number when it is a
    context or removed line (upstream's code), so blame can be asked about it."""
    out: list[_Line] = []
    for k, f in enumerate(files):
        for h in f.hunks:
            out.append(_Line("@@ " + h.section if h.section else "@@", None, k, h.section))
            pre = h.old_start
            for raw in h.lines:
                t = raw.decode("utf-8", errors="replace")
                if t[:1] == "\\":
                    continue
                if t[:1] in (" ", "-"):
                    out.append(_Line(t, pre, k, h.section))
                    pre += 1
                else:
                    out.append(_Line(t, None, k, h.section))
    return out


def file_status(a: Sequence[Hunk], b: Sequence[Hunk]) -> str:
    """identical (same hunks at the same lines), moved (the same hunks at other lines),
    equivalent (the same +/- lines in another context), modified, or the side that lacks it."""
    if not a:
        return "new-only"
    if not b:
        return "old-only"
    if [h.lines for h in a] == [h.lines for h in b]:
        same_place = [(h.old_start, h.new_start) for h in a] == \
            [(h.old_start, h.new_start) for h in b]
        return "identical" if same_place else "moved"
    if sorted(x for h in a for x in h.changed) == sorted(x for h in b for x in h.changed):
        return "equivalent"
    return "modified"


def plan_file(path: str, old: Sequence[FileDiff], new: Sequence[FileDiff],
              jobs: Jobs | None) -> FilePlan:
    """The comparison of one file and, when the change differs, its interdiff hunks; with
    ``jobs``, the blame questions for each hunk are registered there."""
    a = [h for f in old for h in f.hunks]
    b = [h for f in new for h in f.hunks]
    status = file_status(a, b)
    bodies = [h.lines for h in b]
    same = 0
    for h in a:
        if h.lines in bodies:
            bodies.remove(h.lines)
            same += 1
    compare = FileCompare(path, sum(len(h.added) for h in a), sum(len(h.removed) for h in a),
                          sum(len(h.added) for h in b), sum(len(h.removed) for h in b), status,
                          same, len(a), len(b))
    if status == "identical" or [h.lines for h in a] == [h.lines for h in b]:
        return FilePlan(compare, [])
    hunks = _interdiff(_side_lines(old), _side_lines(new), old, new, jobs)
    text = "\n".join([f"--- old/{path}", f"+++ new/{path}"] + [h.text for h in hunks])
    compare = FileCompare(compare.path, compare.old_added, compare.old_removed,
                          compare.new_added, compare.new_removed, status, same, len(a), len(b),
                          text)
    return FilePlan(compare, hunks)


def _differing(group: list[tuple[str, int, int, int, int]], a: list[_Line],
               b: list[_Line]) -> tuple[list[_Line], list[_Line], list[_Line], list[_Line]]:
    """The old and new lines an interdiff hunk shows as differing, and those of them to ask
    blame about. Left out: context lines that one side shows only because its patch hunk
    reaches further (a one-sided run of context at the start or end of a patch hunk, in an
    interdiff hunk that also matches or replaces lines); upstream changed them, but nothing in
    the patch had to change for it."""
    gone: list[_Line] = []
    came: list[_Line] = []
    ask_gone: list[_Line] = []
    ask_came: list[_Line] = []
    paired = any(op[0] in ("equal", "replace") for op in group)
    for tag, i1, i2, j1, j2 in group:
        if tag == "equal":
            continue
        gone += a[i1:i2]
        came += b[j1:j2]
        ask_gone += _trim(a, i1, i2) if paired and tag == "delete" else a[i1:i2]
        ask_came += _trim(b, j1, j2) if paired and tag == "insert" else b[j1:j2]
    return gone, came, ask_gone, ask_came


def _telling(text: str) -> bool:
    """A differing line (its diff prefix first) that can name its author, as the attribution
    engine asks it of the lines it blames (``worth_blaming``: comment lines too, since blame
    finds who wrote a comment as well as code)."""
    return worth_blaming(text[1:].encode("utf-8", "surrogateescape"))


def _trim(seq: list[_Line], start: int, end: int) -> list[_Line]:
    """``seq[start:end]`` without the context lines that run from the start of a patch hunk
    (an ``@@`` line just before) or to its end (an ``@@`` line or the end just after)."""
    def hunk_edge(k: int) -> bool:
        return k < 0 or k >= len(seq) or seq[k].pre is None and seq[k].text.startswith("@@")

    lo, hi = start, end
    if hunk_edge(start - 1):
        while lo < hi and seq[lo].text[:1] == " ":
            lo += 1
    if hunk_edge(end):
        while hi > lo and seq[hi - 1].text[:1] == " ":
            hi -= 1
    return seq[lo:hi]


def _interdiff(a: list[_Line], b: list[_Line], old: Sequence[FileDiff],
               new: Sequence[FileDiff], jobs: Jobs | None) -> list[_HunkPlan]:
    """The interdiff hunks of two sides' lines, each with the blame questions for its differing
    upstream lines (registered in ``jobs`` when given)."""
    matcher = difflib.SequenceMatcher(None, [x.text for x in a], [x.text for x in b],
                                      autojunk=False)
    out: list[_HunkPlan] = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        body: list[str] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                body += [" " + x.text for x in a[i1:i2]]
            else:
                body += ["-" + x.text for x in a[i1:i2]] + ["+" + x.text for x in b[j1:j2]]
        gone, came, ask_gone, ask_came = _differing(group, a, b)
        section = next((x.section for x in gone + came if x.section), "")
        asked: list[tuple[int, int]] = []
        if jobs is not None:
            asked = [(jobs.ask("needed", old[x.src], x.pre), x.pre) for x in ask_gone
                     if x.pre is not None and _telling(x.text)] + \
                [(jobs.ask("written", new[x.src], x.pre), x.pre) for x in ask_came
                 if x.pre is not None and _telling(x.text)]
        head = f"@@ {section} @@" if section else "@@"
        out.append(_HunkPlan(section, "\n".join([head] + body), len(gone), len(came), asked))
    return out
