"""Stand-in: transformer_engine.common (recipes only)."""

from . import recipe  # noqa: F401
