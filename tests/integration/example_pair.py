"""Build the closest real pair to the hand-written example report (issue 3 acceptance).

No mirror holds the miles fork branches of ``seed/rebase-report-example.txt``, so this builds the
pair from this repository's own series, in a scratch clone that borrows the mirror's objects
(``git clone --shared``; the mirror is never written):

- new side: ``series.yaml`` + ``patches/`` (nine patches) applied with ``git am`` on 1dcf0da;
- old side: the same patches carried back onto 3714d81, shaped like the example's miles-main:
  ``[1/8]`` .. ``[8/8]`` with mtp-rl split into "detach output layer params for RL" ([5/8]) and
  the rest ([6/8]), routing-replay split into R3 ([7/8]) and a later "[fix] bypass r3 for mtp
  layer" (its ``is_mtp`` hunks), and an empty marker commit at the end. The two fork-only fixes
  (ipc-tms, dp-reshardable-compat) are not on the old side, as in the example.

Carrying back is scripted, so the pair is reproducible: each file diff of a patch is applied
with ``git apply --3way``; in a region that conflicts the old base's side is kept, and a file that
does not exist on the old base is left out. So an old patch is the part of the new one that
3714d81 can take (post-layernorm, mtp-rl and R3 lose the hunks that adapt code 3714d81 lacks);
the one conflict resolved by hand is INT4 QAT's hook in transformer_engine.py (``resolve_int4``),
without which the old INT4 patch would not hook TE at all. The RoPE fix applies unchanged and
stays byte-identical. Commits keep each patch's author and author date (as a rebase does).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

OLD_BASE = "3714d81d418c"
NEW_BASE = "1dcf0dafa884"
REPO = Path(__file__).resolve().parents[2]

_CONFLICT = re.compile(r"^<<<<<<< .*\n((?:.*\n)*?)=======\n((?:.*\n)*?)>>>>>>> .*\n", re.M)
Pick = Callable[[str, str], bool]  # (path, hunk text) -> keep


@dataclass(frozen=True)
class FilePart:
    path: str
    header: str
    hunks: tuple[str, ...]
    new_file: bool


@dataclass(frozen=True)
class MboxPatch:
    author: str
    email: str
    date: str
    subject: str
    body: str
    files: tuple[FilePart, ...]


def read_patch(path: Path) -> MboxPatch:
    text = path.read_text()
    head, _, rest = text.partition("\n\n")
    fields = dict(re.findall(r"^(From|Date|Subject): (.*)$", head, re.M))
    m = re.match(r"(.*) <(.*)>", fields["From"])
    assert m, fields
    body, _, diff = rest.partition("\n---\n")
    diff = diff[diff.index("diff --git "):]
    diff = re.split(r"(?m)^-- \n", diff)[0]
    files = []
    for part in re.split(r"(?m)^(?=diff --git )", diff):
        if not part.startswith("diff --git "):
            continue
        pieces = re.split(r"(?m)^(?=@@ )", part)
        path_m = re.search(r"(?m)^\+\+\+ b/(.*)$", pieces[0]) or \
            re.search(r"(?m)^--- a/(.*)$", pieces[0])
        assert path_m, pieces[0]
        files.append(FilePart(path_m.group(1), pieces[0], tuple(pieces[1:]),
                              "new file mode" in pieces[0]))
    return MboxPatch(m.group(1), m.group(2), fields["Date"], fields["Subject"], body.strip(),
                     tuple(files))


class Clone:
    """A scratch clone with a work tree; every git call is hermetic and dated."""

    def __init__(self, mirror: Path, dest: Path) -> None:
        self.path = dest
        subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(mirror),
                        str(dest)], check=True, capture_output=True)

    def git(self, *args: str, env: dict[str, str] | None = None, check: bool = True,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        full = dict(os.environ, GIT_COMMITTER_NAME="Miles Dev",
                    GIT_COMMITTER_EMAIL="dev@miles.invalid",
                    GIT_COMMITTER_DATE="1771400000 +0000", **(env or {}))
        return subprocess.run(["git", *args], cwd=self.path, env=full, check=check,
                              capture_output=True, text=True, input=stdin)

    def carry(self, patch: MboxPatch, pick: Pick | None = None) -> list[str]:
        """Apply the picked hunks of ``patch`` to the index and work tree; returns what the
        old base could not take (a missing file, or the conflicting regions of a file)."""
        left: list[str] = []
        for f in patch.files:
            hunks = [h for h in f.hunks if pick is None or pick(f.path, h)]
            if not hunks:
                continue
            if not f.new_file and self.git("cat-file", "-e", f"HEAD:{f.path}",
                                           check=False).returncode:
                left.append(f.path)
                continue
            diff = f.header + "".join(hunks)
            res = self.git("apply", "--3way", "--index", "-", stdin=diff, check=False)
            if res.returncode == 0:
                continue
            # a conflict: keep the old base's side of each conflicting region (the patch's
            # change there is what the old base cannot take), the patch's everywhere else
            target = self.path / f.path
            text, n = _CONFLICT.subn(lambda m: m.group(1), target.read_text())
            assert n, res.stderr
            left.append(f"{f.path}: {n} conflicting region(s), old base kept")
            target.write_text(text)
            self.git("add", "--", f.path)
        return left

    def edit(self, path: str, anchor: str, new: str) -> None:
        target = self.path / path
        body = target.read_text()
        assert body.count(anchor) == 1, (path, anchor)
        target.write_text(body.replace(anchor, new))
        self.git("add", "--", path)

    def resolve_int4(self) -> None:
        """Resolve the INT4 QAT conflict in transformer_engine.py as a person would on 3714d81:
        there is no ``quant_context`` yet (upstream d2e70609, #2359, adds it), so the QAT
        context wraps the grouped forward alone."""
        te = "megatron/core/extensions/transformer_engine.py"
        imp = "from megatron.core.process_groups_config import ProcessGroupCollection\n"
        self.edit(te, imp, imp + "from megatron.core.quantization.int4_fake_qat import "
                  "int4_fake_qat_weights\n")
        fwd = ("            out = super().forward(x, m_splits, "
               "is_first_microbatch=_is_first_microbatch)\n")
        self.edit(te, fwd, "            # INT4 fake QAT (env OPEN_TRAINING_INT4_FAKE_QAT_FLAG, "
                  "read per forward): TE sees\n            # fake-quantised expert weights "
                  "with a straight-through gradient.\n            qat_context = "
                  "int4_fake_qat_weights(self, [f\"weight{i}\" for i in range(self.num_gemms)])"
                  "\n\n            with qat_context:\n    " + fwd)

    def commit(self, subject: str, body: str, author: MboxPatch, date: str | None = None) -> None:
        env = {"GIT_AUTHOR_NAME": author.author, "GIT_AUTHOR_EMAIL": author.email,
               "GIT_AUTHOR_DATE": date or author.date}
        message = subject + ("\n\n" + body if body else "") + "\n"
        self.git("commit", "-q", "--allow-empty", "--no-verify", "-F", "-", env=env,
                 stdin=message)


def _is_detach(path: str, hunk: str) -> bool:
    return path.endswith("gpt_model.py") and "detach" in hunk


def _is_bypass(path: str, hunk: str) -> bool:
    return "is_mtp" in hunk


POST_LN_BODY = """Adds post_self_attn_layernorm, post_mlp_layernorm and use_gated_attention
fields to TransformerConfig and applies the layernorms after self attention and the MLP."""


def build_example_pair(mirror: Path, dest: Path) -> tuple[Path, str, str, dict[str, list[str]]]:
    """The clone, the old and new ranges, and what carrying back left out (per old commit)."""
    patches = {p.name.split("-", 1)[1][:-len(".patch")]: read_patch(p)
               for p in sorted((REPO / "patches").glob("*.patch"))}
    c = Clone(mirror, dest)
    c.git("checkout", "-q", "-f", "--detach", NEW_BASE)
    files = [str(p) for p in sorted((REPO / "patches").glob("*.patch"))]
    c.git("am", "-q", "-k", "--committer-date-is-author-date", *files)
    c.git("branch", "-f", "new-tip", "HEAD")

    c.git("checkout", "-q", "-f", "--detach", OLD_BASE)
    left: dict[str, list[str]] = {}
    p = patches
    steps: list[tuple[str, str, MboxPatch, Pick | None, str | None]] = [
        ("[1/8] fix: misc compatibility fixes for PyTorch and TE", p["compat"].body,
         p["compat"], None, None),
        ("[2/8] feat: support partial checkpoint loading", p["partial-ckpt-load"].body,
         p["partial-ckpt-load"], None, None),
        ("[3/8] feat: add post-attention and post-MLP layernorm support", POST_LN_BODY,
         p["post-layernorm"], None, None),
        ("[4/8] fix: MLA RoPE triton kernel head indexing and v_dim=0 support",
         p["mla-rope-triton"].body, p["mla-rope-triton"], None, None),
        ("[5/8] fix: detach output layer params for RL", "", p["mtp-rl"], _is_detach,
         "Sun, 29 Nov 2026 15:40:00 +0000"),
        ("[6/8] feat: support MTP training in RL", "", p["mtp-rl"],
         lambda path, h: not _is_detach(path, h), None),
        ("[7/8] feat: support rollout routing replay (R3)", "", p["routing-replay"],
         lambda path, h: not _is_bypass(path, h), None),
        ("[8/8] feat: add INT4 fake QAT for MoE grouped linear", p["int4-qat"].body,
         p["int4-qat"], None, None),
        ("[fix] bypass r3 for mtp layer", "", p["routing-replay"], _is_bypass,
         "Sun, 29 Nov 2026 15:46:00 +0000"),
    ]
    for subject, body, patch, pick, date in steps:
        left[subject] = c.carry(patch, pick)
        if patch is p["int4-qat"]:
            c.resolve_int4()
        c.commit(subject, body, patch, date)
    c.commit("[marker] miles patches end here", "", p["compat"], "Sun, 29 Nov 2026 15:59:00 +0000")
    c.git("branch", "-f", "old-tip", "HEAD")
    return dest, f"{OLD_BASE}..old-tip", f"{NEW_BASE}..new-tip", left
