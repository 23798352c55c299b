"""Attribution on synthetic upstreams: revert + re-land, a culprit on a merge's side branch, a
dependent patch after a failing one, an absorbed patch, and a culprit on the first-parent side of
a merge. Each history is a real git repository; the expectations are the commits built here."""

from __future__ import annotations

from pathlib import Path

from rebasectl.engine.attribution import (
    Scan,
    UpstreamRange,
    attribute,
    relevant_stack,
)
from rebasectl.engine.exchange import patch_from_commit
from rebasectl.engine.materialize import Materializer
from rebasectl.git import Repo as GitRepo
from rebasectl.model.series import PatchEntry
from rebasectl.model.series_patch import SeriesPatch
from tests.harness.git import Repo, lines


def scan(rng: UpstreamRange, stack: list[SeriesPatch],
         target: int) -> tuple[list[tuple[str, bool]], int]:
    """Every state of the walk decided (``Scan.breaks`` decides only what it needs), and how
    many distinct states were tried."""
    walk = Scan(rng, stack, target)
    walk.decide(range(len(walk.states)))
    return [(c, walk.verdicts[k]) for c, k in walk.states], len(walk.verdicts)


def breaks(statuses: list[tuple[str, bool]]) -> tuple[str | None, str | None]:
    """The definition ``Scan.breaks`` walks less of the range to answer: the first commit at
    which the patch stops applying, and the one after which it never applies again."""
    if not statuses or statuses[-1][1]:
        return None, None
    first: str | None = None
    permanent: str | None = None
    for (_, before), (commit, now) in zip(statuses, statuses[1:]):
        if before and not now:
            first = first or commit
            permanent = commit
    return first, permanent


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


class Fork:
    """An upstream repository with the series as commits on a `fork` branch from ``base``."""

    def __init__(self, tmp: Path, files: dict[str, str]) -> None:
        self.up = Repo(tmp / "up")
        self.base = self.up.commit("base", files)
        self.texts = dict(files)

    def series(self, patches: list[tuple[str, dict[str, tuple[str, str]]]]) -> list[str]:
        """Commit each patch (message, {path: (old, new)}) on `fork`; back to main."""
        self.up.git("checkout", "-q", "-b", "fork", self.base)
        texts = dict(self.texts)
        shas = []
        for message, edits in patches:
            for path, (old, new) in edits.items():
                texts[path] = edit(texts[path], old, new)
            shas.append(self.up.commit(message, {p: texts[p] for p in edits}))
        self.up.git("checkout", "-q", "main")
        return shas

    def change(self, message: str, edits: dict[str, tuple[str, str]]) -> str:
        files = {}
        for path, (old, new) in edits.items():
            current = (self.up.path / path).read_text() if (self.up.path / path).exists() else ""
            files[path] = edit(current, old, new) if old else current + new
        return self.up.commit(message, files)

    def stack(self, shas: list[str]) -> list[SeriesPatch]:
        """The commits as the series p1, p2, ... (the entry a series.yaml would hold)."""
        git = GitRepo(self.up.path)
        out = []
        for n, info in enumerate(git.commits(shas), start=1):
            patch = patch_from_commit(git, info)
            out.append(SeriesPatch(PatchEntry(f"p{n}", f"p{n}.patch", patch.subject), patch))
        return out

    def attribute(self, shas: list[str], target: int) -> tuple[object, object]:
        git = GitRepo(self.up.path)
        new = self.up.head()
        stack = self.stack(shas)
        mat = Materializer(git).run(new, stack, keep_going=True)
        step = mat.steps[target]
        failed = [s.id for s in mat.steps if s.status == "conflict"]
        rng = UpstreamRange(git, self.base, new)
        return step, attribute(rng, stack, target, step.conflicts, failed)


def test_revert_and_reland_give_different_first_and_permanent_break(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30), "b.txt": lines(5, "b")})
    shas = fork.series([("feat: patch line 10", {"a.txt": ("line 10\n", "PATCH 10\n")})])
    fork.change("unrelated b", {"b.txt": ("b 1\n", "b one\n")})
    land = fork.change("change line 9", {"a.txt": ("line 9\n", "LINE NINE\n")})
    fork.up.git("revert", "--no-edit", "HEAD")
    revert = fork.up.head()
    far = fork.change("touch a far away", {"a.txt": ("line 25\n", "line 25 x\n")})
    reland = fork.change("Reapply: change line 9", {"a.txt": ("line 9\n", "LINE NINE\n")})
    fork.change("unrelated b again", {"b.txt": ("b 2\n", "b two\n")})

    step, att = fork.attribute(shas, 0)
    assert step.status == "conflict"
    assert att.first_break is not None and att.first_break.commit == land
    assert att.permanent_break is not None and att.permanent_break.commit == reland
    culprits = [c.commit for c in att.culprits]
    assert land in culprits and reland in culprits
    assert revert not in culprits and far not in culprits
    assert all(c.path == "a.txt" for c in att.culprits)
    # the scan saw the revert: the patch applied again in between
    rng = UpstreamRange(GitRepo(fork.up.path), fork.base, fork.up.head())
    statuses, tried = scan(rng, fork.stack(shas), 0)
    assert [ok for _, ok in statuses] == [True, False, True, True, False]
    assert tried == 4  # 5 states; the revert restores the base's blob, decided once
    assert breaks(statuses) == (land, reland) == Scan(rng, fork.stack(shas), 0).breaks()


