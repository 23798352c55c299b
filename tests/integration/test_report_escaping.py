"""Text that comes from commits (subjects, file names: the upstream's or a contributor's) shows
in report.md and the bump artifacts' README as text: report.md becomes the bump PR's body, and a
subject ``![x](https://...)`` there was an image (a tracking pixel) or a link. The HTML report
escapes everything already. Checked by rendering the markdown (markdown-it, CommonMark + GFM
tables, as GitHub does) and looking for what it made."""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo, lines

PAYLOAD = "![pixel](https://evil.example/p.png) [click](https://evil.example/c) <img src=x>"
FILE = "docs/[doc](https://evil.example/f).md"


def rendered(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def assert_inert(markdown: str) -> None:
    html = rendered(markdown)
    assert "<img" not in html, html
    assert not re.search(r"<a\s", html), html
    assert "evil.example" in html  # still shown, as text


def _world(tmp: Path) -> tuple[Repo, Path, str, str]:
    """A series whose patch has the payload in its subject and a file name with link syntax;
    the upstream moves twice: once cleanly (new base ``clean``), once over the patch's line
    with the payload in its own subject (``breaking``)."""
    up = Repo(tmp / "up")
    base = up.commit("base", {"a.txt": lines(20, "a")})
    up.branch("feature")
    up.checkout("feature")
    up.commit(f"feat: {PAYLOAD}", {"a.txt": lines(20, "a").replace("a 5\n", "P 5\n"),
                                   FILE: "doc\n"})
    up.checkout("main")
    clean = up.commit(f"chore: {PAYLOAD}", {"other.txt": "o\n"})
    up.branch("clean")
    breaking = up.commit(f"fix: {PAYLOAD}", {"a.txt": lines(20, "a").replace("a 5\n", "U 5\n")})
    series = tmp / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..feature", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    return up, series, clean, breaking


def test_report_md_escapes_link_and_image_syntax(tmp_path: Path) -> None:
    """Finding 7: the bump's report.md (the PR body; `rebasectl report` renders it alike)."""
    up, series, clean, _ = _world(tmp_path)
    r = rebasectl(series, "bump", "--to", clean, "--upstream", str(up.path), "--artifacts",
                  "art", timeout=300)
    assert r.returncode == 0, r.stderr
    report = (series / "art" / "report.md").read_text()
    assert "evil.example/p.png" in report
    assert_inert(report)


def test_conflict_readme_escapes_subjects_and_paths(tmp_path: Path) -> None:
    """The README of a conflicting bump names the patch's subject and the upstream commits
    that broke it (their subjects are the upstream's to choose)."""
    up, series, _, breaking = _world(tmp_path)
    r = rebasectl(series, "bump", "--to", breaking, "--upstream", str(up.path), "--artifacts",
                  "art", timeout=300)
    assert r.returncode == 1, r.stderr
    readme = (series / "art" / "README.md").read_text()
    assert "fix: " in readme and "evil.example" in readme
    assert_inert(readme)
