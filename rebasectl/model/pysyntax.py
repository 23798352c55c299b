"""How Python binds a name, written once.

Several questions read Python source as text: which names a patch unbinds that the merged file
still uses (report/names.py), the report's findings about parameters and attributes, and the
proposal rules that refuse to keep two sides which define the same name (Python accepts a second
``def`` silently). They must agree on what a definition and an assignment look like, so the
patterns live here, below every layer that asks; each builds its own regex from them. ``IMPORT``
(a whole import line) is asked by the carried-lines engine: an import reads like prose, words
only, yet it is code.
"""

from __future__ import annotations

IDENT = r"[A-Za-z_]\w*"
EQUALS = r"=(?!=)"  # an ``=`` that binds (``name=`` in a call too), never ``==``
BINDS = rf"\s*(?::[^=]+)?{EQUALS}"  # what follows the name in ``name = ...``/``name: T = ...``
DEF = rf"^\s*(?:async\s+)?(?P<kind>def|class)\s+(?P<name>{IDENT})"  # a def/class header
ASSIGN = rf"^\s*(?P<name>{IDENT}){BINDS}"  # ``name = ...`` rebinds
_MODULE = r"[\w.]+(?:\s+as\s+\w+)?"
IMPORT = rf"^\s*(?:from\s+[\w.]+\s+)?import\s+{_MODULE}(?:\s*,\s*{_MODULE})*\s*$"  # one line, whole


def import_names(line: str) -> list[str]:
    """The names an ``import`` / ``from ... import`` line binds (``import a.b`` binds ``a``,
    ``... as z`` binds ``z``); none for any other line."""
    text = line.split("#")[0].strip()
    if text.startswith("from ") and " import " in text:
        body = text.split(" import ", 1)[1]
    elif text.startswith("import "):
        body = text[7:]
    else:  # prose that starts with "from" (a docstring's "from the start.") binds nothing
        return []
    out = []
    for part in body.strip("() \\").split(","):
        words = part.split()
        if words:
            out.append(words[-1] if len(words) > 1 else words[0].split(".")[0])
    return out
