"""The CI jobs as GitHub runs them. The bump job: ci/bump.sh then ci/publish.sh, with a fake ``gh``
(tests/fake_gh.py) that records each call and refuses what the real gh 2.23 does not have, and a
bare git repository as ``origin``. Cases: conflicting (one tracking issue, updated in place the
next day), clean (a PR with the report, the older bump PR closed as superseded, the tracking
issue closed, the checks dispatched when only the GITHUB_TOKEN is at hand), landed (the series
is already on the tip: the issue and stale bump PRs closed); on each, what bump.sh itself gives
(exit code, GITHUB_OUTPUT, the PR body, and conflict lines that the problem matcher turns into
file:line annotations pointing at the failing hunk). The pull-request check: ci/pr-check.sh on a
canonical and on a hand-edited series. The workflows pass actionlint and GitHub's workflow
schema, and call these scripts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.synth import lines
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import conflicted_history, imported

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / "ci"
FLOWS = ROOT / ".github" / "workflows"


class Job:
    """One repository on 'GitHub': the series checkout with a bare origin, the fake gh's state
    and call log, and the environment the workflow gives the scripts."""

    def __init__(self, tmp: Path, series: Path, upstream: Path) -> None:
        self.tmp, self.series = tmp, series
        self.origin = tmp / "origin.git"
        self.state, self.log = tmp / "gh-state.json", tmp / "gh-calls.jsonl"
        self.output = tmp / "gh-output"  # GITHUB_OUTPUT: the steps' outputs, appended
        self.bumped: subprocess.CompletedProcess[str] | None = None  # the last bump.sh run
        bindir = tmp / "bin"
        bindir.mkdir()
        gh = bindir / "gh"
        gh.write_text(f"#!/bin/sh\nexec {sys.executable} {ROOT / 'tests' / 'fake_gh.py'} \"$@\"\n")
        gh.chmod(0o755)
        git = ["git", "-C", str(series)]
        subprocess.run(["git", "init", "-q", "--bare", str(self.origin)], check=True)
        for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                     ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "series"],
                     ["remote", "add", "origin", str(self.origin)],
                     ["push", "-q", "origin", "main"]):
            subprocess.run([*git, *args], check=True, capture_output=True)
        self.env = {"PATH": f"{bindir}:{os.environ['PATH']}", "FAKE_GH_STATE": str(self.state),
                    "FAKE_GH_LOG": str(self.log), "REBASECTL_DIR": str(series),
                    "REBASECTL_UPSTREAM": str(upstream), "ARTIFACTS": str(tmp / "art"),
                    "GITHUB_OUTPUT": str(self.output),
                    "REBASECTL": f"{sys.executable} -m rebasectl",
                    "GIT_AUTHOR_NAME": "bot", "GIT_AUTHOR_EMAIL": "bot@e",
                    "GIT_COMMITTER_NAME": "bot", "GIT_COMMITTER_EMAIL": "bot@e"}

    def seed(self, data: dict[str, Any]) -> None:
        self.state.write_text(json.dumps(data))

    def run(self, script: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(CI / script), *args], capture_output=True, text=True,
                              env={**os.environ, **self.env, **extra}, timeout=300, check=False)

    def gh(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.state.read_text())
        return data

    def calls(self) -> list[list[str]]:
        if not self.log.is_file():
            return []
        return [json.loads(x) for x in self.log.read_text().splitlines()]

    def day(self, **extra: str) -> tuple[int, int]:
        """One run of the workflow's two steps: (bump.sh's exit, publish.sh's exit)."""
        bump = self.bumped = self.run("bump.sh", "main", **extra)
        publish = self.run("publish.sh", **extra)
        assert publish.returncode == 0, publish.stderr
        return bump.returncode, publish.returncode


