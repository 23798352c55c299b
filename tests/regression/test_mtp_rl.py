"""Patch mtp-rl: Multi-Token Prediction (MTP) trained in RL, isolated from the rest of the model.

In RL, miles calls ``model(ids, pos, mask, labels=None, mtp_kwargs={"mtp_labels": tokens})``,
computes its own loss from the logits and lets Megatron's MTP loss auto-scaler add the MTP loss.
What this proves, on a tiny local-spec GPT on the CPU (gloo, world size 1):

- default path (``default_path``, issue 24 fixes 1 and 2): with ``labels`` and no switch, MTP runs
  and trains trunk, embedding and head exactly as on the base tree: loss and every gradient are
  bit-identical to the base's (``default_path.mtp_pretrain``); round 2 detached for everyone and
  skipped MTP when only ``labels`` were given;
- the RL call (``labels=None``, ``mtp_kwargs["mtp_labels"]``) runs MTP (upstream crashed on
  ``labels.clone()`` at 1dcf0da);
- isolation is opt-in, with upstream's switch ``TransformerConfig.mtp_detach_heads``; with it:
- labels of MTP layer k are the input ids shifted left by k+2 and the loss mask is rolled the same
  way (its last positions masked), checked on a toy sequence through the loss actually added;
- after backward of the MTP loss alone, only MTP parameters have non-zero gradient: the output
  layer, the embedding and the decoder get none, with tied and untied embeddings, on the plain and
  the fused linear-cross-entropy paths (the fused kernel needs a Blackwell GPU, so on the CPU it
  is replaced by its pure-torch definition; the model code under test is unchanged);
- the main LM loss is never detached: its gradients on all non-MTP parameters are non-zero and
  identical with and without MTP running;
- the MTP block accepts ``position_ids=None`` (RoPE-style models pass none);
- under full activation recompute MTP still trains (its cut-off input stays a grad leaf) with the
  same gradients; with a deferred LM-head wgrad the frozen MTP head pass stashes nothing;
- (issue 16) the cut is only between the main model and the MTP block: with two MTP layers,
  layer 1's loss trains layer 0 (as upstream), and neither reaches decoder, embedding or head;
- (issue 16) pretrain_gpt's call (next-token ``labels`` and a mask aligned with them) keeps
  upstream's MTP targets and mask alignment: no valid target is dropped;
- (issue 16) the EP-overlap (all-to-all) schedule, run on the CPU with inert streams
  (``shims.cpu_a2a_schedule_shims``), gives MTP the same targets, loss and gradients as
  ``model.forward``: its post-process reads the input ids from before the MTP nodes rolled them.

On the unpatched base ``mtp_kwargs`` does not exist and the switch is ignored (set as a plain
attribute there, so the tests fail on their assertion: gradient leaks into the output layer,
embedding and decoder). Upstream names that moved by 3346fa8a2 are reached through ``compat``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from compat import mtp_inner_layer, mtp_loss_scaler_owner
from default_path import assert_identical, base_tree, run_probe
from shims import single_rank_gloo, tiny_batch, tiny_gpt, tiny_gpt_config  # noqa: F401 (fixture)

pytestmark = [pytest.mark.cpu]


@pytest.fixture(autouse=True)
def _distributed(request: pytest.FixtureRequest) -> Iterator[None]:
    """gloo world size 1 with the CPU shims; MoE tests (``single_rank_moe`` marker) add the
    TE-absent and router shims."""
    from shims import cpu_router_shims, single_rank_gloo_context, te_absent_shims

    if request.node.get_closest_marker("single_rank_moe"):
        with te_absent_shims(), single_rank_gloo_context(), cpu_router_shims():
            yield
    else:
        with single_rank_gloo_context():
            yield


VOCAB = 64
PATHS = [
    pytest.param(tie, fused, id=f"{'tied' if tie else 'untied'}-{'fused' if fused else 'plain'}")
    for tie in (True, False)
    for fused in (False, True)
]


def _reference_linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    labels: torch.Tensor,
    sequence_parallel: bool = False,
    reduction: str = "none",
    ignore_index: int = -100,
    tp_group: Any = None,
) -> torch.Tensor:
    """The fused kernel's definition (cross_entropy(hidden @ weight.T, labels)), in torch."""
    logits = hidden.reshape(-1, hidden.shape[-1]) @ weight.t()
    return F.cross_entropy(
        logits.float(), labels.reshape(-1), reduction=reduction, ignore_index=ignore_index
    )


