"""Patch routing-replay: MoE routers record and replay top-k through miles' replay manager (R3).

Rollout routing replay trains on the experts the rollout engine chose. Patch 6 makes every
``TopKRouter`` register with ``miles.utils.replay_base.routing_replay_manager`` and route its top-k
through the manager's ``get_topk_fn`` wrapper; routers of MTP layers (``is_mtp``, set by their MoE
layer) never call the wrapper; without miles, routers build and route as plain top-k.

The manager here is a small independent implementation of the contract in docs/series.md
(``replay_pkg/miles/utils/replay_base.py``), put on ``sys.path`` per test. Real routers, a real MoE
layer stack and a tiny MoE GPT with MTP run on a CPU (gloo, world size 1, ``single_rank_moe``); the
record/replay case also runs on a GPU. The tests show: routers register in build order and their
pre-hook makes their replay current; record then replay reproduces the recorded routing while the
probabilities come from the new logits (and gradient reaches the router); all -1 rows are padding;
forward and backward cursors are independent; MTP routers never call the wrapper; without miles
(or with a disabled manager) routing equals plain top-k. A router with ``moe_router_fusion`` under
replay takes the unfused top-k (replays exactly) and logs that once; without replay it stays
fused. Upstream's own RouterReplay is left in place (only switched off for routers miles
registers) and still works without miles. On the unpatched base, routers never register, so the
replay tests fail by assertion.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from shims import (  # noqa: F401 (fixture)
    drop_miles_modules,
    replay_manager_installed,
    single_rank_moe,
    tiny_batch,
    tiny_gpt,
    tiny_gpt_config,
)

NUM_EXPERTS = 8
TOPK = 2
HIDDEN = 16

# (score function, pre-softmax, expert bias)
SCORE_VARIANTS = [
    pytest.param("softmax", False, False, id="softmax"),
    pytest.param("softmax", True, False, id="softmax-pre"),
    pytest.param("sigmoid", False, False, id="sigmoid"),
    pytest.param("sigmoid", False, True, id="sigmoid-expert-bias"),
]


@pytest.fixture
def manager(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The test replay manager as ``miles.utils.replay_base``, enabled before routers are built."""
    request.getfixturevalue("single_rank_moe")
    with replay_manager_installed() as manager:
        yield manager


def _router(
    score_function: str = "softmax",
    pre_softmax: bool = False,
    expert_bias: bool = False,
    **overrides: Any,
) -> Any:
    from megatron.core.transformer.moe.moe_utils import get_default_pg_collection
    from megatron.core.transformer.moe.router import TopKRouter
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=2,
        hidden_size=HIDDEN,
        num_attention_heads=4,
        num_moe_experts=NUM_EXPERTS,
        moe_router_topk=TOPK,
        moe_router_score_function=score_function,  # type: ignore[arg-type]
        moe_router_pre_softmax=pre_softmax,
        moe_router_enable_expert_bias=expert_bias,
        use_cpu_initialization=True,
        add_bias_linear=False,
        init_method_std=1.0,
        **overrides,
    )
    router = TopKRouter(config=config, pg_collection=get_default_pg_collection())
    if expert_bias:
        router.expert_bias.copy_(torch.randn(NUM_EXPERTS) * 0.5)
    return router


def _hidden(seq: int = 6, batch: int = 2, seed: int = 0, device: str = "cpu") -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(seq, batch, HIDDEN, generator=gen).to(device)


def _topk_sets(routing_map: torch.Tensor) -> list[set[int]]:
    return [set(row.nonzero().flatten().tolist()) for row in routing_map.cpu()]


def _idx_sets(top_indices: torch.Tensor) -> list[set[int]]:
    return [set(row.tolist()) for row in top_indices.cpu()]


