"""The one reading of which names an import line binds (the proposal rules' ``defined`` and
``module_names`` both ask it)."""

from __future__ import annotations

from rebasectl.engine.proposals.merge import defined
from rebasectl.engine.proposals.rules import module_names
from rebasectl.model.pysyntax import import_names


def test_import_names() -> None:
    assert import_names("import a.b") == ["a"]
    assert import_names("import a.b as c") == ["c"]
    assert import_names("from x import (y as z, w)  # two") == ["z", "w"]
    assert import_names("from . import m \\") == ["m"]
    assert import_names("x = 1") == [] and import_names("# import os") == []
    assert import_names("from the start.") == []  # a docstring's line: was an IndexError


def test_both_rules_read_imports_alike() -> None:
    lines = ("import os.path", "from x import y as z", "def f():", "    import inner")
    assert {"os", "z", "f"} <= defined(lines)
    assert module_names(lines) == {"os", "z", "f"}  # the indented import is not top level


def test_what_an_import_line_looks_like() -> None:
    """``IMPORT``: a whole import line (the carried-lines engine tells an import, code, from a
    docstring's words-only prose)."""
    import re

    from rebasectl.model.pysyntax import IMPORT

    pattern = re.compile(IMPORT)
    assert all(pattern.match(x) for x in ("import logging", "import a.b as c, d",
                                          "from typing import Optional, Tuple", "  import gc"))
    assert not any(pattern.match(x) for x in ("import it first.", "from the start.",
                                              "Defaults to False.", "imports = [a]"))