@pytest.fixture
def fused_kernel_on_cpu(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[torch.Tensor]]:
    """Run the fused linear-cross-entropy path on the CPU; yields the labels it was given."""
    from megatron.core.transformer import linear_cross_entropy as lce

    seen: list[torch.Tensor] = []

    def kernel(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, **kw: Any) -> Any:
        seen.append(labels.detach().clone())
        return _reference_linear_cross_entropy(hidden, weight, labels, **kw)

    monkeypatch.setattr(lce, "linear_cross_entropy", kernel)
    yield seen


def _model(
    tie: bool, fused: bool = False, mtp_layers: int = 1, detach: bool = False, **kwargs: Any
) -> Any:
    """The tiny GPT; ``detach``: RL isolation (``mtp_detach_heads``, set as an attribute so that
    a tree without the field builds the same model and ignores it)."""
    extra: dict[str, Any] = {}
    if fused:
        extra = {"cross_entropy_loss_fusion": True, "cross_entropy_fusion_impl": "linear"}
    config = tiny_gpt_config(mtp_num_layers=mtp_layers, **extra)
    config.mtp_detach_heads = detach
    model = tiny_gpt(config, tie_embeddings=tie, vocab_size=VOCAB, **kwargs)
    assert model.fuse_linear_cross_entropy == fused
    return model


def _count_mtp_calls(model: Any) -> list[int]:
    calls = [0]
    model.mtp.register_forward_pre_hook(lambda *args: calls.__setitem__(0, calls[0] + 1))
    return calls


def _groups(model: Any) -> dict[str, list[tuple[str, torch.nn.Parameter]]]:
    groups: dict[str, list[tuple[str, torch.nn.Parameter]]] = {
        "mtp": [],
        "output_layer": [],
        "embedding": [],
        "decoder": [],
    }
    for name, param in model.named_parameters():
        groups[name.split(".", 1)[0]].append((name, param))
    return groups


def _grad_norm(params: list[tuple[str, torch.nn.Parameter]]) -> float:
    return float(sum(p.grad.abs().sum() for _, p in params if p.grad is not None))


@pytest.mark.default_path
def test_default_path_equals_the_base_tree(tmp_path: Any) -> None:
    """Fixes 1 and 2 of issue 24: pretraining with ``--mtp-num-layers`` and no switch (and any
    caller passing ``labels`` without ``mtp_kwargs``) trains exactly as upstream: loss, MTP-only
    gradient and full gradient of every parameter are identical to the base tree's (round 2:
    decoder, embedding and head got no MTP gradient; labels alone ran no MTP)."""
    import os
    from pathlib import Path

    base = base_tree()
    ours = run_probe(Path(os.environ["REBASECTL_TEST_TREE"]), "mtp_pretrain", tmp_path / "a.pt")
    assert ours["untied-mtp/decoder.layers.0.mlp.linear_fc1.weight"].abs().sum() > 0
    assert_identical(ours, run_probe(base, "mtp_pretrain", tmp_path / "b.pt"))


def test_labels_alone_run_mtp_and_train_the_trunk() -> None:
    """Fixes 1 and 2 of issue 24, without a base tree at hand: ``labels`` alone run MTP, and
    without the switch the MTP loss trains decoder, embedding and the untied head."""
    model = _model(tie=False)
    calls = _count_mtp_calls(model)
    groups = _groups(model)
    _backward_mtp_loss_only(model, with_labels=True, rl_kwargs=False)
    assert calls[0] == 1, "labels alone did not run MTP"
    for group in ("mtp", "output_layer", "embedding", "decoder"):
        assert _grad_norm(groups[group]) > 0, f"the MTP loss did not train {group}"


