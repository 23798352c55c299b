"""`rebasectl test` that cannot run is an error, never a pass; failures say why; coverage on the
base counts assertions only; `apply --install` makes the tree the environment's megatron.

Every case runs the real CLI (in this process, tests/harness/cli.py; a real one where a module
must be missing) on a tiny fake Megatron tree (``megatron/core``) and a series whose ``tests:``
name real pytest modules, so pytest (started by ``rebasectl test`` as a process), its JUnit XML
and the exit codes are the real ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from rebasectl.engine import serialize
from rebasectl.engine.testing import FailureKind, classify_failure
from tests.harness.cli import run as rebasectl

SERIES = """\
version: 1
upstream: {{name: up, url: https://example.invalid/up.git, branch: main, base: "{base}"}}
patches:
  - id: one
    file: 0001-one.patch
    title: "one"
    tests: [tests/regression/test_one.py]
  - id: two
    file: 0002-two.patch
    title: "two"
    tests: [tests/regression/test_two.py]
"""

PATCH = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: A <a@example.invalid>
Date: Thu, 1 Jan 2026 00:00:00 +0000
Subject: {title}

---
"""

CONFTEST = """
import os, sys
tree = os.environ.get("REBASECTL_TEST_TREE")
if tree:
    sys.path.insert(0, tree)

def pytest_configure(config):
    for m in ("cpu", "gpu", "multi_gpu", "needs_te", "default_path"):
        config.addinivalue_line("markers", m)
"""


def _workspace(tmp_path: Path, one: str, two: str) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / "patches").mkdir(parents=True)
    (ws / "series.yaml").write_text(SERIES.format(base="a" * 40))
    for name, title in (("0001-one.patch", "one"), ("0002-two.patch", "two")):
        (ws / "patches" / name).write_text(PATCH.format(title=title))
    reg = ws / "tests" / "regression"
    reg.mkdir(parents=True)
    (reg / "conftest.py").write_text(CONFTEST)
    (reg / "test_one.py").write_text(textwrap.dedent(one))
    (reg / "test_two.py").write_text(textwrap.dedent(two))
    tree = tmp_path / "tree"
    (tree / "megatron" / "core").mkdir(parents=True)
    (tree / "megatron" / "core" / "__init__.py").write_text("FEATURE = False\n")
    return ws, tree


PASSING = """
import pytest
@pytest.mark.cpu
def test_ok():
    assert True
"""

ASSERTS_FEATURE = """
import pytest
@pytest.mark.cpu
def test_feature():
    import megatron.core
    assert megatron.core.FEATURE, "the feature is missing"
"""

IMPORT_ERROR = """
import pytest
@pytest.mark.cpu
def test_module():
    import megatron.core.absent_module  # noqa: F401
"""


def test_tree_that_is_not_megatron_is_exit_2(tmp_path: Path) -> None:
    ws, _ = _workspace(tmp_path, PASSING, PASSING)
    (tmp_path / "empty").mkdir()
    proc = rebasectl(ws, "test", "--tree", str(tmp_path / "empty"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"rebasectl: error: --tree {tmp_path / 'empty'}: not a Megatron-LM tree "
        "(no megatron/core/__init__.py)"]


def test_a_run_in_which_no_test_executed_is_exit_2(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, PASSING, PASSING)
    proc = rebasectl(ws, "test", "--gpu", "--tree", str(tree))  # every test is a cpu test
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no regression test ran" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def _run_without(ws: Path, tree: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where ``module`` cannot be imported (as in an environment without
    it): ``sys.modules[name] = None`` makes every import of it fail."""
    code = (f"import sys; sys.modules[{module!r}] = None; from rebasectl.cli import main; "
            f"sys.argv = ['rebasectl', '-C', {str(ws)!r}, 'test', '--tree', {str(tree)!r}, "
            f"*{list(args)!r}]; main()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)


def test_without_pytest_is_exit_2_naming_what_to_install(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, PASSING, PASSING)
    for args in ((), ("--against", "base")):
        proc = _run_without(ws, tree, "pytest", *args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("rebasectl: error: rebasectl test needs pytest")
        assert proc.stderr.strip().endswith("pip install pytest")


def test_jobs_without_xdist_is_exit_2(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, PASSING, PASSING)
    proc = _run_without(ws, tree, "xdist", "-j", "2")
    assert proc.returncode == 2
    assert "pip install pytest-xdist" in proc.stderr


def test_failures_carry_kind_message_and_location(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, ASSERTS_FEATURE, IMPORT_ERROR)
    proc = rebasectl(ws, "test", "--tree", str(tree), "--json")
    assert proc.returncode == 3, proc.stderr
    data = json.loads(proc.stdout)
    one, two = data["patches"]
    assert one["failures"] == ["tests/regression/test_one.py::test_feature"]
    detail = one["failure_details"][0]
    assert detail["kind"] == "assertion"
    assert detail["message"].startswith("AssertionError: the feature is missing")
    assert detail["location"] == "tests/regression/test_one.py:6"
    assert two["failure_details"][0]["kind"] == "broken"
    assert "ModuleNotFoundError" in two["failure_details"][0]["message"]


def test_on_the_base_an_import_error_does_not_cover_a_patch(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, ASSERTS_FEATURE, IMPORT_ERROR)
    proc = rebasectl(ws, "test", "--tree", str(tree), "--against", "base", "--json")
    data = json.loads(proc.stdout)
    assert data["uncovered"] == ["two"], data
    assert [p["proving"] for p in data["patches"]] == [1, 0]
    assert proc.returncode == 3
    assert proc.stderr.strip() == ("rebasectl: error: not covered (no test fails on an "
                                   "assertion on the base): two")


@pytest.mark.parametrize(("text", "setup", "kind"), [
    ("E   AssertionError: x\n\nt.py:3: AssertionError", False, FailureKind.ASSERTION),
    ("E   Failed: DID NOT RAISE ValueError\n\nt.py:5: Failed", False, FailureKind.ASSERTION),
    ("E   ModuleNotFoundError: m\n\nt.py:3: ModuleNotFoundError", False, FailureKind.BROKEN),
    ("E     File x.py, line 1\nE   SyntaxError: bad\n\nx.py:1: SyntaxError", False,
     FailureKind.BROKEN),
    ("E   TypeError: f() got an unexpected keyword\n\nt.py:9: TypeError", False,
     FailureKind.EXCEPTION),
    ("E   AttributeError: module has no attribute 'x'\n\nt.py:9: AttributeError", False,
     FailureKind.EXCEPTION),
    ("E   AssertionError: in a fixture\n\nt.py:2: AssertionError", True, FailureKind.BROKEN),
])
def test_classify_failure(text: str, setup: bool, kind: FailureKind) -> None:
    assert classify_failure(text, setup_error=setup)[0] is kind


def test_apply_install_makes_the_tree_the_environments_megatron(tmp_path: Path) -> None:
    """A throwaway environment (venv without pip) runs `rebasectl.infra.pyenv.install_tree`;
    afterwards a fresh interpreter of that environment, started elsewhere, imports the tree's
    megatron.core."""
    _, tree = _workspace(tmp_path, PASSING, PASSING)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    repo = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo),
                                                       sysconfig.get_paths()["purelib"]]))
    script = ("import pathlib; from rebasectl.infra.pyenv import install_tree; "
              f"print(install_tree(pathlib.Path({str(tree)!r})))")
    install = subprocess.run([str(python), "-c", script], env=env, capture_output=True,
                             text=True, check=False)
    assert install.returncode == 0, install.stderr
    probe = subprocess.run([str(python), "-c", "import megatron.core as m; print(m.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=False,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert probe.stdout.strip() == str(tree / "megatron" / "core" / "__init__.py"), probe.stderr


# -- issue 21, finding 2: the verdict is pytest's; failures classified -------------------------

FAILS_NAMING_TWO = """
import pytest
@pytest.mark.cpu
@pytest.mark.parametrize("case", ["two:x", "plain"])
def test_named(case):
    assert False, case
"""

DEFAULT_PATH_CONFTEST = CONFTEST + """
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("default_path"):
            item.user_properties.append(("marker", "default_path"))
"""

DEFAULT_PATH_TEST = """
import pytest
@pytest.mark.cpu
@pytest.mark.default_path
def test_default_is_upstream():
    assert True
"""


def test_a_dot_slash_test_path_still_counts_its_failures(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, ASSERTS_FEATURE, PASSING)
    yaml = (ws / "series.yaml").read_text()
    (ws / "series.yaml").write_text(yaml.replace("[tests/regression/test_one.py]",
                                                 "[./tests/regression/test_one.py]"))
    proc = rebasectl(ws, "test", "--tree", str(tree), "--json")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    one = json.loads(proc.stdout)["patches"][0]
    assert one["failed"] == 1 and one["tests"] == ["tests/regression/test_one.py"]
    assert one["failure_details"][0]["category"] == "patch"


def test_a_case_named_for_a_patch_that_does_not_list_its_file_is_not_hidden(
        tmp_path: Path) -> None:
    """`two:x` names patch two, which does not list test_one.py: the failure is one's."""
    ws, tree = _workspace(tmp_path, FAILS_NAMING_TWO, PASSING)
    proc = rebasectl(ws, "test", "--tree", str(tree), "--json")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    one, two = json.loads(proc.stdout)["patches"]
    assert one["failed"] == 2 and two["failed"] == 0
    assert "2 patch" in proc.stderr


def test_failures_are_classified_patch_or_harness_in_table_and_json(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, ASSERTS_FEATURE, IMPORT_ERROR)
    proc = rebasectl(ws, "test", "--tree", str(tree), "--json")
    data = json.loads(proc.stdout)
    assert data["categories"] == {"patch": 1, "harness": 1, "unmapped": 0}
    assert [p["categories"] for p in data["patches"]] == [{"patch": 1, "harness": 0},
                                                          {"patch": 0, "harness": 1}]
    table = rebasectl(ws, "test", "--tree", str(tree))
    assert table.returncode == 3
    assert "[patch, assertion]" in table.stdout and "[harness, broken]" in table.stdout
    assert "regression tests failed (1 patch, 1 harness)" in table.stderr


def test_default_path_checks_are_not_counted_on_the_base(tmp_path: Path) -> None:
    ws, tree = _workspace(tmp_path, DEFAULT_PATH_TEST, ASSERTS_FEATURE)
    (ws / "tests" / "regression" / "conftest.py").write_text(
        DEFAULT_PATH_CONFTEST)
    patched = json.loads(rebasectl(ws, "test", "--tree", str(tree), "--json").stdout)
    assert patched["patches"][0]["passed"] == 1  # counted on the patched tree
    proc = rebasectl(ws, "test", "--tree", str(tree), "--against", "base", "--json")
    data = json.loads(proc.stdout)
    assert data["patches"][0]["passed"] == 0  # not counted on the base
    assert data["uncovered"] == ["one"] and proc.returncode == 3


def test_unclaimed_failures_are_unmapped_and_fail_the_run() -> None:
    from rebasectl.engine.testing import CaseResult, Category, Outcome, TestRun, _count

    every = [("one", ["tests/regression/test_one.py"]), ("two", ["tests/regression/sub"])]
    failed = CaseResult("tests/regression/extra.py::t", "tests/regression/extra.py",
                        Outcome.FAILED, FailureKind.ASSERTION, "AssertionError", "x:1",
                        "AssertionError")
    in_dir = CaseResult("tests/regression/sub/t.py::t", "tests/regression/sub/t.py",
                        Outcome.FAILED, FailureKind.EXCEPTION, "", "", "AttributeError")
    results, unmapped = _count(every, every, [failed, in_dir], on_base=False)
    assert unmapped == [failed] and [r.failed for r in results] == [0, 1]
    assert results[1].failures[0].category is Category.HARNESS
    run = TestRun("patched", "t", results, [], 1, "", unmapped)
    assert run.result == "failed" and run.categories()["unmapped"] == 1
    assert serialize.test_run(run)["unmapped"][0]["category"] == "unmapped"


BASE_TREE_TEST = """
import os
from pathlib import Path

import pytest

@pytest.mark.cpu
def test_compares_with_the_unpatched_base():
    init = Path("megatron") / "core" / "__init__.py"
    tested = Path(os.environ["REBASECTL_TEST_TREE"]) / init
    base = Path(os.environ.get("REBASECTL_BASE_TREE", "none given")) / init
    assert tested.read_text() == "FEATURE = True\\n"
    assert base.read_text() == "FEATURE = False\\n", "no unpatched base tree"
"""


def _feature_series(tmp_path: Path) -> tuple[Path, str]:
    """One patch that turns FEATURE on in megatron/core, with a regression test that checks
    the tested tree has it on and the base tree off; (series, upstream path)."""
    from tests.unit.test_attribution import Fork
    from tests.unit.test_bump import imported

    init = "megatron/core/__init__.py"
    fork = Fork(tmp_path, {init: "FEATURE = False\n"})
    (tip,) = fork.series([("feat: the feature", {init: ("False", "True")})])
    series = imported(tmp_path, fork, tip)
    yaml = (series / "series.yaml").read_text()
    assert yaml.count("  tests: []\n") == 1
    (series / "series.yaml").write_text(yaml.replace(
        "  tests: []\n", "  tests: [tests/regression/test_one.py]\n"))
    reg = series / "tests" / "regression"
    reg.mkdir(parents=True)
    (reg / "conftest.py").write_text(CONFTEST)
    (reg / "test_one.py").write_text(BASE_TREE_TEST)
    return series, str(fork.up.path)


def test_the_patched_tree_is_compared_with_a_checkout_of_its_base(tmp_path: Path) -> None:
    """`rebasectl test` with no --tree tests the patched work tree (applying the series first)
    and hands the default-path checks the unpatched base (REBASECTL_BASE_TREE): the command
    decides both trees (commands/test.py ``prepare``), cli.py only renders. With --tree or
    --against base there is no patched work tree to compare, so no base is given."""
    from rebasectl.commands.test import prepare
    from rebasectl.model.workspace import Workspace

    series, up = _feature_series(tmp_path)
    proc = rebasectl(series, "test", "--upstream", up, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["patches"][0]["passed"] == 1
    ws = Workspace(series)
    patched = prepare(ws, "patched", up, None, 1)  # the work tree the run made, as it is
    assert patched.base == ws.base_tree and (patched.tree / "megatron").is_dir()
    given = prepare(ws, "patched", up, tmp_path / "up", 1)
    assert (given.tree, given.base) == (tmp_path / "up", None)
    on_base = prepare(ws, "base", up, None, 1)
    assert on_base.base is None and on_base.tree == ws.base_tree


def test_a_patch_file_changed_since_the_tree_was_built_is_what_gets_tested(
        tmp_path: Path) -> None:
    """The work tree is tested as built only while the series is what it was built from: a
    patch file edited since is tested through a rebuild (here the edit turns the feature to
    something the regression test refuses: the run fails on it), and one cut short is refused
    at its line, as every command refuses it (hostile7 #5: the old tree was tested, exit 0)."""
    series, up = _feature_series(tmp_path)
    assert rebasectl(series, "test", "--upstream", up).returncode == 0
    (patch,) = (series / "patches").iterdir()
    text = patch.read_text()
    patch.write_text(text.replace("+FEATURE = True", "+FEATURE = Maybe"))
    proc = rebasectl(series, "test", "--upstream", up, "--json")
    assert proc.returncode == 3, proc.stdout + proc.stderr  # regression tests failed
    init = series / ".rebasectl" / "tree" / "megatron" / "core" / "__init__.py"
    assert init.read_text() == "FEATURE = Maybe\n"
    patch.write_text(text[: text.index("\n---\n") + 5])  # header and `---`: cut short
    proc = rebasectl(series, "test", "--upstream", up)
    assert proc.returncode == 2 and patch.name in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
