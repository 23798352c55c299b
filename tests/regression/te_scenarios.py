"""Megatron's Transformer Engine modules run against the TE stand-in (te_standin/), in a subprocess.

Megatron decides once per interpreter whether TE is present (``HAVE_TE``), so these scenarios run
in a fresh interpreter that has ``te_standin`` on its path; ``run_scenarios`` (used by the tests)
starts it and returns each scenario's JSON result (or the traceback it raised). Everything from
Megatron is real: ``TELinear`` and its column/row subclasses, ``TEGroupedLinear`` with the INT4
fake-QAT swap, and ``DistributedDataParallel`` whose backward hook consumes TE's
``grad_added_to_main_grad`` mark (gloo, world size 1, buffers on the CPU).

    python te_scenarios.py NAME [NAME ...]   # with te_standin and the tree on PYTHONPATH
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STANDIN = HERE / "te_standin"
FLAG_ENV = "OPEN_TRAINING_INT4_FAKE_QAT_FLAG"
GROUP_ENV = "OPEN_TRAINING_INT4_GROUP_SIZE"

SCENARIOS: dict[str, Callable[[], dict[str, Any]]] = {}


def scenario(fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    SCENARIOS[fn.__name__] = fn
    return fn


def run_scenarios(
    tree: str | Path, names: list[str], pattern: str = "saved", extra_env: dict | None = None
) -> dict[str, dict[str, Any]]:
    """Run scenarios in one fresh interpreter; {name: result or {"error": traceback}}."""
    env = dict(os.environ)
    env.pop(FLAG_ENV, None)
    env.pop(GROUP_ENV, None)
    env["TE_STANDIN_PATTERN"] = pattern
    env["TE_STANDIN_VERSION"] = "2.5.0" if pattern == "saved" else "2.6.0"
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(
        [str(STANDIN), str(tree), str(HERE)]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    proc = subprocess.run(
        [sys.executable, str(Path(__file__)), *names],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(
            f"TE stand-in scenarios failed to run (rc={proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
        )
    return json.loads(lines[-1][len("RESULTS ") :])


# ------------------------------------------------------------------------------------ harness


def _env():
    """gloo world size 1, model parallel state, CPU shims; buffers of DDP on the CPU."""
    import contextlib

    import torch
    from shims import Patches, single_rank_gloo_context

    stack = contextlib.ExitStack()
    stack.enter_context(single_rank_gloo_context())
    patches = stack.enter_context(Patches())
    patches.set(torch.cuda, "current_device", lambda: "cpu")
    return stack


def _config(**overrides: Any) -> Any:
    from megatron.core.transformer.transformer_config import TransformerConfig

    kwargs: dict[str, Any] = dict(
        num_layers=1,
        hidden_size=64,
        num_attention_heads=4,
        use_cpu_initialization=True,
        gradient_accumulation_fusion=True,
        add_bias_linear=False,
    )
    kwargs.update(overrides)
    return TransformerConfig(**kwargs)


def _weights(seed: int, shape: tuple[int, ...]) -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=gen) * 0.02
    w.view(-1)[::13] *= 25.0
    return w


def _grouped_linear(config: Any, num_gemms: int, in_f: int, out_f: int) -> Any:
    import torch
    from megatron.core.extensions.transformer_engine import TEGroupedLinear

    layer = TEGroupedLinear(
        num_gemms,
        in_f,
        out_f,
        parallel_mode=None,
        config=config,
        init_method=lambda w: None,
        bias=False,
        skip_bias_add=False,
        is_expert=True,
    )
    with torch.no_grad():
        if getattr(layer, "single_grouped_weight", False):
            layer.weight.copy_(_weights(100, (num_gemms, out_f, in_f)))
        else:
            for i in range(num_gemms):
                getattr(layer, f"weight{i}").copy_(_weights(100 + i, (out_f, in_f)))
    return layer


def _int4_qat_through_ddp(zero_out_wgrad: bool = False) -> dict[str, Any]:
    """TEGroupedLinear (fused wgrad) under Megatron's DDP, INT4 fake QAT on: forward, backward."""
    import torch
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.quantization.int4_fake_qat import int4_fake_quantize_reference

    with _env():
        config = _config()
        layer = _grouped_linear(config, num_gemms=2, in_f=192, out_f=24)
        ddp = DistributedDataParallel(config, DistributedDataParallelConfig(), layer)
        params = [layer.weight0, layer.weight1]
        before = [p.detach().clone() for p in params]
        if zero_out_wgrad:
            for p in params:
                p.zero_out_wgrad = True
        x = torch.randn(9, 192, generator=torch.Generator().manual_seed(1), requires_grad=True)
        splits = [4, 5]
        grad_out = torch.randn(9, 24, generator=torch.Generator().manual_seed(2))

        os.environ[FLAG_ENV], os.environ[GROUP_ENV] = "1", "64"
        try:
            out, _ = ddp(x, splits)
            out.backward(grad_out)
        finally:
            del os.environ[FLAG_ENV], os.environ[GROUP_ENV]

        chunks, gchunks = torch.split(x.detach(), splits), torch.split(grad_out, splits)
        ref_out = torch.cat(
            [c @ int4_fake_quantize_reference(p, 64).t() for c, p in zip(chunks, params)]
        )
        expected_main = [g.t() @ c for g, c in zip(gchunks, chunks)]
        expected_dgrad = torch.cat(
            [g @ int4_fake_quantize_reference(p, 64) for g, p in zip(gchunks, params)]
        )
        return {
            "out_matches_quantised": bool(torch.allclose(out, ref_out, rtol=1e-5, atol=1e-6)),
            "dgrad_matches_quantised": bool(
                torch.allclose(x.grad, expected_dgrad, rtol=1e-5, atol=1e-6)
            ),
            "marks": [bool(p.grad_added_to_main_grad) for p in params],
            "main_grad_nan": [bool(p.main_grad.isnan().any()) for p in params],
            "main_grad_matches": [
                bool(torch.allclose(p.main_grad.view_as(e), e, rtol=1e-5, atol=1e-6))
                for p, e in zip(params, expected_main)
            ],
            "param_grads_none": [p.grad is None for p in params],
            "params_unchanged": [bool(torch.equal(p.detach(), b)) for p, b in zip(params, before)],
            "params_are_parameters": [
                layer._parameters[f"weight{i}"] is p and isinstance(p, torch.nn.Parameter)
                for i, p in enumerate(params)
            ],
        }


