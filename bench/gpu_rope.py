"""GPU benchmark: MLA YaRN RoPE Triton kernels (patch 4, mla-rope-triton) vs. copy bandwidth.

Measures the patched kernels of ``megatron/core/fusions/fused_mla_yarn_rope_apply.py`` (tree from
``BENCH_TREE``, else ``REBASECTL_TEST_TREE``, else ``.rebasectl/tree``), upstream's kernels from an
unpatched tree (``BENCH_BASE_TREE``: its file is loaded with importlib under another module name,
nothing copied) and an eager PyTorch implementation of each, all in bf16 on sbhd input with
S=8192, B=4 (T=32768 tokens), emb=64, v_dim=128, H in {128, 20} and k_dim in {128, 192}.
Upstream is only timed where it is correct: H=128 (no partial head block) and k_dim=128 for kv
(its ``tl.arange(0, k_dim)`` rejects 192).

Bytes counted (bf16, 2 bytes an element; cos/sin tables, S*emb each, are not counted):
- kv forward:          read kv T*H*(k+v) and k_pos_emb T*emb,
                       write key T*H*(k+emb) and value T*H*v.
- kv forward+backward: the forward's bytes, plus backward's: read dkey T*H*(k+emb) and
                       dvalue T*H*v, write dkv T*H*(k+v) and dk_pos_emb T*emb.
- q forward (in place): read and write only the rope part, 2*T*H*emb.
The eager rows count the same bytes (the minimum any implementation must move), so their
``frac_of_copy`` is directly comparable.

Copy bandwidth: a 1 GiB device-to-device ``copy_`` (bytes read + written), median of
``triton.testing.do_bench``. Times are medians of ``do_bench`` (L2 flushed between repetitions).

Usage: ``BENCH_TREE=... BENCH_BASE_TREE=... python bench/gpu_rope.py [--sweep]``; ``--sweep``
also times the patched kv/q kernels for each (BLOCK_H, num_warps) pair (a tuning aid).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
REL = "megatron/core/fusions/fused_mla_yarn_rope_apply.py"
S, B, EMB, V_DIM = 8192, 4, 64, 128
T = S * B
DT = torch.bfloat16
DEV = "cuda"
ES = 2  # bytes per bf16 element


def _tree() -> Path:
    env = os.environ.get("BENCH_TREE") or os.environ.get("REBASECTL_TEST_TREE")
    return Path(env) if env else REPO / ".rebasectl" / "tree"


def load_patched() -> ModuleType:
    sys.path.insert(0, str(_tree()))
    import megatron.core.fusions.fused_mla_yarn_rope_apply as mod

    return mod


def load_upstream() -> ModuleType | None:
    base = os.environ.get("BENCH_BASE_TREE")
    if not base:
        return None
    spec = importlib.util.spec_from_file_location("mla_rope_upstream", Path(base) / REL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _do_bench(fn: Callable[[], Any]) -> float:
    import triton.testing

    fn()  # autotune / compile outside the timed region
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def measure_copy_gbps(nbytes: int = 1 << 30) -> float:
    x = torch.empty(nbytes // 2, dtype=DT, device=DEV).normal_()
    y = torch.empty_like(x)
    ms = _do_bench(lambda: y.copy_(x))
    return 2 * nbytes / ms / 1e6


def rope_ref(pe: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    h = pe.shape[-1] // 2
    x1, x2 = pe[..., 0::2], pe[..., 1::2]
    return torch.cat(
        (x1 * cos[..., :h] - x2 * sin[..., :h], x2 * cos[..., h:] + x1 * sin[..., h:]), -1
    )


def _tables() -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.arange(S, device=DEV, dtype=torch.float32)
    inv = 1.0 / (10000 ** (torch.arange(0, EMB, 2, device=DEV).float() / EMB))
    freqs = torch.outer(pos, inv)
    freqs = torch.cat((freqs, freqs), -1).view(S, 1, 1, EMB)
    return freqs.cos().to(DT).contiguous(), freqs.sin().to(DT).contiguous()


def kv_fwd_bytes(H: int, k: int) -> int:
    return ES * (T * H * (k + V_DIM) + T * EMB + T * H * (k + EMB) + T * H * V_DIM)


def kv_bwd_bytes(H: int, k: int) -> int:
    return ES * (T * H * (k + EMB) + T * H * V_DIM + T * H * (k + V_DIM) + T * EMB)


def q_bytes(H: int) -> int:
    return ES * 2 * T * H * EMB


def _kv_fns(mod: ModuleType | None, H: int, k: int):
    cos, sin = _tables()
    kv = torch.randn(S, B, H, k + V_DIM, device=DEV, dtype=DT, requires_grad=True)
    pe = torch.randn(S, B, 1, EMB, device=DEV, dtype=DT, requires_grad=True)
    gk = torch.randn(S, B, H, k + EMB, device=DEV, dtype=DT)
    gv = torch.randn(S, B, H, V_DIM, device=DEV, dtype=DT)

    if mod is None:

        def fwd() -> tuple[torch.Tensor, torch.Tensor]:
            rope = rope_ref(pe, cos, sin).expand(S, B, H, EMB)
            return torch.cat((kv[..., :k], rope), -1), kv[..., k:].contiguous()

    else:

        def fwd() -> tuple[torch.Tensor, torch.Tensor]:
            return mod.fused_apply_mla_rope_for_kv(kv, pe, cos, sin, EMB, k, V_DIM)

    def fwd_nograd() -> None:
        with torch.no_grad():
            fwd()

    def fwd_bwd() -> None:
        key, value = fwd()
        torch.autograd.grad((key, value), (kv, pe), (gk, gv))

    return fwd_nograd, fwd_bwd


def _q_fn(mod: ModuleType | None, H: int, qk: int) -> Callable[[], Any]:
    cos, sin = _tables()
    q = torch.randn(S, B, H, qk + EMB, device=DEV, dtype=DT)
    if mod is None:

        def run() -> None:
            q[..., qk:] = rope_ref(q[..., qk:], cos, sin)

    else:

        def run() -> None:
            mod.fused_apply_mla_rope_for_q(q, cos, sin, qk, EMB)

    return run


def _row(name: str, nbytes: int, ms: float, copy_gbps: float) -> dict[str, Any]:
    gbps = nbytes / ms / 1e6
    return {
        "name": name,
        "bytes": nbytes,
        "median_ms": round(ms, 4),
        "gbps": round(gbps, 1),
        "frac_of_copy": round(gbps / copy_gbps, 3),
    }


def bench(copy_gbps: float) -> list[dict[str, Any]]:
    """Time every case; one row per (kernel, implementation, shape)."""
    patched, upstream = load_patched(), load_upstream()
    rows: list[dict[str, Any]] = []
    for H in (128, 20):
        for k in (128, 192):
            impls: list[tuple[str, ModuleType | None]] = [("patched", patched), ("eager", None)]
            if upstream is not None and H == 128 and k == 128:
                impls.insert(1, ("upstream", upstream))
            for impl, mod in impls:
                fwd, fwd_bwd = _kv_fns(mod, H, k)
                fb, bb = kv_fwd_bytes(H, k), kv_bwd_bytes(H, k)
                rows.append(_row(f"kv_fwd {impl} H={H} k={k}", fb, _do_bench(fwd), copy_gbps))
                rows.append(
                    _row(f"kv_fwd_bwd {impl} H={H} k={k}", fb + bb, _do_bench(fwd_bwd), copy_gbps)
                )
                del fwd, fwd_bwd
                torch.cuda.empty_cache()
            q_impls: list[tuple[str, ModuleType | None]] = [("patched", patched), ("eager", None)]
            if upstream is not None and H == 128:
                q_impls.insert(1, ("upstream", upstream))
            for impl, mod in q_impls:
                run = _q_fn(mod, H, k)
                rows.append(
                    _row(f"q_fwd {impl} H={H} qk={k}", q_bytes(H), _do_bench(run), copy_gbps)
                )
                del run
                torch.cuda.empty_cache()
    return rows


def sweep(copy_gbps: float) -> list[dict[str, Any]]:
    """Patched kernels with each single (BLOCK_H, num_warps) config forced: a tuning aid."""
    import triton

    mod = load_patched()
    rows = []
    kernels = {
        "kv_fwd": mod.rotary_fwd_kv_kernel,
        "kv_bwd": mod.rotary_bwd_kv_kernel,
        "q_fwd": mod.rotary_fwd_q_kernel,
    }
    saved = {n: (kern.configs, kern.cache) for n, kern in kernels.items()}
    for H, k in ((128, 128), (128, 192)):
        fwd, fwd_bwd = _kv_fns(mod, H, k)
        qrun = _q_fn(mod, H, k)
        for bh in (4, 8, 16, 32):
            for nw in (2, 4, 8):
                for kern in kernels.values():
                    kern.configs = [triton.Config({"BLOCK_H": bh}, num_warps=nw)]
                    kern.cache = {}
                tag = f"H={H} k={k} BLOCK_H={bh} warps={nw}"
                fb, bb = kv_fwd_bytes(H, k), kv_bwd_bytes(H, k)
                rows.append(_row(f"sweep kv_fwd {tag}", fb, _do_bench(fwd), copy_gbps))
                rows.append(_row(f"sweep kv_fwd_bwd {tag}", fb + bb, _do_bench(fwd_bwd), copy_gbps))
                rows.append(_row(f"sweep q_fwd {tag}", q_bytes(H), _do_bench(qrun), copy_gbps))
        del fwd, fwd_bwd, qrun
        torch.cuda.empty_cache()
    for n, kern in kernels.items():
        kern.configs, kern.cache = saved[n]
    return rows


def _print(rows: list[dict[str, Any]]) -> None:
    print(f"{'name':<44} {'bytes':>14} {'median_ms':>10} {'GB/s':>8} {'frac_copy':>9}")
    for r in rows:
        print(
            f"{r['name']:<44} {r['bytes']:>14} {r['median_ms']:>10.4f} {r['gbps']:>8.1f} "
            f"{r['frac_of_copy']:>9.3f}"
        )


if __name__ == "__main__":
    copy = measure_copy_gbps()
    print(f"device: {torch.cuda.get_device_name()}  copy bandwidth (read+write): {copy:.1f} GB/s")
    _print(bench(copy))
    if "--sweep" in sys.argv:
        _print(sweep(copy))
