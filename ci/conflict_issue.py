#!/usr/bin/env python3
"""The body of the bump's tracking issue, from bump.json (rebasectl.bump/1): which patches break
at the upstream's tip, since which upstream commit, each conflict region with the commits that
changed its lines, and the proposal for it when ``bump --propose`` made one (older rebasectl
versions make none: the section is then left out). Markdown on stdout, under GitHub's 65536
characters for an issue body.

    python3 ci/conflict_issue.py ARTIFACTS/rebasectl/bump.json
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

LIMIT = 60000


SUBJECTS: dict[str, str] = {}  # sha -> subject, from every culprit that names one


def commit(c: dict[str, Any] | str | None) -> str:
    """`<sha12>` subject, for a commit given as a bump.json object or as a bare sha."""
    if not c:
        return "—"
    sha = c if isinstance(c, str) else str(c["commit"])
    subject = SUBJECTS.get(sha, "") if isinstance(c, str) else c.get("subject", "")
    return f"`{sha[:12]}` {subject}".strip()


def region(r: dict[str, Any]) -> list[str]:
    lines = r.get("upstream_lines") or []
    where = f"{r['path']}:{lines[0]}-{lines[1]}" if len(lines) == 2 else r["path"]
    out = [f"- `{where}`"]
    for c in r.get("culprits", [])[:5]:
        out.append(f"  - changed by {commit(c)}")
    proposal = r.get("proposal")
    if proposal:
        out.append(f"  - proposal (`{proposal.get('rule', '?')}`): "
                   f"`rebasectl resolve --accept {r.get('id', '')}`".rstrip())
        if proposal.get("diff"):
            out += ["", "    ```diff", *("    " + x for x in proposal["diff"].splitlines()),
                    "    ```"]
    return out


def patch(p: dict[str, Any]) -> list[str]:
    out = [f"### {p['index']}. `{p['id']}` — {p['status']}", "", f"{p.get('subject', '')}", ""]
    if p.get("blocked_by"):
        out.append(f"Blocked by: {', '.join(p['blocked_by'])}.")
    if p.get("upstream_commit"):
        out.append(f"Upstream already carries it: {commit(p['upstream_commit'])}.")
    out.append(f"Breaks since: {commit(p.get('first_break'))}"
               + (f"; for good since {commit(p['permanent_break'])}"
                  if p.get("permanent_break") and p["permanent_break"] != p.get("first_break")
                  else ""))
    out.append("")
    regions = [r for c in p.get("conflicts", []) for r in _regions(c)]
    if regions:
        out.append("Regions:")
        for r in regions:
            out += region(r)
        out.append("")
    return out


def _regions(conflict: dict[str, Any]) -> list[dict[str, Any]]:
    """bump.json's conflicts: one per file, its regions inline or as a list."""
    inner = conflict.get("regions")
    if isinstance(inner, list):
        return [{"path": conflict["path"], **r} for r in inner]
    return [conflict]


def render(data: dict[str, Any]) -> str:
    failing = [p for p in data["patches"] if p["status"] not in ("clean", "empty")]
    for p in data["patches"]:
        for c in p.get("culprits", []):
            if isinstance(c, dict) and c.get("subject"):
                SUBJECTS[str(c["commit"])] = str(c["subject"])
    proposals = any(r.get("proposal") for p in failing for c in p.get("conflicts", [])
                    for r in _regions(c))
    head = [
        "<!-- rebasectl-bump-conflict: kept current by the daily upstream-bump job -->",
        f"The series (on `{data['from'][:12]}`) does not carry onto the upstream's tip "
        f"`{data['to'][:12]}` ({data.get('upstream_commits', '?')} upstream commits): "
        f"{len(failing)} of {len(data['patches'])} patches need a hand.",
        "",
        "| # | patch | status | breaks since |",
        "|---|---|---|---|",
        *(f"| {p['index']} | `{p['id']}` | {p['status']} | {commit(p.get('first_break'))} |"
          for p in failing),
        "",
    ]
    run = os.environ.get("RUN_URL")
    if run:
        head.append(f"Artifacts (resumable, with the diff3 files): {run}")
    head += ["To resolve: `rebasectl apply --base " + data["to"][:12] + "`, fix the regions in "
             "`.rebasectl/tree`, `rebasectl continue`, `rebasectl export`, open a PR."
             + (" Proposals below: `rebasectl resolve --list`." if proposals else ""), ""]
    body = "\n".join(head + [x for p in failing for x in patch(p)])
    if len(body) > LIMIT:
        body = (body[:LIMIT]
                + "\n\n_(truncated: the run's artifacts hold bump.json and README.md)_\n")
    return body


if __name__ == "__main__":
    sys.stdout.write(render(json.load(open(sys.argv[1], encoding="utf-8"))))
