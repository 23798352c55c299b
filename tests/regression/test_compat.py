"""Regression tests for patch ``compat`` (fix: misc compatibility fixes for PyTorch and TE).

What they prove, and why each matters to miles:

- ``_batched_p2p_ops`` builds every ``torch.distributed.P2POp`` from exactly three positional
  arguments (op, tensor, global peer rank) and no ``group``: with reloadable process groups the
  pipeline group object is destroyed and re-created, and a stale group in a P2POp breaks the
  batched send/recv. Upstream passes the group as a fourth argument.
- ``megatron.core.parallel_state.dist`` is ``torch.distributed`` (miles reaches the module
  through it).
- Default path (``default_path``: passes on the base by design): the HuggingFace tokenizer asks
  ``AutoTokenizer.from_pretrained`` for remote code only with upstream's own
  ``--trust-remote-code`` flag (round 2 of the patch asked for it for everyone: running a model
  repository's code is never on by default). ``transformers`` itself is replaced by a spy module:
  what is under test is Megatron's call, not the HF library. Both tokenizer generations (the
  legacy ``megatron.training.tokenizer`` at 1dcf0da, ``megatron.core.tokenizers`` later) are
  reached through ``compat.build_hf_tokenizer``.
- ``TELinear`` tags every parameter with its Megatron ``parallel_mode``: on a CPU against the
  Transformer Engine stand-in (``te_standin/``; Megatron's real TELinear, TEColumnParallelLinear
  and TERowParallelLinear, CPU and device initialisation, dense and expert layers, where TE itself
  is told ``parallel_mode=None``), and with real TE on a GPU (``gpu`` + ``needs_te``). Under CPU
  initialisation the column/row subclasses re-create the bias after TELinear tagged it; the
  previous version of the patch left that bias untagged.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch


@pytest.mark.cpu
def test_batched_p2p_ops_builds_p2pops_without_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from megatron.core.pipeline_parallel import p2p_communication

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    class RecordingP2POp:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            calls.append((args, kwargs))

    batched: list[list[Any]] = []

    def fake_batch_isend_irecv(ops: list[Any]) -> list[str]:
        batched.append(ops)
        return ["req"] * len(ops)

    monkeypatch.setattr(torch.distributed, "P2POp", RecordingP2POp)
    monkeypatch.setattr(torch.distributed, "batch_isend_irecv", fake_batch_isend_irecv)

    group = object()  # a sentinel: it must not reach any P2POp
    tensors = [torch.zeros(2) for _ in range(4)]
    reqs = p2p_communication._batched_p2p_ops(
        tensor_send_prev=tensors[0],
        tensor_recv_prev=tensors[1],
        tensor_send_next=tensors[2],
        tensor_recv_next=tensors[3],
        group=group,
        prev_pipeline_rank=3,
        next_pipeline_rank=5,
    )

    assert reqs == ["req"] * 4
    assert len(batched) == 1 and len(batched[0]) == 4
    expected = [
        (torch.distributed.isend, tensors[0], 3),
        (torch.distributed.irecv, tensors[1], 3),
        (torch.distributed.isend, tensors[2], 5),
        (torch.distributed.irecv, tensors[3], 5),
    ]
    assert len(calls) == 4
    for (args, kwargs), (op, tensor, peer) in zip(calls, expected):
        assert len(args) == 3, f"P2POp got {len(args)} positional args: {args!r}"
        assert not kwargs, f"P2POp got keyword args {sorted(kwargs)}"
        assert args[0] is op and args[1] is tensor and args[2] == peer
        assert group not in args


@pytest.mark.cpu
def test_batched_p2p_ops_without_tensors_sends_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Non-regression (passes on the base too): with nothing to send, no P2POp is built."""
    from megatron.core.pipeline_parallel import p2p_communication

    def fail(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("no op expected")

    monkeypatch.setattr(torch.distributed, "P2POp", fail)
    monkeypatch.setattr(torch.distributed, "batch_isend_irecv", fail)
    reqs = p2p_communication._batched_p2p_ops(
        tensor_send_prev=None,
        tensor_recv_prev=None,
        tensor_send_next=None,
        tensor_recv_next=None,
        group=None,
        prev_pipeline_rank=0,
        next_pipeline_rank=0,
    )
    assert reqs == []


@pytest.mark.cpu
def test_parallel_state_exposes_dist() -> None:
    from megatron.core import parallel_state

    assert getattr(parallel_state, "dist", None) is torch.distributed


class _FakeHFTokenizer:
    """What Megatron's wrappers read of an HF tokenizer; special tokens and templates: none."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None  # sep_token, chat_template, ... (read by the 3346fa8a2 wrapper)

    def __init__(self) -> None:
        self._vocab = {"<pad>": 0, "a": 1, "b": 2}

    SPECIAL_TOKENS_ATTRIBUTES: list[str] = []

    def add_special_tokens(self, tokens: dict[str, Any]) -> int:
        return 0  # none of them new

    def tokenize(self, text: str) -> list[str]:
        return text.split()

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    def __len__(self) -> int:
        return len(self._vocab)


@pytest.fixture
def from_pretrained_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Install a ``transformers`` stand-in whose ``AutoTokenizer.from_pretrained`` is a spy."""
    calls: list[dict[str, Any]] = []

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(*args: Any, **kwargs: Any) -> _FakeHFTokenizer:
            calls.append({"args": args, **kwargs})
            return _FakeHFTokenizer()

    fake = types.ModuleType("transformers")
    fake.AutoTokenizer = AutoTokenizer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "transformers", fake)
    return calls


