"""Upstream Megatron-LM's own unit tests for the modules the series touches, run on the tree.

What this proves: the patched tree still passes upstream's tests for the code it changes, except
for divergences we list and explain (a patch that deliberately changes behaviour, or a test that
needs more than this runner has: 8 ranks, Transformer Engine, CUDA). Nothing is silently skipped:
every upstream test outcome is compared with ``EXPECTATIONS`` below.

Each case runs one upstream test file in the tree (cwd = tree) in its own pytest subprocess, with
``-p upstream_plugin`` (TE-less and offline shims, see upstream_plugin.py), upstream's ``-x``
addopts cleared, a free ``MASTER_PORT`` (upstream's ``Utils`` otherwise rendezvous on one fixed
port, so two processes at once collide) and one rank (``WORLD_SIZE=1``). Its JUnit XML gives one
outcome per upstream test:

- rules are tried in order; the first whose pattern matches and that applies decides. A rule
  applies always (no ``needs``) or while the run lacks one of its ``needs`` (``cuda``, ``te``);
  it then says how the test ends (``failed``: failure or error; ``skipped``) and why, and, where
  ``match`` is given, the message must contain it (a test failing for another reason is wrong);
- a test no applicable rule matches must pass;
- a listed test that passes while a rule says it fails, or a rule that matches no upstream test
  (renamed upstream), is a stale expectation and fails the case, so the table cannot rot.

Each file runs as a ``cpu`` case and/or a ``gpu`` case. The ``cpu`` case hides CUDA and sets
``UPSTREAM_UNITS_CPU=1``: the plugin then starts upstream's one-rank process group on gloo, so the
CPU-only parts (dist-checkpoint save/load, router and MTP constructors, ...) really run and the
divergence below is seen on a CPU. The ``gpu`` case runs the file as upstream does (NCCL, one
H200, no TE); its extra expectations (what passes once CUDA is there) come from reading the tests
and from CPU runs with CUDA faked, and are unverified on a GPU until the suite runs there.
"""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FILE_TIMEOUT_S = 900


@dataclass(frozen=True)
class Expect:
    """A rule: matching upstream tests end as ``outcome`` while one of ``needs`` is missing.

    ``pattern`` is ``Class::test[params]`` (``test[params]`` for module-level tests) where ``*``
    matches anything. ``needs`` empty: the rule always applies. The first rule that matches and
    applies decides; a test that no applicable rule matches must pass.
    """

    pattern: str
    outcome: str  # "failed" (failure or error), "skipped", or "not-run" (either)
    why: str
    needs: frozenset[str] = frozenset()
    match: str = ""  # a substring of the failure/skip message
    on: str = ""  # only on this upstream (compat.upstream_generation), e.g. "3346fa8a2"

    def applies(self, caps: frozenset[str]) -> bool:
        if self.on and f"upstream:{self.on}" not in caps:
            return False
        needs = self.needs - {f"upstream:{self.on}"}
        return not needs or not needs <= caps

    def expects(self, outcome: str) -> bool:
        return outcome in ("failed", "skipped") if self.outcome == "not-run" else (
            outcome == self.outcome)

    def matches(self, test_id: str) -> bool:
        regex = ".*".join(re.escape(part) for part in self.pattern.split("*"))
        return re.fullmatch(regex, test_id) is not None


class HarnessError(RuntimeError):
    """Upstream's pytest could not run the file (``rebasectl test`` files this as ``harness``:
    the runner failed, not the tree)."""


def _x(pattern: str, outcome: str, why: str, *needs: str, match: str = "", on: str = "") -> Expect:
    return Expect(pattern, outcome, why, frozenset(needs), match, on)


def _ranks(n: int, what: str) -> str:
    return f"needs {n} ranks ({what}); this runner has one"


NEEDS_CUDA = "needs CUDA (tensors or RNG on device 'cuda')"
CUDA_SKIP = "upstream skips it without CUDA"
NO_TE_SPEC = "needs TE: get_gpt_layer_with_transformer_engine_spec (NameError: TESpecProvider)"
TE_SKIP = "upstream skips it without Transformer Engine"
NOT_DIVISIBLE = "is not divisible by"


