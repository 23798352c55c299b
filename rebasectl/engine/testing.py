"""Run tests/regression against a Megatron tree and say, per patch, what passed and what failed.

``--against patched`` (default) runs the suite on the patched work tree: every test must pass.
``--against base`` runs the same tests on the unpatched base: every patch must have at least one
test that ran there and failed *on an assertion* (``AssertionError``, or pytest's own ``Failed``
from ``pytest.raises``/``pytest.fail``): an import error, a syntax error or a setup error on the
base proves nothing about the patch, so such a patch is "uncovered". pytest runs in a subprocess
with ``REBASECTL_TEST_TREE`` naming the tree (tests/regression/conftest.py puts it first on
sys.path and checks that ``megatron.core`` is imported from it); its JUnit XML gives each test's
outcome, failure kind, message and location, mapped to patches through series.yaml ``tests:``.

The verdict is pytest's: any failure or error is exit 3, whether or not a series entry claims the
test (``./tests/x.py`` in series.yaml names the same file as ``tests/x.py``; a case parametrized
with a patch id counts for that patch only when the patch lists the file, else for every patch
that does). Each failure is classified (docs/design.md, ``test``): ``patch`` (an assertion, or an
exception, raised about the patch's behaviour), ``harness`` (the suite could not run it: an import
or name error, an attribute the upstream renamed, an error in setup, teardown or collection) or
``unmapped`` (no series entry claims the test). Tests marked ``default_path`` compare a user's
default path with the base's and pass on the base by design: ``--against base`` neither counts
nor judges them.

A run that cannot run is an error, never a pass: no pytest (or no pytest-xdist for ``-j``), a
``--tree`` that is not a Megatron tree, and a run in which no test executed (all skipped or
deselected) are exit 2 with one line saying why.

``--multi-gpu N`` also runs the ``multi_gpu`` tests with ``torchrun --standalone --nproc-per-node N
-m pytest -m multi_gpu`` (one process per GPU, NCCL; ``REBASECTL_MULTI_GPU_BACKEND=gloo`` runs the
same tests on CPUs). Each rank writes its own JUnit XML; a test fails if it fails on any rank, and
a rank that wrote none (crashed) is an error. NVLink multicast is always off in that launch.
"""

from __future__ import annotations

import importlib.util
import os
import posixpath
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..git import Repo, Worktree
from ..infra.errors import ExitCode, RebasectlError
from ..infra.progress import Counted, Notify
from ..model.series import Series, load
from ..model.workspace import Workspace

SCHEMA = "rebasectl.test/1"
MESSAGE_LINES = 6  # lines of a failure's message kept in the JSON and the table


class Outcome(str, Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


class Category(str, Enum):
    """Whose failure it is (docs/design.md, ``test``)."""

    PATCH = "patch"  # the patch's behaviour is wrong (or the resolution that carried it)
    HARNESS = "harness"  # the suite could not run the test: a broken harness, not a verdict
    UNMAPPED = "unmapped"  # no series entry claims the test


class FailureKind(str, Enum):
    """Why a test failed. Only ``assertion`` proves that the base lacks a patch's behaviour."""

    ASSERTION = "assertion"  # AssertionError, or pytest's Failed (DID NOT RAISE, pytest.fail)
    EXCEPTION = "exception"  # another exception raised by the test body (TypeError, ...)
    BROKEN = "broken"  # import/syntax error, or an error in setup/teardown: proves nothing


_PROOF_TYPES = {"AssertionError", "Failed"}
_BROKEN_TYPES = {"ImportError", "ModuleNotFoundError", "SyntaxError", "IndentationError",
                 "TabError", "NameError"}
# A name the upstream renamed or moved reads as one of these: the test never got to its question.
# A suite says "I could not run this" by raising an exception class named HarnessError.
_HARNESS_TYPES = _BROKEN_TYPES | {"AttributeError", "HarnessError"}
DEFAULT_PATH = "default_path"  # the marker (a JUnit property ``marker``) of default-path checks
_LOCATION = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+): (?P<type>[\w.]+)$")


