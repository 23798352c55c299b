"""The labelled fixture corpus: synthetic old/new series pairs, one scenario per status and
signal (identical, reorder, line-number-only move, context-only change, modified, squash, split,
dropped, upstreamed, new, empty, never-pair, absorbs lineage), each with the mapping a careful
maintainer would write. Real git repositories; nothing is mocked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rebasectl.git import Repo as GitRepo
from rebasectl.model.series import PatchEntry, Series, Upstream
from rebasectl.report import Side, build_report, render_html, render_markdown, to_json
from rebasectl.report.model import Entry, Report
from tests.harness.git import Repo

Files = dict[str, str]
Edit = Callable[[Files], Files]


def text(name: str, n: int = 40) -> str:
    return "".join(f"{name}_value_{i} = compute_{name}({i})\n" for i in range(1, n + 1))


BASE: Files = {"alpha.py": text("alpha"), "beta.py": text("beta"), "gamma.py": text("gamma"),
               "delta.py": text("delta")}


def sub(path: str, old: str, new: str) -> Edit:
    def edit(files: Files) -> Files:
        assert old in files[path], (path, old)
        return {path: files[path].replace(old, new, 1)}
    return edit


def both(*edits: Edit) -> Edit:
    def edit(files: Files) -> Files:
        out: Files = {}
        for e in edits:
            cur = {**files, **out}
            out.update(e(cur))
        return out
    return edit


@dataclass
class Scenario:
    name: str
    old: list[tuple[str, Edit]]
    new: list[tuple[str, Edit]]
    expect: set[tuple[tuple[int, ...], tuple[int, ...], str]]
    upstream: list[tuple[str, Edit]] = field(default_factory=list)
    old_ids: list[str] | None = None
    new_entries: list[PatchEntry] | None = None
    check: Callable[[Report], None] | None = None


def build(tmp: Path, sc: Scenario) -> tuple[GitRepo, Side, Side, Report]:
    repo = Repo(tmp / "repo")
    base1 = repo.commit("upstream: base", dict(BASE))
    current = dict(BASE)
    for msg, edit in sc.upstream:
        change = edit(current)
        current.update(change)
        repo.commit(msg, change)
    base2 = repo.head()
    repo.branch("new-side", base2)
    repo.checkout("-q", base1)
    old = _commits(repo, dict(BASE), sc.old)
    repo.checkout("-q", "new-side")
    new = _commits(repo, current, sc.new)
    git = GitRepo(repo.path)
    old_series = _series(base1, sc.old_ids, len(old)) if sc.old_ids else None
    new_series = Series(Upstream("up", "x", "main", base2), tuple(sc.new_entries)) \
        if sc.new_entries else None
    o = Side(base1, old, old_series, "old")
    n = Side(base2, new, new_series, "new")
    return git, o, n, build_report(git, o, n)


def _series(base: str, ids: list[str], n: int) -> Series:
    return Series(Upstream("up", "x", "main", base),
                  tuple(PatchEntry(i, f"{k:04d}-{i}.patch", i) for k, i in enumerate(ids, 1)))


def _commits(repo: Repo, files: Files, patches: list[tuple[str, Edit]]) -> list[str]:
    shas = []
    for msg, edit in patches:
        change = edit(files)
        files.update(change)
        author = "Pat Cher <pat@example.invalid>"
        shas.append(repo.commit(msg, change, author=author, allow_empty=not change))
    return shas


def entry_for_old(r: Report, index: int) -> Entry:
    return next(e for e in r.mapping if index in e.old)


def entry_for_new(r: Report, index: int) -> Entry:
    return next(e for e in r.mapping if index in e.new)


def mapping(r: Report) -> set[tuple[tuple[int, ...], tuple[int, ...], str]]:
    return {(e.old, e.new, e.status) for e in r.mapping}


A1 = sub("alpha.py", "alpha_value_10 = compute_alpha(10)\n",
         "alpha_value_10 = compute_alpha(10) * scale_factor\n")
B1 = sub("beta.py", "beta_value_20 = compute_beta(20)\n",
         "beta_value_20 = compute_beta(20)\nbeta_extra_term = extra_beta_term(20)\n")
G1 = sub("gamma.py", "gamma_value_5 = compute_gamma(5)\n",
         "gamma_value_5 = compute_gamma(5) + gamma_offset\n")
D1 = sub("delta.py", "delta_value_30 = compute_delta(30)\n",
         "delta_value_30 = compute_delta(30)\ndelta_guard = check_delta_guard(30)\n")
GAMMA_OTHER = sub("gamma.py", "gamma_value_7 = compute_gamma(7)\n",
                  "gamma_value_7 = compute_gamma(7) - other_gamma_offset\n")
MOVE_G3 = both(sub("gamma.py", "gamma_value_3 = compute_gamma(3)\n", ""),
               sub("gamma.py", "gamma_value_30 = compute_gamma(30)\n",
                   "gamma_value_30 = compute_gamma(30)\ngamma_value_3 = compute_gamma(3)\n"))
UP_ABOVE_ALPHA = sub("alpha.py", "alpha_value_1 = compute_alpha(1)\n",
                     "import upstream_thing\nalpha_value_1 = compute_alpha(1)\n")
UP_CONTEXT_ALPHA = sub("alpha.py", "alpha_value_9 = compute_alpha(9)\n",
                       "alpha_value_9 = compute_alpha_v2(9)\n")


def _renumbered(r: Report) -> None:
    e = entry_for_old(r, 1)
    assert e.renumbered and e.status == "identical"


def _moved(r: Report) -> None:
    e = entry_for_old(r, 1)
    assert e.evidence.to_json()["patch_id_equal"] is True and e.evidence.line_shift == 1
    assert e.moved and e.evidence.rule == "patch_id" and not e.review.needed


def _merge_renumbers(r: Report) -> None:
    assert [e.renumbered for e in r.mapping] == [False, False, True]
    assert [e.message_changed for e in r.mapping] == [False, True, False]


def _whitespace(r: Report) -> None:
    """patch-id ignores whitespace; the +/- lines differ, so the change is not the same (in
    Python indentation is code)."""
    e = entry_for_old(r, 1)
    ev = e.evidence.to_json()
    assert ev["patch_id_equal"] is True and ev["whitespace_differs"] is True
    assert e.evidence.whitespace_differs
    assert "line_shift" not in e.evidence.to_json() and not e.moved and e.review.needed


def _context(r: Report) -> None:
    e = entry_for_old(r, 1)
    assert e.evidence.to_json()["changed_lines_equal"] is True
    assert e.files[0].status == "equivalent"


def _modified(r: Report) -> None:
    e = entry_for_old(r, 1)
    f = e.files[0]
    assert f.status == "modified" and f.interdiff
    assert "-+alpha_value_10 = compute_alpha(10) * scale_factor" in f.interdiff
    assert "++alpha_value_10 = compute_alpha(10) * scale_factor * 2" in f.interdiff
    assert [c.subject for c in e.upstream_commits] == ["upstream: rename alpha 10 helper"]
    assert e.evidence.replay == "conflicts"
    assert e.evidence.to_json()["replay_conflicts"] == [{"path": "alpha.py", "kind": "content",
                                                         "hunks": [
        "@@ -7,7 +7,7 @@ alpha_value_6 = compute_alpha(6)"]}]


def _upstreamed(r: Report) -> None:
    e = entry_for_old(r, 2)
    assert e.evidence.to_json()["upstream_subject"] == "upstream: take the beta extra term (#42)"


def _never(r: Report) -> None:
    assert all(len(e.old) + len(e.new) == 1 for e in r.mapping)


def _message(r: Report) -> None:
    assert entry_for_old(r, 1).message_changed
    assert not entry_for_old(r, 2).message_changed


def _absorbs(r: Report) -> None:
    e = entry_for_new(r, 1)
    assert e.old == (1, 2)
    folded = e.evidence.to_json()["folded"]["2"]
    assert folded["rule"] == "absorbs" and folded["lineage"]["absorbs"] == "gamma"


def _dropped(r: Report) -> None:
    """The rule printed for an unpaired patch is what the pairing saw: no rule matched."""
    e = entry_for_old(r, 2)
    near = e.evidence.to_json()["nearest"]
    assert e.evidence.to_json()["rule"] == "unpaired"
    assert (near["index"], near["pair_rule"], near["fold_rule"]) == (1, None, None)
    assert "No rule pairs it. Nearest new patch 1" in e.details


SCENARIOS = [
    Scenario("identical", [("[1/1] fix: alpha", A1)], [("[1/1] fix: alpha", A1)],
             {((1,), (1,), "identical")}),
    Scenario("reorder", [("a", A1), ("b", B1)], [("b", B1), ("a", A1)],
             {((1,), (2,), "identical"), ((2,), (1,), "identical")}, check=_renumbered),
    Scenario("line-number-only move: identical, moved", [("a", A1)], [("a", A1)],
             {((1,), (1,), "identical")}, upstream=[("upstream: import", UP_ABOVE_ALPHA)],
             check=_moved),
    Scenario("whitespace-only difference (same patch-id)", [("a", A1)],
             [("a", sub("alpha.py", "alpha_value_10 = compute_alpha(10)\n",
                        "alpha_value_10 =  compute_alpha(10) * scale_factor\n"))],
             {((1,), (1,), "modified")}, check=_whitespace),
    Scenario("context-only change", [("a", A1)], [("a", A1)],
             {((1,), (1,), "equivalent")}, upstream=[("upstream: v2", UP_CONTEXT_ALPHA)],
             check=_context),
    Scenario("modified", [("fix: alpha scale", A1)],
             [("fix: alpha scale", sub("alpha.py", "alpha_value_10 = compute_alpha_new(10)\n",
                                       "alpha_value_10 = compute_alpha(10) * scale_factor * 2\n"))],
             {((1,), (1,), "modified")},
             upstream=[("upstream: rename alpha 10 helper",
                        sub("alpha.py", "compute_alpha(10)", "compute_alpha_new(10)"))],
             check=_modified),
    Scenario("squash", [("alpha part", A1), ("beta part", B1)],
             [("alpha and beta", both(A1, B1))], {((1, 2), (1,), "merged")}),
    Scenario("a merge renumbers the identical patch after it",
             [("alpha", A1), ("beta part", B1), ("gamma part", G1), ("delta", D1)],
             [("alpha", A1), ("beta and gamma", both(B1, G1)), ("delta", D1)],
             {((1,), (1,), "identical"), ((2, 3), (2,), "merged"), ((4,), (3,), "identical")},
             check=_merge_renumbers),
    Scenario("split", [("alpha and beta", both(A1, B1))],
             [("alpha part", A1), ("beta part", B1)], {((1,), (1, 2), "split")}),
    Scenario("dropped and new", [("a", A1), ("g", G1)], [("a", A1), ("d", D1)],
             {((1,), (1,), "identical"), ((2,), (), "dropped"), ((), (2,), "new")}),
    Scenario("upstreamed", [("a", A1), ("fix: beta extra", B1)], [("a", A1)],
             {((1,), (1,), "identical"), ((2,), (), "upstreamed")},
             upstream=[("upstream: take the beta extra term (#42)", B1)], check=_upstreamed),
    Scenario("added line upstream, removed line still there: dropped, not upstreamed",
             [("fix: alpha scale", A1)], [],
             {((1,), (), "dropped")},
             upstream=[("upstream: scaled alpha copy", sub(
                 "alpha.py", "alpha_value_40 = compute_alpha(40)\n",
                 "alpha_value_40 = compute_alpha(40)\n"
                 "alpha_value_10 = compute_alpha(10) * scale_factor\n"))]),
    Scenario("a moved line that upstream moved the same way: upstreamed",
             [("a", A1), ("refactor: move gamma 3 down", MOVE_G3)], [("a", A1)],
             {((1,), (1,), "identical"), ((2,), (), "upstreamed")},
             upstream=[("upstream: move gamma 3 (#51)", MOVE_G3)]),
    Scenario("upstreamed, carried as an empty commit", [("a", A1), ("fix: beta extra", B1)],
             [("a", A1), ("fix: beta extra", lambda f: {})],
             {((1,), (1,), "identical"), ((2,), (2,), "upstreamed")},
             upstream=[("upstream: take the beta extra term (#42)", B1)], check=_upstreamed),
    Scenario("empty marker", [("a", A1)], [("a", A1), ("marker: rebased", lambda f: {})],
             {((1,), (1,), "identical"), ((), (2,), "empty")}),
    Scenario("empty on both sides", [("marker", lambda f: {}), ("a", A1)],
             [("marker", lambda f: {}), ("a", A1)],
             {((1,), (1,), "empty"), ((2,), (2,), "identical")}),
    Scenario("never pair without shared file or line", [("fix: the thing", A1)],
             [("fix: the thing", G1)], {((1,), (), "dropped"), ((), (1,), "new")},
             check=_never),
    Scenario("one common line in other files pairs nothing",
             [("alpha", both(A1, sub("beta.py", "beta_value_1 = compute_beta(1)\n",
                                     "import torch.nn as nn\nbeta_value_1 = compute_beta(1)\n")))],
             [("alpha", A1), ("delta", sub("delta.py", "delta_value_1 = compute_delta(1)\n",
                                           "import torch.nn as nn\ndelta_value_1 = compute_delta(1)"
                                           "\n"))],
             {((1,), (1,), "modified"), ((), (2,), "new")}),
    Scenario("message changed", [("a", A1), ("b", B1)], [("a, reworded", A1), ("b", B1)],
             {((1,), (1,), "identical"), ((2,), (2,), "identical")}, check=_message),
    Scenario("absorbs lineage", [("alpha part", A1), ("gamma part", G1)],
             [("alpha and gamma", both(A1, GAMMA_OTHER))],
             {((1, 2), (1,), "merged")}, old_ids=["alpha", "gamma"],
             new_entries=[PatchEntry("alpha", "0001-alpha.patch", "alpha and gamma",
                                     absorbs=("gamma",))], check=_absorbs),
    Scenario("no absorbs, no shared line: not merged", [("alpha part", A1), ("gamma part", G1)],
             [("alpha and gamma", both(A1, GAMMA_OTHER))],
             {((1,), (1,), "modified"), ((2,), (), "dropped")}, check=_dropped),
]


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_corpus(tmp_path: Path, sc: Scenario) -> None:
    _, _, _, report = build(tmp_path, sc)
    assert mapping(report) == sc.expect
    olds = sorted(i for e in report.mapping for i in e.old)
    news = sorted(j for e in report.mapping for j in e.new)
    assert olds == list(range(1, len(sc.old) + 1))  # every patch in exactly one entry
    assert news == list(range(1, len(sc.new) + 1))
    if sc.check:
        sc.check(report)


def test_output_is_deterministic(tmp_path: Path) -> None:
    sc = SCENARIOS[4]
    git, o, n, first = build(tmp_path, sc)
    again = build_report(git, o, n)
    assert to_json(first) == to_json(again)
    assert render_markdown(first) == render_markdown(again)
    assert render_html(first) == render_html(again)
