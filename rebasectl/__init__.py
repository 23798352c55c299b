"""rebasectl: carry a downstream patch series on a fast-moving upstream, and explain every bump."""

__version__ = "0.1.0"
