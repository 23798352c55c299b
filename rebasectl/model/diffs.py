"""The diff model: one parser for the diffs rebasectl reads, and the line arithmetic on them.

Every part of rebasectl that looks inside a diff (patch files, lineage and the report, the conflict
engine, attribution) goes through ``parse``: a ``Diff`` of ``FileDiff``s of ``Hunk``s, parsed once.
It reads what ``git apply`` reads: git's extended headers (C-quoted paths with non-ASCII bytes,
spaces, tabs or newlines; renames and copies with similarity; mode changes; binary markers; the
trailing tab git writes after a ``---``/``+++`` name holding a space) and plain unified diffs
(``diff -u``, quilt's ``Index:`` preamble, hand-written ``---``/``+++`` pairs, taken with one
leading path component stripped, as ``git apply -p1`` does). The raw bytes of each file's
header and of each hunk are kept, so ``Diff.render()`` gives back the input byte for byte and a
filtered diff (some files, some hunks) is still a diff git applies.

Why not unidiff: it keeps git's quoting in paths (``"a/\\303\\244.py"``), leaves a trailing tab on
paths with a space, cannot parse a path holding `` b/``, and has no rename/copy/mode model. It stays
in the test suite as an oracle for the diffs it does parse (tests/unit/test_diffs.py).

Line numbers are 1-based everywhere. ``LineMap`` maps line numbers between two versions of a text
(through their common lines) and ``spans`` turns line numbers into closed ranges; attribution, the
report and the conflict engine share them.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import accumulate

from .matching import matching_blocks

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_QUOTE = {v: k for k, v in _ESCAPES.items() if k not in "av"} | {7: "a", 11: "v"}
_NEXT = re.compile(rb"^(?:@@|diff --git )", re.M)  # where a hunk of a git diff ends at the latest
_TAGS = {t: frozenset(t[i:i + 1] for i in range(len(t))) for t in (b" -", b" +", b"+", b"-")}


class DiffError(ValueError):
    """Not a diff git would apply; ``line`` is the 1-based line of the diff text at fault."""

    def __init__(self, line: int, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.message = message + (f" ({detail})" if detail else "")
        self.what, self.detail = message, detail


class Status(str, Enum):
    ADDED = "added"
    DELETED = "deleted"
    MODIFIED = "modified"
    RENAMED = "renamed"
    COPIED = "copied"


# -- paths -----------------------------------------------------------------------------------------
def unquote_path(text: str) -> str:
    """A name as git writes it: C-quoted (``"a/\\303\\244 b"``) when it holds special bytes, else
    as is. Bytes that are not UTF-8 survive as surrogates (``surrogateescape``)."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    body, out, i = text[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", errors="surrogateescape")
            i += 1
        elif body[i + 1: i + 2] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        elif re.match(r"[0-7]{3}", body[i + 1: i + 4]):
            out.append(int(body[i + 1: i + 4], 8) & 0xFF)
            i += 4
        else:
            out += b"\\"
            i += 1
    return out.decode("utf-8", errors="surrogateescape")


def quote_path(path: str) -> str:
    """A name the way git writes it in a diff header (``core.quotePath`` on)."""
    raw = path.encode("utf-8", errors="surrogateescape")
    if all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in raw):
        return path
    out = []
    for b in raw:
        if b in _QUOTE:
            out.append("\\" + _QUOTE[b])
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def _strip_prefix(name: str, prefix: str) -> str:
    return name[len(prefix):] if name.startswith(prefix) else name


def _header_names(rest: str) -> tuple[str, str] | None:
    """The two names of ``diff --git <rest>``: quoted or not; when unquoted and equal (no rename)
    they are found even if the name holds `` b/`` (git's own rule: both halves are the same)."""
    if rest.startswith('"'):
        end = _quoted_end(rest)
        first, tail = rest[:end], rest[end:].lstrip(" ")
        second = tail
        return unquote_path(first), unquote_path(second)
    if rest.endswith('"'):
        start = rest.rfind(' "')
        return rest[:start], unquote_path(rest[start + 1:])
    if rest.startswith("a/") and (len(rest) - 1) % 2 == 0:
        half = (len(rest) - 1) // 2
        first, second = rest[:half], rest[half + 1:]
        if rest[half] == " " and second.startswith("b/") and first[2:] == second[2:]:
            return first, second
    at = rest.find(" b/")
    return (rest[:at], rest[at + 1:]) if at > 0 else None


