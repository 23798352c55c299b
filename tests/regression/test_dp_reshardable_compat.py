"""Regression tests for patch ``dp-reshardable-compat`` (fix: dp_reshardable checkpoint backward
compat).

miles resumes from ``dp_reshardable`` distributed-optimizer checkpoints written by older Megatron
versions and with a different data-parallel size. What these tests prove:

- ``dict_utils.merge`` truncates a longer first list to the second's length only on a key path
  that goes through ``optimizer`` and then ``param_state`` (bucket entry lists, whose trailing
  padding entries depend on the DP size the checkpoint was written with); everywhere else, and
  when the first list is the shorter one, a length mismatch still raises (upstream always raises);
- a ``ShardedTensor`` with ``flattened_range`` (older checkpoint formats) constructs and logs a
  deprecation warning once per process, instead of raising ``CheckpointingException``;
- ``DistributedOptimizer.load_parameter_state_from_dp_reshardable`` treats bucket entries without
  a ``padding`` key as parameters (upstream raises ``KeyError``). The real method runs on a small
  stand-in for the optimizer's bucket layout, since building a DistributedOptimizer needs CUDA.
"""

from __future__ import annotations

import dataclasses
import logging
import types
from typing import Any

import pytest
import torch

MAPPING_LOGGER = "megatron.core.dist_checkpointing.mapping"


def _bucket_entries(n: int, tag: str) -> list[dict[str, Any]]:
    return [{tag: torch.full((2,), float(i))} for i in range(n)]


@pytest.mark.cpu
@pytest.mark.parametrize(
    "prefix",
    [
        ("optimizer", "param_state"),
        ("optimizer", 0, "param_state"),  # ChainedOptimizer: one state dict per sub-optimizer
        ("checkpoint", "optimizer", "param_state", 1),
    ],
)
def test_merge_truncates_longer_first_list_below_optimizer_param_state(
    prefix: tuple[Any, ...],
) -> None:
    from megatron.core.dist_checkpointing.dict_utils import merge

    def nest(leaf: Any) -> Any:
        for key in reversed(prefix):
            leaf = {key: leaf}
        return leaf

    # Saved with another DP size: 3 params + 2 trailing padding entries; now: 3 params.
    x1 = nest({torch.float32: [_bucket_entries(5, "step")]})
    x2 = nest({torch.float32: [_bucket_entries(3, "exp_avg")]})
    merged = merge(x1, x2)

    node = merged
    for key in prefix:
        node = node[key]
    bucket = node[torch.float32][0]
    assert len(bucket) == 3
    for i, entry in enumerate(bucket):
        assert set(entry) == {"step", "exp_avg"}
        assert torch.equal(entry["step"], torch.full((2,), float(i)))
        assert torch.equal(entry["exp_avg"], torch.full((2,), float(i)))


@pytest.mark.cpu
@pytest.mark.parametrize(
    "prefix",
    [
        ("model", "param_state"),  # no optimizer on the path
        ("optimizer", "state"),  # optimizer, but not its param_state
        ("param_state", "optimizer"),  # wrong order
        (),
    ],
)
def test_merge_still_raises_elsewhere(prefix: tuple[Any, ...]) -> None:
    from megatron.core.dist_checkpointing.dict_utils import merge

    def nest(leaf: Any) -> Any:
        for key in reversed(prefix):
            leaf = {key: leaf}
        return leaf

    with pytest.raises(ValueError, match="different lengths"):
        merge(nest(_bucket_entries(5, "step")), nest(_bucket_entries(3, "exp_avg")))


@pytest.mark.cpu
def test_merge_still_raises_when_first_list_is_shorter() -> None:
    from megatron.core.dist_checkpointing.dict_utils import merge

    x1 = {"optimizer": {"param_state": [_bucket_entries(2, "step")]}}
    x2 = {"optimizer": {"param_state": [_bucket_entries(3, "exp_avg")]}}
    with pytest.raises(ValueError, match="different lengths"):
        merge(x1, x2)


