"""The mechanical checks of the report: each finding is a fact the code verified, stated only where
it holds.

- stale-message: a code identifier (or file) that the message says the change adds or uses (its
  subject, its list items, a paragraph that opens with "Fix:" and the like) and that is in neither
  the diff nor the functions its hunks sit in. Narrative ("Root cause: ... cuMemCreate ...",
  "fails with torch.AcceleratorError") explains, it claims nothing about the diff.
- redundant: an added line that the same block already held before the patch (``import
  warnings`` twice at module level), not one that repeats a line of another block.
- lost-in-resolution: lines the old patches added that are in neither the new patches nor the
  file at the new base, nor kept whole in a rewritten line the new patches add to the file.
- partial-revert: a line upstream removed between the bases that the new patch adds back and
  the old patch did not add (the carried-lines engine's ``removed_upstream``: bump's rule).
- removed-name-used: a name the patch unbinds that the patched file still uses (bump's own check,
  ``names.uses_of_removed``), and a function, class, parameter or attribute the patch removes
  that other files of the tree after the patch still use (upstream's test passing a parameter
  the patch took away).

Findings that hold for both sides of an entry are stated once, for the new side.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace

from ..engine import carried
from ..model import pysyntax
from ..model.diffs import FileDiff, Hunk
from ..model.ids import Oid, is_abbrev
from ..model.lines import significant, survives
from . import pycode
from .lineage import Change
from .model import Finding
from .names import NameUse

MAX_ITEMS = 8  # lines or names quoted per finding; the count of the rest is stated
Lines = Callable[[str, str], list[str] | None]  # (rev, path) -> the file's lines


def _items(found: Sequence[str]) -> str:
    shown = ", ".join(f"`{x}`" for x in found[:MAX_ITEMS])
    more = len(found) - MAX_ITEMS
    return shown + (f" and {more} more" if more > 0 else "")


# -- stale message ---------------------------------------------------------------------------------
_IDENT = re.compile(r"`([^`\n]+)`|\b([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\(\))?")
_CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+")
# a file name ends at a word boundary: "triton.heuristics" does not name a file "triton.h"
_FILE = re.compile(r"[\w/.-]+\.(?:py|md|txt|yaml|yml|sh|json|toml|cfg|cu|cpp|h)(?![\w-])")
# product and project names that are CamelCase but never identifiers in a diff
_NAMES = frozenset({"PyTorch", "HuggingFace", "TensorFlow", "DeepSpeed", "GitHub", "GitLab",
                    "JavaScript", "TypeScript", "FlashAttention", "TransformerEngine"})
_ITEM = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")
_CLAIM = re.compile(r"^\s*(?:fix(?:es|ed)?|change[sd]?|solution|this (?:commit|patch|change|pr))"
                    r"\b\s*[:,]?", re.I)
_TRAILER = re.compile(r"^[A-Za-z][A-Za-z-]+: .*<[^>]*>\s*$|^Signed-off-by: ", re.I)


def claim_lines(message: str) -> list[str]:
    """The lines of a message that say what the change does: the subject, list items and the
    paragraphs that open with "Fix:", "Changes:", "This commit ..."."""
    paragraphs = re.split(r"\n\s*\n", message.strip())
    out = [" ".join(paragraphs[0].split("\n"))] if paragraphs else []
    for para in paragraphs[1:]:
        lines = [ln for ln in para.split("\n") if not _TRAILER.match(ln.strip())]
        if lines and _CLAIM.match(lines[0]):
            out += lines
        else:
            out += [ln for ln in lines if _ITEM.match(ln)]
    return out


def message_identifiers(message: str) -> list[str]:
    """Names in a text that look like code: `quoted`, snake_case, camelCase, dotted, or
    called()."""
    names: list[str] = []
    for m in _IDENT.finditer(message):
        quoted, word, call = m.group(1), m.group(2), m.group(3)
        if quoted:
            name = quoted.strip().rstrip("()")
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
                names.append(name)
        elif word and (call or _codeish(word)):
            names.append(word)
    return [n for n in dict.fromkeys(names) if not is_abbrev(n)]


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


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(name)}(?!\w)" if "." in name
                      else rf"(?<!\w){re.escape(name)}(?!\w)")


def hunk_line(h: Hunk) -> int:
    """The postimage line of a hunk's first change (where it sits in the new file)."""
    n = h.new_start
    for raw in h.lines:
        if raw[:1] in (b"+", b"-"):
            return max(n, 1)
        if raw[:1] == b" ":
            n += 1
    return max(h.new_start, 1)


