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


def test_unreadable_apply_state_is_cleared_by_abort(world: World, tmp_path: Path) -> None:
    """An unreadable apply-state.json: status says `rebasectl abort` (exit 2), abort clears it and
    apply works again."""
    series = conflicted(world, tmp_path)
    (series / ".rebasectl" / "apply-state.json").write_text("{garbage")
    r = run(series, "status", want=2)
    assert "rebasectl abort" in r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


def test_unreadable_tree_map_is_cleared_by_abort(world: World, tmp_path: Path) -> None:
    """An unreadable tree.json (wrong types): apply says "`rebasectl abort` clears it" (exit 2),
    and abort does, after which apply works again."""
    series = applied(world, tmp_path)
    (series / ".rebasectl" / "tree.json").write_text("[1, 2]")
    r = run(series, "apply", want=2)
    assert "`rebasectl abort` clears it" in r.stderr
    run(series, "abort", want=0)
    run(series, "apply", want=0)


def test_mirror_gone_mid_conflict_advice_gets_out(world: World, tmp_path: Path) -> None:
    """.rebasectl/upstream.git removed during a conflict: continue exits 2, and no rebasectl
    command it advises is refused as bad input in turn."""
    series = conflicted(world, tmp_path)
    shutil.rmtree(series / ".rebasectl" / "upstream.git")
    r = run(series, "continue", want=2)
    for command in advised(r.stderr):
        if command.startswith("rebasectl "):
            args = command.replace("URL|PATH", str(world.sc.up.path)).split()[1:]
            r2 = run(series, *args)
            assert r2.returncode != 2, (command, r2.stderr)


def test_abort_says_only_what_it_removed(world: World, tmp_path: Path) -> None:
    """apply-state.json naming another directory (a victim folder): abort leaves it and its files,
    and never says it removed it."""
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


def test_tampered_journal_and_lock_are_refused(world: World, tmp_path: Path) -> None:
    """An export journal naming a file outside the checkout, and `lock` as a symlink: both
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


def test_non_hex_base_in_apply_state_is_refused(
    sc: Scenario, tmp_path: Path
) -> None:
    """apply-state.json with a tampered `"base": "gggg…"` (40 non-hex letters) is "unreadable
    rebasectl state ...; `rebasectl abort` clears it", as for every other bad field: a state is
    read only if it is what rebasectl wrote (never advice built on a sha that is not one)."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--base", sc.new_base, want=1)
    state = series / ".rebasectl" / "apply-state.json"
    state.write_text(state.read_text().replace(sc.new_base, "g" * 40))
    r = run(series, "continue", want=2)
    assert "unreadable rebasectl state" in r.stderr, r.stderr
