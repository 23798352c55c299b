"""CPU shims that let upstream Megatron-LM (at 1dcf0da) run without a GPU or Transformer Engine.

Each shim is a context manager or fixture so that a test opts in explicitly; nothing here changes
Megatron's source. Why each exists:

- ``te_absent_shims``: ``megatron.core.utils.is_te_min_version`` raises TypeError when TE is absent
  (``get_te_version()`` returns None), and ``moe_utils.te_general_gemm`` is undefined without TE
  (router gating raises NameError). Both are upstream breakages, not ours.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_MISSING = object()


class Patches:
    """setattr with undo: every shim below records what it replaces, and leaving the ``with``
    block puts it all back in reverse order (a missing attribute is deleted again)."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    def set(self, obj: Any, name: str, value: Any) -> None:
        self.saved.append((obj, name, getattr(obj, name, _MISSING)))
        setattr(obj, name, value)

    def __enter__(self) -> Patches:
        return self

    def __exit__(self, *exc: object) -> None:
        for obj, name, value in reversed(self.saved):
            if value is _MISSING:
                delattr(obj, name)
            else:
                setattr(obj, name, value)
        self.saved.clear()


@contextlib.contextmanager
def te_absent_shims() -> Iterator[None]:
    """Make upstream's TE version probes and router gemm behave as 'TE not installed'."""
    import megatron.core.utils as mcore_utils

    patches = Patches()
    patch = patches.set

    original = mcore_utils.is_te_min_version

    def is_te_min_version(version: str, check_equality: bool = True) -> bool:
        try:
            return bool(original(version, check_equality))
        except (TypeError, AttributeError, ImportError):
            return False

    patch(mcore_utils, "is_te_min_version", is_te_min_version)
    try:
        import megatron.core.transformer.moe.moe_utils as moe_utils

        if not hasattr(moe_utils, "te_general_gemm"):
            patch(moe_utils, "te_general_gemm", None)
    except ImportError:
        pass
    with patches:
        yield



@pytest.fixture
def te_absent() -> Iterator[None]:
    with te_absent_shims():
        yield


# ------------------------------------------------------------------------------------------------
# Tiny CPU GPT harness (written for patches post-layernorm and mtp-rl; reusable by any test)
#
# A tiny local-spec (no TE) GPT runs forward and backward on a CPU with gloo, world size 1, once
# five small upstream assumptions of a GPU are shimmed:
#
# - ``torch.cuda.synchronize`` becomes a no-op (called on some paths even without CUDA work);
# - ``parallel_state``'s ``GlobalMemoryBuffer`` allocates on the CPU instead of
#   ``torch.cuda.current_device()``;
# - the model-parallel RNG tracker is the inference-mode one (``fork`` is a null context), since
#   the training tracker stores and restores CUDA RNG states;
# - ``MTPLossLoggingHelper.save_loss_to_tracker`` is a no-op (it allocates its tracker on CUDA);
# - attention gets an explicit boolean causal mask (upstream's default causal mask is built on
#   "cuda"), and the model uses learned absolute positions (no RoPE kernels).
#
# Use the ``single_rank_gloo`` fixture (process group + model parallel state + the shims, torn down
# afterwards), then ``tiny_gpt(...)`` and ``tiny_batch(...)``.
# ------------------------------------------------------------------------------------------------

