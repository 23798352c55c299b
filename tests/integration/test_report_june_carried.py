"""The report on our own series carried to June (the ``june_carried`` fixture: this repository's
nine patches at 1dcf0da against the same patches carried onto 3346fa8a2 with the kept
resolutions; skipped without REBASECTL_MEGATRON_MIRROR) states no finding that is false
(hostile 6 #12):

- partial-ckpt-load's ``def __init__(self, allow_partial_load: bool = False):`` is not "lost in
  resolution": the new patch keeps the parameter in upstream's widened signature
  (``model/lines.survives``); the lines the resolution truly dropped from checkpointing.py still
  are;
- no "adds back ``Defaults to False.``" (post-layernorm's own docstrings, in the old patch too)
  nor ``position_ids,`` (mtp-rl's, a lone argument): the report asks bump's rule
  (``CarriedLines.removed_upstream``) of the lines the resolution wrote.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness.cli import run as rebasectl
from tests.june import JUNE, REPO_ROOT, Carried

TORCH = "megatron/core/dist_checkpointing/strategies/torch.py"
CHECKPOINTING = "megatron/training/checkpointing.py"
SPECS = "megatron/core/models/gpt/gpt_layer_specs.py"
BASE = "1dcf0da"  # the old series' base (series.yaml)


@pytest.fixture(scope="module")
def findings(june_carried: Carried, tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    from tests.conftest import real_mirror

    ws = tmp_path_factory.mktemp("report")
    r = rebasectl(ws, "report", "--old-series", str(REPO_ROOT), "--new-series",
                  str(june_carried.series), "--upstream", str(real_mirror()), "--format",
                  "json", timeout=600)
    assert r.returncode == 1, r.stderr  # entries to review
    data: dict[str, Any] = json.loads(r.stdout)
    return [f for e in data["mapping"] for f in e["findings"]]


def _of(found: list[Any], kind: str, path: str) -> list[str]:
    return [x for f in found if f["kind"] == kind and f["path"] == path for x in f["items"]]


def test_a_kept_parameter_is_not_lost(findings: list[Any]) -> None:
    assert "def __init__(self, allow_partial_load: bool = False):" not in \
        _of(findings, "lost-in-resolution", TORCH)
    # the check ran: the old patch's branch on the flag, rewritten as a keyword, is reported
    assert "if getattr(args, 'dist_ckpt_allow_partial_load', False):" in \
        _of(findings, "lost-in-resolution", CHECKPOINTING)


def test_no_adds_back_of_the_patches_own_lines(findings: list[Any], june_carried: Carried,
                                               mirror_path: Path) -> None:
    # what made the false line: a commit of the range removed the phrase as a line of that
    # file (2caa681a, the GroupedMLP cleanup), and the carried patch adds it, as the old did
    removed = subprocess.run(["git", "-C", str(mirror_path), "log", "-p", "--format=",
                              f"{BASE}..{JUNE}", "--", SPECS], check=True,
                             capture_output=True, text=True).stdout
    assert any(ln[1:].strip() == "Defaults to False." for ln in removed.splitlines()
               if ln.startswith("-"))
    patch = next((june_carried.series / "patches").glob("*-post-layernorm.patch")).read_text()
    assert any(ln[1:].strip() == "Defaults to False." for ln in patch.splitlines()
               if ln.startswith("+"))
    said = [x for f in findings if f["kind"] == "partial-revert" for x in f["items"]]
    assert "Defaults to False." not in said and "position_ids," not in said, said
