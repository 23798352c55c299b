"""Patch 4 (mla-rope-triton): MLA YaRN RoPE Triton kernels are correct for every head count.

What this proves, against an eager PyTorch reference (rope part
``cat(x1*c[:h] - x2*s[:h], x2*c[h:] + x1*s[h:])`` with ``x1 = pe[0::2]``, ``x2 = pe[1::2]``,
nope part copied, key rope broadcast over heads, value ``kv[..., k_dim:]``, gradients by autograd
of the reference, so the ``k_pos_emb`` gradient sums over heads):

- the q and the kv kernels, forward and backward, mask by the *global* head index, so a partial
  last head block (``H % BLOCK_H != 0``) neither touches the next token's heads nor writes past
  the end of a tensor (guard tokens around every buffer we own must stay untouched);
- ``k_dim`` need not be a power of two (192);
- ``v_dim == 0`` (key-only kv) works in thd and in sbhd.

Why: at 1dcf0da the kernels mask with the block-local head index (H=20 with BLOCK_H=8 races with
the next token in forward and sums the next token's heads into the rope gradient), ``tl.arange``
over ``k_dim``/``v_dim`` rejects 192 and 0, and the sbhd wrapper reshapes an empty value with -1.

Two layers:
- ``cpu`` tests run the real kernels under ``TRITON_INTERPRET=1`` with one forced autotune config,
  each case in its own subprocess (the env var must be set before triton is imported, and on the
  unpatched base a partial head block writes out of bounds, which corrupts the interpreter's heap);
- ``gpu`` tests run the full matrix (docs/series.md) on CUDA (H in {32, 20, 5}, k_dim in {128, 192},
  v_dim in {128, 0}, sbhd and thd with uneven cu_seqlens, fp32 and bf16, BLOCK_H forced to 8 and 4)
  and launch the kv kernels directly with guard tokens around their outputs.

Run a single case by hand: ``python test_mla_rope.py '<json spec>'`` (tree from
``REBASECTL_TEST_TREE``; interpreter mode is switched on when there is no CUDA).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import torch
from compat import mla_rope_has_modes, mla_rope_kernels, mla_rope_kv_launch_kwargs

EMB = 64
GUARD = 2  # guard tokens on each side of every buffer the test owns
SENTINEL = 1234.5
THD_CU_GPU = [0, 27, 54, 99, 100, 137]  # uneven, one length-1 sequence
THD_CU_CPU = [0, 7, 20, 21, 36]
HERE = Path(__file__).resolve()
TREE = Path(os.environ.get("REBASECTL_TEST_TREE", "."))

Spec = dict[str, Any]


# ----------------------------------------------------------------------------- reference


def rope_ref(pe: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Non-interleaved RoPE of ``pe`` (last dim ``emb``) with per-token ``cos``/``sin`` rows."""
    h = pe.shape[-1] // 2
    x1, x2 = pe[..., 0::2], pe[..., 1::2]
    return torch.cat(
        (x1 * cos[..., :h] - x2 * sin[..., :h], x2 * cos[..., h:] + x1 * sin[..., h:]), -1
    )


def interleave(rot: torch.Tensor) -> torch.Tensor:
    """``remove_interleaving`` (3346fa8a2): the rotated halves written as pairs, left half to
    ``[..., 0::2]``, right half to ``[..., 1::2]``."""
    h = rot.shape[-1] // 2
    return torch.stack((rot[..., :h], rot[..., h:]), -1).flatten(-2)


MODES = ("inverse", "remove_interleaving")  # the in-place kernel's options at 3346fa8a2