def test_conflicts_open_one_tracking_issue_kept_current(tmp_path: Path) -> None:
    fork, series, commits = conflicted_history(tmp_path)
    job = Job(tmp_path, series, fork.up.path)
    assert job.day() == (1, 0)
    _conflict_lines_annotate_the_failing_hunks(job, series, commits)
    gh = job.gh()
    assert [c[:2] for c in job.calls()] == [["issue", "list"], ["label", "create"],
                                            ["issue", "create"]]
    (issue,) = gh["issues"]
    assert issue["labels"] == ["rebasectl-bump-conflict"] and issue["state"] == "open"
    assert issue["title"] == f"Upstream bump conflicts at {fork.up.head()[:12]}"
    body = issue["body"]
    # which patches, since which commit, the regions with the commits that changed them
    assert "`one`" in body and "`two-on-top-of-one`" in body and "`c-stays-clean`" not in body
    assert f"Breaks since: `{commits['culprit'][:12]}` rewrite line 9" in body
    assert "- `a.txt:" in body and f"changed by `{commits['culprit'][:12]}`" in body
    assert gh["prs"] == []

    # the next day, upstream moved on and still conflicts: the same issue, updated in place
    fork.change("more upstream", {"c.txt": ("c 2\n", "c two\n")})
    assert job.day() == (1, 0)
    gh = job.gh()
    assert len(gh["issues"]) == 1 and gh["issues"][0]["state"] == "open"
    assert gh["issues"][0]["title"] == f"Upstream bump conflicts at {fork.up.head()[:12]}"
    assert ["issue", "edit", "1"] == job.calls()[-1][:3]


def matcher() -> re.Pattern[str]:
    data = json.loads((CI / "problem-matchers" / "rebasectl.json").read_text())
    pattern = data["problemMatcher"][0]["pattern"][0]
    assert (pattern["file"], pattern["line"], pattern["message"]) == (1, 2, 3)
    return re.compile(pattern["regexp"])


def _conflict_lines_annotate_the_failing_hunks(job: Job, series: Path,
                                               commits: dict[str, str]) -> None:
    """bump.sh on a conflict: exit 1, its outputs, the README in the log, and one line per
    conflict region that the problem matcher reads as an annotation on the failing hunk."""
    r = job.bumped
    assert r is not None and r.returncode == 1, r
    assert "result=conflicts" in job.output.read_text() and "exit=1" in job.output.read_text()
    hits = [m for m in map(matcher().match, r.stderr.splitlines()) if m]
    assert {m.group(1) for m in hits} == {"patches/0001-one.patch",
                                          "patches/0003-two-on-top-of-one.patch"}
    for m in hits:
        text = (series / m.group(1)).read_text().split("\n")
        assert text[int(m.group(2)) - 1].startswith("@@ "), m.group(0)
        # patch one is broken by upstream's culprit; two is blocked by one (not by upstream)
        why = commits["culprit"][:12] if "0001" in m.group(1) else "earlier patch one"
        assert why in m.group(3), m.group(0)
    assert "Reproduce locally" in r.stdout  # README.md printed to the log
    assert json.loads((job.tmp / "art" / "rebasectl" / "bump.json").read_text())["result"] \
        == "conflicts"


def _clean(tmp: Path) -> tuple[Fork, Path]:
    fork = Fork(tmp, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp, fork, shas[-1])
    fork.change("far away", {"a.txt": ("line 28\n", "line 28 x\n")})
    return fork, series


OLD_PR = {"number": 1, "title": "Bump upstream to aaaaaaaaaaaa", "body": "old", "state": "open",
          "labels": ["rebasectl-bump"], "comments": [], "url": "u1",
          "headRefName": "rebasectl/bump-aaaaaaaaaaaa", "baseRefName": "main"}
ISSUE = {"number": 2, "title": "Upstream bump conflicts at bbbbbbbbbbbb", "body": "x",
         "state": "open", "labels": ["rebasectl-bump-conflict"], "comments": [], "url": "u2"}