@dataclass(frozen=True)
class CaseResult:
    """One test case as the JUnit XML reports it."""

    node: str  # file::name[params]
    file: str
    outcome: Outcome
    kind: FailureKind | None = None
    message: str = ""
    location: str = ""
    exc_type: str = ""
    default_path: bool = False

    @property
    def category(self) -> Category:
        """``patch`` or ``harness`` for a claimed failure (``unmapped`` is decided by the run)."""
        if self.kind is FailureKind.BROKEN or self.exc_type in _HARNESS_TYPES:
            return Category.HARNESS
        return Category.PATCH


@dataclass
class PatchResult:
    id: str
    tests: list[str]
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[CaseResult] = field(default_factory=list)

    @property
    def proving(self) -> int:
        """Failures that show a missing behaviour (assertions), as opposed to a broken run."""
        return sum(1 for f in self.failures if f.kind is FailureKind.ASSERTION)

    def count(self, case: CaseResult) -> None:
        if case.outcome is Outcome.PASSED:
            self.passed += 1
        elif case.outcome is Outcome.SKIPPED:
            self.skipped += 1
        else:
            self.failed += 1
            self.failures.append(case)


@dataclass
class TestRun:
    against: str
    tree: str
    patches: list[PatchResult]
    uncovered: list[str]
    returncode: int
    log_tail: str
    unmapped: list[CaseResult] = field(default_factory=list)  # failures no entry claims

    @property
    def result(self) -> str:
        if self.against == "base":
            return "failed" if self.uncovered else "passed"
        # pytest's verdict: a failure anywhere (claimed or not) or a non-zero pytest exit
        failed = any(p.failed for p in self.patches) or self.unmapped or self.returncode == 1
        return "failed" if failed else "passed"

    def categories(self) -> dict[str, int]:
        """Failures per category over the whole run."""
        counts = {c.value: 0 for c in Category}
        for p in self.patches:
            for f in p.failures:
                counts[f.category.value] += 1
        counts[Category.UNMAPPED.value] = len(self.unmapped)
        return counts

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.TESTS_FAILED if self.result == "failed" else ExitCode.OK

    def verdict(self) -> str:
        if self.result == "passed":
            return f"regression tests {'cover every patch' if self.against == 'base' else 'passed'}"
        if self.against == "base":
            return ("not covered (no test fails on an assertion on the base): "
                    + ", ".join(self.uncovered))
        counts = ", ".join(f"{n} {c}" for c, n in self.categories().items() if n)
        return f"regression tests failed ({counts or 'pytest exit ' + str(self.returncode)})"


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


# -- preconditions ---------------------------------------------------------------------------------
def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def preflight(jobs: int) -> None:
    """Refuse a run that cannot happen, before anything starts: the suite runs under this
    interpreter (``sys.executable -m pytest``), so its environment must have pytest."""
    if not _importable("pytest"):
        raise RebasectlError(f"rebasectl test needs pytest in this environment ({sys.executable}):"
                             " pip install pytest")
    if jobs > 1 and not _importable("xdist"):
        raise RebasectlError("-j/--jobs needs pytest-xdist in this environment: "
                             "pip install pytest-xdist (or run without -j)")


def check_tree(tree: Path) -> Path:
    """A Megatron-LM checkout: one with ``megatron/core/__init__.py``."""
    if not tree.is_dir():
        raise RebasectlError(f"--tree {tree}: not a directory")
    if not (tree / "megatron" / "core" / "__init__.py").is_file():
        raise RebasectlError(f"--tree {tree}: not a Megatron-LM tree "
                             "(no megatron/core/__init__.py)")
    return tree.resolve()


def select(series: Series, patch_id: str | None) -> list[tuple[str, list[str]]]:
    """(id, test files) of the selected entries, the files spelled as pytest reports them
    (``./tests/x.py`` and ``tests//x.py`` are ``tests/x.py``, as for ``file:``)."""
    entries = [series.by_id(patch_id)] if patch_id else list(series.patches)
    return [(e.id, [posixpath.normpath(t) for t in e.tests]) for e in entries]


