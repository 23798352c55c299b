"""Patch post-layernorm: optional post-attention and post-MLP layernorm ("sandwich norm").

What this proves, on a tiny local-spec (no TE) transformer on the CPU:

- with both flags off nothing changes: a layer computes h = x + Attn(LN(x)), out = h + MLP(LN(h)),
  and builds no post norms;
- with the flags on, a layer computes h = x + N1(Attn(LN(x))), out = h + N2(MLP(LN(h))) (each flag
  also on its own), with randomised norm weights and biases so an identity-like norm cannot pass,
  and N1 / N2 receive gradient;
- the local spec builder (MLA and non-MLA branches, LayerNorm and RMSNorm) and the TE spec builder
  (both of its separate inline MLA / non-MLA specs) insert the norms; the block spec built from a
  TransformerConfig with the fields set does too, so a model built from the config gets them;
- ``--post-self-attn-layernorm`` / ``--post-mlp-layernorm`` parsed by megatron.training.arguments
  (whose CLI is generated from TransformerConfig at 1dcf0da) end up in the TransformerConfig;
- gpt_builders (the builder pretrain_gpt and miles use) gives the norms to the model on its layer
  spec (local and TE), MoE block spec and MTP paths;
- a layer whose config asks for a norm its spec does not have (spec builders without the feature:
  heterogeneous, experimental attention, inference, custom ``--spec``) refuses to build instead of
  silently training without it.

On the unpatched base the config fields, spec arguments and CLI flags do not exist, so these fail.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest
import torch
from shims import causal_mask, single_rank_gloo, tiny_gpt_config  # noqa: F401 (fixture)

pytestmark = pytest.mark.cpu

SEQ, BATCH, HIDDEN = 6, 2, 32


def _randomise(module: torch.nn.Module, seed: int) -> None:
    """Give a norm weights/biases far from the identity-like init (1, 0)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=gen) * 0.7 + 0.3)


def _build_layer(config: Any, **spec_kwargs: Any) -> Any:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module

    torch.manual_seed(0)
    spec = get_gpt_layer_local_spec(normalization=config.normalization, **spec_kwargs)
    layer = build_module(spec, config=config, layer_number=1)
    layer.eval()
    return layer


def _sum(output_with_bias: tuple[torch.Tensor, torch.Tensor | None]) -> torch.Tensor:
    out, bias = output_with_bias
    return out if bias is None else out + bias


def _reference(
    layer: Any, x: torch.Tensor, mask: torch.Tensor, post_attn: bool, post_mlp: bool
) -> torch.Tensor:
    """The sandwich-norm formula, computed from the layer's own submodules."""
    attn = _sum(layer.self_attention(layer.input_layernorm(x), attention_mask=mask))
    h = x + (layer.post_self_attn_layernorm(attn) if post_attn else attn)
    mlp = _sum(layer.mlp(layer.pre_mlp_layernorm(h)))
    return h + (layer.post_mlp_layernorm(mlp) if post_mlp else mlp)


def _input(seed: int = 1) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(SEQ, BATCH, HIDDEN, generator=gen)


def test_config_fields_default_off() -> None:
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(num_layers=1, hidden_size=HIDDEN, num_attention_heads=4)
    assert config.post_self_attn_layernorm is False
    assert config.post_mlp_layernorm is False


@pytest.mark.usefixtures("single_rank_gloo")
def test_defaults_change_nothing() -> None:
    from megatron.core.transformer.identity_op import IdentityOp

    config = tiny_gpt_config(num_layers=1)
    layer = _build_layer(config)
    x, mask = _input(), causal_mask(SEQ)
    with torch.no_grad():
        out, _ = layer(x, attention_mask=mask)
        ref = _reference(layer, x, mask, post_attn=False, post_mlp=False)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert not any("post_" in name for name, _ in layer.named_parameters())
    assert isinstance(layer.post_self_attn_layernorm, IdentityOp)
    assert isinstance(layer.post_mlp_layernorm, IdentityOp)


@pytest.mark.usefixtures("single_rank_gloo")
@pytest.mark.parametrize("normalization", ["LayerNorm", "RMSNorm"])
@pytest.mark.parametrize(("post_attn", "post_mlp"), [(True, True), (True, False), (False, True)])
def test_sandwich_norm_formula(normalization: str, post_attn: bool, post_mlp: bool) -> None:
    config = tiny_gpt_config(num_layers=1, normalization=normalization)
    layer = _build_layer(config, post_self_attn_layernorm=post_attn, post_mlp_layernorm=post_mlp)
    for seed, name in enumerate(("post_self_attn_layernorm", "post_mlp_layernorm")):
        norm = getattr(layer, name)
        has_params = any(True for _ in norm.parameters())
        assert has_params == (post_attn if seed == 0 else post_mlp), name
        _randomise(norm, seed + 10)

    x, mask = _input(), causal_mask(SEQ)
    with torch.no_grad():
        out, _ = layer(x, attention_mask=mask)
        ref = _reference(layer, x, mask, post_attn, post_mlp)
        plain = _reference(layer, x, mask, post_attn=False, post_mlp=False)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(out, plain, atol=1e-3), "the post norms had no effect"

    # The norms train: gradient reaches their weights.
    layer.train()
    out, _ = layer(x, attention_mask=mask)
    out.square().sum().backward()
    for name, flag in (("post_self_attn_layernorm", post_attn), ("post_mlp_layernorm", post_mlp)):
        if flag:
            grad = getattr(layer, name).weight.grad
            assert grad is not None and grad.abs().sum() > 0, name


