"""Patch files: parse, check for safety, and write in the one canonical form.

A patch file is a ``git format-patch``-style mbox holding one commit: author, date, the full
message and a diff. We write it ourselves (not with format-patch) so that the bytes depend only on
the commit, never on the git version or the user's config, and so that re-exporting an unchanged
series changes no byte. The files stay ``git am``-compatible (``git am -k`` keeps subjects such as
``[1/8] fix: ...`` as written).

Reading accepts what ``git apply`` accepts after the mail header: git diffs and plain unified diffs
(``diff -u``, quilt), with CRLF inside content lines when the patched file has them. The diff is
parsed once into the diff model (``diffs.parse``) and checked there: anything that would write
outside the tree (``..``, absolute paths, ``.git/``, escaping or empty symlinks), odd modes and
binaries are refused with ``file:line``. Headers round-trip exactly: a subject or author that
holds literal ``=?...?=`` text is written encoded, so reading it back gives the same text.

This module knows nothing of git processes or the screen.
"""

from __future__ import annotations

import base64
import email.errors
import email.header
import email.utils
import posixpath
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from ..infra.errors import RebasectlError
from . import diffs
from .diffs import Diff, DiffError, FileDiff
from .status import Word

MBOX_FROM = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
# The reader's version, kept with what is cached of what it read (status's numbers): raised
# whenever it starts refusing bytes it once accepted, so that no cache outlives the change and
# a file now refused is refused by every command. 2: a '---' line with no diff after it.
READER_VERSION = 2
# How an empty commit's file ends, as ``git format-patch --always`` ends one: no ``---`` line
# (git am reads ``---`` with no diff after it as "No valid patches in input", the very shape of
# a file cut after its message), a signature instead: the mark that the message is whole. Ours
# names no git version, so the bytes stay the same whatever git is installed.
EMPTY_SIGNATURE = b"-- \nrebasectl\n"


class Mode(Word):
    """A file's git mode, as git writes it (tree entries, index lines, ``diff --git`` mode
    lines, fast-import): the one spelling of each."""

    REGULAR = "100644"
    EXECUTABLE = "100755"
    SYMLINK = "120000"


ALLOWED_MODES = frozenset(m.value for m in Mode)  # what a patch may write (no submodules, no trees)
SYMLINK = Mode.SYMLINK


class PatchError(RebasectlError):
    """A patch file is malformed or unsafe; the message names file and line."""


@dataclass(frozen=True)
class Patch:
    """One commit as a patch: who, when, why (message) and what (diff)."""

    author_name: str
    author_email: str
    date: str  # RFC 2822, e.g. "Sat, 14 Feb 2026 01:28:50 +0100"
    message: str  # subject line, blank line, body; ends with one newline
    diff: bytes  # the diff text as written (git or plain), b"" for an empty commit
    _parsed: list[Diff] = field(default_factory=list, compare=False, repr=False)

    @property
    def subject(self) -> str:
        """The first paragraph as one line, as git and the patch file's ``Subject:`` have it (a
        subject wrapped over two lines is one subject: its first line alone made export write a
        title that the next apply + export changed)."""
        return normalise_message(self.message).split("\n", 1)[0]

    @property
    def is_empty(self) -> bool:
        return not self.model.files

    @property
    def model(self) -> Diff:
        """The diff, parsed once (the raw bytes stay what git apply is given)."""
        if not self._parsed:
            self._parsed.append(diffs.parse(self.diff) if self.diff.strip() else Diff())
        return self._parsed[0]

    @property
    def files(self) -> tuple[FileDiff, ...]:
        return self.model.files

    def paths(self) -> list[str]:
        return self.model.paths()

    def render(self) -> bytes:
        return render(self)


# -- dates -----------------------------------------------------------------------------------------
RAW_DATE = r"-?\d+ [+-]\d{4}"  # the pattern (git/objects.py reads commit headers with it)
_RAW_DATE = re.compile(RAW_DATE)


