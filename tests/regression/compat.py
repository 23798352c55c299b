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
- ``MultiTokenPredictionLayer.transformer_layer`` became ``mtp_model_layer``: ``mtp_inner_layer``;
- the MLA RoPE Triton kernels were renamed (``rotary_{fwd,bwd}_{q,kv}_kernel`` ->
  ``_mla_rope_{fwd,bwd}_inplace_kernel`` / ``_mla_rope_{fwd,bwd}_kv_split_kernel``, upstream
  bf4e1db3) and the kv kernels gained the ``REMOVE_INTERLEAVING`` meta-argument:
  ``mla_rope_kernels``, ``mla_rope_kv_launch_kwargs``; the q kernel gained ``inverse`` and
  ``remove_interleaving``: ``mla_rope_has_modes``;
- ``DynamicInferenceContext`` takes a model config and an ``InferenceConfig``, and the KV cache's
  saver region (tag ``inference_context``) is paused and resumed by the context itself, no longer
  by rl_utils (tag ``kv_cache``): ``build_dynamic_context``, ``kv_cache_saver_tag``,
  ``kv_cache_pausers``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import sys
from collections.abc import Iterator
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
    in torch_memory_saver's region) or not.

    1dcf0da: keyword arguments, ``offload_kv_cache`` (``--rl-offload-kv-cache-during-training``).
    3346fa8a2: a TransformerConfig and an ``InferenceConfig``; the offloadable cache is
    ``kv_cache_management_mode=OFFLOAD`` with static KV memory pointers
    (``--rl-kv-cache-management-mode offload`` with persistent CUDA graphs)."""
    import torch
    from megatron.core.inference.contexts import dynamic_context

    if not hasattr(dynamic_context, "InferenceConfig"):  # 1dcf0da
        return dynamic_context.DynamicInferenceContext(
            params_dtype=torch.float32, num_layers=2, kv_channels=8, num_attention_heads=2,
            max_sequence_length=64, buffer_size_gb=0.0005, tensor_model_parallel_size=1,
            pipeline_model_parallel_size=1, block_size_tokens=16, max_tokens=128,
            offload_kv_cache=offload_kv_cache,
        )  # fmt: skip
    from megatron.core.inference.config import KVCacheManagementMode
    from megatron.core.transformer import TransformerConfig

    model_config = TransformerConfig(
        num_layers=2, hidden_size=16, num_attention_heads=2, kv_channels=8,
        params_dtype=torch.float32, use_cpu_initialization=True,
    )  # fmt: skip
    mode = KVCacheManagementMode.OFFLOAD if offload_kv_cache else KVCacheManagementMode.PERSIST
    inference_config = dynamic_context.InferenceConfig(
        max_sequence_length=64, buffer_size_gb=0.0005, block_size_tokens=16, max_tokens=128,
        kv_cache_management_mode=mode, static_kv_memory_pointers=offload_kv_cache,
    )  # fmt: skip
    with _no_pinned_memory():
        return dynamic_context.DynamicInferenceContext(model_config, inference_config)


@contextlib.contextmanager
def _no_pinned_memory() -> Iterator[None]:
    """3346fa8a2's context pins its host bookkeeping tensors, which needs an accelerator: on a
    CPU-only torch, pinning is dropped while the context is built (nothing else changes)."""
    import torch

    if torch.cuda.is_available():
        yield
        return
    saved = {name: getattr(torch, name) for name in ("full", "empty", "zeros", "ones",
                                                     "empty_like", "zeros_like")}  # fmt: skip
    pin = torch.Tensor.pin_memory

    def unpinned(fn: Any) -> Any:
        return lambda *a, **kw: fn(*a, **{k: v for k, v in kw.items() if k != "pin_memory"})

    try:
        for name, fn in saved.items():
            setattr(torch, name, unpinned(fn))
        torch.Tensor.pin_memory = lambda self, *a, **kw: self  # type: ignore[method-assign]
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)
        torch.Tensor.pin_memory = pin  # type: ignore[method-assign]


def kv_cache_saver_tag(tree: Path) -> str:
    """The torch_memory_saver tag the offloadable KV cache is allocated under: ``kv_cache``
    (1dcf0da), the context's ``TMS_TAG`` = ``inference_context`` (3346fa8a2)."""
    return "kv_cache" if upstream_generation(tree) == "1dcf0da" else "inference_context"


