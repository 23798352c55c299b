"""The GPU kernels of the patched tree against the H200 memory roofline, in one run.

Measures the device-to-device copy bandwidth once (bytes read + written, median of
``triton.testing.do_bench``), then runs the RoPE (bench/gpu_rope.py) and INT4 fake-QAT
(bench/gpu_int4.py) benchmarks against it and prints one table: bytes that must move, median ms,
GB/s and the fraction of copy. Trees: ``REBASECTL_TEST_TREE`` (patched) and ``BENCH_BASE_TREE``
(upstream, for the before/after RoPE rows). Writes the rows as JSON to ``--json FILE`` too.

``--graph`` times the RoPE rows by CUDA graph replay (gpu_rope.GraphTimer) instead of do_bench.

Usage: REBASECTL_TEST_TREE=... BENCH_BASE_TREE=... python bench/gpu_kernels.py [--graph]
[--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_int4  # noqa: E402
import gpu_rope  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--graph", action="store_true")
    args = parser.parse_args()
    gpu_rope.GRAPH = args.graph
    copy = gpu_rope.measure_copy_gbps()
    rows: list[dict[str, Any]] = [{"name": "device copy (read+write)", "bytes": 1 << 30,
                                   "median_ms": None, "gbps": copy, "frac_of_copy": 1.0}]
    rows += gpu_rope.bench(copy)
    rows += gpu_int4.bench(copy)
    width = max(len(r["name"]) for r in rows)
    print(f"{'kernel'.ljust(width)}  {'bytes':>12}  {'median ms':>9}  {'GB/s':>7}  {'of copy':>7}")
    for r in rows:
        ms = "" if r["median_ms"] is None else f"{r['median_ms']:.4f}"
        print(f"{r['name'].ljust(width)}  {r['bytes']:>12}  {ms:>9}  {r['gbps']:>7.0f}  "
              f"{r['frac_of_copy']:>7.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str))


if __name__ == "__main__":
    main()