TINY_VOCAB = 64
TINY_MAX_SEQ = 32


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def cpu_model_shims() -> Iterator[None]:
    """Install the CPU shims above; needs model parallel state to be initialised already."""
    import megatron.core.parallel_state as ps
    import megatron.core.tensor_parallel.random as tp_random
    import megatron.core.transformer.multi_token_prediction as mtp
    import torch
    from megatron.core.utils import GlobalMemoryBuffer

    class CPUGlobalMemoryBuffer(GlobalMemoryBuffer):
        """Upstream's buffer, allocated on the CPU."""

        def get_tensor(  # type: ignore[override]
            self, tensor_shape: Any, dtype: Any, name: str, mem_alloc_context: Any = None
        ) -> Any:
            required = 1
            for dim in tensor_shape:
                required *= int(dim)
            buf = self.buffer.get((name, dtype))
            if buf is None or buf.numel() < required:
                buf = torch.empty(required, dtype=dtype, device="cpu", requires_grad=False)
                self.buffer[(name, dtype)] = buf
            return buf[0:required].view(*tensor_shape)

    patches = Patches()
    patch = patches.set

    patch(torch.cuda, "synchronize", lambda *args, **kwargs: None)
    patch(ps, "_GLOBAL_MEMORY_BUFFER", CPUGlobalMemoryBuffer())
    patch(tp_random, "_CUDA_RNG_STATE_TRACKER", None)
    patch(tp_random, "_CUDA_RNG_STATE_TRACKER_INITIALIZED", False)
    tp_random.initialize_rng_tracker(inference_rng_tracker=True)
    patch(
        mtp.MTPLossLoggingHelper,
        "save_loss_to_tracker",
        staticmethod(lambda *args, **kwargs: None),
    )
    with patches:
        yield


@contextlib.contextmanager
def single_rank_gloo_context() -> Iterator[None]:
    """torch.distributed gloo with world size 1, Megatron model parallel (all sizes 1), CPU shims.

    Reuses an already initialised default process group (and then leaves it up).
    """
    import megatron.core.parallel_state as ps
    import torch.distributed as dist

    owns_pg = not dist.is_initialized()
    if owns_pg:
        dist.init_process_group(
            backend="gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", world_size=1, rank=0
        )
    ps.destroy_model_parallel()
    ps.initialize_model_parallel(tensor_model_parallel_size=1, pipeline_model_parallel_size=1)
    try:
        with cpu_model_shims():
            yield
    finally:
        ps.destroy_model_parallel()
        if owns_pg:
            dist.destroy_process_group()


@pytest.fixture
def single_rank_gloo() -> Iterator[None]:
    """Fixture form of :func:`single_rank_gloo_context`."""
    with single_rank_gloo_context():
        yield


def causal_mask(seq_len: int) -> Any:
    """Boolean causal attention mask [1, 1, s, s]; True marks a masked-out (future) position."""
    import torch

    return torch.triu(torch.ones(1, 1, seq_len, seq_len, dtype=torch.bool), diagonal=1)


def tiny_gpt_config(**overrides: Any) -> Any:
    """TransformerConfig of the tiny GPT (2 layers, hidden 32, 4 heads, CPU init, no dropout)."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    kwargs: dict[str, Any] = {
        "num_layers": 2,
        "hidden_size": 32,
        "num_attention_heads": 4,
        "use_cpu_initialization": True,
        "hidden_dropout": 0.0,
        "attention_dropout": 0.0,
    }
    kwargs.update(overrides)
    return TransformerConfig(**kwargs)


def tiny_gpt(
    config: Any = None,
    *,
    tie_embeddings: bool = True,
    mtp: bool | None = None,
    spec_kwargs: dict[str, Any] | None = None,
    vocab_size: int = TINY_VOCAB,
    max_sequence_length: int = TINY_MAX_SEQ,
    seed: int = 0,
    position_embedding_type: str = "learned_absolute",
) -> Any:
    """A local-spec GPTModel with learned absolute positions, built under ``single_rank_gloo``.

    ``spec_kwargs`` go to ``get_gpt_layer_local_spec``; an MTP block is built when ``mtp`` is true
    (default: when ``config.mtp_num_layers`` is set).
    """
    import torch
    from megatron.core.models.gpt.gpt_layer_specs import (
        get_gpt_layer_local_spec,
        get_gpt_mtp_block_spec,
    )
    from megatron.core.models.gpt.gpt_model import GPTModel

    config = config if config is not None else tiny_gpt_config()
    spec = get_gpt_layer_local_spec(**(spec_kwargs or {}))
    if mtp is None:
        mtp = bool(config.mtp_num_layers)
    mtp_spec = get_gpt_mtp_block_spec(config, spec, use_transformer_engine=False) if mtp else None
    torch.manual_seed(seed)
    return GPTModel(
        config=config,
        transformer_layer_spec=spec,
        vocab_size=vocab_size,
        max_sequence_length=max_sequence_length,
        share_embeddings_and_output_weights=tie_embeddings,
        position_embedding_type=position_embedding_type,
        mtp_block_spec=mtp_spec,
    )


def tiny_batch(
    batch: int = 2, seq_len: int = 8, vocab_size: int = TINY_VOCAB, seed: int = 0
) -> tuple[Any, Any, Any]:
    """(input_ids [b, s], position_ids [b, s], causal boolean mask) for the tiny GPT."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab_size, (batch, seq_len), generator=gen)
    pos = torch.arange(seq_len).unsqueeze(0).expand(batch, seq_len).contiguous()
    return ids, pos, causal_mask(seq_len)


