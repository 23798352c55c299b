"""`bump` on the real Megatron-LM history (skips without REBASECTL_MEGATRON_MIRROR): an old series
on 3714d81, written here, whose patches touch lines upstream changed before 1dcf0da, bumped to
1dcf0da (499 upstream commits). The expected culprits come from git itself (`log -S`, `log -L`),
not from rebasectl.

The old series (in a scratch repository that borrows the mirror's objects, nothing written to it):
1. adds a post-MLP layernorm inside ``get_transformer_layer_spec_for_backend`` (gpt_layer_specs.py),
   a helper upstream inlined: conflict;
2. a routing-replay hook in the top-k router, next to where upstream added its own RouterReplay:
   conflict;
3. a one-line change to a file upstream never touched: clean;
4. an early backport of upstream's 500e080f20: upstreamed;
5. a change on top of patch 2's line: blocked by patch 2 (its region is 2's, not upstream's).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import real_mirror
from tests.harness.cli import run as rebasectl
from tests.harness.git import borrowing, git_out

OLD = "3714d81d418c9f1bca4594fc35f9e8289f652862"
NEW = "1dcf0dafa884ad52ffb243625717a3471643e087"
SPECS = "megatron/core/models/gpt/gpt_layer_specs.py"
ROUTER = "megatron/core/transformer/moe/router.py"
BACKPORT = "500e080f20"


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        assert text.count(old) == 1, old
        return text.replace(old, new)
    return edit


def build_old_series(mirror: Path, root: Path) -> tuple[Path, str, str]:
    """A bare scratch repo (objects borrowed from the mirror) with the series on `fork`."""
    fork = borrowing(mirror, root / "fork.git")
    base = git_out(fork, "rev-parse", f"{OLD}^{{commit}}")
    env = {"GIT_INDEX_FILE": str(root / "index"), "GIT_AUTHOR_NAME": "Miles Dev",
           "GIT_AUTHOR_EMAIL": "dev@miles.invalid", "GIT_COMMITTER_NAME": "Miles Dev",
           "GIT_COMMITTER_EMAIL": "dev@miles.invalid", "GIT_AUTHOR_DATE": "1767225600 +0000",
           "GIT_COMMITTER_DATE": "1767225600 +0000"}
    git_out(fork, "read-tree", base, env=env)
    parent = base

    def commit(message: str, edits: dict[str, Callable[[str], str]]) -> None:
        nonlocal parent
        for path, edit in edits.items():
            text = git_out(fork, "cat-file", "blob", f":{path}", env=env) + "\n"
            blob = git_out(fork, "hash-object", "-w", "--stdin", input=edit(text).encode())
            git_out(fork, "update-index", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = git_out(fork, "write-tree", env=env)
        parent = git_out(fork, "commit-tree", tree, "-p", parent, input=message.encode(), env=env)

    commit("[1/5] feat: add post-MLP layernorm to the layer spec helper\n", {SPECS: _replace(
        "            pre_mlp_layernorm=pre_mlp_layernorm,\n",
        "            pre_mlp_layernorm=pre_mlp_layernorm,\n"
        "            post_mlp_layernorm=IdentityOp,\n")})
    hook = _replace("            self.ga_steps = None\n",
                    "            self.ga_steps = None\n\n        self.is_mtp = False\n")
    topk = _replace(
        "                fused=self.config.moe_router_fusion,\n            )\n\n"
        "        # Apply token",
        "                fused=self.config.moe_router_fusion,\n"
        "                replay=None if self.is_mtp else 'current',\n            )\n\n"
        "        # Apply token")
    commit("[2/5] feat: routing replay hook in the top-k router\n",
           {ROUTER: lambda text: topk(hook(text))})
    commit("[3/5] fix: mark the enums file\n",
           {"megatron/core/transformer/enums.py": lambda text: text + "\n# downstream: miles\n"})
    diff = subprocess.run(["git", "diff", "--full-index", f"{BACKPORT}^", BACKPORT], cwd=mirror,
                          capture_output=True, check=True).stdout
    git_out(fork, "apply", "--cached", input=diff, env=env)
    tree = git_out(fork, "write-tree", env=env)
    parent = git_out(fork, "commit-tree", tree, "-p", parent, env=env,
                  input=b"[4/5] backport: exact key match in reload_model_params\n")
    commit("[5/5] feat: MTP routers bypass replay\n", {ROUTER: _replace(
        "        self.is_mtp = False\n",
        "        self.is_mtp = bool(getattr(config, 'is_mtp_router', False))\n")})
    return fork, base, parent


def _log_l(mirror: Path, path: str, marker: str, before: int, after: int) -> set[str]:
    """`git log -L` on the lines around ``marker`` in 1dcf0da's version of ``path``."""
    text = git_out(mirror, "show", f"{NEW}:{path}").split("\n")
    line = next(n for n, t in enumerate(text, start=1) if marker in t)
    out = git_out(mirror, "log", "--format=%H", "-s", "-L",
                  f"{line - before},{line + after}:{path}", f"{OLD}..{NEW}")
    return set(out.split())


