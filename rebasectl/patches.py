"""Patch files: parse, check for safety, and write in the one canonical form.

A patch file is a ``git format-patch``-style mbox holding one commit: author, date, the full
message and a git diff. We write it ourselves (not with format-patch) so that the bytes depend only
on the commit, never on the git version or the user's config, and so that re-exporting an
unchanged series changes no byte. The files stay ``git am``-compatible (``git am -k`` keeps
subjects such as ``[1/8] fix: ...`` as written).

This module knows nothing of git processes or the screen: it turns bytes into a ``Patch`` and back,
and refuses, with the file and line, anything that is not a patch or that would write outside the
tree (``..``, absolute paths, ``.git/``, escaping symlinks, setuid or other odd modes, binaries).
"""

from __future__ import annotations

import base64
import email.header
import email.utils
import posixpath
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from unidiff.errors import UnidiffParseError
from unidiff.patch import PatchSet

from .errors import RebasectlError

MBOX_FROM = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
ALLOWED_MODES = {"100644", "100755", "120000"}


class PatchError(RebasectlError):
    """A patch file is malformed or unsafe; the message names file and line."""


@dataclass(frozen=True)
class FileChange:
    path: str
    added: int
    removed: int


@dataclass(frozen=True)
class Hunk:
    path: str
    header: str  # "@@ -a,b +c,d @@ ..."
    text: str  # the hunk including its header


@dataclass(frozen=True)
class Patch:
    """One commit as a patch: who, when, why (message) and what (diff)."""

    author_name: str
    author_email: str
    date: str  # RFC 2822, e.g. "Sat, 14 Feb 2026 01:28:50 +0100"
    message: str  # subject line, blank line, body; ends with one newline
    diff: bytes  # git diff text, b"" for an empty commit

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]

    @property
    def is_empty(self) -> bool:
        return not self.diff.strip()

    def files(self) -> list[FileChange]:
        return [FileChange(_path(f), f.added, f.removed) for f in _patchset(self.diff)]

    def hunks(self) -> list[Hunk]:
        """Every hunk as written in the patch (unidiff would re-render '+1' as '+1,1')."""
        out: list[Hunk] = []
        for path, file_diff in self.file_diffs().items():
            for raw in split_file_diff(file_diff)[1]:
                text = raw.decode("utf-8", errors="replace")
                out.append(Hunk(path, text.split("\n", 1)[0], text))
        return out

    def file_diffs(self) -> dict[str, bytes]:
        """The diff split per file (each a complete git diff of that one file)."""
        parts = re.split(rb"(?m)^(?=diff --git )", self.diff)
        result: dict[str, bytes] = {}
        for part in parts:
            if not part.startswith(b"diff --git "):
                continue
            path = _diff_git_paths(part.split(b"\n", 1)[0].decode(errors="replace"))[1]
            result[path] = part
        return result

    def render(self) -> bytes:
        return render(self)


def _path(pf: Any) -> str:
    """unidiff's path of a file, with git's C-quoting undone (non-ASCII names are quoted)."""
    path = str(pf.path)
    if path.startswith('"'):
        path = unquote_path(path)
        if path[:2] in ("a/", "b/"):
            path = path[2:]
    return path


def _patchset(diff: bytes) -> PatchSet:
    if not diff.strip():
        return PatchSet("")
    return PatchSet(diff.decode("utf-8", errors="surrogateescape"))


# -- dates -------------------------------------------------------------------------------------
def raw_to_rfc2822(raw: str) -> str:
    """git's raw date ``"1739492930 +0100"`` to ``"Sat, 14 Feb 2026 01:28:50 +0100"``."""
    seconds, tz = raw.split()
    sign = 1 if tz[0] == "+" else -1
    offset = timedelta(hours=int(tz[1:3]), minutes=int(tz[3:5])) * sign
    when = datetime.fromtimestamp(int(seconds), timezone(offset))
    return email.utils.format_datetime(when)


def rfc2822_to_raw(date: str) -> str:
    when = email.utils.parsedate_to_datetime(date)
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    offset = when.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"{int(when.timestamp())} {sign}{minutes // 60:02d}{minutes % 60:02d}"


# -- writing -----------------------------------------------------------------------------------
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
        header.append(
            b"MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\n"
            b"Content-Transfer-Encoding: 8bit\n"
        )
    out = b"".join(header) + b"\n"
    if body:
        out += body.encode("utf-8")
    out += b"---\n" + patch.diff
    return out


def _format_address(name: str, addr: str) -> str:
    if addr.isascii():
        return email.utils.formataddr((name, addr), charset="utf-8")
    # formataddr cannot encode a non-ASCII address; git writes it as it is (8bit)
    head = email.utils.formataddr((name, "x@x.invalid"), charset="utf-8")
    return head[: head.rindex("<")] + f"<{addr}>"


