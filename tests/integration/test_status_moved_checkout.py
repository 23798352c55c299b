"""``rebasectl status`` in a checkout moved (``mv``) mid-conflict: it read the work tree's git
status through the tree's old absolute link and ended 'rebasectl: error: git status failed:
fatal: not a git repository: OLD/.rebasectl/upstream.git/worktrees/tree' (exit 2, no way out
named), while ``continue`` relinks such a tree. Now status answers (exit 0), says the work tree
could not be read and names the command that relinks it; that command works."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness.cli import ok, run
from tests.harness.git import git
from tests.harness.scenes import World, advised, conflicted, tree


def test_status_after_the_checkout_moved(world: World, tmp_path: Path) -> None:
    moved = tmp_path / "moved"
    conflicted(world, tmp_path).rename(moved)
    out = ok(moved, "status").stdout
    assert "Traceback" not in out
    last = out.strip().splitlines()[-1]
    assert "could not be read" in last, out
    data = json.loads(ok(moved, "status", "--json").stdout)
    assert data["apply_in_progress"]["tree_error"]
    assert advised(last) == ["rebasectl continue"]
    run(moved, "continue", want=1)  # relinked; the conflict is still there to resolve
    assert "a.txt" in git(tree(moved), "status", "--porcelain").stdout
    out = ok(moved, "status").stdout
    assert "could not be read" not in out and "unmerged: a.txt" in out, out


def test_status_of_a_moved_checkout_whose_old_place_has_a_new_one(world: World,
                                                                   tmp_path: Path) -> None:
    """`mv a b`, then a new checkout at `a`: b's tree links to a's registration, so git (and
    rebasectl reading through it) would take a's HEAD and index for b's: status in b says the
    tree was moved and continue relinks it, instead of "HEAD moved ... abort" or a's unmerged
    files (hostile9 F5); continue does relink it, its conflict intact."""
    a = conflicted(world, tmp_path, "a")
    moved = tmp_path / "b"
    a.rename(moved)
    conflicted(world, tmp_path, "a")
    last = ok(moved, "status").stdout.strip().splitlines()[-1]
    assert "could not be read" in last and "it was moved" in last, last
    assert advised(last) == ["rebasectl continue"]
    run(moved, "continue", want=1)
    assert "a.txt" in git(tree(moved), "status", "--porcelain").stdout
    assert "unmerged: a.txt" in ok(moved, "status").stdout
