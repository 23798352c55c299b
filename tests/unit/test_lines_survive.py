"""``model/lines.survives``: a line the old patch added is kept (not "lost in resolution") when
a rewritten line holds all of it, only widened by whole items of its bracketed lists. Precision
over recall: a changed value, a dropped token, a ``not`` or a wrapping call is not "kept"."""

from __future__ import annotations

import pytest

from rebasectl.model.lines import survives

JUNE_OLD = "def __init__(self, allow_partial_load: bool = False):"
JUNE_NEW = "def __init__(self, cache_metadata: bool = False, allow_partial_load: bool = False):"


@pytest.mark.parametrize(("line", "rewritten"), [
    (JUNE_OLD, JUNE_NEW),  # hostile 6 #12: upstream widened the signature, both kept
    ("x = load(path, strict=True)", "x = load(path, strict=True, mmap=mmap)"),
    ("f(a, b)", "f(a, c, b)"),
    ("f(a)", "f(a, g(b), c)"),  # an item that holds brackets itself
    ("def g():", "def g(tag, enable_cpu_backup):"),  # an empty list filled
    ('f("x, y")', 'f("x, y", z)'),  # a string is one token
    ("f(a, b)", "f(a,  b)"),  # spacing is no change
])
def test_kept_in_a_widened_line(line: str, rewritten: str) -> None:
    assert survives(line, rewritten)


@pytest.mark.parametrize(("line", "rewritten"), [
    (JUNE_OLD, "def __init__(self, cache_metadata: bool = False):"),  # the parameter dropped
    ("self.allow_partial_load = allow_partial_load", "self.allow_partial_load = False"),
    ("x = load(path, strict=True)", "x = load(path, strict=False, mmap=True)"),
    ("if x: return a", "if not x: return a"),
    ("x = a", "x = a, b"),  # a tuple now: the item is not inside brackets
    ("x = foo(a)", "x = bar(foo(a))"),
    ("f(a)", "f(a, b) + 1"),
    ("f(a, b)", "f(a, x, y=b)"),  # b is now another parameter's value
    ("f(a, b)", "f(a, -b)"),
    ("a = b", "a == b"),
    ("extra_5 = build_extra(5).detach()", "extra_9 = build_extra(9).detach()"),
    ("", "f(a)"),
])
def test_not_kept(line: str, rewritten: str) -> None:
    assert not survives(line, rewritten)


def test_a_long_line_is_answered() -> None:
    """Many items to skip: the search is memoised (and a line is cut off at 400 tokens)."""
    line = "x = f(" + ", ".join(f"a{i}" for i in range(60)) + ")"
    wide = "x = f(" + ", ".join(f"a{i}, b{i}" for i in range(60)) + ")"
    assert survives(line, wide)
    assert not survives(line, wide.replace("a59", "c59"))
