"""End-to-end on a synthetic upstream: import a range, apply it, same tree; export is stable."""

from __future__ import annotations

from pathlib import Path

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo, lines


def test_import_apply_reproduces_tip_tree(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": lines(20), "b.txt": lines(5, "b")})
    up.commit("[1/2] fix: change a", {"a.txt": lines(20).replace("line 3\n", "LINE 3\n")})
    up.commit("feat: add c", {"c.txt": "new\n"})
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..HEAD", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "apply", "--upstream", str(up.path))
    assert r.returncode == 0, r.stderr
    tree = Repo.existing(series / ".rebasectl" / "tree")
    assert tree.tree() == up.tree()
    before = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    assert "0001-change-a.patch" in before
    assert b"Subject: [1/2] fix: change a\n" in before["0001-change-a.patch"]
    r = rebasectl(series, "export")
    assert r.returncode == 0, r.stderr
    after = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    assert after == before
