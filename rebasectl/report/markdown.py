"""The report as GitHub-flavoured markdown: the view (``view.py``) written out.

No HTML entities: a ``<`` that could open a tag is backslash-escaped, a ``|`` inside a table cell
too, code goes in backtick spans long enough for its own backticks. Folds (interdiffs, replay
conflicts, evidence) appear only with ``verbose``, unfolded: a terminal has no ``<details>``.
"""

from __future__ import annotations

import re

from .model import Report
from .view import Block, Bullets, Code, Document, Para, Section, Span, Table, Text, document

_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def escape(text: str, cell: bool = False) -> str:
    """Text from a commit, a file name or series.yaml as markdown that shows it and nothing
    else: no emphasis, no code span, no HTML tag, and no link or image (``[``/``]`` escaped: a
    subject ``![x](https://...)`` became an image in report.md, the bump PR's body)."""
    out = text.replace("\\", "\\\\").replace("*", "\\*").replace("`", "\\`")
    out = out.replace("[", "\\[").replace("]", "\\]")
    out = _TAG.sub("\\<", out)
    if cell:
        out = out.replace("|", "\\|").replace("\n", " ")
    return out


_plain = escape


def code_span(text: str, cell: bool = False) -> str:
    """``text`` as a code span whose fence is longer than any backtick run in it."""
    return _code(text, cell)


def _code(text: str, cell: bool) -> str:
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    body = text.replace("|", "\\|").replace("\n", " ") if cell else text
    return f"{fence}{pad}{body}{pad}{fence}"


def span(s: Span, cell: bool = False) -> str:
    """A span as markdown: commits and code in backticks, the review answer in bold when yes."""
    if s.kind in ("code", "commit", "patch"):
        return _code(s.text, cell)
    if s.kind == "strong":
        return f"**{_plain(s.text, cell)}**"
    if s.kind == "review" and s.target == "yes":
        return "**yes**"
    return _plain(s.text, cell)


def inline(text: Text, cell: bool = False) -> str:
    return "".join(span(s, cell) for s in text)


def block(b: Block, verbose: bool) -> list[str]:
    """A block as markdown lines; a fold only with ``verbose``, unfolded under a bold title."""
    if isinstance(b, Para):
        return [inline(b.text), ""]
    if isinstance(b, Bullets):
        return [f"- {inline(item)}" for item in b.items] + [""]
    if isinstance(b, Table):
        out = ["| " + " | ".join(b.head) + " |", "|" + "---|" * len(b.head)]
        out += ["| " + " | ".join(inline(c, cell=True) for c in row) + " |" for row in b.rows]
        return out + [""]
    if isinstance(b, Code):
        runs = [len(m) for m in re.findall(r"^`{3,}", b.text, re.M)]
        fence = "`" * max(3, max(runs, default=0) + 1)
        lang = "diff" if b.lang == "interdiff" else b.lang
        return [f"{fence}{lang}", b.text, fence, ""]
    if not verbose:
        return []
    out = [f"**{inline(b.summary)}**", ""]
    for inner in b.blocks:
        out += block(inner, verbose)
    return out


def section(s: Section, verbose: bool) -> list[str]:
    out = ["#" * s.level + " " + inline(s.title), ""]
    for b in s.blocks:
        out += block(b, verbose)
    return out


def render_document(doc: Document, verbose: bool = False) -> str:
    out: list[str] = []
    for s in doc.sections:
        out += section(s, verbose)
    return "\n".join(out).rstrip("\n") + "\n"


def render_markdown(report: Report, verbose: bool = False) -> str:
    """The report as markdown; ``verbose`` unfolds every detail (interdiffs, evidence)."""
    return render_document(document(report), verbose)
