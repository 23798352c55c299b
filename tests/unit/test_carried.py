"""The carried-lines engine on synthetic upstreams: lines upstream landed (named by the commit that
brought them, not a later one that merely touches the file), lines it did not, lines the old base
already had (no evidence), a removal upstream made, a file upstream renamed, and the threshold."""

from __future__ import annotations

from pathlib import Path

from rebasectl.engine import serialize
from rebasectl.engine.attribution import UpstreamRange, worth_blaming
from rebasectl.engine.carried import (
    CARRIED_SHARE,
    CarriedLines,
    Change,
    reverse_applies,
    telling,
)
from rebasectl.git import Repo as GitRepo
from tests.harness.git import lines
from tests.unit.test_attribution import Fork


def _engine(fork: Fork) -> CarriedLines:
    return CarriedLines(UpstreamRange(GitRepo(fork.up.path), fork.base, fork.up.head()))


FEATURE = "line 20\nfeature = enabled()\nweights = load(path, strict=False)\n"


def test_patch_carried_names_the_commit_that_brought_its_lines(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30), "b.txt": lines(30, "b")})
    shas = fork.series([
        ("feat: the feature", {"a.txt": ("line 20\n", FEATURE)}),
        ("feat: only ours", {"b.txt": ("b 5\n", "b 5\nnothing_upstream_has = 1\n")}),
    ])
    fork.change("unrelated", {"a.txt": ("line 2\n", "line 2 x\n")})
    # upstream lands the same lines with different context (not the same patch-id)
    brought = fork.change("upstream lands it", {"a.txt": ("line 25\n", "line 25\n" + FEATURE[8:])})
    later = fork.change("touches the file later", {"a.txt": ("line 28\n", "line 28 y\n")})
    engine = _engine(fork)
    stack = fork.stack(shas)
    got = engine.patch(stack[0].patch)
    assert got.carried and got.commit == brought and got.how == "lines"
    assert got.commit != later and got.share == 1.0 and got.total == 2
    assert serialize.carried(got)["threshold"] == CARRIED_SHARE
    ours = engine.patch(stack[1].patch)
    assert not ours.carried and ours.commit is None and ours.share == 0.0


def test_same_patch_id_is_taken_first(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("feat", {"a.txt": ("line 20\n", FEATURE)})])
    same = fork.change("upstream lands the feature", {"a.txt": ("line 20\n", FEATURE)})
    fork.up.git("revert", "--no-edit", same)
    fork.change("and again", {"a.txt": ("line 20\n", FEATURE)})
    engine = _engine(fork)
    patch = fork.stack(shas)[0].patch
    got = engine.patch(patch)
    assert (got.commit, got.how) == (same, "patch-id")  # the first landing, not the re-land
    assert reverse_applies(engine.rng.repo, engine.rng.new, patch)


def test_lines_the_old_base_had_are_no_evidence(tmp_path: Path) -> None:
    base = lines(30) + "feature = enabled()\n"
    fork = Fork(tmp_path, {"a.txt": base})
    shas = fork.series([("dup", {"a.txt": ("line 3\n", "line 3\nfeature = enabled()\n")})])
    fork.change("unrelated", {"a.txt": ("line 9\n", "line 9 x\n")})
    got = _engine(fork).patch(fork.stack(shas)[0].patch)
    assert not got.carried and got.total == 0


def test_removal_upstream_made_and_the_threshold(tmp_path: Path) -> None:
    body = "".join(f"value_{n} = compute({n})\n" for n in range(10))
    fork = Fork(tmp_path, {"a.txt": lines(5) + body})
    engine_lines = fork.series([("drop 0-4", {"a.txt": (body[:5 * 21 - 5], "")})])
    del engine_lines
    removed = [f"value_{n} = compute({n})".encode() for n in range(5)]
    # upstream removes four of the five lines: 0.8 of the evidence, at the threshold
    gone = fork.change("upstream drops 0-3", {"a.txt": (body[:4 * 21 - 4], "")})
    engine = _engine(fork)
    got = engine.changes([Change("a.txt", (), tuple(removed))])
    assert got.share == 0.8 and got.carried and got.commit == gone
    short = engine.changes([Change("a.txt", (b"brand_new_line = 1",), tuple(removed))])
    assert short.share < CARRIED_SHARE and not short.carried


