"""Time `rebasectl report` on the maintainers' June bump pair (issue 26: under 5 s).

    python bench/report_june.py --mirror PATH [--repeat 3]

Runs the report (``--old-range 1dcf0da..miles-main-20260619 --new-range
3346fa8a2..miles-main-20260622 --repo PATH --format json``) ``--repeat`` times and prints, per run
and as the median, the wall time and the CPU time of rebasectl and every git it started (from
wait4's rusage), plus the machine's load average: on a shared machine the wall time is mostly
waiting for a core, the CPU time is what the report costs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

OLD = "1dcf0da..miles-main-20260619"
NEW = "3346fa8a2..miles-main-20260622"


def once(mirror: Path, work: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree) of one report."""
    args = [sys.executable, "-m", "rebasectl", "-C", str(work), "report", "--old-range", OLD,
            "--new-range", NEW, "--repo", str(mirror), "--format", "json"]
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.execv(args[0], args)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # 1: entries to review (a report)
        raise SystemExit(f"report failed (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rebasectl-bench-") as tmp:
        walls, cpus = [], []
        for k in range(opts.repeat):
            wall, cpu = once(opts.mirror.resolve(), Path(tmp))
            walls.append(wall)
            cpus.append(cpu)
            print(f"run {k + 1}: wall {wall:.2f} s, cpu {cpu:.2f} s, "
                  f"load {os.getloadavg()[0]:.1f}")
    print(f"median: wall {statistics.median(walls):.2f} s, cpu {statistics.median(cpus):.2f} s "
          f"(target: under 5 s)")


if __name__ == "__main__":
    main()
