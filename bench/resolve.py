#!/usr/bin/env python3
"""Resolution proposals scored against the maintainers' own hand resolution.

usage: python bench/resolve.py [--keys june,feb] [--keep DIR]

For each answer key (../shared/answer-keys/README.md) the regions are made the way the key's
README says: the old series imported as it is (``rebasectl import OLD_BASE..BRANCH``), then
``rebasectl bump --to NEW --artifacts DIR --propose --json`` (each patch onto the new upstream
with the earlier patches that apply, earlier conflicting ones left out; diff3 markers). It runs
in a fresh checkout: a new mirror (no rr-cache, so rerere has nothing to replay) and no
resolution store. The proposals are written in the scorer's format (k, path, ri, lines, rule)
and ``score.py`` is run on them; ``recorded`` proposals get a row of their own, out of the
counts. The last two lines are the scorer's last lines for june and for feb.

This is the only code of the project that names the keys or the maintainers' branches: the
scoring step. ``feb`` is held out: reported, never tuned on.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
MIRROR = Path(os.environ.get("REBASECTL_MEGATRON_MIRROR", SHARED / "upstream/megatron-lm.git"))
KEYS = {  # the scoring step: which bump each key is (from the keys' README)
    "june": ("1dcf0dafa884", "miles-main-20260619", "3346fa8a2614"),
    "feb": ("3714d81d418c", "miles-20260218", "1dcf0dafa884"),
}


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True)


def regions(key: str, work: Path) -> dict[str, object]:
    """bump.json of the key's bump, with proposals."""
    old, branch, new = KEYS[key]
    repo = work / key
    if repo.exists():  # a --keep folder of an earlier run: start afresh (no result reused)
        shutil.rmtree(repo)
    repo.mkdir()
    for args in (["git", "init", "-q"], ["git", "commit", "-q", "--allow-empty", "-m", "init"]):
        run(args, repo)
    rebasectl = [sys.executable, "-m", "rebasectl"]
    done = run(rebasectl + ["import", f"{old}..{branch}", "--repo", str(MIRROR)], repo)
    if done.returncode:
        sys.exit(f"{key}: import failed: {done.stderr.strip()}")
    run(["git", "add", "-A"], repo)
    run(["git", "commit", "-q", "-m", "series"], repo)
    env_args = ["bump", "--to", new, "--upstream", str(MIRROR), "--artifacts",
                str(work / f"{key}-artifacts"), "--propose", "--json"]
    done = run(rebasectl + env_args, repo)
    if done.returncode not in (0, 1):
        sys.exit(f"{key}: bump failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    data: dict[str, object] = json.loads(done.stdout)
    return data


def proposals(bump: dict[str, object]) -> tuple[list[dict[str, object]], int]:
    """The scorer's PROPOSALS rows (recorded ones left out, counted)."""
    rows, recorded = [], 0
    for p in bump["patches"]:  # type: ignore[attr-defined]
        # a patch the bump drops as upstreamed still had git's regions (the key counts them):
        # bump --propose lists them under dropped_regions, each with its proposed drop
        for c in p["conflicts"] + p.get("dropped_regions", []):
            for ri, r in enumerate(c["regions"]):
                prop = r.get("proposal")
                if not prop:
                    continue
                if prop["rule"] == "recorded":
                    recorded += 1
                    continue
                rows.append({"k": p["index"], "path": c["path"], "ri": ri,
                             "lines": prop["lines"], "rule": prop["rule"]})
    return rows, recorded


def score(key: str, rows: list[dict[str, object]], work: Path, verbose: bool) -> list[str]:
    path = work / f"{key}-proposals.json"
    path.write_text(json.dumps(rows, indent=1))
    scorer = SHARED / "answer-keys/score.py"
    args = [sys.executable, str(scorer), str(SHARED / "answer-keys" / key / "regions.json"),
            str(path), "--label", key] + (["--verbose"] if verbose else [])
    done = run(args, ROOT)
    if done.stderr.strip():
        print(done.stderr.strip(), file=sys.stderr)
    return done.stdout.rstrip("\n").split("\n")


def main(argv: list[str]) -> None:
    keys = ["june", "feb"]
    if "--keys" in argv:
        keys = argv[argv.index("--keys") + 1].split(",")
    keep = Path(argv[argv.index("--keep") + 1]) if "--keep" in argv else None
    verbose = "--verbose" in argv
    with tempfile.TemporaryDirectory(prefix="rebasectl-resolve-") as tmp:
        work = keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        last = []
        for key in keys:
            rows, recorded = proposals(regions(key, work))
            out = score(key, rows, work, verbose)
            print(f"{key}:")
            print("\n".join(out[:-1]))
            print(f"  rule recorded: {recorded} (rerere off, no resolution store: not counted)")
            last.append(out[-1])
        print("\n".join(last))


if __name__ == "__main__":
    main(sys.argv)
