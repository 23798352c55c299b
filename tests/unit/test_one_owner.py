"""One owner per question, enforced: each question below is answered in one module of rebasectl
(docs/design.md, "One owner per question", lists them), and this fails when a second module
defines its own answer. ``duplicates`` finds repeated blocks; it cannot see a one-line regex or
threshold written again, which is how the report and export came to disagree on a fold. The
code is read with ``ast`` (string and bytes constants, assignments, function definitions), so a
new module is checked without being listed; docstrings are prose and are left out.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rebasectl"
MARKERS = {"<<<<<<<", "=======", ">>>>>>>", "|||||||"}

Found = Iterator[tuple[int, str]]


def _docstrings(tree: ast.Module) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def constants(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every str/bytes constant of the code (docstrings left out), as text."""
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip:
            if isinstance(node.value, bytes):
                yield node.lineno, node.value.decode("latin-1")
            elif isinstance(node.value, str):
                yield node.lineno, node.value


def assigned(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Names bound at module or class level (``NAME = ...``, ``NAME: T = ...``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                for t in targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            yield stmt.lineno, name.id


def functions(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Module-level functions (a method of the same name answers a question of its class)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.lineno, node.name


def classes(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            yield node.lineno, node.name


def calls(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Attribute and plain calls by name (``datetime.fromtimestamp(...)`` is
    ``fromtimestamp``)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
                else ""
            yield node.lineno, name


def zero_sha(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``"0" * 40`` written out (the null sha)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            parts = [node.left, node.right]
            if any(isinstance(p, ast.Constant) and p.value in ("0", b"0") for p in parts) and \
                    any(isinstance(p, ast.Constant) and p.value == 40 for p in parts):
                yield node.lineno, '"0" * 40'


def _where(pick: Callable[[ast.Module], Found], keep: Callable[[str], bool]) \
        -> Callable[[ast.Module], Found]:
    return lambda tree: ((n, s) for n, s in pick(tree) if keep(s))


# question -> (its one owner, relative to rebasectl/, and how a definition of it is recognised)
OWNERS: dict[str, tuple[str, Callable[[ast.Module], Found]]] = {
    "what a sha looks like (the sha regex)": (
        "model/ids.py",
        _where(constants, lambda s: "0-9a-f]{" in s or "0123456789abcdef" in s)),
    "git's null sha and empty tree": (
        "model/ids.py",
        lambda tree: iter([*zero_sha(tree), *_where(
            constants, lambda s: s in ("0" * 40, "4b825dc642cb6eb9a060e54bf8d69288fbee4904"))(
            tree)])),
    "the abbreviation length of a sha": (
        "model/ids.py",
        _where(assigned, lambda s: s in ("SHORT", "SHORT_PROSE", "SHA_LEN", "ABBREV_LEN"))),
    "the conflict-marker prefixes (the marker scanner)": (
        "engine/conflicts.py", _where(constants, lambda s: s.strip() in MARKERS)),
    "the regex for a Python definition (def/class)": (
        "model/pysyntax.py", _where(constants, lambda s: re.search(r"def\)?\|", s) is not None
                                  or "(?:def|class)" in s)),
    "the regex for a Python assignment": (
        "model/pysyntax.py", _where(constants, lambda s: "=(?!=)" in s)),
    "the containment threshold (is patch A contained in B)": (
        "model/lines.py", _where(assigned, lambda s: "CONTAIN" in s)),
    "the pairing similarity threshold": (
        "report/lineage.py", _where(assigned, lambda s: "SIMILARITY" in s)),
    "is a changed line significant": (
        "model/lines.py", _where(functions, lambda s: s.lstrip("_") in
                                 ("significant", "significant_lines", "is_significant"))),
    "the parse of git's raw date": (
        "model/patches.py", _where(calls, lambda s: s in ("fromtimestamp", "utcfromtimestamp"))),
    "the words for what became of a patch (status enums)": (
        "model/status.py", _where(classes, lambda s: s in (
            "Applied", "StepStatus", "BumpStatus", "MappingStatus", "ProposalState"))),
    "does a patch apply (exactly, else 3-way)": (
        "engine/conflicts.py", _where(functions, lambda s: s.lstrip("_") in ("applies",))),
}


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    """Every module of the package, parsed once for all the questions (the detectors only read
    the trees)."""
    return [(str(p.relative_to(PACKAGE)), ast.parse(p.read_text(), str(p)))
            for p in sorted(PACKAGE.rglob("*.py"))]


@pytest.mark.parametrize("question", sorted(OWNERS))
def test_one_owner(question: str) -> None:
    owner, find = OWNERS[question]
    modules = _modules()
    seconds = [f"rebasectl/{rel}:{line}: {what!r}" for rel, tree in modules if rel != owner
               for line, what in find(tree)]
    assert not seconds, f"{question} is owned by rebasectl/{owner}; a second definition:\n" + \
        "\n".join(seconds)
    assert any(True for rel, tree in modules if rel == owner for _ in find(tree)), \
        f"rebasectl/{owner} no longer answers {question}: move the entry in OWNERS with it"


def test_design_lists_every_owner() -> None:
    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    missing = [f"{q} -> {o}" for q, (o, _) in OWNERS.items() if f"`{o}`" not in design]
    assert not missing, "docs/design.md's 'One owner per question' lacks:\n" + "\n".join(missing)


def test_a_second_definition_is_caught() -> None:
    """The detectors see what they are for: each catches a plausible second definition."""
    samples = {
        "what a sha looks like (the sha regex)": 'X = re.compile(r"[0-9a-f]{40}")',
        "git's null sha and empty tree": 'NULL = "0" * 40',
        "the conflict-marker prefixes (the marker scanner)": 'if line.startswith(b"<<<<<<< "): 1',
        "the regex for a Python definition (def/class)":
            'D = re.compile(r"^\\s*(?:def|class)\\s+(\\w+)")',
        "the regex for a Python assignment": 'A = re.compile(r"^(\\w+)\\s*=(?!=)")',
        "the containment threshold (is patch A contained in B)": "FOLD_CONTAINMENT = 0.5",
        "is a changed line significant": "def _significant(line):\n    return line",
        "the parse of git's raw date": "when = datetime.fromtimestamp(1, tz)",
        "does a patch apply (exactly, else 3-way)": "def _applies(index, patch):\n    return 1",
        "the words for what became of a patch (status enums)":
            "class BumpStatus(str, Enum):\n    CLEAN = 'clean'",
    }
    for question, code in samples.items():
        assert list(OWNERS[question][1](ast.parse(code))), question