def test_file_renamed_upstream_is_followed(tmp_path: Path) -> None:
    text = lines(40)
    fork = Fork(tmp_path, {"old.txt": text})
    shas = fork.series([("feat", {"old.txt": ("line 20\n", FEATURE)})])
    fork.up.git("mv", "old.txt", "new.txt")
    fork.up.git("commit", "-q", "-m", "rename")
    brought = fork.change("lands it", {"new.txt": ("line 20\n", FEATURE)})
    got = _engine(fork).patch(fork.stack(shas)[0].patch)
    assert got.carried and got.commit == brought


def test_absorbed_patch_is_named_by_patch_id_or_content(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30), "b.txt": lines(30, "b")})
    shas = fork.series([
        ("feat: add a feature line", {"a.txt": ("line 20\n", "line 20\nfeature = enabled()\n")}),
        ("feat: tweak b", {"b.txt": ("b 5\n", "b five\n")}),
    ])
    fork.change("unrelated", {"a.txt": ("line 2\n", "line 2 x\n")})
    same = fork.change("upstream lands the feature",
                       {"a.txt": ("line 20\n", "line 20\nfeature = enabled()\n")})
    mixed = fork.change("upstream lands the tweak with more",
                        {"b.txt": ("b 5\n", "b five\n"), "a.txt": ("line 29\n", "line 29 y\n")})
    fork.change("later edit next to it", {"b.txt": ("b 9\n", "b 9 z\n")})
    fork.up.git("revert", "--no-edit", same)
    fork.change("upstream lands the feature again",
                {"a.txt": ("line 20\n", "line 20\nfeature = enabled()\n")})

    git = GitRepo(fork.up.path)
    rng = UpstreamRange(git, fork.base, fork.up.head())
    engine = CarriedLines(rng)
    stack = fork.stack(shas)
    assert engine.same_patch_id(stack[0].patch) == same  # the first landing, not the re-land
    assert engine.patch(stack[0].patch).commit == same
    assert reverse_applies(git, rng.new, stack[0].patch)
    assert engine.same_patch_id(stack[1].patch) == mixed  # its change to b.txt is exactly the patch
    assert reverse_applies(git, rng.new, stack[1].patch)
    assert not reverse_applies(git, fork.base, stack[1].patch)


def test_a_line_replaced_differently_upstream_is_not_carried(tmp_path: Path) -> None:
    """The patch turns ``line 3`` into ``P 3``, upstream turned it into ``UP 3``: the removal
    agrees, the addition does not, and a short added line is still evidence (it was not: the
    removal alone gave share 1.0 and bump called the patch upstreamed)."""
    fork = Fork(tmp_path, {"a.txt": lines(12)})
    shas = fork.series([("feat: line 3", {"a.txt": ("line 3\n", "P 3\n")})])
    fork.change("upstream: line 3", {"a.txt": ("line 3\n", "UP 3\n")})
    got = _engine(fork).patch(fork.stack(shas)[0].patch)
    assert not got.carried and got.commit is None
    assert (got.found, got.total) == (1, 2)


def test_comment_lines_are_no_evidence_for_bump_report_and_proposals(tmp_path: Path) -> None:
    """Upstream lands a fork's fix in its own words: the code lines, not the fork's comments
    (June: 2e4a5d48 made patch #22's gate-TP-slice fix without its two comment lines). The
    patch is carried, naming that commit, by the one question bump and the report ask
    (``patch``) and by the one the proposals ask of a region (``changes``); a preprocessor line
    is code, not a comment."""
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    commented = "line 20\n# gate the slice: kv heads < tp\n#\n" + FEATURE[8:]
    shas = fork.series([("fix: gate", {"a.txt": ("line 20\n", commented)})])
    brought = fork.change("upstream fix", {"a.txt": ("line 24\n", "line 24\n" + FEATURE[8:])})
    engine = _engine(fork)
    got = engine.patch(fork.stack(shas)[0].patch)
    assert got.carried and got.commit == brought and (got.found, got.total) == (2, 2)
    region = engine.changes([Change.of_sides("a.txt", [b"line 20"],
                                             [ln.encode() for ln in commented.splitlines()])])
    assert region.commit == brought
    assert not telling(b"# gate the slice: kv heads < tp") and not telling(b"#")
    assert telling(b"#include <cuda_runtime.h>") and telling(b"#define WARP 32")
    # blame names a comment's author as well as code's (the attribution engine and the report's
    # interdiffs ask about these lines); only the carried evidence leaves comments out
    assert worth_blaming(b"# gate the slice: kv heads < tp") and not worth_blaming(b"# ):")
    for line in (b"):", b"else:", b"x = 1", b"return compute(a)", b"#define WARP 32"):
        assert telling(line) == worth_blaming(line), line
