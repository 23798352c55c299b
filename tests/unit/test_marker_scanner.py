"""The one conflict-marker scanner (engine/conflicts.marked_blocks) and what bump reads with it:
a huge region's README line names the work-tree lines where upstream's side and the patch's
side really differ (their shared first and last lines trimmed)."""

from __future__ import annotations

from rebasectl.commands.bump import HUGE, differing
from rebasectl.engine.conflicts import ConflictKind, FileConflict, Region, marked_blocks, sides


def marked(ours: list[bytes], base: list[bytes], theirs: list[bytes]) -> list[bytes]:
    return [b"before", b"<<<<<<< upstream 123", *ours, b"||||||| patch preimage", *base,
            b"=======", *theirs, b">>>>>>> patch p", b"after"]


def test_sections_of_each_block() -> None:
    lines = marked([b"u1", b"u2"], [b"b1"], [b"t1"]) + marked([b"x"], [], [b"y"])
    found = marked_blocks(lines)
    assert [(s, e) for s, e, _ in found] == [(2, 9), (12, 17)]
    assert found[0][2] == {"ours": [b"u1", b"u2"], "base": [b"b1"], "theirs": [b"t1"]}
    assert found[1][2] == {"ours": [b"x"], "base": [], "theirs": [b"y"]}


def test_a_huge_region_names_the_lines_the_patch_changed() -> None:
    """bump's README line for a huge region: the patch side's lines that differ from the
    preimage (what a person carries), found through ``sides``, which reads the same block."""
    same = [b"h%d" % k for k in range(HUGE)]
    base = [*same, b"old", b"tail"]
    theirs = [*same, b"NEW", b"tail"]
    lines = marked([b"upstream rewrote it all"], base, theirs)
    start, end = 2, len(lines) - 1
    text = b"\n".join(lines)
    region = Region(start, end, (1, 1), (1, len(base)))
    ours, pre, patch, at = sides(text, region)
    assert (ours, pre, patch) == ([b"upstream rewrote it all"], base, theirs)
    assert lines[at - 1] == theirs[0]  # the patch side's first line, 1-based
    changed = at + HUGE  # NEW
    c = FileConflict("a.py", ConflictKind.CONTENT, content=text)
    assert differing(c, region) == [(changed, changed)]
    assert differing(c, Region(start, start + HUGE, (1, 1), (1, 1))) == []


def test_a_second_separator_is_content() -> None:
    lines = [b"<<<<<<< u", b"a", b"||||||| p", b"b", b"=======", b"c", b"=======", b">>>>>>> q"]
    ((_, _, parts),) = marked_blocks(lines)
    assert parts == {"ours": [b"a"], "base": [b"b"], "theirs": [b"c", b"======="]}
