"""Proposals on our own series at the June upstream (3346fa8a2), checked against the resolutions
the series keeps for it (tests/integration/resolutions, the ``series`` fixture's data): every
region gets an id, the mechanical ones a proposal, and accepting them at each stop, then
``continue`` and ``export``, gives the carried series (skipped without the real mirror)."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo
from tests.june import JUNE, RESOLUTIONS, copy_series, resolve_from, stopped_at

MARKS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")


def kept_file(mirror: Path, patch_id: str, path: str) -> list[str] | None:
    """``path`` as the kept resolution of ``patch_id`` writes it (None: it does not)."""
    diff = RESOLUTIONS / patch_id / "resolution.diff"
    if not diff.is_file():
        return None
    text = diff.read_text()
    paths = sorted({ln[6:].strip() for ln in text.splitlines() if ln.startswith("+++ b/")})
    if path not in paths:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for p in paths:
            blob = subprocess.run(["git", "-C", str(mirror), "show", f"{JUNE}:{p}"],
                                  capture_output=True, check=False)
            if blob.returncode == 0:
                (root / p).parent.mkdir(parents=True, exist_ok=True)
                (root / p).write_bytes(blob.stdout)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        subprocess.run(["git", "apply", "-"], cwd=root, input=text.encode(), check=True)
        return (root / path).read_text().split("\n")


def kept_region(marked: list[str], start: int, end: int, kept: list[str]) -> list[str] | None:
    """The kept resolution's text where the region was: between the three merged lines before
    it and the three after it (the nearest such place; None when the resolution moved them)."""
    pre = [x for x in marked[max(0, start - 4):start - 1] if not x.startswith(MARKS)]
    post = [x for x in marked[end:end + 3] if not x.startswith(MARKS)]
    at = sorted((i for i in range(len(kept)) if kept[i:i + len(pre)] == pre),
                key=lambda i: abs(i - start))
    for i in at[:1]:
        j0 = i + len(pre)
        for j in range(j0, len(kept)):
            if kept[j:j + len(post)] == post:
                return kept[j0:j]
    return None


def norm(lines: list[str]) -> list[str]:
    return [x.rstrip() for x in lines if x.strip()]


def test_proposals_on_our_series_agree_with_the_kept_resolutions(tmp_path: Path,
                                                                  mirror_path: Path) -> None:
    series = copy_series(tmp_path / "series")
    Repo(series).commit("series")
    out = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", JUNE, "--upstream", str(mirror_path), "--propose",
                  "--json", "--artifacts", str(out), timeout=900)
    assert r.returncode == 1, r.stderr[-2000:]
    verdicts: dict[str, str] = {}
    regions = 0
    for p in json.loads(r.stdout)["patches"]:
        folder = out / "conflicts" / f"{p['index']:02d}-{p['id']}" / "files"
        for c in p["conflicts"]:
            for n, reg in enumerate(c["regions"], 1):
                regions += 1
                assert reg["id"] == f"{p['id']}/{c['path']}/{n}"
                prop = reg.get("proposal")
                kept = kept_file(mirror_path, p["id"], c["path"])
                if prop is None or kept is None:
                    continue
                marked = (folder / c["path"]).read_text().split("\n")
                truth = kept_region(marked, reg["start"], reg["end"], kept)
                if truth is not None:
                    verdicts[reg["id"]] = "agree" if norm(prop["lines"]) == norm(truth) \
                        else "disagree"
    agree = sorted(k for k, v in verdicts.items() if v == "agree")
    disagree = sorted(k for k, v in verdicts.items() if v == "disagree")
    print(f"{regions} regions; {len(agree)} proposals agree, {len(disagree)} disagree:",
          disagree)
    assert regions >= 30 and len(agree) >= 7
    # what the kept resolutions decided otherwise: mtp-rl keeps mtp_kwargs only as an
    # accepted, unused parameter (upstream derives MTP targets itself)
    assert all(d.startswith("mtp-rl/megatron/core/models/gpt/gpt_model.py/")
               for d in disagree), disagree


def test_accept_continue_export_carries_our_series(tmp_path: Path, mirror_path: Path) -> None:
    """At each stop: accept every proposal (written and staged, the state says so), then the
    kept resolution for what is left; continue; export writes the series on June."""
    series = copy_series(tmp_path / "series")
    Repo(series).commit("series")
    assert rebasectl(series, "fetch", "--upstream", str(mirror_path), timeout=900).returncode == 0
    r = rebasectl(series, "apply", "--base", JUNE, "--propose", timeout=900)
    tree = series / ".rebasectl" / "tree"
    accepted = 0
    while (pid := stopped_at(r.stdout)) is not None:
        if (RESOLUTIONS / pid / "skip").is_file():
            r = rebasectl(series, "skip", timeout=900)
            continue
        board = json.loads(rebasectl(series, "resolve", "--json", timeout=900).stdout)
        if board["proposals"]:
            done = rebasectl(series, "resolve", "--accept", "--all", "--json", timeout=900)
            assert done.returncode == 0, done.stderr[-2000:]
            states = {p["state"] for p in json.loads(done.stdout)["proposals"]}
            assert states <= {"accepted", "verified"}, states
            accepted += len(board["proposals"])
        resolve_from(tree, pid)
        r = rebasectl(series, "continue", timeout=900)
        assert r.returncode in (0, 1), r.stderr[-2000:]
    assert r.returncode == 0 and accepted >= 8, (accepted, r.stdout[-2000:])
    assert rebasectl(series, "export", timeout=900).returncode == 0
    assert f"base: {JUNE}" in (series / "series.yaml").read_text()
