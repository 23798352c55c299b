"""Default-path checks: a user who does not turn a feature on gets upstream's behaviour, bit for
bit. A probe runs the same code in a fresh interpreter on the tree under test and on the base tree
(``REBASECTL_BASE_TREE``, which ``rebasectl test`` provides) and the results must be identical
(``torch.equal`` on every tensor). Such tests pass on the base by design: they carry the
``default_path`` marker, which ``rebasectl test --against base`` does not count.

Probes are functions of this module, ``name(out: Path)``, that save a dict of tensors.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent


def base_tree() -> Path:
    """The unpatched tree to compare with; the test is skipped, saying why, without one."""
    env = os.environ.get("REBASECTL_BASE_TREE")
    if not env or not (Path(env) / "megatron" / "core").is_dir():
        pytest.skip("no base tree to compare with (REBASECTL_BASE_TREE; `rebasectl test` sets it)")
    return Path(env)


def run_probe(tree: Path, name: str, out: Path) -> dict[str, Any]:
    """Run probe ``name`` on ``tree`` in a fresh interpreter; its saved results."""
    import torch

    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import compat; "
            "compat.python_features(); import default_path; "
            "default_path.PROBES[sys.argv[3]](__import__('pathlib').Path(sys.argv[4]))")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code, str(tree), str(HERE), name, str(out)],
                          capture_output=True, text=True, env=env, cwd=HERE, timeout=900,
                          check=False)
    assert proc.returncode == 0, f"probe {name} on {tree}: {proc.stderr[-3000:]}"
    result: dict[str, Any] = torch.load(out)
    return result


def assert_identical(ours: dict[str, Any], base: dict[str, Any]) -> None:
    import torch

    assert sorted(ours) == sorted(base), (sorted(ours), sorted(base))
    differ = [k for k in base if not torch.equal(ours[k], base[k])]
    assert not differ, f"differs from the base tree: {differ[:10]}"


# -- probes -----------------------------------------------------------------------------------
def mtp_pretrain(out: Path) -> None:
    """A pretraining step with MTP (``labels`` given, no switch), tied and untied embeddings:
    the logits-free loss, the MTP-only gradient of every parameter and the full gradient."""
    import torch
    from shims import single_rank_gloo_context, tiny_batch, tiny_gpt, tiny_gpt_config

    torch.set_num_threads(1)
    results: dict[str, Any] = {}
    with single_rank_gloo_context():
        for tie in (True, False):
            for mtp_only in (True, False):
                model = tiny_gpt(tiny_gpt_config(mtp_num_layers=2), tie_embeddings=tie,
                                 vocab_size=64)
                ids, pos, mask = tiny_batch(vocab_size=64, seed=3)
                loss = model(ids, pos, mask, labels=ids)
                (loss.float() * (0.0 if mtp_only else 1.0)).sum().backward()
                tag = f"{'tied' if tie else 'untied'}-{'mtp' if mtp_only else 'full'}"
                results[f"{tag}/loss"] = loss.detach()
                for name, param in model.named_parameters():
                    grad = param.grad if param.grad is not None else torch.zeros_like(param)
                    results[f"{tag}/{name}"] = grad.detach()
    torch.save(results, out)


PROBES = {"mtp_pretrain": mtp_pretrain}