@pytest.mark.cpu
@pytest.mark.default_path
@pytest.mark.parametrize("flag", [False, True])
def test_hf_tokenizer_trusts_remote_code_only_with_the_flag(
    from_pretrained_calls: list[dict[str, Any]], flag: bool
) -> None:
    """Fix 7 of issue 24: without ``--trust-remote-code`` no remote code (round 2 asked for it
    always); with it, remote code, as upstream."""
    from compat import build_hf_tokenizer

    tokenizer = build_hf_tokenizer("some/hf-model", trust_remote_code=flag)

    assert len(from_pretrained_calls) >= 1
    for call in from_pretrained_calls:
        assert call["pretrained_model_name_or_path"] == "some/hf-model"
        assert call.get("trust_remote_code", False) is flag
    assert tokenizer.vocab_size == 3


@pytest.mark.cpu
def test_te_linear_tags_every_parameter_against_te_standin() -> None:
    from te_scenarios import run_scenarios

    tree = Path(__import__("os").environ["REBASECTL_TEST_TREE"])
    result = run_scenarios(tree, ["te_linear_parallel_mode_tags"])["te_linear_parallel_mode_tags"]
    assert "error" not in result, result.get("error")
    assert len(result) == 10  # {column, row} x {dense, expert} + duplicated, x {cpu, device} init
    untagged = {
        f"{layer}.{name}": tag
        for layer, info in result.items()
        for name, tag in info["tags"].items()
        if tag != info["mode"]
    }
    assert not untagged, f"parameters without their Megatron parallel_mode: {untagged}"
    # Why the tag is needed: for expert layers (and duplicated ones) TE's own mode is None.
    assert result["column-expert-cpu-init"]["te_parallel_mode"] is None
    assert result["duplicated-device-init"]["te_parallel_mode"] is None


@pytest.mark.gpu
@pytest.mark.needs_te
def test_te_linear_tags_parameters_with_parallel_mode(tmp_path: Path) -> None:
    from megatron.core import parallel_state
    from megatron.core.extensions.transformer_engine import (
        TEColumnParallelLinear,
        TELinear,
        TERowParallelLinear,
    )
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.transformer_config import TransformerConfig

    initialized_here = False
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(
            backend="nccl", init_method=f"file://{tmp_path}/pg", world_size=1, rank=0
        )
        initialized_here = True
    try:
        parallel_state.initialize_model_parallel(1, 1)
        model_parallel_cuda_manual_seed(123)
        config = TransformerConfig(
            num_layers=1,
            hidden_size=64,
            num_attention_heads=4,
            use_cpu_initialization=False,
        )
        init = torch.nn.init.xavier_normal_
        common: dict[str, Any] = {
            "config": config,
            "init_method": init,
            "bias": True,
            "skip_bias_add": False,
        }
        column = TEColumnParallelLinear(64, 128, gather_output=False, is_expert=False, **common)
        row = TERowParallelLinear(128, 64, input_is_parallel=True, is_expert=False, **common)
        duplicated = TELinear(
            64,
            32,
            parallel_mode="duplicated",
            skip_weight_param_allocation=False,
            **common,
        )
        for module, mode in (
            (column, "column"),
            (row, "row"),
            (duplicated, "duplicated"),
        ):
            params = list(module.parameters())
            assert params
            for param in params:
                assert getattr(param, "parallel_mode", "<missing>") == mode
    finally:
        parallel_state.destroy_model_parallel()
        if initialized_here:
            torch.distributed.destroy_process_group()