class RawDate(str):
    """git's raw date, ``"<unix seconds> <+hhmm>"`` (commit headers, ``GIT_*_DATE``,
    fast-import): a ``str`` that proves its form when made (``ValueError`` otherwise), so it is
    written exactly as read and read through this module's one parse."""

    __slots__ = ()

    def __new__(cls, value: str) -> RawDate:
        if _RAW_DATE.fullmatch(value) is None:
            raise ValueError(f"not a raw git date: {value!r}")
        return super().__new__(cls, value)

    def datetime(self) -> datetime:
        return raw_datetime(self)

    def rfc2822(self) -> str:
        return raw_to_rfc2822(self)

    def iso(self) -> str:
        return raw_datetime(self).isoformat()


EPOCH = RawDate("0 +0000")  # what a commit header without a readable date is read as


def raw_datetime(raw: str) -> datetime:
    """git's raw date ``"1739492930 +0100"`` as an aware datetime in its own offset (the one
    parse of that format: mails and the report's ISO dates both start here)."""
    seconds, tz = raw.split()
    sign = 1 if tz[0] == "+" else -1
    offset = timedelta(hours=int(tz[1:3]), minutes=int(tz[3:5])) * sign
    return datetime.fromtimestamp(int(seconds), timezone(offset))


def raw_to_rfc2822(raw: str) -> str:
    """git's raw date ``"1739492930 +0100"`` to ``"Sat, 14 Feb 2026 01:28:50 +0100"``."""
    return email.utils.format_datetime(raw_datetime(raw))


def rfc2822_to_raw(date: str) -> RawDate:
    when = email.utils.parsedate_to_datetime(date)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    offset = when.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return RawDate(f"{int(when.timestamp())} {sign}{minutes // 60:02d}{minutes % 60:02d}")


# -- writing ---------------------------------------------------------------------------------------
def normalise_message(message: str) -> str:
    """The message as a patch file keeps it: first paragraph joined into one subject line,
    trailing whitespace of lines and surrounding blank lines removed, one final newline."""
    lines = [line.rstrip() for line in message.replace("\r\n", "\n").split("\n")]
    text = "\n".join(lines).strip("\n")
    head, _, body = text.partition("\n\n")
    subject = " ".join(part.strip() for part in head.split("\n") if part.strip())
    body = body.strip("\n")
    return f"{subject}\n\n{body}\n" if body else f"{subject}\n"


def render(patch: Patch) -> bytes:
    message = normalise_message(patch.message)
    subject, _, body = message.partition("\n")
    body = body.lstrip("\n")
    non_ascii = not (patch.author_name + message).isascii()
    header = [
        MBOX_FROM,
        f"From: {_format_address(patch.author_name, patch.author_email)}\n".encode(),
        f"Date: {patch.date}\n".encode(),
        f"Subject: {_format_subject(subject)}\n".encode(),
    ]
    if non_ascii:
        header.append(b"MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
                      b"Content-Transfer-Encoding: 8bit\n")
    out = b"".join(header) + b"\n"
    if body:
        out += body.encode("utf-8", errors="surrogateescape")
    if not patch.diff.strip():
        return out + EMPTY_SIGNATURE
    return out + b"---\n" + patch.diff


def _needs_encoding(text: str) -> bool:
    """Text a mail reader would change: non-ASCII, or an encoded-word lookalike (``=?...?=``)
    that decoding would turn into something else."""
    return not text.isascii() or "=?" in text


def _format_address(name: str, addr: str) -> str:
    if name and "=?" in name and name.isascii():
        return f"{_encode_words(name)} <{addr}>"
    if addr.isascii():
        return email.utils.formataddr((name, addr), charset="utf-8")
    # formataddr cannot encode a non-ASCII address; git writes it as it is (8bit)
    head = email.utils.formataddr((name, "x@x.invalid"), charset="utf-8")
    return head[: head.rindex("<")] + f"<{addr}>"


def _format_subject(subject: str) -> str:
    if not _needs_encoding(subject):
        return subject
    if subject.isascii() or len(subject.splitlines()) > 1:
        # Header() folds at what str.splitlines() takes for line ends (U+0085, U+2028, form
        # feed...) and leaves ASCII "=?" text raw: encode the words ourselves
        return _encode_words(subject)
    return email.header.Header(subject, "utf-8", maxlinelen=76).encode()


def _encode_words(text: str) -> str:
    words = [text[i: i + 16] for i in range(0, len(text), 16)]
    return "\n ".join(
        "=?utf-8?b?" + base64.b64encode(w.encode("utf-8", errors="surrogateescape")).decode() + "?="
        for w in words)


