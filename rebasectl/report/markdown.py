"""The report as GitHub-flavoured markdown: header, mapping table, one section per entry (files
and +/- per side, identical hunks, interdiff in ``<details>``, upstream commits, series.yaml
why/drop_when, mechanical findings) and a summary table.

Only formats the model; every sentence in it comes from a model field.
"""

from __future__ import annotations

from html import escape

from .model import Entry, PatchInfo, Report

FILE_WORDS = {"identical": "identical", "equivalent": "same change, context moved",
              "modified": "modified", "old-only": "only in old", "new-only": "only in new"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")


def refs(indices: tuple[int, ...], patches: tuple[PatchInfo, ...]) -> str:
    return ", ".join(f"[{i}] {_cell(patches[i - 1].subject)}" for i in indices) or "—"


def entry_title(report: Report, e: Entry) -> str:
    old = "+".join(f"old {i}" for i in e.old)
    new = "+".join(f"new {j}" for j in e.new)
    head = " → ".join(x for x in (old, new) if x)
    p = (report.new.patches[e.new[0] - 1] if e.new else report.old.patches[e.old[0] - 1])
    return f"{head}: {p.subject}"


def flags(e: Entry) -> str:
    out = []
    if e.renumbered:
        out.append("renumbered")
    if e.message_changed:
        out.append("message changed")
    return ", ".join(out)


def render_markdown(report: Report, verbose: bool = False) -> str:
    o, n = report.old, report.new
    out: list[str] = ["# Rebase report", ""]
    out.append(f"- **old** ({_cell(o.label or 'old')}): base `{o.base[:12]}` {o.base_date}"
               f" {_cell(o.base_subject)} — {len(o.patches)} patches")
    out.append(f"- **new** ({_cell(n.label or 'new')}): base `{n.base[:12]}` {n.base_date}"
               f" {_cell(n.base_subject)} — {len(n.patches)} patches")
    out.append(f"- **upstream** between the bases: {report.upstream.commits} commits, "
               f"{report.upstream.files_changed} files changed")
    out += ["", "## Commit mapping", "", "| # | old | new | status | flags |",
            "|---|---|---|---|---|"]
    for k, e in enumerate(report.mapping, start=1):
        out.append(f"| {k} | {refs(e.old, o.patches)} | {refs(e.new, n.patches)} | "
                   f"{e.status} | {flags(e)} |")
    out += ["", "## Entries", ""]
    for k, e in enumerate(report.mapping, start=1):
        out += section(report, k, e)
    out += ["## Summary", "", "| status | entries | old patches | new patches |",
            "|---|---|---|---|"]
    for status in sorted({e.status for e in report.mapping}):
        es = [e for e in report.mapping if e.status == status]
        out.append(f"| {status} | {len(es)} | {sum(len(e.old) for e in es)} | "
                   f"{sum(len(e.new) for e in es)} |")
    changed = [(k, e) for k, e in enumerate(report.mapping, start=1)
               if any(f.status not in ("identical",) for f in e.files)]
    if changed:
        out += ["", "| entry | status | files whose change differs |", "|---|---|---|"]
        for k, e in changed:
            paths = ", ".join(f"`{_cell(f.path)}` ({FILE_WORDS[f.status]})" for f in e.files
                              if f.status != "identical")
            out.append(f"| {k} | {e.status} | {paths} |")
    findings = [f for e in report.mapping for f in e.findings]
    if findings:
        out += ["", "| finding | count |", "|---|---|"]
        for kind in sorted({f.kind for f in findings}):
            out.append(f"| {kind} | {sum(1 for f in findings if f.kind == kind)} |")
    return "\n".join(out).rstrip("\n") + "\n"


def section(report: Report, k: int, e: Entry) -> list[str]:
    o, n = report.old, report.new
    out = [f"### {k}. {_cell(entry_title(report, e))} — {e.status}", ""]
    if e.details:
        out += [e.details, ""]
    if flags(e):
        out += [f"Flags: {flags(e)}.", ""]
    for side, idx, patches in (("old", e.old, o.patches), ("new", e.new, n.patches)):
        for i in idx:
            p = patches[i - 1]
            stats = ", ".join(f"`{f.path}` +{f.added}/-{f.removed}" for f in p.files) or "no diff"
            commit = f"`{p.commit[:12]}`" if p.commit else "—"
            out.append(f"- {side} [{i}] {commit} {_cell(p.subject)} ({_cell(p.author)}, "
                       f"{p.date}): {stats}")
            if p.why:
                out.append(f"  - why: {_cell(p.why)}")
            if p.drop_when:
                out.append(f"  - drop when: {_cell(p.drop_when)}")
    out.append("")
    if e.files:
        out += ["| file | old +/- | new +/- | identical hunks | change |",
                "|---|---|---|---|---|"]
        for f in e.files:
            out.append(f"| `{_cell(f.path)}` | +{f.old_added}/-{f.old_removed} | "
                       f"+{f.new_added}/-{f.new_removed} | {f.identical_hunks} of "
                       f"{f.hunks_old} old / {f.hunks_new} new | {FILE_WORDS[f.status]} |")
        out.append("")
        for f in e.files:
            if f.interdiff:
                fence = "`" * max(3, _longest_run(f.interdiff, "`") + 1)
                out += [f"<details><summary>interdiff <code>{escape(f.path)}</code></summary>",
                        "", f"{fence}diff", f.interdiff, fence, "", "</details>", ""]
    ev = e.evidence
    if ev.get("replay_conflicts"):
        out += ["The old patch replayed 3-way on the new parent conflicts in:", ""]
        for c in ev["replay_conflicts"]:
            hunks = ", ".join(f"`{_cell(h)}`" for h in c["hunks"]) or "the file as a whole"
            out.append(f"- `{_cell(c['path'])}`: {hunks}")
        out.append("")
    if ev:
        shown = "; ".join(f"{key}: {_value(v)}" for key, v in ev.items())
        out += [f"Evidence: {_cell(shown)}", ""]
    if e.upstream_commits:
        out += ["Upstream commits between the bases that changed these lines:", ""]
        for c in e.upstream_commits:
            pr = f" ({c.pr})" if c.pr and c.pr not in c.subject else ""
            out.append(f"- `{c.commit[:12]}` {_cell(c.subject)}{pr} — "
                       f"{', '.join(f'`{p}`' for p in c.paths)}")
        out.append("")
    if e.findings:
        out += ["Checked facts:", ""]
        for fd in e.findings:
            where = f" `{fd.path}`" if fd.path else ""
            by = f" (upstream `{fd.commit[:12]}`)" if fd.commit else ""
            out.append(f"- {fd.kind} ({fd.side} [{fd.index}]){where}: {_cell(fd.text)}{by}")
        out.append("")
    return out


def _longest_run(text: str, char: str) -> int:
    best = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        best = max(best, run)
    return best


def _value(v: object) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return str(v)
