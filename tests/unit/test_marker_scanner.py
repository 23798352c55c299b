"""The one conflict-marker scanner (engine/conflicts.marked_blocks) and what bump reads with it:
a huge region's README line names the work-tree lines where upstream's side and the patch's
side really differ (their shared first and last lines trimmed)."""

from __future__ import annotations

from rebasectl.commands.bump import HUGE, differing
from rebasectl.engine.conflicts import ConflictKind, FileConflict, Region, marked_blocks


def marked(ours: list[bytes], base: list[bytes], theirs: list[bytes]) -> list[bytes]:
    return [b"before", b"<<<<<<< upstream 123", *ours, b"||||||| patch preimage", *base,
            b"=======", *theirs, b">>>>>>> patch p", b"after"]


def test_sections_of_each_block() -> None:
    lines = marked([b"u1", b"u2"], [b"b1"], [b"t1"]) + marked([b"x"], [], [b"y"])
    found = marked_blocks(lines)
    assert [(s, e) for s, e, _ in found] == [(2, 9), (12, 17)]
    assert found[0][2] == {"ours": [b"u1", b"u2"], "base": [b"b1"], "theirs": [b"t1"]}
    assert found[1][2] == {"ours": [b"x"], "base": [], "theirs": [b"y"]}


def test_a_huge_region_names_the_lines_that_differ() -> None:
    same_head = [b"h%d" % k for k in range(HUGE)]
    ours = [*same_head, b"UPSTREAM", b"tail"]
    theirs = [*same_head, b"PATCH", b"tail"]
    lines = marked(ours, [b"base"], theirs)
    start, end = 2, len(lines) - 1
    c = FileConflict("a.py", ConflictKind.CONTENT, content=b"\n".join(lines))
    region = Region(start, end, (1, len(ours)), (1, 1))
    # the upstream side starts on the line after the <<<<<<< line; only UPSTREAM differs
    assert differing(c, region) == (start + 1 + HUGE, start + 1 + HUGE)
    small = Region(start, start + HUGE, (1, 2), (1, 1))
    assert differing(c, small) is None