@scenario
def int4_qat_ddp() -> dict[str, Any]:
    return _int4_qat_through_ddp()


@scenario
def int4_qat_ddp_zero_out_wgrad() -> dict[str, Any]:
    return _int4_qat_through_ddp(zero_out_wgrad=True)


@scenario
def int4_qat_stand_in_is_freed() -> dict[str, Any]:
    """The stand-in lives until the backward (needed for the mark) and no longer: once the
    backward ran and the graph is dropped it is freed by reference counting (no cycle left), and
    a forward whose graph is dropped without a backward leaves nothing behind a GC run."""
    import gc
    import weakref

    import torch
    from megatron.core.quantization import int4_fake_qat

    with _env():
        layer = _grouped_linear(_config(), num_gemms=2, in_f=128, out_f=8)
        for p in layer.parameters():
            p.main_grad = torch.zeros_like(p)
            p.grad_added_to_main_grad = False
        shadows: list[Any] = []
        original = int4_fake_qat.int4_fake_quantize_ste

        def spy(param: Any, group_size: int) -> Any:
            shadow = original(param, group_size)
            shadows.append(weakref.ref(shadow))
            return shadow

        int4_fake_qat.int4_fake_quantize_ste = spy
        os.environ[FLAG_ENV] = "1"
        try:
            x = torch.randn(6, 128)
            out, _ = layer(x, [3, 3])
            alive_before_backward = sum(r() is not None for r in shadows)
            out.sum().backward()
            del out  # the graph (and whatever TE keeps in it) goes; no GC run
            alive_after_backward = sum(r() is not None for r in shadows)
            shadows.clear()
            out, _ = layer(x, [3, 3])
            del out
            gc.collect()
            alive_after_dropped_graph = sum(r() is not None for r in shadows)
        finally:
            del os.environ[FLAG_ENV]
            int4_fake_qat.int4_fake_quantize_ste = original
        return {
            "alive_before_backward": alive_before_backward,
            "alive_after_backward": alive_after_backward,
            "alive_after_dropped_graph": alive_after_dropped_graph,
        }


def _delayed_wgrad_layer() -> Any:
    import torch

    config = _config()
    config.delay_wgrad_compute = True  # as the all-to-all overlap sets it (TE >= 2.3)
    layer = _grouped_linear(config, num_gemms=2, in_f=128, out_f=8)
    for p in (layer.weight0, layer.weight1):
        p.main_grad = torch.zeros_like(p)
        p.grad_added_to_main_grad = False
    return layer


@scenario
def delayed_wgrad_plain() -> dict[str, Any]:
    """The stand-in's delayed weight gradients (no QAT): none at backward, all at backward_dw,
    where TE sets the mark on the weights it kept (the parameters themselves here)."""
    import torch

    with _env():
        layer = _delayed_wgrad_layer()
        params = [layer.weight0, layer.weight1]
        x = torch.randn(6, 128, generator=torch.Generator().manual_seed(1))
        out, _ = layer(x, [3, 3])
        out.sum().backward()
        after_backward = [bool(p.main_grad.abs().sum() > 0) for p in params]
        layer.backward_dw()
        expected = [torch.ones(3, 8).t() @ c for c in torch.split(x, [3, 3])]
        return {
            "delayed": bool(layer.delay_wgrad_compute),
            "main_grad_after_backward": after_backward,
            "marks": [bool(p.grad_added_to_main_grad) for p in params],
            "main_grad_matches": [bool(torch.allclose(p.main_grad, e, atol=1e-5))
                                  for p, e in zip(params, expected)],
        }