# -- running pytest --------------------------------------------------------------------------------
def _pytest_args(files: Sequence[str], junit: str) -> list[str]:
    return ["-m", "pytest", *files, "-q", "-p", "no:cacheprovider", "-o", "junit_family=xunit1",
            f"--junitxml={junit}", "-rfE"]


def run_pytest(root: Path, tree: Path, files: list[str], device: str | None,
               jobs: int = 1, base_tree: Path | None = None,
               notify: Notify | None = None) -> tuple[int, list[CaseResult], str]:
    """Run pytest on ``files``; returns (exit code, the cases, output tail). ``base_tree``, the
    unpatched tree the default-path checks compare with, is passed as ``REBASECTL_BASE_TREE``
    (a value already in the environment wins). Its output is read as it comes: pytest's
    count-style progress (``[ 120/340]``) goes up as a ``Counted`` line, so a long run is never
    silent."""
    with tempfile.TemporaryDirectory(prefix="rebasectl-test-") as tmp:
        junit = Path(tmp) / "junit.xml"
        args = [sys.executable, *_pytest_args(files, str(junit)),
                "-o", "console_output_style=count"]
        if jobs > 1:
            args += ["-n", str(jobs)]  # pytest-xdist
        expr = marker_expression(device)
        if expr:
            args += ["-m", expr]
        env = dict(os.environ, REBASECTL_TEST_TREE=str(tree))
        if base_tree is not None:
            env.setdefault("REBASECTL_BASE_TREE", str(base_tree))
        code, output = _stream(args, root, env, notify)
        cases = parse_junit(junit) if junit.exists() else []
    return code, cases, output[-4000:]


_COUNT = re.compile(r"\[\s*(\d+)/(\d+)\]\s*$")


def _stream(args: list[str], cwd: Path, env: dict[str, str],
            notify: Notify | None) -> tuple[int, str]:
    """Run a command, its stderr folded into stdout; each count marker it prints is news."""
    tail: list[str] = []
    with subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            tail.append(line)
            if len(tail) > 400:
                del tail[:200]
            m = _COUNT.search(line)
            if m and notify is not None:
                done, total = int(m.group(1)), int(m.group(2))
                notify(Counted(f"tests: {done} of {total} run", done, total))
    return proc.returncode, "".join(tail)


def run_torchrun(root: Path, tree: Path, files: list[str],
                 nproc: int) -> tuple[int, list[CaseResult], str]:
    """Run the ``multi_gpu`` tests of ``files`` under torchrun with ``nproc`` ranks.

    Returns (exit code, merged cases, output tail); the code is 0, 1 (some test failed on some
    rank) or 5 (no test ran). Raises when a rank wrote no JUnit XML."""
    with tempfile.TemporaryDirectory(prefix="rebasectl-mgpu-") as tmp:
        # pytest expands $RANK (set by torchrun per worker): one XML per rank.
        # each rank runs rank_pytest (a failed test is not a failed rank: torchrun would end
        # the others before they wrote their XML)
        pytest_args = _pytest_args(files, str(Path(tmp) / "junit-rank$RANK.xml"))[2:]
        args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
                str(nproc), "-m", "rebasectl.engine.rank_pytest", *pytest_args, "-m", "multi_gpu"]
        env = dict(os.environ, REBASECTL_TEST_TREE=str(tree), **MULTI_GPU_ENV)
        try:
            proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True,
                                  check=False, timeout=MULTI_GPU_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise RebasectlError(f"multi-GPU tests did not finish in {MULTI_GPU_TIMEOUT_S} s "
                                 "(a rank hangs?)", ExitCode.TESTS_FAILED) from exc
        tail = (proc.stdout + proc.stderr)[-4000:]
        junits = [Path(tmp) / f"junit-rank{rank}.xml" for rank in range(nproc)]
        missing = [str(rank) for rank, junit in enumerate(junits) if not junit.exists()]
        if missing:  # a rank that crashed (or that torchrun killed after another one crashed)
            last = tail.strip().splitlines()[-1] if tail.strip() else ""
            raise RebasectlError(f"multi-GPU tests: rank {', '.join(missing)} wrote no JUnit XML "
                                 f"(torchrun exit {proc.returncode}): {last}",
                                 ExitCode.TESTS_FAILED)
        cases = merge_rank_outcomes([parse_junit(junit) for junit in junits])
    states = {c.outcome for c in cases}
    code = 1 if Outcome.FAILED in states else 0 if states else 5
    return code, cases, tail


