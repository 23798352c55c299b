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

Before/after in one run: ``BENCH_PREV_TREE`` (a tree with an earlier version of the patched
file, loaded like the base) adds a ``prev`` row to every patched q row (the kv kernels are the
same code in both, so they are timed once). Every case's implementations are timed in turn,
``ROUNDS`` times over, and each row reports the median of its rounds' medians (interleaved, so
drift hits all of them alike). A ``copy_same`` row per q case is a device copy of the q pass's
own byte count (half read, half written): the roofline of a pass that small under the same
timing (launch, ramp-up and the L2 flush's dirty lines weigh more in 0.17 GB than in 1 GiB).

Caveat: do_bench launches each repetition from Python. Where the host path of one call
(autograd.Function, Triton's autotuner and launcher; several launches for kv fwd+bwd) outlasts
the L2 flush before it, the device waits inside the timed region, so short rows (q at H=20,
~50 us; kv fwd+bwd at H=20) can read as the host's speed: the same q kernel read 0.050 ms on one
machine and 0.091 ms on the next (NOTES-rope.md). ``--graph`` removes the host from the timing.

Usage: ``BENCH_TREE=... BENCH_BASE_TREE=... [BENCH_PREV_TREE=...] python bench/gpu_rope.py
[--precompile] [--graph] [--sweep] [--q-sweep] [--json FILE]``.
- ``--sweep`` also times the patched kv/q kernels for each (BLOCK_H, num_warps) pair, and
  ``--q-sweep`` the q kernel for each forced tiling (BLOCK_T, BLOCK_H, num_warps) at H in
  {20, 128} (``--q-sweep-h=20``: that H only; tuning aids).
- ``--precompile`` first compiles the autotune lists (and the sweep's configs) in parallel
  processes (Triton's disk cache is shared).
- ``--graph`` times the table's rows by CUDA graph replay (``GraphTimer``: no host launch cost,
  the same L2 flush) instead of do_bench.
Each Triton row names the config its autotuner chose.
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


def load_upstream(
    env: str = "BENCH_BASE_TREE", name: str = "mla_rope_upstream"
) -> ModuleType | None:
    base = os.environ.get(env)
    if not base:
        return None
    spec = importlib.util.spec_from_file_location(name, Path(base) / REL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _do_bench(fn: Callable[[], Any], warmup: int = 25, rep: int = 100) -> float:
    import triton.testing

    fn()  # autotune / compile outside the timed region
    torch.cuda.synchronize()
    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def load_prev() -> ModuleType | None:
    return load_upstream("BENCH_PREV_TREE", "mla_rope_prev")


ROUNDS = 3


GRAPH = False  # --graph: time by CUDA graph replay (GraphTimer) instead of do_bench


class GraphTimer:
    """ms per call of ``fn`` after an L2 flush, with no host launch cost in it.

    Two CUDA graphs: N times (flush, fn) and N flushes alone (the flush is do_bench's: zero a
    256 MB buffer); each ``time()`` replays both between events and returns the difference
    over N, median of ``reps``. do_bench launches fn from Python every repetition, and when
    that host path (autograd.Function, Triton's autotuner and launcher) takes longer than the
    flush, the device idles inside the timed region: a ~50 us kernel (q at H=20) then reads
    as the host's speed, which varied between machines (NOTES-rope.md, runs 4 and 5).
    Not yet run on a GPU.
    """

    def __init__(self, fn: Callable[[], Any], n: int = 20) -> None:
        self.n = n
        self.flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device=DEV)
        fn()  # autotune / compile before capture
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as capture asks
            for _ in range(2):
                self.flush.zero_()
                fn()
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        self.g_fn, self.g_flush = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g_fn):
            for _ in range(n):
                self.flush.zero_()
                fn()
        with torch.cuda.graph(self.g_flush):
            for _ in range(n):
                self.flush.zero_()
        torch.cuda.synchronize()

    def time(self, reps: int = 5) -> float:
        times = []
        for _ in range(reps):
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            ev[0].record()
            self.g_fn.replay()
            ev[1].record()
            self.g_flush.replay()
            ev[2].record()
            torch.cuda.synchronize()
            times.append((ev[0].elapsed_time(ev[1]) - ev[1].elapsed_time(ev[2])) / self.n)
        return sorted(times)[len(times) // 2]


def _interleaved(fns: list[Callable[[], Any]], rounds: int = ROUNDS, rep: int = 100) -> list[float]:
    """Median over ``rounds`` of each fn's do_bench median (or GraphTimer's, with --graph),
    the fns timed in turn each round."""
    for fn in fns:
        fn()  # autotune / compile outside the timed region
    torch.cuda.synchronize()
    timers = [GraphTimer(fn) for fn in fns] if GRAPH else []
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            if GRAPH:
                times[i].append(timers[i].time())
            else:
                times[i].append(_do_bench(fn, warmup=rep // 4, rep=rep))
    del timers
    return [sorted(t)[len(t) // 2] for t in times]


def _copy_fn(nbytes: int) -> Callable[[], Any]:
    x = torch.empty(nbytes // 2, dtype=DT, device=DEV).normal_()
    y = torch.empty_like(x)
    return lambda: y.copy_(x)


def measure_copy_gbps(nbytes: int = 1 << 30) -> float:
    ms = _do_bench(_copy_fn(nbytes))
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


ROLES = ("q_fwd", "q_bwd", "kv_fwd", "kv_bwd")


def kernel(mod: ModuleType, role: str) -> Any:
    """The autotuned kernel of ``role`` (``ROLES``) under whichever upstream's names ``mod``
    has (tests/regression/compat.py knows both: 1dcf0da's and 3346fa8a2's)."""
    sys.path.insert(0, str(REPO / "tests" / "regression"))
    from compat import mla_rope_kernels

    return dict(zip(ROLES, mla_rope_kernels(mod), strict=True))[role]


def _kern(mod: ModuleType | None, role: str) -> Any:
    return None if mod is None else kernel(mod, role)


def _row(name: str, nbytes: int, ms: float, copy_gbps: float, kern: Any = None) -> dict[str, Any]:
    """One result row; ``kern`` (an autotuned kernel) adds the config it chose for this case
    (the autotune cache is keyed per shape class, and the last call was this case's)."""
    gbps = nbytes / ms / 1e6
    row = {
        "name": name,
        "bytes": nbytes,
        "median_ms": round(ms, 4),
        "gbps": round(gbps, 1),
        "frac_of_copy": round(gbps / copy_gbps, 3),
    }
    best = getattr(kern, "best_config", None)
    if best is not None:
        row["config"] = f"{best.kwargs} w{best.num_warps}"
    return row


def bench(copy_gbps: float) -> list[dict[str, Any]]:
    """Time every case; one row per (kernel, implementation, shape), interleaved per case."""
    patched, upstream, prev = load_patched(), load_upstream(), load_prev()
    rows: list[dict[str, Any]] = []
    for H in (128, 20):
        for k in (128, 192):
            impls: list[tuple[str, ModuleType | None]] = [("patched", patched)]
            if upstream is not None and H == 128 and k == 128:
                impls.append(("upstream", upstream))
            impls.append(("eager", None))
            names, fns, nbytes, kerns = [], [], [], []
            fb, bb = kv_fwd_bytes(H, k), kv_bwd_bytes(H, k)
            for impl, mod in impls:
                fwd, fwd_bwd = _kv_fns(mod, H, k)
                names += [f"kv_fwd {impl} H={H} k={k}", f"kv_fwd_bwd {impl} H={H} k={k}"]
                fns += [fwd, fwd_bwd]
                nbytes += [fb, fb + bb]
                kerns += [_kern(mod, "kv_fwd"), _kern(mod, "kv_bwd")]
            for name, nb, ms, kern in zip(names, nbytes, _interleaved(fns), kerns):
                rows.append(_row(name, nb, ms, copy_gbps, kern))
            del fns
            torch.cuda.empty_cache()

            q_impls: list[tuple[str, ModuleType | None]] = [("patched", patched)]
            if prev is not None:
                q_impls.append(("prev", prev))
            if upstream is not None and H == 128:
                q_impls.append(("upstream", upstream))
            q_impls.append(("eager", None))
            names = [f"q_fwd {impl} H={H} qk={k}" for impl, _ in q_impls]
            fns = [_q_fn(mod, H, k) for _, mod in q_impls]
            kerns = [_kern(mod, "q_fwd") for _, mod in q_impls]
            names.append(f"copy_same q H={H} qk={k}")
            fns.append(_copy_fn(q_bytes(H) // 2))
            kerns.append(None)
            for name, ms, kern in zip(names, _interleaved(fns), kerns):
                rows.append(_row(name, q_bytes(H), ms, copy_gbps, kern))
            del fns
            torch.cuda.empty_cache()
    return rows


Q_SWEEP = {
    # (BLOCK_T, BLOCK_H, num_warps); rows per tile = BLOCK_T * BLOCK_H. Run 4 (NOTES-rope.md)
    # swept these and a persistent grid (2-16 programs per SM, next tile prefetched), which was
    # slower everywhere and is gone from the kernel.
    20: [(1, 8, 4), (1, 32, 4), (8, 4, 2), (16, 4, 2), (32, 4, 8)]
    + [(r // bh, bh, 4) for bh in (4, 8) for r in (32, 64, 128)]
    # run 7 (graph replay): bigger and smaller tiles with more or fewer warps
    + [(64, 4, 8), (128, 4, 8), (16, 4, 8), (4, 4, 2), (2, 16, 4), (8, 16, 8), (64, 4, 4)],
    128: [(1, 8, 4), (1, 16, 4), (1, 32, 2), (2, 32, 2), (4, 32, 8)]
    + [(r // bh, bh, 4) for bh in (8, 32) for r in (32, 64, 128)],
}


def _q_config(c: tuple[int, int, int]) -> Any:
    import triton

    bt, bh, nw = c
    return triton.Config({"BLOCK_T": bt, "BLOCK_H": bh}, num_warps=nw)


def _warm_one(job: tuple[str, int, int, tuple[int, int, int] | None]) -> None:
    """Compile one forced q config, or the autotune list of the q or the kv kernels (forward
    and backward), on a small input of the benchmark's specialization (same H, k, B; tokens a
    multiple of 16), to fill Triton's disk cache."""
    kind, H, k, c = job
    mod = load_patched()
    cos, sin = _tables()
    if kind == "q":
        kern = kernel(mod, "q_fwd")
        if c is not None:
            kern.configs, kern.cache = [_q_config(c)], {}
        q = torch.randn(16, B, H, k + EMB, device=DEV, dtype=DT)
        mod.fused_apply_mla_rope_for_q(q, cos, sin, k, EMB)
    else:
        kv = torch.randn(16, B, H, k + V_DIM, device=DEV, dtype=DT, requires_grad=True)
        pe = torch.randn(16, B, 1, EMB, device=DEV, dtype=DT, requires_grad=True)
        key, value = mod.fused_apply_mla_rope_for_kv(kv, pe, cos, sin, EMB, k, V_DIM)
        torch.autograd.grad(
            (key, value), (kv, pe), (torch.randn_like(key), torch.randn_like(value))
        )
    torch.cuda.synchronize()


def precompile(jobs: list[tuple[str, int, int, Any]], workers: int = 12) -> None:
    """Compile kernel configs in parallel processes (Triton's disk cache is shared)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        list(pool.map(_warm_one, jobs))


def q_sweep(copy_gbps: float) -> list[dict[str, Any]]:
    """The patched q kernel with each tiling forced, beside prev and the autotuned default."""
    patched, prev = load_patched(), load_prev()
    kern = kernel(patched, "q_fwd")
    saved = (kern.configs, kern.cache)
    rows = []
    only = [int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--q-sweep-h=")]
    for H, configs in Q_SWEEP.items():
        if only and H not in only:
            continue
        for qk in (128, 192):
            names, fns = [], []
            run = _q_fn(patched, H, qk)  # one q for every forced config
            for c in configs:
                fns.append(_Pinned(kern, [_q_config(c)], {}, run))
                names.append(f"qsweep H={H} qk={qk} T{c[0]} H{c[1]} w{c[2]}")
            fns.append(_Pinned(kern, saved[0], {}, run))
            names.append(f"qsweep H={H} qk={qk} autotuned")
            if prev is not None:
                fns.append(_q_fn(prev, H, qk))
                names.append(f"qsweep H={H} qk={qk} prev")
            for name, ms in zip(names, _interleaved(fns, rounds=1, rep=50)):
                rows.append(_row(name, q_bytes(H), ms, copy_gbps))
            del fns
            torch.cuda.empty_cache()
    kern.configs, kern.cache = saved
    return rows


class _Pinned:
    """Runs ``fn`` with ``kern``'s configs and autotune cache set to the given ones."""

    def __init__(self, kern: Any, configs: list[Any], cache: dict[Any, Any], fn: Any) -> None:
        self.kern, self.configs, self.cache, self.fn = kern, configs, cache, fn

    def __call__(self) -> None:
        self.kern.configs, self.kern.cache = self.configs, self.cache
        self.fn()


def sweep(copy_gbps: float) -> list[dict[str, Any]]:
    """Patched kernels with each single (BLOCK_H, num_warps) config forced: a tuning aid."""
    import triton

    mod = load_patched()
    rows = []
    kernels = {
        "kv_fwd": kernel(mod, "kv_fwd"),
        "kv_bwd": kernel(mod, "kv_bwd"),
        "q_fwd": kernel(mod, "q_fwd"),
    }
    saved = {n: (kern.configs, kern.cache) for n, kern in kernels.items()}
    for H, k in ((128, 128), (128, 192)):
        fwd, fwd_bwd = _kv_fns(mod, H, k)
        qrun = _q_fn(mod, H, k)
        for bh in (4, 8, 16, 32):
            for nw in (2, 4, 8):
                for n, kern in kernels.items():
                    # other meta-parameters (the q kernel's tiling) as in the first config
                    kw = {**saved[n][0][0].kwargs, "BLOCK_H": bh}
                    kern.configs = [triton.Config(kw, num_warps=nw)]
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
            f"{r['frac_of_copy']:>9.3f}  {r.get('config', '')}"
        )


if __name__ == "__main__":
    import json

    GRAPH = "--graph" in sys.argv
    copy = measure_copy_gbps()
    print(f"device: {torch.cuda.get_device_name()}  copy bandwidth (read+write): {copy:.1f} GB/s")
    all_rows: list[dict[str, Any]] = []
    if "--precompile" in sys.argv:
        jobs: list[tuple[str, int, int, Any]] = [
            (kind, H, k, None) for kind in ("kv", "q") for H in (128, 20) for k in (128, 192)
        ]
        if "--q-sweep" in sys.argv:
            jobs += [("q", H, qk, c) for H, cs in Q_SWEEP.items() for c in cs
                     for qk in (128, 192)]
        precompile(jobs)
    if "--q-sweep" in sys.argv:
        all_rows += q_sweep(copy)
        _print(all_rows)
    if "--no-bench" not in sys.argv:
        rows = bench(copy)
        _print(rows)
        all_rows += rows
    if "--sweep" in sys.argv:
        rows = sweep(copy)
        _print(rows)
        all_rows += rows
    if "--json" in sys.argv:
        out = Path(sys.argv[sys.argv.index("--json") + 1])
        out.write_text(json.dumps({"copy_gbps": copy, "rows": all_rows}, indent=1))
