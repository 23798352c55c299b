"""Patch routing-replay across ranks: rollout routing replay (R3) with expert parallelism, EP=2.

One process per rank (torchrun; NCCL on GPUs, gloo on CPUs for a dry run, see mgpu.py). Each rank
builds the same MoE layer (4 experts, top-2, ``allgather`` token dispatcher, EP=2: two local
experts per rank) while the test replay manager (``replay_pkg``, the contract of docs/series.md) is
enabled, and feeds it its own tokens. Rollout pass: stage ``record``. Then the router weights are
perturbed (negated, on every rank alike) so plain top-k would pick other experts, and the second
pass runs with stage ``replay_forward``. What this proves, on every rank:

- the replayed routing equals the recorded routing for this rank's tokens, and the global routing
  (all-gathered over the EP group) is identical on both ranks in both passes;
- the probabilities are recomputed from the perturbed logits for the replayed experts;
- the MoE output equals a dense reference computed from ALL experts' weights (all-gathered), the
  replayed experts and those probabilities: tokens really were processed by the replayed experts,
  including the experts that live on the other rank.

On the unpatched base routers never register with the manager (no replay API): the test fails by
assertion on both ranks alike (before any collective that could hang).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mgpu
import pytest
import torch
import torch.nn.functional as F
from shims import replay_manager_installed

pytestmark = [pytest.mark.multi_gpu]

NUM_EXPERTS = 4
TOPK = 2
HIDDEN = 16
FFN = 32
EP = 2



@pytest.fixture
def manager() -> Iterator[Any]:
    with mgpu.model_parallel(ep=EP), replay_manager_installed() as manager:
        yield manager


def _moe_layer() -> Any:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=1,
        hidden_size=HIDDEN,
        ffn_hidden_size=FFN,
        moe_ffn_hidden_size=FFN,
        num_attention_heads=4,
        num_moe_experts=NUM_EXPERTS,
        moe_router_topk=TOPK,
        moe_token_dispatcher_type="allgather",
        expert_model_parallel_size=EP,
        use_cpu_initialization=True,
        add_bias_linear=False,
        init_method_std=0.5,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        bf16=False,
        params_dtype=torch.float32,
    )
    spec = get_gpt_layer_local_spec(num_experts=NUM_EXPERTS, moe_grouped_gemm=False)
    torch.manual_seed(7)  # same router weights on every rank (the router is replicated)
    layer = build_module(spec.submodules.mlp, config=config, layer_number=1)
    return layer.to(mgpu.device())


def _all_expert_weights(layer: Any) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(fc1, fc2) weight of every global expert, gathered over the EP ranks, in expert order."""
    local = [
        torch.stack([e.linear_fc1.weight.detach() for e in layer.experts.local_experts]),
        torch.stack([e.linear_fc2.weight.detach() for e in layer.experts.local_experts]),
    ]
    fc1 = torch.cat(mgpu.all_gather_tensor(local[0]))
    fc2 = torch.cat(mgpu.all_gather_tensor(local[1]))
    return [(fc1[i], fc2[i]) for i in range(NUM_EXPERTS)]


def _dense_reference(
    tokens: torch.Tensor, probs: torch.Tensor, routing_map: torch.Tensor, experts: list[Any]
) -> torch.Tensor:
    out = torch.zeros_like(tokens)
    for e, (w1, w2) in enumerate(experts):
        rows = routing_map[:, e].nonzero().flatten()
        if rows.numel():
            y = F.linear(F.gelu(F.linear(tokens[rows], w1)), w2)
            out[rows] += probs[rows, e].unsqueeze(1) * y
    return out


def test_ep2_record_then_replay_routes_to_the_same_experts(manager: Any) -> None:
    layer = _moe_layer()
    router = layer.router
    assert layer.experts.num_local_experts == NUM_EXPERTS // EP
    registered = getattr(router, "routing_replay", None) is not None
    # Same on every rank (same tree), so asserting before any collective cannot hang a rank.
    assert registered, "the router did not register with the routing replay manager"

    routes: list[tuple[torch.Tensor, torch.Tensor]] = []
    router.register_forward_hook(lambda m, i, out: routes.append((out[0].detach(), out[1])))
    gen = torch.Generator().manual_seed(100 + mgpu.rank())  # each rank routes its own tokens
    hidden = torch.randn(6, 2, HIDDEN, generator=gen).to(mgpu.device())
    tokens = hidden.reshape(-1, HIDDEN)

    manager.stage = "record"
    with torch.no_grad():
        layer(hidden)
    _, recorded_map = routes[-1]
    recorded = router.routing_replay.top_indices

    with torch.no_grad():
        router.weight.neg_()  # perturbed logits: plain top-k now picks other experts
    logits = (tokens @ router.weight.detach().t()).float()
    plain = torch.zeros_like(recorded_map).scatter(
        1, torch.topk(torch.softmax(logits, -1), TOPK, dim=1).indices, True
    )

    manager.stage = "replay_forward"
    with torch.no_grad():
        output, _ = layer(hidden)
    probs, replayed_map = routes[-1]

    experts = _all_expert_weights(layer)
    global_recorded = mgpu.all_gather_tensor(recorded_map.to(torch.int64))
    global_replayed = mgpu.all_gather_tensor(replayed_map.to(torch.int64))
    ok_global = mgpu.all_ranks(
        all(torch.equal(a, b) for a, b in zip(global_recorded, global_replayed, strict=True))
    )

    assert len(recorded) == 1, "the router did not record during the rollout pass"
    assert not torch.equal(plain, recorded_map), "the perturbation did not change plain top-k"
    assert torch.equal(replayed_map, recorded_map), "replay did not route to the recorded experts"
    assert ok_global, "the global (EP-gathered) routing differs between passes on some rank"
    idx = recorded[0].to(logits.device).long()
    expected_probs = torch.zeros_like(logits).scatter(
        1, idx, torch.softmax(logits.gather(1, idx), dim=-1)
    )
    torch.testing.assert_close(probs.float(), expected_probs, rtol=1e-4, atol=1e-5)
    reference = _dense_reference(tokens, probs.float(), replayed_map, experts)
    torch.testing.assert_close(output.reshape(-1, HIDDEN), reference, rtol=1e-4, atol=1e-5)
