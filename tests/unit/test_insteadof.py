"""The user's ``url.<base>.insteadOf`` applies when rebasectl talks to the upstream (docs/design.md:
"Git's own url.<base>.insteadOf works too"), although everything else runs hermetically."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo, lines


def test_series_url_redirected_by_insteadof(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": lines(5)})
    up.commit("feat: x", {"a.txt": lines(6)})
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..HEAD", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    text = (series / "series.yaml").read_text().replace(str(up.path),
                                                         "https://example.invalid/up.git")
    (series / "series.yaml").write_text(text)
    subprocess.run(["git", "config", "--global", f"url.{up.path}.insteadOf",
                    "https://example.invalid/up.git"], check=True, env=dict(os.environ))
    r = rebasectl(series, "apply")
    assert r.returncode == 0, r.stderr
    assert (series / ".rebasectl" / "tree" / "a.txt").read_text() == lines(6)
