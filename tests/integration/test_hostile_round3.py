"""Hostile round 3: one test per finding (``test_fN_*``, each failing at fbec91e), plus guards
(``test_gN_*``) for what holds.

Synthetic scenarios: tests/sfix.py (patch 1 conflicts on ``new_base``) and ``two_conflicts``
below (both patches conflict on the new base, so the second stop is reached through
``continue``, as every stop after the first of a real bump is). The tests that use the real
mirror (REBASECTL_MEGATRON_MIRROR) skip without it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import real_mirror
from tests.sfix import Scenario, copy, module_hermetic_git, template_fixture
from tests.synth import Repo, lines, rebasectl

ROOT = Path(__file__).resolve().parents[2]
JUNE = "3346fa8a2"


# == helpers =======================================================================================
def git(path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["git", "-C", str(path), *args],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
    )
    if check:
        assert proc.returncode == 0, (args, proc.stderr)
    return proc


def run(series: Path, *args: str, want: int | None = None) -> subprocess.CompletedProcess[str]:
    r = rebasectl(series, *args, timeout=300)
    if want is not None:
        assert r.returncode == want, (args, r.returncode, r.stdout, r.stderr)
    return r


def tree(series: Path) -> Path:
    return series / ".rebasectl" / "tree"


_REGION = re.compile(r"<<<<<<< [^\n]*\n.*?>>>>>>> [^\n]*\n", re.S)


def resolve_all(path: Path, text: str) -> None:
    """Replace every conflict region of ``path`` with ``text`` (a person's resolution)."""
    path.write_text(_REGION.sub(text, path.read_text()))


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    yield from template_fixture(tmp_path_factory, "round3")


A = lines(40, "a")


@dataclass
class Two:
    up: Repo
    series: Path
    new_base: str


@pytest.fixture(scope="module")
def two_conflicts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Two]:
    """Upstream rewrites lines 3 and 20 of a.txt; patch `one` changes line 3, patch `two`
    line 20: both conflict on the new base. The upstream also ignores ``local/`` and ``*~``
    (as Megatron-LM's .gitignore does)."""
    with module_hermetic_git(tmp_path_factory):
        root = tmp_path_factory.mktemp("two")
        up = Repo(root / "up")
        base = up.commit("base", {"a.txt": A, ".gitignore": "local/\n*~\n"})
        up.branch("feature")
        up.commit("upstream", {"a.txt": A.replace("a 3\n", "UP 3\n").replace("a 20\n", "UP 20\n")})
        new_base = up.head()
        up.checkout("feature")
        up.commit("fix: one", {"a.txt": A.replace("a 3\n", "P 3\n")})
        up.commit("fix: two", {"a.txt": A.replace("a 3\n", "P 3\n").replace("a 20\n", "P 20\n")})
        up.checkout("main")
        series = root / "series"
        series.mkdir()
        r = rebasectl(series, "import", f"{base}..feature", "--repo", str(up.path))
        assert r.returncode == 0, r.stderr
        yield Two(up, series, new_base)


def copy_two(two: Two, tmp: Path) -> Path:
    series = tmp / "series"
    shutil.copytree(two.series, series, symlinks=True)
    return series


# == findings ======================================================================================
def test_f1a_export_drops_comments_of_series_yaml(sc: Scenario, tmp_path: Path) -> None:
    """F1a: series.yaml is edited by hand (docs/design.md: "a maintainer edits this file by
    hand"); `rebasectl apply` then `rebasectl export` with nothing changed in the work tree
    rewrites series.yaml from the model (yaml.safe_dump) and every comment in it is gone:
    "exported 5 patches on 4bbb2cfa320d; 1 files changed / series.yaml". An export that changes
    no patch must leave series.yaml as it was (or at least keep what the user wrote)."""
    series = copy(sc, tmp_path)
    text = (series / "series.yaml").read_text()
    text = "# miles carries these on Megatron; ask #infra before dropping one\n" + text.replace(
        "patches:\n", "patches:\n# keep change-a-line-3 first: later patches build on it\n", 1
    )
    (series / "series.yaml").write_text(text)
    run(series, "check", want=0)
    run(series, "apply", want=0)
    run(series, "export", want=0)
    after = (series / "series.yaml").read_text()
    assert "ask #infra before dropping one" in after
    assert "keep change-a-line-3 first" in after