def _flat_sharded_tensor(key: str) -> Any:
    from megatron.core.dist_checkpointing.mapping import ShardedTensor

    # A [4, 6] tensor, this rank holding the flat elements [3, 9) of its single [4, 6] shard.
    data = torch.arange(6, dtype=torch.float32)
    return ShardedTensor(
        key,
        data,
        data.dtype,
        (4, 6),
        (4, 6),
        (0, 0),
        (1, 1),
        flattened_range=slice(3, 9),
    )


@pytest.mark.cpu
def test_sharded_tensor_with_flattened_range_constructs_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from megatron.core.dist_checkpointing import mapping

    # Start from "not yet warned in this process" (another test may have warned already).
    monkeypatch.setattr(mapping, "_flattened_range_deprecation_logged", False, raising=False)
    with caplog.at_level(logging.WARNING, logger=MAPPING_LOGGER):
        first = _flat_sharded_tensor("a")
        second = _flat_sharded_tensor("b")
        # The way fully_sharded_model_space builds optimizer-state tensors from model tensors.
        base = mapping.ShardedTensor.from_rank_offsets("c", torch.zeros(4, 6))
        third = dataclasses.replace(base, data=torch.zeros(6), flattened_range=slice(0, 6))

    assert first.flattened_range == slice(3, 9) and second.key == "b"
    assert third.flattened_range == slice(0, 6)
    records = [r for r in caplog.records if r.name == MAPPING_LOGGER]
    assert len(records) == 1, [r.getMessage() for r in records]
    assert records[0].levelno == logging.WARNING
    assert "deprecated" in records[0].getMessage()


@pytest.mark.cpu
def test_sharded_tensor_without_flattened_range_does_not_warn(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from megatron.core.dist_checkpointing import mapping

    monkeypatch.setattr(mapping, "_flattened_range_deprecation_logged", False, raising=False)
    with caplog.at_level(logging.WARNING, logger=MAPPING_LOGGER):
        mapping.ShardedTensor.from_rank_offsets("d", torch.zeros(2, 2))
    assert not [r for r in caplog.records if r.name == MAPPING_LOGGER]


def _optimizer_stand_in(num_params: int) -> tuple[Any, list[tuple[Any, dict[str, Any]]]]:
    """The bucket layout ``load_parameter_state_from_dp_reshardable`` reads, and what it sets."""
    params = [torch.nn.Parameter(torch.zeros(2)) for _ in range(num_params)]
    set_calls: list[tuple[Any, dict[str, Any]]] = []
    stand_in = types.SimpleNamespace(
        per_bucket_numel_unpadded=[{torch.float32: [2 * num_params]}],
        gbuf_ranges=[{torch.float32: [{"param_map": {p: {} for p in params}}]}],
        _set_main_param_and_optimizer_states=lambda p, t: set_calls.append((p, t)),
    )
    return stand_in, set_calls


@pytest.mark.cpu
def test_dp_reshardable_load_treats_entries_without_padding_key_as_params() -> None:
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    stand_in, set_calls = _optimizer_stand_in(2)
    entries = [
        {"param": torch.ones(2), "exp_avg": torch.ones(2)},  # older checkpoint: no 'padding'
        {"param": torch.zeros(1), "exp_avg": torch.zeros(1), "padding": True},
        {"param": torch.full((2,), 2.0), "exp_avg": torch.full((2,), 2.0), "padding": False},
    ]
    state_dict = {
        "per_bucket_numel_unpadded": stand_in.per_bucket_numel_unpadded,
        0: {torch.float32: [entries]},
    }
    DistributedOptimizer.load_parameter_state_from_dp_reshardable(stand_in, state_dict)

    params = list(stand_in.gbuf_ranges[0][torch.float32][0]["param_map"])
    assert [p for p, _ in set_calls] == params
    assert set_calls[0][1] is entries[0]
    assert set_calls[1][1] is entries[2]
