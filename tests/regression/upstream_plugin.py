"""pytest plugin (``-p upstream_plugin``) for running upstream Megatron-LM's own unit tests
without Transformer Engine.

Upstream's tests/unit_tests/conftest.py calls ``megatron.core.utils.is_te_min_version`` in an
autouse fixture; at 1dcf0da that raises TypeError when TE is absent (the version is None). This
plugin is imported before any conftest, and makes the probe answer False instead, which is what
"TE not installed" means.

Two more TE-less / offline gaps are closed:

- ``megatron.core.transformer.moe.moe_utils`` binds ``te_general_gemm`` only when TE imports, but
  ``router_gating_linear`` reads it unconditionally (NameError in router gating without TE). It is
  set to None here, which the code already reads as "no TE gemm" (plain torch matmuls).
- upstream's conftest downloads its unit-test datasets from GitHub into /opt/data when that is
  empty (an autouse session fixture). The regression suite runs offline, and none of the files it
  runs reads /opt/data, so the download is replaced by a no-op that says so.

With ``UPSTREAM_UNITS_CPU=1`` (the CPU cases of test_upstream_units.py) upstream's ``Utils`` also
starts its one-rank process group on gloo instead of NCCL (see the CPU mode section below).
Nothing else is changed.
"""

from __future__ import annotations

import os
from typing import Any

from compat import python_features

python_features()  # before Megatron: typing.override on Python < 3.12 (3346fa8a2)

import megatron.core.utils as _utils  # noqa: E402

_original = _utils.is_te_min_version


def _is_te_min_version(version: Any, check_equality: bool = True) -> bool:
    try:
        return bool(_original(version, check_equality))
    except (TypeError, AttributeError):
        return False


_utils.is_te_min_version = _is_te_min_version


try:
    from megatron.core.transformer.moe import moe_utils as _moe_utils
except ImportError:  # pragma: no cover - a tree without MoE
    _moe_utils = None
if _moe_utils is not None and not hasattr(_moe_utils, "te_general_gemm"):
    _moe_utils.te_general_gemm = None


def _no_download(assets_dir: Any = None, *args: Any, **kwargs: Any) -> bool:
    print(f"upstream_plugin: offline, not downloading unit-test assets to {assets_dir}")
    return False


try:
    import tests.test_utils.python_scripts.download_unit_tests_dataset as _download
except Exception:  # pragma: no cover - not run from a Megatron tree, or click/requests missing
    _download = None
if _download is not None:
    _download.download_and_extract_asset = _no_download  # type: ignore[assignment]


# ------------------------------------------------------------------------------------------------
# CPU mode (env UPSTREAM_UNITS_CPU=1, set by test_upstream_units.py for its `cpu` cases): upstream's
# ``Utils.initialize_distributed`` pins a CUDA device and rendezvous with NCCL. Here it starts the
# same single process group on gloo instead, and the dist-checkpointing CUDA calls that have a CPU
# meaning are shimmed (``torch.cuda.synchronize`` is a no-op, ``torch.cuda.current_device`` answers
# "cpu", the async writer's memory probe answers 0 without psutil). Tests that put tensors on
# 'cuda' still fail; test_upstream_units.py lists them ("needs CUDA").
# ------------------------------------------------------------------------------------------------


def _cpu_mode() -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from tests.unit_tests.test_utilities import Utils

    def initialize_distributed() -> None:
        if not dist.is_initialized() and Utils.rank >= 0:
            address = os.getenv("MASTER_ADDR", "localhost")
            port = os.getenv("MASTER_PORT", "6000")
            dist.init_process_group(
                backend="gloo",
                init_method=f"tcp://{address}:{port}",
                world_size=Utils.world_size,
                rank=Utils.rank,
                timeout=timedelta(minutes=1),
            )
            dist.barrier()
        Utils.inited = True

    Utils.initialize_distributed = staticmethod(initialize_distributed)  # type: ignore[method-assign]
    torch.cuda.synchronize = lambda *args, **kwargs: None  # type: ignore[assignment]
    torch.cuda.current_device = lambda: "cpu"  # type: ignore[assignment,return-value]
    import megatron.core.dist_checkpointing.strategies.filesystem_async as fs_async

    if not getattr(fs_async, "HAVE_PSUTIL", True):
        fs_async._process_memory = lambda: 0  # type: ignore[attr-defined]


if os.environ.get("UPSTREAM_UNITS_CPU") == "1":
    _cpu_mode()