_RANK = {Outcome.FAILED: 2, Outcome.PASSED: 1, Outcome.SKIPPED: 0}


def merge_rank_outcomes(per_rank: list[list[CaseResult]]) -> list[CaseResult]:
    """One result per test over all ranks: failed on any rank > passed on any > skipped."""
    merged: dict[str, CaseResult] = {}
    for cases in per_rank:
        for case in cases:
            kept = merged.get(case.node)
            if kept is None or _RANK[case.outcome] > _RANK[kept.outcome]:
                merged[case.node] = case
    return list(merged.values())


# -- JUnit -----------------------------------------------------------------------------------------
def parse_junit(path: Path) -> list[CaseResult]:
    """The cases of a pytest JUnit XML (xunit1: ``file`` attributes), with failure details."""
    cases: list[CaseResult] = []
    for case in ET.parse(path).getroot().iter("testcase"):
        file = posixpath.normpath(case.get("file") or "")
        node = f"{file}::{case.get('name') or ''}"
        default = any(p.get("name") == "marker" and p.get("value") == DEFAULT_PATH
                      for p in case.iter("property"))
        failure, error = case.find("failure"), case.find("error")
        if failure is None and error is None:
            skipped = case.find("skipped") is not None
            cases.append(CaseResult(node, file, Outcome.SKIPPED if skipped else Outcome.PASSED,
                                    default_path=default))
            continue
        element = failure if failure is not None else error
        assert element is not None
        kind, location, exc_type = classify_failure(element.text or "",
                                                    setup_error=failure is None)
        message = "\n".join((element.get("message") or "").splitlines()[:MESSAGE_LINES])
        cases.append(CaseResult(node, file, Outcome.FAILED, kind, message, location, exc_type,
                                default))
    return cases


def classify_failure(text: str, *, setup_error: bool) -> tuple[FailureKind, str, str]:
    """The kind of a failure, its ``file:line`` and exception type from pytest's traceback
    text, whose last line is ``path:LINE: ExceptionType``."""
    location, exc_type = "", ""
    for line in reversed(text.strip().splitlines()):
        m = _LOCATION.match(line.strip())
        if m:
            location = f"{m.group('file')}:{m.group('line')}"
            exc_type = m.group("type").rsplit(".", 1)[-1]
            break
    if setup_error or exc_type in _BROKEN_TYPES:
        return FailureKind.BROKEN, location, exc_type
    if exc_type in _PROOF_TYPES:
        return FailureKind.ASSERTION, location, exc_type
    return FailureKind.EXCEPTION, location, exc_type


# -- the run ---------------------------------------------------------------------------------------
def _files_of(ws: Workspace, selected: list[tuple[str, list[str]]]) -> list[str]:
    files = sorted({t for _, tests in selected for t in tests})
    missing = [f for f in files if not (ws.root / f).exists()]
    if missing:
        raise RebasectlError(f"series.yaml names a test that does not exist: {missing[0]}")
    if not files:
        raise RebasectlError("no regression tests are listed in series.yaml (`tests:`)")
    return files