def test_clean_bump_opens_the_pr_and_closes_what_it_supersedes(tmp_path: Path) -> None:
    fork, series = _clean(tmp_path)
    job = Job(tmp_path, series, fork.up.path)
    job.seed({"prs": [OLD_PR], "issues": [ISSUE], "labels": ["rebasectl-bump",
              "rebasectl-bump-conflict"], "next": 3})
    assert job.day(CHECKS_DISPATCH="1") == (0, 0)
    gh, tip = job.gh(), fork.up.head()
    branch = f"rebasectl/bump-{tip[:12]}"
    assert job.output.read_text() == f"result=clean\nto={tip}\nexit=0\n"
    report = (tmp_path / "art" / "rebasectl" / "report.md").read_text()
    assert (tmp_path / "art" / "pr-body.md").read_text() == report and report.strip()
    old, new = gh["prs"]
    assert new["headRefName"] == branch and new["state"] == "open" and new["number"] == 3
    assert new["body"] == (tmp_path / "art" / "rebasectl" / "report.md").read_text()
    assert old["state"] == "closed"
    assert old["comments"] == [f"Superseded by #3 (upstream {tip[:12]})."]
    assert gh["branches_deleted"] == ["rebasectl/bump-aaaaaaaaaaaa"]
    assert gh["issues"][0]["state"] == "closed"
    assert gh["issues"][0]["comments"] == [f"Every patch applies on upstream {tip[:12]}: see #3."]
    assert gh["runs"] == [{"workflow": "pr-check.yml", "ref": branch},
                          {"workflow": "gpu.yml", "ref": branch}]
    # the branch is on origin with the exported series, one commit on main
    pushed = subprocess.run(["git", "-C", str(job.origin), "log", "--format=%s", branch],
                            capture_output=True, text=True, check=True).stdout.split("\n")
    assert pushed[0] == f"Bump upstream to {tip[:12]}"
    show = subprocess.run(["git", "-C", str(job.origin), "show", f"{branch}:series.yaml"],
                          capture_output=True, text=True, check=True).stdout
    assert f"base: {tip}" in show

    # a rerun the same day (a retried job), in the same artifacts folder (rebasectl's folder is
    # its own, the script's files beside it): the PR is updated, not opened twice
    subprocess.run(["git", "-C", str(series), "switch", "-q", "main"], check=True)
    before = len(job.calls())
    assert job.day() == (0, 0)
    rerun = job.calls()[before:]
    assert len(job.gh()["prs"]) == 2 and ["pr", "edit", "3"] in [c[:3] for c in rerun]
    assert not any(c[:2] in (["workflow", "run"], ["pr", "create"]) for c in rerun)


def test_landed_bump_closes_the_issue_and_stale_prs(tmp_path: Path) -> None:
    fork, series = _clean(tmp_path)
    job = Job(tmp_path, series, fork.up.path)
    assert job.run("bump.sh", "main").returncode == 0
    subprocess.run(["git", "-C", str(series), "-c", "user.name=t", "-c", "user.email=t@e",
                    "commit", "-qam", "bump landed"], check=True)
    job.seed({"prs": [OLD_PR], "issues": [ISSUE], "labels": [], "next": 3})
    assert job.day() == (0, 0)
    gh = job.gh()
    assert gh["issues"][0]["state"] == "closed" and gh["prs"][0]["state"] == "closed"
    assert not any(c[:2] in (["pr", "create"], ["issue", "create"]) for c in job.calls())


def test_fake_gh_refuses_what_gh_lacks(tmp_path: Path) -> None:
    env = {**os.environ, "FAKE_GH_STATE": str(tmp_path / "s.json")}
    fake = [sys.executable, str(ROOT / "tests" / "fake_gh.py")]

    def gh(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*fake, *args], capture_output=True, text=True, env=env,
                              check=False)

    assert gh("pr", "list", "--labels", "x").returncode == 1  # gh has --label, not --labels
    assert "unknown flag: --labels" in gh("pr", "list", "--labels", "x").stderr
    assert gh("issue", "reopen", "1").returncode == 1  # not in the recorded usage
    assert gh("pr", "list", "--json", "number,nope").returncode == 1
    assert gh("pr", "list", "--json", "number", "-L", "5", "-s", "all").stdout == "[]\n"
    usage = (ROOT / "tests" / "data" / "gh-usage" / "pr-create.txt").read_text()
    assert "USAGE\n  gh pr create [flags]" in usage and "--body-file" in usage


def test_pr_check_passes_a_canonical_series_and_fails_a_hand_edited_one(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("fix: one", {"a.txt": ("line 10\n", "ONE 10\n")})])
    series = imported(tmp_path, fork, shas[-1])
    env = {**os.environ, "REBASECTL": f"{sys.executable} -m rebasectl",
           "REBASECTL_DIR": str(series), "REBASECTL_UPSTREAM": str(fork.up.path)}

    def pr_check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", str(CI / "pr-check.sh")], capture_output=True, text=True,
                              env=env, timeout=300, check=False)

    r = pr_check()
    assert r.returncode == 0, r.stderr
    assert "re-exports byte-identically" in r.stdout
    patch = series / "patches" / "0001-one.patch"
    patch.write_text(patch.read_text().replace("Subject: fix: one", "Subject:  fix: one"))
    assert pr_check().returncode == 1


