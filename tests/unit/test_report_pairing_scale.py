"""The report's pairing prunes its candidates (patch-id, inverted indexes of lines, files and
lineage, a size bound on lines) and must pair exactly as comparing every old patch with every
new one does: same groups, statuses and evidence, on synthetic ranges built to exercise every
rule (tests/pairing_data.py: carried, dropped, changed, folded and new commits, hot files) and
on real Megatron-LM ranges. How fast it is lives in bench/pairing.py (5,000 x 5,000 commits),
not here: these tests count comparisons, never seconds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from rebasectl.git import Repo
from rebasectl.report import lineage
from tests.harness.git import Repo as SynthRepo
from tests.pairing_data import build
from tests.unit import report_pair


def groups_of(git: Repo, old: list[lineage.Change], new: list[lineage.Change], old_base: str,
              new_base: str, exhaustive: bool) -> list[tuple[Any, ...]]:
    groups = lineage.pair(git, old, new, old_base, new_base, replay=False,
                          exhaustive=exhaustive)
    return [(g.old, g.new, g.status, g.evidence) for g in groups]


def compare(git: Repo, old_commits: list[str], new_commits: list[str], old_base: str,
            new_base: str) -> tuple[list[tuple[Any, ...]], int, int]:
    """Pruned and exhaustive pairings (asserted equal) and how many pairs each compared."""
    old = lineage.load_changes(git, "old", old_commits, None)
    new = lineage.load_changes(git, "new", new_commits, None)
    counted: dict[bool, int] = {}
    results = {}
    real = lineage.similarity
    for exhaustive in (False, True):
        calls = [0]

        def counting(o: lineage.Change, n: lineage.Change, calls: list[int] = calls
                     ) -> lineage.Similarity:
            calls[0] += 1
            return real(o, n)

        lineage.similarity = counting  # type: ignore[assignment]
        try:
            results[exhaustive] = groups_of(git, old, new, old_base, new_base, exhaustive)
        finally:
            lineage.similarity = real
        counted[exhaustive] = calls[0]
    assert results[False] == results[True]
    return results[False], counted[False], counted[True]


@pytest.mark.parametrize("seed", [7, 11])
def test_pruned_pairing_equals_exhaustive_on_synthetic_ranges(tmp_path: Path,
                                                              seed: int) -> None:
    ranges = build(tmp_path / "r.git", 300, seed=seed)
    git = Repo(ranges.repo)
    groups, pruned, exhaustive = compare(git, ranges.old, ranges.new, ranges.old_base,
                                         ranges.new_base)
    statuses = {g[2] for g in groups}
    # the data reaches every rule the pruning must keep
    assert {"identical", "equivalent", "modified", "merged", "dropped", "new"} <= statuses
    assert pruned * 20 < exhaustive, (pruned, exhaustive)
    git.close()


def test_pruned_pairing_equals_exhaustive_on_the_report_fixture(tmp_path: Path) -> None:
    """The fixed pair every report golden is made from (moved, modified, folded by lineage,
    dropped, new, empty)."""
    repo = SynthRepo(tmp_path / "pair")
    base1, base2 = report_pair._upstream(repo)
    old, detach_date = report_pair._old(repo, base1)
    new = report_pair._new(repo, base2, detach_date)
    git = Repo(repo.path)
    groups, _, _ = compare(git, old, new, base1, base2)
    assert {"identical", "modified", "dropped", "new", "empty"} <= {g[2] for g in groups}
    git.close()


def _range(mirror: Path, spec: str) -> list[str]:
    out = subprocess.run(["git", "-C", str(mirror), "rev-list", "--reverse", "--no-merges",
                          spec], capture_output=True, text=True, check=True).stdout
    return out.split()


def test_pruned_pairing_equals_exhaustive_on_megatron(mirror_path: Path) -> None:
    """Real upstream commits: two overlapping windows of dev (the shared ones pair by
    patch-id, the rest are dropped or new with a nearest candidate) and the miles branches,
    two rebases of the same downstream series."""
    git = Repo(mirror_path)
    dev = _range(mirror_path, "dev")
    old, new = dev[-160:-40], dev[-120:]
    # one base for both: the upstreamed check (pickaxe over the bases' range, the same in both
    # pairings) is not what is compared here
    groups, pruned, exhaustive = compare(git, old, new, f"{old[0]}~1", f"{old[0]}~1")
    assert {"identical", "dropped", "new"} <= {g[2] for g in groups}
    assert pruned * 5 < exhaustive, (pruned, exhaustive)
    for a, b in (("miles-20260218", "miles-main-20260619"),
                 ("miles-main-20260619", "miles-main-20260622")):
        base_a = subprocess.run(["git", "-C", str(mirror_path), "merge-base", "dev", a],
                                capture_output=True, text=True, check=True).stdout.strip()
        base_b = subprocess.run(["git", "-C", str(mirror_path), "merge-base", "dev", b],
                                capture_output=True, text=True, check=True).stdout.strip()
        groups, _, _ = compare(git, _range(mirror_path, f"{base_a}..{a}"),
                               _range(mirror_path, f"{base_b}..{b}"), base_a, base_b)
        assert groups
    git.close()
