"""Issue 22's acceptance on the real grown series: miles' 24 patches (1dcf0da..miles-main-20260619)
imported as a new user would, bumped onto 3346fa8a2 (skips without REBASECTL_MEGATRON_MIRROR).

- patch 23 edits fused_adam_patch.py, which patch 14 creates (and patch 14 conflicts): `blocked`
  by patch 14's id, the file `missing`, no `deleted_by`;
- every content region sits where the merge put it (patch 16 aside: upstream carries it, so it is
  `upstreamed` naming 2e4a5d48c919): its work-tree lines are the maintainers' key's marked
  lines and its upstream lines hold the key's upstream text (torch.py's load planner at 900-901,
  gpt_layer_specs.py at 739, router.py at 172: once placed at 763, 635 and 50);
- a terminal run's stderr stays under 8 KB and points at regions.txt for the rest;
- blame of one patch exits 1 on its conflict and accepts the id an older import cut.
The answer key is read by this test only, to check locations; nothing in rebasectl reads it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import real_mirror
from tests.synth import rebasectl

REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = REPO_ROOT.parent / "shared" / "answer-keys" / "june" / "regions.json"
JUNE = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"
TERMINAL = {"GITHUB_ACTIONS": "", "REBASECTL_ANNOTATE": ""}


@pytest.fixture(scope="module")
def june(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    mirror = real_mirror()
    series = tmp_path_factory.mktemp("grown") / "series"
    series.mkdir()
    r = rebasectl(series, "import", "1dcf0da..miles-main-20260619", "--repo", str(mirror))
    assert r.returncode == 0, r.stderr
    art = series.parent / "art"
    r = rebasectl(series, "bump", "--to", JUNE, "--upstream", str(mirror), "--artifacts",
                  str(art), "--json", env=TERMINAL, timeout=900)
    assert r.returncode == 1, r.stderr
    return {"mirror": mirror, "series": series, "art": art, "data": json.loads(r.stdout),
            "stderr": r.stderr, "import": r}


def _patches(june: dict[str, object]) -> list[dict[str, object]]:
    data = june["data"]
    assert isinstance(data, dict)
    return list(data["patches"])


def test_patch_23_is_blocked_by_patch_14(june: dict[str, object]) -> None:
    patches = _patches(june)
    p14, p23 = patches[13], patches[22]
    assert p23["status"] == "blocked" and p23["blocked_by"] == [p14["id"]]
    (gone,) = p23["conflicts"]
    assert gone["path"] == "megatron/core/optimizer/fused_adam_patch.py"
    assert gone["kind"] == "missing" and gone["deleted_by"] is None
    (region,) = gone["regions"]  # the preimage lines of its hunk, not 1 to the hunk's length
    assert region["hunks"][0].startswith("@@ -19,7 ") and region["preimage_lines"] == [19, 25]
    assert gone["blocked_by"] == p14["id"] and p23["culprits"] == []
    assert all(p["status"] != "upstreamed" or p["upstream_commit"] for p in patches)
    # the commit that upstreamed patch 16 is no break of it; its one merge region is kept
    p16 = patches[15]
    assert p16["first_break"] is None and p16["permanent_break"] is None
    assert [len(c["regions"]) for c in p16["dropped_regions"]] == [1]
    readme = (Path(str(june["art"])) / "README.md").read_text()
    assert "| 16 | attention-output-gate-tp-slice-when-num-kv-heads | upstreamed | 1 |  |  |" \
        in readme
    assert "## 16. attention-output-gate-tp-slice-when-num-kv-heads: upstreamed\n\n" \
        "- upstream `2e4a5d48c919`" in readme


def test_regions_sit_where_the_merge_put_them(june: dict[str, object]) -> None:
    if not KEY.exists():
        pytest.skip(f"no answer key at {KEY}")
    ours = {(p["index"], c["path"], ri): (c, r) for p in _patches(june)
            for c in p["conflicts"] for ri, r in enumerate(c["regions"])}
    key = json.loads(KEY.read_text())
    texts: dict[str, list[str]] = {}
    checked = 0
    upstreamed = {p["index"]: p for p in _patches(june) if p["status"] == "upstreamed"}
    # patch 16's fix landed upstream line for line (2e4a5d48c919, without the patch's comment
    # lines): upstreamed, naming it, so its one region is not a conflict any more
    assert [(k, p["upstream_commit"][:12]) for k, p in upstreamed.items()] == \
        [(16, "2e4a5d48c919")]
    for row in key:
        if row["k"] in upstreamed:
            continue
        c, r = ours[(row["k"], row["path"], row["ri"])]
        if row["kind"] != "content":
            continue
        assert r["worktree_lines"] == row["marked_lines"], row["path"]
        if row["path"] not in texts:
            texts[row["path"]] = subprocess.run(
                ["git", "--git-dir", str(june["mirror"]), "show", f"{JUNE}:{row['path']}"],
                check=True, capture_output=True).stdout.decode().split("\n")
        if row["upstream"]:
            a, b = r["upstream_lines"]
            assert texts[row["path"]][a - 1:b] == row["upstream"], (row["k"], row["path"])
        checked += 1
    assert checked == 141 and len(ours) == len(key) - 1 == 143

    def at(k: int, tail: str, ri: int) -> list[int]:
        return next(r["upstream_lines"] for (kk, path, i), (_, r) in ours.items()
                    if kk == k and path.endswith(tail) and i == ri)

    assert at(2, "strategies/torch.py", 0) == [900, 901]  # the load planner, not the save one
    assert at(18, "gpt/gpt_layer_specs.py", 5)[0] == 739
    assert at(21, "moe/router.py", 0)[0] == 172


def test_terminal_stderr_is_a_summary(june: dict[str, object]) -> None:
    stderr = str(june["stderr"])
    assert len(stderr.encode()) <= 8192
    # 143 regions in the failing patches + patch 16's one (upstream's already) = the key's 144
    assert "16 of 24 patches fail (11 conflict, 5 blocked), 143 regions; 1 upstreamed " \
        "(1 region, upstream's already); 144 merge regions in all" in stderr
    assert "16/24 attention-output-gate-tp-slice-when-num-kv-heads: upstreamed by " \
        "2e4a5d48c919" in stderr
    assert "`rebasectl export --drop attention-output-gate-tp-slice-when-num-kv-heads`" in stderr
    assert "regions to resolve (the first 5 of 143):" in stderr  # the failing patches' ones
    assert f"+138 more: {june['art']}/regions.txt" in stderr
    assert not [ln for ln in stderr.splitlines() if ln.startswith("patches/")]
    regions = (Path(str(june["art"])) / "regions.txt").read_text().splitlines()
    assert len(regions) == 143
    assert any("strategies/torch.py: content, upstream lines 900-901, work tree lines 902-908"
               in ln for ln in regions)


def test_blame_exits_1_and_accepts_the_cut_id(june: dict[str, object]) -> None:
    series = Path(str(june["series"]))
    patches = _patches(june)
    r = rebasectl(series, "blame", str(patches[22]["id"]), "--to", JUNE, "--json", timeout=600)
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert data["status"] == "blocked" and data["blocked_by"] == [patches[13]["id"]]
    long = "add-post-attention-and-post-mlp-layernorm-support"  # the whole subject's slug
    r = rebasectl(series, "blame", long, "--to", JUNE, timeout=600)
    assert r.returncode == 1 and "add-post-attention-and-post-mlp-layernorm-suppor:" in r.stdout
