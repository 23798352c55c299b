"""``blocked`` is a conflict an earlier failed patch caused, never a patch that merged
(hostile11 #3): a later patch whose hunks' context holds a failed patch's lines but that merges
3-way all the same, as ``git cherry-pick`` and ``git am -3`` merge it, is ``clean`` (how
``3way``) in bump, blame, apply and the report's refusal alike."""

from __future__ import annotations

import json
from pathlib import Path

from rebasectl.engine.materialize import Materializer
from rebasectl.git import Repo as GitRepo
from rebasectl.report.inputs import not_applying
from tests.harness.git import lines, tree_of
from tests.synth import rebasectl
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import TERMINAL, imported


def _chain(tmp: Path) -> tuple[Fork, Path, list[str]]:
    """p1 writes line 10, p2 line 13 (its context holds p1's line), p3 line 16; upstream
    rewrites lines 11 (beside p1's: p1 conflicts) and 19."""
    fork = Fork(tmp, {"f.txt": lines(40)})
    shas = fork.series([("feat: ten", {"f.txt": ("line 10\n", "P 10\n")}),
                        ("feat: thirteen", {"f.txt": ("line 13\n", "P 13\n")}),
                        ("feat: sixteen", {"f.txt": ("line 16\n", "P 16\n")})])
    series = imported(tmp, fork, shas[-1])
    fork.change("upstream rewrites 11", {"f.txt": ("line 11\n", "UP 11\n")})
    fork.change("upstream rewrites 19", {"f.txt": ("line 19\n", "UP 19\n")})
    return fork, series, shas


def _git_tree(fork: Fork, picks: list[str]) -> str:
    """What ``git cherry-pick`` makes of ``picks`` on main (every one merges)."""
    fork.up.git("checkout", "-q", "--detach", "main")
    for sha in picks:
        fork.up.git("cherry-pick", sha)
    tree = fork.up.tree()
    fork.up.git("checkout", "-q", "main")
    return tree


def test_a_patch_that_merged_is_clean_not_blocked(tmp_path: Path) -> None:
    fork, series, shas = _chain(tmp_path)
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  "--artifacts", str(tmp_path / "art"), env=TERMINAL)
    assert r.returncode == 1, r.stderr
    one, two, three = json.loads(r.stdout)["patches"]
    assert (one["status"], one["how"]) == ("conflict", "conflict")
    assert (two["status"], two["how"], two["blocked_by"]) == ("clean", "3way", [])
    assert (three["status"], three["how"]) == ("clean", "3way")
    assert "1 of 3 patches fail (1 conflict, 0 blocked), 1 region" in r.stderr, r.stderr
    assert "blocked by" not in r.stderr
    # blame of the merged patch agrees: it applies
    r = rebasectl(series, "blame", two["id"], "--to", "main", "--json", env=TERMINAL)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(r.stdout)
    assert data["status"] == "clean" and not data["blocked_by"], data
    # apply, p1 skipped, merges p2 as git does: the same tree
    r = rebasectl(series, "apply", "--base", "main", env=TERMINAL)
    assert r.returncode == 1, r.stdout + r.stderr
    r = rebasectl(series, "skip", env=TERMINAL)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(2/3) {two['id']}: 3way" in r.stdout + r.stderr
    worktree = series / ".rebasectl" / "tree"
    assert tree_of(worktree) == _git_tree(fork, shas[1:])


def test_the_reports_refusal_names_only_the_patch_that_fails(tmp_path: Path) -> None:
    """The report's side that does not apply on its own base: p1 fails, p2 merges (its context
    held p1's line): p2 is neither failing nor blocked."""
    fork, _, shas = _chain(tmp_path)
    git = GitRepo(fork.up.path)
    stack = fork.stack(shas)
    done = Materializer(git).run(git.resolve("main"), stack, keep_going=True)
    assert [s.status.value for s in done.steps] == ["conflict", "3way", "3way"]
    assert not_applying(stack, done) == "patch 1 'p1' does not apply (f.txt)"



def _two_hunks(tmp: Path) -> tuple[Fork, Path, str]:
    """p1 writes line 10 (upstream rewrites 11 beside it: p1 conflicts); p2 writes line 13 (its
    context holds p1's line: that hunk merges) and line 30, beside which upstream rewrites 31:
    p2 conflicts there, on upstream's doing alone. Upstream's commit on line 31 is returned."""
    fork = Fork(tmp, {"f.txt": lines(40)})
    one = lines(40).replace("line 10\n", "P 10\n")
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    fork.up.commit("feat: ten", {"f.txt": one})
    tip = fork.up.commit("feat: thirteen and thirty", {
        "f.txt": one.replace("line 13\n", "P 13\n").replace("line 30\n", "P 30\n")})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp, fork, tip)
    fork.change("upstream rewrites 11", {"f.txt": ("line 11\n", "UP 11\n")})
    return fork, series, fork.change("upstream rewrites 31", {"f.txt": ("line 31\n", "UP 31\n")})


def test_a_conflict_upstream_caused_is_not_blocked_anywhere(tmp_path: Path) -> None:
    """p2's conflict is upstream's (its hunk that needed p1's line merged): bump, blame, apply's
    stop after p1 is skipped, ``status`` and the report's refusal all call it a conflict naming
    upstream's commit, none "blocked" (``status`` and the refusal read the hunks' needs
    before, not the conflict's regions)."""
    fork, series, culprit = _two_hunks(tmp_path)
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  "--artifacts", str(tmp_path / "art"), env=TERMINAL)
    assert r.returncode == 1, r.stderr
    one, two = json.loads(r.stdout)["patches"]
    assert (two["status"], two["blocked_by"]) == ("conflict", [])
    assert [c["commit"] for c in two["culprits"]] == [culprit]
    r = rebasectl(series, "blame", two["id"], "--to", "main", "--json", env=TERMINAL)
    assert r.returncode == 1 and json.loads(r.stdout)["status"] == "conflict", r.stdout
    r = rebasectl(series, "apply", "--base", "main", env=TERMINAL)
    assert r.returncode == 1, r.stdout + r.stderr
    r = rebasectl(series, "skip", env=TERMINAL)
    assert r.returncode == 1 and f"stopped at 2/2 {two['id']}" in r.stdout, r.stdout + r.stderr
    assert f"changed upstream by {culprit[:12]}" in r.stdout and "blocked" not in r.stdout
    r = rebasectl(series, "status", env=TERMINAL)
    assert r.returncode == 0 and "blocked" not in r.stdout, r.stdout
    r = rebasectl(series, "status", "--json", env=TERMINAL)
    assert json.loads(r.stdout)["apply_in_progress"]["blocked_by"] == [], r.stdout
    git = GitRepo(fork.up.path)
    stack = fork.stack(git.history.rev_list([f"{fork.base}..fork"]))
    done = Materializer(git).run(git.resolve("main"), stack, keep_going=True)
    assert not_applying(stack, done) == \
        "patch 1 'p1' does not apply (f.txt); patch 2 'p2' does not apply (f.txt)"
