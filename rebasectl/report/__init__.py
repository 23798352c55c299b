"""The rebase report: model, builder and the markdown / HTML / JSON renderers.

``build_report`` pairs and classifies two materialised series (``lineage``) and gathers the facts
around them (upstream range, attribution, mechanical checks); the renderers only format the model.
"""

from __future__ import annotations

from .build import build_report
from .html import render_html
from .markdown import render_markdown
from .model import Entry, Report, Side
from .serialize import to_data, to_json

__all__ = ["Entry", "Report", "Side", "build_report", "render_html", "render_markdown",
           "to_data", "to_json"]
