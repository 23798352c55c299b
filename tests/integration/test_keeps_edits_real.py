"""hostile5 findings 1 and 3 on the real tree: at the first stop of the June apply
(partial-ckpt-load), notes added to README.md and megatron/core/parallel_state.py (files the
patch does not touch) were gone after `continue`, and `abort` then deleted the work tree the
apply had replaced (an `apply --install` .pth names it). Now both notes stay unstaged through
`continue` to the next stop, abort keeps copies of them, and puts the replaced tree back at its
commit. Skips without REBASECTL_MEGATRON_MIRROR."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import real_mirror
from tests.harness.cli import run
from tests.harness.git import git_out
from tests.june import JUNE, copy_series, resolve_from

NOTES = {"README.md": "# my note\n", "megatron/core/parallel_state.py": "# my note too\n"}


def test_continue_and_abort_keep_everything_on_the_real_tree(tmp_path: Path) -> None:
    mirror = str(real_mirror())
    series = copy_series(tmp_path / "series")
    tree = series / ".rebasectl" / "tree"
    run(series, "apply", "--upstream", mirror, want=0)
    before = git_out(tree, "rev-parse", "HEAD")
    run(series, "apply", "--base", JUNE, want=1)
    state = series / ".rebasectl" / "apply-state.json"
    first = json.loads(state.read_text())["current"]
    resolve_from(tree, first)
    for rel, note in NOTES.items():
        (tree / rel).write_text((tree / rel).read_text() + note)
    run(series, "continue", want=1)  # the next stop
    assert json.loads(state.read_text())["current"] != first
    for rel, note in NOTES.items():
        assert (tree / rel).read_text().endswith(note), rel
        assert git_out(tree, "status", "--porcelain", "--", rel) == f"M {rel}"
    out = run(series, "abort", want=0).stdout
    assert f"put {tree} back at {before[:12]}" in out, out
    kept = re.search(r"copies in edited/\) of the removed work tree in (\S+)", out)
    assert kept, out
    for rel, note in NOTES.items():
        assert (Path(kept.group(1)) / "edited" / rel).read_text().endswith(note), rel
    assert git_out(tree, "rev-parse", "HEAD") == before
    assert git_out(tree, "status", "--porcelain") == ""