def test_f1b_noop_export_rewrites_the_projects_series_yaml(tmp_path: Path) -> None:
    """F1b: this repository's own series.yaml: `rebasectl apply --upstream MIRROR` on the pinned
    1dcf0da, then `rebasectl export` with no change at all prints "exported 9 patches on
    1dcf0dafa884; 1 files changed / series.yaml": routing-replay's `why:` is re-wrapped (lines
    80-82 differ), so every maintainer's no-op export leaves a diff to commit or revert. Nothing
    changed, so no byte may change (docs/design.md: "Re-exporting an unchanged series changes
    no byte")."""
    mirror = real_mirror()
    series = tmp_path / "series"
    shutil.copytree(ROOT / "patches", series / "patches")
    shutil.copy(ROOT / "series.yaml", series / "series.yaml")
    run(series, "apply", "--upstream", str(mirror), want=0)
    r = run(series, "export", want=0)
    assert (series / "series.yaml").read_bytes() == (ROOT / "series.yaml").read_bytes(), r.stdout


def test_f2_forget_leaves_rerere_variant_so_the_wrong_resolution_returns(
    two_conflicts: Two, tmp_path: Path
) -> None:
    """F2: a conflict reached through `continue` (every stop after the first, e.g. patches 2-5 of
    the real June bump) is recorded by rerere twice, as variant 0 (preimage only) and variant 1
    (rr-cache/<id>/preimage.1, postimage.1); the whole-resolution record then names the
    conflict `<id>.1`, and `forget_rerere` looks for a folder `rr-cache/<id>.1`, which does not
    exist. Repro: apply --base NEW (stops at `one`), resolve, continue (stops at `two`), resolve
    `two` wrongly (WRONG 20), continue; `rebasectl forget two` prints "forgot 1 recorded
    resolution(s) and 0 rerere record(s)"; the next `apply --base NEW` "stopped at 2/2 two ...
    a.txt: content conflict ... edit the files (markers ...)" but a.txt has no markers: rerere
    put the forgotten WRONG 20 back (unmerged, so a `git add` + continue commits it again). On
    the real tree the same happens to mtp-rl, post-layernorm, mla-rope-triton and
    partial-ckpt-load. forget must take the resolution back whole: markers again."""
    series = copy_two(two_conflicts, tmp_path)
    nb = two_conflicts.new_base
    run(series, "apply", "--base", nb, want=1)
    resolve_all(tree(series) / "a.txt", "P 3 + UP 3\n")
    git(tree(series), "add", "a.txt")
    r = run(series, "continue", want=1)
    assert "stopped at 2/2 two" in r.stdout
    resolve_all(tree(series) / "a.txt", "WRONG 20\n")
    git(tree(series), "add", "a.txt")
    run(series, "continue", want=0)
    r = run(series, "forget", "two", want=0)
    r = run(series, "apply", "--base", nb, want=1)
    text = (tree(series) / "a.txt").read_text()
    assert "WRONG 20" not in text, f"the forgotten resolution came back: {r.stdout}"
    assert "<<<<<<< " in text


def test_f3_abort_deletes_ignored_files_without_keeping_them(
    two_conflicts: Two, tmp_path: Path
) -> None:
    """F3: abort promises to keep the untracked files of the tree it removes under
    .rebasectl/aborted/, but it lists them with `git status --ignored=no`, so files the upstream's
    .gitignore covers are deleted unseen. Megatron-LM's .gitignore has `local/`, `logs`, `runs/`,
    `*~`, `*.swp`: notes kept in local/ during a resolution, or an editor's backup of the file
    being resolved, are lost. Repro: apply --base NEW (conflict), write local/notes.md and
    a.txt~ in the tree, `rebasectl abort`: "aborted; removed .../.rebasectl/tree" and nothing
    kept (on the real tree: "kept 1 untracked file(s)" = only the unignored NOTES.txt)."""
    series = copy_two(two_conflicts, tmp_path)
    run(series, "apply", "--base", two_conflicts.new_base, want=1)
    (tree(series) / "local").mkdir()
    (tree(series) / "local" / "notes.md").write_text("how I resolved a.txt\n")
    (tree(series) / "a.txt~").write_text("my half-done resolution\n")
    run(series, "abort", want=0)
    kept = [p.name for p in (series / ".rebasectl" / "aborted").rglob("*") if p.is_file()]
    assert "notes.md" in kept and "a.txt~" in kept, kept


def test_f4_a_worktree_without_git_link_is_deleted_as_half_removed(
    sc: Scenario, tmp_path: Path
) -> None:
    """F4: `apply --worktree ../wt`, then the user turns ../wt into a plain folder (`rm
    ../wt/.git`) and keeps working there (wt/mynotes.txt). The next command of the checkout
    (here `apply`) deletes the whole folder: "removed the rest of .../wt, left by an interrupted
    `git worktree remove`" — no `git worktree remove` ran; mynotes.txt is gone. A folder outside
    .rebasectl/ with files rebasectl did not write must never be deleted."""
    series = copy(sc, tmp_path)
    wt = tmp_path / "wt"
    run(series, "apply", "--worktree", str(wt), want=0)
    (wt / ".git").unlink()
    (wt / "mynotes.txt").write_text("precious\n")
    run(series, "apply")
    assert (wt / "mynotes.txt").is_file(), "the user's folder was deleted"


