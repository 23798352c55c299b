"""A patch that deletes a file upstream still has is never "upstreamed" (hostile12 #6): its other
change (which upstream also made) made bump call it carried and drop it, exit 0, the deletion
lost; git rebase and git am -3 stop at the modify/delete."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.cli import run
from tests.harness.git import lines
from tests.harness.scenes import forked, imported

F, H = lines(40, "f"), lines(10, "h")


def test_a_deletion_upstream_did_not_make_keeps_the_patch(tmp_path: Path) -> None:
    h5 = H.replace("h 5\n", "X\n")
    up, base = forked(tmp_path, {"f.txt": F, "h.txt": H},
                      [("fix: drop f, set h 5", {"f.txt": None, "h.txt": h5})],
                      [("upstream", {"f.txt": F.replace("f 16\n", "UP 16\n"), "h.txt": h5})])
    series = imported(tmp_path, up, base)
    r = run(series, "bump", "--to", "main", "--upstream", str(up.path), "--json")
    assert r.returncode == 1, r.stderr
    (patch,) = json.loads(r.stdout)["patches"]
    assert patch["status"] == "conflict" and patch["upstream_commit"] is None, patch
    assert [c["kind"] for c in patch["conflicts"]] == ["delete/modify"]
    assert (series / "patches").is_dir() and len(list((series / "patches").iterdir())) == 1
    r = run(series, "apply", "--base", "main")
    assert r.returncode == 1 and "upstream carries it already" not in r.stdout + r.stderr