# ------------------------------------------------------------------------------------------------
# MoE routers on a CPU (written for patch routing-replay; reusable by any test)
#
# ``Router.gating`` moves CPU router weights to ``torch.cuda.current_device()`` and ``TopKRouter``
# allocates its expert-bias buffers there, so ``torch.cuda.current_device`` answers "cpu"; the
# router gemm is plain torch (``moe_utils.te_general_gemm`` is None: TE's gemm needs CUDA tensors).
# Both apply with or without CUDA, so CPU tests stay on the CPU on a GPU host too; a test that
# wants the GPU moves its module there explicitly (``.to("cuda")``: gating then keeps it there).
# Under ``single_rank_moe`` (TE-absent shims + ``single_rank_gloo_context`` + this), routers, MoE
# layers with the ``allgather`` dispatcher and a tiny MoE GPT (``add_bias_linear=False``, with or
# without MTP) run forward and backward on a CPU.
# ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def cpu_router_shims() -> Iterator[None]:
    """``torch.cuda.current_device()`` answers "cpu"; the router gemm does not use TE."""
    import megatron.core.transformer.moe.moe_utils as moe_utils
    import torch
    import torch._dynamo

    patches = Patches()
    patches.set(torch.cuda, "current_device", lambda: "cpu")
    patches.set(moe_utils, "te_general_gemm", None)
    # On a CUDA host, torch.compile'd router helpers (expert bias) would ask dynamo's CUDA device
    # interface for the current device, which now answers "cpu" and breaks it (seen on the H200:
    # InternalTorchDynamoError). Compilation is not under test: run those helpers eagerly.
    patches.set(torch._dynamo.config, "disable", True)
    with patches:
        yield


@pytest.fixture
def single_rank_moe() -> Iterator[None]:
    """TE-absent shims, gloo world size 1 with model parallel state, and the CPU router shim."""
    with te_absent_shims(), single_rank_gloo_context(), cpu_router_shims():
        yield