# -- reading ---------------------------------------------------------------------------------------
def parse(data: bytes, source: str) -> Patch:
    """Parse a patch file; any problem is a ``PatchError`` naming ``source:line``."""
    if not data.strip():
        raise PatchError(f"{source}:1: empty file, not a patch")
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise PatchError(f"{source}:{line}: NUL byte: binary data is not a patch")
    head, sep, rest = data.partition(b"\n\n")
    if b"\r" in head:
        raise PatchError(f"{source}:1: CRLF line endings in the mail header (converted by an "
                         "editor or autocrlf?); convert the file back to LF")
    if not sep:
        raise PatchError(f"{source}:1: no mail header (expected a git format-patch file)")
    headers = _parse_headers(_decode_head(head, source), source)
    name, addr = _parse_from(_decode_header(headers["from"]))
    if not addr:
        raise PatchError(f"{source}:1: 'From:' header has no email address")
    date = _checked_date(headers.get("date", ""), source)
    first = head.count(b"\n") + 3  # line number of ``rest``'s first line
    _one_message(rest, source, first)
    body, diff, model, at = split_body(rest, source, first)
    if model is not None:
        check_model(model, source, at)
    text = body.decode("utf-8", errors="surrogateescape")
    subject = _decode_header(headers["subject"]).strip()
    patch = Patch(name, addr, date, normalise_message(f"{subject}\n\n{text}"), diff)
    if model is not None:
        patch._parsed.append(model)
    return patch


# the line ``git mailsplit`` starts a message at ("From <sha> Mon Sep 17 00:00:00 2001" from
# format-patch, "From someone@host Sat Jan  3 01:05:34 1998" in any mbox)
_FROM_LINE = re.compile(
    rb"(?m)^From \S+ +[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}$")


def _one_message(rest: bytes, source: str, first: int) -> None:
    """A patch file holds one mail. Two (``git format-patch --stdout -2``) would read as one
    commit whose message holds the first change: apply said "applied" while that change was in
    no commit."""
    m = _FROM_LINE.search(rest)
    if m is not None:
        line = first + rest[: m.start()].count(b"\n")
        raise PatchError(f"{source}:{line}: a second mail message starts here; a patch file "
                         "holds one commit (split it with `git mailsplit`, one file per patch, "
                         "each with its own series.yaml entry)")


def _decode_head(head: bytes, source: str) -> str:
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = head[: exc.start].count(b"\n") + 1
        raise PatchError(f"{source}:{line}: mail header is not UTF-8") from None


def _checked_date(date: str, source: str) -> str:
    try:
        raw: str = rfc2822_to_raw(date)
    except (TypeError, ValueError, OverflowError, IndexError, OSError):
        raw = "-1"
    if raw.startswith("-"):
        raise PatchError(f"{source}:1: bad or missing 'Date:' header: {date!r}")
    return date


def _parse_headers(text: str, source: str) -> dict[str, str]:
    headers: dict[str, str] = {}
    last: str | None = None
    for i, line in enumerate(text.split("\n"), start=1):
        if i == 1 and line.startswith("From "):
            continue
        if line[:1] in (" ", "\t") and last is not None:
            headers[last] += " " + line.strip()
            continue
        key, colon, value = line.partition(":")
        if not colon or not key or " " in key:
            raise PatchError(f"{source}:{i}: not a mail header line: {line[:60]!r}")
        last = key.strip().lower()
        headers[last] = value.strip()
    for key in ("from", "subject"):
        if key not in headers:
            raise PatchError(f"{source}:1: missing '{key.capitalize()}:' header "
                             "(expected a git format-patch file)")
    return headers


def _parse_from(value: str) -> tuple[str, str]:
    """``Name <addr>`` as git writes it. Not email.utils.parseaddr alone: it cuts addresses that
    git accepts but RFC 5322 does not, such as ``github-actions[bot]@users.noreply.github.com``
    (-> ``github-actions``), which changed the author on every round trip."""
    m = re.match(r"^\s*(.*?)\s*<([^<>]*)>\s*$", value)
    if m is None:
        return email.utils.parseaddr(value)
    name = m.group(1)
    if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
        name = email.utils.unquote(name)
    return name, m.group(2).strip()


