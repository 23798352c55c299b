"""How Python binds a name, written once.

Several questions read Python source as text: which names a patch unbinds that the merged file
still uses (report/names.py), the report's findings about parameters and attributes, and the
proposal rules that refuse to keep two sides which define the same name (Python accepts a second
``def`` silently). They must agree on what a definition and an assignment look like, so the
patterns live here, below every layer that asks; each builds its own regex from them.
"""

from __future__ import annotations

IDENT = r"[A-Za-z_]\w*"
EQUALS = r"=(?!=)"  # an ``=`` that binds (``name=`` in a call too), never ``==``
BINDS = rf"\s*(?::[^=]+)?{EQUALS}"  # what follows the name in ``name = ...``/``name: T = ...``
DEF = rf"^\s*(?:async\s+)?(?P<kind>def|class)\s+(?P<name>{IDENT})"  # a def/class header
ASSIGN = rf"^\s*(?P<name>{IDENT}){BINDS}"  # ``name = ...`` rebinds