def kv_cache_pausers(tree: Path) -> dict[str, list[str]]:
    """The tags passed to ``torch_memory_saver.pause``/``resume`` by the code that pauses and
    resumes the KV cache around training, read from the source (its modules need more to import
    than the suite has): rl_utils at 1dcf0da; the inference context itself at 3346fa8a2 (its
    ``deallocate``/``reinitialize_inference_state_buffers``, ``tag = self.TMS_TAG``)."""
    rel = ("megatron/rl/rl_utils.py" if upstream_generation(tree) == "1dcf0da"
           else "megatron/core/inference/contexts/dynamic_context.py")  # fmt: skip
    return _saver_call_tags(ast.parse((tree / rel).read_text()))


def _saver_call_tags(module: ast.Module) -> dict[str, list[str]]:
    """``torch_memory_saver.pause(X)``/``resume(X)`` tags, X a literal, a class constant
    (``self.NAME``) or a local name assigned one of those in the same function."""
    constants = {t.id: n.value.value for c in ast.walk(module) if isinstance(c, ast.ClassDef)
                 for n in c.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                 for t in n.targets if isinstance(t, ast.Name)}  # fmt: skip

    def value(node: ast.expr, local: dict[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return constants.get(node.attr)
        return local.get(node.id) if isinstance(node, ast.Name) else None

    tags: dict[str, list[str]] = {"pause": [], "resume": []}
    for fn in (n for n in ast.walk(module) if isinstance(n, ast.FunctionDef)):
        local: dict[str, Any] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                local[node.targets[0].id] = value(node.value, local)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in tags and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "torch_memory_saver":
                tags[node.func.attr].append(value(node.args[0], local))
    return tags


MLA_ROPE_KERNELS = {  # generation -> names of (q fwd, q bwd, kv fwd, kv bwd)
    "1dcf0da": ("rotary_fwd_q_kernel", "rotary_bwd_q_kernel", "rotary_fwd_kv_kernel",
                "rotary_bwd_kv_kernel"),
    "3346fa8a2": ("_mla_rope_fwd_inplace_kernel", "_mla_rope_bwd_inplace_kernel",
                  "_mla_rope_fwd_kv_split_kernel", "_mla_rope_bwd_kv_split_kernel"),
}


def mla_rope_kernels(mod: Any) -> tuple[Any, Any, Any, Any]:
    """The four autotuned Triton kernels of ``fused_mla_yarn_rope_apply`` (q forward, q
    backward, kv forward, kv backward), whichever upstream's names the module has."""
    for names in MLA_ROPE_KERNELS.values():
        if all(hasattr(mod, n) for n in names):
            a, b, c, d = (getattr(mod, n) for n in names)
            return a, b, c, d
    raise AttributeError(f"{mod.__name__}: none of the known MLA RoPE kernel name sets")


def mla_rope_kv_launch_kwargs(kernel: Any) -> dict[str, Any]:
    """The keyword meta-arguments a direct launch of a kv kernel needs beyond 1dcf0da's
    positional ones: at 3346fa8a2 ``REMOVE_INTERLEAVING`` (False: the layout 1dcf0da writes)."""
    return {"REMOVE_INTERLEAVING": False} if "REMOVE_INTERLEAVING" in kernel.arg_names else {}


def mla_rope_has_modes(tree: Path) -> bool:
    """Whether the tree's in-place q RoPE has ``inverse``/``remove_interleaving`` (3346fa8a2),
    read from the source: the suite's process must not import Triton (the kernel cases run under
    ``TRITON_INTERPRET=1`` in subprocesses)."""
    source = tree / "megatron" / "core" / "fusions" / "fused_mla_yarn_rope_apply.py"
    return source.is_file() and "remove_interleaving: bool" in source.read_text()