def test_culprit_on_a_merge_side_branch(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30), "c.txt": "c\n"})
    shas = fork.series([("feat: patch line 10", {"a.txt": ("line 10\n", "PATCH 10\n")})])
    fork.up.git("checkout", "-q", "-b", "side", fork.base)
    side_other = fork.change("side: unrelated", {"c.txt": ("c\n", "c side\n")})
    side_culprit = fork.change("side: change line 11", {"a.txt": ("line 11\n", "ELEVEN\n")})
    side_far = fork.change("side: far edit", {"a.txt": ("line 28\n", "line 28 side\n")})
    fork.up.git("checkout", "-q", "main")
    main_far = fork.change("main: far edit", {"a.txt": ("line 2\n", "line 2 main\n")})
    fork.up.git("merge", "-q", "--no-ff", "--no-edit", "side")
    merge = fork.up.head()

    step, att = fork.attribute(shas, 0)
    assert step.status == "conflict"
    assert att.first_break is not None and att.first_break.commit == merge
    assert att.permanent_break is not None and att.permanent_break.commit == merge
    culprits = [c.commit for c in att.culprits]
    assert culprits == [side_culprit]
    assert {side_other, side_far, main_far, merge}.isdisjoint(culprits)


def test_culprit_on_the_first_parent_side_of_a_merge(tmp_path: Path) -> None:
    """The needed line changes on main while a side branch (merged later) edits the file
    elsewhere: blame --reverse ends on the side branch, the culprit is on main."""
    fork = Fork(tmp_path, {"a.txt": lines(30)})
    shas = fork.series([("feat: patch line 10", {"a.txt": ("line 10\n", "PATCH 10\n")})])
    fork.up.git("checkout", "-q", "-b", "side", fork.base)
    fork.change("side: far edit", {"a.txt": ("line 27\n", "line 27 side\n")})
    fork.up.git("checkout", "-q", "main")
    main_culprit = fork.change("main: change line 11", {"a.txt": ("line 11\n", "ELEVEN\n")})
    fork.up.git("merge", "-q", "--no-ff", "--no-edit", "side")

    step, att = fork.attribute(shas, 0)
    assert step.status == "conflict"
    assert att.first_break is not None and att.first_break.commit == main_culprit
    assert [c.commit for c in att.culprits] == [main_culprit]


def test_dependent_patch_after_a_failing_one(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.txt": lines(30), "b.txt": lines(10, "b")})
    shas = fork.series([
        ("feat: one", {"a.txt": ("line 10\n", "ONE 10\n")}),
        ("feat: unrelated", {"b.txt": ("b 3\n", "B3\n")}),
        ("feat: two, on top of one", {"a.txt": ("line 11\n", "TWO 11\n")}),
    ])
    culprit = fork.change("upstream rewrites line 10", {"a.txt": ("line 10\n", "UP 10\n")})
    fork.change("unrelated", {"b.txt": ("b 9\n", "b nine\n")})

    stack = fork.stack(shas)
    assert relevant_stack(stack, 2) == [0, 2]
    step, att = fork.attribute(shas, 2)
    assert step.status == "conflict"
    assert att.blocked_by == ["p1"]
    assert att.first_break is not None and att.first_break.commit == culprit
    first, att1 = fork.attribute(shas, 0)
    assert first.status == "conflict" and [c.commit for c in att1.culprits] == [culprit]
    unrelated, _ = fork.attribute(shas, 1)
    assert unrelated.status == "clean"


def test_side_branch_read_for_several_files_answers_each_alone(tmp_path: Path) -> None:
    """``side`` reads a merge's side branch once for every file the range's reverse blames are
    about: each file's answer (its commits, oldest first, and the lines each removed) is the
    one that file asked alone gets, including a commit that touches the file without removing
    a line and one that touches both files."""
    fork = Fork(tmp_path, {"a.txt": lines(30), "b.txt": lines(20, "b"), "c.txt": "c\n"})
    fork.up.git("checkout", "-q", "-b", "side", fork.base)
    only_a = fork.change("side: a", {"a.txt": ("line 11\n", "ELEVEN\n")})
    both = fork.change("side: a and b", {"a.txt": ("line 20\n", ""), "b.txt": ("b 3\n", "B3\n")})
    fork.change("side: c", {"c.txt": ("c\n", "c side\n")})
    adds_b = fork.change("side: adds to b", {"b.txt": ("", "b 21\n")})
    fork.up.git("checkout", "-q", "main")
    keeper = fork.change("main: far", {"a.txt": ("line 2\n", "line 2 main\n")})
    fork.up.git("merge", "-q", "--no-ff", "--no-edit", "side")
    merge = fork.up.head()
    git = GitRepo(fork.up.path)

    together = UpstreamRange(git, fork.base, merge)
    together.expect_blame("b.txt", [3], reverse=True)
    got_a = together.side(keeper, merge, "a.txt")
    got_b = together.side(keeper, merge, "b.txt")
    alone_a = UpstreamRange(git, fork.base, merge).side(keeper, merge, "a.txt")
    alone_b = UpstreamRange(git, fork.base, merge).side(keeper, merge, "b.txt")
    assert got_a == alone_a == [(only_a, {b"line 11"}), (both, {b"line 20"})]
    assert got_b == alone_b == [(both, {b"b 3"}), (adds_b, set())]
