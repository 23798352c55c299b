"""The house rule, enforced: rebasectl's folders are layers, read bottom up

    infra < model < git < engine < report < commands < front (cli, render, ui, _entry)

and a module imports only its own layer and the layers below it (function-local imports
included: a lazy import is still an arrow). The model imports no git; nothing below the front
writes to the terminal (progress reaches it through a callback the command passes down).
The rule is read from the code with ``ast``, so a new module is checked without being listed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.harness import syntax
from tests.harness.syntax import nodes

PACKAGE = Path(__file__).resolve().parents[2] / "rebasectl"
LAYERS = ["infra", "model", "git", "engine", "report", "commands", "front"]
FRONT = {"cli", "render", "ui", "_entry", "__main__", "__init__"}


def layer_of(module: str) -> str:
    """The layer of a dotted module name under rebasectl (``rebasectl.engine.session``)."""
    parts = module.split(".")
    if len(parts) < 2:
        return "front"
    head = parts[1]
    return head if head in LAYERS else "front"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _tree(source: str | ast.Module) -> ast.Module:
    """A module's tree: the package's own parsed once per process (tests/harness/syntax.py),
    a sample's parsed here."""
    return source if isinstance(source, ast.Module) else ast.parse(source)


def imports_of(source: str | ast.Module, package: str) -> list[tuple[int, str]]:
    """Every rebasectl module a file of ``package`` imports, as (line, dotted name)."""
    found: list[tuple[int, str]] = []
    for node in nodes(_tree(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("rebasectl")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("rebasectl"):
                continue
            if node.module is None or target.count(".") == 0:
                # `from . import x` / `from .. import engine`: each name is a module
                found += [(node.lineno, f"{target}.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, target))
    return found


def modules() -> list[Path]:
    return list(syntax.sources())


def test_layers_are_the_folders() -> None:
    """Every folder of the package is a layer: a new folder must be placed in the order."""
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= set(LAYERS), folders - set(LAYERS)


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_arrow_up(path: Path) -> None:
    own = LAYERS.index(layer_of(_module_name(path)))
    up = [f"{path.name}:{line} imports {target} ({layer_of(target)})"
          for line, target in imports_of(syntax.tree(path), _package_of(path))
          if LAYERS.index(layer_of(target)) > own]
    assert not up, up


def terminal_writes(source: str | ast.Module) -> list[int]:
    """Lines that write to the terminal: print(), click.echo/secho, sys.stdout/sys.stderr,
    a rich Console. Read from the syntax tree, so a string that mentions print() is not one."""
    lines = []
    for node in nodes(_tree(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in {"print", "Console"}:
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and (
                (node.value.id == "sys" and node.attr in {"stdout", "stderr"})
                or (node.value.id == "click" and node.attr in {"echo", "secho"})):
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("path", [p for p in modules() if layer_of(_module_name(p)) != "front"],
                         ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_below_the_front_prints(path: Path) -> None:
    assert terminal_writes(syntax.tree(path)) == []


def test_the_print_rule_sees_writes_and_not_strings() -> None:
    source = ("import sys, click\nprint('x')\nsys.stderr.write('y')\nclick.echo('z')\n"
              "cmd = \"print(1)\"\n")
    assert terminal_writes(source) == [2, 3, 4]


def test_the_rule_sees_a_lazy_import_up() -> None:
    """The checker itself: function-local relative imports from the model upwards are found."""
    source = "def f():\n    from ..engine import session\n    from ..git.repo import Repo\n"
    found = imports_of(source, "rebasectl.model")
    assert found == [(2, "rebasectl.engine"), (3, "rebasectl.git.repo")]
    assert [LAYERS.index(layer_of(t)) > LAYERS.index("model") for _, t in found] == [True, True]