def test_rl_call_runs_mtp() -> None:
    model = _model(tie=True)
    calls = _count_mtp_calls(model)
    ids, pos, mask = tiny_batch(vocab_size=VOCAB)
    logits_mtp = model(ids, pos, mask, labels=None, mtp_kwargs={"mtp_labels": ids})
    assert calls[0] == 1
    assert logits_mtp.shape == (*ids.shape, VOCAB)


def test_mtp_position_ids_may_be_none() -> None:
    model = _model(tie=True, position_embedding_type="none")
    calls = _count_mtp_calls(model)
    ids, _, mask = tiny_batch(vocab_size=VOCAB)
    logits = model(ids, None, mask, mtp_kwargs={"mtp_labels": ids})
    assert calls[0] == 1
    assert logits.shape == (*ids.shape, VOCAB)


def _shift(t: torch.Tensor, k: int) -> torch.Tensor:
    """t shifted left by k along the sequence, zero-filled at the end (what roll_tensor does)."""
    out = torch.zeros_like(t)
    out[:, : t.shape[1] - k] = t[:, k:]
    return out


def test_label_and_loss_mask_alignment(monkeypatch: pytest.MonkeyPatch) -> None:
    scaler = mtp_loss_scaler_owner().MTPLossAutoScaler

    num_layers, seq = 2, 8
    model = _model(tie=False, mtp_layers=num_layers)
    tokens = torch.stack([torch.arange(1, seq + 1), torch.arange(11, seq + 11)])
    pos = torch.arange(seq).expand(2, seq).contiguous()
    _, _, mask = tiny_batch(seq_len=seq, vocab_size=VOCAB)
    loss_mask = torch.tensor([[1, 1, 1, 1, 0, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1, 1]]).float()

    # Spy (calling through) on the per-token loss and on what reaches the MTP auto-scaler.
    ce_calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    original_ce = model.compute_language_model_loss

    def compute_loss(labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        out = original_ce(labels, logits)
        ce_calls.append((labels.detach().clone(), out.detach().clone()))
        return out

    monkeypatch.setattr(model, "compute_language_model_loss", compute_loss)
    added: list[torch.Tensor] = []
    original_apply = scaler.apply

    def apply(hidden: torch.Tensor, mtp_loss: torch.Tensor) -> torch.Tensor:
        added.append(mtp_loss.detach().clone())
        return original_apply(hidden, mtp_loss)

    monkeypatch.setattr(scaler, "apply", staticmethod(apply))

    model(tokens, pos, mask, loss_mask=loss_mask, mtp_kwargs={"mtp_labels": tokens})

    assert len(ce_calls) == num_layers and len(added) == num_layers
    scale = model.config.mtp_loss_scaling_factor / num_layers
    for k in range(num_layers):
        labels_k, per_token = ce_calls[k]
        expected_labels = _shift(tokens, k + 2)
        valid = _shift(torch.ones_like(tokens), k + 2).bool()
        assert torch.equal(labels_k[valid], expected_labels[valid]), f"MTP layer {k} labels"
        mask_k = _shift(loss_mask, k + 2)
        assert not mask_k[:, seq - k - 2 :].any(), "last positions must be masked out"
        expected = scale * mask_k * per_token / mask_k.sum()
        torch.testing.assert_close(added[k], expected, rtol=1e-5, atol=1e-7)


def test_fused_path_gets_shifted_labels(fused_kernel_on_cpu: list[torch.Tensor]) -> None:
    model = _model(tie=True, fused=True)
    tokens = torch.arange(1, 9).expand(2, 8).contiguous()
    pos = torch.arange(8).expand(2, 8).contiguous()
    _, _, mask = tiny_batch(seq_len=8, vocab_size=VOCAB)
    model(tokens, pos, mask, mtp_kwargs={"mtp_labels": tokens})
    assert len(fused_kernel_on_cpu) == 1
    labels = fused_kernel_on_cpu[0].transpose(0, 1)  # the kernel sees [s, b]
    assert torch.equal(labels[:, :6], tokens[:, 2:])


def _backward_mtp_loss_only(model: Any, with_labels: bool, rl_kwargs: bool = True) -> None:
    ids, pos, mask = tiny_batch(vocab_size=VOCAB, seed=3)
    kwargs = {"mtp_kwargs": {"mtp_labels": ids}} if rl_kwargs else {}
    out = model(ids, pos, mask, labels=ids if with_labels else None, **kwargs)
    # Zero main loss: whatever gradient arrives comes from the MTP loss via the auto-scaler.
    (out.float() * 0.0).sum().backward()


@pytest.mark.parametrize("with_labels", [False, True], ids=["logits", "labels"])
@pytest.mark.parametrize(("tie", "fused"), PATHS)
def test_mtp_loss_trains_only_mtp(
    fused_kernel_on_cpu: list[torch.Tensor], tie: bool, fused: bool, with_labels: bool
) -> None:
    model = _model(tie=tie, fused=fused, detach=True)
    groups = _groups(model)
    assert bool(groups["output_layer"]) != tie  # untied: the LM head has its own weight
    _backward_mtp_loss_only(model, with_labels)

    mtp_layer = model.mtp.layers[0]
    for name in ("eh_proj", "final_layernorm", "enorm", "hnorm"):
        assert _grad_norm(list(getattr(mtp_layer, name).named_parameters())) > 0, name
    assert _grad_norm(list(mtp_inner_layer(mtp_layer).named_parameters())) > 0
    for group in ("output_layer", "embedding", "decoder"):
        leaked = [n for n, p in groups[group] if p.grad is not None and p.grad.abs().sum() > 0]
        assert not leaked, f"MTP loss trained {group}: {leaked}"


def _mtp_on(model: Any, ids: torch.Tensor) -> dict[str, Any]:
    """The call that switches MTP on: miles' ``mtp_kwargs`` where GPTModel has it, upstream's
    ``labels`` on a tree without it. So the test below runs the model on the base too and fails
    there on its assertion (MTP gradient in the main model), not on a TypeError."""
    if "mtp_kwargs" in inspect.signature(type(model).forward).parameters:
        return {"labels": None, "mtp_kwargs": {"mtp_labels": ids}}
    return {"labels": ids}


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_mtp_loss_reaches_no_main_model_parameter(tie: bool) -> None:
    """The RL invariant, with whichever call the tree has: after backward of the MTP loss alone
    only MTP parameters have gradient (on the base MTP trains the head, embedding and decoder)."""
    model = _model(tie=tie, detach=True)
    groups = _groups(model)
    ids, pos, mask = tiny_batch(vocab_size=VOCAB, seed=5)
    out = model(ids, pos, mask, **_mtp_on(model, ids))
    (out.float() * 0.0).sum().backward()
    assert _grad_norm(groups["mtp"]) > 0
    for group in ("output_layer", "embedding", "decoder"):
        leaked = [n for n, p in groups[group] if p.grad is not None and p.grad.abs().sum() > 0]
        assert not leaked, f"MTP loss trained {group}: {leaked}"


@pytest.mark.parametrize("with_labels", [False, True], ids=["logits", "labels"])
@pytest.mark.parametrize(("tie", "fused"), PATHS)
def test_main_loss_never_detached(
    fused_kernel_on_cpu: list[torch.Tensor], tie: bool, fused: bool, with_labels: bool
) -> None:
    """The main loss trains the LM head exactly as its definition says, with MTP running; and
    MTP running changes no gradient of a non-MTP parameter."""
    ids, pos, mask = tiny_batch(vocab_size=VOCAB, seed=5)
    head_name = "embedding.word_embeddings.weight" if tie else "output_layer.weight"

    def run(mtp: bool) -> tuple[Any, torch.Tensor]:
        model = _model(tie=tie, fused=fused, detach=True)  # same seed: same weights
        if not mtp:  # the reference: MTP runs (a logits-only call without it crashes at
            model.config.mtp_loss_scaling_factor = 0.0  # 1dcf0da, as upstream) but adds 0
        final_hidden: list[torch.Tensor] = []
        model.decoder.register_forward_hook(lambda m, i, out: final_hidden.append(out))
        kwargs: dict[str, Any] = {"mtp_kwargs": {"mtp_labels": ids}}
        if with_labels:
            loss = model(ids, pos, mask, labels=ids, **kwargs).sum()
        else:  # the RL way: the caller computes the loss from the logits
            logits = model(ids, pos, mask, **kwargs)
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1), reduction="sum")
        loss.backward()
        return model, final_hidden[0]

    model, hidden = run(mtp=True)
    params = dict(model.named_parameters())

    # Head gradient by definition: d/dW sum CE(h W^T, labels), h the decoder output [s, b, h].
    head = params[head_name].detach().clone().requires_grad_()
    logits = hidden.detach() @ head.t()
    expected = torch.autograd.grad(
        F.cross_entropy(logits.reshape(-1, VOCAB), ids.t().reshape(-1), reduction="sum"), head
    )[0]
    grad = params[head_name].grad
    assert grad is not None, "main loss did not reach the LM head"
    if tie:
        # The input embedding also trains these weights, but only the rows of tokens it saw.
        unseen = torch.ones(VOCAB, dtype=torch.bool)
        unseen[ids.unique()] = False
        assert unseen.any()
        torch.testing.assert_close(grad[unseen], expected[unseen], rtol=1e-4, atol=1e-6)
    else:
        torch.testing.assert_close(grad, expected, rtol=1e-4, atol=1e-6)

    reference, _ = run(mtp=False)
    for name, ref in reference.named_parameters():
        if name.startswith("mtp."):
            continue
        assert ref.grad is not None and ref.grad.abs().sum() > 0, name
        torch.testing.assert_close(params[name].grad, ref.grad, msg=name)