# 3346fa8a2 (June): tests upstream added since 1dcf0da, and old ones whose reason changed. They
# come first: the first rule that matches and applies decides. Seen on an H200 without TE
# (bench/NOTES-rope.md, run 8) and on the CPU.
JUNE = "3346fa8a2"
NONE_CALLABLE = "'NoneType' object is not callable"
JUNE_LAYER = (
    _x("TestParallelTransformerLayer::test_te_cuda_graph_*", "skipped",
       "upstream skips it without TE (TE CUDA graph kwargs)", "te", on=JUNE,
       match="TE CUDA graph kwargs require"),
    _x("TestParallelTransformerLayer::*", "failed",
       "needs TE: at 3346fa8a2 the TE spec builder is None without TE", "te", on=JUNE,
       match=NONE_CALLABLE),
    *(
        _x(pattern, "failed", "needs TE: mHC / hyper-connection layers are built from TE specs",
           "te", on=JUNE, match=NONE_CALLABLE)
        for pattern in ("TestMHC*::*", "TestTransformerLayerWithHyperConnectionRecompute::*")
    ),
    _x("TestTransformerLayerCudaGraphManagers::*", "skipped", TE_SKIP + " (CUDA graphs)", "te",
       on=JUNE, match="CUDA graph tests require TransformerEngine"),
)
JUNE_MTP = (
    *(
        _x(pattern, "failed", NEEDS_CUDA, "cuda", on=JUNE, match="CUDA")
        for pattern in (
            "TestLearnedOutputContract::*",
            "TestMHCMTPIntegration::test_transformer_block_returns_tuple",
            "TestMultiTokenPrediction::test_roll_tensor_shifts_left_and_zeroes_last",
            "TestMultiTokenPrediction::test_roll_tensor_with_packed_sequences_odd_seqlen[1]",
            "TestMultiTokenPredictionLayer::test_forward_detach_heads_gradient_flow[*]",
        )
    ),
    _x("TestMultiTokenPredictionLayer::test_constructor_ues_te[*]", "skipped", TE_SKIP, "te",
       on=JUNE, match="transformer_engine not available"),
    _x("TestMHCMTPIntegration::test_e2e_forward_backward[*]", "skipped", TE_SKIP + " (mHC)",
       "te", on=JUNE, match="TransformerEngine >= 1.7.0"),
    _x("TestMHCMTPIntegration::test_mtp_constructor_with_mhc[2]", "failed", _ranks(2, "TP=2"),
       on=JUNE, match=NOT_DIVISIBLE + " 2"),
    _x("TestMultiTokenPrediction::test_roll_tensor_with_packed_sequences_odd_seqlen[2]",
       "failed", _ranks(2, "CP=2"), on=JUNE, match=NOT_DIVISIBLE + " 2"),
    _x("TestMultiTokenPrediction::test_packed_sequences_with_full_recompute", "skipped",
       TE_SKIP + " (grouped gemm)", "te", on=JUNE, match="TransformerEngine >= 2.1.0"),
    _x("TestMultiTokenPredictionHybrid::*", "skipped", TE_SKIP + " (hybrid MTP)", "te",
       on=JUNE, match="transformer_engine not available"),
)


@dataclass(frozen=True)
class UpstreamFile:
    path: str  # under tests/unit_tests
    patch: str  # the series patch whose module it covers
    devices: tuple[str, ...]  # "cpu" (gloo, CUDA hidden) and/or "gpu"
    expectations: tuple[Expect, ...]


