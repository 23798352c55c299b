"""Regression tests for patch ``partial-ckpt-load`` (feat: support partial checkpoint loading).

miles loads Megatron ``torch_dist`` checkpoints into models that may hold more tensors than the
checkpoint (e.g. freshly added MTP layers or heads), and the checkpoints' common state holds
Python objects beyond Megatron's ``torch.serialization`` allow-list. What these tests prove,
through the real ``megatron.core.dist_checkpointing.save``/``load`` on gloo with world size 1:

- loading a state dict that expects tensors absent from the checkpoint restores the present ones,
  leaves the absent ones at their initial values and logs that exactly once (upstream raises a
  ``KeyError`` inside the DCP planner, surfaced as ``CheckpointException``);
- a non-tensor object that is not in Megatron's safe-globals allow-list (``datetime.timedelta``,
  next to an ``argparse.Namespace`` of args) in the common state loads (upstream's ``torch.load``
  with the default ``weights_only=True`` refuses it);
- a global shape mismatch of a tensor that IS in the checkpoint still raises.

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
        loaded = _call(lambda: dist_checkpointing.load(request, str(tensor_ckpt)))

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
    from megatron.core.dist_checkpointing.strategies.common import TorchCommonLoadStrategy

    common = _call(lambda: TorchCommonLoadStrategy().load_common(object_ckpt))
    assert vars(common["args"]) == vars(SAVED_ARGS)


@pytest.mark.cpu
def test_shape_mismatch_of_present_tensor_still_raises(tensor_ckpt: Path) -> None:
    from megatron.core import dist_checkpointing

    request = {"a": _sharded("a", torch.zeros(3, 2)), "b": _sharded("b", torch.zeros(4))}
    raised: BaseException | None = None
    try:
        dist_checkpointing.load(request, str(tensor_ckpt))
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - CheckpointException is a BaseException
        raised = exc
    assert raised is not None, "a global shape mismatch must not load silently"
    assert "Global shape mismatch" in str(raised)