def _format_subject(subject: str) -> str:
    if subject.isascii():
        return subject
    if len(subject.splitlines()) <= 1:
        return email.header.Header(subject, "utf-8", maxlinelen=76).encode()
    # Header() folds at what str.splitlines() takes for line ends (U+0085, U+2028, form feed...),
    # which would not parse back to the same subject: encode the words ourselves
    words = [subject[i: i + 16] for i in range(0, len(subject), 16)]
    return "\n ".join(
        "=?utf-8?b?" + base64.b64encode(w.encode("utf-8", errors="surrogateescape")).decode() + "?="
        for w in words
    )


# -- reading -----------------------------------------------------------------------------------
def parse(data: bytes, source: str) -> Patch:
    """Parse a patch file; any problem is a ``PatchError`` naming ``source:line``."""
    if not data.strip():
        raise PatchError(f"{source}:1: empty file, not a patch")
    if b"\r\n" in data and data.count(b"\r\n") >= data.count(b"\n") // 2:
        raise PatchError(
            f"{source}:1: CRLF line endings (converted by an editor or autocrlf?); "
            "convert the file back to LF"
        )
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise PatchError(f"{source}:{line}: NUL byte: binary data is not a patch")
    head, sep, rest = data.partition(b"\n\n")
    if not sep:
        raise PatchError(f"{source}:1: no mail header (expected a git format-patch file)")
    try:
        head_text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = head[: exc.start].count(b"\n") + 1
        raise PatchError(f"{source}:{line}: mail header is not UTF-8") from None
    headers = _parse_headers(head_text, source)
    for key in ("from", "subject"):
        if key not in headers:
            raise PatchError(
                f"{source}:1: missing '{key.capitalize()}:' header "
                "(expected a git format-patch file)"
            )
    name, addr = _parse_from(_decode_header(headers["from"]))
    if not addr:
        raise PatchError(f"{source}:1: 'From:' header has no email address")
    date = headers.get("date", "")
    try:
        raw = rfc2822_to_raw(date)
    except (TypeError, ValueError, OverflowError, IndexError, OSError):
        raw = "-1"
    if raw.startswith("-"):
        raise PatchError(f"{source}:1: bad or missing 'Date:' header: {date!r}")
    subject = _decode_header(headers["subject"]).strip()
    body, diff = _split_body(rest)
    at = re.search(rb"(?m)^diff --git ", rest)
    diff_line = head.count(b"\n") + 3 + (rest[: at.start()].count(b"\n") if at else 0)
    if diff.strip():
        _check_diff(diff, source, diff_line)
    text = body.decode("utf-8", errors="replace")
    message = normalise_message(f"{subject}\n\n{text}")
    return Patch(name, addr, date, message, diff)


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


def _split_body(rest: bytes) -> tuple[bytes, bytes]:
    """Split what follows the header into message body and diff (at the '---' before the diff)."""
    match = re.search(rb"(?m)^diff --git ", rest)
    if match is None:
        body = rest
        diff = b""
    else:
        body, diff = rest[: match.start()], rest[match.start() :]
        diff = re.sub(rb"(?m)^-- \n[^\n]*\n*\Z", b"", diff)  # format-patch signature
    sep = body.rfind(b"---\n")
    if sep != -1 and (sep == 0 or body[sep - 1 : sep] == b"\n"):
        body = body[:sep]
    return body, diff


_DIFF_GIT = re.compile(r'^diff --git (?:a/(.+?)|"a/(.+?)") (?:b/(.+)|"b/(.+)")$')
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_HEADER_PATHS = ("rename from ", "rename to ", "copy from ", "copy to ", "rename old ",
                 "rename new ")


