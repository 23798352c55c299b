"""Patch partial-ckpt-load across ranks: partial loading of a checkpoint sharded over 2 ranks.

One process per rank (torchrun; NCCL on GPUs, gloo on CPUs for a dry run, see mgpu.py). Both
ranks save, with the real ``dist_checkpointing.save`` (torch_dist), a tensor ``a`` whose rows are
split between the ranks and a replicated tensor ``r`` (rank 0 is its main replica). Then they load
state dicts that expect more than the checkpoint holds. What this proves:

- every rank gets its own shard of ``a`` (and ``r``) back, while the absent tensors -- one sharded
  over both ranks, one replicated, and one requested by rank 1 only -- keep their initial values;
  every rank finishes the load (a rank that raised while another waits in a collective would hang
  until the process-group timeout; the ranks agree on the outcome before asserting);
- a global shape mismatch of a present tensor still raises, on every rank.

On the unpatched base the partial loads raise (DCP's planner cannot find the absent keys) on every
rank, so those tests fail by assertion.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mgpu
import pytest
import torch

pytestmark = [pytest.mark.multi_gpu]

ROWS, COLS = 4, 3  # rows per rank of `a`


def _global_a() -> torch.Tensor:
    return torch.arange(2 * ROWS * COLS, dtype=torch.float32).reshape(2 * ROWS, COLS)


def _a_shard(data: torch.Tensor) -> Any:
    from megatron.core.dist_checkpointing import ShardedTensor

    return ShardedTensor.from_rank_offsets("a", data.to(mgpu.device()), (0, mgpu.rank(), 2))


def _replicated(key: str, data: torch.Tensor) -> Any:
    from megatron.core.dist_checkpointing import ShardedTensor

    return ShardedTensor.from_rank_offsets(key, data.to(mgpu.device()), replica_id=mgpu.rank())


def _try(fn: Any) -> tuple[Any, str | None]:
    try:
        return fn(), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - torch DCP's CheckpointException
        return None, f"{type(exc).__name__}: {exc}"


@pytest.fixture
def ckpt(tmp_path: Path) -> Any:
    """A 2-rank checkpoint holding the row-sharded ``a`` and the replicated ``r``."""
    from megatron.core import dist_checkpointing

    with mgpu.model_parallel():
        path = mgpu.all_gather_object(str(tmp_path))[0]  # rank 0's dir (same host)
        mine = _global_a()[mgpu.rank() * ROWS : (mgpu.rank() + 1) * ROWS].clone()
        state = {"a": _a_shard(mine), "r": _replicated("r", torch.full((5,), 3.0)), "it": 11}
        _, error = _try(lambda: dist_checkpointing.save(state, path))
        assert mgpu.all_ranks(error is None), f"save failed: {error}"
        yield path


def test_partial_load_keeps_missing_tensors_on_every_rank(ckpt: str) -> None:
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedTensor

    rank = mgpu.rank()
    b_init = torch.full((ROWS, 2), -1.0 - rank)
    d_init = torch.linspace(0.0, 1.0, 7)
    request: dict[str, Any] = {
        "a": _a_shard(torch.zeros(ROWS, COLS)),
        "r": _replicated("r", torch.zeros(5)),
        "new": {
            "b": ShardedTensor.from_rank_offsets(
                "b", b_init.clone().to(mgpu.device()), (0, rank, 2)
            ),
            "d": _replicated("d", d_init.clone()),
        },
    }
    if rank == 1:  # a tensor only one rank asks for
        request["only_rank1"] = _replicated("only_rank1", torch.full((2,), 9.0))
        request["only_rank1"].replica_id = 0

    loaded, error = _try(lambda: dist_checkpointing.load(request, ckpt))
    errors = mgpu.all_gather_object(error)
    assert not any(errors), f"partial load failed: {[str(e)[-1500:] for e in errors]}"
    expected_a = _global_a()[rank * ROWS : (rank + 1) * ROWS]
    assert torch.equal(loaded["a"].cpu(), expected_a), "this rank's shard of `a` was not restored"
    assert torch.equal(loaded["r"].cpu(), torch.full((5,), 3.0))
    assert torch.equal(loaded["new"]["b"].cpu(), b_init), "absent sharded tensor lost its init"
    assert torch.equal(loaded["new"]["d"].cpu(), d_init), "absent replicated tensor lost its init"
    if rank == 1:
        assert torch.equal(loaded["only_rank1"].cpu(), torch.full((2,), 9.0))
    assert loaded["it"] == 11


def test_shape_mismatch_still_raises_on_every_rank(ckpt: str) -> None:
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedTensor

    request = {
        "a": ShardedTensor.from_rank_offsets(
            "a", torch.zeros(ROWS, COLS + 1).to(mgpu.device()), (0, mgpu.rank(), 2)
        ),
        "b": _replicated("b", torch.zeros(2)),
    }
    _, error = _try(lambda: dist_checkpointing.load(request, ckpt))
    errors = mgpu.all_gather_object(error)
    assert all(errors), f"a global shape mismatch loaded silently on some rank: {errors}"
    assert all("Global shape mismatch" in e for e in errors), [e[-1500:] for e in errors]
