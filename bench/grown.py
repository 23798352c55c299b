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
import resource
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


CPU: list[float] = []  # CPU seconds (user + sys, git included) of each run, in order


def run(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """One rebasectl run: its wall seconds (and its CPU seconds appended to ``CPU``: on a
    shared machine the CPU figure says what the wall time would be on a quiet one)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "rebasectl", *args], cwd=cwd, env=ENV,
                          capture_output=True, check=False)
    took = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return took, proc


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
        cold, cold_cpu = [], []
        for n in range(opts.repeat):
            series = fresh(root, mirror, n)
            cold.append(bump(series, mirror)[0])
            cold_cpu.append(CPU[-1])
        series = root / "series-0"
        warm_runs, warm_cpu = [], []
        for _ in range(opts.repeat):
            warm_runs.append(bump(series, mirror))
            warm_cpu.append(CPU[-1])
        warm = [t for t, _ in warm_runs]
        proc = warm_runs[-1][1]
        data = json.loads(proc.stdout)
        failing = [p for p in data["patches"] if p["status"] in ("conflict", "blocked")]
        regions = {p["id"]: sum(len(c["regions"]) for c in p["conflicts"]) for p in failing}
        asked = list(regions) if opts.blame_all else [max(regions, key=lambda k: regions[k])]
        blames, blame_cpu = {}, {}
        for pid in asked:
            times, cpus = [], []
            for _ in range(opts.repeat):
                times.append(run(["blame", pid, "--to", TARGET], series)[0])
                cpus.append(CPU[-1])
            blames[pid], blame_cpu[pid] = statistics.median(times), statistics.median(cpus)
        slowest = max(blames, key=lambda k: blames[k])
    med = statistics.median
    rows = [("bump cold (s)", med(cold), med(cold_cpu), 20.0),
            ("bump warm (s)", med(warm), med(warm_cpu), 10.0),
            (f"blame {slowest} (s)", blames[slowest], blame_cpu[slowest], 5.0),
            ("stderr KB (terminal)", len(proc.stderr) / 1024, 0.0, 8.0)]
    print(f"{len(failing)} of {len(data['patches'])} patches fail; repeat {opts.repeat}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'':<62} {'wall':>7} {'cpu':>7}")
    for name, value, cpu, target in rows:
        print(f"{name:<62} {value:7.2f} {cpu:7.2f}  target < {target:5.1f}  "
              f"{'ok' if value < target else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