@pytest.fixture
def cpu_checkpointing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Activation recompute on the CPU: no CUDA RNG state to save and restore."""
    from megatron.core.tensor_parallel import random as tp_random

    monkeypatch.setattr(tp_random, "_get_cuda_rng_state", lambda *args, **kwargs: None)
    monkeypatch.setattr(tp_random, "_set_cuda_rng_state", lambda *args, **kwargs: None)


@pytest.mark.usefixtures("cpu_checkpointing")
def test_mtp_trains_under_activation_recompute() -> None:
    """Under full recompute the MTP layer still trains, exactly as without, and alone."""

    def mtp_grads(recompute: bool) -> dict[str, torch.Tensor]:
        extra: dict[str, Any] = {}
        if recompute:
            extra = {
                "recompute_granularity": "full",
                "recompute_method": "uniform",
                "recompute_num_layers": 1,
            }
        config = tiny_gpt_config(mtp_num_layers=1, **extra)
        config.mtp_detach_heads = True
        model = tiny_gpt(config, vocab_size=VOCAB)
        model.train()
        _backward_mtp_loss_only(model, with_labels=False)
        grads = {}
        for name, param in model.named_parameters():
            if name.startswith("mtp."):
                assert param.grad is not None, name
                grads[name] = param.grad.clone()
            else:
                assert param.grad is None or not param.grad.abs().sum() > 0, name
        return grads

    plain, recomputed = mtp_grads(recompute=False), mtp_grads(recompute=True)
    assert sum(g.abs().sum() for g in recomputed.values()) > 0
    for name, grad in plain.items():
        torch.testing.assert_close(recomputed[name], grad, msg=name)


def test_deferred_embedding_wgrad_skips_mtp() -> None:
    """With a deferred LM-head wgrad (PP > 1 runs), the MTP pass, whose head weight is frozen,
    neither stashes an activation nor trips the frozen-weight linear over the grad buffer."""
    import copy

    model = _model(tie=False, detach=True)
    config = copy.copy(model.output_layer.config)  # only the LM head defers
    config.defer_embedding_wgrad_compute = True
    activations: list[torch.Tensor] = []
    model.output_layer.config = config
    model.embedding_activation_buffer = model.output_layer.embedding_activation_buffer = activations
    model.grad_output_buffer = model.output_layer.grad_output_buffer = []

    ids, pos, mask = tiny_batch(vocab_size=VOCAB)
    model(ids, pos, mask, labels=ids, mtp_kwargs={"mtp_labels": ids})
    assert len(activations) == 1, "only the main LM head pass may stash its input"
    assert config.defer_embedding_wgrad_compute


# --------------------------------------------------------------- issue 16: defects 2, 3 and 4


def _spy_mtp_losses(monkeypatch: pytest.MonkeyPatch, model: Any) -> tuple[list, list]:
    """Calls through; records (labels, per-token loss) of every CE and every loss handed to the
    MTP auto-scaler (graph attached, so its gradient can be taken)."""
    scaler = mtp_loss_scaler_owner().MTPLossAutoScaler

    ce_calls: list[tuple[torch.Tensor, torch.Tensor]] = []
    original_ce = model.compute_language_model_loss

    def compute_loss(labels: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        out = original_ce(labels, logits)
        ce_calls.append((labels.detach().clone(), out.detach().clone()))
        return out

    monkeypatch.setattr(model, "compute_language_model_loss", compute_loss)
    added: list[torch.Tensor] = []
    original_apply = scaler.apply

    def apply(hidden: torch.Tensor, mtp_loss: torch.Tensor) -> torch.Tensor:
        added.append(mtp_loss)
        return original_apply(hidden, mtp_loss)

    monkeypatch.setattr(scaler, "apply", staticmethod(apply))
    return ce_calls, added


def test_pretrain_call_keeps_upstream_targets_and_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 3 of issue 16. pretrain_gpt passes next-token ``labels`` and a loss mask aligned
    with them (plus ``mtp_kwargs`` to switch MTP on). MTP layer k must use upstream's targets
    (labels shifted by k+1, i.e. text[i+k+2], which the labels hold up to the last position) and
    the mask shifted exactly as they are: for a mask with a zero at 3, layer 0 masks [2, 7] as
    on the base. The previous patch took the targets from the input ids and rolled the
    label-aligned mask once more: [1, 6, 7] masked, one valid target per sequence lost."""
    num_layers, seq = 2, 8
    model = _model(tie=False, mtp_layers=num_layers)
    text = torch.stack([torch.arange(1, seq + 2), torch.arange(21, seq + 22)])  # s + 1 tokens
    tokens, labels = text[:, :-1].contiguous(), text[:, 1:].contiguous()
    pos = torch.arange(seq).expand(2, seq).contiguous()
    _, _, mask = tiny_batch(seq_len=seq, vocab_size=VOCAB)
    loss_mask = torch.ones(2, seq)
    loss_mask[0, 3] = 0.0
    ce_calls, added = _spy_mtp_losses(monkeypatch, model)

    model(tokens, pos, mask, labels=labels, loss_mask=loss_mask)

    assert len(added) == num_layers and len(ce_calls) == num_layers + 1  # + the main LM loss
    for k in range(num_layers):
        targets, _ = ce_calls[k]
        mask_k = _shift(loss_mask, k + 1)
        valid = mask_k.bool()
        # Every target upstream trains on is there: positions 0 .. s-k-2 minus the masked ones.
        assert valid[1].sum() == seq - k - 1, f"layer {k}: a valid target was dropped"
        expected = _shift(text[:, 1:], k + 1)  # labels shifted by k+1 == text[i+k+2]
        assert torch.equal(targets[valid], expected[valid]), f"MTP layer {k} targets"
        zeroed = (added[k].detach()[0] == 0).nonzero().flatten().tolist()
        assert zeroed == (mask_k[0] == 0).nonzero().flatten().tolist(), f"layer {k} mask"
    assert (_shift(loss_mask, 1)[0] == 0).nonzero().flatten().tolist() == [2, 7]


