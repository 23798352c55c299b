"""The report as one standalone HTML page (no scripts, no external assets): the view
(``view.py``) drawn with coloured statuses, folds as ``<details>``, interdiffs side by side, and a
link back to the mapping after every entry.
"""

from __future__ import annotations

import difflib
import re
from html import escape

from .model import Report
from .view import Block, Bullets, Code, Document, Para, Section, Span, Table, Text, document

CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#1f2328;max-width:1400px}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.25em;margin:1em 0 .3em}
h3{font-size:1.05em;margin:1.2em 0 .3em;border-top:1px solid #d0d7de;padding-top:.6em}
p{margin:.35em 0}ul{margin:.3em 0}table{border-collapse:collapse;margin:.4em 0}
td,th{border:1px solid #d0d7de;padding:2px 7px;text-align:left;vertical-align:top}
th{background:#f6f8fa}code,pre{font:12px ui-monospace,monospace}
a{color:#0969da;text-decoration:none}.back{font-size:12px}
.st{font-weight:600;padding:0 .45em;border-radius:.6em;white-space:nowrap}
.st-identical,.st-equivalent,.st-empty{background:#dafbe1;color:#116329}
.st-modified{background:#fff1c2;color:#7d4e00}.st-merged,.st-split{background:#ddf4ff;color:#0a3069}
.st-dropped{background:#ffebe9;color:#a40e26}.st-new{background:#fbefff;color:#6e40c9}
.st-upstreamed{background:#eaeef2;color:#424a53}
.rv-yes{color:#a40e26;font-weight:700}.rv-no{color:#57606a}
.sbs td{white-space:pre-wrap;font:12px ui-monospace,monospace;width:50%}
.add{background:#e6ffec}.del{background:#ffebe9}
details{margin:.3em 0}summary{cursor:pointer;color:#57606a}
.mapping td:nth-child(3),.mapping td:nth-child(4),.mapping td:nth-child(5){white-space:nowrap}
.mapping td:nth-child(2){min-width:16em}.mapping td{padding:1px 6px}"""


# how each kind of span is drawn: t = its text, g = its target (both escaped)
_SPAN = {
    "code": "<code>{t}</code>",
    "commit": '<code title="{g}">{t}</code>',
    "patch": '<code title="{g}">{t}</code>',
    "strong": "<b>{t}</b>",
    "status": '<span class="st st-{t}">{t}</span>',
    "link": '<a href="#{g}">{t}</a>',
    "review": '<span class="rv-{g}">{t}</span>',
}
_PR_REF = re.compile(r"#(\d{1,7})\b")


class _Page:
    """One page's drawing, with the web pages its links go to (series.yaml's ``upstream.web``
    and ``fork.web``; none: no links). Every link target is escaped as an attribute."""

    def __init__(self, upstream_web: str, fork_web: str) -> None:
        self.upstream, self.fork = upstream_web, fork_web

    def span(self, s: Span) -> str:
        """A span as HTML: statuses and review answers get a class for their colour; upstream
        commits and ``#N`` pull requests link to their repository when it has a web page."""
        if s.kind == "commit" and self.upstream and s.target:
            drawn = _SPAN["commit"].format(t=escape(s.text), g=escape(s.target))
            return _a(f"{self.upstream}/commit/{s.target}", drawn)
        if s.kind in ("fork-text", "upstream-text"):
            return self.prs(s.text, self.fork if s.kind == "fork-text" else self.upstream)
        return _SPAN.get(s.kind, "{t}").format(t=escape(s.text), g=escape(s.target))

    def prs(self, text: str, web: str) -> str:
        """Text whose ``#N`` link to pull request N of ``web``."""
        if not web:
            return escape(text)
        out, at = [], 0
        for m in _PR_REF.finditer(text):
            out += [escape(text[at:m.start()]),
                    _a(f"{web}/pull/{m.group(1)}", escape(m.group(0)))]
            at = m.end()
        return "".join(out) + escape(text[at:])

    def inline(self, text: Text) -> str:
        return "".join(self.span(s) for s in text)

    def block(self, b: Block) -> list[str]:
        """A block as HTML lines; a fold is a ``<details>``, an interdiff a side-by-side table;
        advice about the command line (markdown only) is left out: a page has no command."""
        if isinstance(b, Para):
            return [] if b.only == "markdown" else [f"<p>{self.inline(b.text)}</p>"]
        if isinstance(b, Bullets):
            return ["<ul>"] + [f"<li>{self.inline(item)}</li>" for item in b.items] + ["</ul>"]
        if isinstance(b, Table):
            head = "".join(f"<th>{escape(h)}</th>" for h in b.head)
            rows = ["<tr>" + "".join(f"<td>{self.inline(c)}</td>" for c in row) + "</tr>"
                    for row in b.rows]
            name = f" class=\"{escape(b.name)}\"" if b.name else ""
            return [f"<table{name}><tr>{head}</tr>"] + rows + ["</table>"]
        if isinstance(b, Code):
            if b.lang == "interdiff":
                return [side_by_side(b.text)]
            return [f"<pre>{escape(b.text)}</pre>"]
        out = [f"<details><summary>{self.inline(b.summary)}</summary>"]
        for inner in b.blocks:
            out += self.block(inner)
        return out + ["</details>"]

    def section(self, s: Section) -> list[str]:
        """A section with an anchor, and a link back to the mapping where the view asks."""
        tag = f"h{s.level}"
        out = [f"<{tag} id=\"{escape(s.anchor)}\">{self.inline(s.title)}</{tag}>"]
        for b in s.blocks:
            out += self.block(b)
        if s.back:
            out.append("<p class=\"back\"><a href=\"#mapping\">↑ mapping</a></p>")
        return out


def _a(href: str, inner: str) -> str:
    return f'<a href="{escape(href, quote=True)}">{inner}</a>'


def render_document(doc: Document) -> str:
    page = _Page(doc.upstream_web, doc.fork_web)
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{escape(doc.title)}</title>", f"<style>{CSS}</style></head><body>"]
    for s in doc.sections:
        out += page.section(s)
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def render_html(report: Report) -> str:
    return render_document(document(report))


def side_by_side(interdiff: str) -> str:
    """An interdiff hunk as a two-column table: the old diff left, the new diff right."""
    left: list[str] = []
    right: list[str] = []
    for line in interdiff.split("\n"):
        if line.startswith("@@"):
            left.append(line)
            right.append(line)
        elif line.startswith("-"):
            left.append(line[1:])
        elif line.startswith("+"):
            right.append(line[1:])
        else:
            left.append(line[1:])
            right.append(line[1:])
    rows = []
    sm = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for tag, a1, a2, b1, b2 in sm.get_opcodes():
        for k in range(max(a2 - a1, b2 - b1)):
            lt = left[a1 + k] if a1 + k < a2 else ""
            rt = right[b1 + k] if b1 + k < b2 else ""
            cls_l = "" if tag == "equal" else (" class=\"del\"" if a1 + k < a2 else "")
            cls_r = "" if tag == "equal" else (" class=\"add\"" if b1 + k < b2 else "")
            rows.append(f"<tr><td{cls_l}>{escape(lt)}</td><td{cls_r}>{escape(rt)}</td></tr>")
    return "<table class=\"sbs\"><tr><th>old</th><th>new</th></tr>" + "".join(rows) + "</table>"
