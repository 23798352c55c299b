"""`rebasectl bump` and `rebasectl blame` end to end (the real CLI, in this process:
tests/harness/cli.py) on synthetic upstreams: conflicts with culprits and resumable artifacts, a
clean bump that exports and reports, an absorbed patch, a dependent patch, bad input."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import yaml

from tests.harness.cli import one_error
from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo, git, lines
from tests.harness.scenes import resolve_all
from tests.unit.test_attribution import Fork

BUMP_KEYS = {"schema", "from", "to", "upstream_commits", "result", "patches"}
TERMINAL = {"GITHUB_ACTIONS": "", "REBASECTL_ANNOTATE": ""}  # a person's run, even under CI
PATCH_KEYS = {"index", "id", "subject", "status", "conflicts", "first_break", "permanent_break",
              "culprits"}


def imported(tmp: Path, fork: Fork, tip: str) -> Path:
    series = tmp / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{fork.base}..{tip}", "--repo", str(fork.up.path))
    assert r.returncode == 0, r.stderr
    return series


GATE = ("feat: gate", {"b.txt": ("b 20\n", "b 20\ngate = 1\nslice = 2\n")})
WIDER_SLICE = ("feat: wider slice", {"b.txt": ("slice = 2\n", "slice = 3\n")})


def gate_landed(tmp: Path, *more: tuple[str, dict[str, tuple[str, str]]],
                files: dict[str, str] | None = None) -> tuple[Fork, Path, str]:
    """A series whose first patch (the gate) upstream then lands, with a change beside it (b 21
    renamed), so the patch's merge conflicts on upstream's own copy of its lines: the
    ``upstreamed`` case. ``more``: later patches; ``files``: more of the base's files."""
    fork = Fork(tmp, {"b.txt": lines(30, "b"), **(files or {})})
    shas = fork.series([GATE, *more])
    series = imported(tmp, fork, shas[-1])
    landed = fork.change("upstream lands the gate and renames b 21",
                         {"b.txt": ("b 20\nb 21\n", "b 20\ngate = 1\nslice = 2\nB 21\n")})
    return fork, series, landed


_CONFLICTED: list[tuple[Fork, Path, dict[str, str]]] = []  # built once per test process


def conflicted_history(tmp: Path) -> tuple[Fork, Path, dict[str, str]]:
    """``_conflicted_history`` as building it in ``tmp`` makes it: built once per test process
    (beside the test's folder) and copied to ``tmp``/up and ``tmp``/series, series.yaml's url
    naming the copy (the only path the series holds); the same commits, the same shas."""
    if not _CONFLICTED:
        _CONFLICTED.append(_conflicted_history(tmp.parent / "bump-conflicted-history"))
    built, series, commits = _CONFLICTED[0]
    shutil.copytree(built.up.path, tmp / "up", symlinks=True)
    shutil.copytree(series, tmp / "series", symlinks=True)
    yaml = tmp / "series" / "series.yaml"
    text = yaml.read_text()
    url = f"\n  url: {built.up.path}\n"
    assert text.count(url) == 1, text
    yaml.write_text(text.replace(url, f"\n  url: {tmp / 'up'}\n"))
    fork = Fork.__new__(Fork)
    fork.up, fork.base, fork.texts = Repo.existing(tmp / "up"), built.base, dict(built.texts)
    fork.up.clock = built.up.clock
    return fork, tmp / "series", dict(commits)


def _conflicted_history(tmp: Path) -> tuple[Fork, Path, dict[str, str]]:
    fork = Fork(tmp, {"a.txt": lines(30), "b.txt": lines(30, "b"), "c.txt": lines(10, "c")})
    shas = fork.series([
        ("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")}),
        ("feat: feature line", {"b.txt": ("b 20\n", "b 20\nfeature = on\n")}),
        ("feat: two on top of one", {"a.txt": ("line 11\n", "TWO 11\n")}),
        ("feat: c stays clean", {"c.txt": ("c 5\n", "c five\n")}),
    ])
    series = imported(tmp, fork, shas[-1])
    commits = {
        "noise": fork.change("noise", {"c.txt": ("c 9\n", "c nine\n")}),
        "culprit": fork.change("rewrite line 9", {"a.txt": ("line 9\n", "NINE\n")}),
        "landed": fork.change("upstream lands the feature",
                              {"b.txt": ("b 20\n", "b 20\nfeature = on\n")}),
    }
    return fork, series, commits