EXPECTATIONS: tuple[UpstreamFile, ...] = (
    UpstreamFile(
        "dist_checkpointing/test_mapping.py",
        "dp-reshardable-compat",
        ("cpu", "gpu"),
        (
            _x(
                "TestShardedTensor::test_from_rank_offsets_constructor",
                "failed",
                NEEDS_CUDA,
                "cuda",
                match="CUDA",
            ),
        ),
    ),
    UpstreamFile(
        "dist_checkpointing/test_serialization.py",
        "partial-ckpt-load",
        ("cpu", "gpu"),
        (
            _x(
                "TestSerialization::test_single_process_save_load",
                "failed",
                NEEDS_CUDA + ": a DeviceMesh on 'cuda'",
                "cuda",
                match="CUDA",
            ),
            *(
                _x(
                    f"TestSerialization::{name}",
                    "failed",
                    _ranks(8, "TP=2 x PP=4"),
                    match=NOT_DIVISIBLE + " 8",
                )
                for name in (
                    "test_multi_process_save",
                    "test_multi_process_save_log_difference",
                    "test_partition_change_save_load",
                    "test_load_tensors_metadata",
                    "test_tensor_shape_mismatch",
                    "test_remove_sharded_tensors",
                    "test_empty_load",
                    "test_uneven_1d_sharding[*]",
                    "test_uneven_1d_sharding_multiple_shards[*]",
                )
            ),
            _x(
                "TestNonStrictLoad::*",
                "failed",
                _ranks(8, "setup: TP=2 x PP=4"),
                match=NOT_DIVISIBLE + " 8",
            ),
        ),
    ),
    UpstreamFile(
        "transformer/moe/test_routers.py",
        "routing-replay",
        ("cpu", "gpu"),
        (
            _x("TestHashRouting::*", "skipped", CUDA_SKIP, "cuda", on=JUNE,
               match="CUDA not available"),
            _x(
                "*::test_router_forward_fusion_equivalence[*]",
                "skipped",
                "upstream skips it without TE's fused router ops (or without CUDA)",
                "cuda",
                "te",
                match="TE fused router ops not available",
            ),
            *(
                _x(pattern, "skipped", CUDA_SKIP, "cuda", match="CUDA not available")
                for pattern in (
                    "TestTop2Router::test_router_forward[*]",
                    "TestTop2Router::test_aux_loss",
                    "TestTop2Router::test_router_with_padding_mask",
                    "TestTop2Router::test_router_dtype",
                    "TestTop2Router::test_force_load_balancing",
                    "TestTop2Router::test_token_dropping[*]",
                    "TestGroupLimitedRouter::test_router_forward[*]",
                    "TestAuxLossFreeTop2Router::test_router_forward_aux_free",
                    "test_router_gating_linear[*]",
                    "test_router_gating_linear_bias[*]",
                )
            ),
            # With CUDA (the rule above no longer applies): upstream skips the two cases whose
            # capacity factor is None while padding to capacity.
            _x(
                "TestTop2Router::test_token_dropping[True-*-None]",
                "skipped",
                "upstream skips it: no capacity factor, so nothing to drop or pad",
                match="Capacity factor is None",
            ),
            _x(
                "TestGroupLimitedRouter::*",
                "failed",
                _ranks(8, "setup: EP=8"),
                match=NOT_DIVISIBLE,
            ),
            _x(
                "TestAuxLossFreeTop2Router::*",
                "failed",
                _ranks(8, "setup: EP=8"),
                match=NOT_DIVISIBLE,
            ),
        ),
    ),
    UpstreamFile(
        # routing-replay leaves upstream's RouterReplay in place (switched off only for routers
        # miles' manager registers): its own tests must keep passing, all of them, on a CPU.
        "transformer/moe/test_router_replay.py",
        "routing-replay",
        ("cpu",),
        (),
    ),
    UpstreamFile(
        "transformer/test_multi_token_prediction.py",
        "mtp-rl",
        ("cpu", "gpu"),
        (
            *JUNE_MTP,
            _x(
                "TestMultiTokenPredictionLayer::test_constructor_local[2]",
                "failed",
                _ranks(2, "TP=2"),
                match=NOT_DIVISIBLE + " 2",
            ),
            _x(
                "TestMultiTokenPredictionLayer::test_constructor_local[4]",
                "failed",
                _ranks(4, "TP=4"),
                match=NOT_DIVISIBLE + " 4",
            ),
            _x(
                "TestMultiTokenPredictionLayer::test_constructor_ues_te[1-1]",
                "failed",
                NO_TE_SPEC + "; the file's HAVE_TE probe imports fine without TE, so no skip",
                "te",
                match="TESpecProvider",
            ),
            _x(
                "TestMultiTokenPredictionLayer::test_constructor_ues_te[2-1]",
                "failed",
                _ranks(2, "TP=2") + ", and TE",
                match=NOT_DIVISIBLE + " 2",
            ),
            _x(
                "TestMultiTokenPredictionLayer::test_constructor_ues_te[2-2]",
                "failed",
                _ranks(4, "TP=2 x CP=2") + ", and TE",
                match=NOT_DIVISIBLE + " 4",
            ),
            *(
                _x(
                    f"TestMultiTokenPrediction::{name}[*]",
                    "skipped",
                    TE_SKIP + " (grouped gemm)",
                    "te",
                    match="TransformerEngine >= 2.1.0",
                )
                for name in (
                    "test_sharded_state_dict",
                    "test_forward_backward",
                    "test_packed_sequences",
                )
            ),
            _x(
                "TestMultiTokenPrediction::test_fp8_support[*]",
                "skipped",
                TE_SKIP + " (FP8)",
                "te",
                match="transformer-engine>=1.7.0",
            ),
            _x(
                "TestMultiTokenPrediction::test_roll_tensor_with_packed_sequences[1]",
                "failed",
                NEEDS_CUDA,
                "cuda",
                match="CUDA",
            ),
            _x(
                "TestMultiTokenPrediction::test_roll_tensor_with_packed_sequences[2]",
                "failed",
                _ranks(2, "CP=2"),
                match=NOT_DIVISIBLE + " 2",
            ),
        ),
    ),
    UpstreamFile(
        "transformer/test_transformer_layer.py",
        "post-layernorm",
        # on a CPU its setup stops at model_parallel_cuda_manual_seed: nothing to learn there
        ("gpu",),
        (
            *JUNE_LAYER,
            # setup_method builds every layer from the TE spec: nothing here runs without TE.
            _x(
                "TestParallelTransformerLayer::*",
                "failed",
                NO_TE_SPEC,
                "te",
                match="TESpecProvider",
            ),
            _x(
                "TestParallelTransformerLayer::test_sharded_state_dict[tp_pp0-*]",
                "failed",
                _ranks(8, "TP=4 x PP=2"),
                match=NOT_DIVISIBLE,
            ),
            _x(
                "TestParallelTransformerLayer::test_sharded_state_dict[tp_pp2-*]",
                "failed",
                _ranks(8, "TP=8"),
                match=NOT_DIVISIBLE,
            ),
            _x(
                "TestParallelTransformerLayer::test_sharded_state_dict[tp_pp3-*]",
                "failed",
                _ranks(4, "TP=2 x PP=2"),
                match=NOT_DIVISIBLE,
            ),
        ),
    ),
    UpstreamFile(
        "fusions/test_mla_yarn_rope_apply.py",
        "mla-rope-triton",
        # device='cuda' throughout, and skipped without CUDA
        ("gpu",),
        # 32 heads, k_dim = v_dim = 128: every test must pass on the fixed kernels, except, at
        # 3346fa8a2, the two below (seen on an H200, bench/NOTES-rope.md run 9).
        (
            _x("TestFusedApplyMLARope::test_forward_backward_for_q[*]", "failed",
               "upstream's test at 3346fa8a2 calls _test_fused_apply_mla_rope_for_q, the helper "
               "bf4e1db3 renamed _test_fused_mla_rope_inplace: a NameError on the unpatched "
               "June tree too (test_mla_rope.py covers the q kernel)", on=JUNE,
               match="_test_fused_apply_mla_rope_for_q"),
            _x("TestApplyRotaryPosEmbMlaFusionConflict::*", "failed",
               "needs TE: apply_rope_fusion", "te", on=JUNE, match="Please install TE"),
        ),
    ),
)