def _decode_header(value: str) -> str:
    try:
        return str(email.header.make_header(email.header.decode_header(value)))
    except (UnicodeDecodeError, LookupError, email.errors.HeaderParseError):
        return value


# Where the diff starts: the first ``diff --git`` line, or the first ``---``/``+++`` pair of a
# plain diff (what git apply takes for a file header). git mailinfo ends the message there too.
_DIFF_START = re.compile(rb"(?m)^(?:diff --git |--- [^\n]*\n\+\+\+ )")
# format-patch's separator: ``---`` and nothing but blanks (the diffstat follows it)
_SEPARATOR = re.compile(rb"(?m)^---[ \t]*$")
_HUNK_START = re.compile(rb"(?m)^@@ -\d")


def split_body(rest: bytes, source: str,
               first: int) -> tuple[bytes, bytes, Diff | None, int]:
    """Split what follows the mail header into message and diff, as ``git am`` does: the diff
    starts at the first ``diff --git`` line (or ``---``/``+++`` pair), and all of it must parse.
    A broken file section is an error naming its line, never message text: taking the first
    place from which the rest parsed made every file before a hand-broken hunk vanish (and the
    next export deleted them). The message ends at the last ``---`` line before the diff (what
    lies between is format-patch's diffstat); a message may hold ``---`` lines of its own,
    which git am would cut, and keeps them. Returns (message, diff bytes, parsed diff, the file
    line of the diff's first line)."""
    m = _DIFF_START.search(rest)
    head = rest[: m.start()] if m else rest
    stat = _after_separator(head)
    hunk = _HUNK_START.search(head, stat)
    if hunk is not None:
        line = first + head[: hunk.start()].count(b"\n")
        raise PatchError(f"{source}:{line}: hunk without a file header ('diff --git' or "
                         "'---'/'+++' lines; git apply: patch fragment without header)")
    if m is None:
        return _message_without_diff(rest, source, first), b"", None, first
    at = first + head.count(b"\n")  # the file line of the diff's first line
    diff = _unsigned(rest[m.start():])
    if not diff.endswith(b"\n"):  # a file cut mid-line would read as a shorter last line
        last = at + diff.count(b"\n")
        raise PatchError(f"{source}:{last}: the file ends in the middle of a "
                         "diff line (cut short?): restore it (git checkout -- FILE) or end the "
                         "line (git apply: corrupt patch)")
    try:
        model = diffs.parse(diff)
    except DiffError as exc:
        _refuse_quoted_diff(rest, m, source, at)
        said = " (git apply: corrupt patch)" if exc.message.startswith(_GIT_SAYS_CORRUPT) else ""
        raise PatchError(f"{source}:{at + exc.line - 1}: {exc.message}{said}") from None
    return _message_part(head), diff, model, at


# What git apply also refuses with "corrupt patch at line N"; other parse errors (text between
# two files, say) git apply passes over, so they are ours alone and say nothing of git.
_GIT_SAYS_CORRUPT = ("hunk longer than its @@ header says", "truncated hunk")


def _refuse_quoted_diff(rest: bytes, start: re.Match[bytes], source: str, at: int) -> None:
    """A diff that does not parse, followed by a ``---`` line and a diff that does: the
    message quotes a diff at the start of a line. Said so, with what to do, rather than as a
    broken diff (git apply reads both diffs, the quoted one as a change too; git am ends the
    message at the quote)."""
    for sep in reversed(list(_SEPARATOR.finditer(rest, start.end()))):
        real = _DIFF_START.search(rest, sep.end())
        if real is None:
            continue
        try:
            diffs.parse(_unsigned(rest[real.start():]))
        except DiffError:
            return
        text = rest[start.start():].split(b"\n", 1)[0].decode("utf-8", errors="replace")
        raise PatchError(f"{source}:{at}: the message quotes a diff at the start of a line "
                         f"({text[:60]!r}), which is read as the start of the patch's diff (git "
                         "am ends the message there too): indent the quoted diff's lines in "
                         "the message, then run this again")


def _last_separator(text: bytes) -> re.Match[bytes] | None:
    return max(_SEPARATOR.finditer(text), key=lambda m: m.start(), default=None)


def _after_separator(head: bytes) -> int:
    """Where the text after the message's last ``---`` line starts (0 without one)."""
    last = _last_separator(head)
    return last.end() if last is not None else 0


