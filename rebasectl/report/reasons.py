"""The words of the report, written from the evidence: an entry's ``details`` (which rule decided
its mapping, with the numbers it saw) and its review decision (whether to look, why in a few
words, which upstream commit forced it).

Nothing here decides a mapping: ``lineage`` did, and left its rule and numbers in the evidence.
The thresholds quoted come from ``lineage`` itself, so a sentence cannot state a rule the code
does not apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model.ids import prose
from ..model.lines import CONTAIN
from ..model.status import MappingStatus
from .evidence import Evidence, RuleMatch
from .lineage import PAIR_SIMILARITY, STRONG
from .model import FileCompare, Finding, Review, UpstreamCommit

# review reasons: the codes (the rules' names) go in the JSON, the words on the first screen
REASONS = {"same-change": "same change", "moved": "moved",
           "context": "same change, the code around it moved",
           "changed": "the change differs", "same-lines": "same lines, regrouped",
           "dropped": "left out, and upstream does not have it", "upstreamed": "upstream has it",
           "new": "new patch", "empty": "empty commit",
           "redundant": "adds a line the file already has",
           "lost-in-resolution": "lines of the old patch are missing",
           "stale-message": "the message mentions code the patch does not touch",
           "partial-revert": "puts back lines upstream removed",
           "removed-name-used": "removes a name upstream code still uses"}
_LINEAGE = {"series_id": "same series id `{}`", "absorbs": "series.yaml absorbs `{}`",
            "author_date": "same author and date ({})", "pr_tag": "same PR tag {}",
            "subject": "same subject"}
_STRONG_WORDS = {"series_id": "series id", "absorbs": "absorbs:",
                 "author_date": "author and author date", "pr_tag": "PR tag"}
_NEEDS_LINEAGE = ", ".join(_STRONG_WORDS[k] for k in STRONG)


def lineage_words(lin: dict[str, Any]) -> str:
    return ", ".join(_LINEAGE[k].format(", ".join(v) if isinstance(v, list) else v)
                     for k, v in lin.items() if k in _LINEAGE) or "no lineage"


def rule_words(ev: RuleMatch) -> str:
    """How one pairing or fold rule matched, with its numbers."""
    rule = ev.rule
    if rule == "similarity":
        return f"similarity {ev.similarity} ≥ {PAIR_SIMILARITY}"
    if rule == "containment":
        return f"containment: {ev.contained:.0%} ≥ {CONTAIN:.0%} of its lines are there"
    if rule in ("lineage", "absorbs"):
        return f"{rule}: {lineage_words(ev.lineage)}"
    if rule == "citation":
        return f"citation: the subject names {', '.join(ev.cited)}"
    return str(rule)


def _unpaired(ev: Evidence, other: str) -> str:
    """Why no rule took an unpaired patch: the numbers each rule saw at its nearest candidate
    and what the rule needs (the thresholds of ``lineage`` itself)."""
    near = ev.nearest
    if near is None:
        return f"No {other} patch shares a file or a changed line with it."
    k = near.index
    parts = [f"similarity {near.similarity} (pairing needs {PAIR_SIMILARITY} and a shared "
             "file or two lines, or lineage)",
             f"{near.contained:.0%} of its lines there (folding needs {CONTAIN:.0%})",
             f"{lineage_words(near.lineage)} (folding by lineage needs one of: "
             f"{_NEEDS_LINEAGE})"]
    taken = ""
    if near.pair_rule and near.taken_by:
        mine = "old" if other == "new" else "new"
        taken = (f" {other.capitalize()} {k} would pair by {near.pair_rule} but is taken by "
                 f"{mine} {', '.join(map(str, near.taken_by))}.")
    return f"No rule pairs it. Nearest {other} patch {k}: " + "; ".join(parts) + "." + taken


def _merged(status: MappingStatus, ev: Evidence, old: Sequence[int],
            new: Sequence[int]) -> str:
    """Which patch of the entry was paired and by which rule, and by which rule each other one
    joined it."""
    key = "folded" if status == MappingStatus.MERGED else "split_off"
    word = "old" if status == MappingStatus.MERGED else "new"
    folded = ev.folded(key)
    many = old if status == MappingStatus.MERGED else new
    main = [k for k in many if str(k) not in folded]
    head = f"Old {', '.join(map(str, old))} became new {', '.join(map(str, new))}"
    parts = [f"{word} {', '.join(map(str, main))} paired by {rule_words(ev)}"]
    parts += [f"{word} {k} joined by {rule_words(v)}" for k, v in folded.items()]
    same = ("together the same +/- lines" if ev.changed_lines_equal
            else "together the change differs")
    return f"{head}: " + "; ".join(parts) + f"; {same}."


def describe(status: MappingStatus, ev: Evidence, old: Sequence[int],
             new: Sequence[int]) -> str:
    """The entry's sentence: what the mapping is and which rule decided it."""
    if status == MappingStatus.IDENTICAL:
        shift = ev.shift_words(files=True)
        moved = f"; {shift}" if shift else ""
        return f"Same patch-id and the same +/- lines{moved}."
    if status == MappingStatus.EMPTY:
        return "No diff against its parent (an empty commit, e.g. a marker)."
    if status in (MappingStatus.DROPPED, MappingStatus.NEW):
        other = "new" if status == MappingStatus.DROPPED else "old"
        head = ("Not in the new series, and upstream does not carry it. "
                if status == MappingStatus.DROPPED else "")
        return head + _unpaired(ev, other)
    if status == MappingStatus.UPSTREAMED:
        return _upstreamed(ev)
    if status in (MappingStatus.MERGED, MappingStatus.SPLIT):
        return _merged(status, ev, old, new)
    return _pair(status, ev)