def test_bump_with_conflicts_names_culprits_and_leaves_artifacts(tmp_path: Path) -> None:
    fork, series, commits = conflicted_history(tmp_path)
    before = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    before_yaml = (series / "series.yaml").read_bytes()
    out = tmp_path / "artifacts"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  "--artifacts", str(out), env=TERMINAL)
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert BUMP_KEYS <= set(data)
    assert data["schema"] == "rebasectl.bump/1" and data["result"] == "conflicts"
    assert data["from"] == fork.base and data["to"] == fork.up.head()
    assert data["upstream_commits"] == 3
    assert [p["status"] for p in data["patches"]] == ["conflict", "upstreamed", "blocked",
                                                      "clean"]
    assert all(PATCH_KEYS <= set(p) for p in data["patches"])
    one, feature, two, clean = data["patches"]
    assert one["first_break"]["commit"] == commits["culprit"]
    assert one["permanent_break"]["commit"] == commits["culprit"]
    assert [c["commit"] for c in one["culprits"]] == [commits["culprit"]]
    assert one["culprits"][0]["path"] == "a.txt"
    (conflict,) = one["conflicts"]
    assert (conflict["path"], conflict["kind"]) == ("a.txt", "content")
    assert [h[:15] for h in conflict["hunks"]] == ["@@ -7,7 +7,7 @@"]
    (region,) = conflict["regions"]
    assert region["culprits"] == [commits["culprit"]]  # each region names what changed it
    assert [c["commit"] for c in feature["culprits"]] == [commits["landed"]]
    assert two["first_break"]["commit"] == commits["culprit"]  # needs ONE 10 from patch one
    # its region is patch one's doing, not upstream's: blocked by one, no upstream culprit
    assert two["blocked_by"] == ["one"] and two["culprits"] == []
    (two_region,) = two["conflicts"][0]["regions"]
    assert two_region["blocked_by"] == ["one"] and two_region["culprits"] == []
    assert feature["upstream_commit"] == commits["landed"]
    assert clean["culprits"] == [] and clean["first_break"] is None
    # nothing in the checkout changed
    assert {p.name: p.read_bytes() for p in (series / "patches").iterdir()} == before
    assert (series / "series.yaml").read_bytes() == before_yaml
    # artifacts a person can resume from
    assert json.loads((out / "bump.json").read_text()) == data
    readme = (out / "README.md").read_text()
    assert f"rebasectl apply --base {fork.up.head()}" in readme
    folder = out / "conflicts" / "01-one"
    assert (folder / "0001-one.patch").read_bytes() == before["0001-one.patch"]
    assert b"ONE 10" in (folder / "failing-hunks.diff").read_bytes()
    marked = (folder / "files" / "a.txt").read_text()
    assert "<<<<<<< upstream" in marked and "NINE" in marked and "ONE 10" in marked
    assert json.loads((out / "conflicts" / "03-two-on-top-of-one" / "culprits.json")
                      .read_text())["blocked_by"] == ["one"]
    # one annotation line per conflicting hunk: the patch file line and the upstream line
    # a terminal run: a summary, one line per failing patch, the region lines (only two here)
    assert not [ln for ln in r.stderr.splitlines() if ln.startswith("patches/")]
    assert "2 of 4 patches fail (1 conflict, 1 blocked), 2 regions" in r.stderr
    assert f"  1/4 one: conflict; 1 region; first culprit {commits['culprit'][:12]}" in r.stderr
    assert "  3/4 two-on-top-of-one: blocked by one; 1 region" in r.stderr
    assert "a.txt: content, upstream lines 9-10, work tree lines" in r.stderr
    assert (out / "regions.txt").read_text().count("\n") == 2
    # CI: one annotation per region, on the hunk of the patch file
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(out), env={"REBASECTL_ANNOTATE": "1"})
    notes = [ln for ln in r.stderr.splitlines() if ln.startswith("patches/")]
    assert any(ln.startswith("patches/0001-one.patch:") and "content conflict at a.txt:" in ln
               and commits["culprit"][:12] in ln for ln in notes), r.stderr
    assert len(notes) == 2  # one per region: patch one, and two on top of it
    # off GitHub Actions the annotation lines come only when asked for
    quiet = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                      "--artifacts", str(out), env=TERMINAL)
    assert quiet.returncode == 1 and not any(ln.startswith("patches/")
                                             for ln in quiet.stderr.splitlines())
    asked = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                      "--artifacts", str(out), "--annotations", env=TERMINAL)
    assert [ln for ln in asked.stderr.splitlines() if ln.startswith("patches/")] == notes