@scenario
def int4_qat_delayed_wgrad() -> dict[str, Any]:
    """INT4 QAT with delayed weight gradients: the mark would come in backward_dw, after the
    straight-through backward; the layer must refuse rather than train with a lost mark."""
    import torch

    with _env():
        layer = _delayed_wgrad_layer()
        params = [layer.weight0, layer.weight1]
        os.environ[FLAG_ENV] = "1"
        try:
            out, _ = layer(torch.randn(6, 128), [3, 3])
            out.sum().backward()
            layer.backward_dw()
            outcome = {"raised": None, "marks": [bool(p.grad_added_to_main_grad)
                                                 for p in params]}
        except Exception as exc:  # noqa: BLE001
            outcome = {"raised": f"{type(exc).__name__}: {exc}"}
        finally:
            del os.environ[FLAG_ENV]
        return outcome


@scenario
def int4_qat_single_grouped_weight() -> dict[str, Any]:
    """TE storing all experts as one grouped ``weight``: QAT must not silently do nothing."""
    import torch

    with _env():
        os.environ["TE_STANDIN_SINGLE_GROUPED_WEIGHT"] = "1"
        try:
            layer = _grouped_linear(_config(gradient_accumulation_fusion=False), 2, 128, 8)
        finally:
            del os.environ["TE_STANDIN_SINGLE_GROUPED_WEIGHT"]
        x = torch.randn(6, 128)
        plain, _ = layer(x, [3, 3])
        os.environ[FLAG_ENV] = "1"
        try:
            out, _ = layer(x, [3, 3])
            outcome = {"raised": None, "same_as_plain": bool(torch.equal(out, plain))}
        except Exception as exc:  # noqa: BLE001
            outcome = {"raised": f"{type(exc).__name__}: {exc}"}
        finally:
            del os.environ[FLAG_ENV]
        return {"params": sorted(n for n, _ in layer.named_parameters()), **outcome}


@scenario
def te_linear_parallel_mode_tags() -> dict[str, Any]:
    """TELinear and its column/row subclasses tag every parameter (bias included, also the one
    the subclasses re-create under CPU initialisation) with Megatron's parallel_mode, also when TE
    itself is told None (experts: their communication is Megatron's)."""
    from megatron.core.extensions.transformer_engine import (
        TEColumnParallelLinear,
        TELinear,
        TERowParallelLinear,
    )

    result: dict[str, Any] = {}
    with _env():
        for cpu_init in (True, False):
            for expert_parallel in (1, 2):
                config = _config(
                    gradient_accumulation_fusion=False,
                    add_bias_linear=True,
                    use_cpu_initialization=cpu_init,
                    num_moe_experts=4 if expert_parallel > 1 else None,
                    expert_model_parallel_size=expert_parallel,
                )
                common = dict(
                    config=config, init_method=lambda w: None, bias=True, skip_bias_add=False
                )
                expert = expert_parallel > 1
                layers = {
                    "column": TEColumnParallelLinear(
                        64, 32, gather_output=False, is_expert=expert, **common
                    ),
                    "row": TERowParallelLinear(
                        32, 64, input_is_parallel=True, is_expert=expert, **common
                    ),
                }
                if not expert:
                    layers["duplicated"] = TELinear(
                        64,
                        16,
                        parallel_mode="duplicated",
                        skip_weight_param_allocation=False,
                        tp_group=None,
                        **common,
                    )
                for mode, layer in layers.items():
                    where = "cpu" if cpu_init else "device"
                    key = f"{mode}{'-expert' if expert else ''}-{where}-init"
                    result[key] = {
                        "mode": mode,
                        "te_parallel_mode": layer.parallel_mode,
                        "tags": {
                            n: getattr(p, "parallel_mode", "<untagged>")
                            for n, p in layer.named_parameters()
                        },
                    }
    return result


def _main(names: list[str]) -> None:
    import warnings

    warnings.simplefilter("ignore")
    import transformer_engine

    assert getattr(transformer_engine, "STANDIN", False), transformer_engine.__file__
    results: dict[str, Any] = {}
    for name in names:
        try:
            results[name] = SCENARIOS[name]()
        except Exception:  # noqa: BLE001
            results[name] = {"error": traceback.format_exc()}
    print("RESULTS " + json.dumps(results))


if __name__ == "__main__":
    _main(sys.argv[1:])
