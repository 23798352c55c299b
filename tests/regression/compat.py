"""The one place that knows both upstream generations the suite runs on: 1dcf0da (the series'
base) and 3346fa8a2 (the next upstream, June). A test that reaches an upstream internal whose
name, module or signature changed between them goes through a function here, so that a bump
shows up as one edit in one file, and a test that fails after a bump fails on the patch, never
on a name the suite could not find.

What moved, and where it is handled:

- the legacy tokenizer (``megatron.training.tokenizer``) was removed (upstream 32570939); the
  HuggingFace wrapper lives in ``megatron.core.tokenizers.text.libraries``: ``build_hf_tokenizer``;
- ``TorchCommonLoadStrategy`` became the module function ``load_common``: ``load_common``;
- ``MTPLossAutoScaler`` moved from ``gpt_model`` to ``multi_token_prediction``:
  ``mtp_loss_scaler_owner``;
- ``MultiTokenPredictionLayer.transformer_layer`` became ``mtp_model_layer``: ``mtp_inner_layer``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

HF_LIBRARY = "megatron.core.tokenizers.text.libraries.huggingface_tokenizer"


def has_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def python_features() -> None:
    """What the newer upstream needs of Python 3.12 on an older interpreter: ``typing.override``
    (megatron.training at 3346fa8a2). Called before Megatron is imported, by the suite's conftest
    and by the plugin of upstream's own tests; a no-op on 3.12 and later."""
    import typing

    if not hasattr(typing, "override"):
        def override(method: Any) -> Any:  # PEP 698: marks, changes nothing
            method.__override__ = True
            return method

        typing.override = override  # type: ignore[attr-defined]


def upstream_generation(tree: Path) -> str:
    """Which upstream a tree is built on, as far as the suite cares: ``1dcf0da`` or
    ``3346fa8a2`` (the training config moved to ``megatron/training/config/`` in between)."""
    if (tree / "megatron" / "training" / "config" / "training_config.py").is_file():
        return "3346fa8a2"
    return "1dcf0da"


def build_hf_tokenizer(model: str, *, trust_remote_code: bool) -> Any:
    """Megatron's HuggingFace tokenizer for ``model``, as training builds it from its args
    (``--trust-remote-code`` -> ``args.trust_remote_code``); ``transformers`` is whatever
    ``sys.modules`` holds (the tests install a spy)."""
    if has_module("megatron.training.tokenizer.tokenizer"):  # 1dcf0da
        from megatron.training.tokenizer.tokenizer import build_tokenizer

        args = _Args(rank=0, tokenizer_type="HuggingFaceTokenizer", tokenizer_model=model,
                     trust_remote_code=trust_remote_code, padded_vocab_size=64)
        return build_tokenizer(args)
    module = importlib.import_module(HF_LIBRARY)
    module.AutoTokenizer = sys.modules["transformers"].AutoTokenizer  # bound at its import
    return module.HuggingFaceTokenizer(model, trust_remote_code=trust_remote_code)


class _Args:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def load_common(checkpoint_dir: Path) -> Any:
    """The common state of a torch_dist checkpoint, loaded the way Megatron loads it."""
    from megatron.core.dist_checkpointing.strategies import common

    if hasattr(common, "TorchCommonLoadStrategy"):  # 1dcf0da
        return common.TorchCommonLoadStrategy().load_common(checkpoint_dir)
    return common.load_common(str(checkpoint_dir))


def mtp_loss_scaler_owner() -> Any:
    """The module whose ``MTPLossAutoScaler.apply`` adds the MTP loss to the hidden states."""
    from megatron.core.models.gpt import gpt_model

    if hasattr(gpt_model, "MTPLossAutoScaler"):  # 1dcf0da
        return gpt_model
    from megatron.core.transformer import multi_token_prediction

    return multi_token_prediction


def mtp_inner_layer(mtp_layer: Any) -> Any:
    """The transformer layer inside an MTP layer."""
    for name in ("transformer_layer", "mtp_model_layer"):
        if hasattr(mtp_layer, name):
            return getattr(mtp_layer, name)
    raise AttributeError(f"no transformer layer in {type(mtp_layer).__name__}")


def build_dynamic_context(offload_kv_cache: bool) -> Any:
    """A small ``DynamicInferenceContext`` on the CPU whose KV cache is offloadable (allocated
    in torch_memory_saver's region) or not."""
    import torch
    from megatron.core.inference.contexts import dynamic_context

    return dynamic_context.DynamicInferenceContext(
        params_dtype=torch.float32, num_layers=2, kv_channels=8, num_attention_heads=2,
        max_sequence_length=64, buffer_size_gb=0.0005, tensor_model_parallel_size=1,
        pipeline_model_parallel_size=1, block_size_tokens=16, max_tokens=128,
        offload_kv_cache=offload_kv_cache,
    )