def _surroundings(c: Change, lines: Lines) -> str:
    """The names and bodies of the functions and classes the patch's hunks sit in."""
    out: list[str] = []
    for f in c.files:
        post = lines(c.sha, f.path)
        if not post:
            continue
        for h in f.hunks:
            found = pycode.enclosing(post, min(hunk_line(h), len(post)))
            out += [name for _, name, _ in found]
            inner = next((k for kind, _, k in found if kind == "def"), None)
            if inner is not None:
                out += pycode.body(post, inner)
    return "\n".join(out)


def _changes_qualified(name: str, c: Change, lines: Lines) -> bool:
    """Whether the change changes the function a dotted name names: ``module.function`` (the
    function around, or defined by, a hunk of the file whose module path ends with ``module``:
    ``dict_utils.merge`` and a hunk in dict_utils.py's ``merge``) or ``Class.method`` (a hunk
    in ``method`` of ``Class``)."""
    *qual, func = name.split(".")
    defines = re.compile(rf"^[+-]\s*(?:async\s+)?def\s+{re.escape(func)}\(")
    for f in c.files:
        module = f.path.removesuffix(".py").split("/") if f.path.endswith(".py") else []
        post = lines(c.sha, f.path) or []
        for h in f.hunks:
            around = [n for _, n, _ in pycode.enclosing(post, min(hunk_line(h), len(post)))] \
                if post else []
            here = func in around or any(defines.match(ln.decode("utf-8", errors="replace"))
                                         for ln in h.lines)
            if here and (module[-len(qual):] == qual or qual[-1] in around):
                return True
    return False


def stale_message(c: Change, lines: Lines) -> list[Finding]:
    """Files and identifiers the message's claims name that the change does not hold."""
    if c.empty:
        return []
    claims = "\n".join(claim_lines(c.info.message))
    diff = c.diff.decode("utf-8", errors="replace")
    paths = {f.path for f in c.files} | {f.path.rsplit("/", 1)[-1] for f in c.files}
    files = [m.group(0).strip("./") for m in _FILE.finditer(claims)]
    files = [x for x in dict.fromkeys(files) if x not in paths
             and x.rsplit("/", 1)[-1] not in paths and not any(p.endswith(x) for p in paths)]
    said = f"message says it changes {_items(files)}; its diff does not"
    out = [Finding("stale-message", c.side, c.index, None, said, items=tuple(files))
           ] if files else []
    around: str | None = None
    missing: list[str] = []
    for name in message_identifiers(claims):
        if _word(name).search(diff) or "." in name and _changes_qualified(name, c, lines):
            continue
        around = _surroundings(c, lines) if around is None else around
        if not _word(name).search(around):
            missing.append(name)
    if missing:
        out.append(Finding("stale-message", c.side, c.index, None,
                           f"message names {_items(missing)}, in neither the diff nor the "
                           "functions it changes", items=tuple(missing)))
    return out


# -- redundant -------------------------------------------------------------------------------------
_KEYWORDS = re.compile(r"^(pass|return|break|continue|raise|else|try|finally|yield)\b")


