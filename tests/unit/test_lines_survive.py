"""``model/lines.survives``: a line the old patch added is kept (not "lost in resolution") when
a rewritten line holds all of it, only widened by parameters of its ``def`` or keyword
arguments of a call. Precision over recall: a changed value, a dropped token, a ``not``, a
wrapping call, a positional argument or a list item is not "kept"."""

from __future__ import annotations

import pytest

from rebasectl.model.lines import survives

JUNE_OLD = "def __init__(self, allow_partial_load: bool = False):"
JUNE_NEW = "def __init__(self, cache_metadata: bool = False, allow_partial_load: bool = False):"


@pytest.mark.parametrize(("line", "rewritten"), [
    (JUNE_OLD, JUNE_NEW),  # hostile 6 #12: upstream widened the signature, both kept
    # the grown June report: true-on-policy's layer_norm gained has_residual upstream
    ("def layer_norm(self, rms_norm: bool = False, for_qk: bool = False):",
     "def layer_norm(self, rms_norm: bool = False, for_qk: bool = False, "
     "has_residual: bool = False):"),
    ("x = load(path, strict=True)", "x = load(path, strict=True, mmap=mmap)"),
    ("x = load(path)", "x = load(path, mode=pick(a, b), **extra)"),  # brackets in an item
    ("x = load()", "x = load(mmap=True)"),  # an empty list filled
    ("def g():", "def g(tag, enable_cpu_backup):"),
    ("def g(a, *, b=(1, 2)):", "def g(a, *, b=(1, 2), c=3):"),
    ('f("x, y")', 'f("x, y", z=1)'),  # a string is one token
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
    # the grown June report: the shape without the hc dimension is not the one with it
    ("tensor_shape = [seq_length, micro_batch_size, config.hidden_size]",
     "tensor_shape = [seq_length, micro_batch_size, config.dsv4_hc_mult, config.hidden_size]"),
    ("f(a, b)", "f(a, c, b)"),  # a positional argument moves the ones after it
    ("x = foo()", "x = foo(b)"),
    ("def g(a, b=(1, 2)):", "def g(a, b=(1, 3, 2)):"),  # a default's tuple, not a parameter
    ("f(a, b)", "f(a, k==1, b)"),
    ("x = {a: 1}", "x = {a: 1, b: 2}"),
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
    line = "def f(" + ", ".join(f"a{i}" for i in range(60)) + "):"
    wide = "def f(" + ", ".join(f"a{i}, b{i}=None" for i in range(60)) + "):"
    assert survives(line, wide)
    assert not survives(line, wide.replace("a59", "c59"))
