"""Regression tests for patch ``partial-ckpt-load`` (feat: support partial checkpoint loading).

miles loads Megatron ``torch_dist`` checkpoints into models that may hold more tensors than the
checkpoint (e.g. freshly added MTP layers or heads), and the checkpoints' common state holds
Python objects beyond Megatron's ``torch.serialization`` allow-list. What these tests prove,
through the real ``megatron.core.dist_checkpointing.save``/``load`` on gloo with world size 1:

- default path (``default_path``, issue 24 fix 3): without ``allow_partial_load`` a missing tensor
  raises as upstream does (round 2 loaded it, leaving the tensor at its random init);
- asked for (``TorchDistLoadShardedStrategy(allow_partial_load=True)``; the training flag
  ``--dist-ckpt-allow-partial-load`` builds that strategy), loading a state dict that expects
  tensors absent from the checkpoint restores the present ones,
  leaves the absent ones at their initial values and logs that exactly once (upstream raises a
  ``KeyError`` inside the DCP planner, surfaced as ``CheckpointException``); the same holds for
  absent sharded objects (such as TE ``_extra_state`` of new layers);
- a ``datetime.timedelta`` (next to an ``argparse.Namespace`` of args) in the common state loads
  with ``weights_only`` left at torch's default (the patch allow-lists it; round 2 loaded common
  state with ``weights_only=False``), while an arbitrary class is still refused;
- a global shape mismatch of a tensor that IS in the checkpoint still raises;
- ``DistributedOptimizer``: the dp_reshardable sharded state leaves torch Adam's 0-dim ``step``
  out of the bucket ShardedTensors (upstream asserts its shape) and out of the checkpoint (each
  rank keeps its own; the step is restored from ``param_groups``), so a save/load round trip gives
  every parameter its own step; ``load_state_dict`` drops a ``param_group["step"]`` that is None
  while keeping a real one. A DistributedOptimizer cannot be
  built without CUDA, so these run the real methods on a small stand-in for its bucket layout /
  inner optimizer (a real ``torch.optim.AdamW``).

Without CUDA, ``shims.cpu_dist_ckpt_shims`` stands in for ``torch.cuda.synchronize`` /
``current_device``. Note that torch DCP's ``CheckpointException`` derives from BaseException, so
the tests catch BaseException (never KeyboardInterrupt) to turn it into a readable failure.
"""

from __future__ import annotations

import argparse
import datetime
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from shims import cpu_dist_ckpt_shims, single_rank_gloo_context

TORCH_STRATEGY_LOGGER = "megatron.core.dist_checkpointing.strategies.torch"


@pytest.fixture(scope="module")
def dist_ckpt_env() -> Iterator[None]:
    with single_rank_gloo_context(), cpu_dist_ckpt_shims():
        yield


def _sharded(key: str, tensor: torch.Tensor) -> Any:
    from megatron.core.dist_checkpointing import ShardedTensor

    return ShardedTensor.from_rank_offsets(key, tensor)


def _partial() -> Any:
    from megatron.core.dist_checkpointing.strategies.torch import TorchDistLoadShardedStrategy

    return TorchDistLoadShardedStrategy(allow_partial_load=True)


def _call(fn: Callable[[], Any]) -> Any:
    """Run ``fn``; DCP's BaseException-derived errors become a test failure with their message."""
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit, pytest.fail.Exception):
        raise
    except BaseException as exc:  # noqa: BLE001 - torch DCP's CheckpointException is BaseException
        pytest.fail(f"{type(exc).__name__}: {str(exc)[:1500]}")


SAVED_A = torch.arange(6, dtype=torch.float32).reshape(2, 3)
SAVED_ARGS = argparse.Namespace(
    lr=3e-4, seq_length=128, distributed_timeout=datetime.timedelta(minutes=30)
)


