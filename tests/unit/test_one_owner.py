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

from tests.harness import syntax
from tests.harness.syntax import nodes

PACKAGE = Path(__file__).resolve().parents[2] / "rebasectl"
MARKERS = {"<<<<<<<", "=======", ">>>>>>>", "|||||||"}

Found = Iterator[tuple[int, str]]


@functools.cache
def _docstrings(tree: ast.Module) -> frozenset[int]:
    out: set[int] = set()
    for node in nodes(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return frozenset(out)


def constants(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every str/bytes constant of the code (docstrings left out), as text."""
    return iter(_constants(tree))


@functools.cache
def _constants(tree: ast.Module) -> tuple[tuple[int, str], ...]:
    """``constants`` of a tree, listed once (five questions read them)."""
    skip = _docstrings(tree)
    found = []
    for node in nodes(tree):
        if isinstance(node, ast.Constant) and id(node) not in skip:
            if isinstance(node.value, bytes):
                found.append((node.lineno, node.value.decode("latin-1")))
            elif isinstance(node.value, str):
                found.append((node.lineno, node.value))
    return tuple(found)


def assigned(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Names bound at module or class level (``NAME = ...``, ``NAME: T = ...``)."""
    for node in nodes(tree):
        if isinstance(node, ast.Module | ast.ClassDef):
            for stmt in node.body:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                    [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
                for t in targets:
                    for name in ast.walk(t):
                        if isinstance(name, ast.Name):
                            yield stmt.lineno, name.id


def names(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every name the code reads or binds (a second scanner reading the owner's constants is a
    second scanner all the same)."""
    for node in nodes(tree):
        if isinstance(node, ast.Name):
            yield node.lineno, node.id
        elif isinstance(node, ast.alias):
            yield getattr(node, "lineno", 0), node.name


def functions(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Module-level functions (a method of the same name answers a question of its class)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.lineno, node.name


def classes(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in nodes(tree):
        if isinstance(node, ast.ClassDef):
            yield node.lineno, node.name


def calls(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Attribute and plain calls by name (``datetime.fromtimestamp(...)`` is
    ``fromtimestamp``)."""
    for node in nodes(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) \
                else ""
            yield node.lineno, name


def zero_sha(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``"0" * 40`` written out (the null sha)."""
    for node in nodes(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            parts = [node.left, node.right]
            if any(isinstance(p, ast.Constant) and p.value in ("0", b"0") for p in parts) and \
                    any(isinstance(p, ast.Constant) and p.value == 40 for p in parts):
                yield node.lineno, '"0" * 40'


SHA_CUTS = {7, 9, 12, "SHORT", "SHORT_PROSE"}  # git's --abbrev default, the report's, ours


def sha_slices(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """``x[:12]``, ``x[:7]``, ``x[:SHORT]``: a sha abbreviated by hand instead of by
    ``Oid.short()`` / ``ids.short()`` (any ``[:N]`` with those bounds: a list cut at 12 names
    its bound, as ``SHOWN_IDS``)."""
    for node in nodes(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            cut = node.slice
            bound = cut.upper
            what = bound.value if isinstance(bound, ast.Constant) else \
                bound.id if isinstance(bound, ast.Name) else \
                bound.attr if isinstance(bound, ast.Attribute) else None
            if cut.lower is None and cut.step is None and what in SHA_CUTS:
                yield node.lineno, f"[:{what}]"


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
    "how a sha is abbreviated (no [:12] / [:7] slicing elsewhere)": ("model/ids.py", sha_slices),
    "the abbreviation length of a sha": (
        "model/ids.py",
        _where(assigned, lambda s: s in ("SHORT", "SHORT_PROSE", "SHA_LEN", "ABBREV_LEN"))),
    "the conflict-marker prefixes (the marker scanner)": (
        "engine/conflicts.py", lambda tree: iter([
            *_where(constants, lambda s: s.strip() in MARKERS)(tree),
            *_where(names, lambda s: s.startswith("MARK_"))(tree)])),
    "the regex for a Python definition (def/class)": (
        "model/pysyntax.py", _where(constants, lambda s: re.search(r"def\)?\|", s) is not None
                                  or "(?:def|class)" in s)),
    "the regex for a Python assignment": (
        "model/pysyntax.py", _where(constants, lambda s: "=(?!=)" in s)),
    "the containment threshold (is patch A contained in B)": (
        "model/lines.py", _where(assigned, lambda s: "CONTAIN" in s)),
    "the pairing similarity threshold": (
        "report/lineage.py", _where(assigned, lambda s: "SIMILARITY" in s)),
    "is a file a patch creates one it deletes, moved (git's rename threshold)": (
        "model/lines.py", lambda tree: iter([
            *_where(assigned, lambda s: "RENAME" in s and ("THRESH" in s or "SCORE" in s
                                                         or s == "RENAMED_SHARE"))(tree),
            *_where(functions, lambda s: s.lstrip("_") in ("same_file", "file_similarity",
                                                           "rename_score"))(tree)])),
    "is a changed line significant": (
        "model/lines.py", _where(functions, lambda s: s.lstrip("_") in
                                 ("significant", "significant_lines", "is_significant"))),
    "is a line kept whole in a rewritten one (lost in resolution or not)": (
        "model/lines.py", _where(functions, lambda s: s.lstrip("_") in
                                 ("survives", "survives_in", "kept_in"))),
    "does a patch's added line put back what upstream removed (bump's re-adds, the report's "
    "partial revert)": (
        "engine/carried.py", _where(functions, lambda s: s.lstrip("_") in
                                    ("telling_alone", "removed_upstream", "revert_candidates",
                                     "re_adds", "readds"))),
    "what git's raw date looks like (the pattern; RawDate)": (
        "model/patches.py", _where(constants, lambda s: "[+-]\\d{4}" in s)),
    "a file's git mode (its spelling: 100644, 100755, 120000)": (
        "model/patches.py", _where(constants, lambda s: s in ("100644", "100755", "120000",
                                                            "160000"))),
    "the parse of git's raw date": (
        "model/patches.py", _where(calls, lambda s: s in ("fromtimestamp", "utcfromtimestamp"))),
    "the words for what became of a patch (status enums)": (
        "model/status.py", _where(classes, lambda s: s in (
            "Applied", "StepStatus", "BumpStatus", "MappingStatus", "ProposalState"))),
    "does a patch apply (exactly, else 3-way)": (
        "engine/conflicts.py", _where(functions, lambda s: s.lstrip("_") in ("applies",))),
    "is a line worth blaming (its punctuation pattern, TELLING_CHARS)": (
        "engine/attribution.py", lambda tree: iter([
            *_where(constants, lambda s: "{}:,.;#" in s)(tree),
            *_where(assigned, lambda s: s == "TELLING_CHARS")(tree)])),
}


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    """Every module of the package, parsed once per test process for all the questions (the
    detectors only read the trees; tests/harness/syntax.py walks each tree once)."""
    return [(str(p.relative_to(PACKAGE)), syntax.tree(p)) for p in syntax.sources()]


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
        "how a sha is abbreviated (no [:12] / [:7] slicing elsewhere)": 'x = f"{sha[:12]}"',
        "the conflict-marker prefixes (the marker scanner)": 'if line.startswith(b"<<<<<<< "): 1',
        "the regex for a Python definition (def/class)":
            'D = re.compile(r"^\\s*(?:def|class)\\s+(\\w+)")',
        "the regex for a Python assignment": 'A = re.compile(r"^(\\w+)\\s*=(?!=)")',
        "the containment threshold (is patch A contained in B)": "FOLD_CONTAINMENT = 0.5",
        "is a file a patch creates one it deletes, moved (git's rename threshold)":
            "RENAME_SCORE = 0.5",
        "is a changed line significant": "def _significant(line):\n    return line",
        "is a line kept whole in a rewritten one (lost in resolution or not)":
            "def _survives(a, b):\n    return a in b",
        "does a patch's added line put back what upstream removed (bump's re-adds, the "
        "report's partial revert)": "def revert_candidates(c):\n    return []",
        "the parse of git's raw date": "when = datetime.fromtimestamp(1, tz)",
        "what git's raw date looks like (the pattern; RawDate)":
            'D = re.compile(r"\\d+ [+-]\\d{4}")',
        "a file's git mode (its spelling: 100644, 100755, 120000)": 'mode = "100644"',
        "does a patch apply (exactly, else 3-way)": "def _applies(index, patch):\n    return 1",
        "is a line worth blaming (its punctuation pattern, TELLING_CHARS)":
            'NOISE = re.compile(r"[\\s()\\[\\]{}:,.;#\'\\"]")',
        "the words for what became of a patch (status enums)":
            "class BumpStatus(str, Enum):\n    CLEAN = 'clean'",
    }
    for question, code in samples.items():
        assert list(OWNERS[question][1](ast.parse(code))), question


# The JSON of a result is written by a serialiser, not by the record: engine/serialize.py (the
# engine's records; apply, check's steps, test), commands/serialize.py (bump, blame),
# report/serialize.py (the report). A record keeps its writer only where the JSON is also the
# file its own loader reads back (a proposal, the resolve board) or is the record itself (the
# report's evidence, an open mapping written as the pairing left it).
SERIALISERS = {"engine/serialize.py", "commands/serialize.py", "report/serialize.py"}
OWN_FORMAT = {"engine/proposals/__init__.py", "engine/resolving.py", "report/evidence.py"}


def writers(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Methods that turn a record into JSON (``to_json``, ``*_json``)."""
    for node in nodes(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and (item.name == "to_json" or
                                                          item.name.endswith("_json")):
                    yield item.lineno, f"{node.name}.{item.name}"


def test_serialisation_lives_in_the_serialisers() -> None:
    found = [f"rebasectl/{rel}:{line}: {what}" for rel, tree in _modules()
             if rel not in OWN_FORMAT for line, what in writers(tree)]
    assert not found, ("a record writes its own JSON; put it in "
                       f"{', '.join(sorted(SERIALISERS))}:\n" + "\n".join(found))
    assert list(writers(ast.parse("class Step:\n    def to_json(self):\n        return {}")))
    assert all((PACKAGE / rel).is_file() for rel in SERIALISERS | OWN_FORMAT)


def patch_copies(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Records that copy a patch's identity and content into fields of their own (an id and a
    subject, with its file or its diff) instead of holding the ``SeriesPatch`` (or ``Patch``)."""
    for node in nodes(tree):
        if isinstance(node, ast.ClassDef):
            fields = {s.target.id for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
            if {"id", "subject"} <= fields and fields & {"file", "diff"}:
                yield node.lineno, node.name


def test_one_patch_model() -> None:
    """A patch of the series is model/series_patch.py's SeriesPatch; a stop, a bump outcome, a
    step hold it (docs/design.md, "One model of a patch")."""
    modules = _modules()
    copies = [f"rebasectl/{rel}:{line}: {name}" for rel, tree in modules
              for line, name in patch_copies(tree)]
    assert not copies, "a record copies a patch's fields; hold the SeriesPatch:\n" + \
        "\n".join(copies)
    assert ("model/series_patch.py", "SeriesPatch") in {
        (rel, name) for rel, tree in modules for _, name in classes(tree)}
    assert list(patch_copies(ast.parse(
        "class Stop:\n    id: str\n    file: str\n    subject: str")))
