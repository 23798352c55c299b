"""Damaged or tampered state under .rebasectl/ (unreadable apply-state.json or tree.json, a
removed mirror, a journal or state naming paths elsewhere, a lock that is a symlink): refused
or cleared by the command the message advises, and nothing outside the checkout is touched.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.harness.cli import run
from tests.harness.scenes import (
    World,
    advised,
    applied,
    conflicted,
)
from tests.sfix import Scenario, copy


# hostile review round 2, finding F8
def test_unreadable_apply_state_is_cleared_by_abort(world: World, tmp_path: Path) -> None:
    """F8: an unreadable apply-state.json: every command (status included) says "`rebasectl
    abort` clears it", and abort fails with that same message (exit 2)."""
    series = conflicted(world, tmp_path)
    (series / ".rebasectl" / "apply-state.json").write_text("{garbage")
    r = run(series, "status", want=2)
    assert "rebasectl abort" in r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


# hostile review round 2, finding F9
def test_unreadable_tree_map_is_cleared_by_abort(world: World, tmp_path: Path) -> None:
    """F9: an unreadable tree.json (wrong types): apply, export and test say "`rebasectl abort`
    clears it"; abort says "no apply in progress" (exit 2) and leaves it, so apply stays
    refused."""
    series = applied(world, tmp_path)
    (series / ".rebasectl" / "tree.json").write_text("[1, 2]")
    r = run(series, "apply", want=2)
    assert "`rebasectl abort` clears it" in r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


# hostile review round 2, finding F12
def test_mirror_gone_mid_conflict_advice_gets_out(world: World, tmp_path: Path) -> None:
    """F12: .rebasectl/upstream.git removed during a conflict: continue says "no upstream
    mirror: run `rebasectl apply --upstream URL|PATH` first"; that apply fails "an apply is in
    progress: `rebasectl continue`, `skip` or `abort` it" (exit 2)."""
    series = conflicted(world, tmp_path)
    shutil.rmtree(series / ".rebasectl" / "upstream.git")
    r = run(series, "continue", want=2)
    for command in advised(r.stderr):
        if command.startswith("rebasectl "):
            args = command.replace("URL|PATH", str(world.sc.up.path)).split()[1:]
            r2 = run(series, *args)
            assert r2.returncode != 2, (command, r2.stderr)


# hostile review round 2, finding F13
def test_abort_says_only_what_it_removed(world: World, tmp_path: Path) -> None:
    """F13: apply-state.json naming another directory (/tmp/victim): abort rightly leaves it,
    but prints "aborted; removed <victim>", and leaves the real .rebasectl/tree behind."""
    series = conflicted(world, tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "f.txt").write_text("precious\n")
    state = series / ".rebasectl" / "apply-state.json"
    data = json.loads(state.read_text())
    data["worktree"] = str(victim)
    state.write_text(json.dumps(data))
    r = run(series, "abort")
    assert (victim / "f.txt").read_text() == "precious\n"
    assert f"removed {victim}" not in r.stdout + r.stderr


# hostile review round 2, finding G5
def test_tampered_journal_and_lock_are_refused(world: World, tmp_path: Path) -> None:
    """G5: an export journal naming a file outside the checkout, and `lock` as a symlink: both
    refused, the outside files untouched."""
    series = applied(world, tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    txn = series / ".rebasectl" / "txn"
    (txn / "staged").mkdir(parents=True)
    (txn / "staged" / "00000").write_text("evil\n")
    (txn / "journal.json").write_text(
        json.dumps({"moves": [["staged/00000", f"../{victim.name}"]], "deletes": [str(victim)]})
    )
    run(series, "status", want=2)
    assert victim.read_text() == "precious\n"
    shutil.rmtree(txn)
    lock = series / ".rebasectl" / "lock"
    lock.unlink()
    lock.symlink_to(victim)
    run(series, "status")
    run(series, "apply", want=2)
    assert victim.read_text() == "precious\n"


# hostile review round 3, finding F7
def test_non_hex_base_in_apply_state_is_refused(
    sc: Scenario, tmp_path: Path
) -> None:
    """F7: apply-state.json is checked on load ("sha": 40 characters, isalnum), so a tampered
    `"base": "gggg…"` (40 non-hex letters) loads. `continue` then claims "HEAD moved to
    2d6018d10f8b while patch change-a-line-3 waits on gggggggggggg ... `rebasectl abort`, then
    `rebasectl apply --base gggggggggggg` stops at the patch again": HEAD did not move, and the
    advised apply fails. A state that is not what rebasectl wrote must be "unreadable
    rebasectl state ...; `rebasectl abort` clears it" (as for every other bad field)."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--base", sc.new_base, want=1)
    state = series / ".rebasectl" / "apply-state.json"
    state.write_text(state.read_text().replace(sc.new_base, "g" * 40))
    r = run(series, "continue", want=2)
    assert "unreadable rebasectl state" in r.stderr, r.stderr