def _upstreamed(ev: Evidence) -> str:
    """Which upstream commit carries the patch, and how much of it the new base holds."""
    who = f"Upstream {prose(ev.upstream_commit)} \"{ev.upstream_subject}\""
    if ev.how == "patch-id":
        return f"{who} is the same change (same patch-id)."
    found, total = ev.carried_lines
    line = f"; e.g. `{ev.telling_line}`" if ev.telling_line else ""
    return (f"{who} made this change: the new base carries {found} of its {total} telling "
            f"lines (needs {ev.threshold:.0%}){line}.")


def _pair(status: MappingStatus, ev: Evidence) -> str:
    """A 1:1 entry: the rule that paired it and what the replay of the old patch gave."""
    head = ("The same +/- lines in another context" if status == MappingStatus.EQUIVALENT
            else "The change differs")
    parts = [f"{head} (paired by {rule_words(ev)})."]
    if ev.whitespace_differs:
        parts.append("Same patch-id, but +/- lines differ in whitespace.")
    replay = {"reproduces": "gives the new commit's tree",
              "conflicts": f"conflicts in {len(ev.replay_conflicts)} file(s)",
              "differs": "gives another tree than the new commit's"}.get(ev.replay)
    if replay:
        parts.append(f"The old patch replayed 3-way on the new parent {replay}.")
    return " ".join(parts)


# -- the review decision ---------------------------------------------------------------------------
def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _differs(files: Sequence[FileCompare]) -> str:
    """"a.py by 6e2153b9e, b.py" for the files whose change differs, each with the commit that
    forced most of its difference."""
    out = []
    for f in files:
        if f.status in ("identical", "moved", "equivalent"):
            continue
        by = f" by {f.commits[0].prose()}" if f.commits else ""
        out.append(f"{_base(f.path)}{by}")
    return ", ".join(out)


def _codes(status: MappingStatus, ev: Evidence, moved: bool) -> list[str]:
    """The review reason codes of a status (before findings add theirs)."""
    if status == MappingStatus.IDENTICAL:
        return ["same-change"] + (["moved"] if moved else [])
    if status == MappingStatus.EQUIVALENT:
        return ["context"]
    if status in (MappingStatus.MERGED, MappingStatus.SPLIT):
        return ["same-lines" if ev.changed_lines_equal else "changed"]
    return ["changed"] if status == MappingStatus.MODIFIED else [str(status)]


def review(status: MappingStatus, ev: Evidence, files: Sequence[FileCompare],
           found: Sequence[Finding], commits: Sequence[UpstreamCommit], moved: bool) -> Review:
    """Whether to look at the entry, the reasons (codes), a few words, and the commits that
    forced its difference, most lines first."""
    codes = _codes(status, ev, moved) + list(dict.fromkeys(f.kind for f in found))
    # a finding the old side states as well held before this bump: said, not a reason to look
    needed = any(not f.standing for f in found) or bool({"changed", "dropped", "new"} & set(codes))
    words = [REASONS[codes[0]]]
    if codes[0] == "changed" and _differs(files):
        words = [f"the change differs: {_differs(files)}"]
    if "moved" in codes and ev.line_shift:
        words.append(f"moved {ev.line_shift:+d} lines")
    elif "moved" in codes and ev.shift_words(files=False):
        words.append(ev.shift_words(files=False))
    if status in (MappingStatus.MERGED, MappingStatus.SPLIT):
        merged = status == MappingStatus.MERGED
        many = (len(ev.by_patch) or len(ev.folded("folded" if merged else "split_off")) + 1)
        words.insert(0, f"{many} patches into one" if merged else f"split in {many}")
    if status == MappingStatus.UPSTREAMED and ev.upstream_commit:
        words = [f"upstream {prose(ev.upstream_commit)} has it"]
    words += [REASONS[f.kind] + (" (as before)" if f.standing else "")
              for f in _first_of_kind(found)]
    ranked = sorted(commits, key=lambda c: -c.lines)
    return Review(needed, tuple(codes), "; ".join(words), tuple(c.commit for c in ranked))


def _first_of_kind(found: Sequence[Finding]) -> list[Finding]:
    seen: dict[str, Finding] = {}
    for f in sorted(found, key=lambda x: x.standing):  # a new one first: it is the reason
        seen.setdefault(f.kind, f)
    return list(seen.values())