def _candidate(text: str) -> bool:
    """A line that is a statement of its own (an import, assignment or call), not a fragment of
    a longer expression, a block opener, a bare keyword, a comment or a string."""
    if not text or text.startswith(("#", '"', "'", ")", "]", "}", "@")) or \
            text.endswith((",", "(", "[", "{", "\\", ":")) or _KEYWORDS.match(text):
        return False
    return bool(re.search(r"[A-Za-z_]{3}", text)) and (
        text.startswith(("import ", "from ")) or "=" in text or "(" in text)


def _added_at(f: FileDiff) -> dict[int, str]:
    """Postimage line -> text of each line the diff adds."""
    out: dict[int, str] = {}
    for h in f.hunks:
        n = h.new_start
        for raw in h.lines:
            tag = raw[:1]
            if tag == b"+":
                out[n] = raw[1:].decode("utf-8", errors="replace")
            if tag in (b"+", b" "):
                n += 1
    return out


def redundant(c: Change, lines: Lines) -> list[Finding]:
    """Added lines that their block already held before the patch (same text, same
    indentation, a line the patch did not add)."""
    out: list[Finding] = []
    for f in c.files:
        post = lines(c.sha, f.path)
        if not post:
            continue
        added = _added_at(f)
        found: list[str] = []
        where: list[str] = []
        for n, line in sorted(added.items()):
            if n > len(post) or not _candidate(line.strip()):
                continue
            same = [k for k in pycode.siblings(post, n)
                    if k not in added and post[k - 1].strip() == line.strip()]
            if same:
                found.append(line.strip())
                where.append(str(same[0]))
        if found:
            out.append(Finding("redundant", c.side, c.index, f.path,
                               f"adds {_items(found)}, which the same block already has "
                               f"(line {', '.join(where[:MAX_ITEMS])})", items=tuple(found)))
    return out


# -- lost in resolution ----------------------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(text.split())


Deleted = Callable[[str], tuple[bool, Oid | None]]  # path -> (upstream deleted it, commit)


def lost(olds: Sequence[Change], news: Sequence[Change], new_base: str,
         lines: Lines, deleted: Deleted = lambda path: (False, None)) -> list[Finding]:
    """Lines the old patches added that are in neither the new patches nor the new base, nor
    kept whole in a line the new patches add to the same file (``lines.survives``: a parameter
    kept in a signature upstream widened is rewritten, not lost); one the new patch has a close
    version of is quoted with it. A file upstream deleted between the bases is said to be
    deleted, by its commit where ``deleted`` knows it (hostile7 #12: "nor this file at the new
    base" read as if the file were there without the lines)."""
    carried = {_norm(x.decode("utf-8", errors="replace")) for c in news for f in c.files
               for h in f.hunks for x in h.added}
    out: list[Finding] = []
    for path in dict.fromkeys(f.path for c in olds for f in c.files):
        base = {_norm(x) for x in lines(new_base, path) or []}
        here = sorted({_norm(x.decode("utf-8", errors="replace")) for c in news
                       for f in c.files if f.path == path for h in f.hunks for x in h.added})
        gone = [_norm(x.decode("utf-8", errors="replace")) for c in olds
                for f in c.files if f.path == path for h in f.hunks for x in h.added]
        gone = [x for x in dict.fromkeys(gone) if significant("+" + x) and
                not x.startswith("#") and x not in carried and x not in base and
                not any(survives(x, y) for y in here)]
        if not gone:
            continue
        index = next(c.index for c in olds if c.file(path) is not None)
        quoted = [_with_counterpart(x, carried) for x in gone[:MAX_ITEMS]]
        more = f" and {len(gone) - MAX_ITEMS} more" if len(gone) > MAX_ITEMS else ""
        gone_file, commit = deleted(path)
        where = ("are not in the new patch, and upstream deleted this file between the bases"
                 if gone_file else "are in neither the new patch nor this file at the new base")
        out.append(Finding("lost-in-resolution", "old", index, path,
                           f"{len(gone)} line(s) the old patch added {where}: "
                           f"{', '.join(quoted)}{more}", commit, items=tuple(gone)))
    return out