def _message_without_diff(rest: bytes, source: str, first: int) -> bytes:
    """An empty commit, told apart the way ``git am`` tells it: its message then a signature,
    with no ``---`` line (what ``git format-patch --always`` and our export write; git am stops
    at it with "Patch is empty", ``--allow-empty`` records it). A ``---`` line followed by no
    diff (or by a diffstat alone) is what git am refuses ("No valid patches in input") and what
    a file cut after its message looks like; no signature at all, a file cut in its message.
    Reading either as an empty commit dropped the patch's change without a word."""
    unsigned = _unsigned(rest)
    last = _last_separator(unsigned)
    if last is not None and _nothing_but_a_stat(unsigned[last.end():]):
        line = first + unsigned[: last.start()].count(b"\n")
        raise PatchError(f"{source}:{line}: '---' line with no diff after it: the file looks "
                         "cut short after its message (git am: No valid patches in input); an "
                         "empty commit has no '---' line, its message ends in a signature "
                         "('-- ' and one line, as git format-patch --always writes it; an "
                         "empty commit exported by rebasectl before December 2026 ends in "
                         "'---': replace that line by '-- ' and a line 'rebasectl')")
    if unsigned == rest:
        line = first + rest.rstrip(b"\n").count(b"\n") if rest.strip() else first - 1
        raise PatchError(f"{source}:{line}: no diff, and no signature after the message: the "
                         "file looks cut short (an empty commit is its message and a signature, "
                         "'-- ' and one line, as git format-patch --always writes it)")
    return unsigned


# a diffstat's summary line (format-patch writes it after ``---``, before the diff)
_STAT_SUMMARY = re.compile(rb"(?m)^ \d+ files? changed")


def _nothing_but_a_stat(text: bytes) -> bool:
    """What follows a ``---`` line is blank or a diffstat: the place of a diff that is not
    there (any other text is the message's own, after a rule line of its)."""
    return not text.strip() or _STAT_SUMMARY.search(text) is not None


def _unsigned(diff: bytes) -> bytes:
    """The text without format-patch's signature (``-- `` and a version line at the very end;
    at the very start too: an empty commit whose message is its subject alone)."""
    at = (b"\n" + diff).rfind(b"\n-- \n")
    if at < 0 or b"\n" in diff[at + 4:].rstrip(b"\n"):
        return diff
    return diff[:at]


def _message_part(body: bytes) -> bytes:
    """The message: what comes before the last ``---`` line (the separator)."""
    last = _last_separator(body)
    return body[: last.start()] if last is not None else body


def diff_start_in_message(message: str) -> tuple[int, str] | None:
    """The first line of ``message`` (1-based, with its text) that a patch file's reader, and
    git am, would take for the start of the diff: a commit whose message quotes a diff at the
    start of a line cannot be written as a patch file that reads back as that commit."""
    data = message.encode("utf-8", errors="surrogateescape")
    m = _DIFF_START.search(data)
    if m is None:
        return None
    line = data[: m.start()].count(b"\n") + 1
    return line, data[m.start():].split(b"\n", 1)[0].decode("utf-8", errors="surrogateescape")


# -- safety ----------------------------------------------------------------------------------------
def check_model(model: Diff, source: str, first: int) -> None:
    """Refuse what must never reach git apply: escaping paths, odd modes, binaries, symlinks
    out of the tree. Each refusal names the line that says it (``first``: the file line of the
    diff's first line)."""
    if model.trailer.strip():
        line = first + model.render().count(b"\n") - model.trailer.count(b"\n")
        raise PatchError(f"{source}:{line}: text after the last hunk is not part of a diff")
    for f in model.files:
        for path in dict.fromkeys([*(p for p in (f.old_path, f.new_path) if p), *f.names]):
            check_path(path, f"{source}:{first + _header_line(f, _names(path)) - 1}")
        for mode in (f.old_mode, f.new_mode):
            if mode is not None and mode not in ALLOWED_MODES:
                where = f"{source}:{first + _header_line(f, (mode,), ends=True) - 1}"
                raise PatchError(f"{where}: file mode {mode} refused (only 100644, 100755, "
                                 "120000)")
        if f.binary:
            line = _header_line(f, ("GIT binary patch", "Binary files"), starts=True)
            where = f"{source}:{first + line - 1}"
            raise PatchError(f"{where}: binary patch refused ({f.path}); rebasectl carries "
                             "text only")
        if f.new_mode == SYMLINK and f.new_path is not None:
            _check_link_hunks(f, source, first)
        if f.git and f.hunks and not _names_both_sides(f):
            raise PatchError(f"{source}:{first + f.line - 1}: {f.path}: hunks without the '--- '"
                             " and '+++ ' lines of their file header (git apply: git diff header "
                             "lacks filename information)")
        if _changes_nothing(f):
            raise PatchError(f"{source}:{first + f.line - 1}: {f.path}: a file header with no "
                             "change after it (no hunk, mode change or rename; cut short? git "
                             "apply: patch with only garbage)")


