"""A patch that deletes a file upstream still has is never "upstreamed" (hostile12 #6): its other
change (which upstream also made) made bump call it carried and drop it, exit 0, the deletion
lost; git rebase and git am -3 stop at the modify/delete."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.cli import run
from tests.harness.git import Repo, git, lines

F, H = lines(40, "f"), lines(10, "h")


def test_a_deletion_upstream_did_not_make_keeps_the_patch(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"f.txt": F, "h.txt": H})
    up.branch("feature")
    up.checkout("feature")
    up.commit("fix: drop f, set h 5", {"f.txt": None, "h.txt": H.replace("h 5\n", "X\n")})
    up.checkout("main")
    up.commit("upstream", {"f.txt": F.replace("f 16\n", "UP 16\n"),
                           "h.txt": H.replace("h 5\n", "X\n")})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    git(series, "init", "-q")
    git(series, "add", "-A")
    git(series, "commit", "-q", "-m", "series")
    r = run(series, "bump", "--to", "main", "--upstream", str(up.path), "--json")
    assert r.returncode == 1, r.stderr
    (patch,) = json.loads(r.stdout)["patches"]
    assert patch["status"] == "conflict" and patch["upstream_commit"] is None, patch
    assert [c["kind"] for c in patch["conflicts"]] == ["delete/modify"]
    assert (series / "patches").is_dir() and len(list((series / "patches").iterdir())) == 1
    r = run(series, "apply", "--base", "main")
    assert r.returncode == 1 and "upstream carries it already" not in r.stdout + r.stderr
