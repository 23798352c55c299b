"""`rebasectl report` on the real Megatron-LM mirror (skipped without REBASECTL_MEGATRON_MIRROR).

No mirror holds the fork commits of the hand-written example, so ``build_pair`` makes a pair of
the same shape in a scratch clone that borrows the mirror's objects (``--shared``; the mirror is
never written): on 3714d81 an old series of seven commits, on 1dcf0da a new one of six, with a
line-number-only move, a context-only change, a patch rewritten because upstream replaced
``add_argument`` flags by ``ArgumentGroupFactory`` (639c08ab), a two-into-one merge with a ``[fix]``
commit, an identical patch renumbered by that merge, an empty marker, and a new fix. The benchmark
(bench/tool.py) reuses ``build_pair``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.harness.cli import run as rebasectl

OLD_BASE = "3714d81d418c"
NEW_BASE = "1dcf0dafa884"
TC = "megatron/core/transformer/transformer_config.py"
TL = "megatron/core/transformer/transformer_layer.py"
AR = "megatron/training/arguments.py"
RO = "megatron/core/transformer/moe/router.py"
RP = "megatron/core/fusions/fused_mla_yarn_rope_apply.py"
DC = "megatron/core/inference/contexts/dynamic_context.py"
A_TC = "    apply_residual_connection_post_layernorm: bool = False\n"
N_TC = (A_TC + "\n    post_self_attn_layernorm: bool = False\n    \"\"\"Apply a layernorm after "
        "self attention.\"\"\"\n\n    post_mlp_layernorm: bool = False\n    \"\"\"Apply a "
        "layernorm after the MLP.\"\"\"\n")
A_TL = ("        self.hidden_dropout = config.hidden_dropout if hidden_dropout is None else "
        "hidden_dropout\n")
N_TL = (A_TL + "        self.use_post_self_attn_layernorm = config.post_self_attn_layernorm\n"
        "        self.use_post_mlp_layernorm = config.post_mlp_layernorm\n")
A_RO = "class TopKRouter(Router):\n"
N_RO1 = "from miles.utils.replay_base import routing_replay_manager\n\n\n" + A_RO
N_RO2 = A_RO + "    is_mtp: bool = False  # bypass routing replay for MTP layers\n"
A_AR = "def _add_network_size_args(parser):\n"
A_AR2 = "    group.add_argument('--apply-residual-connection-post-layernorm',\n"


class _Clone:
    def __init__(self, mirror: Path, dest: Path) -> None:
        self.path = dest
        self.clock = 1770000000
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror),
                        str(dest)], check=True, capture_output=True)

    def git(self, *args: str, date: int | None = None) -> str:
        stamp = f"{date or self.clock} +0000"
        env = dict(os.environ, GIT_AUTHOR_NAME="Miles Dev", GIT_AUTHOR_EMAIL="dev@miles.invalid",
                   GIT_COMMITTER_NAME="Miles Dev", GIT_COMMITTER_EMAIL="dev@miles.invalid",
                   GIT_AUTHOR_DATE=stamp, GIT_COMMITTER_DATE=stamp)
        return subprocess.run(["git", *args], cwd=self.path, env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def edit(self, path: str, anchor: str, new: str) -> None:
        target = self.path / path
        body = target.read_text()
        assert anchor in body, (path, anchor)
        target.write_text(body.replace(anchor, new, 1))

    def commit(self, message: str, date: int | None = None) -> int:
        """Commit everything; returns the author date used (a rebase keeps it)."""
        if date is None:
            self.clock += 3600
            date = self.clock
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message, date=date)
        return date


def build_pair(mirror: Path, dest: Path) -> tuple[Path, str, str]:
    """A scratch clone with branches old-tip (on 3714d81) and new-tip (on 1dcf0da); returns the
    clone and the two ranges."""
    c = _Clone(mirror, dest)
    c.git("checkout", "-q", "-f", "--detach", OLD_BASE)
    c.edit(TL, A_TL, N_TL)
    d1 = c.commit("[1/6] fix: misc compatibility fixes for TE")
    c.edit(TC, A_TC, N_TC)
    d2 = c.commit("[2/6] feat: post-attention and post-MLP layernorm config")
    c.edit(AR, A_AR, A_AR + "    # miles: post layernorm flags are added below\n")
    c.edit(AR, A_AR2, "    group.add_argument('--post-self-attn-layernorm', action='store_true',"
           "\n                       help='Apply a layernorm after self attention.')\n" + A_AR2)
    d3 = c.commit("[3/6] feat: post layernorm command line flags")
    c.edit(RO, A_RO, N_RO1)
    d4 = c.commit("[4/6] feat: support rollout routing replay (R3)")
    c.edit(RO, A_RO, N_RO2)
    c.commit("[fix] bypass r3 for mtp layer (#6)")
    c.edit(RP, "import torch\n", "import torch  # miles: head indexing fix below\n")
    d6 = c.commit("[5/6] fix: MLA RoPE triton kernel head indexing")
    c.commit("[6/6] marker: miles patches end here")
    c.git("branch", "-f", "old-tip", "HEAD")

    c.git("checkout", "-q", "-f", "--detach", NEW_BASE)
    c.edit(TL, A_TL, N_TL)
    c.commit("[1/6] fix: misc compatibility fixes for TE", d1)
    c.edit(TC, A_TC, N_TC)
    c.commit("[2/6] feat: post-attention and post-MLP layernorm config", d2)
    c.edit(AR, A_AR, A_AR + "    # miles: post layernorm flags come from TransformerConfig "
           "(ArgumentGroupFactory)\n")
    c.commit("[3/6] feat: post layernorm command line flags", d3)
    c.edit(RO, A_RO, N_RO1)
    c.edit(RO, A_RO, N_RO2)
    c.commit("[4/6] feat: support rollout routing replay (R3) and bypass for MTP layers", d4)
    c.edit(RP, "import torch\n", "import torch  # miles: head indexing fix below\n")
    c.commit("[5/6] fix: MLA RoPE triton kernel head indexing", d6)
    c.edit(DC, "import torch\n", "import torch\n\nHAVE_TORCH_MEMORY_SAVER = False  # miles: "
           "CUDA IPC incompatibility\n")
    c.commit("[6/6] fix: CUDA IPC incompatibility from Megatron bump")
    c.git("branch", "-f", "new-tip", "HEAD")
    return dest, f"{OLD_BASE}..old-tip", f"{NEW_BASE}..new-tip"


def test_report_on_megatron(mirror_path: Path, tmp_path: Path) -> None:
    clone, old, new = build_pair(mirror_path, tmp_path / "clone")
    ws = tmp_path / "ws"
    ws.mkdir()
    r = rebasectl(ws, "report", "--repo", str(clone), "--old-range", old, "--new-range", new,
                  "--json")
    data = json.loads(r.stdout)
    assert r.returncode == (1 if data["review"] else 0), r.stderr  # 1: entries to review
    assert data["upstream"]["commits"] == 499
    got = [(m["old"], m["new"], m["status"], m["renumbered"]) for m in data["mapping"]]
    assert got == [
        ([1], [1], "identical", False),  # hunk moved by one line: same patch-id, moved
        ([2], [2], "equivalent", False),  # same +/- lines, context changed upstream
        ([3], [3], "modified", False),
        ([4, 5], [4], "merged", False),
        ([6], [5], "identical", True),
        ([], [6], "new", False),
        ([7], [], "empty", False),
    ]
    assert data["mapping"][0]["evidence"]["line_shift"] == 1 and data["mapping"][0]["moved"]
    modified = data["mapping"][2]
    assert any(c["commit"].startswith("639c08ab") and c["pr"] == "#2896"
               for c in modified["upstream_commits"])
    assert [f["path"] for f in data["new"]["patches"][5]["files"]] == [DC]
    md = rebasectl(ws, "report", "--repo", str(clone), "--old-range", old, "--new-range", new)
    again = rebasectl(ws, "report", "--repo", str(clone), "--old-range", old, "--new-range", new)
    assert md.returncode == again.returncode == r.returncode and md.stdout == again.stdout