def _with_counterpart(line: str, carried: set[str]) -> str:
    close = difflib.get_close_matches(line, sorted(carried), n=1, cutoff=0.9)
    return f"`{line}` (the new patch has `{close[0]}`)" if close else f"`{line}`"


# -- partial revert --------------------------------------------------------------------------------
def resolution_lines(c: Change, olds: Sequence[Change],
                     at_new: Callable[[str], str]) -> list[tuple[str, carried.Change]]:
    """Per file the new patch changes (not one it creates), the lines it adds that no old patch
    of its entry added to that file (``at_new`` follows an old path upstream renamed): what the
    resolution wrote. Whether one of them re-adds what upstream removed is the carried-lines
    engine's question (``removed_upstream``, the rule of bump's re-adds warning); a line the
    old patch added too is the patch's own, which that warning judges when the old patch is
    carried (June: ``Defaults to False.`` in post-layernorm's own docstrings). The file's
    removed lines go with them: a line the patch removes and adds is moved, not put back."""
    out: list[tuple[str, carried.Change]] = []
    for f in c.files:
        if f.old_path is None or f.binary:
            continue
        own = {x.strip() for o in olds for g in o.files if f.path in (g.path, at_new(g.path))
               for h in g.hunks for x in h.added}
        added = tuple(x for h in f.hunks for x in h.added if x.strip() not in own)
        if added:
            removed = tuple(x for h in f.hunks for x in h.removed)
            out.append((f.path, carried.Change(f.old_path or f.path, added, removed)))
    return out


def partial_revert(c: Change, path: str, found: Sequence[tuple[Oid, Sequence[bytes]]]
                   ) -> list[Finding]:
    """One finding per file, from the engine's answer (the commits of the range, oldest first,
    each with the lines it removed that the patch adds back); the commit named is the last to
    remove the longest of the lines."""
    lines = sorted({(x.decode("utf-8", errors="replace"), x) for _, xs in found for x in xs})
    if not lines:
        return []
    texts = list(dict.fromkeys(text for text, _ in lines))
    longest = max(lines, key=lambda line: len(line[0]))[1]
    commit = [sha for sha, xs in found if longest in xs][-1]
    return [Finding("partial-revert", c.side, c.index, path,
                    f"adds back {_items(texts)}, which upstream removed between the bases",
                    commit, tuple(texts))]


# -- removed names still used ----------------------------------------------------------------------
_DEF = re.compile(pysyntax.DEF)
_ATTR = re.compile(rf"^\s*self\.({pysyntax.IDENT}){pysyntax.BINDS}")
_PARAM = re.compile(r"^\s*\*{0,2}([A-Za-z_]\w*)\s*(?::[^=]*)?(?:=[^=].*)?,?\s*$")


@dataclass(frozen=True)
class Removed:
    """A name the patch removes: kind def | attribute | parameter (of ``owner``)."""

    name: str
    kind: str
    path: str
    owner: str = ""

    @property
    def called(self) -> str:
        """The name a caller of a parameter's owner writes: the class, for ``Cls.__init__``."""
        parts = self.owner.split(".")
        return parts[-2] if parts[-1] == "__init__" and len(parts) > 1 else parts[-1]

    def used_in(self, line: str) -> bool:
        if self.kind != "def" and line.lstrip().startswith(("import ", "from ")):
            return False  # ``from x.name import y`` names a module, not the attribute
        pattern = {"def": rf"(?<![\w.]){self.name}\b|\.{self.name}\b",
                   "attribute": rf"\.{self.name}\b",
                   "parameter": rf"\b{self.name}\s*{pysyntax.EQUALS}"}[self.kind]
        return re.search(pattern, line) is not None


def _removed_lines(f: FileDiff) -> Iterable[tuple[int, int, str]]:
    """(preimage line, postimage line where it stood, text) of every line the diff removes."""
    for h in f.hunks:
        n, m = h.old_start, h.new_start
        for raw in h.lines:
            tag = raw[:1]
            if tag == b"-":
                yield n, m, raw[1:].decode("utf-8", errors="replace")
            if tag in (b"-", b" "):
                n += 1
            if tag in (b"+", b" "):
                m += 1


def _params(line: str) -> list[str]:
    """Parameter names of a ``def name(...)`` signature (``self`` left out)."""
    inner = line[line.find("(") + 1:line.rfind(")")] if "(" in line and ")" in line else ""
    names = [re.sub(r"[:=].*", "", p).strip().lstrip("*") for p in inner.split(",")]
    return [n for n in names if n.isidentifier() and n not in ("self", "cls")]


def _owners(lines: list[str], n: int) -> list[str]:
    """The names of the defs and classes around the header at line ``n`` (itself left out)."""
    return [name for _, name, _ in pycode.enclosing(lines, n)[1:]]


def _signature(lines: list[str], n: int) -> str:
    """The signature starting at line ``n``, its lines joined up to the ``)`` closing it."""
    text = ""
    for line in lines[n - 1:n + 40]:
        text += " " + line.strip()
        if text.count("(") and text.count("(") <= text.count(")"):
            break
    return text


def _signature_params(pre: list[str], post: list[str] | None, at: tuple[int, int], line: str,
                      path: str) -> list[Removed]:
    """Parameters a rewritten one-line signature (preimage line ``at[0]``, postimage line
    ``at[1]`` where it stood) no longer has: compared with the same function's signature after
    the patch, the ``def`` of that name in the same class nearest to where it stood (a file
    has many ``__init__``), read whole when it spans lines."""
    m = _DEF.match(line)
    if not m or "def " not in line or not post:
        return []
    name, owners = m.group("name"), _owners(pre, at[0]) if at[0] <= len(pre) else []
    header = re.compile(rf"\s*(?:async\s+)?def\s+{name}\(")
    found = [k for k, ln in enumerate(post, start=1) if header.match(ln)
             and _owners(post, k) == owners]
    if not found:
        return []
    now = min(found, key=lambda k: abs(k - at[1]))
    kept = set(_params(_signature(post, now)))
    owner = ".".join([*reversed(owners), name])
    return [Removed(p, "parameter", path, owner) for p in _params(line) if p not in kept]


def _removed_item(pre: list[str], n: int, line: str, path: str) -> Removed | None:
    """The definition a removed line made, if it made one."""
    if (m := _DEF.match(line)) is not None:
        return Removed(m.group("name"), "def", path)
    if (m := _ATTR.match(line)) is not None:
        return Removed(m.group(1), "attribute", path)
    if (m := _PARAM.match(line)) is not None and n <= len(pre) and \
            (owner := pycode.signature_of(pre, n)) is not None:
        return Removed(m.group(1), "parameter", path, owner)
    return None


def removed_names(c: Change, lines: Lines) -> list[Removed]:
    """Definitions (functions, classes, ``self.`` attributes, parameters) that the patch's
    removed lines made and that its result no longer has."""
    out: list[Removed] = []
    for f in c.files:
        pre, post = lines(c.parent, f.path), lines(c.sha, f.path)
        if not f.path.endswith(".py") or pre is None:
            continue
        after = "\n".join(post or [])
        for n, m, line in _removed_lines(f):
            item = _removed_item(pre, n, line, f.path)
            if item is not None and not re.search(rf"\b{item.name}\b", after):
                out.append(item)
            out += _signature_params(pre, post, (n, m), line, f.path)
    return list(dict.fromkeys(out))


def own_lines(c: Change) -> set[tuple[str, int]]:
    """(path, line) of every line the patch adds, in the tree after it: the patch's own code,
    never "upstream code" that uses what it removes."""
    return {(f.path, n) for f in c.files for n in _added_at(f)}


def uses(item: Removed, files: Sequence[str], rev: str, lines: Lines,
         own: Collection[tuple[str, int]] = ()) -> list[tuple[str, int]]:
    """(path, line) of each use of ``item`` at ``rev`` in ``files`` (its own file and the
    ``own`` lines, the patch's added ones, excluded; a parameter only where the function that
    had it is named too: a class, for its ``__init__``)."""
    out: list[tuple[str, int]] = []
    for path in files:
        text = lines(rev, path) if path != item.path else None
        if not text or (item.kind == "parameter" and
                        not any(item.called in ln for ln in text)):
            continue
        out += [(path, k) for k, ln in enumerate(text, start=1)
                if item.used_in(ln) and (path, k) not in own]
    return out


def name_used(c: Change, item: Removed, found: list[tuple[str, int]],
              commit: Oid | None) -> Finding:
    """The finding, naming up to three uses and the upstream commit of the first."""
    what = {"def": f"`{item.name}`", "attribute": f"attribute `{item.name}`",
            "parameter": f"parameter `{item.name}` of `{item.owner}`"}[item.kind]
    where = ", ".join(f"{p}:{n}" for p, n in found[:3]) + \
        (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return Finding("removed-name-used", c.side, c.index, item.path,
                   f"removes {what}, which upstream code still uses: {where}", commit,
                   (item.name,) + tuple(f"{p}:{n}" for p, n in found))


def rebound(name: str, text: list[str]) -> bool:
    """Whether the file binds ``name`` other than by import, def or class (an assignment,
    ``for name in``, ``as name``): then its uses are not left dangling."""
    word = re.escape(name)
    pattern = re.compile(rf"^\s*{word}{pysyntax.BINDS}|\bfor\s+{word}\s+in\b|\bas\s+{word}\b")
    return any(pattern.search(line) for line in text)


def in_file_uses(c: Change, uses: Sequence[NameUse]) -> list[Finding]:
    """Bump's check (``names.uses_of_removed``), as findings: the patched file itself still
    uses a name the patch unbinds (an import, ``def`` or ``class`` it removes). The caller
    leaves out names the file binds again another way (``rebound``: the example's [6/8]
    replaces ``def compute_topk`` by ``compute_topk = ...``, no dangling use)."""
    by_name: dict[tuple[str, str], list[NameUse]] = {}
    for use in uses:
        by_name.setdefault((use.path, use.name), []).append(use)
    out: list[Finding] = []
    for (path, name), found in sorted(by_name.items()):
        where = ", ".join(f"{u.path}:{u.line}" for u in found[:3]) + \
            (f" and {len(found) - 3} more" if len(found) > 3 else "")
        commit = next((u.commit for u in found if u.commit), None)
        out.append(Finding("removed-name-used", c.side, c.index, path,
                           f"removes `{name}`, which the patched file still uses: {where}",
                           commit, (name,) + tuple(f"{u.path}:{u.line}" for u in found)))
    return out


def standing(old: Sequence[Finding],
             new: Sequence[Finding]) -> tuple[list[Finding], list[Finding]]:
    """Both sides' findings, those that held before this bump marked ``standing`` (said, but no
    reason to review now): a new-side finding the old side states too (kind, file, items), and
    an old patch's stale message (a fact about the old series alone; lost lines, which compare
    the two sides, are not)."""
    before = {(f.kind, f.path, f.items) for f in old}
    return ([replace(f, standing=True) if f.kind == "stale-message" else f for f in old],
            [replace(f, standing=True) if (f.kind, f.path, f.items) in before else f
             for f in new])


def once(old: Sequence[Finding], new: Sequence[Finding]) -> list[Finding]:
    """The findings of both sides, an old one left out when the new side states the same."""
    said = {(f.kind, f.path, f.items) for f in new}
    return [f for f in old if (f.kind, f.path, f.items) not in said] + list(new)