@pytest.mark.parametrize(("tie", "fused"), PATHS)
def test_later_mtp_layers_train_earlier_ones(
    monkeypatch: pytest.MonkeyPatch, fused_kernel_on_cpu: list, tie: bool, fused: bool
) -> None:
    """Defect 4 of issue 16: with two MTP layers, layer 1's loss must train layer 0 (as upstream
    does: 2.84 there, 0.0 with the previous patch, which cut the graph before every MTP layer);
    only the cut between the main model and the MTP block stays, so neither loss reaches the
    decoder, the embedding or the output layer."""
    model = _model(tie=tie, fused=fused, mtp_layers=2, detach=True)
    _, added = _spy_mtp_losses(monkeypatch, model)
    ids, pos, mask = tiny_batch(vocab_size=VOCAB, seed=7)
    model(ids, pos, mask, mtp_kwargs={"mtp_labels": ids})
    assert len(added) == 2
    groups = _groups(model)
    layer0 = list(model.mtp.layers[0].named_parameters())
    layer1 = list(model.mtp.layers[1].named_parameters())
    main = groups["decoder"] + groups["embedding"] + groups["output_layer"]

    named = {"layer0": layer0, "layer1": layer1, "main": main}
    # One gradient per loss (Megatron's cross entropy backward works in place: once per graph).
    norms = []
    for k in range(2):
        params = [p for group in named.values() for _, p in group]
        grads = iter(
            torch.autograd.grad(added[k].sum(), params, retain_graph=True, allow_unused=True)
        )
        norms.append(
            {
                name: float(
                    sum(g.abs().sum() for g in (next(grads) for _ in group) if g is not None)
                )
                for name, group in named.items()
            }
        )
    assert norms[1]["layer0"] > 0, f"MTP layer 1's loss does not train MTP layer 0: {norms}"
    assert norms[1]["layer1"] > 0 and norms[0]["layer0"] > 0
    assert norms[0]["layer1"] == 0.0  # layer 0's loss never reaches a later layer
    for k in range(2):
        assert norms[k]["main"] == 0.0, f"MTP loss {k} trained the main model: {norms}"


