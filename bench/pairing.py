"""The report's pairing at scale: two synthetic ranges of N commits each (tests/pairing_data.py).

Times loading both ranges as changes (one ``git log`` for the diffs, patch-ids, parsing) and the
pairing itself, with the candidates pruned (what ``report`` runs) and, with ``--exhaustive``,
comparing every old patch with every new one (the old way: 3,000 x 3,000 ran for minutes).
Target (issue 21): 5,000 x 5,000 commits paired in under a minute.

Usage: python bench/pairing.py [--n 5000] [--exhaustive] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rebasectl.git import Repo  # noqa: E402
from rebasectl.report import lineage  # noqa: E402
from tests.pairing_data import build  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--exhaustive", action="store_true")
    ap.add_argument("--keep", type=Path, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-pairing-") as tmp:
        where = args.keep or Path(tmp) / "repo.git"
        t0 = time.perf_counter()
        ranges = build(where, args.n)
        t1 = time.perf_counter()
        git = Repo(where)
        old = lineage.load_changes(git, "old", ranges.old, None)
        new = lineage.load_changes(git, "new", ranges.new, None)
        t2 = time.perf_counter()
        groups = lineage.pair(git, old, new, ranges.old_base, ranges.new_base, replay=False,
                              exhaustive=args.exhaustive)
        t3 = time.perf_counter()
        git.close()
    statuses = Counter(str(g.status) for g in groups)
    print(f"{len(old)} x {len(new)} commits; build {t1 - t0:.1f} s, load {t2 - t1:.1f} s, "
          f"pair{' (exhaustive)' if args.exhaustive else ''} {t3 - t2:.1f} s, "
          f"load + pair {t3 - t1:.1f} s")
    print("groups:", dict(sorted(statuses.items())))


if __name__ == "__main__":
    main()