def _names_both_sides(f: FileDiff) -> bool:
    """git apply's rule for a git file header with hunks: its ``---`` and ``+++`` lines both
    there or both gone (the name is then the ``diff --git`` line's), one alone only where the
    other side is /dev/null (a new or deleted file) or a rename names it."""
    heads = f.header.split(b"\n")
    minus = any(h.startswith(b"--- ") for h in heads)
    plus = any(h.startswith(b"+++ ") for h in heads)
    status = diffs.Status
    return minus == plus or f.status in (status.RENAMED, status.COPIED) or \
        (f.status is status.ADDED if plus else f.status is status.DELETED)


def _changes_nothing(f: FileDiff) -> bool:
    """A file section whose hunks are gone: git apply refuses it, and reading it as no change
    would drop that file's change without a word."""
    return (not f.hunks and not f.binary and f.status is diffs.Status.MODIFIED
            and f.old_mode == f.new_mode and f.old_path == f.new_path)


def _names(path: str) -> tuple[str, ...]:
    return (path, diffs.quote_path(path))


def _header_line(f: FileDiff, needles: tuple[str, ...], *, ends: bool = False,
                 starts: bool = False) -> int:
    """The diff line of ``f``'s header that holds one of ``needles`` (its first line when no
    line does, e.g. a path that is only there C-quoted)."""
    for k, raw in enumerate(f.header.split(b"\n")):
        text = raw.decode("utf-8", errors="surrogateescape")
        hit = any(text.endswith(n) if ends else text.startswith(n) if starts else n in text
                  for n in needles)
        if hit and not text.startswith("index ") or hit and ends:
            return f.line + k
    return f.line


def _check_link_hunks(f: FileDiff, source: str, first: int) -> None:
    assert f.new_path is not None
    if not any(h.added for h in f.hunks):
        raise PatchError(f"{source}:{first + f.line - 1}: symlink {f.new_path} with an empty "
                         "target refused")
    for h in f.hunks:
        for k, ln in enumerate(h.lines):
            if ln[:1] == b"+":
                check_symlink(f.new_path, ln[1:].decode("utf-8", errors="surrogateescape"),
                              f"{source}:{first + h.line + k}")


def check_path(path: str, where: str) -> None:
    """Refuse paths that would leave the tree or write into git's own files."""
    if not path or "\0" in path:
        raise PatchError(f"{where}: empty path")
    if path.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", path):
        raise PatchError(f"{where}: absolute path refused: {path!r}")
    parts = re.split(r"[\\/]", path)
    if ".." in parts:
        raise PatchError(f"{where}: path with '..' refused: {path!r}")
    if any(p.lower() in (".git", "git~1") for p in parts):
        raise PatchError(f"{where}: path into .git refused: {path!r}")
    if len(path.encode("utf-8", errors="surrogateescape")) > 4096 or \
            any(len(p.encode("utf-8", errors="surrogateescape")) > 255 for p in parts):
        raise PatchError(f"{where}: path too long for a file system: {path[:60]!r}...")


def check_symlink(link: str, target: str, where: str) -> None:
    if not target:
        raise PatchError(f"{where}: symlink {link} with an empty target refused")
    if target.startswith("/"):
        raise PatchError(f"{where}: symlink {link} -> {target!r} points outside the tree")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if resolved == ".." or resolved.startswith("../") or ".git" in resolved.split("/"):
        raise PatchError(f"{where}: symlink {link} -> {target!r} points outside the tree")