@pytest.fixture(scope="module")
def bumped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    mirror = real_mirror()
    root = tmp_path_factory.mktemp("megatron-bump")
    fork, base, tip = build_old_series(mirror, root)
    series = root / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..{tip}", "--repo", str(fork))
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "fetch", "--upstream", str(mirror))
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "bump", "--to", NEW, "--json", "--artifacts", str(root / "artifacts"))
    # its time (budget 8 s) is measured by bench/budgets.py megatron-bump, not here
    return {"mirror": mirror, "series": series, "run": r, "artifacts": root / "artifacts"}


def test_bump_to_1dcf0da_conflicts_and_culprits(bumped: dict[str, object]) -> None:
    r = bumped["run"]
    assert isinstance(r, subprocess.CompletedProcess)
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert data["to"] == NEW and data["upstream_commits"] == 499
    by_index = {p["index"]: p for p in data["patches"]}
    assert [by_index[i]["status"] for i in range(1, 6)] == [
        "conflict", "conflict", "clean", "upstreamed", "blocked"]
    mirror = bumped["mirror"]
    assert isinstance(mirror, Path)
    # 1: the commit that inlined the layer-spec helper (git log -S on its definition)
    inlined = set(git_out(mirror, "log", "--format=%H", "-S",
                       "def get_transformer_layer_spec_for_backend", f"{OLD}..{NEW}").split())
    assert len(inlined) == 1
    culprits1 = {c["commit"] for c in by_index[1]["culprits"]}
    assert inlined <= culprits1
    assert by_index[1]["first_break"]["commit"] in inlined
    # 2: upstream's own router replay (git log -L on the lines next to both hunks)
    expected2 = _log_l(mirror, ROUTER, "self.router_replay = None", 2, 3) | \
        _log_l(mirror, ROUTER, "router_replay=self.router_replay,", 1, 1)
    culprits2 = {c["commit"] for c in by_index[2]["culprits"]}
    assert expected2 and expected2 <= culprits2
    replay = {c for c in culprits2
              if "routing replay" in git_out(mirror, "log", "-1", "--format=%s", c).lower()}
    assert by_index[2]["first_break"]["commit"] in replay
    # 4: absorbed by the very commit it backported
    assert by_index[4]["culprits"][0]["commit"].startswith(BACKPORT)
    # 5: needs patch 2's line: blocked by 2 (issue 22), its region is 2's, not upstream's
    assert by_index[5]["blocked_by"] == ["routing-replay-hook-in-the-top-k-router"]
    assert any(r["blocked_by"] == ["routing-replay-hook-in-the-top-k-router"]
               and r["culprits"] == [] for c in by_index[5]["conflicts"] for r in c["regions"])
    folder = bumped["artifacts"]
    assert isinstance(folder, Path)
    blocked = json.loads((folder / "conflicts" / "05-mtp-routers-bypass-replay" /
                          "culprits.json").read_text())["blocked_by"]
    assert blocked == ["routing-replay-hook-in-the-top-k-router"]
    assert by_index[3]["culprits"] == []


def test_blame_router_patch(bumped: dict[str, object]) -> None:
    series = bumped["series"]
    assert isinstance(series, Path)
    r = rebasectl(series, "blame", "routing-replay-hook-in-the-top-k-router", "--to", NEW, "--json")
    assert r.returncode == 1, r.stderr  # a conflict, as bump says it (issue 22)
    data = json.loads(r.stdout)
    assert data["status"] == "conflict"
    mirror = bumped["mirror"]
    assert isinstance(mirror, Path)
    assert _log_l(mirror, ROUTER, "router_replay=self.router_replay,", 1, 1) <= {
        c["commit"] for c in data["culprits"]}
