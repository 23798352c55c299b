"""Run tests/regression against a Megatron tree and say, per patch, what passed and what failed.

``--against patched`` (default) runs the suite on the patched work tree: every test must pass.
``--against base`` runs the same tests on the unpatched base: every patch must have at least one
failing test there, or the suite does not cover it ("uncovered"). pytest runs in a subprocess with
``REBASECTL_TEST_TREE`` naming the tree (tests/regression/conftest.py puts it on sys.path); its
JUnit XML gives the per-test outcomes, which are mapped to patches through series.yaml ``tests:``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ExitCode, RebasectlError
from .gitio import Git
from .series import Series, load
from .workspace import Workspace


@dataclass
class PatchResult:
    id: str
    tests: list[str]
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[str] = field(default_factory=list)


@dataclass
class TestRun:
    against: str
    tree: str
    patches: list[PatchResult]
    uncovered: list[str]
    returncode: int
    log_tail: str

    @property
    def result(self) -> str:
        if self.against == "base":
            return "failed" if self.uncovered else "passed"
        return (
            "failed"
            if any(p.failed for p in self.patches) or self.returncode not in (0, 5)
            else "passed"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "rebasectl.test/1",
            "against": self.against,
            "tree": self.tree,
            "result": self.result,
            "patches": [
                {
                    "id": p.id,
                    "tests": p.tests,
                    "passed": p.passed,
                    "failed": p.failed,
                    "skipped": p.skipped,
                    "failures": p.failures,
                }
                for p in self.patches
            ],
            "uncovered": self.uncovered,
        }


def marker_expression(device: str | None) -> str | None:
    if device == "cpu":
        return "not gpu and not multi_gpu and not needs_te"
    if device == "gpu":
        return "gpu and not multi_gpu"
    return None


def select(series: Series, patch_id: str | None) -> list[tuple[str, list[str]]]:
    entries = [series.by_id(patch_id)] if patch_id else list(series.patches)
    return [(e.id, list(e.tests)) for e in entries]


def run_pytest(
    root: Path,
    tree: Path,
    files: list[str],
    device: str | None,
    jobs: int = 1,
) -> tuple[int, dict[str, list[str]], str]:
    """Run pytest on ``files``; returns (exit code, {file: [outcome:testid, ...]}, output tail)."""
    with tempfile.TemporaryDirectory(prefix="rebasectl-test-") as tmp:
        junit = Path(tmp) / "junit.xml"
        args = [
            sys.executable,
            "-m",
            "pytest",
            *files,
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={junit}",
            "-rfE",
        ]
        if jobs > 1:
            args += ["-n", str(jobs)]  # pytest-xdist
        expr = marker_expression(device)
        if expr:
            args += ["-m", expr]
        env = dict(os.environ)
        env["REBASECTL_TEST_TREE"] = str(tree)
        proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, check=False)
        outcomes = parse_junit(junit) if junit.exists() else {}
    tail = (proc.stdout + proc.stderr)[-4000:]
    return proc.returncode, outcomes, tail


def parse_junit(path: Path) -> dict[str, list[str]]:
    """{test file: ["passed:nodeid", "failed:nodeid", "skipped:nodeid", ...]}"""
    outcomes: dict[str, list[str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        file = case.get("file") or ""
        name = case.get("name") or ""
        node = f"{file}::{name}"
        if case.find("failure") is not None or case.find("error") is not None:
            state = "failed"
        elif case.find("skipped") is not None:
            state = "skipped"
        else:
            state = "passed"
        outcomes.setdefault(file, []).append(f"{state}:{node}")
    return outcomes


def run_tests(
    ws: Workspace,
    tree: Path,
    *,
    against: str,
    device: str | None,
    patch_id: str | None,
    jobs: int = 1,
) -> TestRun:
    series = load(ws.root)
    selected = select(series, patch_id)
    files = sorted({t for _, tests in selected for t in tests})
    missing = [f for f in files if not (ws.root / f).exists()]
    if missing:
        raise RebasectlError(f"series.yaml names a test that does not exist: {missing[0]}")
    if not files:
        raise RebasectlError("no regression tests are listed in series.yaml (`tests:`)")
    if jobs > 1 and importlib.util.find_spec("xdist") is None:
        raise RebasectlError("--jobs needs pytest-xdist (pip install pytest-xdist)")
    code, outcomes, tail = run_pytest(ws.root, tree, files, device, jobs)
    if code not in (0, 1, 5):
        raise RebasectlError(
            f"pytest could not run (exit {code}): "
            f"{tail.strip().splitlines()[-1] if tail.strip() else ''}",
            ExitCode.TESTS_FAILED,
        )
    results: list[PatchResult] = []
    for pid, tests in selected:
        result = PatchResult(pid, tests)
        for test in tests:
            for item in outcomes.get(test, []):
                state, node = item.split(":", 1)
                if state == "passed":
                    result.passed += 1
                elif state == "skipped":
                    result.skipped += 1
                else:
                    result.failed += 1
                    result.failures.append(node)
        results.append(result)
    # On the base every patch needs a failing test. Under --cpu/--gpu only the patches that have
    # tests in that selection are judged (a CPU-only patch has nothing to prove on --gpu).
    judged = [r for r in results if device is None or r.passed + r.failed > 0]
    uncovered = [r.id for r in judged if r.failed == 0] if against == "base" else []
    return TestRun(against, tree_id(tree), results, uncovered, code, tail)


def tree_id(tree: Path) -> str:
    if (tree / ".git").exists():
        try:
            return Git(tree).head()
        except RebasectlError:
            pass
    return str(tree)


def ensure_base_tree(ws: Workspace, git: Git, base: str) -> Path:
    """A checkout of the unpatched base under .rebasectl/base-tree (made once per base)."""
    path = ws.state_dir / "base-tree"
    if (path / ".git").exists():
        tree = Git(path)
        if tree.head() == base:
            return path
        tree.reset_hard(base)
        return path
    git.run(["worktree", "prune"], check=False)
    git.worktree_add(path, base)
    return path