def unquote_path(text: str) -> str:
    """A path as git writes it in a diff: C-quoted (``"a/\303\244 b"``) when it has special
    characters. Paths must be checked after unquoting: ``"a/\056\056/x"`` is ``a/../x``."""
    if len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        return text
    body = text[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", errors="surrogateescape")
            i += 1
            continue
        nxt = body[i + 1: i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif re.match(r"[0-7]{3}", body[i + 1: i + 4]):
            out.append(int(body[i + 1: i + 4], 8) & 0xFF)
            i += 4
        else:
            out += b"\\"
            i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _diff_git_paths(line: str) -> tuple[str, str]:
    m = _DIFF_GIT.match(line)
    if not m:
        return "", ""
    old = m.group(1) if m.group(1) is not None else unquote_path(f'"{m.group(2)}"')
    new = m.group(3) if m.group(3) is not None else unquote_path(f'"{m.group(4)}"')
    return old or "", new or ""


def _check_diff(diff: bytes, source: str, first_line: int) -> None:
    """Walk the diff as ``git apply`` will: file headers (paths, modes, binaries) outside hunks,
    hunk bodies counted against their ``@@`` line (so a removed line ``-- x`` is not taken for a
    header, and a hunk cut short is caught here with its line)."""
    text = diff.decode("utf-8", errors="surrogateescape")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    symlink_new = False
    current: str | None = None
    old_left = new_left = 0  # lines still expected in the current hunk
    hunk_line = 0
    in_file_hunks = False  # a hunk of the current file has ended
    for offset, line in enumerate(lines):
        where = f"{source}:{first_line + offset}"
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
            elif tag == "-":
                old_left -= 1
            elif tag == "+":
                new_left -= 1
                if symlink_new and current:
                    check_symlink(current, line[1:], where)
            elif tag == "\\":
                continue
            else:
                raise PatchError(f"{source}:{hunk_line}: truncated hunk in {current} "
                                 f"(line {first_line + offset} is not part of it)")
            if old_left < 0 or new_left < 0:
                raise PatchError(f"{source}:{hunk_line}: hunk longer than its @@ header says "
                                 f"in {current}")
            continue
        if line.startswith("diff --git "):
            old, new = _diff_git_paths(line)
            if not old or not new:
                raise PatchError(f"{where}: malformed 'diff --git' line")
            for path in (old, new):
                check_path(path, where)
            current = new
            symlink_new = False
            in_file_hunks = False
        elif current is None:
            raise PatchError(f"{where}: not a diff line: {line[:60]!r}")
        elif line.startswith("@@"):
            m = _HUNK.match(line)
            if m is None:
                raise PatchError(f"{where}: malformed hunk header: {line[:60]!r}")
            old_left = int(m.group(2)) if m.group(2) is not None else 1
            new_left = int(m.group(4)) if m.group(4) is not None else 1
            hunk_line = first_line + offset
            in_file_hunks = True
        elif in_file_hunks and line[:1] in (" ", "+", "-") and not line.startswith(
            ("--- ", "+++ ")
        ):
            raise PatchError(f"{source}:{hunk_line}: hunk longer than its @@ header says in "
                             f"{current} (line {first_line + offset})")
        elif line.startswith(("--- ", "+++ ")):
            target = unquote_path(line[4:].split("\t", 1)[0])
            if target != "/dev/null":
                if target[:2] not in ("a/", "b/"):
                    raise PatchError(f"{where}: path without a/ or b/ prefix: {target!r}")
                check_path(target[2:], where)
        elif line.startswith(_HEADER_PATHS):
            check_path(unquote_path(line.split(" ", 2)[2]), where)
        elif line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
            mode = line.rsplit(" ", 1)[1]
            if mode not in ALLOWED_MODES:
                raise PatchError(f"{where}: file mode {mode} refused (only 100644, 100755, 120000)")
            if mode == "120000" and line.startswith(("new file mode", "new mode")):
                symlink_new = True
        elif line.startswith("index ") and " " in line[6:]:
            mode = line.rsplit(" ", 1)[1]
            if mode not in ALLOWED_MODES:
                raise PatchError(f"{where}: file mode {mode} refused (only 100644, 100755, 120000)")
            if mode == "120000":
                symlink_new = True
        elif line.startswith(("GIT binary patch", "Binary files ")):
            raise PatchError(
                f"{where}: binary patch refused ({current}); rebasectl carries text only"
            )
    if old_left > 0 or new_left > 0:
        raise PatchError(f"{source}:{hunk_line}: truncated hunk in {current} (the file ends "
                         f"{max(old_left, new_left)} lines early)")
    try:
        patchset = _patchset(diff)
    except (UnidiffParseError, ValueError, IndexError, KeyError, TypeError) as exc:
        detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise PatchError(f"{source}:{first_line}: corrupt diff: {detail}") from None
    declared = sum(1 for line in lines if line.startswith("diff --git "))
    if len(patchset) != declared:
        raise PatchError(
            f"{source}:{first_line}: corrupt diff: {declared} files declared, "
            f"{len(patchset)} parsed"
        )
    for pf in patchset:
        for hunk in pf:
            if len(hunk.source) != hunk.source_length or len(hunk.target) != hunk.target_length:
                raise PatchError(f"{source}:{first_line}: truncated hunk in {pf.path}")


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


def check_symlink(link: str, target: str, where: str) -> None:
    if target.startswith("/"):
        raise PatchError(f"{where}: symlink {link} -> {target!r} points outside the tree")
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if resolved == ".." or resolved.startswith("../") or ".git" in resolved.split("/"):
        raise PatchError(f"{where}: symlink {link} -> {target!r} points outside the tree")


def split_file_diff(file_diff: bytes) -> tuple[bytes, list[bytes]]:
    """One file's diff as (header lines up to the first hunk, [each hunk with its @@ line])."""
    parts = re.split(rb"(?m)^(?=@@ )", file_diff)
    return parts[0], parts[1:]