def test_f5_a_copy_of_the_checkout_steals_the_outside_worktree(
    sc: Scenario, tmp_path: Path
) -> None:
    """F5: `apply --base NEW --worktree ../wt` (stopped at a conflict), then `cp -r series copy`
    (two checkouts of one series, e.g. to try something): any locking command in the copy
    (`rebasectl -C copy continue`) "relinks" ../wt to the copy's mirror, taking it from the
    original, which was never moved (relink_moved does not check that the old mirror is gone).
    After `rm -rf copy`, git no longer works in the original's work tree ("fatal: not a git
    repository: .../copy/.rebasectl/upstream.git/worktrees/wt")."""
    series = copy(sc, tmp_path)
    wt = tmp_path / "wt"
    run(series, "apply", "--base", sc.new_base, "--worktree", str(wt), want=1)
    link = (wt / ".git").read_text()
    dup = tmp_path / "copy"
    shutil.copytree(series, dup, symlinks=True)
    run(dup, "continue")  # refuses (unresolved), but ran the repair first
    shutil.rmtree(dup)
    assert (wt / ".git").read_text() == link
    assert git(wt, "status", "--porcelain", check=False).returncode == 0


# == guards ========================================================================================
def test_g1_moved_checkout_skip_and_export(sc: Scenario, tmp_path: Path) -> None:
    """G1: mv of the checkout after apply, export in the moved one (nothing changed), apply
    --base NEW, mv again mid-conflict, skip, export: each works with no hand work."""
    series = copy(sc, tmp_path)
    run(series, "apply", want=0)
    moved = tmp_path / "s2"
    series.rename(moved)
    assert "0 files changed" in run(moved, "export", want=0).stdout
    run(moved, "apply", "--base", sc.new_base, want=1)
    again = tmp_path / "s3"
    moved.rename(again)
    run(again, "skip", want=0)
    r = run(again, "export", want=0)
    assert "kept change-a-line-3 as it was" in r.stdout
    assert not moved.exists() and not series.exists()


def test_g2_conflict_lines_point_at_markers(two_conflicts: Two, tmp_path: Path) -> None:
    """G2: every `path:line` apply and continue print is the line of a `<<<<<<<` marker."""
    series = copy_two(two_conflicts, tmp_path)
    for step in ("apply", "continue"):
        if step == "apply":
            r = run(series, "apply", "--base", two_conflicts.new_base, want=1)
        else:
            resolve_all(tree(series) / "a.txt", "P 3 + UP 3\n")
            git(tree(series), "add", "a.txt")
            r = run(series, "continue", want=1)
        marked = (tree(series) / "a.txt").read_text().splitlines()
        spots = re.findall(r"a\.txt:(\d+): content conflict", r.stdout)
        assert spots, r.stdout
        for n in spots:
            assert marked[int(n) - 1].startswith("<<<<<<< "), (step, n)


def test_f6_conflict_resolved_by_git_stops_with_no_markers(sc: Scenario, tmp_path: Path) -> None:
    """F6: docs/design.md and session.py promise that when rerere resolves every file of the
    stopped patch, "the patch is committed and the apply goes on, saying so". It never does:
    apply --base NEW, resolve a.txt, continue (rerere records it), then the whole-resolution
    record does not match (here removed: .rebasectl/resolutions/*.json; in real use any other
    state of the file, e.g. an earlier patch resolved differently), `apply --base NEW` again:
    rerere writes the old resolution into a.txt (no markers, still `UU a.txt`) and apply exits 1
    with "stopped at 1/5 change-a-line-3 ... a.txt: content conflict" (no line) and "edit the
    files (markers `upstream` vs `patch change-a-line-3`)" — there are no markers to edit. The
    same stop is what F2 leaves. It should commit and go on (exit 0), or at least say that
    rerere resolved a.txt and that `git add` + `continue` takes it."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--base", sc.new_base, want=1)
    resolve_all(tree(series) / "a.txt", "PATCH 3 + UPSTREAM 3\n")
    git(tree(series), "add", "a.txt")
    run(series, "continue", want=0)
    for record in (series / ".rebasectl" / "resolutions").glob("*.json"):
        record.unlink()
    r = run(series, "apply", "--base", sc.new_base)
    text = (tree(series) / "a.txt").read_text()
    if r.returncode == 1:  # stopped: then there must be something to edit, as the message says
        said = (r.stdout + r.stderr).replace(str(tmp_path), "TMP")
        assert "<<<<<<< " in text or "rerere" in said, (r.stdout, r.stderr)
    else:
        assert r.returncode == 0 and "PATCH 3 + UPSTREAM 3" in text, (r.stdout, r.stderr)


def test_f7_non_hex_base_in_apply_state_gives_advice_that_fails(
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