# ------------------------------------------------------------------------------------------------
# Distributed checkpointing on a CPU (written for patch partial-ckpt-load; reusable by any test)
#
# ``dist_checkpointing.save``/``load`` with the ``torch_dist`` format run on a CPU with gloo, world
# size 1, once three GPU/host assumptions are shimmed (only when CUDA is unavailable):
#
# - ``torch.cuda.synchronize`` becomes a no-op (the async writer synchronises before copying);
# - ``torch.cuda.current_device`` answers "cpu" (the loader allocates on the current device);
# - ``filesystem_async._process_memory`` answers 0 when ``psutil`` is not installed (the writer
#   logs its memory use and raises without psutil).
# ------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def cpu_dist_ckpt_shims() -> Iterator[None]:
    """Let ``megatron.core.dist_checkpointing`` save and load without CUDA (no-op with CUDA)."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    import megatron.core.dist_checkpointing.strategies.filesystem_async as fs_async

    patches = Patches()
    patch = patches.set

    patch(torch.cuda, "synchronize", lambda *args, **kwargs: None)
    patch(torch.cuda, "current_device", lambda: "cpu")
    if not getattr(fs_async, "HAVE_PSUTIL", True):
        patch(fs_async, "_process_memory", lambda: 0)
    with patches:
        yield


# ------------------------------------------------------------------------------------------------
# The test routing replay manager (tests/regression/replay_pkg, same API as miles') made importable
# as ``miles.utils.replay_base`` for one test, enabled before any router is built.
# ------------------------------------------------------------------------------------------------

REPLAY_PKG = Path(__file__).resolve().parent / "replay_pkg"


def drop_miles_modules() -> None:
    for name in [n for n in sys.modules if n == "miles" or n.startswith("miles.")]:
        del sys.modules[name]


@contextlib.contextmanager
def replay_manager_installed() -> Iterator[Any]:
    """Yield the enabled test manager; afterwards ``miles`` is not importable again."""
    drop_miles_modules()
    sys.path.insert(0, str(REPLAY_PKG))
    try:
        from miles.utils.replay_base import routing_replay_manager

        routing_replay_manager.reset()
        routing_replay_manager.enabled = True
        yield routing_replay_manager
        routing_replay_manager.reset()
    finally:
        sys.path.remove(str(REPLAY_PKG))
        drop_miles_modules()


# ------------------------------------------------------------------------------------------------
# The MoE all-to-all overlap schedule (EP-overlap, ``build_schedule_plan``) on a CPU
# (written for patch mtp-rl; reusable by any test)
#
# The schedule runs every node on a CUDA stream and synchronises with CUDA events; on a CPU, with
# no streams, those become inert stand-ins (``torch.cuda.Stream``/``Event``/``stream``/
# ``current_stream``, ``Tensor.record_stream``, NVTX ranges). The schedule also frees some node
# inputs right after use (``should_free_input``): correct on a GPU, where the all-to-all returns
# new buffers, but on one rank (EP=1) the all-to-all dispatch is an identity, so the freed input
# would be the next node's input: the shim keeps every input. Use inside ``single_rank_moe``; the
# config must have ``moe_token_dispatcher_type="alltoall"`` (the overlap flag itself is set on
# the built model's config, since its validation asks for EP > 1, bf16 and PP > 1 with MTP).
# ------------------------------------------------------------------------------------------------


class _InertEvent:
    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait(self, *args: Any, **kwargs: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class _InertStream:
    def wait_event(self, *args: Any) -> None:
        pass

    def wait_stream(self, *args: Any) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def record_event(self, *args: Any, **kwargs: Any) -> _InertEvent:
        return _InertEvent()


@contextlib.contextmanager
def cpu_a2a_schedule_shims() -> Iterator[None]:
    """Inert CUDA streams/events for the a2a overlap schedule; node inputs are never freed."""
    import megatron.core.models.gpt.fine_grained_callables as fgc
    import torch
    from megatron.core.pipeline_parallel import utils as pp_utils

    patches = Patches()
    patches.set(torch.cuda, "Event", lambda *args, **kwargs: _InertEvent())
    patches.set(torch.cuda, "Stream", lambda *args, **kwargs: _InertStream())
    patches.set(torch.cuda, "current_stream", lambda *args, **kwargs: _InertStream())
    patches.set(torch.cuda, "stream", lambda stream: contextlib.nullcontext())
    patches.set(torch.cuda.nvtx, "range_push", lambda *args, **kwargs: None)
    patches.set(torch.cuda.nvtx, "range_pop", lambda *args, **kwargs: None)
    patches.set(torch.Tensor, "record_stream", lambda self, stream: None)
    patches.set(fgc, "should_free_input", lambda *args, **kwargs: False)
    patches.set(pp_utils, "_COMP_STREAM", _InertStream())
    patches.set(pp_utils, "_COMM_STREAM", _InertStream())
    with patches:
        yield