def _quoted_end(text: str) -> int:
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def _name_line(value: str) -> str:
    """A ``---``/``+++``/``rename from`` name: git adds a tab after names holding a space, and
    plain diffs add a tab and a timestamp."""
    value = value.rstrip("\n")
    if value.startswith('"'):
        return unquote_path(value[:_quoted_end(value)])
    return value.split("\t", 1)[0]


# -- the model -------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Hunk:
    """One ``@@`` hunk: its header numbers, and its text as a view onto the diff's bytes (no
    object per line is kept: a 500-patch series stays about the size of its files). ``lines``
    are the body lines, each with its tag (`` ``, ``+``, ``-`` or ``\\`` for "No newline at
    end of file"), without the line end."""

    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str  # what follows the second @@ (the enclosing function, as git guessed it)
    source: bytes = field(repr=False, compare=False)  # the whole diff text
    start: int = 0  # byte offsets of this hunk (header included) in ``source``
    end: int = 0
    line: int = 0  # 1-based line of the @@ header in the diff text
    counted: tuple[int, int] | None = None  # (added, removed), when the parser counted them

    @property
    def raw(self) -> bytes:
        """The hunk as written, header included."""
        return self.source[self.start:self.end]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hunk) and self.raw == other.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    @property
    def lines(self) -> tuple[bytes, ...]:
        body = self.raw.split(b"\n")[1:]
        if body and body[-1] == b"":
            body.pop()
        return tuple(ln or b" " for ln in body)  # an empty context line: a stripped space

    @property
    def header(self) -> str:
        return self.source[self.start:self.source.find(b"\n", self.start)].decode(
            "utf-8", errors="replace")

    def _body(self, tags: bytes) -> list[bytes]:
        wanted = _TAGS[tags]
        return [ln[1:] for ln in self.lines if ln[:1] in wanted]

    @property
    def counts(self) -> tuple[int, int]:
        """(added, removed) lines, counted without building them."""
        if self.counted is not None:
            return self.counted
        plus = minus = 0
        for ln in self.lines:
            tag = ln[:1]
            if tag == b"+":
                plus += 1
            elif tag == b"-":
                minus += 1
        return plus, minus

    @property
    def preimage(self) -> list[bytes]:
        """The lines the hunk needs: context and removed lines, in order."""
        return self._body(b" -")

    @property
    def added(self) -> list[bytes]:
        return self._body(b"+")

    @property
    def removed(self) -> list[bytes]:
        return self._body(b"-")

    @property
    def changed(self) -> list[bytes]:
        """The +/- lines with their tag (what the change is, without its context)."""
        return [ln for ln in self.lines if ln[:1] in (b"+", b"-")]

    @property
    def old_span(self) -> tuple[int, int]:
        """Lines of the old file the hunk covers (an empty hunk: the line it sits after)."""
        start = self.old_start if self.old_len else self.old_start + 1
        return start, max(start, start + self.old_len - 1)


@dataclass(frozen=True)
class FileDiff:
    """One file's change. Paths are as git means them: no ``a/``/``b/`` prefix, unquoted."""

    old_path: str | None  # None: the file is created
    new_path: str | None  # None: the file is deleted
    status: Status
    header: bytes  # every line before the first hunk, as written
    hunks: tuple[Hunk, ...] = ()
    old_mode: str | None = None
    new_mode: str | None = None
    old_blob: str | None = None  # from the ``index`` line (None without one)
    new_blob: str | None = None
    similarity: int | None = None
    binary: bool = False
    git: bool = True  # a ``diff --git`` header (else a plain unified diff)
    line: int = 1  # 1-based line of the header's first line in the diff text
    names: tuple[str, ...] = ()  # every path any header line names (what safety checks see)

    @property
    def path(self) -> str:
        """The path the change leaves (the old one for a deletion)."""
        return self.new_path or self.old_path or ""

    @property
    def added(self) -> int:
        return sum(h.counts[0] for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.counts[1] for h in self.hunks)

    def render(self, hunks: Sequence[Hunk] | None = None) -> bytes:
        """This file's diff as written, or with only ``hunks`` (a diff git still applies: each
        hunk keeps its own numbers, and git apply finds the lines by content and offset)."""
        return self.header + b"".join(h.raw for h in (self.hunks if hunks is None else hunks))


