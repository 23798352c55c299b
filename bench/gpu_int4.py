"""GPU benchmark of INT4 fake QAT (patch 7, int4-qat) against the memory roofline.

Case: 64 experts x 4096 x 1536 bf16 expert weights, group size 128. Compared: the fused Triton
kernel, ``torch.compile`` of the pure-torch reference and the eager reference. Bytes moved are
one read of w plus one write of w'; bandwidth is reported as a fraction of a large
device-to-device copy (bytes read + written), all timed with ``triton.testing.do_bench`` (median).
Bit-identity of the kernel (and of the compiled reference) against the eager reference is checked
in the same run.

The quantiser is loaded from the patched Megatron tree named by ``REBASECTL_TEST_TREE`` (default
``.rebasectl/tree``), straight from its file, so Megatron's package imports are not needed.

Usage: ``python bench/gpu_int4.py [--sweep] [--json PATH]`` (``--sweep`` also times kernel tilings).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

SHAPE = (64, 4096, 1536)
GROUP_SIZE = 128
DTYPE = torch.bfloat16
MODULE_PATH = "megatron/core/quantization/int4_fake_qat.py"


def _load_quantiser() -> ModuleType:
    repo = Path(__file__).resolve().parents[1]
    tree = Path(os.environ.get("REBASECTL_TEST_TREE", repo / ".rebasectl" / "tree"))
    path = tree / MODULE_PATH
    if not path.is_file():
        raise SystemExit(f"{path} not found: set REBASECTL_TEST_TREE to the patched tree")
    spec = importlib.util.spec_from_file_location("int4_fake_qat", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _median_ms(fn: Any) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, return_mode="median"))


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({4: torch.int32, 2: torch.int16}[t.element_size()])


def _row(name: str, nbytes: int, ms: float, copy_gbps: float) -> dict[str, Any]:
    gbps = nbytes / (ms * 1e-3) / 1e9
    return {
        "name": name,
        "bytes": nbytes,
        "median_ms": ms,
        "gbps": gbps,
        "frac_of_copy": gbps / copy_gbps,
    }


def measure_copy_gbps(nbytes: int = 2 * 1024**3) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src))
    return 2 * nbytes / (ms * 1e-3) / 1e9


def bench(copy_gbps: float) -> list[dict[str, Any]]:
    """Time the fused kernel, the compiled and the eager reference.

    Each row also carries ``bit_identical``: whether that variant's output equals the eager
    reference bit for bit (checked in this run, before timing).
    """
    qat = _load_quantiser()
    gen = torch.Generator(device="cuda").manual_seed(0)
    w = (torch.randn(SHAPE, device="cuda", generator=gen) * 0.02).to(DTYPE)
    nbytes = 2 * w.numel() * w.element_size()

    def eager() -> torch.Tensor:
        return qat.int4_fake_quantize_reference(w, GROUP_SIZE)

    compiled_ref = torch.compile(qat.int4_fake_quantize_reference)

    def compiled() -> torch.Tensor:
        return compiled_ref(w, GROUP_SIZE)

    def fused() -> torch.Tensor:
        return qat.int4_fake_quantize_triton(w, GROUP_SIZE)

    expected = _bits(eager())
    identical = {
        "fused": bool(torch.equal(_bits(fused()), expected)),
        "compiled": bool(torch.equal(_bits(compiled()), expected)),
    }
    rows = []
    for name, fn, ok in (
        ("int4_fake_qat_triton_fused", fused, identical["fused"]),
        ("int4_fake_qat_torch_compile_ref", compiled, identical["compiled"]),
        ("int4_fake_qat_torch_eager_ref", eager, True),
    ):
        row = _row(name, nbytes, _median_ms(fn), copy_gbps)
        row["bit_identical"] = ok
        rows.append(row)
    return rows


def sweep(copy_gbps: float) -> list[dict[str, Any]]:
    """Time kernel tilings (block_rows x groups_per_program x num_warps x native)."""
    qat = _load_quantiser()
    w = (torch.randn(SHAPE, device="cuda") * 0.02).to(DTYPE)
    nbytes = 2 * w.numel() * w.element_size()
    expected = _bits(qat.int4_fake_quantize_reference(w, GROUP_SIZE))
    rows = []
    configs = [
        (True, gpp, block_rows, num_warps)
        for gpp in (1, 2, 4, 8)
        for block_rows in (4, 8, 16, 32, 64)
        for num_warps in (2, 4, 8)
        if block_rows * gpp * GROUP_SIZE <= 16384
    ]
    configs += [(False, gpp, br, nw) for gpp in (1, 2) for br in (16, 32) for nw in (4, 8)]
    for native, gpp, block_rows, num_warps in configs:
        kw = dict(block_rows=block_rows, groups_per_program=gpp, num_warps=num_warps, native=native)
        out = qat.int4_fake_quantize_triton(w, GROUP_SIZE, **kw)
        ok = bool(torch.equal(_bits(out), expected))
        del out
        ms = _median_ms(lambda kw=kw: qat.int4_fake_quantize_triton(w, GROUP_SIZE, **kw))
        name = f"native={int(native)} gpp={gpp} rows={block_rows} warps={num_warps}"
        row = _row(name, nbytes, ms, copy_gbps)
        row["bit_identical"] = ok
        rows.append(row)
        _print([row], header=False)
    return rows


def _print(rows: list[dict[str, Any]], header: bool = True) -> None:
    if header:
        print(
            f"{'name':<44} {'bytes':>12} {'median_ms':>10} {'GB/s':>9} {'of copy':>8} {'bits':>5}"
        )
    for r in rows:
        print(
            f"{r['name']:<44} {r['bytes']:>12} {r['median_ms']:>10.4f} {r['gbps']:>9.1f} "
            f"{r['frac_of_copy']:>8.1%} {'ok' if r.get('bit_identical', True) else 'DIFF':>5}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="also time kernel tilings")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = parser.parse_args()
    copy_gbps = measure_copy_gbps()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", end="  ")
    import triton

    print(f"triton {triton.__version__}")
    print(f"copy bandwidth (read + write): {copy_gbps:.1f} GB/s")
    print(f"case: {SHAPE[0]} x {SHAPE[1]} x {SHAPE[2]} {DTYPE}, group {GROUP_SIZE}")
    rows = bench(copy_gbps)
    _print(rows)
    fused, compiled = rows[0], rows[1]
    print(
        f"fused: {fused['frac_of_copy']:.1%} of copy (target >= 80%), "
        f"{compiled['median_ms'] / fused['median_ms']:.2f}x faster than torch.compile "
        f"(target >= 1.2x)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"copy_gbps": copy_gbps, "rows": rows}, indent=1))
    if args.sweep:
        print("sweep of kernel tilings:")
        srows = sorted(sweep(copy_gbps), key=lambda r: r["median_ms"])
        print("sweep, fastest first:")
        _print(srows[:12])
    if not fused["bit_identical"]:
        raise SystemExit("FAIL: fused kernel is not bit-identical to the eager reference")


if __name__ == "__main__":
    main()
