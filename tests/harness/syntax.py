"""The package's syntax trees for the static tests (layers, one owner, untrusted input), read
once per test process.

Those tests ask a dozen questions of every module of rebasectl; each used to parse the file and
``ast.walk`` the tree again per question (about 5 s of a ``-n 2`` run). Here a file is parsed
once (``tree``) and a tree walked once (``nodes``: the nodes in ``ast.walk``'s own order, so a
check that iterates them sees exactly what it saw walking). The trees are only read.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rebasectl"


@functools.cache
def sources() -> tuple[Path, ...]:
    """Every module of the package, sorted."""
    return tuple(sorted(PACKAGE.rglob("*.py")))


@functools.cache
def text(path: Path) -> str:
    return path.read_text()


@functools.cache
def tree(path: Path) -> ast.Module:
    """``path`` parsed (with its name as the file name, as ``ast.parse(text, str(path))``)."""
    return ast.parse(text(path), str(path))


@functools.cache
def nodes(root: ast.AST) -> tuple[ast.AST, ...]:
    """``tuple(ast.walk(root))``, computed once per tree object (a node hashes by identity)."""
    return tuple(ast.walk(root))