@pytest.mark.parametrize("multi_latent_attention", [False, True])
@pytest.mark.parametrize("normalization", ["LayerNorm", "RMSNorm"])
def test_local_spec_inserts_norms(multi_latent_attention: bool, normalization: str) -> None:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.identity_op import IdentityOp

    off = get_gpt_layer_local_spec(
        multi_latent_attention=multi_latent_attention, normalization=normalization
    ).submodules
    assert off.post_self_attn_layernorm is IdentityOp
    assert off.post_mlp_layernorm is IdentityOp

    on = get_gpt_layer_local_spec(
        multi_latent_attention=multi_latent_attention,
        normalization=normalization,
        post_self_attn_layernorm=True,
        post_mlp_layernorm=True,
    ).submodules
    # Same norm type as the layer's other norms (LayerNorm or RMSNorm).
    assert on.post_self_attn_layernorm == on.input_layernorm
    assert on.post_mlp_layernorm == on.input_layernorm
    assert on.post_self_attn_layernorm is not IdentityOp


class _SpecOnlyProvider:
    """Stands in for TESpecProvider when TE is absent: the spec builder only asks it for module
    classes (no module is built here), and this answers with the local ones. What is under test is
    where the builder puts the post norms, not TE's modules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from megatron.core.models.backends import LocalSpecProvider

        self._local = LocalSpecProvider()

    def linear(self) -> Any:
        return self._local.column_parallel_linear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)


@pytest.mark.parametrize("multi_latent_attention", [False, True])
def test_te_spec_inserts_norms_in_both_branches(
    monkeypatch: pytest.MonkeyPatch, multi_latent_attention: bool
) -> None:
    from megatron.core.models.gpt import gpt_layer_specs
    from megatron.core.transformer.identity_op import IdentityOp

    if not gpt_layer_specs.HAVE_TE:
        monkeypatch.setattr(gpt_layer_specs, "TESpecProvider", _SpecOnlyProvider, raising=False)
    build = gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec

    off = build(multi_latent_attention=multi_latent_attention).submodules
    assert off.post_self_attn_layernorm is IdentityOp
    assert off.post_mlp_layernorm is IdentityOp
    on = build(
        multi_latent_attention=multi_latent_attention,
        post_self_attn_layernorm=True,
        post_mlp_layernorm=True,
    ).submodules
    assert on.post_self_attn_layernorm is not IdentityOp
    assert on.post_mlp_layernorm is not IdentityOp


@pytest.mark.usefixtures("single_rank_gloo")
def test_model_from_config_gets_norms() -> None:
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.models.gpt.gpt_model import GPTModel

    config = tiny_gpt_config(post_self_attn_layernorm=True, post_mlp_layernorm=True)
    spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False)
    torch.manual_seed(0)
    model = GPTModel(config, spec, vocab_size=64, max_sequence_length=16)
    names = {name for name, _ in model.named_parameters()}
    for i in range(config.num_layers):
        for norm in ("post_self_attn_layernorm", "post_mlp_layernorm"):
            assert f"decoder.layers.{i}.{norm}.weight" in names
    ids = torch.randint(0, 64, (BATCH, SEQ))
    pos = torch.arange(SEQ).expand(BATCH, SEQ)
    loss = model(ids, pos, causal_mask(SEQ), labels=ids)
    loss.mean().backward()
    assert model.decoder.layers[0].post_mlp_layernorm.weight.grad is not None


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], (False, False)),
        (["--post-self-attn-layernorm"], (True, False)),
        (["--post-mlp-layernorm"], (False, True)),
        (["--post-self-attn-layernorm", "--post-mlp-layernorm"], (True, True)),
    ],
)
def test_cli_flags_set_config(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: tuple[bool, bool]
) -> None:
    from megatron.training import arguments

    argv = ["pretrain_gpt.py", "--num-layers", "2", "--hidden-size", "32"]
    argv += ["--num-attention-heads", "4", "--seq-length", "16"]
    argv += ["--max-position-embeddings", "16", "--micro-batch-size", "1", *flags]
    monkeypatch.setattr(sys, "argv", argv)
    try:
        args = arguments.parse_args()
    except SystemExit as exc:  # argparse rejects an unknown flag by exiting
        pytest.fail(f"megatron.training.arguments rejected {flags}: exit {exc.code}")
    arguments.validate_args(args)
    config = arguments.core_transformer_config_from_args(args)
    assert (config.post_self_attn_layernorm, config.post_mlp_layernorm) == expected


def _training_args(monkeypatch: pytest.MonkeyPatch, *extra: str) -> Any:
    """Parsed and validated megatron.training arguments for a tiny CPU GPT, set as the globals
    gpt_builders reads."""
    from megatron.training import arguments, global_vars

    argv = ["pretrain_gpt.py", "--num-layers", "2", "--hidden-size", "32"]
    argv += ["--num-attention-heads", "4", "--seq-length", "16", "--max-position-embeddings", "16"]
    argv += ["--micro-batch-size", "1", "--use-cpu-initialization", "--vocab-size", "64"]
    argv += ["--no-persist-layer-norm", "--no-gradient-accumulation-fusion"]
    argv += ["--post-self-attn-layernorm", "--post-mlp-layernorm", *extra]
    monkeypatch.setattr(sys, "argv", argv)
    args = arguments.parse_args()
    arguments.validate_args(args)
    args.padded_vocab_size = 64
    monkeypatch.setattr(global_vars, "_GLOBAL_ARGS", args)
    return args


@pytest.mark.parametrize("impl", ["local", "transformer_engine"])
def test_gpt_builders_layer_spec_gets_norms(monkeypatch: pytest.MonkeyPatch, impl: str) -> None:
    """gpt_builders (the model builder of pretrain_gpt and miles) passes the config fields to the
    layer spec builder it picks, local or TE (the TE one spec-only here). Also passes on the
    previous version of the patch: it pins the wiring, which had no test."""
    import gpt_builders
    from megatron.core.models.gpt import gpt_layer_specs
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.training.arguments import core_transformer_config_from_args

    if impl == "transformer_engine" and not gpt_layer_specs.HAVE_TE:
        monkeypatch.setattr(gpt_layer_specs, "TESpecProvider", _SpecOnlyProvider, raising=False)
    args = _training_args(monkeypatch, "--transformer-impl", impl)
    config = core_transformer_config_from_args(args)
    spec = gpt_builders._get_transformer_layer_spec(impl == "transformer_engine", config)
    assert spec.submodules.post_self_attn_layernorm is not IdentityOp
    assert spec.submodules.post_mlp_layernorm is not IdentityOp


@pytest.mark.usefixtures("single_rank_gloo")
@pytest.mark.parametrize(
    "extra",
    [
        pytest.param([], id="dense"),
        pytest.param(["--num-experts", "2", "--moe-router-topk", "2"], id="moe-block"),
        pytest.param(["--mtp-num-layers", "1", "--position-embedding-type", "none"], id="mtp"),
    ],
)
def test_gpt_builder_builds_model_with_norms(
    monkeypatch: pytest.MonkeyPatch, extra: list[str]
) -> None:
    """gpt_builders.gpt_builder builds the whole model with the norms on every path it takes on a
    CPU (layer spec, MoE decoder block spec, MTP block from the last decoder layer spec). Also
    passes on the previous version of the patch: it pins the wiring, which had no test."""
    import gpt_builders

    args = _training_args(monkeypatch, "--transformer-impl", "local", *extra)
    model = gpt_builders.gpt_builder(args, pre_process=True, post_process=True)
    names = {name for name, _ in model.named_parameters()}
    layers = [f"decoder.layers.{i}" for i in range(2)]
    if "--mtp-num-layers" in extra:
        from compat import mtp_inner_layer

        inner = mtp_inner_layer(model.mtp.layers[0])
        layers.append(next(f"mtp.layers.0.{n}" for n, m in model.mtp.layers[0].named_children()
                           if m is inner))
    for layer in layers:
        for norm in ("post_self_attn_layernorm", "post_mlp_layernorm"):
            assert f"{layer}.{norm}.weight" in names, (layer, norm)


@pytest.mark.usefixtures("single_rank_gloo")
@pytest.mark.parametrize("flag", ["post_self_attn_layernorm", "post_mlp_layernorm"])
def test_spec_without_the_norm_refuses_the_flag(flag: str) -> None:
    """A spec builder that does not support the norms (heterogeneous, experimental-attention and
    inference specs in gpt_builders, any custom --spec) must not drop them silently: a layer
    whose config asks for a norm its spec lacks refuses to build. The previous version of the
    patch built it without the norm."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module

    config = tiny_gpt_config(**{flag: True})
    with pytest.raises(ValueError, match=flag):
        build_module(get_gpt_layer_local_spec(), config=config, layer_number=1)