def _flows() -> dict[str, Any]:
    return {p.name: yaml.safe_load(p.read_text()) for p in FLOWS.glob("*.yml")}


def test_workflows_call_the_scripts_and_keep_gpu_trusted() -> None:
    flows = _flows()
    assert set(flows) == {"upstream-bump.yml", "pr-check.yml", "gpu.yml", "tool.yml"}
    runs = {name: " ".join(step.get("run", "") for job in flow["jobs"].values()
                           for step in job["steps"]) for name, flow in flows.items()}
    assert "ci/bump.sh" in runs["upstream-bump.yml"]
    assert "ci/publish.sh" in runs["upstream-bump.yml"]
    assert '".[regression]"' in runs["upstream-bump.yml"]
    assert "ci/pr-check.sh" in runs["pr-check.yml"] and "ci/gpu-tests.sh" in runs["gpu.yml"]
    assert "mypy" in runs["tool.yml"] and "ruff check" in runs["tool.yml"]
    on = {name: flow[True] for name, flow in flows.items()}  # YAML 1.1 reads `on` as true
    assert "workflow_dispatch" in on["pr-check.yml"] and "workflow_dispatch" in on["gpu.yml"]
    assert not {"pull_request", "pull_request_target"} & set(on["gpu.yml"])
    assert on["gpu.yml"]["push"]["branches"] == ["main", "rebasectl/bump-**"]
    assert "rebasectl/**" in on["tool.yml"]["pull_request"]["paths"]
    gpu = flows["gpu.yml"]["jobs"]
    assert gpu["multi-gpu"]["env"]["MULTI_GPU"] == "2"
    assert "--multi-gpu" in (CI / "gpu-tests.sh").read_text()
    for name, flow in flows.items():  # the mirror cache: keyed by the upstream's sha, everywhere
        for job_name, job in flow["jobs"].items():
            if name == "tool.yml":
                continue
            caches = [s for s in job["steps"] if s.get("uses", "").startswith("actions/cache@")]
            assert len(caches) == 1, (name, job_name)
            assert caches[0]["with"]["key"] == "upstream-mirror-${{ steps.upstream.outputs.sha }}"
            assert caches[0]["with"]["restore-keys"] == "upstream-mirror-"


def test_upstream_sha_is_the_branch_tip(tmp_path: Path) -> None:
    fork, series = _clean(tmp_path)
    out = tmp_path / "out"
    r = subprocess.run(["bash", str(CI / "upstream-sha.sh")], capture_output=True, text=True,
                       env={**os.environ, "REBASECTL_DIR": str(series), "GITHUB_OUTPUT": str(out),
                            "REBASECTL_UPSTREAM": str(fork.up.path)}, check=False)
    assert r.returncode == 0 and r.stdout.strip() == fork.up.head()
    assert out.read_text() == f"sha={fork.up.head()}\n"


@pytest.mark.parametrize("breakage, finding", [
    ("uses: actions/checkout@v6", "uses: actions/checkout@v4"),  # node20: actionlint
    ("    timeout-minutes: 30\n", "    timeout-minutes: 30\n    runs-on-typo: x\n"),  # schema
])
def test_workflow_lint_fails_on_a_finding(tmp_path: Path, breakage: str, finding: str) -> None:
    """ci/lint-workflows.sh passes on the shipped workflows and fails on a broken copy."""
    repo = tmp_path / "r"
    (repo / "ci").mkdir(parents=True)
    (repo / "ci" / "lint-workflows.sh").write_bytes((CI / "lint-workflows.sh").read_bytes())
    subprocess.run(["cp", "-r", str(ROOT / ".github"), str(repo / ".github")], check=True)
    script = ["bash", str(repo / "ci" / "lint-workflows.sh")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    ok = subprocess.run(script, capture_output=True, text=True, check=False, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    flow = repo / ".github" / "workflows" / "pr-check.yml"
    assert breakage in flow.read_text()
    flow.write_text(flow.read_text().replace(breakage, finding, 1))
    bad = subprocess.run(script, capture_output=True, text=True, check=False, env=env)
    assert bad.returncode != 0
