"""CPU seconds per test, for finding what makes the suite slow on a busy machine.

Wall time per test (``--durations``) says little when other work shares the two cores; the CPU a
test used does not depend on the load (much). This pytest plugin records, for each test, the CPU
of the test process and of the processes it waited for (git, ``python -m rebasectl``, pytest,
chromium, torchrun), set-up and tear-down included, and writes one ``nodeid<TAB>cpu<TAB>wall``
line per test to ``$CPU_PER_TEST_DIR/<xdist worker>.tsv``; ``--summary DIR`` adds them up.

    mkdir -p /tmp/cpu && CPU_PER_TEST_DIR=/tmp/cpu PYTHONPATH=bench /usr/bin/time -v \\
        python -m pytest tests -n 2 -p cpu_per_test --ignore=tests/regression \\
        --deselect tests/integration/test_random_kill.py
    python bench/cpu_per_test.py --summary /tmp/cpu

The sum over tests is below the run's total CPU (``/usr/bin/time``'s user + sys): start-up and
collection of each process are in no test.
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_rows: list[tuple[str, float, float]] = []


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    waited = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + waited.ru_utime + waited.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    cpu, wall = _cpu(), time.perf_counter()
    yield
    _rows.append((item.nodeid, _cpu() - cpu, time.perf_counter() - wall))


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get("CPU_PER_TEST_DIR")
    if not folder or not _rows:
        return
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    lines = "".join(f"{node}\t{cpu:.3f}\t{wall:.3f}\n" for node, cpu, wall in _rows)
    (Path(folder) / f"{name}.tsv").write_text(lines)


def summary(folder: Path, files: int = 25, tests: int = 40) -> str:
    """The total, the files and the tests that used the most CPU."""
    rows = [line.split("\t") for p in sorted(folder.glob("*.tsv"))
            for line in p.read_text().splitlines()]
    per_file: dict[str, float] = defaultdict(float)
    for node, cpu, _ in rows:
        per_file[node.split("::")[0]] += float(cpu)
    out = [f"{len(rows)} tests, {sum(float(r[1]) for r in rows):.1f} s CPU in tests"]
    out += [f"{cpu:7.2f}  {name}" for name, cpu in
            sorted(per_file.items(), key=lambda kv: -kv[1])[:files]]
    out.append("")
    out += [f"{float(cpu):7.2f} cpu {float(wall):7.2f} wall  {node}" for node, cpu, wall in
            sorted(rows, key=lambda r: -float(r[1]))[:tests]]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", type=Path, required=True, metavar="DIR")
    args = parser.parse_args()
    print(summary(args.summary))


if __name__ == "__main__":
    main()
