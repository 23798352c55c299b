"""The report as one standalone HTML page (no scripts, no external assets): the same content as
the markdown, with coloured side-by-side interdiffs."""

from __future__ import annotations

import difflib
import json
from html import escape

from .markdown import FILE_WORDS, entry_title, flags
from .model import Entry, Report

CSS = """body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#1f2328}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top}code,pre{font:12px ui-monospace,monospace}
.sbs td{white-space:pre-wrap;font:12px ui-monospace,monospace;width:50%}
.add{background:#e6ffec}.del{background:#ffebe9}.chg{background:#fff8c5}
.st{font-weight:bold}"""


def render_html(report: Report) -> str:
    o, n = report.old, report.new
    h = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\"><title>Rebase report</title>",
         f"<style>{CSS}</style></head><body>", "<h1>Rebase report</h1><ul>"]
    for word, side in (("old", o), ("new", n)):
        h.append(f"<li><b>{word}</b> ({escape(side.label or word)}): base "
                 f"<code>{side.base[:12]}</code> {escape(side.base_date)} "
                 f"{escape(side.base_subject)} — {len(side.patches)} patches</li>")
    h.append(f"<li><b>upstream</b> between the bases: {report.upstream.commits} commits, "
             f"{report.upstream.files_changed} files changed</li></ul>")
    h.append("<h2>Commit mapping</h2><table><tr><th>#</th><th>old</th><th>new</th>"
             "<th>status</th><th>flags</th></tr>")
    for k, e in enumerate(report.mapping, start=1):
        old = "<br>".join(f"[{i}] {escape(o.patches[i - 1].subject)}" for i in e.old) or "—"
        new = "<br>".join(f"[{j}] {escape(n.patches[j - 1].subject)}" for j in e.new) or "—"
        h.append(f"<tr><td><a href=\"#e{k}\">{k}</a></td><td>{old}</td><td>{new}</td>"
                 f"<td class=\"st\">{e.status}</td><td>{escape(flags(e))}</td></tr>")
    h.append("</table><h2>Entries</h2>")
    for k, e in enumerate(report.mapping, start=1):
        h += _section(report, k, e)
    h.append("<h2>Summary</h2><table><tr><th>status</th><th>entries</th></tr>")
    for status in sorted({e.status for e in report.mapping}):
        h.append(f"<tr><td>{status}</td>"
                 f"<td>{sum(1 for e in report.mapping if e.status == status)}</td></tr>")
    h.append("</table></body></html>")
    return "\n".join(h) + "\n"


def _section(report: Report, k: int, e: Entry) -> list[str]:
    o, n = report.old, report.new
    h = [f"<h3 id=\"e{k}\">{k}. {escape(entry_title(report, e))} — {e.status}</h3>"]
    if e.details:
        h.append(f"<p>{escape(e.details)}</p>")
    h.append("<ul>")
    for side, idx, patches in (("old", e.old, o.patches), ("new", e.new, n.patches)):
        for i in idx:
            p = patches[i - 1]
            stats = ", ".join(f"<code>{escape(f.path)}</code> +{f.added}/-{f.removed}"
                              for f in p.files) or "no diff"
            extra = ""
            if p.why:
                extra += f"<br>why: {escape(p.why)}"
            if p.drop_when:
                extra += f"<br>drop when: {escape(p.drop_when)}"
            h.append(f"<li>{side} [{i}] <code>{(p.commit or '')[:12]}</code> "
                     f"{escape(p.subject)}: {stats}{extra}</li>")
    h.append("</ul>")
    if e.files:
        h.append("<table><tr><th>file</th><th>old +/-</th><th>new +/-</th>"
                 "<th>identical hunks</th><th>change</th></tr>")
        for f in e.files:
            h.append(f"<tr><td><code>{escape(f.path)}</code></td><td>+{f.old_added}/-"
                     f"{f.old_removed}</td><td>+{f.new_added}/-{f.new_removed}</td><td>"
                     f"{f.identical_hunks} of {f.hunks_old} / {f.hunks_new}</td>"
                     f"<td>{FILE_WORDS[f.status]}</td></tr>")
        h.append("</table>")
        for f in e.files:
            if f.interdiff:
                h.append(f"<details><summary>interdiff <code>{escape(f.path)}</code></summary>")
                h.append(side_by_side(f.interdiff))
                h.append("</details>")
    if e.evidence:
        shown = json.dumps(e.evidence, indent=1, ensure_ascii=False)
        h.append(f"<details><summary>evidence</summary><pre>{escape(shown)}</pre></details>")
    if e.upstream_commits:
        h.append("<p>Upstream commits between the bases that changed these lines:</p><ul>")
        for c in e.upstream_commits:
            pr = f" ({escape(c.pr)})" if c.pr and c.pr not in c.subject else ""
            h.append(f"<li><code>{c.commit[:12]}</code> {escape(c.subject)}{pr} — "
                     f"{escape(', '.join(c.paths))}</li>")
        h.append("</ul>")
    if e.findings:
        h.append("<p>Checked facts:</p><ul>")
        for fd in e.findings:
            where = f" <code>{escape(fd.path)}</code>" if fd.path else ""
            by = f" (upstream <code>{fd.commit[:12]}</code>)" if fd.commit else ""
            h.append(f"<li>{fd.kind} ({fd.side} [{fd.index}]){where}: {escape(fd.text)}{by}</li>")
        h.append("</ul>")
    return h


def side_by_side(interdiff: str) -> str:
    """A unified interdiff as a two-column table: old diff left, new diff right."""
    left: list[str] = []
    right: list[str] = []
    for line in interdiff.split("\n")[2:]:
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
            cls_l = "" if tag == "equal" else (" class=\"del\"" if lt else "")
            cls_r = "" if tag == "equal" else (" class=\"add\"" if rt else "")
            rows.append(f"<tr><td{cls_l}>{escape(lt)}</td><td{cls_r}>{escape(rt)}</td></tr>")
    return "<table class=\"sbs\"><tr><th>old</th><th>new</th></tr>" + "".join(rows) + "</table>"
