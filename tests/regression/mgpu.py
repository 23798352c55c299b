"""Helpers for the ``multi_gpu`` regression tests: one pytest process per rank under torchrun.

``rebasectl test --multi-gpu N`` launches ``torchrun --standalone --nproc-per-node N -m pytest
-m multi_gpu <files>``; every rank runs the same tests in the same order, so the collectives inside
them line up. The backend is NCCL with one GPU per rank (``cuda:LOCAL_RANK``), or gloo on the CPU
when ``REBASECTL_MULTI_GPU_BACKEND=gloo`` (a dry run on a machine without GPUs: the same tests, with
the CPU shims of ``shims.py``). Outside torchrun (a plain single-process pytest run) the
``multi_gpu`` tests are skipped by conftest.py with the reason :func:`skip_reason` gives.

Rules the tests follow so that a failure never hangs the other rank: do every collective before
asserting, and agree on an outcome with :func:`all_ranks` where ranks can differ. The default
process group has a short timeout (``REBASECTL_MULTI_GPU_TIMEOUT``, 60 s) as a last resort.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
from collections.abc import Iterator
from typing import Any

BACKEND_ENV = "REBASECTL_MULTI_GPU_BACKEND"


def backend() -> str:
    return os.environ.get(BACKEND_ENV, "nccl").strip().lower() or "nccl"


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def under_torchrun() -> bool:
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ and "RANK" in os.environ


def skip_reason(cuda_devices: int) -> str | None:
    """Why ``multi_gpu`` tests cannot run in this process (None: they can)."""
    if not under_torchrun() or world_size() < 2:
        return "multi-GPU test: run under torchrun with 2+ ranks (`rebasectl test --multi-gpu 2`)"
    if backend() == "nccl" and cuda_devices < int(os.environ.get("LOCAL_WORLD_SIZE", "1")):
        return (
            f"needs {os.environ.get('LOCAL_WORLD_SIZE')} CUDA devices for NCCL "
            f"(or {BACKEND_ENV}=gloo for a CPU dry run)"
        )
    return None


def on_gpu() -> bool:
    return backend() == "nccl"


def device() -> Any:
    import torch

    return torch.device("cuda", torch.cuda.current_device()) if on_gpu() else torch.device("cpu")


def ensure_process_group() -> None:
    """The default process group of this torchrun job (created once, kept for the session)."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return
    if on_gpu():
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    timeout = datetime.timedelta(seconds=float(os.environ.get("REBASECTL_MULTI_GPU_TIMEOUT", "60")))
    dist.init_process_group(backend=backend(), timeout=timeout)
    atexit.register(_finish_process_group)


def _finish_process_group() -> None:
    """At exit (after pytest wrote this rank's JUnit XML): wait for the other ranks, then leave.

    torchrun stops the remaining ranks as soon as one exits non-zero (pytest: a test failed); the
    barrier keeps a rank that finished first from cutting off another rank's report."""
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - best effort at exit (a rank may have crashed)
        pass


def rank() -> int:
    import torch.distributed as dist

    return dist.get_rank()


def all_ranks(ok: bool) -> bool:
    """True when ``ok`` holds on every rank (a collective: call it on all ranks)."""
    import torch
    import torch.distributed as dist

    flag = torch.tensor([1 if ok else 0], dtype=torch.int64, device=device())
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def all_gather_tensor(t: Any) -> list[Any]:
    """``t`` from every rank (same shape everywhere), in rank order, on this rank's device."""
    import torch
    import torch.distributed as dist

    t = t.contiguous().to(device())
    out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(out, t)
    return out


def all_gather_object(obj: Any) -> list[Any]:
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


@contextlib.contextmanager
def model_parallel(tp: int = 1, ep: int = 1, pp: int = 1, seed: int = 1234) -> Iterator[None]:
    """Megatron model parallel state over this job's ranks, plus what the backend needs.

    On gloo (CPU): the TE-absent shims and the CPU model/router/dist-checkpoint shims of
    ``shims.py``. On NCCL: the TE-absent shims and Megatron's CUDA RNG tracker seeded per rank.
    Both: torch.compile (dynamo) off, so Megatron's jit-fused helpers run eagerly.
    """
    import megatron.core.parallel_state as ps
    import torch
    from shims import (
        cpu_dist_ckpt_shims,
        cpu_model_shims,
        cpu_router_shims,
        te_absent_shims,
    )

    ensure_process_group()
    ps.destroy_model_parallel()
    ps.initialize_model_parallel(
        tensor_model_parallel_size=tp,
        pipeline_model_parallel_size=pp,
        expert_model_parallel_size=ep,
    )
    torch.manual_seed(seed)
    import torch._dynamo

    # Megatron's jit_fuser helpers (router top-k, fused ops) would be torch.compile'd on first use
    # on a GPU (slow, needs a compiler toolchain); compilation is not under test: run them eagerly.
    dynamo_disabled = torch._dynamo.config.disable
    torch._dynamo.config.disable = True
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(te_absent_shims())
            if on_gpu():
                from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

                model_parallel_cuda_manual_seed(seed)
            else:
                stack.enter_context(cpu_model_shims())
                stack.enter_context(cpu_router_shims())
                stack.enter_context(cpu_dist_ckpt_shims())
            yield
    finally:
        torch._dynamo.config.disable = dynamo_disabled
        ps.destroy_model_parallel()
        import torch.distributed as dist

        dist.barrier()