def _expected_probs(router: Any, hidden: torch.Tensor, top_indices: torch.Tensor) -> torch.Tensor:
    """Dense [tokens, experts] probabilities for the given experts, from the router's logits."""
    logits = (hidden.reshape(-1, HIDDEN).float() @ router.weight.detach().float().t()).detach()
    idx = top_indices.to(logits.device).long()
    if router.score_function == "softmax":
        if router.config.moe_router_pre_softmax:
            probs = torch.softmax(logits, dim=-1).gather(1, idx)
        else:
            probs = torch.softmax(logits.gather(1, idx), dim=-1)
    else:
        scores = torch.sigmoid(logits).gather(1, idx)
        probs = scores / (scores.sum(dim=-1, keepdim=True) + 1e-20)
    return torch.zeros_like(logits).scatter(1, idx, probs)


def _plain_topk(router: Any, hidden: torch.Tensor) -> list[set[int]]:
    logits = hidden.reshape(-1, HIDDEN).float() @ router.weight.detach().float().t()
    scores = torch.softmax(logits, -1) if router.score_function == "softmax" else logits.sigmoid()
    if router.expert_bias is not None:
        scores = scores + router.expert_bias.to(scores.device)
    return _idx_sets(torch.topk(scores, k=TOPK, dim=1).indices)


@pytest.mark.cpu
def test_routers_register_in_build_order_and_become_current(manager: Any) -> None:
    first, second = _router(), _router()
    assert getattr(first, "routing_replay", None) is not None, "router did not register"
    assert manager.replays == [first.routing_replay, second.routing_replay]
    second(_hidden())
    assert manager.current is second.routing_replay
    first(_hidden())
    assert manager.current is first.routing_replay


@pytest.mark.parametrize(
    "device",
    [pytest.param("cpu", marks=pytest.mark.cpu), pytest.param("cuda", marks=pytest.mark.gpu)],
)
@pytest.mark.parametrize(("score_function", "pre_softmax", "expert_bias"), SCORE_VARIANTS)
def test_record_then_replay_recomputes_probs_from_new_logits(
    manager: Any, device: str, score_function: str, pre_softmax: bool, expert_bias: bool
) -> None:
    router = _router(score_function, pre_softmax, expert_bias).to(device)
    hidden = _hidden(device=device)

    manager.stage = "record"
    _, recorded_map = router(hidden)
    replay = getattr(router, "routing_replay", None)
    assert replay is not None and len(replay.top_indices) == 1, "router did not record"
    assert _idx_sets(replay.top_indices[0]) == _topk_sets(recorded_map)

    # New weights: plain top-k now picks other experts for every token.
    with torch.no_grad():
        router.weight.neg_()
        if expert_bias:
            router.expert_bias.neg_()
    assert all(
        a != b for a, b in zip(_plain_topk(router, hidden), _topk_sets(recorded_map), strict=True)
    )

    manager.stage = "replay_forward"
    probs, routing_map = router(hidden)
    assert torch.equal(routing_map, recorded_map)
    expected = _expected_probs(router, hidden, replay.top_indices[0])
    torch.testing.assert_close(probs.float(), expected, rtol=1e-4, atol=1e-5)

    # Probabilities are a function of the new logits: gradient reaches the router weight.
    (probs * torch.randn_like(probs)).sum().backward()
    assert router.weight.grad is not None and router.weight.grad.abs().sum() > 0


@pytest.mark.cpu
def test_all_minus_one_rows_are_padding(manager: Any) -> None:
    router = _router()
    hidden = _hidden(seq=3, batch=2)
    assert getattr(router, "routing_replay", None) is not None, "router did not register"
    top_indices = torch.tensor([[-1, -1], [5, 2], [7, 1], [-1, -1], [3, 4], [0, 6]])
    router.routing_replay.record(top_indices)

    manager.stage = "replay_forward"
    probs, routing_map = router(hidden)
    effective = top_indices.clone()
    effective[[0, 3]] = torch.arange(TOPK) % NUM_EXPERTS
    assert _topk_sets(routing_map) == _idx_sets(effective)
    assert _topk_sets(routing_map)[0] == {0, 1}
    torch.testing.assert_close(probs, _expected_probs(router, hidden, effective))


