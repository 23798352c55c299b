"""Benchmark a grown series' bump: miles' 24-patch June series onto 3346fa8a2 (issue 22).

cold: a new series folder (no ``.rebasectl``: bump clones its mirror from ``--mirror`` as a user's
first bump does) and no result of an earlier run; warm: the same folder again (mirror and OS caches
warm; artifacts removed, so nothing of the earlier run is reused). blame: one patch, warm (default
the one with the most conflict regions; ``--blame-all`` times every failing patch and reports the
slowest). Targets: bump < 10 s warm, < 20 s cold; blame < 5 s; terminal stderr <= 8 KB.
Each figure is the median of ``--repeat`` runs (cold runs each start from a fresh folder).

Usage: python bench/grown.py --mirror PATH [--repeat 3] [--blame-all]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANGE = "1dcf0da..miles-main-20260619"
TARGET = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"
ENV = {**os.environ, "GITHUB_ACTIONS": "", "REBASECTL_ANNOTATE": ""}  # a terminal run


def run(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rebasectl", *args], cwd=cwd, env=ENV,
                          capture_output=True, check=False)
    return time.perf_counter() - start, proc


def fresh(root: Path, mirror: Path, n: int) -> Path:
    series = root / f"series-{n}"
    series.mkdir()
    _, proc = run(["import", RANGE, "--repo", str(mirror)], series)
    assert proc.returncode == 0, proc.stderr.decode()
    return series


def bump(series: Path, mirror: Path) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    shutil.rmtree(series / "art", ignore_errors=True)
    took, proc = run(["bump", "--to", TARGET, "--upstream", str(mirror), "--artifacts", "art",
                      "--json"], series)
    assert proc.returncode == 1, proc.stderr.decode()[-2000:]
    return took, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--blame-all", action="store_true")
    opts = ap.parse_args()
    mirror = opts.mirror.resolve()
    with tempfile.TemporaryDirectory(prefix="rebasectl-grown-") as tmp:
        root = Path(tmp)
        cold = [bump(fresh(root, mirror, n), mirror)[0] for n in range(opts.repeat)]
        series = root / "series-0"
        warm_runs = [bump(series, mirror) for _ in range(opts.repeat)]
        warm = [t for t, _ in warm_runs]
        proc = warm_runs[-1][1]
        data = json.loads(proc.stdout)
        failing = [p for p in data["patches"] if p["status"] in ("conflict", "blocked")]
        regions = {p["id"]: sum(len(c["regions"]) for c in p["conflicts"]) for p in failing}
        asked = list(regions) if opts.blame_all else [max(regions, key=lambda k: regions[k])]
        blames = {}
        for pid in asked:
            times = [run(["blame", pid, "--to", TARGET], series)[0] for _ in range(opts.repeat)]
            blames[pid] = statistics.median(times)
        slowest = max(blames, key=lambda k: blames[k])
    rows = [("bump cold", statistics.median(cold), 20.0), ("bump warm", statistics.median(warm),
                                                           10.0),
            (f"blame {slowest}", blames[slowest], 5.0),
            ("stderr KB (terminal)", len(proc.stderr) / 1024, 8.0)]
    print(f"{len(failing)} of {len(data['patches'])} patches fail; repeat {opts.repeat}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, value, target in rows:
        print(f"{name:<60} {value:7.2f}  target < {target:5.1f}  "
              f"{'ok' if value < target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
