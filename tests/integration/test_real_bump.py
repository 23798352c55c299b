"""Issue 18's acceptance on the real June bump (1dcf0da -> 3346fa8a2, 1227 upstream commits), with
this repository's series, on the shared Megatron-LM snapshot (skips without
REBASECTL_MEGATRON_MIRROR).

- bump: every conflict region it reports is a region `git apply --3way` of that patch leaves on the
  same tree (checked, for every conflicting file, against plain git run here); compat's
  tokenizer.py is named as deleted by its real commit, with where its code went; one stderr line
  per region under CI annotations (REBASECTL_ANNOTATE), under 8 KB in all.
- apply --base: the state git leaves (markers with one set of labels, `UU`/`DU` entries); continue
  refuses unresolved paths and an empty result; two patches resolved from the resolution files
  kept beside this test, the rest skipped; export keeps the skipped entries; and after `abort` the
  next apply and the same bump replay the two recorded resolutions with no human step.
- kills: continue killed right after it committed a resolution, skip killed after it saved its
  state: the next command goes on with nothing lost and no lock left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rebasectl.engine.exchange import load_patches
from rebasectl.engine.materialize import Materializer
from rebasectl.git import Repo
from rebasectl.model.series import PatchEntry, load
from rebasectl.model.series_patch import SeriesPatch
from rebasectl.model.status import Applied
from rebasectl.model.workspace import Workspace
from tests.conftest import real_mirror
from tests.harness.cli import run as rebasectl
from tests.harness.git import borrowing, git

REPO_ROOT = Path(__file__).resolve().parents[2]
# The series as it was when these cases were written (round 2, before the default-path rule made
# compat and partial-ckpt-load smaller): its June conflicts are what the cases walk through.
SERIES = Path(__file__).resolve().parent / "data" / "series-round2"
JUNE = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"
RESOLVED = SERIES / "resolutions"
HF = "megatron/core/tokenizers/text/libraries/huggingface_tokenizer.py"
TOKENIZER = "megatron/training/tokenizer/tokenizer.py"
COMMON = "megatron/core/dist_checkpointing/strategies/common.py"


def _series(tmp: Path, mirror: Path) -> Path:
    series = tmp / "series"
    (series / "patches").mkdir(parents=True)
    shutil.copy(SERIES / "series.yaml", series / "series.yaml")
    for patch in (SERIES / "patches").glob("*.patch"):
        shutil.copy(patch, series / "patches" / patch.name)
    r = rebasectl(series, "fetch", "--upstream", str(mirror))
    assert r.returncode == 0, r.stderr
    return series


@pytest.fixture(scope="module")
def bumped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    mirror = real_mirror()
    series = _series(tmp_path_factory.mktemp("june-bump"), mirror)
    # CI's stderr: one annotation per region (a terminal gets a summary: test_grown_june.py)
    r = rebasectl(series, "bump", "--to", JUNE, "--json", timeout=600,
                  env={"REBASECTL_ANNOTATE": "1"})
    assert r.returncode == 1, r.stderr
    return {"mirror": mirror, "series": series, "data": json.loads(r.stdout), "stderr": r.stderr}


def _git_regions(mirror: Path, parent: str, patch_file: Path, path: str, tmp: Path) -> list[int]:
    """Lines of the `<<<<<<<` markers plain `git apply --3way` leaves in ``path``."""
    work = tmp / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    env = {**os.environ, "GIT_DIR": str(mirror), "GIT_WORK_TREE": str(work),
           "GIT_INDEX_FILE": str(tmp / "index")}
    for args in (["read-tree", parent], ["checkout-index", "-u", "-f", "--", path]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)
    subprocess.run(["git", "-c", "merge.conflictStyle=diff3", "apply", "--3way",
                    f"--include={path}", str(patch_file)], cwd=work, env=env,
                   capture_output=True)
    lines = (work / path).read_bytes().split(b"\n")
    return [n for n, ln in enumerate(lines, start=1) if ln.startswith(b"<<<<<<< ")]


def test_bump_regions_are_what_git_apply_3way_finds(bumped: dict[str, object],
                                                    tmp_path: Path) -> None:
    series, mirror = Path(str(bumped["series"])), Path(str(bumped["mirror"]))
    data = bumped["data"]
    assert isinstance(data, dict)
    ws = Workspace(series)
    stack = load_patches(ws, load(series))
    mirror = borrowing(mirror, tmp_path / "scratch.git")  # the merges and 3-way applies write
    steps = {s.id: s for s in Materializer(Repo(mirror)).run(JUNE, stack, keep_going=True).steps}
    checked = 0
    for p in data["patches"]:
        if p["status"] not in ("conflict", "blocked"):
            assert steps[p["id"]].status is not Applied.CONFLICT
            continue
        for c in p["conflicts"]:
            if c["kind"] != "content":
                continue
            ours = [r["start"] for r in c["regions"]]
            theirs = _git_regions(mirror, steps[p["id"]].parent, _patch_file(series, p["id"]),
                                  c["path"], tmp_path)
            assert ours == theirs, (p["id"], c["path"])
            checked += 1
    assert checked >= 5
    compat = next(p for p in data["patches"] if p["id"] == "compat")
    (gone,) = compat["conflicts"]
    assert (gone["path"], gone["kind"]) == (TOKENIZER, "modify/delete")
    assert gone["deleted_by"].startswith("32570939")  # "fully remove legacy tokenizer system"
    assert gone["code_now_in"] == [HF]
    stderr = str(bumped["stderr"])
    regions = sum(len(c["regions"]) for p in data["patches"] for c in p["conflicts"])
    notes = [ln for ln in stderr.splitlines() if ln.startswith("patches/")
             and ": warning: " not in ln]  # warnings: checks after the merge, unbound names
    assert len(notes) == regions and len(stderr.encode()) < 8192


def _patch_file(series: Path, pid: str) -> Path:
    entry = next(e for e in load(series).patches if e.id == pid)
    return series / "patches" / entry.file


def _ok(series: Path, *args: str, code: int = 0, **env: str) -> subprocess.CompletedProcess[str]:
    r = rebasectl(series, *args, env=env or None, timeout=600)
    assert r.returncode == code, (args, r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r


def git_text(tree: Path, *args: str) -> str:
    return git(tree, *args).stdout


def _resolve_compat(tree: Path) -> None:
    git_text(tree, "rm", "-q", "--ignore-unmatch", TOKENIZER)
    shutil.copy(RESOLVED / "compat" / "huggingface_tokenizer.py.resolved", tree / HF)
    git_text(tree, "add", HF)


def _resolve_partial(tree: Path) -> None:
    shutil.copy(RESOLVED / "partial-ckpt-load" / "common.py.resolved", tree / COMMON)
    git_text(tree, "add", COMMON)


def test_apply_resolve_skip_export_and_replay(tmp_path: Path) -> None:
    mirror = real_mirror()
    series = _series(tmp_path, mirror)
    original = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    tree = series / ".rebasectl" / "tree"
    r = _ok(series, "apply", "--base", JUNE, code=1)
    assert "stopped at 1/9 compat" in r.stdout and "deleted by upstream 32570939300c" in r.stdout
    # the advice fits the conflict: no markers to edit in a modify/delete; `git rm` (done below
    # by _resolve_compat, with the change carried into huggingface_tokenizer.py) takes it
    assert "then `git rm` it" in r.stdout and "edit the marked files" not in r.stdout
    assert git_text(tree, "status", "--porcelain", "--untracked-files=no").splitlines()[-1] == \
        f"DU {TOKENIZER}"
    assert "still unresolved" in _ok(series, "continue", code=1).stderr
    # a resolution that keeps nothing of the patch (the file dropped, the merged parts undone)
    merged = git_text(tree, "diff", "--cached", "--", ".", f":!{TOKENIZER}")
    git_text(tree, "rm", "-q", TOKENIZER)
    git_text(tree, "checkout", "HEAD", "--", *git_text(tree, "diff", "--cached", "--name-only",
                                              "--diff-filter=M").split())
    assert "leaves nothing of the patch" in _ok(series, "continue", code=1).stderr
    subprocess.run(["git", "-C", str(tree), "apply", "--index"], input=merged.encode(),
                   check=True)
    _resolve_compat(tree)
    r = _ok(series, "continue", code=1)
    assert "stopped at 2/9 partial-ckpt-load" in r.stdout
    marked = (tree / COMMON).read_text()
    assert f"<<<<<<< upstream {JUNE[:12]}" in marked and ">>>>>>> patch partial-ckpt-load" in marked
    _resolve_partial(tree)
    r = _ok(series, "continue", code=1)
    assert "stopped at 3/9 post-layernorm" in r.stdout
    for _ in range(3):
        r = _ok(series, "skip", code=0 if "mtp-rl" in r.stdout else 1)
    assert "skipped: post-layernorm, mla-rope-triton, mtp-rl" in r.stdout
    out = _ok(series, "export").stdout
    for pid in ("post-layernorm", "mla-rope-triton", "mtp-rl"):
        assert f"kept {pid} as it was" in out
    after = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    assert set(after) == set(original)  # no entry, no file lost
    for name in ("0003-post-layernorm.patch", "0004-mla-rope-triton.patch", "0005-mtp-rl.patch"):
        assert after[name] == original[name]
    assert b"weights_only=False" in after["0002-partial-ckpt-load.patch"]
    assert f"base: {JUNE}" in (series / "series.yaml").read_text()
    # the original series again: the recorded resolutions replay, in apply and in bump
    for name, data in original.items():
        (series / "patches" / name).write_bytes(data)
    shutil.copy(SERIES / "series.yaml", series / "series.yaml")
    shutil.rmtree(tree)
    (series / ".rebasectl" / "tree.json").unlink()
    r = _ok(series, "apply", "--base", JUNE, code=1)
    assert "stopped at 3/9 post-layernorm" in r.stdout
    assert r.stderr.count("resolved as recorded at an earlier apply") == 2
    _ok(series, "abort")
    data = json.loads(_ok(series, "bump", "--to", JUNE, "--json", code=1).stdout)
    statuses = {p["id"]: p["status"] for p in data["patches"]}
    assert statuses["compat"] == statuses["partial-ckpt-load"] == "clean"  # the contract's word
    hows = {p["id"]: p["how"] for p in data["patches"]}
    assert hows["compat"] == hows["partial-ckpt-load"] == "rerere"  # a recorded resolution
    assert [k for k, v in statuses.items() if v == "conflict"] == [
        "post-layernorm", "mla-rope-triton", "mtp-rl"]


def test_kills_in_the_conflict_state(tmp_path: Path) -> None:
    mirror = real_mirror()
    series = _series(tmp_path, mirror)
    tree = series / ".rebasectl" / "tree"
    _ok(series, "apply", "--base", JUNE, code=1)
    _resolve_compat(tree)
    r = rebasectl(series, "continue", env={"REBASECTL_FAULT": "kill@resolved:1"}, timeout=600)
    assert r.returncode == -9
    r = _ok(series, "continue", code=1)  # adopts the commit it made, goes on
    assert "stopped at 2/9 partial-ckpt-load" in r.stdout
    log = git_text(tree, "log", "--format=%s", f"{JUNE}..HEAD").splitlines()
    assert log == ["fix: misc compatibility fixes for PyTorch and TE"]
    assert not (tree / TOKENIZER).exists() and "trust_remote_code=True" in (tree / HF).read_text()
    r = rebasectl(series, "skip", env={"REBASECTL_FAULT": "kill@state:1"}, timeout=600)
    assert r.returncode == -9
    r = _ok(series, "continue", code=1)
    assert "stopped at 3/9 post-layernorm" in r.stdout and "skipped: partial-ckpt-load" in r.stdout
    status = json.loads(_ok(series, "status", "--json").stdout)["apply_in_progress"]
    assert status["stopped_at"] == "post-layernorm" and status["skipped"] == ["partial-ckpt-load"]
    _ok(series, "abort")
    _ok(series, "apply")  # and a plain apply works after it: no lock, no stale state


def test_a_merge_that_uses_a_removed_name_is_named(tmp_path: Path) -> None:
    """Issue 18 (8): round one's ipc-tms removed `from torch_memory_saver import
    torch_memory_saver`; on the June tree that much merges, while upstream had added uses such as
    `torch_memory_saver.region(...)` to the same file since. The check names file, line and the
    commits that wrote them — the ones `git log -S torch_memory_saver` finds in the range (the
    patch's conflicting last hunk is left out: the point is what merges)."""
    from rebasectl.model.patches import Patch, parse
    from rebasectl.report.names import uses_of_removed

    repo = Repo(borrowing(real_mirror(), tmp_path / "scratch.git"))  # the merge writes
    old = parse((Path(__file__).parent / "data" / "ipc-tms-round1.patch").read_bytes(), "p")
    f = old.files[0]
    merged = Patch(old.author_name, old.author_email, old.date, old.message,
                   f.render(list(f.hunks[:2])))
    entry = PatchEntry("ipc-tms", "ipc-tms.patch", merged.subject)
    (step,) = Materializer(repo).run(JUNE, [SeriesPatch(entry, merged)]).steps
    assert step.commit is not None
    base = load(SERIES).upstream.base
    uses = uses_of_removed(repo, merged, step.commit, base, JUNE)
    path = "megatron/core/inference/contexts/dynamic_context.py"
    pickaxe = subprocess.run(["git", "-C", str(repo.path), "log", "--format=%H",
                              "-Storch_memory_saver", f"{base}..{JUNE}", "--", path],
                             capture_output=True, text=True, check=True).stdout.split()
    assert uses and all((u.path, u.name) == (path, "torch_memory_saver") for u in uses)
    assert {u.commit for u in uses} == set(pickaxe)