@pytest.mark.cpu
def test_forward_and_backward_cursors_are_independent(manager: Any) -> None:
    router = _router()
    batches = [_hidden(seed=1), _hidden(seed=2)]
    manager.stage = "record"
    recorded = [router(h)[1] for h in batches]
    assert getattr(router, "routing_replay", None) is not None, "router did not register"
    assert not torch.equal(recorded[0], recorded[1])

    with torch.no_grad():
        router.weight.normal_()
    manager.stage = "replay_forward"
    assert torch.equal(router(batches[0])[1], recorded[0])
    # Backward-pass recompute starts from the first micro-batch again, on its own cursor.
    manager.stage = "replay_backward"
    assert torch.equal(router(batches[0])[1], recorded[0])
    manager.stage = "replay_forward"
    assert torch.equal(router(batches[1])[1], recorded[1])
    with pytest.raises(IndexError):
        router(batches[0])
    manager.stage = "replay_backward"
    assert torch.equal(router(batches[1])[1], recorded[1])


@pytest.mark.cpu
def test_mtp_routers_never_call_the_wrapper(manager: Any) -> None:
    from megatron.core.transformer.moe.router import TopKRouter

    calls: list[Any] = []
    get_topk_fn = manager.get_topk_fn

    def spy_get_topk_fn(fn: Any, return_probs: bool = True) -> Any:
        wrapper = get_topk_fn(fn, return_probs)

        def spy(*args: Any, **kwargs: Any) -> Any:
            calls.append(manager.current)
            return wrapper(*args, **kwargs)

        return spy

    manager.get_topk_fn = spy_get_topk_fn
    config = tiny_gpt_config(
        num_moe_experts=4,
        moe_router_topk=2,
        mtp_num_layers=1,
        add_bias_linear=False,
        moe_token_dispatcher_type="allgather",
    )
    model = tiny_gpt(config, spec_kwargs={"num_experts": 4, "moe_grouped_gemm": False})
    routers = {n: m for n, m in model.named_modules() if isinstance(m, TopKRouter)}
    mtp_names = [n for n in routers if n.startswith("mtp.")]
    decoder_names = [n for n in routers if n.startswith("decoder.")]
    assert len(mtp_names) == 1 and len(decoder_names) == 2
    assert [getattr(routers[n], "is_mtp", None) for n in decoder_names] == [False, False]
    assert getattr(routers[mtp_names[0]], "is_mtp", None) is True
    assert len(manager.replays) == 3, "every router (MTP included) registers"

    mtp_router = routers[mtp_names[0]]
    mtp_forwards: list[int] = []
    mtp_router.register_forward_hook(lambda *_: mtp_forwards.append(1))
    ids, pos, mask = tiny_batch()

    manager.stage = "record"
    # With the mtp-rl patch MTP runs only when mtp_kwargs carries mtp_labels; before it, whenever
    # labels are given. Pass what this tree's GPTModel.forward takes, so the MTP router runs.
    extra: dict[str, Any] = {"labels": ids}
    if "mtp_kwargs" in inspect.signature(type(model).forward).parameters:
        extra["mtp_kwargs"] = {"mtp_labels": ids}
    model(ids, pos, mask, **extra)
    assert mtp_forwards, "the MTP router did not run"
    assert mtp_router.routing_replay not in calls
    assert [len(routers[n].routing_replay.top_indices) for n in decoder_names] == [1, 1]
    assert mtp_router.routing_replay.top_indices == []

    # Replay: the MTP router has nothing recorded and must not pop (that would raise IndexError).
    manager.stage = "replay_forward"
    calls.clear()
    loss = model(ids, pos, mask, labels=ids)
    assert torch.isfinite(loss).all()
    assert calls == [routers[n].routing_replay for n in decoder_names]