def _a2a_moe_model(mtp_layers: int = 1) -> Any:
    config = tiny_gpt_config(
        num_moe_experts=4,
        moe_router_topk=2,
        mtp_num_layers=mtp_layers,
        add_bias_linear=False,
        moe_token_dispatcher_type="alltoall",
    )
    model = tiny_gpt(config, spec_kwargs={"num_experts": 4, "moe_grouped_gemm": False}, seed=3)
    model.config.overlap_moe_expert_parallel_comm = True  # see shims.cpu_a2a_schedule_shims
    return model


@pytest.mark.single_rank_moe
def test_ep_overlap_schedule_trains_mtp_like_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defect 2 of issue 16: the EP-overlap (all-to-all) schedule runs the MTP layers as nodes
    that roll ``chunk_state.input_ids``; the post-process then read the rolled ids as MTP labels,
    so MTP layer 0 trained on token i+3 instead of i+2. RL call (``labels=None``): through the
    schedule, MTP's targets, its loss and every gradient equal those of ``model.forward``."""
    from megatron.core.models.common.model_chunk_schedule_plan import (
        TransformerModelChunkSchedulePlan,
    )
    from shims import cpu_a2a_schedule_shims

    ids, pos, mask = tiny_batch(vocab_size=VOCAB, seed=11)
    grad_out = torch.randn(2, 8, VOCAB, generator=torch.Generator().manual_seed(12))

    def run(schedule: bool) -> tuple[Any, list, list]:
        # Both runs under the shims: the alltoall dispatcher itself makes a (D2H) CUDA stream.
        with monkeypatch.context() as mp, cpu_a2a_schedule_shims():
            model = _a2a_moe_model()
            ce_calls, added = _spy_mtp_losses(mp, model)
            if schedule:
                plan = model.build_schedule_plan(ids, pos, mask, labels=None)
                logits = TransformerModelChunkSchedulePlan.run(plan, None)
                TransformerModelChunkSchedulePlan.run(None, plan, b_grad=grad_out)
            else:
                logits = model(ids, pos, mask, mtp_kwargs={"mtp_labels": ids})
                logits.backward(grad_out)
        return model, ce_calls, [a.detach() for a in added]

    ref_model, ref_ce, ref_added = run(schedule=False)
    model, ce, added = run(schedule=True)
    assert len(ce) == len(ref_ce) == 1 and len(added) == 1
    valid = _shift(torch.ones_like(ids), 2).bool()
    assert torch.equal(ce[0][0][valid], _shift(ids, 2)[valid]), "MTP targets are not i+2"
    assert torch.equal(ref_ce[0][0][valid], _shift(ids, 2)[valid])
    torch.testing.assert_close(added[0], ref_added[0])
    ref_params = dict(ref_model.named_parameters())
    for name, param in model.named_parameters():
        ref = ref_params[name].grad
        assert (param.grad is None) == (ref is None), name
        if ref is not None:
            torch.testing.assert_close(param.grad, ref, msg=name, rtol=1e-4, atol=1e-6)
