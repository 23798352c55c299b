"""Time budgets that used to be asserted inside the functional tests, measured here instead.

A wall-time or CPU-time assertion in the test suite fails on a busy machine for no fault of the
code (issue 21: a 4 MB series.yaml check asserted under 4.0 s of CPU took 4.5 s at load 8), so
the tests assert only behaviour and this script measures the time, each case on the same inputs
the tests build, in a real ``python -m rebasectl`` process (CPU of the process and its git
children from wait4, wall from the clock):

* ``large-series-yaml``: ``check`` of a 4 MB series.yaml (30,000 entries, a duplicate file):
  budget 4 s of CPU (tests/integration/test_cli_contract.py checks the answer);
* ``synthetic-bump``: ``bump`` across 520 synthetic upstream commits with reverts, a merge and a
  re-land: budget 8 s wall (tests/integration/test_bump_synthetic.py checks the answer);
* ``megatron-bump``: ``bump`` with attribution of a five-patch fork across 499 real Megatron-LM
  commits: budget 8 s wall (tests/integration/test_bump_megatron.py; needs ``--mirror``).

Usage: python bench/budgets.py [--mirror PATH] [--only NAME] [--repeat 3]
Prints one row per case (median of the repeats) and exits 1 when a median is over its budget.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

Case = Callable[[Path, "Path | None"], tuple[Path, list[str]]]


def hermetic(home: Path) -> None:
    """The tests' hermetic git (tests/conftest.py), for this process and its children."""
    from tests.conftest import _HERMETIC

    home.mkdir(parents=True, exist_ok=True)
    (home / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    os.environ.update(_HERMETIC, HOME=str(home), GIT_CONFIG_GLOBAL=str(home / "gitconfig"))


def measure(workdir: Path, args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the process and its children, exit code) of one rebasectl run."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rebasectl", "-C", str(workdir), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def large_series_yaml(root: Path, mirror: Path | None) -> tuple[Path, list[str]]:
    from tests.sfix import make

    sc = make(root)
    entry = ("- id: p{i}\n  file: 0001-change-a-line-3.patch\n  title: t\n  kind: fix\n"
             "  why: ''\n  upstream: null\n  drop_when: null\n  absorbs: []\n  tests: []\n")
    with (sc.series / "series.yaml").open("a") as fh:
        for i in range(30000):
            fh.write(entry.format(i=i))
    return sc.series, ["check"]


def synthetic_bump(root: Path, mirror: Path | None) -> tuple[Path, list[str]]:
    from tests.harness.cli import ok
    from tests.integration.test_bump_synthetic import build

    repo, ev, sha = build(root)
    series = root / "series"
    series.mkdir()
    ok(series, "import", f"{sha[ev['base']]}..{sha[ev['fork']]}", "--repo", str(repo))
    ok(series, "fetch", "--upstream", str(repo))
    return series, ["bump", "--to", sha[ev["tip"]], "--json"]


def megatron_bump(root: Path, mirror: Path | None) -> tuple[Path, list[str]]:
    from tests.harness.cli import ok
    from tests.integration.test_bump_megatron import NEW, build_old_series

    if mirror is None:
        raise SystemExit("megatron-bump needs --mirror PATH (a Megatron-LM mirror)")
    fork, base, tip = build_old_series(mirror, root)
    series = root / "series"
    series.mkdir()
    ok(series, "import", f"{base}..{tip}", "--repo", str(fork))
    ok(series, "fetch", "--upstream", str(mirror))
    return series, ["bump", "--to", NEW, "--json", "--artifacts", str(root / "artifacts")]


# name: (builder, budget seconds, "cpu" or "wall")
CASES: dict[str, tuple[Case, float, str]] = {
    "large-series-yaml": (large_series_yaml, 4.0, "cpu"),
    "synthetic-bump": (synthetic_bump, 8.0, "wall"),
    "megatron-bump": (megatron_bump, 8.0, "wall"),
}


def run_case(name: str, tmp: Path, mirror: Path | None, repeat: int) -> tuple[float, bool]:
    """The median measure of one case over ``repeat`` runs on one built input; within budget?"""
    build, budget, kind = CASES[name]
    workdir, args = build(tmp / name, mirror)
    samples = []
    for _ in range(repeat):
        wall, cpu, code = measure(workdir, args)
        assert code in (0, 1, 2), f"{name}: exit {code}"
        samples.append(cpu if kind == "cpu" else wall)
    median = statistics.median(samples)
    return median, median <= budget


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path)
    parser.add_argument("--only", help="run only the cases whose name has this")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    mirror = args.mirror.resolve() if args.mirror else None
    names = [n for n in CASES if (args.only or "") in n
             and (mirror is not None or n != "megatron-bump")]
    failed = False
    load = os.getloadavg()[0]
    print(f"load {load:.2f}; median of {args.repeat}")
    with tempfile.TemporaryDirectory(prefix="rebasectl-budgets-") as tmp:
        hermetic(Path(tmp) / "home")
        for name in names:
            median, within = run_case(name, Path(tmp), mirror, args.repeat)
            _, budget, kind = CASES[name]
            print(f"{name:20} {median:6.2f} s {kind:4}  budget {budget:.1f} s  "
                  f"{'ok' if within else 'OVER'}")
            failed |= not within
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
