"""Run tests/regression against a Megatron tree and say, per patch, what passed and what failed.

``--against patched`` (default) runs the suite on the patched work tree: every test must pass.
``--against base`` runs the same tests on the unpatched base: every patch must have at least one
failing test there, or the suite does not cover it ("uncovered"). pytest runs in a subprocess with
``REBASECTL_TEST_TREE`` naming the tree (tests/regression/conftest.py puts it on sys.path); its
JUnit XML gives the per-test outcomes, which are mapped to patches through series.yaml ``tests:``.

``--multi-gpu N`` also runs the ``multi_gpu`` tests with ``torchrun --standalone --nproc-per-node N
-m pytest -m multi_gpu`` (one process per GPU, NCCL; ``REBASECTL_MULTI_GPU_BACKEND=gloo`` runs the
same tests on CPUs). Each rank writes its own JUnit XML; a test fails if it fails on any rank, and
a rank that wrote none (crashed) is an error. NVLink multicast is always off in that launch.
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


# Always set in a multi-GPU launch: NVLink SHARP / multicast off (NCCL, torch symmetric memory,
# NVSHMEM). The lent machines do not support it reliably.
MULTI_GPU_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
MULTI_GPU_TIMEOUT_S = 3600


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


def run_torchrun(
    root: Path, tree: Path, files: list[str], nproc: int
) -> tuple[int, dict[str, list[str]], str]:
    """Run the ``multi_gpu`` tests of ``files`` under torchrun with ``nproc`` ranks.

    Returns (exit code, merged outcomes, output tail); the code is 0, 1 (some test failed on some
    rank) or 5 (no test ran). Raises when a rank wrote no JUnit XML."""
    with tempfile.TemporaryDirectory(prefix="rebasectl-mgpu-") as tmp:
        args = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(nproc),
            "-m",
            "pytest",
            *files,
            "-q",
            "-m",
            "multi_gpu",
            "-p",
            "no:cacheprovider",
            "-o",
            "junit_family=xunit1",
            # pytest expands $RANK (set by torchrun per worker): one XML per rank.
            f"--junitxml={Path(tmp) / 'junit-rank$RANK.xml'}",
            "-rfE",
        ]
        env = dict(os.environ)
        env["REBASECTL_TEST_TREE"] = str(tree)
        env.update(MULTI_GPU_ENV)
        try:
            proc = subprocess.run(
                args,
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=MULTI_GPU_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as exc:
            raise RebasectlError(
                f"multi-GPU tests did not finish in {MULTI_GPU_TIMEOUT_S} s (a rank hangs?)",
                ExitCode.TESTS_FAILED,
            ) from exc
        tail = (proc.stdout + proc.stderr)[-4000:]
        junits = [Path(tmp) / f"junit-rank{rank}.xml" for rank in range(nproc)]
        missing = [str(rank) for rank, junit in enumerate(junits) if not junit.exists()]
        if missing:
            # A rank that crashed (or that torchrun killed after another rank crashed).
            last = tail.strip().splitlines()[-1] if tail.strip() else ""
            raise RebasectlError(
                f"multi-GPU tests: rank {', '.join(missing)} wrote no JUnit XML "
                f"(torchrun exit {proc.returncode}): {last}",
                ExitCode.TESTS_FAILED,
            )
        per_rank = [parse_junit(junit) for junit in junits]
    outcomes = merge_rank_outcomes(per_rank)
    states = [item.split(":", 1)[0] for items in outcomes.values() for item in items]
    code = 1 if "failed" in states else 0 if states else 5
    return code, outcomes, tail


def merge_rank_outcomes(per_rank: list[dict[str, list[str]]]) -> dict[str, list[str]]:
    """One outcome per test over all ranks: failed on any rank > passed on any > skipped."""
    rank_of = {"failed": 2, "passed": 1, "skipped": 0}
    merged: dict[str, dict[str, str]] = {}
    for outcomes in per_rank:
        for file, items in outcomes.items():
            tests = merged.setdefault(file, {})
            for item in items:
                state, node = item.split(":", 1)
                if rank_of[state] >= rank_of[tests.get(node, "skipped")]:
                    tests[node] = state
    return {
        file: [f"{state}:{node}" for node, state in tests.items()] for file, tests in merged.items()
    }


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
    multi_gpu: int = 0,
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
    # With --multi-gpu alone only the multi_gpu tests run; with --cpu/--gpu that selection too.
    code, tail = 5, ""
    outcomes: dict[str, list[str]] = {}
    if not multi_gpu or device is not None:
        code, outcomes, tail = run_pytest(ws.root, tree, files, device, jobs)
    if code not in (0, 1, 5):
        raise RebasectlError(
            f"pytest could not run (exit {code}): "
            f"{tail.strip().splitlines()[-1] if tail.strip() else ''}",
            ExitCode.TESTS_FAILED,
        )
    if multi_gpu:
        mcode, moutcomes, mtail = run_torchrun(ws.root, tree, files, multi_gpu)
        for file, items in moutcomes.items():
            outcomes.setdefault(file, []).extend(items)
        code = 1 if 1 in (code, mcode) else 5 if code == mcode == 5 else 0
        tail = (tail + mtail)[-4000:]
    results: list[PatchResult] = []
    all_ids = [e.id for e in series.patches]
    for pid, tests in selected:
        result = PatchResult(pid, tests)
        for test in tests:
            for item in outcomes.get(test, []):
                state, node = item.split(":", 1)
                if not belongs_to(node, pid, all_ids):
                    continue
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
    judged = [r for r in results if (device is None and not multi_gpu) or r.passed + r.failed > 0]
    uncovered = [r.id for r in judged if r.failed == 0] if against == "base" else []
    return TestRun(against, tree_id(tree), results, uncovered, code, tail)


def belongs_to(node: str, patch_id: str, patch_ids: list[str]) -> bool:
    """Whether a test counts for ``patch_id``. A module listed under several patches can say
    which patch each case is for by naming it in the case's parameters as ``<patch-id>:`` (e.g.
    ``test_x[cpu-partial-ckpt-load:file.py]``); a case that names no patch counts for all."""
    params = node.partition("[")[2]
    head, colon, _ = params.partition(":")
    if not colon:
        return True
    named = [p for p in patch_ids if head == p or head.endswith(f"-{p}")]
    if not named:
        return True
    return patch_id == max(named, key=len)  # "dp-reshardable-compat" is not "compat"


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