def test_clean_bump_exports_reports_and_drops_an_upstreamed_patch(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30), "b.txt": lines(30, "b")})
    shas = fork.series([
        ("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")}),
        ("feat: feature line", {"b.txt": ("b 20\n", "b 20\nfeature = on\n")}),
    ])
    series = imported(tmp_path, fork, shas[-1])
    fork.change("shift a", {"a.txt": ("line 1\n", "line 0\nline 1\n")})
    landed = fork.change("upstream lands the feature",
                         {"b.txt": ("b 20\n", "b 20\nfeature = on\n")})
    new = fork.up.head()
    out = tmp_path / "artifacts"
    r = rebasectl(series, "bump", "--to", new, "--upstream", str(fork.up.path),
                  "--artifacts", str(out))
    assert r.returncode == 0, r.stderr
    assert "series carried to" in r.stdout
    assert f"2/2 feature-line: upstreamed by {landed[:12]} upstream lands the feature; dropped " \
        "from the series" in r.stdout  # which commit carries it, and what became of it
    data = json.loads((out / "bump.json").read_text())
    assert data["result"] == "clean"
    assert [p["status"] for p in data["patches"]] == ["clean", "upstreamed"]
    assert data["patches"][1]["culprits"][0]["commit"] == landed
    doc = yaml.safe_load((series / "series.yaml").read_text())
    assert doc["upstream"]["base"] == new
    assert [p["id"] for p in doc["patches"]] == ["one"]
    assert sorted(p.name for p in (series / "patches").iterdir()) == ["0001-one.patch"]
    tree = Repo.existing(series / ".rebasectl" / "tree")
    assert tree.git("rev-parse", "HEAD^") == new
    assert "ONE 10" in (tree.path / "a.txt").read_text()
    assert (out / "report.md").exists()
    # a second bump to the same revision changes nothing
    again = rebasectl(series, "bump", "--to", new, "--upstream", str(fork.up.path), "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["upstream_commits"] == 0
    assert sorted(p.name for p in (series / "patches").iterdir()) == ["0001-one.patch"]


def test_blame_one_patch(tmp_path: Path) -> None:
    fork, series, commits = conflicted_history(tmp_path)
    r = rebasectl(series, "blame", "one", "--to", "main", "--upstream", str(fork.up.path),
                  "--json")
    assert r.returncode == 1, r.stderr  # a conflict, as bump says it
    data = json.loads(r.stdout)
    assert data["schema"] == "rebasectl.blame/1" and data["status"] == "conflict"
    assert data["first_break"]["commit"] == commits["culprit"]
    assert [c["commit"] for c in data["culprits"]] == [commits["culprit"]]
    assert [t["commit"] for t in data["touching"]] == [commits["culprit"]]
    r = rebasectl(series, "blame", "two-on-top-of-one", "--to", "main")
    assert r.returncode == 1, r.stderr
    assert "two-on-top-of-one: blocked" in r.stdout and "earlier failing patch(es) one" in r.stdout
    assert "needs lines of one" in r.stdout and "culprit" not in r.stdout
    r = rebasectl(series, "blame", "0002-feature-line.patch", "--to", "main")
    assert r.returncode == 0, r.stderr
    assert "feature-line: upstreamed" in r.stdout
    # a clean patch has no culprit: what changed its lines is said as that
    fork.up.git("checkout", "-q", "-b", "near", commits["noise"])
    near = fork.change("edit next to c 5", {"c.txt": ("c 7\n", "c seven\n")})
    r = rebasectl(series, "blame", "c-stays-clean", "--to", near)
    assert r.returncode == 0, r.stderr
    assert "c-stays-clean: clean" in r.stdout and "culprit" not in r.stdout
    assert f"changed its lines (it still applies) {near[:12]}" in r.stdout


def test_bump_bad_input_is_one_line_exit_2(tmp_path: Path) -> None:
    fork, series, commits = conflicted_history(tmp_path)
    r = rebasectl(series, "bump", "--to", "no-such-rev", "--upstream", str(fork.up.path))
    assert r.returncode == 2
    one_error(r.stderr)
    r = rebasectl(series, "blame", "nope", "--to", "main")
    assert r.returncode == 2 and "no patch 'nope'" in r.stderr
    fork.up.git("checkout", "-q", "-b", "sideways", f"{fork.base}~0")
    sideways = fork.change("sideways", {"c.txt": ("c 1\n", "c one\n")})
    fork.up.git("checkout", "-q", "main")
    fork.up.git("checkout", "-q", "--orphan", "lonely")
    lonely = fork.up.commit("unrelated root", {"z.txt": "z\n"})
    fork.up.git("checkout", "-q", "-f", "main")
    r = rebasectl(series, "bump", "--to", lonely, "--upstream", str(fork.up.path))
    assert r.returncode == 2 and "does not contain the pinned base" in r.stderr
    r = rebasectl(series, "bump", "--to", sideways)
    assert r.returncode == 0, r.stderr  # a descendant off the main line is fine: clean here


def test_bump_test_runs_the_suite_on_the_bumped_tree(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp_path, fork, shas[-1])
    doc = yaml.safe_load((series / "series.yaml").read_text())
    doc["patches"][0]["tests"] = ["tests/regression/test_one.py"]
    (series / "series.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    suite = series / "tests" / "regression"
    suite.mkdir(parents=True)
    (suite / "test_one.py").write_text(
        "import os, pathlib\n\n"
        "def test_patched_tree():\n"
        "    tree = pathlib.Path(os.environ['REBASECTL_TEST_TREE'])\n"
        "    assert 'ONE 10' in (tree / 'a.txt').read_text()\n"
        "    assert 'line 28 x' in (tree / 'a.txt').read_text()\n")
    fork.change("far away", {"a.txt": ("line 28\n", "line 28 x\n")})
    out = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--test",
                  "--artifacts", str(out))
    assert r.returncode == 0, r.stderr + r.stdout
    result = json.loads((out / "test.json").read_text())
    assert result["result"] == "passed" and result["patches"][0]["passed"] == 1
    # a suite that fails on the bumped tree: exit 3, the series is still carried over
    (suite / "test_one.py").write_text("def test_fails():\n    assert False\n")
    fork.change("more", {"a.txt": ("line 2\n", "line 2 y\n")})
    r = rebasectl(series, "bump", "--to", "main", "--test", "--artifacts", str(out))
    assert r.returncode == 3, r.stderr
    assert json.loads((out / "test.json").read_text())["result"] == "failed"
    assert yaml.safe_load((series / "series.yaml").read_text())["upstream"]["base"] == \
        fork.up.head()


def test_report_after_a_bump_names_the_blocked_patch_and_its_blocker(tmp_path: Path) -> None:
    """The bump says one conflicts and two-on-top-of-one is blocked by it; the person skips
    both during the apply and exports (skipped entries stay, as they were). The report cannot
    pair a new side whose patches do not apply: it says so for each, the blocked one with its
    blocker, and refuses (exit 2, hostile7 #7: it was exit 1, "needs a review", with no way
    on) with the two ways on; the first, followed, gives the report."""
    series = _skipped_and_exported(tmp_path)
    r = rebasectl(series, "report", env=TERMINAL)
    assert r.returncode == 2, r.stderr
    one_error(r.stderr)
    assert "patch 1 'one' does not apply (a.txt)" in r.stderr
    assert "patch 2 'two-on-top-of-one' is blocked by one" in r.stderr  # feature-line dropped
    assert "c-stays-clean" not in r.stderr and "feature-line" not in r.stderr
    drop = "rebasectl export --drop one --drop two-on-top-of-one"
    assert f"`{drop}` leaves them out of the series, or resolve: `rebasectl apply`, then " \
        "`rebasectl continue` and `rebasectl export`" in r.stderr, r.stderr
    r = rebasectl(series, *drop.split()[1:], env=TERMINAL)
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "report", "--format", "json", env=TERMINAL)
    assert r.returncode == 1, r.stderr  # entries to review: the two dropped
    data = json.loads(r.stdout)
    assert [p["id"] for p in data["new"]["patches"]] == ["c-stays-clean"]
    assert {(tuple(m["old"]), m["status"]) for m in data["mapping"]} >= \
        {((1,), "dropped"), ((2,), "upstreamed"), ((3,), "dropped")}