def capabilities(device: str) -> frozenset[str]:
    """What the upstream run has: ``cuda`` (never in a CPU run: it hides CUDA) and ``te``."""
    import torch
    from compat import upstream_generation

    caps = {f"upstream:{upstream_generation(_tree())}"}
    if device == "gpu" and torch.cuda.is_available():
        caps.add("cuda")
    if importlib.util.find_spec("transformer_engine") is not None:
        caps.add("te")
    return frozenset(caps)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree() -> Path:
    return Path(os.environ["REBASECTL_TEST_TREE"]).resolve()


_RANK = {"passed": 0, "skipped": 1, "failed": 2}


def outcomes(junit: Path) -> dict[str, tuple[str, str]]:
    """``{Class::test[params]: (passed|failed|skipped, message)}`` from pytest's JUnit XML."""
    result: dict[str, tuple[str, str]] = {}
    for case in ET.parse(junit).iter("testcase"):
        last = case.get("classname", "").rsplit(".", 1)[-1]
        name = case.get("name", "")
        test_id = f"{last}::{name}" if last[:1].isupper() else name
        outcome, message = "passed", ""
        for tag, label in (("error", "failed"), ("failure", "failed"), ("skipped", "skipped")):
            node = case.find(tag)
            if node is not None:
                outcome, message = label, node.get("message") or ""
                break
        # a test that errors in teardown has two entries: keep the worse one
        if test_id not in result or _RANK[outcome] > _RANK[result[test_id][0]]:
            result[test_id] = (outcome, message)
    return result


