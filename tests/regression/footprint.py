"""Measure the series' footprint on upstream and how it replays on a later upstream.

    python tests/regression/footprint.py [--mirror PATH] [--onto REV] [--series DIR] [--json]

Per patch (read from series.yaml + patches/ of --series, default: this checkout):

- upstream files: files the patch modifies or deletes that exist in upstream (new files are
  counted apart: they cannot conflict with upstream edits);
- upstream lines: lines removed from and added to those upstream files (a deleted file counts
  all its lines);
- replay on --onto (default 3346fa8a2, the June 2026 bump): the series is replayed in order with
  ``git am -3`` on a scratch clone of the mirror (which also gets the patched blobs, so the
  three-way fallback has every preimage); a patch that stops is recorded with its conflicting
  files and skipped (``git am --skip``), and the replay goes on with the next one.

Not a test (pytest does not collect it). Needs only git and Python.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MIRROR = Path("/work/shared/upstream/megatron-lm.git")
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "footprint",
    "GIT_AUTHOR_EMAIL": "footprint@localhost",
    "GIT_COMMITTER_NAME": "footprint",
    "GIT_COMMITTER_EMAIL": "footprint@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": tempfile.gettempdir(),
}


def git(cwd: Path, *args: str, check: bool = True, input: str | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=ENV, text=True, capture_output=True, input=input
    )
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def read_series(series_dir: Path) -> tuple[str, list[tuple[str, Path]]]:
    """(base, [(id, patch path)]) from series.yaml, without a YAML dependency."""
    text = (series_dir / "series.yaml").read_text()
    base = re.search(r"^\s+base:\s*(\S+)", text, re.M).group(1)
    ids = re.findall(r"^- id:\s*(\S+)\n\s+file:\s*(\S+)", text, re.M)
    return base, [(pid, series_dir / "patches" / fname) for pid, fname in ids]


def patch_stats(patch: Path, base_files: set[str]) -> dict:
    """Files and +/- lines of one mbox patch, split by whether the file exists upstream."""
    files: dict[str, list[int]] = {}
    current = None
    for line in patch.read_text().splitlines():
        m = re.match(r"^diff --git a/(\S+) b/(\S+)$", line)
        if m:
            current = m.group(1)
            files[current] = [0, 0]
            continue
        if current is None or line.startswith(("+++ ", "--- ")):
            continue
        if line.startswith("+"):
            files[current][0] += 1
        elif line.startswith("-"):
            files[current][1] += 1
    upstream = {f: v for f, v in files.items() if f in base_files}
    new = {f: v for f, v in files.items() if f not in base_files}
    return {
        "upstream_files": sorted(upstream),
        "upstream_added": sum(v[0] for v in upstream.values()),
        "upstream_removed": sum(v[1] for v in upstream.values()),
        "new_files": sorted(new),
        "new_lines": sum(v[0] for v in new.values()),
    }


def replay(mirror: Path, series_dir: Path, base: str, onto: str,
           patches: list[tuple[str, Path]]) -> dict[str, list[str]]:
    """``git am -3`` every patch in order onto ``onto``; {id: conflicting files} (empty: clean)."""
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        work = Path(tmp) / "w"
        git(Path(tmp), "clone", "-q", "--no-checkout", "--shared", str(mirror), str(work))
        # The patched blobs (preimages of patch k are postimages of patches < k): apply the
        # series on its own base once, so `am -3` finds every blob it names.
        git(work, "checkout", "-q", "--detach", base)
        for _, path in patches:
            git(work, "am", "-q", "--keep-cr", str(path))
        git(work, "checkout", "-q", "--detach", onto)
        result: dict[str, list[str]] = {}
        for pid, path in patches:
            proc = subprocess.run(
                ["git", "am", "-3", "-q", "--keep-cr", str(path)],
                cwd=work, env=ENV, text=True, capture_output=True,
            )
            if proc.returncode == 0:
                result[pid] = []
                continue
            unmerged = git(work, "diff", "--name-only", "--diff-filter=U").split()
            if not unmerged:  # `am` stopped before merging (e.g. a missing file)
                unmerged = sorted(set(re.findall(r"error: (\S+?): ", proc.stderr))) or ["?"]
            result[pid] = sorted(set(unmerged))
            git(work, "am", "--skip")
        return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", type=Path, default=Path(
        os.environ.get("REBASECTL_MEGATRON_MIRROR", DEFAULT_MIRROR)))
    ap.add_argument("--onto", default="3346fa8a2")
    ap.add_argument("--series", type=Path, default=REPO)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    base, patches = read_series(args.series)
    base_files = set(git(args.mirror, "ls-tree", "-r", "--name-only", base).split())
    rows = []
    conflicts = replay(args.mirror, args.series, base, args.onto, patches)
    for pid, path in patches:
        row = {"id": pid, **patch_stats(path, base_files), "conflicts": conflicts[pid]}
        rows.append(row)
    all_conflicts = sorted({f for r in rows for f in r["conflicts"]})
    total = {
        "upstream_files": len({f for r in rows for f in r["upstream_files"]}),
        "upstream_lines": sum(r["upstream_added"] + r["upstream_removed"] for r in rows),
        "conflicting_files": sum(len(r["conflicts"]) for r in rows),
        "distinct_conflicting_files": len(all_conflicts),
        "clean_patches": sum(1 for r in rows if not r["conflicts"]),
    }
    if args.json:
        print(json.dumps({"onto": args.onto, "patches": rows, "total": total}, indent=2))
        return 0
    print(f"| patch | upstream files | upstream lines (+/-) | new files (lines) "
          f"| `git am -3` on {args.onto} |")
    print("|---|---|---|---|---|")
    for r in rows:
        replay_cell = "clean" if not r["conflicts"] else (
            f"{len(r['conflicts'])} conflicting: " + ", ".join(f"`{f}`" for f in r["conflicts"]))
        print(f"| {r['id']} | {len(r['upstream_files'])} | "
              f"+{r['upstream_added']} / -{r['upstream_removed']} | "
              f"{len(r['new_files'])} ({r['new_lines']}) | {replay_cell} |")
    print(f"| **total** | {total['upstream_files']} distinct | {total['upstream_lines']} | | "
          f"{total['conflicting_files']} conflicting files ({total['distinct_conflicting_files']}"
          f" distinct), {total['clean_patches']}/{len(rows)} patches clean |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