def _skipped_and_exported(tmp_path: Path) -> Path:
    """conflicted_history after a bump, an apply that skipped one and two-on-top-of-one, and
    an export (the series keeps both as they were). feature-line, which upstream landed, is a
    no-op on main: export refuses to write its patch without its diff (hostile10 B6) and
    names the --drop that drops it, which is followed."""
    fork, series, _ = conflicted_history(tmp_path)
    Repo(series).commit("series before the bump")
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), env=TERMINAL)
    assert r.returncode == 1 and "two-on-top-of-one: blocked by one" in r.stderr, r.stderr
    for step, code in ((["apply", "--base", "main"], 1), (["skip"], 1), (["skip"], 0),
                       (["export"], 1)):
        r = rebasectl(series, *step, env=TERMINAL)
        assert r.returncode == code, (step, r.stderr)
    assert "export would write feature-line without its diff" in one_error(r.stderr)
    assert r.stderr.rstrip().endswith("--drop feature-line to drop on purpose"), r.stderr
    r = rebasectl(series, "export", "--drop", "feature-line", env=TERMINAL)
    assert r.returncode == 0, r.stderr
    return series


def test_report_refusal_resolve_way_on(tmp_path: Path) -> None:
    """The refusal's other way on, followed: apply, resolve each stop, continue, export; the
    report then runs (exit 1: the resolved patches differ from the old ones)."""
    series = _skipped_and_exported(tmp_path)
    r = rebasectl(series, "apply", env=TERMINAL)
    assert r.returncode == 1, r.stderr
    for _ in range(2):
        resolve_all(series / ".rebasectl" / "tree" / "a.txt", "")
        git(series / ".rebasectl" / "tree", "add", "a.txt")
        r = rebasectl(series, "continue", env=TERMINAL)
        if r.returncode == 0:
            break
        assert r.returncode == 1, r.stderr
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "export", env=TERMINAL)
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "report", "--format", "json", env=TERMINAL)
    assert r.returncode == 1, r.stderr
    assert len(json.loads(r.stdout)["new"]["patches"]) == 3  # feature-line dropped before