def _collect(ws: Workspace, tree: Path, files: list[str], device: str | None, jobs: int,
             multi_gpu: int, base_tree: Path | None,
             notify: Notify | None = None) -> tuple[int, list[CaseResult], str]:
    """Run pytest (unless ``--multi-gpu`` alone) and torchrun (with ``--multi-gpu``)."""
    code, tail = 5, ""
    cases: list[CaseResult] = []
    if not multi_gpu or device is not None:
        code, cases, tail = run_pytest(ws.root, tree, files, device, jobs, base_tree, notify)
    if code not in (0, 1, 5) and not (code == 2 and cases):  # 2 with cases: collection errors
        last = tail.strip().splitlines()[-1] if tail.strip() else ""
        raise RebasectlError(f"pytest could not run (exit {code}): {last}")
    code = 1 if code == 2 else code
    if multi_gpu:
        mcode, mcases, mtail = run_torchrun(ws.root, tree, files, multi_gpu)
        cases += mcases
        code = 1 if 1 in (code, mcode) else 5 if code == mcode == 5 else 0
        tail = (tail + mtail)[-4000:]
    return code, cases, tail


def run_tests(ws: Workspace, tree: Path, *, against: str, device: str | None,
              patch_id: str | None, jobs: int = 1, multi_gpu: int = 0,
              base_tree: Path | None = None, notify: Notify | None = None) -> TestRun:
    preflight(jobs)
    series = load(ws.root)
    selected = select(series, patch_id)
    files = _files_of(ws, selected)
    base = tree if against == "base" else base_tree or existing_base_tree(ws, series)
    code, cases, tail = _collect(ws, tree, files, device, jobs, multi_gpu, base, notify)
    results, unmapped = _count(select(series, None), selected, cases, against == "base")
    if not any(r.passed + r.failed for r in results):
        skipped = sum(r.skipped for r in results)
        raise RebasectlError(f"no regression test ran on {tree} ({skipped} skipped, the rest "
                             "deselected): nothing was tested; check the selection (--cpu/--gpu/"
                             "--patch) and the skip reasons with `pytest -rs`")
    # On the base every patch needs a test that failed on an assertion. Under --cpu/--gpu only
    # the patches that have tests in that selection are judged (a CPU-only patch has nothing to
    # prove on --gpu).
    judged = [r for r in results if (device is None and not multi_gpu) or r.passed + r.failed]
    uncovered = [r.id for r in judged if r.proving == 0] if against == "base" else []
    return TestRun(against, tree_id(tree), results, uncovered, code, tail, unmapped)


def _count(every: list[tuple[str, list[str]]], selected: list[tuple[str, list[str]]],
           cases: list[CaseResult], on_base: bool) -> tuple[list[PatchResult], list[CaseResult]]:
    """Each case counted for the selected patches that claim it; failures no entry of the whole
    series claims are returned as unmapped. On the base, default-path checks are not counted."""
    claimants: dict[str, list[str]] = {}
    for pid, tests in every:
        for test in tests:
            claimants.setdefault(test, []).append(pid)
    results = [PatchResult(pid, tests) for pid, tests in selected]
    unmapped: list[CaseResult] = []
    for case in cases:
        if on_base and case.default_path:
            continue
        owners = [pid for test, pids in claimants.items() for pid in pids
                  if case.file == test or case.file.startswith(test.rstrip("/") + "/")]
        if not owners:
            if case.outcome is Outcome.FAILED:
                unmapped.append(case)
            continue
        for result in results:
            if result.id in owners and belongs_to(case.node, result.id, owners):
                result.count(case)
    return results, unmapped


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
    """The commit a tree is at, else its path."""
    if (tree / ".git").exists():
        head = Worktree(tree).head()
        if head is not None:
            return head
    return str(tree)


def existing_base_tree(ws: Workspace, series: Series) -> Path | None:
    """The checkout of the series' base under .rebasectl/base-tree, if one is there."""
    tree = Worktree(ws.base_tree)
    if tree.exists and tree.head() == series.upstream.base:
        return ws.base_tree
    return None


def ensure_base_tree(ws: Workspace, repo: Repo, base: str) -> Path:
    """A checkout of the unpatched base under .rebasectl/base-tree (made once per base)."""
    tree = Worktree(ws.base_tree)
    if tree.exists and tree.head() is not None:
        if tree.head() != base:
            tree.discard_changes()
            tree.move_to(base)
        return ws.base_tree
    return repo.add_worktree(ws.base_tree, base).path
