"""Renderers: hostile subjects are escaped (HTML) or cannot break the table (markdown, without
HTML entities), the JSON keeps the design contract's shape, and every patch sits in exactly one
mapping entry."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rebasectl.git import Repo as GitRepo
from rebasectl.report import Side, build_report, render_html, render_markdown, to_json
from rebasectl.report.model import Report
from tests.harness.git import Repo


def _report(tmp: Path) -> Report:
    repo = Repo(tmp / "r")
    base = repo.commit("base", {"a.py": "".join(f"value_{i} = thing({i})\n" for i in range(20))})
    body = (repo.path / "a.py").read_text()
    old = repo.commit("<script>alert(1)</script> | pipe", {"a.py": body.replace(
        "value_5 = thing(5)\n", "value_5 = thing(5) + extra_term\n")})
    repo.checkout("-q", "-b", "new", base)
    new = repo.commit("<script>alert(1)</script> | pipe", {"a.py": body.replace(
        "value_5 = thing(5)\n", "value_5 = thing(5) + other_term\n")})
    return build_report(GitRepo(repo.path), Side(base, [old], None, "o<b>"),
                        Side(base, [new], None, "n"))


def test_html_escapes(tmp_path: Path) -> None:
    page = render_html(_report(tmp_path))
    assert "<script>" not in page and "&lt;script&gt;" in page and "o&lt;b&gt;" in page
    assert page.count("<table class=\"sbs\">") == 1


def test_markdown_has_no_entities_and_table_cells_escape_pipes(tmp_path: Path) -> None:
    md = render_markdown(_report(tmp_path))
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    assert cells[:5] == ["1", "\\<script>alert(1)\\</script> \\| pipe", "1 → 1", "modified",
                         "**yes**"]
    assert "&lt;" not in md and "&gt;" not in md and "&amp;" not in md
    assert not re.search(r"(?<!\\)<script>", md)


def test_verbose_unfolds_the_details(tmp_path: Path) -> None:
    report = _report(tmp_path)
    short, full = render_markdown(report), render_markdown(report, verbose=True)
    assert "```diff" not in short and "```diff" in full
    assert "-+value_5 = thing(5) + extra_term" in full
    assert "**evidence**" in full and "- rule: `similarity`" in full


def test_json_shape(tmp_path: Path) -> None:
    data = json.loads(to_json(_report(tmp_path)))
    assert list(data)[:5] == ["schema", "old", "new", "upstream", "mapping"]
    patch = data["old"]["patches"][0]
    for key in ("index", "id", "commit", "subject", "author", "patch_id", "files"):
        assert key in patch
    entry = data["mapping"][0]
    for key in ("old", "new", "status", "renumbered", "message_changed", "evidence", "details",
                "moved", "review", "files", "upstream_commits", "findings"):
        assert key in entry
    assert entry["review"]["needed"] is True and data["review"] == [1]
    assert entry["files"][0]["hunks"][0]["old_lines"] >= 1
    assert data["upstream"] == {"commits": 0, "files_changed": 0}