def test_a_patch_upstream_carries_blocks_nothing(tmp_path: Path) -> None:
    """An earlier patch that conflicts because upstream landed its lines (with a change beside
    them) is ``upstreamed``; a later patch that edits those lines finds them upstream, so its
    conflict is upstream's doing: ``conflict`` with the upstream commit named, never ``blocked``
    by the upstreamed patch. blame says the same as bump."""
    fork, series, landed = gate_landed(tmp_path, WIDER_SLICE)
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  env=TERMINAL)
    assert r.returncode == 1, r.stderr
    gate, wider = json.loads(r.stdout)["patches"]
    assert gate["status"] == "upstreamed" and gate["upstream_commit"] == landed
    assert wider["status"] == "conflict" and not wider.get("blocked_by"), wider
    assert landed in [c["commit"] for c in wider["culprits"]]
    (region,) = wider["conflicts"][0]["regions"]
    assert not region.get("blocked_by") and landed in region["culprits"]
    b = rebasectl(series, "blame", "wider-slice", "--upstream", str(fork.up.path), "--json",
                  env=TERMINAL)
    assert b.returncode == 1, b.stderr
    blamed = json.loads(b.stdout)
    assert blamed["status"] == "conflict" and not blamed.get("blocked_by"), blamed


def test_a_skipped_patch_upstream_carries_blocks_nothing_at_the_stops(tmp_path: Path) -> None:
    """hostile12 #8: the same series through apply: the gate's stop says upstream carries it;
    skipped, it is no prerequisite of wider-slice, whose stop and status say what bump says
    (a conflict with upstream's commit, never "blocked" by the gate)."""
    fork, series, landed = gate_landed(tmp_path, WIDER_SLICE)
    r = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path),
                  env=TERMINAL)
    assert r.returncode == 1 and "upstream carries it already" in r.stdout, r.stdout
    r = rebasectl(series, "skip", env=TERMINAL)
    assert r.returncode == 1 and "stopped at 2/2 wider-slice" in r.stdout, r.stdout
    assert "blocked" not in r.stdout and landed[:12] in r.stdout, r.stdout
    shown = rebasectl(series, "status", "--json", env=TERMINAL)
    assert shown.returncode == 0, shown.stderr
    stop = json.loads(shown.stdout)["apply_in_progress"]
    assert not stop.get("blocked_by"), stop


def test_a_kill_between_the_old_tree_and_the_new_is_named_by_status(tmp_path: Path) -> None:
    """A clean bump removes the old work tree before it makes the new one; killed in between,
    nothing is lost (series.yaml unchanged) but the tree is gone. status says so and names
    apply, and apply makes it again."""
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp_path, fork, shas[-1])
    assert rebasectl(series, "apply", "--upstream", str(fork.up.path)).returncode == 0
    before = (series / "series.yaml").read_bytes()
    fork.change("shift a", {"a.txt": ("line 1\n", "line 0\nline 1\n")})
    killed = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                       env={"REBASECTL_FAULT": "kill@tree-cleared"})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    assert (series / "series.yaml").read_bytes() == before
    assert not (series / ".rebasectl" / "tree").exists()
    shown = rebasectl(series, "status")
    assert shown.returncode == 0, shown.stderr
    (line,) = [ln for ln in shown.stdout.splitlines() if "is missing" in ln]
    assert "`rebasectl apply` makes it again" in line
    doc = json.loads(rebasectl(series, "status", "--json").stdout)
    assert doc["missing_worktree"] and doc["apply_in_progress"] is None
    assert rebasectl(series, "apply").returncode == 0  # the advice, followed
    assert "ONE 10" in (series / ".rebasectl" / "tree" / "a.txt").read_text()
    assert "is missing" not in rebasectl(series, "status").stdout
    assert json.loads(rebasectl(series, "status", "--json").stdout)["missing_worktree"] is None