def compare(
    spec: UpstreamFile, got: dict[str, tuple[str, str]], caps: frozenset[str]
) -> tuple[list[str], dict[str, int]]:
    """Problems (empty when all is as expected) and counts per kind of outcome."""
    problems: list[str] = []
    counts = {"passed": 0, "expected-fail": 0, "skipped": 0}
    for test_id, (outcome, message) in sorted(got.items()):
        rule = next((e for e in spec.expectations if e.matches(test_id) and e.applies(caps)), None)
        want = "passed" if rule is None else rule.outcome
        short = message.strip().splitlines()[0][:200] if message.strip() else ""
        if not (rule.expects(outcome) if rule is not None else outcome == want):
            if rule is None:
                problems.append(f"UNEXPECTED {outcome}: {test_id}: {short}")
            else:
                problems.append(
                    f"STALE expectation ({want}: {rule.why}): {test_id} {outcome} {short}"
                )
        elif rule is not None and rule.match and rule.match not in message:
            problems.append(
                f"{test_id} {outcome}, but not for the listed reason ({rule.match!r}): {short}"
            )
        else:
            counts["expected-fail" if outcome == "failed" else outcome] += 1
    for rule in spec.expectations:
        if rule.applies(caps) and not any(rule.matches(test_id) for test_id in got):
            problems.append(f"STALE expectation: no upstream test matches {rule.pattern!r}")
    return problems, counts


def run_file(
    spec: UpstreamFile, device: str, tree: Path, junit: Path
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        MASTER_ADDR="localhost",
        MASTER_PORT=str(_free_port()),
        WORLD_SIZE="1",
        RANK="0",
        LOCAL_RANK="0",
        PYTHONDONTWRITEBYTECODE="1",  # the tree may be a read-only reference checkout
        PYTHONPATH=os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p),
    )
    if device == "cpu":
        env.update(UPSTREAM_UNITS_CPU="1", CUDA_VISIBLE_DEVICES="")
    else:
        env.pop("UPSTREAM_UNITS_CPU", None)
    for name in ("PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        env.pop(name, None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "upstream_plugin",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-q",
        f"--junitxml={junit}",
        f"tests/unit_tests/{spec.path}",
    ]
    return subprocess.run(
        cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=FILE_TIMEOUT_S
    )


def _params() -> list[object]:
    marks = {"cpu": pytest.mark.cpu, "gpu": pytest.mark.gpu}
    return [
        pytest.param(spec, device, marks=marks[device], id=f"{device}-{spec.patch}:{spec.path}")
        for spec in EXPECTATIONS
        for device in spec.devices
    ]


@pytest.mark.parametrize(("spec", "device"), _params())
def test_upstream_file(spec: UpstreamFile, device: str, tmp_path: Path) -> None:
    """Upstream's own tests: a file whose tests the patch leaves as they are passes on the base
    too (it pins a non-regression); a file with an expected divergence fails there."""
    tree = _tree()
    if not (tree / "tests" / "unit_tests" / spec.path).is_file():
        raise HarnessError(f"upstream test file missing: tests/unit_tests/{spec.path}")
    junit = tmp_path / "junit.xml"
    proc = run_file(spec, device, tree, junit)
    tail = (proc.stdout + proc.stderr)[-4000:]
    if not junit.is_file():
        raise HarnessError(f"pytest wrote no JUnit XML (exit {proc.returncode}):\n{tail}")
    got = outcomes(junit)
    assert got, f"no upstream tests ran (exit {proc.returncode}):\n{tail}"
    problems, counts = compare(spec, got, capabilities(device))
    print(f"{device} {spec.path}: {counts}")
    assert not problems, "\n".join(problems) + f"\n--- pytest output tail ---\n{tail}"
