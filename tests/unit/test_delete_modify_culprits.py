"""A patch that deletes a file upstream changed (delete/modify) names the upstream commits that
changed it, as a content region names its culprits (hostile11 #8: "no upstream commit found"
and ``culprits: []`` while the same bump.json's ``first_break`` and ``blame`` named the
commit): in bump's JSON (region and patch), its terminal lines, its annotations, blame, and the
line apply's stop prints."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.git import lines
from tests.synth import rebasectl
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import imported

TERMINAL = {"GITHUB_ACTIONS": "", "REBASECTL_ANNOTATE": ""}


def _deleting(tmp: Path) -> tuple[Fork, Path, list[str]]:
    """p1 edits f.txt line 10, p2 deletes f.txt; upstream changes f.txt twice (lines 12 and
    30) and g.txt once (not a culprit)."""
    fork = Fork(tmp, {"f.txt": lines(40), "g.txt": lines(5, "g")})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    fork.up.commit("feat: ten", {"f.txt": lines(40).replace("line 10\n", "P 10\n")})
    tip = fork.up.commit("feat: drop f", {"f.txt": None})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp, fork, tip)
    changed = [fork.change("upstream edits 12", {"f.txt": ("line 12\n", "UP 12\n")}),
               fork.change("upstream edits g", {"g.txt": ("g 2\n", "G 2\n")}),
               fork.change("upstream edits 30", {"f.txt": ("line 30\n", "UP 30\n")})]
    return fork, series, [changed[0], changed[2]]


def test_bump_names_the_commits_that_changed_the_deleted_file(tmp_path: Path) -> None:
    fork, series, changed = _deleting(tmp_path)
    art = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  "--artifacts", str(art), env=TERMINAL)
    assert r.returncode == 1, r.stderr
    one, two = json.loads(r.stdout)["patches"]
    assert one["status"] == "clean" and two["status"] == "conflict"
    (gone,) = two["conflicts"]
    assert gone["kind"] == "delete/modify"
    (region,) = gone["regions"]
    assert region["culprits"] == changed and region["preimage_lines"] == [1, 40]
    assert [c["commit"] for c in two["culprits"]] == changed
    assert two["first_break"]["commit"] == changed[0]
    short = changed[0][:12]
    assert f"2/2 {two['id']}: conflict; 1 region; first culprit {short}" in r.stderr, r.stderr
    assert f"f.txt: delete/modify; changed upstream by {short} and 1 more" in \
        (art / "regions.txt").read_text()
    assert "no upstream commit found" not in r.stderr + (art / "regions.txt").read_text()
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(tmp_path / "art2"), env={"REBASECTL_ANNOTATE": "1"})
    assert f"delete/modify: f.txt; changed upstream by {short} and 1 more" in r.stderr, r.stderr
    # blame agrees with the bump
    r = rebasectl(series, "blame", two["id"], "--to", "main", "--json", env=TERMINAL)
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert [c["commit"] for c in data["culprits"]] == changed, data
    assert data["first_break"]["commit"] == changed[0]


def test_apply_stop_names_them(tmp_path: Path) -> None:
    fork, series, changed = _deleting(tmp_path)
    r = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path),
                  env=TERMINAL)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("f.txt: delete/modify: the patch deletes this file, which upstream changed; "
            f"changed upstream by {changed[0][:12]}, {changed[1][:12]}") in r.stdout, r.stdout
