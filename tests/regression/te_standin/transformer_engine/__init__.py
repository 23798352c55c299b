"""Stand-in for Transformer Engine (regression tests only; see ../README.md)."""

import os

__version__ = os.environ.get("TE_STANDIN_VERSION", "2.5.0")
STANDIN = True

from . import common, pytorch  # noqa: E402,F401