def test_blame_names_the_commit_that_upstreamed_a_patch(tmp_path: Path) -> None:
    """A patch upstream carries (its merge conflicts on upstream's own copy of its lines) is
    ``upstreamed`` in blame as in bump, named by the commit that carries it: not a "first
    break", and never a commit that "changed its lines (it still applies)"."""
    fork, series, landed = gate_landed(tmp_path)
    r = rebasectl(series, "blame", "gate", "--to", "main", "--upstream", str(fork.up.path))
    assert r.returncode == 0, r.stderr
    assert f"upstream carries it: {landed[:12]} upstream lands the gate" in r.stdout
    assert "still applies" not in r.stdout and "break" not in r.stdout, r.stdout
    r = rebasectl(series, "blame", "gate", "--to", "main", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert (data["status"], data["upstream_commit"]) == ("upstreamed", landed)
    assert data["touched_by"] == [] and data["conflicts"] == []
    bumped = rebasectl(series, "bump", "--to", "main", "--json", env=TERMINAL)
    (gate,) = json.loads(bumped.stdout)["patches"]  # the same answer as bump's
    assert (gate["status"], gate["upstream_commit"]) == ("upstreamed", landed)
    assert data["first_break"] == gate["first_break"]


def test_blame_from_a_revision_that_carries_the_patch_already(tmp_path: Path) -> None:
    """hostile6 #6: ``--from REV`` where upstream carries the patch already (REV is the commit
    that landed it, or a later one): blame says upstreamed, naming that commit, as it does
    from the series' base; not "conflict ... does not apply at REV already"."""
    fork, series, landed = gate_landed(tmp_path, files={"c.txt": lines(10, "c")})
    later = fork.change("noise", {"c.txt": ("c 5\n", "c five\n")})
    for rev in (landed, later):  # the truth: the patch's lines are there, where it adds them
        assert "b 20\ngate = 1\nslice = 2\n" in fork.up.git("show", f"{rev}:b.txt")
    plain = json.loads(rebasectl(series, "blame", "gate", "--to", "main", "--upstream",
                                 str(fork.up.path), "--json").stdout)
    assert (plain["status"], plain["upstream_commit"]) == ("upstreamed", landed)
    for rev in (landed, later):
        r = rebasectl(series, "blame", "gate", "--from", rev, "--to", "main", "--json")
        assert r.returncode == 0, (rev, r.stdout, r.stderr)
        data = json.loads(r.stdout)
        assert (data["status"], data["upstream_commit"]) == ("upstreamed", landed), rev
        assert data["first_break"] is None and data["conflicts"] == []
        text = rebasectl(series, "blame", "gate", "--from", rev, "--to", "main")
        assert text.returncode == 0, text.stderr
        assert f"upstream carries it: {landed[:12]} upstream lands the gate" in text.stdout
        assert "does not apply" not in text.stdout and "conflict" not in text.stdout, \
            text.stdout


def test_apply_stopping_on_an_upstreamed_patch_says_so(tmp_path: Path) -> None:
    """hostile6 #12: apply --base onto an upstream that carries a patch stops on its conflict
    (apply does not drop patches); the stop names the commit that carries it, as bump would,
    and what to do. The advice followed (skip, then export --drop) leaves a series without it
    that applies there cleanly."""
    fork, series, landed = gate_landed(tmp_path, ("feat: c", {"c.txt": ("c 5\n", "c five\n")}),
                                       files={"c.txt": lines(10, "c")})
    r = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path), "--json")
    assert r.returncode == 1, r.stderr
    assert json.loads(r.stdout)["stopped_at"]["upstream_commit"] == landed
    rebasectl(series, "abort")
    r = rebasectl(series, "apply", "--base", "main")
    assert r.returncode == 1, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "upstream carries it" in ln)
    assert line == (f"  upstream carries it already: {landed[:12]} upstream lands the gate and "
                    "renames b 21; `rebasectl skip` leaves it out of this apply, then "
                    "`rebasectl export --drop gate` drops it from the series")
    skipped = rebasectl(series, "skip")
    assert skipped.returncode == 0, skipped.stderr
    exported = rebasectl(series, "export", "--drop", "gate")
    assert exported.returncode == 0, exported.stderr
    data = yaml.safe_load((series / "series.yaml").read_text())
    assert [p["id"] for p in data["patches"]] == ["c"]
    assert data["upstream"]["base"] == fork.up.git("rev-parse", "main").strip()
    checked = rebasectl(series, "check", "--apply")
    assert checked.returncode == 0, checked.stderr


def _resolved_once(series: Path) -> None:
    """conflicted_history's patch stopped at by `apply --base main`, resolved by hand and
    continued: its resolution recorded whole and by rerere."""
    assert rebasectl(series, "apply", "--base", "main").returncode == 1
    tree = series / ".rebasectl" / "tree"
    (tree / "a.txt").write_text(lines(30).replace("line 9\n", "NINE\n")
                                .replace("line 10\n", "ONE 10\n"))
    Repo.existing(tree).git("add", "a.txt")
    rebasectl(series, "continue")


