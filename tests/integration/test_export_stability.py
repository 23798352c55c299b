"""What rebasectl writes, it reads back the same: apply then export of a series rebasectl itself
wrote changes nothing, whatever shape a commit message has."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.harness.cli import ok
from tests.harness.git import Repo
from tests.sfix import snapshot


def test_a_subject_wrapped_over_two_lines_exports_stably(tmp_path: Path) -> None:
    """Finding 4: a subject wrapped over two lines was exported with its first line as
    ``title:`` while the patch file has both; the next apply + export changed series.yaml again
    (and the PR check failed on a series rebasectl wrote)."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": "a\n", "b.txt": "b\n"})
    up.branch("feature")
    up.checkout("feature")
    up.commit("fix: a subject long enough that someone wrapped it\nonto a second line\n\n"
              "The body.\n", {"a.txt": "A\n"})
    up.commit("feat: a plain one", {"b.txt": "B\n"})
    up.checkout("main")
    series = tmp_path / "series"
    series.mkdir()
    ok(series, "import", f"{base}..feature", "--repo", str(up.path))
    whole = "fix: a subject long enough that someone wrapped it onto a second line"
    assert f"title: '{whole}'" in (series / "series.yaml").read_text()
    ok(series, "check")
    first = snapshot(series)
    ok(series, "apply", "--upstream", str(up.path))
    assert "0 files changed" in ok(series, "export").stdout
    assert snapshot(series) == first
    # the same commit made again in the work tree (message as the author wrote it): stable too
    tree = series / ".rebasectl" / "tree"
    subprocess.run(["git", "-C", str(tree), "reset", "-q", "--hard", "HEAD~2"], check=True)
    for sha in (up.git("rev-parse", "feature~1"), up.git("rev-parse", "feature")):
        subprocess.run(["git", "-C", str(tree), "cherry-pick", "--allow-empty", sha],
                       capture_output=True, check=True)
    ok(series, "export")
    after_wrapped = snapshot(series)
    assert after_wrapped["series.yaml"] == first["series.yaml"]
    ok(series, "apply", "--upstream", str(up.path))
    assert "0 files changed" in ok(series, "export").stdout
    assert snapshot(series) == after_wrapped