def _positions(spec: Spec, device: str) -> torch.Tensor:
    """Position of every token (sbhd: the s index; thd: offset inside its sequence).

    thd with context parallelism (``cp = [rank, size]``): ``cu`` holds the global sequence
    lengths and this rank holds chunks ``rank`` and ``2*size - 1 - rank`` of each sequence cut
    into ``2*size`` equal chunks, so its tokens' positions are those chunks' positions.
    """
    if spec["fmt"] == "sbhd":
        return torch.arange(spec["S"], device=device)
    rank, size = spec.get("cp", (0, 1))
    pos = []
    for a, b in zip(spec["cu"][:-1], spec["cu"][1:], strict=True):
        chunk = (b - a) // (2 * size)
        for j in range((b - a) // size):
            first = j < chunk or size == 1
            pos.append(rank * chunk + j if first else (2 * size - 1 - rank) * chunk + j - chunk)
    return torch.tensor(pos, device=device)


def _tol(dtype: torch.dtype, want: torch.Tensor) -> dict[str, float]:
    if dtype == torch.float32:
        return {"rtol": 1e-5, "atol": 1e-5}
    # bf16: upstream's tolerances, with atol grown to ~2.5 ulp of the largest value (the kernel
    # rounds every product to bf16; the k_pos_emb gradient sums H heads before rotating).
    amax = want.abs().max().item() if want.numel() else 0.0
    return {"rtol": 2e-2, "atol": max(5e-2, 1e-2 * amax)}


def _guarded(
    shape: tuple[int, ...], dtype: torch.dtype, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """A buffer with GUARD sentinel tokens on both sides of dim 0, and its contiguous middle."""
    buf = torch.full((shape[0] + 2 * GUARD, *shape[1:]), SENTINEL, dtype=dtype, device=device)
    return buf, buf[GUARD : GUARD + shape[0]]


def _check_guards(name: str, buf: torch.Tensor) -> None:
    for part in (buf[:GUARD], buf[buf.shape[0] - GUARD :]):
        bad = (part != SENTINEL).sum().item()
        assert bad == 0, f"{name}: {bad} guard elements overwritten (out-of-bounds write)"


def _close(name: str, got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype) -> None:
    torch.testing.assert_close(
        got.float(),
        want.float(),
        **_tol(dtype, want.float()),
        msg=lambda m: f"{name} mismatch: {m}",
    )


def _forced_config(kernel: Any, block_h: int, tiling: dict[str, int] | None) -> Any:
    """One config for ``kernel``: BLOCK_H, plus the q tiling (BLOCK_T tokens per tile) where the
    kernel has that meta-parameter (the q kernels of the patched tree; upstream's kernels have
    BLOCK_H alone). Other meta-parameters as in the kernel's first config."""
    import triton

    kwargs = {"BLOCK_H": block_h}
    for name, value in (tiling or {}).items():
        if name in kernel.configs[0].kwargs:
            kwargs[name] = value
    for name, value in kernel.configs[0].kwargs.items():
        kwargs.setdefault(name, value)
    return triton.Config(kwargs)


@contextlib.contextmanager
def forced_block_h(
    mod: Any, block_h: int | None, tiling: dict[str, int] | None = None
) -> Iterator[None]:
    """Force one autotune config (BLOCK_H, and the q tiling if given) on all four kernels."""
    if block_h is None:
        yield
        return

    kernels = list(mla_rope_kernels(mod))
    saved = [(k.configs, k.cache) for k in kernels]
    try:
        for k in kernels:
            k.configs = [_forced_config(k, block_h, tiling)]
            k.cache = {}
        yield
    finally:
        for k, (configs, cache) in zip(kernels, saved, strict=True):
            k.configs, k.cache = configs, cache


# ----------------------------------------------------------------------------- one case


def _tokens(spec: Spec) -> tuple[int, ...]:
    if spec["fmt"] == "sbhd":
        return (spec["S"], spec["B"])
    return (spec["cu"][-1] // spec.get("cp", (0, 1))[1],)


def _tables(spec: Spec, dtype: torch.dtype, device: str, gen: torch.Generator):
    rows = (
        spec["S"]
        if spec["fmt"] == "sbhd"
        else max(b - a for a, b in zip(spec["cu"][:-1], spec["cu"][1:], strict=True))
    )
    cos = (torch.rand(rows, 1, 1, EMB, generator=gen) * 2 - 1).to(device=device, dtype=dtype)
    sin = (torch.rand(rows, 1, 1, EMB, generator=gen) * 2 - 1).to(device=device, dtype=dtype)
    pos = _positions(spec, device)
    # per-token rows, shaped to broadcast over [tokens..., heads, emb]
    shape = (spec["S"], 1, 1, EMB) if spec["fmt"] == "sbhd" else (pos.numel(), 1, EMB)
    return cos, sin, cos.view(rows, EMB)[pos].view(shape), sin.view(rows, EMB)[pos].view(shape)


def run_q_case(spec: Spec, device: str) -> None:
    import megatron.core.fusions.fused_mla_yarn_rope_apply as mod

    dtype = getattr(torch, spec["dtype"])
    gen = torch.Generator().manual_seed(1234)
    H, qk = spec["H"], spec["k_dim"]
    shape = (*_tokens(spec), H, qk + EMB)
    cos, sin, c_tok, s_tok = _tables(spec, dtype, device, gen)
    cu = (
        None
        if spec["fmt"] == "sbhd"
        else torch.tensor(spec["cu"], dtype=torch.int32, device=device)
    )

    x = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    g = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)

    ref_dtype = torch.float64 if dtype == torch.float32 else torch.float32
    xr = x.to(ref_dtype).requires_grad_(True)
    modes = {m: True for m in MODES if spec.get(m)}
    sign = -1.0 if modes.get("inverse") else 1.0  # the inverse rotation negates sin
    rot = rope_ref(xr[..., qk:], c_tok.to(ref_dtype), sign * s_tok.to(ref_dtype))
    out_ref = torch.cat((xr[..., :qk], interleave(rot) if modes.get("remove_interleaving")
                         else rot), -1)  # fmt: skip
    out_ref.backward(g.to(ref_dtype))

    qbuf, q = _guarded(shape, dtype, device)
    q.copy_(x)
    q.requires_grad_(True)
    gbuf, gq = _guarded(shape, dtype, device)
    gq.copy_(g)
    rank, size = spec.get("cp", (0, 1))
    with forced_block_h(mod, spec.get("block_h"), spec.get("tiling")):
        out = mod.fused_apply_mla_rope_for_q(
            q, cos, sin, qk, EMB, cu_seqlens_q=cu, cp_rank=rank, cp_size=size, **modes
        )
        _close("q fwd", out.detach(), out_ref.detach(), dtype)
        out.backward(gq)
    if device == "cuda":
        torch.cuda.synchronize()
    _close("q fwd", out.detach(), out_ref.detach(), dtype)
    _close("q bwd", q.grad, xr.grad, dtype)
    _check_guards("q (in place)", qbuf)
    _check_guards("q grad (in place)", gbuf)


def run_kv_case(spec: Spec, device: str) -> None:
    import megatron.core.fusions.fused_mla_yarn_rope_apply as mod

    dtype = getattr(torch, spec["dtype"])
    gen = torch.Generator().manual_seed(4321)
    H, kd, vd = spec["H"], spec["k_dim"], spec["v_dim"]
    tok = _tokens(spec)
    cos, sin, c_tok, s_tok = _tables(spec, dtype, device, gen)
    cu = (
        None
        if spec["fmt"] == "sbhd"
        else torch.tensor(spec["cu"], dtype=torch.int32, device=device)
    )

    kv0 = torch.randn((*tok, H, kd + vd), generator=gen).to(device=device, dtype=dtype)
    pe0 = torch.randn((*tok, 1, EMB), generator=gen).to(device=device, dtype=dtype)
    gk0 = torch.randn((*tok, H, kd + EMB), generator=gen).to(device=device, dtype=dtype)
    gv0 = torch.randn((*tok, H, vd), generator=gen).to(device=device, dtype=dtype)

    ref_dtype = torch.float64 if dtype == torch.float32 else torch.float32
    kvr = kv0.to(ref_dtype).requires_grad_(True)
    per = pe0.to(ref_dtype).requires_grad_(True)
    rope = rope_ref(per, c_tok.to(ref_dtype), s_tok.to(ref_dtype))
    key_ref = torch.cat((kvr[..., :kd], rope.expand(*tok, H, EMB)), -1)
    value_ref = kvr[..., kd:]
    torch.autograd.backward((key_ref, value_ref), (gk0.to(ref_dtype), gv0.to(ref_dtype)))

    bufs = {}
    tensors = {}
    for name, t in (("kv", kv0), ("pe", pe0), ("gk", gk0), ("gv", gv0)):
        bufs[name], tensors[name] = _guarded(tuple(t.shape), dtype, device)
        tensors[name].copy_(t)
    kv, pe = tensors["kv"].requires_grad_(True), tensors["pe"].requires_grad_(True)
    rank, size = spec.get("cp", (0, 1))
    with forced_block_h(mod, spec.get("block_h"), spec.get("tiling")):
        key, value = mod.fused_apply_mla_rope_for_kv(
            kv, pe, cos, sin, EMB, kd, vd, cu_seqlens_kv=cu, cp_rank=rank, cp_size=size
        )
        assert key.shape == key_ref.shape and value.shape == value_ref.shape
        _close("key fwd", key.detach(), key_ref.detach(), dtype)
        _close("value fwd", value.detach(), value_ref.detach(), dtype)
        torch.autograd.backward((key, value), (tensors["gk"], tensors["gv"]))
    if device == "cuda":
        torch.cuda.synchronize()
    _close("kv bwd", kv.grad, kvr.grad, dtype)
    _close("k_pos_emb bwd", pe.grad, per.grad, dtype)
    for name, buf in bufs.items():
        _check_guards(name, buf)
    _close("kv input untouched", kv.detach(), kv0, dtype)


def run_kv_kernels_guarded(spec: Spec, device: str = "cuda") -> None:
    """Launch the kv kernels directly (as the wrapper does, thd) with guarded output buffers."""
    import megatron.core.fusions.fused_mla_yarn_rope_apply as mod
    import triton

    dtype = getattr(torch, spec["dtype"])
    gen = torch.Generator().manual_seed(99)
    H, kd, vd, cu_list = spec["H"], spec["k_dim"], spec["v_dim"], spec["cu"]
    T = cu_list[-1]
    cos, sin, c_tok, s_tok = _tables(spec, dtype, device, gen)
    cu = torch.tensor(cu_list, dtype=torch.int32, device=device)
    kv = torch.randn((T, H, kd + vd), generator=gen).to(device=device, dtype=dtype)
    pe = torch.randn((T, 1, EMB), generator=gen).to(device=device, dtype=dtype)
    dk = torch.randn((T, H, kd + EMB), generator=gen).to(device=device, dtype=dtype)
    dv = torch.randn((T, H, vd), generator=gen).to(device=device, dtype=dtype)
    kbuf, o_key = _guarded((T, H, kd + EMB), dtype, device)
    vbuf, o_value = _guarded((T, H, vd), dtype, device)
    dkvbuf, d_kv = _guarded((T, H, kd + vd), dtype, device)
    dembbuf, d_emb = _guarded((T, 1, EMB), dtype, device)
    grid = lambda meta: (T, triton.cdiv(H, meta["BLOCK_H"]))  # noqa: E731
    _, _, fwd_kv, bwd_kv = mla_rope_kernels(mod)
    with forced_block_h(mod, spec["block_h"]):
        fwd_kv[grid](
            kv, pe, o_key, o_value, cos, sin, EMB, kd, vd, H, None, len(cu_list) - 1, cu,
            kv.stride(0), kv.stride(1), pe.stride(0), o_key.stride(0), o_key.stride(1),
            o_value.stride(0), o_value.stride(1), 0, 1, **mla_rope_kv_launch_kwargs(fwd_kv),
        )  # fmt: skip
        bwd_kv[grid](
            dk, dv, d_kv, d_emb, cos, sin, EMB, kd, vd, H, None, len(cu_list) - 1, cu,
            dk.stride(0), dk.stride(1), dv.stride(0), dv.stride(1), d_kv.stride(0),
            d_kv.stride(1), d_emb.stride(0), 0, 1, **mla_rope_kv_launch_kwargs(bwd_kv),
        )  # fmt: skip
    if device == "cuda":
        torch.cuda.synchronize()
    for name, buf in (("o_key", kbuf), ("o_value", vbuf), ("d_kv", dkvbuf), ("d_emb", dembbuf)):
        _check_guards(name, buf)
    rope = rope_ref(pe.float(), c_tok.float(), s_tok.float())
    _close("o_key", o_key, torch.cat((kv[..., :kd].float(), rope.expand(T, H, EMB)), -1), dtype)
    _close("o_value", o_value, kv[..., kd:], dtype)
    _close("d_kv", d_kv, torch.cat((dk[..., :kd], dv), -1), dtype)
    pr = pe.float().requires_grad_(True)
    rope_ref(pr, c_tok.float(), s_tok.float()).expand(T, H, EMB).backward(dk[..., kd:].float())
    _close("d_emb", d_emb, pr.grad, dtype)


def run_case(spec: Spec, device: str) -> None:
    {"q": run_q_case, "kv": run_kv_case}[spec["kind"]](spec, device)


# ----------------------------------------------------------------------------- cpu (interpreter)

# Small fp32 cases, BLOCK_H forced (8 unless given); each fails on the unpatched base for the
# reason given. A partial block needs two or more blocks: H=5 only splits with BLOCK_H=4.
CPU_THD: Spec = {"fmt": "thd", "cu": THD_CU_CPU}
CPU_SBHD: Spec = {"fmt": "sbhd", "S": 10, "B": 3}


CPU_THD_CP: Spec = {"fmt": "thd", "cu": [0, 8, 24, 28, 44], "cp": [1, 2]}


def _cpu_case(
    kind: str,
    fmt: Spec,
    heads: int,
    k_dim: int,
    v_dim: int = 0,
    block_h: int = 8,
    tiling: dict[str, int] | None = None,
) -> Spec:
    return {"kind": kind, **fmt, "H": heads, "k_dim": k_dim, "v_dim": v_dim, "block_h": block_h,
            "dtype": "float32", **({"tiling": tiling} if tiling else {})}  # fmt: skip


CPU_CASES: dict[str, Spec] = {
    # partial last head block (20 = 8 + 8 + 4; 5 = 4 + 1), q kernel fwd + bwd
    "q_thd_H20": _cpu_case("q", CPU_THD, 20, 128),
    "q_sbhd_H5": _cpu_case("q", CPU_SBHD, 5, 192, block_h=4),
    # the same with tiles of several tokens: partial last token blocks (30 = 7*4 + 2 tokens in
    # sbhd, 36 = 4*8 + 4 in thd, whose tiles also span sequence boundaries)
    "q_sbhd_H5_tiles": _cpu_case("q", CPU_SBHD, 5, 192, block_h=4, tiling={"BLOCK_T": 4}),
    "q_thd_H20_tiles": _cpu_case("q", CPU_THD, 20, 128, tiling={"BLOCK_T": 8}),
    # thd with context parallelism (rank 1 of 2): per-token positions inside a token tile
    "q_thd_cp": _cpu_case("q", CPU_THD_CP, 20, 128, tiling={"BLOCK_T": 4}),
    # partial last head block, kv kernels fwd + bwd
    "kv_thd_H20": _cpu_case("kv", CPU_THD, 20, 128, 128),
    "kv_sbhd_H5": _cpu_case("kv", CPU_SBHD, 5, 128, 128, block_h=4),
    # k_dim not a power of two (full head blocks)
    "kv_thd_k192": _cpu_case("kv", CPU_THD, 8, 192, 128),
    # key-only kv (v_dim = 0), thd and sbhd
    "kv_thd_v0": _cpu_case("kv", CPU_THD, 8, 128, 0),
    "kv_sbhd_v0": _cpu_case("kv", CPU_SBHD, 16, 128, 0),
    # 3346fa8a2's in-place kernel options (upstream bf4e1db3), partial head and token blocks
    "q_thd_H20_inverse": {**_cpu_case("q", CPU_THD, 20, 128, tiling={"BLOCK_T": 8}),
                          "inverse": True},
    "q_sbhd_H5_remove_interleaving": {
        **_cpu_case("q", CPU_SBHD, 5, 192, block_h=4, tiling={"BLOCK_T": 4}),
        "remove_interleaving": True, "inverse": True},
}


def skip_without_modes(spec: Spec) -> None:
    """A case of the in-place kernel's ``inverse``/``remove_interleaving`` cannot exist on a
    tree whose kernel has no such options (1dcf0da: upstream added them in bf4e1db3)."""
    if any(spec.get(m) for m in MODES) and not mla_rope_has_modes(TREE):
        pytest.skip("the q kernel has no inverse/remove_interleaving options on this upstream "
                    "(added by upstream bf4e1db3, in 3346fa8a2)")


def _run_subprocess(spec: Spec) -> subprocess.CompletedProcess[str] | None:
    if any(spec.get(m) for m in MODES) and not mla_rope_has_modes(TREE):
        return None
    env = dict(os.environ, TRITON_INTERPRET="1")
    return subprocess.run(
        [sys.executable, str(HERE), json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def cpu_results() -> Iterator[dict[str, Future[subprocess.CompletedProcess[str] | None]]]:
    """Start all interpreter cases at once, two at a time (each is one subprocess)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {name: pool.submit(_run_subprocess, spec) for name, spec in CPU_CASES.items()}


@pytest.mark.cpu
@pytest.mark.parametrize("case", list(CPU_CASES))
def test_kernel_interpreter(
    case: str, cpu_results: dict[str, Future[subprocess.CompletedProcess[str] | None]]
) -> None:
    skip_without_modes(CPU_CASES[case])
    proc = cpu_results[case].result()
    assert proc is not None
    tail = (proc.stdout + proc.stderr)[-3000:]
    assert proc.returncode == 0, (
        f"case {case} {CPU_CASES[case]} failed (rc={proc.returncode}):\n{tail}"
    )


# ----------------------------------------------------------------------------- gpu (full matrix)

FMTS = {"sbhd": {"fmt": "sbhd", "S": 48, "B": 3}, "thd": {"fmt": "thd", "cu": THD_CU_GPU}}
DTYPES = ["float32", "bfloat16"]
HEADS = [32, 20, 5]
BLOCKS = [8, 4]
# q kernel tilings (tokens per tile): one token; 8 tokens (thd's 137 tokens end in a partial
# token block, and tiles span sequence boundaries); 32 tokens (sbhd's 144 = 4*32 + 16 too)
Q_TILINGS = {"t1": {"BLOCK_T": 1}, "t8": {"BLOCK_T": 8}, "t32": {"BLOCK_T": 32}}
# context parallelism: global sequence lengths divisible by 2 * cp_size (138 tokens at cp=2)
THD_CU_CP = [0, 64, 104, 200, 208, 280]


@pytest.mark.gpu
@pytest.mark.parametrize("tiling", list(Q_TILINGS))
@pytest.mark.parametrize("block_h", BLOCKS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("qk_dim", [128, 192])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("fmt", list(FMTS))
def test_q_gpu(fmt: str, heads: int, qk_dim: int, dtype: str, block_h: int, tiling: str) -> None:
    spec = {
        "kind": "q",
        **FMTS[fmt],
        "H": heads,
        "k_dim": qk_dim,
        "dtype": dtype,
        "block_h": block_h,
        "tiling": Q_TILINGS[tiling],
    }
    run_case(spec, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", [20, 5])
@pytest.mark.parametrize("fmt", list(FMTS))
@pytest.mark.parametrize("mode", ["inverse", "remove_interleaving", "both"])
def test_q_modes_gpu(mode: str, fmt: str, heads: int, dtype: str) -> None:
    """3346fa8a2's in-place kernel options (the DeepSeek-v4 attention's inverse rotation and
    non-interleaved output) with partial head and token blocks."""
    modes = {"inverse": True, "remove_interleaving": True} if mode == "both" else {mode: True}
    spec = {
        "kind": "q", **FMTS[fmt], "H": heads, "k_dim": 192, "dtype": dtype, "block_h": 4 if
        heads == 5 else 8, "tiling": Q_TILINGS["t8"], **modes,
    }  # fmt: skip
    skip_without_modes(spec)
    run_case(spec, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("cp", [(0, 2), (1, 2), (3, 4)])
@pytest.mark.parametrize(("kind", "tiling"), [*(("q", t) for t in Q_TILINGS), ("kv", "t1")])
def test_thd_cp_gpu(kind: str, tiling: str, cp: tuple[int, int]) -> None:
    """Context parallelism in thd: each token's cos/sin row is its position in the global
    sequence (the kv kernels' scalar token lookup and the q kernels' vector one agree)."""
    spec = {
        "kind": kind, "fmt": "thd", "cu": THD_CU_CP, "cp": list(cp), "H": 20, "k_dim": 192,
        "v_dim": 128, "dtype": "bfloat16", "block_h": 8, "tiling": Q_TILINGS[tiling],
    }  # fmt: skip
    run_case(spec, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("block_h", BLOCKS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("v_dim", [128, 0])
@pytest.mark.parametrize("k_dim", [128, 192])
@pytest.mark.parametrize("heads", HEADS)
@pytest.mark.parametrize("fmt", list(FMTS))
def test_kv_gpu(fmt: str, heads: int, k_dim: int, v_dim: int, dtype: str, block_h: int) -> None:
    spec = {
        "kind": "kv", **FMTS[fmt], "H": heads, "k_dim": k_dim, "v_dim": v_dim,
        "dtype": dtype, "block_h": block_h,
    }  # fmt: skip
    run_case(spec, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["q", "kv"])
def test_autotuned_gpu(kind: str) -> None:
    """The default autotune search (all BLOCK_H) picks a config that is correct for H=20."""
    spec = {"kind": kind, **FMTS["thd"], "H": 20, "k_dim": 128, "v_dim": 128, "dtype": "bfloat16"}
    run_case(spec, "cuda")


@pytest.mark.gpu
@pytest.mark.parametrize(("heads", "block_h"), [(20, 8), (5, 4)])
def test_kv_kernels_guard_tokens_gpu(heads: int, block_h: int) -> None:
    """Partial head blocks: kv kernels write nothing outside their outputs (guard tokens)."""
    spec = {
        "fmt": "thd", "cu": THD_CU_GPU, "H": heads, "k_dim": 128, "v_dim": 128,
        "dtype": "float32", "block_h": block_h,
    }  # fmt: skip
    run_kv_kernels_guarded(spec)


if __name__ == "__main__":
    _tree = os.environ.get("REBASECTL_TEST_TREE")
    if _tree:
        sys.path.insert(0, _tree)
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
    _device = (
        "cuda" if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1" else "cpu"
    )
    run_case(json.loads(sys.argv[1]), _device)
    print("ok")