@pytest.fixture(scope="module")
def tensor_ckpt(dist_ckpt_env: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint holding one tensor ``a`` and only plain Python values in its common state."""
    from megatron.core import dist_checkpointing

    path = tmp_path_factory.mktemp("ckpt_tensor")
    state = {"a": _sharded("a", SAVED_A.clone()), "iteration": 7, "meta": {"tags": ["x", "y"]}}
    dist_checkpointing.save(state, str(path))
    return path


@pytest.fixture(scope="module")
def object_ckpt(dist_ckpt_env: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint whose common state holds args with a non-allow-listed ``timedelta``."""
    from megatron.core import dist_checkpointing

    path = tmp_path_factory.mktemp("ckpt_object")
    state = {"a": _sharded("a", SAVED_A.clone()), "args": SAVED_ARGS}
    dist_checkpointing.save(state, str(path))
    return path


@pytest.mark.cpu
def test_full_load_round_trips(tensor_ckpt: Path) -> None:
    """Non-regression (passes on the base too): a full load is unchanged."""
    from megatron.core import dist_checkpointing

    loaded = _call(
        lambda: dist_checkpointing.load({"a": _sharded("a", torch.zeros(2, 3))}, str(tensor_ckpt))
    )
    assert torch.equal(loaded["a"], SAVED_A)
    assert loaded["iteration"] == 7 and loaded["meta"] == {"tags": ["x", "y"]}


@pytest.mark.cpu
def test_partial_load_skips_tensors_missing_from_checkpoint(
    tensor_ckpt: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from megatron.core import dist_checkpointing

    b_init = torch.full((4,), 7.0)
    c_init = torch.linspace(-1.0, 1.0, 6).reshape(3, 2)
    request = {
        "a": _sharded("a", torch.zeros(2, 3)),
        "extra": {"b": _sharded("b", b_init.clone()), "c": _sharded("c", c_init.clone())},
    }
    with caplog.at_level(logging.WARNING, logger=TORCH_STRATEGY_LOGGER):
        loaded = _call(lambda: dist_checkpointing.load(request, str(tensor_ckpt), _partial()))

    assert torch.equal(loaded["a"], SAVED_A), "a present tensor must be restored"
    assert torch.equal(loaded["extra"]["b"], b_init), "a missing tensor keeps its init value"
    assert torch.equal(loaded["extra"]["c"], c_init), "a missing tensor keeps its init value"
    assert loaded["iteration"] == 7

    records = [
        r
        for r in caplog.records
        if r.name == TORCH_STRATEGY_LOGGER and r.levelno >= logging.WARNING
    ]
    assert len(records) == 1, [r.getMessage() for r in records]
    message = records[0].getMessage()
    assert "'b'" in message and "'c'" in message and "'a'" not in message


@pytest.mark.cpu
def test_partial_load_keeps_sharded_objects_missing_from_checkpoint(
    tensor_ckpt: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """E.g. TE ``_extra_state`` of layers the checkpoint does not have."""
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import ShardedObject

    request = {
        "a": _sharded("a", torch.zeros(2, 3)),
        "new_layer": {
            "_extra_state": ShardedObject("new_layer._extra_state", {"x": 1}, (1,), (0,))
        },
    }
    with caplog.at_level(logging.WARNING, logger=TORCH_STRATEGY_LOGGER):
        loaded = _call(lambda: dist_checkpointing.load(request, str(tensor_ckpt), _partial()))

    assert torch.equal(loaded["a"], SAVED_A)
    assert loaded["new_layer"]["_extra_state"] == {"x": 1}
    records = [r for r in caplog.records if r.name == TORCH_STRATEGY_LOGGER]
    assert len(records) == 1 and "new_layer._extra_state" in records[0].getMessage()


@pytest.mark.cpu
def test_common_state_with_python_object_loads(object_ckpt: Path) -> None:
    from megatron.core import dist_checkpointing

    loaded = _call(
        lambda: dist_checkpointing.load({"a": _sharded("a", torch.zeros(2, 3))}, str(object_ckpt))
    )
    assert isinstance(loaded["args"], argparse.Namespace)
    assert vars(loaded["args"]) == vars(SAVED_ARGS)
    assert torch.equal(loaded["a"], SAVED_A)


@pytest.mark.cpu
def test_common_strategy_loads_python_objects(object_ckpt: Path) -> None:
    from compat import load_common

    common = _call(lambda: load_common(object_ckpt))
    assert vars(common["args"]) == vars(SAVED_ARGS)


class _NotAllowListed:
    """A class no allow-list names: common state holding it must not be unpickled."""


@pytest.mark.cpu
@pytest.mark.default_path
def test_common_state_never_unpickles_arbitrary_objects(
    dist_ckpt_env: None, tmp_path: Path
) -> None:
    """Fix 3 of issue 24: no ``weights_only=False`` (upstream 109feda4d removed it on purpose)."""
    from compat import load_common
    from megatron.core import dist_checkpointing

    dist_checkpointing.save({"a": _sharded("a", SAVED_A.clone()), "x": _NotAllowListed()},
                            str(tmp_path))
    with pytest.raises(Exception, match="(?i)weights.only|unsupported global"):
        load_common(tmp_path)


@pytest.mark.cpu
@pytest.mark.default_path
def test_missing_tensor_raises_unless_partial_load_is_asked_for(tensor_ckpt: Path) -> None:
    """Fix 3 of issue 24: upstream's default strictness and no switch: a tensor the checkpoint
    lacks is an error (round 2 loaded, leaving it at its random init with one warning line)."""
    from megatron.core import dist_checkpointing

    request = {"a": _sharded("a", torch.zeros(2, 3)), "b": _sharded("b", torch.zeros(4))}
    raised: BaseException | None = None
    try:
        dist_checkpointing.load(request, str(tensor_ckpt))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - CheckpointException is a BaseException
        raised = exc
    assert raised is not None, "a missing tensor loaded without partial loading asked for"
    assert "b" in str(raised)


@pytest.mark.cpu
def test_shape_mismatch_of_present_tensor_still_raises(tensor_ckpt: Path) -> None:
    """Non-regression (passes on the base too): a present tensor of another shape still raises."""
    from megatron.core import dist_checkpointing

    request = {"a": _sharded("a", torch.zeros(3, 2)), "b": _sharded("b", torch.zeros(4))}
    raised: BaseException | None = None
    try:
        dist_checkpointing.load(request, str(tensor_ckpt), _partial())
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - CheckpointException is a BaseException
        raised = exc
    assert raised is not None, "a global shape mismatch must not load silently"
    assert "Global shape mismatch" in str(raised)


def _dp_reshardable_stand_in(steps: tuple[float, float] = (5.0, 5.0), fill: float = 1.0) -> Any:
    """The bucket layout ``sharded_param_state_dp_reshardable`` reads (DP world size 1).

    One bucket of 8 elements holding two params ([0, 3) and [4, 8), a gap at 3), with torch Adam
    style state: a 0-dim ``step`` tensor next to the per-element tensors (values ``fill`` + k).
    """
    import types

    def entry(start: int, end: int, step: float) -> dict[str, Any]:
        n = end - start
        return {
            "param": torch.full((n,), fill),
            "exp_avg": torch.full((n,), fill + 1),
            "exp_avg_sq": torch.full((n,), fill + 2),
            "step": torch.tensor(step),
            "gbuf_local_start": start,
            "gbuf_local_end": end,
        }

    state = {
        "per_bucket_numel": [{torch.float32: [8]}],
        "per_bucket_numel_unpadded": [{torch.float32: [8]}],
        0: {torch.float32: [[entry(0, 3, steps[0]), entry(4, 8, steps[1])]]},
    }
    bucket = types.SimpleNamespace(numel_unpadded=8, grad_data=torch.zeros(8))
    return types.SimpleNamespace(
        data_parallel_group=types.SimpleNamespace(rank=lambda: 0, size=lambda: 1),
        data_parallel_group_idx=0,
        distributed_optimizer_instance_id=0,
        gbuf_ranges=[{torch.float32: [{}]}],
        buffers=[types.SimpleNamespace(buckets=[bucket])],
        get_parameter_state_dp_reshardable=lambda: state,
        steps=[e["step"] for e in state[0][torch.float32][0]],
    )


def _dp_reshardable_sharded(stand_in: Any, is_loading: bool) -> dict[str, Any]:
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    state = DistributedOptimizer.sharded_param_state_dp_reshardable(
        stand_in, {}, is_loading=is_loading
    )
    return {"optimizer": {"param_state": state}}


@pytest.mark.cpu
def test_dp_reshardable_sharded_state_skips_step() -> None:
    """The real method on a stand-in layout: ``step`` is not forced into a bucket slice (upstream
    1dcf0da asserts its shape), and it is not persisted per entry either: each rank keeps its own
    (the optimizer's step is restored from ``param_groups``). The previous version of the patch
    left it in the entries as common state, which only rank 0 writes (issue 16, defect 5)."""
    from megatron.core.dist_checkpointing import ShardedTensor
    from megatron.core.dist_checkpointing.mapping import LocalNonpersistentObject

    stand_in = _dp_reshardable_stand_in()
    bucket = _dp_reshardable_sharded(stand_in, True)["optimizer"]["param_state"][0][torch.float32][
        0
    ]
    params = [e for e in bucket if not e["padding"].unwrap()]
    assert len(params) == 2 and len(bucket) == 3  # two params and the padding between them
    for item, own_step in zip(params, stand_in.steps, strict=True):
        for key in ("param", "exp_avg", "exp_avg_sq"):
            assert isinstance(item[key], ShardedTensor)
        assert isinstance(item["step"], LocalNonpersistentObject)
        assert item["step"].unwrap() is own_step
    assert [e["param"].global_offset for e in params] == [(0,), (4,)]


@pytest.mark.cpu
@pytest.mark.usefixtures("dist_ckpt_env")
def test_dp_reshardable_round_trip_keeps_each_params_own_step(tmp_path: Path) -> None:
    """Real save and load (torch_dist, one rank): the checkpoint's common state holds no bucket
    entries (so no rank's layout is imposed on another's), the per-element state comes back, and
    every parameter keeps its own step, never the saved one of another entry. The previous patch
    saved the steps (rank 0's, padding placeholders included) in the common state and merged them
    back by position (issue 16, defect 5)."""
    from megatron.core import dist_checkpointing

    ckpt = tmp_path / "dp_reshardable"
    ckpt.mkdir()
    _call(
        lambda: dist_checkpointing.save(
            _dp_reshardable_sharded(_dp_reshardable_stand_in(), False), str(ckpt)
        )
    )
    common = dist_checkpointing.load_common_state_dict(str(ckpt))
    assert not common.get("optimizer", {}).get("param_state", {}).get(0), common

    loading = _dp_reshardable_stand_in(steps=(7.0, 9.0), fill=0.0)
    loaded = _call(
        lambda: dist_checkpointing.load(_dp_reshardable_sharded(loading, True), str(ckpt))
    )
    bucket = loaded["optimizer"]["param_state"][0][torch.float32][0]
    params = [e for e in bucket if not e["padding"]]
    assert [e["param"].tolist() for e in params] == [[1.0] * 3, [1.0] * 4]
    assert [e["exp_avg_sq"].tolist() for e in params] == [[3.0] * 3, [3.0] * 4]
    for item, own_step in zip(params, loading.steps, strict=True):
        assert item["step"] is own_step, "a parameter got another entry's step"


def _load_param_groups(monkeypatch: pytest.MonkeyPatch, saved_step: Any) -> list[dict[str, Any]]:
    """Run the real ``DistributedOptimizer.load_state_dict`` on a stand-in holding a torch AdamW.

    ``HAVE_APEX_OR_TE`` is set as on a TE/Apex install, where the step lives in the param groups
    (FusedAdam) and the loaded groups are handed to the inner optimizer as they are.
    """
    import types

    from megatron.core.optimizer import distrib_optimizer

    monkeypatch.setattr(distrib_optimizer, "HAVE_APEX_OR_TE", True)
    main_param = torch.nn.Parameter(torch.zeros(4))
    group = {
        "params": [main_param],
        "wd_mult": 1.0,
        "lr_mult": 1.0,
        "is_expert_parallel": False,
        "is_decoupled_lr": False,
    }
    inner = torch.optim.AdamW([group], lr=1e-3)
    main_param.grad = torch.ones(4)
    inner.step()  # populate the state, as after a previous run
    saved_groups = [
        {k: v for k, v in g.items() if k != "params"} | {"step": saved_step}
        for g in inner.state_dict()["param_groups"]
    ]
    stand_in = types.SimpleNamespace(
        ddp_config=types.SimpleNamespace(use_megatron_fsdp=False),
        optimizer=inner,
        config=types.SimpleNamespace(fp16=False),
        grad_scaler=None,
    )
    distrib_optimizer.DistributedOptimizer.load_state_dict(
        stand_in, {"optimizer": {"param_groups": saved_groups}}
    )
    return inner.param_groups


@pytest.mark.cpu
def test_distrib_optimizer_drops_none_step(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = _load_param_groups(monkeypatch, saved_step=None)
    assert all(g.get("step", "absent") is not None for g in groups), groups
    assert all("step" not in g for g in groups)


@pytest.mark.cpu
def test_distrib_optimizer_keeps_real_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-regression (passes on the base too): only a None step is dropped."""
    groups = _load_param_groups(monkeypatch, saved_step=7)
    assert [g["step"] for g in groups] == [7]
