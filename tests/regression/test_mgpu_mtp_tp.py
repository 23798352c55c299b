"""Patch mtp-rl across ranks: MTP training in RL with tensor parallelism, TP=2.

One process per rank (torchrun; NCCL on GPUs, gloo on CPUs for a dry run, see mgpu.py). Both ranks
build the tiny local-spec GPT of ``shims.py`` with one MTP layer and TP=2 (attention heads, MLP and
the vocabulary split over the ranks; ``use_cpu_initialization`` makes each rank's weights slices of
the same master weights as a TP=1 model with the same seed), and run it the way miles does:
``model(ids, pos, mask, labels=None, mtp_kwargs={"mtp_labels": ids})`` with a zero main loss, so
all gradient comes from the MTP loss through Megatron's MTP loss auto-scaler. What this proves:

- after backward of the MTP loss alone, on every rank only MTP parameters have gradient: the
  (vocab-parallel) output layer, the embedding and the decoder get none, with tied and untied
  embeddings; the MTP layer's own parameters do get gradient;
- results match across ranks: the MTP loss that reaches the auto-scaler is the same on both TP
  ranks, and so are the gradients of the parameters both ranks hold whole (the MTP norms);
- the TP=2 MTP loss equals the one of a TP=1 model with the same weights (built on each rank).

On the unpatched base ``mtp_kwargs`` does not exist (TypeError on every rank alike), and MTP run
through ``labels`` leaks gradient into the output layer, embedding and decoder.
"""

from __future__ import annotations

from typing import Any

import mgpu
import pytest
import torch

pytestmark = [pytest.mark.multi_gpu]

VOCAB = 64
TP = 2


def _mtp_loss_pass(tp: int, tie: bool) -> tuple[Any, list[torch.Tensor]]:
    """Build the tiny MTP GPT under TP=``tp``, backward the MTP loss alone; (model, MTP losses)."""
    from megatron.core.models.gpt import gpt_model
    from shims import tiny_batch, tiny_gpt, tiny_gpt_config

    config = tiny_gpt_config(mtp_num_layers=1, tensor_model_parallel_size=tp)
    model = tiny_gpt(config, tie_embeddings=tie, vocab_size=VOCAB, seed=0).to(mgpu.device())
    ids, pos, mask = (t.to(mgpu.device()) for t in tiny_batch(vocab_size=VOCAB, seed=3))

    added: list[torch.Tensor] = []
    original_apply = gpt_model.MTPLossAutoScaler.apply

    def apply(hidden: torch.Tensor, mtp_loss: torch.Tensor) -> torch.Tensor:
        added.append(mtp_loss.detach().float().sum().cpu())
        return original_apply(hidden, mtp_loss)

    gpt_model.MTPLossAutoScaler.apply = staticmethod(apply)  # type: ignore[method-assign]
    try:
        out = model(ids, pos, mask, labels=None, mtp_kwargs={"mtp_labels": ids})
        (out.float() * 0.0).sum().backward()
    finally:
        gpt_model.MTPLossAutoScaler.apply = original_apply  # type: ignore[method-assign]
    return model, added


def _leaks(model: Any) -> list[str]:
    return [
        n
        for n, p in model.named_parameters()
        if not n.startswith("mtp.") and p.grad is not None and bool(p.grad.abs().sum() > 0)
    ]


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_tp2_mtp_loss_trains_only_mtp_and_ranks_agree(tie: bool) -> None:
    with mgpu.model_parallel():
        _, reference = _mtp_loss_pass(1, tie)
    with mgpu.model_parallel(tp=TP):
        model, added = _mtp_loss_pass(TP, tie)
        leaked = _leaks(model)
        norms = {
            n: p.grad.detach().cpu().clone()
            for n, p in model.named_parameters()
            if n.startswith("mtp.") and "norm" in n and p.grad is not None
        }
        mtp_trained = sum(
            float(p.grad.abs().sum())
            for n, p in model.named_parameters()
            if n.startswith("mtp.") and p.grad is not None
        )
        losses = mgpu.all_gather_object([float(x) for x in added])
        all_norms = mgpu.all_gather_object(norms)
        ok = mgpu.all_ranks(not leaked)

    assert len(added) == 1, "the MTP loss did not reach the auto-scaler"
    assert not leaked, f"MTP loss trained non-MTP parameters on rank {mgpu.rank()}: {leaked}"
    assert ok, "MTP loss trained non-MTP parameters on another rank"
    assert mtp_trained > 0, "the MTP layer got no gradient"
    assert losses[0] == pytest.approx(losses[1], rel=1e-6), f"ranks disagree: {losses}"
    assert norms, "no replicated MTP norm parameters found"
    for name, grad in all_norms[0].items():
        torch.testing.assert_close(all_norms[1][name], grad, msg=name)
    assert [float(x) for x in added] == pytest.approx([float(x) for x in reference], rel=1e-5)
