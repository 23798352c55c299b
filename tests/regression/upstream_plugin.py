"""pytest plugin (``-p upstream_plugin``) for running upstream Megatron-LM's own unit tests
without Transformer Engine.

Upstream's tests/unit_tests/conftest.py calls ``megatron.core.utils.is_te_min_version`` in an
autouse fixture; at 1dcf0da that raises TypeError when TE is absent (the version is None). This
plugin is imported before any conftest, and makes the probe answer False instead, which is what
"TE not installed" means. Nothing else is changed.
"""

from __future__ import annotations

from typing import Any

import megatron.core.utils as _utils

_original = _utils.is_te_min_version


def _is_te_min_version(version: Any, check_equality: bool = True) -> bool:
    try:
        return bool(_original(version, check_equality))
    except (TypeError, AttributeError):
        return False


_utils.is_te_min_version = _is_te_min_version
