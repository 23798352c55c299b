"""Patch dp-reshardable-compat across ranks: a dp_reshardable optimizer state saved with DP=2.

One process per rank (torchrun; NCCL on GPUs, gloo on CPUs for a dry run, see mgpu.py). Building a
real ``DistributedOptimizer`` needs CUDA and a DDP model, so each rank runs the real
``DistributedOptimizer`` methods (``get_parameter_state_dp_reshardable``,
``sharded_param_state_dp_reshardable``, ``load_parameter_state_from_dp_reshardable``) on a small
stand-in for its bucket layout: one fp32 bucket whose params sit at 64-element aligned offsets
(gaps between them, as Megatron's DDP buffer lays them out), with torch-Adam style state
(``param``, ``exp_avg``, ``exp_avg_sq`` per element, a 0-dim ``step``). The DP group is the real
2-rank group for DP=2 and a per-rank singleton group for DP=1; the checkpoint is written and read
by the real ``dist_checkpointing.save``/``load`` (torch_dist) across both ranks.

The DP=2 save gives the ranks bucket lists of different lengths (rank 0: params and the padding
between them; rank 1: fewer entries). Checkpoints in two formats are loaded:

- ``current``: patch 2 keeps the 0-dim ``step`` out of the checkpoint (non-persistent: each rank
  keeps its own, the optimizer restores it from ``param_groups``), so the common state holds no
  bucket entries and nothing is merged by position;
- ``previous``: as the previous version of the series wrote it, with every entry's ``step`` in the
  common state, which rank 0 alone writes (padding entries: an uninitialised placeholder of the
  gap's length); patch 9 merges those saved entries into each rank's layout by what they are.

The loading optimizer is fresh, as on a resume (no ``step`` yet). What this proves, in both
formats: DP=2 save -> DP=2 load gives every rank exactly its own shard back, and DP=2 -> DP=1
(every rank loads the whole bucket) gives every param its full state, both for a layout where a
param straddles the DP boundary and for one where a whole param lies in rank 1's half (the DP=1
list is then longer than rank 0's saved list: the previous patch raised there, a strict xfail).
No param gets a padding entry's or another entry's ``step``: none (current format; it comes from
``param_groups``) or a 0-dim copy of the saved optimizer step (previous format); with the
previous patch, rank 1 got rank 0's 24-element padding placeholder. (The straddling layout in the
previous format loaded with the previous patch too: those two cases pin a non-regression.)

On the unpatched base these fail (the 0-dim ``step`` trips upstream's shape assert on save, and
the list merge raises on load).
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import mgpu
import pytest
import torch

pytestmark = [pytest.mark.multi_gpu]

DTYPE = torch.float32
KEYS = ("param", "exp_avg", "exp_avg_sq")
SAVED_STEP = 5.0
FORMATS = ["current", "previous"]


def _truth(numel: int) -> dict[str, torch.Tensor]:
    """The world (unsharded) state of the bucket: distinct values per key and element."""
    base = torch.arange(numel, dtype=DTYPE)
    return {k: base + 1000.0 * (i + 1) for i, k in enumerate(KEYS)}


def _stand_in(
    params: list[tuple[int, int]],
    unpadded: int,
    padded: int,
    group: Any,
    truth: dict[str, torch.Tensor] | None,
) -> tuple[Any, dict[Any, dict[str, torch.Tensor]]]:
    """A DistributedOptimizer stand-in for one bucket; its state is ``truth`` (or zeros)."""
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    dp_rank, dp_size = group.rank(), group.size()
    local = padded // dp_size
    lo, hi = dp_rank * local, (dp_rank + 1) * local
    param_map: dict[Any, dict[str, Any]] = {}
    states: dict[Any, dict[str, torch.Tensor]] = {}
    for start, end in params:
        a, b = max(start, lo), min(end, hi)
        if a >= b:
            continue
        model_param = torch.nn.Parameter(torch.zeros(end - start))
        param_map[model_param] = {
            "gbuf_local": types.SimpleNamespace(start=a - lo, end=b - lo),
            "gbuf_world": (a, b),
        }
        states[model_param] = {
            k: (truth[k][a:b].clone() if truth else torch.zeros(b - a)) for k in KEYS
        }
        if truth:  # a fresh optimizer (the one loading) has no step yet
            states[model_param]["step"] = torch.tensor(SAVED_STEP)
    loaded: dict[Any, dict[str, torch.Tensor]] = {}
    stand_in = types.SimpleNamespace(
        per_bucket_numel=[{DTYPE: [padded]}],
        per_bucket_numel_unpadded=[{DTYPE: [unpadded]}],
        gbuf_ranges=[{DTYPE: [{"param_map": param_map}]}],
        buffers=[
            types.SimpleNamespace(
                buckets=[
                    types.SimpleNamespace(numel_unpadded=unpadded, grad_data=torch.zeros(padded))
                ]
            )
        ],
        data_parallel_group=group,
        data_parallel_group_idx=0,
        distributed_optimizer_instance_id=0,
        _get_main_param_and_optimizer_states=lambda p: dict(states[p]),
        _set_main_param_and_optimizer_states=lambda p, t: loaded.__setitem__(p, t),
    )
    stand_in.get_parameter_state_dp_reshardable = lambda: (
        DistributedOptimizer.get_parameter_state_dp_reshardable(stand_in)
    )
    return stand_in, loaded


def _sharded(stand_in: Any, is_loading: bool, fmt: str = "current") -> dict[str, Any]:
    from megatron.core.dist_checkpointing.mapping import LocalNonpersistentObject
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    state = DistributedOptimizer.sharded_param_state_dp_reshardable(
        stand_in, {}, is_loading=is_loading
    )
    if fmt == "previous":  # the previous series saved every entry's step as common state
        for dtype_state in state[0].values():
            for bucket in dtype_state:
                for entry in bucket:
                    if isinstance(entry.get("step"), LocalNonpersistentObject):
                        entry["step"] = entry["step"].unwrap()
    return {"optimizer": {"param_state": state}}


def _try(fn: Any) -> tuple[Any, str | None]:
    """(result, None) or (None, error) -- DCP's CheckpointException is a BaseException."""
    try:
        return fn(), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001
        return None, f"{type(exc).__name__}: {str(exc)[:800]}"