@pytest.mark.cpu
@pytest.mark.usefixtures("single_rank_moe")
def test_without_miles_routing_is_plain_topk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-regression (passes on the base too): without miles, routing is upstream's top-k."""
    drop_miles_modules()
    monkeypatch.setitem(sys.modules, "miles", None)  # `import miles...` raises ImportError
    router = _router()
    assert getattr(router, "routing_replay", None) is None
    hidden = _hidden()
    probs, routing_map = router(hidden)
    assert _topk_sets(routing_map) == _plain_topk(router, hidden)
    top_indices = torch.topk(probs, k=TOPK, dim=1).indices
    torch.testing.assert_close(probs, _expected_probs(router, hidden, top_indices))


@pytest.mark.cpu
def test_disabled_manager_registers_nothing(manager: Any) -> None:
    """Non-regression (passes on the base too, where nothing registers): a disabled manager
    leaves routers as they are."""
    manager.enabled = False
    router = _router()
    assert manager.replays == [] and getattr(router, "routing_replay", None) is None
    manager.enabled = True
    manager.stage = "replay_forward"  # a router built while disabled never replays
    hidden = _hidden()
    assert _topk_sets(router(hidden)[1]) == _plain_topk(router, hidden)


@pytest.mark.cpu
def test_fused_router_under_replay_replays_and_says_so(
    manager: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``moe_router_fusion``: TE's fused kernel selects experts itself, so a router registered
    for replay takes the unfused top-k (it records and replays exactly) and the log says so once
    (the previous patch turned fusion off silently). Without TE the fused kernel would raise
    here, which is what the next test checks for a router without replay."""
    import logging

    from megatron.core.transformer.moe import rollout_routing_replay

    rollout_routing_replay._warned_fusion = False
    with caplog.at_level(logging.WARNING):
        router = _router(moe_router_fusion=True)
        _router(moe_router_fusion=True)
    warnings = [r for r in caplog.records if "moe_router_fusion" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    hidden = _hidden()
    manager.stage = "record"
    _, recorded = router(hidden)
    with torch.no_grad():
        router.weight.neg_()
    manager.stage = "replay_forward"
    probs, routing_map = router(hidden)
    assert torch.equal(routing_map, recorded)
    torch.testing.assert_close(
        probs, _expected_probs(router, hidden, router.routing_replay.top_indices[0])
    )


@pytest.mark.cpu
@pytest.mark.usefixtures("single_rank_moe")
def test_fused_router_without_replay_stays_fused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Non-regression (also on the base and the previous patch): without miles the fused router
    is not turned off; here (no TE) its kernel is missing, so routing raises upstream's error."""
    drop_miles_modules()
    monkeypatch.setitem(sys.modules, "miles", None)
    router = _router(moe_router_fusion=True)
    with pytest.raises(ValueError, match="fused_topk_with_score_function is not available"):
        router(_hidden())


@pytest.mark.cpu
@pytest.mark.usefixtures("single_rank_moe")
def test_upstream_router_replay_still_works_without_miles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Upstream's own RouterReplay (``moe_enable_routing_replay``) is left in place, not deleted
    (upstream keeps editing it): without miles it records and replays as upstream's does. The
    previous patch deleted it (and the config flag), so this failed there."""
    from megatron.core.transformer.moe.router_replay import RouterReplay, RouterReplayAction

    drop_miles_modules()
    monkeypatch.setitem(sys.modules, "miles", None)
    RouterReplay.global_router_replay_instances.clear()
    try:
        router = _router(moe_enable_routing_replay=True)
        assert isinstance(router.router_replay, RouterReplay) and router.routing_replay is None
        hidden = _hidden()
        router.router_replay.set_router_replay_action(RouterReplayAction.RECORD)
        _, recorded = router(hidden)
        target = router.router_replay.get_recorded_indices()
        with torch.no_grad():
            router.weight.neg_()
        router.router_replay.set_target_indices(target)
        router.router_replay.set_router_replay_action(RouterReplayAction.REPLAY_FORWARD)
        assert torch.equal(router(hidden)[1], recorded)
    finally:
        RouterReplay.global_router_replay_instances.clear()
