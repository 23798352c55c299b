"""Applying a diff to file contents in Python, the way ``git apply`` (without fuzz) does.

Deciding whether a patch applies is most of a bump's work: the attribution scan asks it at every
state of every touched file across a thousand upstream commits. Asking git costs two or three
processes each time; here it costs microseconds, and git is asked only where Python cannot answer
the way git would (renames, binaries, a file created where one exists): then ``Unsupported``.

Placement follows git's ``find_pos``: a hunk is tried where its ``+`` side says (earlier hunks
have already moved the lines), then one line further, one line back, two further, ... until the
whole preimage matches byte for byte; a hunk that starts at line 0 or 1 must match at the
beginning, one without trailing context at the end. Line ends are part of the bytes compared
(``\\ No newline at end of file`` included), as git compares them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..model.diffs import FileDiff, Hunk, Status
from ..model.lines import RENAMED, same_file


class Unsupported(Exception):
    """A change this module does not decide (git must)."""


def lines_of(data: bytes) -> list[bytes]:
    """A file as lines, each with its line end (the last may have none)."""
    if not data:
        return []
    out = data.split(b"\n")
    if out[-1] == b"":
        out.pop()
        return [ln + b"\n" for ln in out]
    return [ln + b"\n" for ln in out[:-1]] + [out[-1]]


def _sides(h: Hunk) -> tuple[list[bytes], list[bytes], int, int]:
    """(preimage lines, postimage lines, leading context, trailing context) with line ends."""
    pre: list[bytes] = []
    post: list[bytes] = []
    body = h.lines
    for i, ln in enumerate(body):
        tag = ln[:1]
        if tag == b"\\":
            continue
        end = b"" if i + 1 < len(body) and body[i + 1][:1] == b"\\" else b"\n"
        text = ln[1:] + end
        if tag in (b" ", b"-"):
            pre.append(text)
        if tag in (b" ", b"+"):
            post.append(text)
    tags = [ln[:1] for ln in body if ln[:1] != b"\\"]
    leading = next((i for i, t in enumerate(tags) if t != b" "), len(tags))
    trailing = next((i for i, t in enumerate(reversed(tags)) if t != b" "), len(tags))
    return pre, post, leading, trailing


def _matches(image: list[bytes], pre: list[bytes], at: int, end: bool) -> bool:
    """git compares the preimage's bytes with the file's (``memcmp`` of the preimage's length),
    so a last preimage line without its newline (``\\ No newline``) also matches that line
    with one, unless the hunk must match at the end."""
    m = len(pre)
    if image[at:at + m] == pre:
        return True
    if end or not pre or pre[-1].endswith(b"\n") or at + m > len(image):
        return False
    return image[at + m - 1] == pre[-1] + b"\n" and image[at:at + m - 1] == pre[:-1]


def find_pos(image: list[bytes], pre: list[bytes], line: int, *, begin: bool,
             end: bool, patched: Sequence[bool] = ()) -> int:
    """Where ``pre`` matches in ``image`` nearest to ``line`` (git's search order), or -1.
    Lines flagged in ``patched`` (written by an earlier hunk of the same file) never match:
    git's LINE_PATCHED rule, which refuses hunks that overlap once the code between them is
    gone."""
    n, m = len(image), len(pre)
    if m > n:
        return -1
    if begin:
        line = 0
    elif end:
        line = n - m
    line = min(line, n)
    back = fwd = tried = line
    i = 0
    while True:
        if _matches(image, pre, tried, end) and (not begin or tried == 0) and \
                (not end or tried + m == n) and not any(patched[tried:tried + m]):
            return tried
        while True:
            if back == 0 and fwd == n:
                return -1
            if i & 1:
                if back == 0:
                    i += 1
                    continue
                back -= 1
                tried = back
            else:
                if fwd == n:
                    i += 1
                    continue
                fwd += 1
                tried = fwd
            i += 1
            break


def apply_hunks(image: list[bytes], hunks: Sequence[Hunk]) -> list[bytes] | None:
    """``hunks`` applied in order; None when one of them does not match."""
    out = list(image)
    patched = [False] * len(out)
    for h in hunks:
        pre, post, _, trailing = _sides(h)
        begin = h.old_start == 0 or h.old_start == 1
        at = find_pos(out, pre, max(h.new_start - 1, 0), begin=begin, end=trailing == 0,
                      patched=patched)
        if at < 0:
            return None
        out[at:at + len(pre)] = post  # whole lines go (git's line table), newline included
        patched[at:at + len(pre)] = [True] * len(post)
    return out


def apply_file(data: bytes | None, f: FileDiff) -> bytes | None:
    """The file after ``f`` (None: deleted). Raises ``NotExact`` when it does not apply and
    ``Unsupported`` for what git must decide."""
    if f.binary or f.status in (Status.RENAMED, Status.COPIED) or not f.git and \
            f.old_path != f.new_path and None not in (f.old_path, f.new_path):
        raise Unsupported(f.path)
    if f.status is Status.ADDED or f.old_path is None:
        if data is not None:
            raise Unsupported(f.path)  # add/add: git's 3-way decides
        data = b""
    elif data is None:
        raise NotExact(f.path)  # the file is gone
    result = apply_hunks(lines_of(data), f.hunks)
    if result is None:
        raise NotExact(f.path)
    if f.new_path is None:
        if result:
            raise NotExact(f.path)  # a deletion that leaves lines
        return None
    return b"".join(result)


class NotExact(Exception):
    """The diff does not apply to this content (no fuzz, git's offsets tried)."""


Merge = Callable[[bytes, bytes, bytes], bytes | None]  # (ours, base, theirs) -> merged or None
Read = Callable[[str], bytes | None]  # a path's current content (None: absent)


def merge_file(read: Read, f: FileDiff, preimage: Callable[[], bytes | None],
               merge: Merge) -> bytes | None:
    """``git apply --3way`` of one file: exactly, else a 3-way merge of the current content with
    the patch's preimage and its result. Returns the new content (None: deleted); raises
    ``NotExact`` when it conflicts or cannot merge. The preimage is read only when the file does
    not apply exactly (most files of most patches do)."""
    current = read(f.old_path or f.path)
    try:
        return apply_file(current, f)
    except NotExact:
        if current is None or f.new_path is None:
            raise
    base = preimage()
    if base is None:
        raise NotExact(f.path)
    theirs = apply_file(base, f)
    merged = merge(current, base, theirs or b"")
    if merged is None:
        raise NotExact(f.path)
    return merged


def apply_patch(read: Read, files: Sequence[FileDiff], preimages: Read,
                merge: Merge) -> dict[str, bytes | None] | None:
    """A whole patch, all or nothing as ``git apply --3way`` is: path -> new content, or None
    when a file does not apply or conflicts. A file the patch moves (deletes, and creates under
    another path with mostly its lines) onto a changed file is merged at its new path, as
    ``git am -3``'s merge of the fake ancestor finds the rename."""
    try:
        out = moved_files(read, files, preimages, merge)
    except NotExact:
        return None
    for f in files:
        if f.path in out:
            continue

        def current(path: str) -> bytes | None:
            return out[path] if path in out else read(path)

        def preimage(blob: str | None = f.old_blob) -> bytes | None:
            return preimages(blob) if blob else None

        try:
            out[f.path] = merge_file(current, f, preimage, merge)
        except NotExact:
            return None
    return out


def moved_files(read: Read, files: Sequence[FileDiff], preimages: Read,
                merge: Merge) -> dict[str, bytes | None]:
    """For each file the patch deletes that does not delete exactly (upstream changed it) and
    that the patch creates again elsewhere (``moved_to``), the deletion and the new path's
    content: the current file merged with the move's change. Raises ``NotExact`` when that merge
    conflicts."""
    out: dict[str, bytes | None] = {}
    gone = [f for f in files if f.new_path is None and f.old_blob and not f.binary]
    made = {p: c for p, c in created_files(files).items() if read(p) is None} if gone else {}
    for f in gone:  # a created path upstream has too is an add/add: git's 3-way decides
        current = read(f.path)
        if current is None or _deletes(current, f):
            continue
        base = preimages(f.old_blob or "")
        path = moved_to(base, made) if base is not None else None
        if base is None or path is None:
            continue
        merged = merge(current, base, made.pop(path))
        if merged is None:
            raise NotExact(f.path)
        out[f.path], out[path] = None, merged
    return out


def created_files(files: Sequence[FileDiff]) -> dict[str, bytes]:
    """path -> content of each text file the patch creates."""
    out: dict[str, bytes] = {}
    for f in files:
        if f.old_path is None and f.new_path is not None and not f.binary:
            try:
                out[f.path] = apply_file(None, f) or b""
            except (NotExact, Unsupported):
                continue
    return out


def moved_to(base: bytes, created: Mapping[str, bytes]) -> str | None:
    """The created file most like ``base`` when it is ``base``'s file moved (``same_file`` at
    least ``RENAMED``), else None: one answer for the applier's merge of a move and the conflict
    engine's stop that names where a conflicting one went."""
    best = max(((same_file(base, content), path) for path, content in created.items()),
               default=None)
    return best[1] if best is not None and best[0] >= RENAMED else None


def _deletes(current: bytes, f: FileDiff) -> bool:
    try:
        return apply_file(current, f) is None
    except (NotExact, Unsupported):
        return False
