"""Benchmark the tool against raw git on a real Megatron-LM mirror, as ratios from one run.

Each pair is run interleaved (ours, raw, ours, raw, ...) ``--repeat`` times on the same warm mirror;
the table gives medians, the ratio ours/raw and the peak RSS of each command (from wait4). Targets
(issue 9): apply <= 1.2x raw `git worktree add --detach` + `git am -3`; `check --apply` <= 0.5x
raw `git am` on a work tree; report < 2 s; bump with attribution < 5 s.

Usage: python bench/tool.py --mirror PATH [--series DIR] [--repeat 5]
The series defaults to this repository's patches/ + series.yaml.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERMETIC = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


@dataclass
class Sample:
    seconds: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def peak(self) -> float:
        return max(self.rss_mb)


def timed(cmds: Sequence[Sequence[str]], cwd: Path) -> tuple[float, float]:
    """Run commands one after another; (wall seconds, peak RSS MiB of any of them)."""
    env = {**os.environ, **HERMETIC}
    start = time.perf_counter()
    peak = 0.0
    for cmd in cmds:
        proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err = proc.stderr.read().decode() if proc.stderr else ""
            shown = " ".join(cmd)
            shown = shown if len(shown) < 300 else shown[:300] + " ..."
            raise SystemExit(f"benchmark command failed: {shown}\n{err[-2000:]}")
        peak = max(peak, usage.ru_maxrss / 1024)
    return time.perf_counter() - start, peak


def rebasectl(*args: str) -> list[str]:
    return [sys.executable, "-m", "rebasectl", *args]


def setup(mirror: Path, series: Path, work: Path) -> tuple[Path, Path, str, list[Path]]:
    """A copy of the series with a warm mirror, and a raw clone for the git side."""
    ours = work / "ours"
    ours.mkdir()
    shutil.copy(series / "series.yaml", ours / "series.yaml")
    shutil.copytree(series / "patches", ours / "patches")
    if (series / "tests" / "regression").is_dir():  # `check` wants the tests series.yaml names
        shutil.copytree(series / "tests" / "regression", ours / "tests" / "regression",
                        ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(rebasectl("-C", str(ours), "fetch", "--upstream", str(mirror)), check=True,
                   capture_output=True, env={**os.environ, **HERMETIC})
    raw = work / "raw.git"
    subprocess.run(["git", "clone", "-q", "--mirror", str(mirror), str(raw)], check=True)
    import yaml

    data = yaml.safe_load((series / "series.yaml").read_text())
    base = data["upstream"]["base"]
    patch_files = [ours / "patches" / p["file"] for p in data["patches"]]
    return ours, raw, base, patch_files


def bench_apply(ours: Path, raw: Path, base: str, patch_files: list[Path],
                work: Path) -> tuple[list[str], list[str]]:
    tree = work / "raw-tree"

    def ours_cmd() -> list[list[str]]:
        shutil.rmtree(ours / ".rebasectl" / "tree", ignore_errors=True)
        (ours / ".rebasectl" / "tree.json").unlink(missing_ok=True)
        subprocess.run(["git", "-C", str(ours / ".rebasectl" / "upstream.git"), "worktree",
                        "prune"], check=True)
        return [rebasectl("-C", str(ours), "apply")]

    def raw_cmd() -> list[list[str]]:
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(raw), "worktree", "prune"], check=True)
        return [["git", "-C", str(raw), "worktree", "add", "-q", "--detach", str(tree), base],
                ["git", "-C", str(tree), "am", "-q", "-3", "-k", *map(str, patch_files)]]

    return compare("apply (warm mirror) vs worktree add + am -3", ours_cmd, raw_cmd, work,
                   target="<= 1.2")


def bench_check(ours: Path, raw: Path, base: str, patch_files: list[Path],
                work: Path) -> tuple[list[str], list[str]]:
    tree = work / "raw-tree"

    def ours_cmd() -> list[list[str]]:
        return [rebasectl("-C", str(ours), "check", "--apply")]

    def raw_cmd() -> list[list[str]]:
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(raw), "worktree", "prune"], check=True)
        return [["git", "-C", str(raw), "worktree", "add", "-q", "--detach", str(tree), base],
                ["git", "-C", str(tree), "am", "-q", "-k", *map(str, patch_files)]]

    return compare("check --apply vs worktree add + am", ours_cmd, raw_cmd, work,
                   target="<= 0.5")


REPEAT = 5
ROWS: list[list[str]] = []


def compare(name: str, ours: Callable[[], list[list[str]]], raw: Callable[[], list[list[str]]],
            cwd: Path, target: str) -> tuple[list[str], list[str]]:
    a, b = Sample(), Sample()
    for _ in range(REPEAT):
        for sample, make in ((a, ours), (b, raw)):
            seconds, rss = timed(make(), cwd)
            sample.seconds.append(seconds)
            sample.rss_mb.append(rss)
    ratio = a.median / b.median
    row = [name, f"{a.median:.3f}", f"{b.median:.3f}", f"{ratio:.2f}", target,
           f"{a.peak:.0f}", f"{b.peak:.0f}"]
    ROWS.append(row)
    return row, []


def main() -> None:
    global REPEAT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, required=True)
    parser.add_argument("--series", type=Path, default=REPO)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", help="run only the benchmarks whose function name has this")
    args = parser.parse_args()
    REPEAT = args.repeat
    with tempfile.TemporaryDirectory(prefix="rebasectl-bench-") as tmp:
        work = Path(tmp)
        ours, raw, base, patch_files = setup(args.mirror.resolve(), args.series.resolve(), work)
        for bench in [bench_apply, bench_check, *EXTRA_BENCHES]:
            if args.only is None or args.only in bench.__name__:
                bench(ours, raw, base, patch_files, work)
    header = ["benchmark", "ours s", "raw s", "ratio", "target", "ours MiB", "raw MiB"]
    widths = [max(len(r[i]) for r in [header, *ROWS]) for i in range(len(header))]
    for row in [header, *ROWS]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))


# Other benchmarks (report, bump) register here: f(ours, raw, base, patch_files, work) -> None,
# appending their rows to ROWS (use `compare` or `timed`).
EXTRA_BENCHES: list[Callable[[Path, Path, str, list[Path], Path], object]] = []


def bench_report(ours: Path, raw: Path, base: str, patch_files: list[Path], work: Path) -> None:
    """report on a real 7-old / 6-new pair across 3714d81..1dcf0da (499 upstream commits; the
    pair of tests/integration/test_report_mirror.py) vs raw `git range-diff` of the same ranges.
    Target: report < 2 s absolute, peak RSS < 200 MB."""
    sys.path.insert(0, str(REPO))
    from tests.integration.test_report_mirror import build_pair

    clone, old, new = build_pair(raw, work / "report-clone")
    (work / "report-ws").mkdir()

    def ours_cmd() -> list[list[str]]:  # exit 1: the report has entries to review (expected)
        cmd = " ".join(rebasectl("-C", str(work / "report-ws"), "report", "--repo", str(clone),
                                 "--old-range", old, "--new-range", new, "-o",
                                 str(work / "r.md")))
        return [["sh", "-c", f"{cmd}; test $? -le 1"]]

    def raw_cmd() -> list[list[str]]:
        return [["git", "-C", str(clone), "range-diff", old, new]]

    compare("report (7 old + 6 new, 499 upstream) vs range-diff", ours_cmd, raw_cmd, work,
            target="< 2 s")


EXTRA_BENCHES.append(bench_report)


def bench_bump(ours: Path, raw: Path, base: str, patch_files: list[Path], work: Path) -> None:
    """bump with attribution across 3714d81..1dcf0da (499 upstream commits) of the old 5-patch
    series of tests/integration/test_bump_megatron.py (3 conflicts, 1 upstreamed, 1 clean; exit
    1 is the expected outcome) vs raw git trying each patch alone with `git apply --cached
    --3way` on 1dcf0da (no attribution). Target: bump < 5 s on 2 cores."""
    sys.path.insert(0, str(REPO))
    from tests.integration.test_bump_megatron import NEW, build_old_series

    root = work / "bump"
    root.mkdir()
    fork, old_base, tip = build_old_series(raw, root)
    series = root / "series"
    series.mkdir()
    env = {**os.environ, **HERMETIC}
    for args in (("import", f"{old_base}..{tip}", "--repo", str(fork)),
                 ("fetch", "--upstream", str(raw))):
        subprocess.run(rebasectl("-C", str(series), *args), check=True, capture_output=True,
                       env=env)
    files = sorted((series / "patches").glob("*.patch"))
    index = root / "raw-index"

    def ours_cmd() -> list[list[str]]:
        cmd = " ".join(rebasectl("-C", str(series), "bump", "--to", NEW, "--json",
                                 "--artifacts", str(root / "art")))
        return [["sh", "-c", f"{cmd} > /dev/null; test $? -eq 1"]]

    def raw_cmd() -> list[list[str]]:
        steps = "; ".join(f"git read-tree {NEW}; git apply --cached --3way {f} 2>/dev/null"
                          for f in files)
        return [["sh", "-c", f"export GIT_INDEX_FILE={index}; cd {raw}; {steps}; true"]]

    compare("bump + attribution (5 patches, 499 upstream) vs apply -3 each", ours_cmd, raw_cmd,
            work, target="< 5 s")


EXTRA_BENCHES.append(bench_bump)


def bench_bump_scaling(ours: Path, raw: Path, base: str, patch_files: list[Path],
                       work: Path) -> None:
    """bump of this repository's series from its base to upstream commits ~100, ~500 and ~1500
    first-parent commits later (the mirror's dev), one run each: time per upstream commit must
    not grow with the range (issue 9: no worse than linear)."""
    chain = subprocess.run(["git", "-C", str(raw), "rev-list", "--first-parent", "--reverse",
                            f"{base}..dev"], check=True, capture_output=True,
                           text=True).stdout.split()
    def count_to(rev: str) -> int:
        return int(subprocess.run(["git", "-C", str(raw), "rev-list", "--count", f"{base}..{rev}"],
                                  check=True, capture_output=True, text=True).stdout)

    for want in (100, 500, 1500):
        lo, hi = 0, len(chain) - 1  # first-parent position whose range holds >= want commits
        while lo < hi:
            mid = (lo + hi) // 2
            if count_to(chain[mid]) >= want:
                hi = mid
            else:
                lo = mid + 1
        target = chain[lo]
        count = count_to(target)
        shutil.rmtree(work / "scale", ignore_errors=True)
        shutil.copytree(ours, work / "scale", ignore=shutil.ignore_patterns("tree", "tree.json",
                                                                          "base-tree"))
        cmd = " ".join(rebasectl("-C", str(work / "scale"), "bump", "--to", target, "--json",
                                 "--artifacts", str(work / "scale-art")))
        seconds, rss = timed([["sh", "-c", f"{cmd} > /dev/null; test $? -le 1"]], work)
        ROWS.append([f"bump scaling: {count} upstream commits", f"{seconds:.3f}", "",
                     f"{1000 * seconds / count:.1f} ms/commit", "linear", f"{rss:.0f}", ""])


EXTRA_BENCHES.append(bench_bump_scaling)


def linear_history(raw: Path, root: Path, count: int) -> tuple[Path, str, str]:
    """A clone of the mirror with a straight line of ``count`` real upstream changes: commit k
    has the tree of the k-th non-merge commit of 3714d81..3346fa8a2 in topological order (its
    binary files kept as at the start: rebasectl carries text only), so its patch is what that
    commit (or the branch switch before it) changed. Returns (clone, base, tip)."""
    clone = root / "linear.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(raw), str(clone)], check=True)

    def git(*args: str, stdin: bytes | None = None, **env: str) -> str:
        return subprocess.run(["git", "-C", str(clone), *args], input=stdin, check=True,
                              capture_output=True, env={**os.environ, **HERMETIC, **env}
                              ).stdout.decode(errors="replace").strip()

    shas = git("rev-list", "--no-merges", "--topo-order", "--reverse",
               "3714d81..3346fa8a2").split()[: count + 1]
    index = str(root / "linear-index")
    binary: set[str] = set()
    parent, prev_tree = shas[0], git("rev-parse", f"{shas[0]}^{{tree}}")
    for sha in shas[1:]:
        tree = _text_tree(git, index, sha, shas[0], binary)
        found = {ln.split("\t", 2)[2] for ln in git("diff", "--numstat", "--no-renames",
                                                     prev_tree, tree).splitlines()
                 if ln.startswith("-\t-\t")}
        if found:  # binary changes stay out of the line: pinned to the first tree's content
            binary |= found
            tree = _text_tree(git, index, sha, shas[0], binary)
        msg = git("log", "-1", "--format=%B", sha).encode()
        parent, prev_tree = git("commit-tree", tree, "-p", parent, stdin=msg), tree
    return clone, shas[0], parent


def _text_tree(git: Callable[..., str], index: str, sha: str, first: str,
               binary: set[str]) -> str:
    """``sha``'s tree with the ``binary`` paths as they are in ``first``."""
    git("read-tree", sha, GIT_INDEX_FILE=index)
    if binary:
        pinned = "".join(f"{ln}\0" for ln in git("ls-tree", "-r", "-z", first, "--",
                                                 *sorted(binary)).split("\0") if ln)
        removals = "".join(f"0 {'0' * 40}\t{p}\0" for p in sorted(binary))
        git("update-index", "-z", "--index-info", stdin=(removals + pinned).encode(),
            GIT_INDEX_FILE=index)
    return git("write-tree", GIT_INDEX_FILE=index)


def bench_large_series(ours: Path, raw: Path, base: str, patch_files: list[Path],
                       work: Path) -> None:
    """A 500-patch series (500 real upstream changes in a line): import and export against
    `git format-patch` of the same range (<= 2x), status (< 0.5 s), apply against `git worktree
    add` + `git am` of the same patches (<= 1.2x), peak memory (< 200 MB)."""
    root = work / "large"
    root.mkdir()
    clone, lbase, tip = linear_history(raw, root, 500)
    series = root / "series"
    series.mkdir()
    out = root / "fp"

    def import_cmd() -> list[list[str]]:
        shutil.rmtree(series, ignore_errors=True)
        series.mkdir()
        return [rebasectl("-C", str(series), "import", f"{lbase}..{tip}", "--repo", str(clone))]

    def format_patch() -> list[list[str]]:
        shutil.rmtree(out, ignore_errors=True)
        return [["git", "-C", str(clone), "format-patch", "-q", "-o", str(out),
                 f"{lbase}..{tip}"]]

    compare("large: import 500 vs format-patch", import_cmd, format_patch, work, "<= 2")
    seconds, rss = timed([rebasectl("-C", str(series), "status")], work)
    ROWS.append(["large: status (500 patches)", f"{seconds:.3f}", "", "", "< 0.5 s",
                 f"{rss:.0f}", ""])
    subprocess.run(rebasectl("-C", str(series), "fetch", "--upstream", str(clone)), check=True,
                   capture_output=True, env={**os.environ, **HERMETIC})
    tree = root / "raw-tree"
    # git am stops at an empty patch (git < 2.43 has no --empty=keep): it gets the others
    # (an empty commit's file ends in export's signature, where the others have a diff)
    patches = [p for p in sorted((series / "patches").glob("*.patch"))
               if not p.read_bytes().endswith(b"\n-- \nrebasectl\n")]

    def apply_cmd() -> list[list[str]]:
        shutil.rmtree(series / ".rebasectl" / "tree", ignore_errors=True)
        (series / ".rebasectl" / "tree.json").unlink(missing_ok=True)
        subprocess.run(["git", "-C", str(series / ".rebasectl" / "upstream.git"), "worktree",
                        "prune"], check=True)
        return [rebasectl("-C", str(series), "apply")]

    def am_cmd() -> list[list[str]]:
        shutil.rmtree(tree, ignore_errors=True)
        subprocess.run(["git", "-C", str(clone), "worktree", "prune"], check=True)
        return [["git", "-C", str(clone), "worktree", "add", "-q", "--detach", str(tree), lbase],
                ["git", "-C", str(tree), "am", "-q", "-3", "-k", *map(str, patches)]]

    compare("large: apply 500 vs worktree add + am -3", apply_cmd, am_cmd, work, "<= 1.2")
    compare("large: export 500 (unchanged) vs format-patch",
            lambda: [rebasectl("-C", str(series), "export")], format_patch, work, "<= 2")


EXTRA_BENCHES.append(bench_large_series)


if __name__ == "__main__":
    main()