def _save_dp2(
    tmp: Path, params: list[tuple[int, int]], unpadded: int, padded: int, fmt: str = "current"
) -> str:
    """Save the DP=2 state on both ranks into a directory shared by the ranks; returns it."""
    import torch.distributed as dist
    from megatron.core import dist_checkpointing

    path = mgpu.all_gather_object(str(tmp))[0]  # rank 0's tmp dir (same host)
    stand_in, _ = _stand_in(params, unpadded, padded, dist.group.WORLD, _truth(unpadded))
    _, error = _try(lambda: dist_checkpointing.save(_sharded(stand_in, False, fmt), path))
    ok = mgpu.all_ranks(error is None)
    assert ok, f"DP=2 save failed (rank {mgpu.rank()}: {error})"
    return path


def _load(path: str, stand_in: Any, **kwargs: Any) -> str | None:
    """Load into the stand-in's layout; returns an error (agreed over ranks) or None."""
    from megatron.core import dist_checkpointing
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    def load() -> None:
        state = dist_checkpointing.load(_sharded(stand_in, True), path, **kwargs)
        DistributedOptimizer.load_parameter_state_from_dp_reshardable(
            stand_in, state["optimizer"]["param_state"]
        )

    _, error = _try(load)
    errors = mgpu.all_gather_object(error)
    return "; ".join(f"rank {r}: {e}" for r, e in enumerate(errors) if e) or None


def _check_loaded(
    loaded: dict[Any, dict[str, torch.Tensor]], stand_in: Any, numel: int, fmt: str
) -> None:
    truth = _truth(numel)
    param_map = stand_in.gbuf_ranges[0][DTYPE][0]["param_map"]
    assert set(loaded) == set(param_map), "not every param of this layout got its state"
    for param, ranges in param_map.items():
        a, b = ranges["gbuf_world"]
        for k in KEYS:
            assert torch.equal(loaded[param][k], truth[k][a:b]), (k, a, b)
        step = loaded[param].get("step")
        if fmt == "current":
            assert step is None, f"a saved entry's step reached param [{a}, {b}): {step}"
        else:
            assert step is not None and step.dim() == 0, f"param [{a}, {b}) got step {step}"
            assert step.item() == SAVED_STEP


# Params at 64-aligned offsets; the second straddles the DP=2 boundary (128 of 256).
LAYOUT = [(0, 40), (64, 200)]
UNPADDED, PADDED = 200, 256
# As LAYOUT plus a third param that lies wholly in DP=2 rank 1's half.
LAYOUT_3 = [(0, 40), (64, 200), (200, 230)]
UNPADDED_3 = 230
LAYOUTS = [
    pytest.param(LAYOUT, UNPADDED, id="straddling-param"),
    pytest.param(LAYOUT_3, UNPADDED_3, id="whole-param-on-rank1"),
]


@pytest.fixture
def dp_env() -> Any:
    with mgpu.model_parallel():
        yield


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("layout", "unpadded"), LAYOUTS)
@pytest.mark.usefixtures("dp_env")
def test_dp2_save_dp2_load_each_rank_gets_its_shard(
    tmp_path: Path, layout: list[tuple[int, int]], unpadded: int, fmt: str
) -> None:
    import torch.distributed as dist

    path = _save_dp2(tmp_path, layout, unpadded, PADDED, fmt)
    stand_in, loaded = _stand_in(layout, unpadded, PADDED, dist.group.WORLD, None)
    lengths = mgpu.all_gather_object(
        len(_sharded(stand_in, True)["optimizer"]["param_state"][0][DTYPE][0])
    )
    stand_in, loaded = _stand_in(layout, unpadded, PADDED, dist.group.WORLD, None)
    error = _load(path, stand_in)
    assert lengths[0] != lengths[1], f"ranks' bucket lists should differ in length: {lengths}"
    assert error is None, f"DP=2 -> DP=2 load failed: {error}"
    _check_loaded(loaded, stand_in, unpadded, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("layout", "unpadded"), LAYOUTS)
@pytest.mark.usefixtures("dp_env")
def test_dp2_save_dp1_load_restores_every_param(
    tmp_path: Path, layout: list[tuple[int, int]], unpadded: int, fmt: str
) -> None:
    import torch.distributed as dist

    path = _save_dp2(tmp_path, layout, unpadded, PADDED, fmt)
    singletons = [dist.new_group([r]) for r in range(dist.get_world_size())]
    group = singletons[mgpu.rank()]
    stand_in, loaded = _stand_in(layout, unpadded, PADDED, group, None)
    # Every rank is a whole DP=1 replica here, so shards are read by both ranks on purpose.
    error = _load(path, stand_in, validate_access_integrity=False)
    assert error is None, f"DP=2 -> DP=1 load failed: {error}"
    _check_loaded(loaded, stand_in, unpadded, fmt)
