"""A huge region is shown trimmed to the patch's own change (the full text stays in the marked
file of the artifacts); a small one is shown whole."""

from __future__ import annotations

from rebasectl.commands.bump import HUGE, _trimmed, differing
from rebasectl.engine.conflicts import ConflictKind, FileConflict, find_regions


def _marked(upstream: list[str], base: list[str], patch: list[str]) -> bytes:
    lines = ["before", "<<<<<<< upstream 1234", *upstream, "||||||| patch preimage", *base,
             "=======", *patch, ">>>>>>> patch p", "after"]
    return ("\n".join(lines) + "\n").encode()


def test_huge_region_trimmed_to_the_patch_change() -> None:
    base = [f"arg_{n} = parse({n})" for n in range(60)]
    upstream = [f"option_{n} = parse({n})" for n in range(80)]  # upstream rewrote it all
    patch = list(base)
    patch[30] = "arg_30 = parse(30, strict=True)"  # the patch's 1-line change
    text = _marked(upstream, base, patch)
    (region,) = find_regions(text, [b"before", *(u.encode() for u in upstream), b"after"],
                             [b"before", *(b.encode() for b in base), b"after"], ())
    c = FileConflict("args.py", ConflictKind.CONTENT, (region,), text)
    assert region.end - region.start > HUGE
    line = text.split(b"\n").index(b"arg_30 = parse(30, strict=True)") + 1
    assert differing(c, region) == [(line, line)]
    assert _trimmed(c, region) == f" (the patch's change: work tree lines {line})"
    small = _marked(["x = 1"], ["x = 0"], ["x = 2"])
    (r2,) = find_regions(small, [b"before", b"x = 1", b"after"], [b"before", b"x = 0", b"after"],
                         ())
    assert differing(FileConflict("s.py", ConflictKind.CONTENT, (r2,), small), r2) == []
