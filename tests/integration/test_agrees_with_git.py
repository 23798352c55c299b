"""Where git has an answer, rebasectl gives the same one: its applier refuses what `git apply`
refuses, and the conflict regions of the real June bump are those `git apply -3` marks (the
real-mirror tests skip without REBASECTL_MEGATRON_MIRROR).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import real_mirror
from tests.harness.cli import run
from tests.harness.git import Repo, git, lines
from tests.sfix import module_hermetic_git

JUNE = "3346fa8a2"
A = lines(40, "a")


def test_applier_refuses_what_git_apply_refuses(tmp_path: Path) -> None:
    """A patch with two hunks whose contexts meet once upstream deleted the code between them:
    `git apply` refuses it (a hunk may not match lines an earlier hunk wrote: git's LINE_PATCHED
    rule), and `apply` does not call it clean."""
    o = (
        "def a():\n    x = 1\n    return x\n\n\ndef b():\n    y = 2\n    return y\n\n\n"
        "def c():\n    z = 3\n    return z\n"
    )
    up = Repo(tmp_path / "up")
    base = up.commit("O", {"m.py": o})
    up.branch("feature")
    new = up.commit(
        "upstream: drop b", {"m.py": o.replace("def b():\n    y = 2\n    return y\n\n\n", "")}
    )
    up.checkout("feature")
    up.commit("patch: x and z", {"m.py": o.replace("x = 1", "x = 10").replace("z = 3", "z = 30")})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    patch = next((series / "patches").glob("*.patch"))
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(up.path), str(clone))
    git(clone, "checkout", "-q", new)
    assert git(clone, "apply", "--check", str(patch), check=False).returncode != 0
    r = run(series, "apply", "--base", new, "--json")
    status = json.loads(r.stdout)["patches"][0]["status"]
    assert status != "clean", "rebasectl applied as clean a patch `git apply` refuses"


NEW = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"
ROUND2 = Path(__file__).resolve().parent / "data" / "series-round2"


@pytest.fixture(scope="module")
def real_bump(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    mirror = real_mirror()
    with module_hermetic_git(tmp_path_factory):
        root = tmp_path_factory.mktemp("real-bump")
        series = root / "series"
        series.mkdir()
        # the round-2 series, kept as data: its compat still meets the tokenizer.py upstream
        # deleted (round 3 dropped that hunk), so the modify/delete is checked too
        shutil.copy(ROUND2 / "series.yaml", series)
        shutil.copytree(ROUND2 / "patches", series / "patches")
        r = run(series, "bump", "--to", NEW, "--upstream", str(mirror), "--json")
        yield {"series": series, "run": r, "mirror": mirror}


def _git_apply_3_regions(
    mirror: Path, work: Path, base: str, stack: list[Path], patch: Path, exclude: list[str]
) -> dict[str, list[tuple[int, int]]]:
    if not work.exists():
        git(mirror, "worktree", "add", "-q", "--detach", str(work), base)
    git(work, "reset", "-q", "--hard", base)
    git(work, "clean", "-fdq")
    for p in stack:
        git(work, "apply", "-3", "--index", str(p))
    git(
        work,
        "-c",
        "merge.conflictStyle=diff3",
        "apply",
        "-3",
        "--index",
        *[f"--exclude={e}" for e in exclude],
        str(patch),
        check=False,
    )
    out: dict[str, list[tuple[int, int]]] = {}
    for line in git(work, "status", "--porcelain").stdout.splitlines():
        if line[:2] != "UU":
            continue
        path = line[3:]
        start = 0
        for n, text in enumerate((work / path).read_text(errors="replace").split("\n"), 1):
            if text.startswith("<<<<<<< "):
                start = n
            elif text.startswith(">>>>>>> "):
                out.setdefault(path, []).append((start, n))
    return out


def test_real_bump_regions_are_git_apply_3_regions(
    real_bump: dict[str, object], tmp_path: Path
) -> None:
    """Every content region bump reports for 3346fa8a2 is the region `git apply -3` (diff3) marks
    for that patch on the same tree (failing patches left out, clean ones stacked); stderr under
    8 KB; tokenizer.py named with its deleting commit."""
    r = real_bump["run"]
    assert isinstance(r, subprocess.CompletedProcess)
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.encode()) < 8192
    assert "tokenizer/tokenizer.py: modify/delete; deleted upstream by 32570939300c" in r.stderr
    data = json.loads(r.stdout)
    series = real_bump["series"]
    assert isinstance(series, Path)
    files = {
        p["id"]: p["file"] for p in yaml.safe_load((series / "series.yaml").read_text())["patches"]
    }
    mirror = series / ".rebasectl" / "upstream.git"
    work = tmp_path / "cmp"
    stack: list[Path] = []
    try:
        for p in data["patches"]:
            pf = series / "patches" / files[p["id"]]
            if p["status"] == "clean":
                stack.append(pf)
            if p["status"] != "conflict":
                continue
            mine = {
                c["path"]: [(x["start"], x["end"]) for x in c["regions"]]
                for c in p["conflicts"]
                if c["kind"] == "content"
            }
            exclude = [c["path"] for c in p["conflicts"] if c["kind"] != "content"]
            exclude += list(p["renames_followed"])  # git apply follows no rename (git am -3 does)
            assert _git_apply_3_regions(mirror, work, NEW, stack, pf, exclude) == mine, p["id"]
    finally:
        git(mirror, "worktree", "remove", "--force", str(work), check=False)


def test_real_bump_regions_each_name_a_patch_hunk(real_bump: dict[str, object]) -> None:
    """Every region of the real bump names the patch hunk it comes from and is annotated at that
    hunk's line of the patch file (post-layernorm gpt_layer_specs.py and mtp-rl
    multi_token_prediction.py included), never `"hunks": []` at line 1."""
    r = real_bump["run"]
    assert isinstance(r, subprocess.CompletedProcess)
    data = json.loads(r.stdout)
    empty = [
        (p["id"], c["path"], x["upstream_lines"])
        for p in data["patches"]
        for c in p["conflicts"]
        if c["kind"] == "content"
        for x in c["regions"]
        if not x["hunks"]
    ]
    assert empty == []