def test_blame_does_not_replay_recorded_resolutions(tmp_path: Path) -> None:
    """blame answers which upstream commits broke the patch: the same in a checkout that has
    resolved it before (its resolution recorded whole and by rerere) as in a fresh one, with
    one line saying a recorded resolution resolves it. bump does replay it."""
    fork, series, commits = conflicted_history(tmp_path)
    fresh = json.loads(rebasectl(series, "blame", "one", "--to", "main", "--upstream",
                                 str(fork.up.path), "--json").stdout)
    assert fresh["status"] == "conflict" and fresh["recorded_resolution"] is False
    _resolved_once(series)
    assert list((series / ".rebasectl" / "resolutions").glob("*.json"))
    for kept in ("both", "rerere"):
        if kept == "rerere":  # the whole record gone: rerere's alone still resolves it
            for record in (series / ".rebasectl" / "resolutions").glob("*.json"):
                record.unlink()
        r = rebasectl(series, "blame", "one", "--to", "main", "--json")
        assert r.returncode == 1, (kept, r.stderr)
        data = json.loads(r.stdout)
        assert data["status"] == "conflict" and data["recorded_resolution"] is True, kept
        for key in ("first_break", "culprits", "touched_by", "conflicts"):
            assert data[key] == fresh[key], (kept, key)
    text = rebasectl(series, "blame", "one", "--to", "main").stdout
    assert "a resolution recorded in this checkout resolves this conflict" in text
    assert f"culprit {commits['culprit'][:12]}" in text
    # what the line says: bump replays it (--propose: shown, nothing carried)
    bumped = rebasectl(series, "bump", "--to", "main", "--propose", "--json", env=TERMINAL)
    one = json.loads(bumped.stdout)["patches"][0]
    assert (one["status"], one["how"]) in {("clean", "rerere"), ("clean", "recorded")}, one


def test_a_replayed_resolution_is_said_where_people_read(tmp_path: Path) -> None:
    """hostile6 #12: a bump that applies a patch only by replaying a resolution recorded at an
    earlier apply says so in the terminal's table and the artifacts README, as bump.json's
    ``how`` does; the status stays the contract's ``clean``."""
    fork, series, _ = conflicted_history(tmp_path)
    _resolved_once(series)
    r = rebasectl(series, "bump", "--to", "main", "--propose", env=TERMINAL)
    row = next(ln for ln in r.stdout.splitlines() if re.search(r"\bone\b", ln))
    artifacts = Path(next(ln for ln in r.stdout.splitlines()
                          if ln.startswith("artifacts: ")).removeprefix("artifacts: "))
    data = json.loads((artifacts / "bump.json").read_text())
    one = data["patches"][0]
    assert one["status"] == "clean" and one["how"] in ("rerere", "recorded"), one
    how = one["how"]
    assert f"clean ({how} resolution replayed)" in row, r.stdout
    readme = (artifacts / "README.md").read_text()
    assert f"| 1 | one | clean ({how} resolution replayed) |" in readme, readme


def test_blame_from_a_revision_where_the_patch_fails_already(tmp_path: Path) -> None:
    """``--from REV`` where the patch no longer applies: no commit of REV..TO broke it, so
    there is no first break and no culprit came by one; the commits that changed its lines
    since REV are named as that. The advice (an older --from) finds the break."""
    fork, series, commits = conflicted_history(tmp_path)
    later = fork.change("rewrite line 11", {"a.txt": ("line 11\n", "ELEVEN\n")})
    broke = commits["culprit"]
    # the truth, by git: the patch fails at --from already
    patch = (series / "patches" / "0001-one.patch").read_bytes()
    index = tmp_path / "probe-index"
    env = {"GIT_INDEX_FILE": str(index)}
    git(fork.up.path, "read-tree", broke, env=env)
    assert git(fork.up.path, "apply", "--cached", "--3way", "-", input=patch, env=env,
               check=False).returncode != 0
    r = rebasectl(series, "blame", "one", "--from", broke, "--to", "main", "--upstream",
                  str(fork.up.path), "--json")
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert data["status"] == "conflict" and data["applies_at_from"] is False
    assert data["first_break"] is None and data["permanent_break"] is None
    assert [(c["commit"], c["by_first_break"]) for c in data["culprits"]] == [(later, False)]
    text = rebasectl(series, "blame", "one", "--from", broke, "--to", "main").stdout
    assert f"it does not apply at {broke[:12]} already: no commit of the range broke it" in text
    assert "first break" not in text and "culprit" not in text
    assert f"changed its lines since {broke[:12]} {later[:12]} a.txt" in text
    older = json.loads(rebasectl(series, "blame", "one", "--from", fork.base, "--to", "main",
                                 "--json").stdout)
    assert older["applies_at_from"] is True and older["first_break"]["commit"] == broke


