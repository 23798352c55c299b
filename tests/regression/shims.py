"""CPU shims that let upstream Megatron-LM (at 1dcf0da) run without a GPU or Transformer Engine.

Each shim is a context manager or fixture so that a test opts in explicitly; nothing here changes
Megatron's source. Why each exists:

- ``te_absent_shims``: ``megatron.core.utils.is_te_min_version`` raises TypeError when TE is absent
  (``get_te_version()`` returns None), and ``moe_utils.te_general_gemm`` is undefined without TE
  (router gating raises NameError). Both are upstream breakages, not ours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest


@contextlib.contextmanager
def te_absent_shims() -> Iterator[None]:
    """Make upstream's TE version probes and router gemm behave as 'TE not installed'."""
    import megatron.core.utils as mcore_utils

    saved: list[tuple[Any, str, Any]] = []

    def patch(obj: Any, name: str, value: Any) -> None:
        saved.append((obj, name, getattr(obj, name, _MISSING)))
        setattr(obj, name, value)

    original = mcore_utils.is_te_min_version

    def is_te_min_version(version: str, check_equality: bool = True) -> bool:
        try:
            return bool(original(version, check_equality))
        except (TypeError, AttributeError, ImportError):
            return False

    patch(mcore_utils, "is_te_min_version", is_te_min_version)
    try:
        import megatron.core.transformer.moe.moe_utils as moe_utils

        if not hasattr(moe_utils, "te_general_gemm"):
            patch(moe_utils, "te_general_gemm", None)
    except ImportError:
        pass
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            if value is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, value)


_MISSING = object()


@pytest.fixture
def te_absent() -> Iterator[None]:
    with te_absent_shims():
        yield
