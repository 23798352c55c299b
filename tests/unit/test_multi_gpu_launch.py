"""The multi-GPU launcher of `rebasectl test --multi-gpu N` (rebasectl.engine.testing.run_torchrun).

A tiny fake test file runs under a real torchrun with 2 ranks (no process group, no GPU): one test
passes everywhere, one fails on rank 1 only, one is skipped everywhere, one is not ``multi_gpu``
(deselected). It checks that each rank writes its own JUnit XML, that the merge fails a test when
it fails on any rank, and that NVLink multicast is off in the launched environment. The merge
itself is also checked on its own.
"""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path

import pytest

from rebasectl.engine import testing

FAKE_TESTS = """
import os

import pytest


@pytest.mark.multi_gpu
def test_passes_everywhere():
    assert os.environ["NCCL_NVLS_ENABLE"] == "0"
    assert os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert os.environ["NVSHMEM_DISABLE_NVLS"] == "1"
    assert os.environ["WORLD_SIZE"] == "2"


@pytest.mark.multi_gpu
def test_fails_on_rank1_only():
    assert os.environ["RANK"] != "1"


@pytest.mark.multi_gpu
def test_skipped():
    pytest.skip("not here")


def test_not_multi_gpu():
    raise AssertionError("deselected: must not run")
"""

CONFTEST = """
def pytest_configure(config):
    config.addinivalue_line("markers", "multi_gpu: fake")
"""


def _cases(spec: str) -> list[testing.CaseResult]:
    """``"a:passed b:failed"`` -> results of tests t.py::a, t.py::b."""
    out = []
    for item in spec.split():
        name, state = item.split(":")
        out.append(testing.CaseResult(f"t.py::{name}", "t.py", testing.Outcome(state)))
    return out


def _states(cases: list[testing.CaseResult]) -> dict[str, str]:
    return {c.node.split("::")[-1]: c.outcome.value for c in cases}


def test_merge_rank_outcomes_fails_a_test_that_fails_on_any_rank() -> None:
    rank0 = _cases("a:passed b:passed c:skipped d:skipped")
    rank1 = _cases("a:failed b:passed c:passed d:skipped")
    merged = _states(testing.merge_rank_outcomes([rank0, rank1]))
    assert merged == {"a": "failed", "b": "passed", "c": "passed", "d": "skipped"}
    assert _states(testing.merge_rank_outcomes([rank1, rank0])) == merged


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (torchrun)")
def test_run_torchrun_merges_per_rank_junit(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_fake.py").write_text(FAKE_TESTS)
    code, outcomes, tail = testing.run_torchrun(tmp_path, tmp_path, ["test_fake.py"], 2)
    assert code == 1, tail
    assert _states(outcomes) == {
        "test_passes_everywhere": "passed",
        "test_fails_on_rank1_only": "failed",
        "test_skipped": "skipped",
    }, tail


SLOW_RANK0 = """
import os
import time
import pytest

@pytest.mark.multi_gpu
def test_fails_on_rank1_only():
    assert os.environ["RANK"] != "1"

@pytest.mark.multi_gpu
def test_rank0_ends_after_rank1():
    mark = os.path.join(os.environ["REBASECTL_TEST_TREE"], "rank1.pid")
    if os.environ["RANK"] == "1":
        with open(mark, "w") as fh:
            fh.write(str(os.getpid()))
        return
    for _ in range(6000):  # until rank 1's process is gone (its session is over)
        if os.path.exists(mark):
            try:
                os.kill(int(open(mark).read() or 0), 0)
            except (ProcessLookupError, ValueError):
                break
        time.sleep(0.01)
"""


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (torchrun)")
def test_a_test_failing_on_one_rank_does_not_end_the_others(tmp_path: Path) -> None:
    """torchrun ends the other ranks when one exits non-zero; pytest's exit 1 for a failed test
    did that, and rank 0, still running (slower on a busy machine: CI saw it), wrote no XML: the
    run was called a crash. Here rank 0 finishes only after rank 1's process has ended, so the
    outcome was always the crash before rank_pytest; now both XMLs are written and merged."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (tmp_path / "test_slow.py").write_text(SLOW_RANK0)
    code, outcomes, tail = testing.run_torchrun(tmp_path, tmp_path, ["test_slow.py"], 2)
    assert code == 1, tail
    assert _states(outcomes) == {"test_fails_on_rank1_only": "failed",
                                 "test_rank0_ends_after_rank1": "passed"}, tail


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (torchrun)")
def test_run_torchrun_without_xml_is_an_error(tmp_path: Path) -> None:
    from rebasectl.infra.errors import RebasectlError

    (tmp_path / "test_crash.py").write_text(
        "import os\nif os.environ.get('RANK') == '1':\n    os._exit(3)\ndef test_x():\n    pass\n"
    )
    # torchrun may also kill rank 0 once rank 1 died, before rank 0 wrote its XML.
    with pytest.raises(RebasectlError, match=r"rank (0, )?1 wrote no JUnit XML"):
        testing.run_torchrun(tmp_path, tmp_path, ["test_crash.py"], 2)


def test_cases_naming_a_patch_count_for_that_patch_only() -> None:
    from rebasectl.engine.testing import belongs_to

    ids = ["compat", "partial-ckpt-load", "mtp-rl"]
    node = "tests/regression/test_upstream_units.py::test_file[cpu-partial-ckpt-load:x.py]"
    assert belongs_to(node, "partial-ckpt-load", ids)
    assert not belongs_to(node, "mtp-rl", ids)
    assert belongs_to("tests/regression/test_a.py::test_b[1-2]", "mtp-rl", ids)
    assert belongs_to("tests/regression/test_a.py::test_b", "compat", ids)


def test_a_patch_id_that_ends_another_is_not_confused_with_it() -> None:
    from rebasectl.engine.testing import belongs_to

    ids = ["compat", "dp-reshardable-compat"]
    node = "t.py::test_file[cpu-dp-reshardable-compat:dist_checkpointing/test_mapping.py]"
    assert belongs_to(node, "dp-reshardable-compat", ids)
    assert not belongs_to(node, "compat", ids)
