"""Patches that depend on each other, read from the series itself (model/dependencies.py), and
what bump and apply say of them on synthetic upstreams: a patch whose lines or file come from an
earlier patch that failed (or was skipped) is ``blocked`` by it, never ``upstreamed``, never a
modify/delete; a patch whose lines upstream landed is ``upstreamed`` naming the commit."""

from __future__ import annotations

import json
from pathlib import Path

from rebasectl.git import Repo as GitRepo
from rebasectl.model.dependencies import SeriesLines
from tests.synth import lines, rebasectl
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import TERMINAL, imported

FEATURE = "line 10\nfeature = enabled()\n"


def _series(tmp: Path) -> tuple[Fork, Path, dict[str, str]]:
    """p1 changes a.txt and creates new.txt; p2 edits new.txt; p3 takes out the line p1 added;
    p4 is a change upstream lands as it is; upstream then rewrites the line p1 needed."""
    fork = Fork(tmp, {"a.txt": lines(30), "b.txt": lines(30, "b")})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    p1 = fork.up.commit("feat: one", {"a.txt": lines(30).replace("line 10\n", FEATURE),
                                      "new.txt": "def helper():\n    return compute_value()\n"})
    p2 = fork.up.commit("feat: two uses the helper", {
        "new.txt": "def helper():\n    return compute_value(strict=True)\n"})
    p3 = fork.up.commit("fix: three drops the feature line", {"a.txt": lines(30)})
    p4 = fork.up.commit("feat: four", {"b.txt": lines(30, "b").replace(
        "b 20\n", "b 20\nlanded_upstream = yes_indeed()\n")})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp, fork, p4)
    commits = {
        "culprit": fork.change("upstream rewrites line 10", {"a.txt": ("line 10\n", "TEN\n")}),
        "landed": fork.change("upstream lands four", {
            "b.txt": ("b 20\n", "b 20\nlanded_upstream = yes_indeed()\n")}),
    }
    del p1, p2, p3
    return fork, series, commits


def test_series_lines_know_who_wrote_what(tmp_path: Path) -> None:
    fork, _, _ = _series(tmp_path)
    git = GitRepo(fork.up.path)
    stack = fork.stack(git.history.rev_list([f"{fork.base}..fork"]))
    deps = SeriesLines(stack)
    assert deps.creator(1, "new.txt") == "p1" and deps.creator(0, "new.txt") is None
    assert deps.owners(2, "a.txt", [10, 11]) == ["p1"]  # p1 wrote "feature = enabled()"
    assert deps.owners(2, "a.txt", [9, 12]) == []  # upstream's lines
    assert deps.blockers(1, stack[1].patch, ["p1"]) == ["p1"]
    assert deps.blockers(3, stack[3].patch, ["p1"]) == []


def test_bump_blocked_by_an_earlier_conflict_never_upstreamed_or_deleted(tmp_path: Path) -> None:
    fork, series, commits = _series(tmp_path)
    out = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  "--artifacts", str(out), env=TERMINAL)
    assert r.returncode == 1, r.stderr
    one, two, three, four = json.loads(r.stdout)["patches"]
    assert one["status"] == "conflict"
    assert [c["commit"] for c in one["culprits"]] == [commits["culprit"]]
    # two edits a file one creates: blocked by one; the file is missing, not deleted upstream
    assert two["status"] == "blocked" and two["blocked_by"] == [one["id"]]
    (missing,) = two["conflicts"]
    assert missing["kind"] == "missing" and missing["deleted_by"] is None
    assert missing["blocked_by"] == one["id"] and two["culprits"] == []
    # three takes out a line one added: with one left out it "applies", but it is one's
    assert three["status"] == "blocked" and three["blocked_by"] == [one["id"]]
    assert three["upstream_commit"] is None
    # four: upstream carries its lines, named by the commit that brought them
    assert four["status"] == "upstreamed" and four["upstream_commit"] == commits["landed"]
    assert four["carried"]["commit"] == commits["landed"] and four["carried"]["share"] == 1.0
    assert "new.txt: missing; the file is created by earlier patch one, which failed" in \
        (out / "regions.txt").read_text()
    assert "3 of 4 patches fail (1 conflict, 2 blocked)" in r.stderr


def test_apply_stop_after_a_skip_names_the_blocker(tmp_path: Path) -> None:
    fork, series, commits = _series(tmp_path)
    r = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path))
    assert r.returncode == 1, r.stderr
    assert f"changed upstream by {commits['culprit'][:12]}" in r.stdout  # names the commit
    r = rebasectl(series, "skip")
    assert r.returncode == 1, r.stderr
    assert "stopped at 2/4 two-uses-the-helper" in r.stdout
    assert "blocked: it needs lines or files of skipped patch(es) one" in r.stdout
    assert "new.txt: missing: the patch changes this file; earlier patch one creates it" \
        in r.stdout
    assert "modify/delete" not in r.stdout
    r = rebasectl(series, "status")
    assert "two-uses-the-helper is blocked: it needs lines or files of skipped patch(es) one" \
        in r.stdout