@dataclass(frozen=True)
class Diff:
    files: tuple[FileDiff, ...] = ()
    preamble: bytes = b""  # text before the first file (quilt's Index: lines, say)
    trailer: bytes = b""  # text after the last hunk that starts no file

    @property
    def empty(self) -> bool:
        return not self.files

    def paths(self) -> list[str]:
        """Every path the diff touches (old and new names of renames), in order, once."""
        out: dict[str, None] = {}
        for f in self.files:
            for p in (f.old_path, f.new_path):
                if p is not None:
                    out[p] = None
        return list(out)

    def file(self, path: str) -> FileDiff | None:
        return next((f for f in self.files if path in (f.new_path, f.old_path)), None)

    def render(self) -> bytes:
        return self.preamble + b"".join(f.render() for f in self.files) + self.trailer

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files)

    @property
    def removed(self) -> int:
        return sum(f.removed for f in self.files)


# -- parsing ---------------------------------------------------------------------------------------
def parse(data: bytes) -> Diff:
    """Parse a diff (git's format or a plain unified diff); ``DiffError`` names the line."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    ends = list(map((1).__add__, map(len, lines)))  # each line and its newline (C speed)
    if data and not data.endswith(b"\n"):
        ends[-1] -= 1
    return _Parser(data, lines, ends).run()


class _Parser:
    """Walks the lines once: files (git or plain headers), then their hunks, each hunk's body
    counted against its ``@@`` numbers (so a removed line ``-- x`` is never taken for a header,
    and a hunk cut short or running long is caught at its line)."""

    def __init__(self, data: bytes, lines: list[bytes], ends: list[int]) -> None:
        self.data, self.lines = data, lines
        self.offsets = list(accumulate(ends, initial=0))
        self.i = 0
        self.counted: tuple[int, int] | None = None

    def raw(self, start: int, stop: int) -> bytes:
        return self.data[self.offsets[start]:self.offsets[stop]]

    def text(self, i: int) -> str:
        return self.lines[i].decode("utf-8", errors="surrogateescape")

    def run(self) -> Diff:
        first = self._first_file()
        files: list[FileDiff] = []
        self.i = first
        while self.i < len(self.lines):
            f = self._file()
            if f is None:
                break
            files.append(f)
        return Diff(tuple(files), self.raw(0, first), self.raw(self.i, len(self.lines)))

    def _plain_start(self, i: int) -> bool:
        return self.lines[i].startswith(b"--- ") and i + 1 < len(self.lines) and \
            self.lines[i + 1].startswith(b"+++ ")

    def _first_file(self) -> int:
        for i, ln in enumerate(self.lines):
            if ln.startswith(b"diff --git ") or self._plain_start(i):
                return i
        return len(self.lines)

    def _file(self) -> FileDiff | None:
        start = self.i
        meta = _Meta()
        is_git = self.lines[start].startswith(b"diff --git ")
        if is_git:
            self._git_header(meta)
        elif not self._plain_header(meta):
            return None  # trailing text with no further file: kept as the diff's trailer
        header_end = self.i
        try:
            hunks = self._hunks()
        except DiffError as exc:
            name = _strip_prefix(meta.plus or meta.minus or "", "b/") if meta.plus != \
                "/dev/null" else _strip_prefix(meta.minus or "", "a/")
            name = name or (meta.names[1] if meta.names else "")
            raise DiffError(exc.line, f"{exc.what} in {name}", exc.detail) from None
        if not is_git and not hunks:
            raise DiffError(start + 1, "plain diff file header without a hunk")
        return meta.build(self.raw(start, header_end), tuple(hunks), is_git, start + 1)

    def _git_header(self, meta: _Meta) -> None:
        names = _header_names(self.text(self.i)[len("diff --git "):])
        if names is None:
            raise DiffError(self.i + 1, "malformed 'diff --git' line")
        meta.names = (_strip_prefix(names[0], "a/"), _strip_prefix(names[1], "b/"))
        self.i += 1
        while self.i < len(self.lines):
            ln = self.lines[self.i]
            if ln.startswith((b"@@", b"diff --git ")):
                return
            text = self.text(self.i)
            if text.startswith("--- "):
                meta.minus = _name_line(text[4:])
            elif text.startswith("+++ "):
                meta.plus = _name_line(text[4:])
            elif text.startswith(("GIT binary patch", "Binary files ")):
                meta.binary = True
                if text.startswith("GIT binary patch"):
                    while self.i + 1 < len(self.lines) and \
                            not self.lines[self.i + 1].startswith(b"diff --git "):
                        self.i += 1
            else:
                meta.extended(text, self.i + 1)
            self.i += 1

    def _plain_header(self, meta: _Meta) -> bool:
        """Lines up to a ``---``/``+++`` pair (``Index:``, ``====``, ``diff -u`` lines, ``Only
        in`` chatter); False when none follows (the rest is a trailer)."""
        i = self.i
        while i < len(self.lines) and not self._plain_start(i):
            if self.lines[i].startswith(b"diff --git ") or \
                    self.lines[i].startswith(b"@@") and i > 0:
                raise DiffError(i + 1, "text between two files is not part of a diff: "
                                f"{self.text(self.i)[:60]!r}")
            i += 1
        if i >= len(self.lines):
            return False
        meta.minus = _name_line(self.text(i)[4:])
        meta.plus = _name_line(self.text(i + 1)[4:])
        self.i = i + 2
        return True

    def _fast_body(self, start: int, old_len: int, new_len: int) -> bool:
        begin = self.offsets[start + 1] if start + 1 < len(self.offsets) else len(self.data)
        m = _NEXT.search(self.data, begin)
        stop = bisect_left(self.offsets, m.start()) if m else len(self.lines)
        if stop <= start or self.offsets[stop] != (m.start() if m else self.offsets[-1]):
            return False
        block = b"\n" + self.data[begin:self.offsets[stop]]
        plus, minus, marks = block.count(b"\n+"), block.count(b"\n-"), block.count(b"\n\\")
        total = stop - start - 1
        context = total - plus - minus - marks
        if context + minus != old_len or context + plus != new_len or \
                block.count(b"\n\n") or total == 0 and (old_len or new_len):
            return False
        self.i = stop
        self.counted = (plus, minus)
        return True

    def _hunks(self) -> list[Hunk]:
        hunks: list[Hunk] = []
        while self.i < len(self.lines) and self.lines[self.i].startswith(b"@@"):
            hunks.append(self._hunk())
        return hunks

    def _hunk(self) -> Hunk:
        start = self.i
        m = _HUNK.match(self.lines[start])
        if m is None:
            raise DiffError(start + 1, f"malformed hunk header: {self.text(start)[:60]!r}")
        old_len = int(m.group(2)) if m.group(2) is not None else 1
        new_len = int(m.group(4)) if m.group(4) is not None else 1
        self.counted = None
        self._body(start, old_len, new_len)
        section = m.group(5).decode("utf-8", errors="replace")
        return Hunk(int(m.group(1)), old_len, int(m.group(3)), new_len, section, self.data,
                    self.offsets[start], self.offsets[self.i], start + 1, self.counted)

    def _body(self, start: int, old_left: int, new_left: int) -> None:
        """The hunk's lines. Most hunks end where the next ``@@`` or ``diff --git`` line starts
        and their tags add up to the header's numbers: that is checked on the bytes (C speed);
        any other hunk is walked line by line, which also says what is wrong with it."""
        if self._fast_body(start, old_left, new_left):
            return
        self.i = start + 1
        while self.i < len(self.lines) and (old_left > 0 or new_left > 0 or
                                            self.lines[self.i][:1] == b"\\"):
            ln = self.lines[self.i]
            tag = ln[:1]
            if tag in (b" ", b""):
                old_left, new_left = old_left - 1, new_left - 1
                ln = ln or b" "  # an empty context line (an editor stripped the space)
            elif tag == b"-":
                old_left -= 1
            elif tag == b"+":
                new_left -= 1
            elif tag != b"\\":
                break
            if old_left < 0 or new_left < 0:
                raise DiffError(start + 1, "hunk longer than its @@ header says")
            self.i += 1
        if old_left > 0 or new_left > 0:
            raise DiffError(start + 1, "truncated hunk",
                            f"{max(old_left, new_left)} line(s) missing")
        nxt = self.lines[self.i] if self.i < len(self.lines) else b""
        if nxt[:1] in (b" ", b"+", b"-") and not self._plain_start(self.i):
            raise DiffError(start + 1, "hunk longer than its @@ header says")


class _Meta:
    """What a file header says, gathered line by line."""

    def __init__(self) -> None:
        self.names: tuple[str, str] | None = None
        self.minus: str | None = None
        self.plus: str | None = None
        self.status = Status.MODIFIED
        self.old_mode: str | None = None
        self.new_mode: str | None = None
        self.old_blob: str | None = None
        self.new_blob: str | None = None
        self.similarity: int | None = None
        self.binary = False
        self.renamed: tuple[str | None, str | None] = (None, None)

    def extended(self, text: str, line: int) -> None:
        key, _, value = text.partition(" ")
        if text.startswith(("new file mode ", "deleted file mode ")):
            self.status = Status.ADDED if key == "new" else Status.DELETED
            mode = text.rsplit(" ", 1)[1]
            self.old_mode, self.new_mode = (None, mode) if key == "new" else (mode, None)
        elif text.startswith(("old mode ", "new mode ")):
            mode = text.rsplit(" ", 1)[1]
            if key == "old":
                self.old_mode = mode
            else:
                self.new_mode = mode
        elif text.startswith(("rename from ", "copy from ", "rename old ")):
            self.status = Status.COPIED if key == "copy" else Status.RENAMED
            self.renamed = (_name_line(text.split(" ", 2)[2]), self.renamed[1])
        elif text.startswith(("rename to ", "copy to ", "rename new ")):
            self.renamed = (self.renamed[0], _name_line(text.split(" ", 2)[2]))
        elif text.startswith(("similarity index ", "dissimilarity index ")):
            self.similarity = int(text.rsplit(" ", 1)[1].rstrip("%") or 0)
        elif key == "index":
            self._index(value, line)
        else:
            raise DiffError(line, f"not a diff header line: {text[:60]!r}")

    def _index(self, value: str, line: int) -> None:
        blobs, _, mode = value.partition(" ")
        old, sep, new = blobs.partition("..")
        if not sep:
            raise DiffError(line, f"malformed 'index' line: {value[:60]!r}")
        self.old_blob, self.new_blob = old, new
        if mode:
            self.old_mode = self.old_mode or mode
            self.new_mode = self.new_mode or mode

    def build(self, header: bytes, hunks: tuple[Hunk, ...], is_git: bool, line: int) -> FileDiff:
        old, new = self._paths(is_git)
        status = self.status
        if not is_git:
            status = Status.ADDED if old is None else Status.DELETED if new is None else status
        blobs = (None if self.old_blob is None or set(self.old_blob) == {"0"} else self.old_blob,
                 None if self.new_blob is None or set(self.new_blob) == {"0"} else self.new_blob)
        mentioned = [*(self.names or ()), *(n for n in (self.minus, self.plus) if n),
                     *(n for n in self.renamed if n)]
        names = tuple(dict.fromkeys(
            _strip_prefix(_strip_prefix(n, "a/"), "b/") if is_git else _strip_one(n)
            for n in mentioned if n != "/dev/null"))
        return FileDiff(old, new, status, header, hunks, self.old_mode, self.new_mode,
                        blobs[0], blobs[1], self.similarity, self.binary, is_git, line, names)

    def _paths(self, is_git: bool) -> tuple[str | None, str | None]:
        if not is_git:  # -p1: strip one leading component, as git apply does
            old = None if self.minus in (None, "/dev/null") else _strip_one(self.minus or "")
            new = None if self.plus in (None, "/dev/null") else _strip_one(self.plus or "")
            return old, new
        assert self.names is not None
        old, new = self.names
        if self.renamed != (None, None):
            old, new = self.renamed[0] or old, self.renamed[1] or new
        elif self.minus is not None or self.plus is not None:
            old = old if self.minus is None else _strip_prefix(self.minus, "a/")
            new = new if self.plus is None else _strip_prefix(self.plus, "b/")
        if self.status is Status.ADDED or self.minus == "/dev/null":
            return None, new
        if self.status is Status.DELETED or self.plus == "/dev/null":
            return old, None
        return old, new


def _strip_one(name: str) -> str:
    return name.split("/", 1)[1] if "/" in name else name


# -- line arithmetic -------------------------------------------------------------------------------
class LineMap:
    """Line numbers of ``old`` -> line numbers of ``new`` for the lines the two texts share (a
    longest-common-subsequence match, as difflib finds it: model/matching.py). Unshared lines map
    to nothing."""

    def __init__(self, old: Sequence[bytes], new: Sequence[bytes]) -> None:
        self.forward: dict[int, int] = {}
        if list(old) == list(new):
            self.forward = {i: i for i in range(1, len(old) + 1)}
        else:
            for a, b, size in matching_blocks(old, new):
                for k in range(size):
                    self.forward[a + k + 1] = b + k + 1
        self.backward = {v: k for k, v in self.forward.items()}

    def get(self, line: int) -> int | None:
        return self.forward.get(line)

    def span(self, start: int, end: int) -> tuple[int, int] | None:
        """The smallest span of ``new`` holding what ``old[start..end]`` kept."""
        hits = [self.forward[i] for i in range(start, end + 1) if i in self.forward]
        return (min(hits), max(hits)) if hits else None


def spans(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Line numbers as closed ranges: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    out: list[tuple[int, int]] = []
    for n in sorted(set(numbers)):
        if n <= 0:
            continue
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def merge_spans(items: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ranges joined."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(items):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def text_lines(data: bytes | None) -> list[bytes]:
    """A blob as lines without their ends (the last line need not end in a newline)."""
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines
