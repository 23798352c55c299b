"""After a merge: does the result still use a name the patch removed?

A patch that drops an import or a definition merges cleanly on a newer upstream that has since
added a use of that name elsewhere in the file — a NameError waiting at run time, and nothing in
the merge says so (the June bump: an ipc-tms that removed ``from torch_memory_saver import
torch_memory_saver`` met upstream 342dd59a5, which added a ``torch_memory_saver.region(...)``
call). This reads what the patch unbinds (imports, ``def``, ``class``) in each Python file, looks
for uses of those names left in the patched file, and blames each such line to the upstream
commit that wrote it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from ..git import Repo
from ..model.diffs import FileDiff, LineMap, text_lines
from ..model.ids import Oid
from ..model.pysyntax import ASSIGN, DEF

_IMPORT = re.compile(rb"^\s*import\s+([\w.]+)(?:\s+as\s+(\w+))?\s*(?:#.*)?$")
_FROM = re.compile(rb"^\s*from\s+[\w.]+\s+import\s+\(?([\w\s,]+?)\)?\s*(?:#.*)?$")
_DEF = re.compile(DEF.encode())
_ASSIGN = re.compile(ASSIGN.encode())
_STRING = re.compile(rb"(['\"])(?:\\.|(?!\1).)*\1")


@dataclass(frozen=True)
class NameUse:
    path: str
    line: int
    name: str
    commit: Oid | None  # the upstream commit that wrote the line, when it is in the range

    def text(self) -> str:
        by = f" (written by upstream {self.commit.short()})" if self.commit else ""
        return f"{self.path}:{self.line} uses `{self.name}`, which the patch removes{by}"


def bound(lines: list[bytes], *, assignments: bool = False) -> set[str]:
    """Names that lines bind: ``import a.b`` (a), ``import x as y`` (y), ``from m import a, b as
    c`` (a, c), ``def``/``class`` names; with ``assignments``, plain ``name = ...`` too. A
    removed assignment is no removed name (locals come and go), but an assignment left in the
    result still binds one (a patch that turns an import into ``name = ...``)."""
    names: set[str] = set()
    for line in lines:
        if m := _IMPORT.match(line):
            names.add((m.group(2) or m.group(1).split(b".")[0]).decode())
        elif m := _FROM.match(line):
            for part in m.group(1).split(b","):
                words = part.split()
                if words:
                    names.add(words[-1].decode())
        elif m := _DEF.match(line) or (_ASSIGN.match(line) if assignments else None):
            names.add(m.group("name").decode())
    return names


def removed(f: FileDiff) -> set[str]:
    return bound([ln for h in f.hunks for ln in h.removed]) - \
        bound([ln for h in f.hunks for ln in h.added])


class Changes(Protocol):
    """What the question needs of a patch: its files' diffs (a series ``Patch`` and the
    report's ``Change`` of a commit both have them)."""

    @property
    def files(self) -> Sequence[FileDiff]: ...


def uses_of_removed(repo: Repo, patch: Changes, result: str, old: str | None = None,
                    new: str | None = None) -> list[NameUse]:
    """Lines of the patched files at commit ``result`` that use a name the patch unbinds and
    that nothing in the file binds any more; each blamed within ``old..new`` when given."""
    out: list[NameUse] = []
    for f in patch.files:
        gone = removed(f) if f.path.endswith(".py") and f.new_path else set()
        if not gone:
            continue
        lines = text_lines(repo.objects.blob(f"{result}:{f.path}"))
        for name in sorted(gone - bound(lines, assignments=True)):
            word = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
            for n, line in enumerate(lines, start=1):
                code = _STRING.sub(b"''", line).split(b"#", 1)[0]  # not in strings, comments
                if word.search(code):
                    out.append(NameUse(f.path, n, name, None))
    if out and old and new:
        out = [_blamed(repo, use, result, old, new) for use in out]
    return out


def _blamed(repo: Repo, use: NameUse, result: str, old: str, new: str) -> NameUse:
    """The upstream commit of ``old..new`` that wrote the using line (its line in upstream's
    file found through the lines the two versions share)."""
    mine = text_lines(repo.objects.blob(f"{result}:{use.path}"))
    theirs = text_lines(repo.objects.blob(f"{new}:{use.path}"))
    line = LineMap(mine, theirs).get(use.line)
    if line is None:
        return use  # a line of the patch's own
    commit = repo.history.blame(old, new, use.path, [(line, line)]).get(line)
    # blamed at ``new``, so reachable from it: in the range unless the old base already had it
    # (a side branch merged later forked before ``old``: not a descendant of it, but in range)
    in_range = commit is not None and not repo.history.is_ancestor(commit, old)
    return NameUse(use.path, use.line, use.name, commit if in_range else None)