def test_an_upstreamed_patch_is_explained_counted_and_its_advice_works(tmp_path: Path) -> None:
    """Hostile 5 #7: a patch upstream carries (its merge conflicted on upstream's own copy) has
    no break (the commit that upstreamed it is not one), its region is counted beside the
    failing patches' (the answer keys count every region of the merges), the terminal and the
    artifacts README say which commit carries it and how it leaves the series, and that advice
    (skip at apply's stop, then export --drop) works."""
    fork, series, landed = gate_landed(tmp_path, WIDER_SLICE)
    art = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(art), "--propose", env=TERMINAL)
    assert r.returncode == 1, r.stderr
    gate_row = next(ln.split() for ln in r.stdout.splitlines() if ln.startswith("1 "))
    assert gate_row == ["1", "gate", "upstreamed", "1", "1"], r.stdout  # no break; 1 region
    assert "1 of 2 patches fail (1 conflict, 0 blocked), 1 region; 1 upstreamed (1 region, " \
        "upstream's already); 2 merge regions in all" in r.stderr
    line = next(ln for ln in r.stderr.splitlines() if "1/2 gate: upstreamed by" in ln)
    assert landed[:12] in line and "`rebasectl export --drop gate`" in line
    data = json.loads((art / "bump.json").read_text())
    gate = data["patches"][0]
    assert gate["first_break"] is None and gate["permanent_break"] is None
    assert [c["commit"] for c in gate["culprits"]] == [landed]
    assert len(gate["dropped_regions"][0]["regions"]) == 1
    readme = (art / "README.md").read_text()
    assert "| 1 | gate | upstreamed | 1 |  |  |" in readme
    assert f"## 1. gate: upstreamed\n\n- upstream `{landed[:12]}`" in readme
    assert "`rebasectl export --drop gate`" in readme and "2 merge regions in all" in readme
    # the advice: apply stops on it; skip; the rest resolved; export --drop removes the entry
    assert rebasectl(series, "apply", "--base", "main", "--upstream",
                     str(fork.up.path)).returncode == 1
    s = rebasectl(series, "skip")
    tree = series / ".rebasectl" / "tree"
    if s.returncode == 1:  # wider slice stops too: take upstream's lines with the patch's edit
        (tree / "b.txt").write_text(lines(30, "b").replace(
            "b 20\nb 21\n", "b 20\ngate = 1\nslice = 3\nB 21\n"))
        Repo.existing(tree).git("add", "b.txt")
        s = rebasectl(series, "continue")
    assert s.returncode == 0, s.stderr
    e = rebasectl(series, "export", "--drop", "gate")
    assert e.returncode == 0, e.stderr
    ids = [p["id"] for p in yaml.safe_load((series / "series.yaml").read_text())["patches"]]
    assert ids == ["wider-slice"]
    assert [p.name for p in (series / "patches").iterdir()] == ["0002-wider-slice.patch"]


def test_a_file_level_region_holds_its_hunks_preimage_lines(tmp_path: Path) -> None:
    """Hostile 5 #12: a modify/delete (or missing-file) region's preimage_lines are the lines its
    hunks cover (``@@ -19,7`` -> 19-25, as on a content region), not 1 to the hunks' length."""
    fork = Fork(tmp_path, {"d.txt": lines(40, "d"), "a.txt": lines(10)})
    shas = fork.series([("fix: d 22", {"d.txt": ("d 22\n", "D 22\n")})])
    series = imported(tmp_path, fork, shas[-1])
    fork.up.commit("upstream deletes d", {"d.txt": None})
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  env=TERMINAL)
    assert r.returncode == 1, r.stderr
    (c,) = json.loads(r.stdout)["patches"][0]["conflicts"]
    (region,) = c["regions"]
    assert c["kind"] == "modify/delete" and region["hunks"][0].startswith("@@ -19,7 ")
    assert region["preimage_lines"] == [19, 25]


def test_a_bump_killed_while_making_the_new_tree_is_finished_by_a_rerun(tmp_path: Path) -> None:
    """A clean bump killed after the new tree was checked out and before the export left a
    tree at the new upstream under the old series.yaml; the rerun then called upstream's
    commits unexported work and advised `rebasectl export`, which wrote them into the series as
    patches (hostile6 #1). Now status names the interrupted bump, and its advice, followed,
    finishes it: the same series a bump never killed gives, no upstream commit in it."""
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp_path, fork, shas[-1])
    assert rebasectl(series, "apply", "--upstream", str(fork.up.path)).returncode == 0
    before = (series / "series.yaml").read_bytes()
    new = fork.change("shift a", {"a.txt": ("line 1\n", "line 0\nline 1\n")})
    killed = rebasectl(series, "bump", "--to", new, "--upstream", str(fork.up.path),
                       env={"REBASECTL_FAULT": "kill@carried"})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    assert (series / "series.yaml").read_bytes() == before
    (line,) = [ln for ln in rebasectl(series, "status").stdout.splitlines()
               if "interrupted" in ln]
    advice = re.findall(r"`(rebasectl bump[^`]*)`", line)
    assert advice == [f"rebasectl bump --to {new}"], line
    redone = rebasectl(series, *advice[0].split()[1:], "--upstream", str(fork.up.path))
    assert redone.returncode == 0, redone.stderr
    assert f"base: {new}" in (series / "series.yaml").read_text()
    assert sorted(p.name for p in (series / "patches").iterdir()) == ["0001-one.patch"]
    assert "interrupted" not in rebasectl(series, "status").stdout
