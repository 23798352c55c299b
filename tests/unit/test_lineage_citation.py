"""Merges and splits read from what the subjects cite (PR tags, shas) as well as from content:
``feat: TMS regions (#17, #18)`` takes ``... (#17)`` and ``... (#18)`` even when neither holds
half of the other's lines; an old subject that cites two new patches is a split; one citation
is not a merge; a patch cited but sharing no file or line is never taken."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebasectl.git import Repo as GitRepo
from rebasectl.report import Side, build_report
from rebasectl.report.lineage import cited
from tests.synth import Repo


@pytest.mark.parametrize("subject, prs, shas", [
    ("feat: TMS regions (#17, #18)", {"17", "18"}, set()),
    ("fix: params (#19, fp32 leaf detach)", {"19"}, set()),
    ("true-on-policy: migrate (#23924a0b6)", set(), {"23924a0b6"}),
    ("fix: a (#6)", {"6"}, set()),
    ("no tags #7 here", set(), set()),
    ("digits only (#1234567)", set(), set()),  # 7 digits: neither a PR number nor a sha
])
def test_cited(subject: str, prs: set[str], shas: set[str]) -> None:
    assert cited(subject) == (prs, shas)


def lines(name: str, n: int = 30) -> str:
    return "".join(f"{name}_{i} = make_{name}({i})\n" for i in range(1, n + 1))


def _side(repo: Repo, base: str, branch: str) -> Side:
    commits = repo.git("rev-list", "--reverse", f"{base}..{branch}").split()
    return Side(base, commits, None, branch)


def _world(tmp: Path, old: list[tuple[str, dict[str, str]]],
           new: list[tuple[str, dict[str, str]]]) -> list[tuple[list[int], list[int], str, str]]:
    repo = Repo(tmp / "r")
    files = {"a.py": lines("a"), "b.py": lines("b"), "c.py": lines("c")}
    base = repo.commit("base", files)
    for branch, series in (("old", old), ("new", new)):
        repo.checkout("-q", "-B", branch, base)
        state = dict(files)
        for subject, edits in series:
            for path, change in edits.items():
                before, after = change.split("=>")
                assert before in state[path]
                state[path] = state[path].replace(before, after, 1)
            repo.commit(subject, {p: state[p] for p in edits})
    git = GitRepo.open(repo.path)
    report = build_report(git, _side(repo, base, "old"), _side(repo, base, "new"))
    return [(list(e.old), list(e.new), e.status, str(e.evidence.rule))
            for e in report.mapping]


A1 = "a_3 = make_a(3)\n=>a_3 = make_a(3) * scale_one\n"
B1 = "b_7 = make_b(7)\n=>b_7 = make_b(7) + offset_two\n"
AB = {"a.py": "a_3 = make_a(3)\n=>a_3 = make_a(3) * scale_one_v2\n",
      "b.py": "b_7 = make_b(7)\n=>b_7 = make_b(7) + offset_two_v2\n"}


def test_merge_by_pr_tags(tmp_path: Path) -> None:
    rows = _world(tmp_path, [("fix: scale a (#17)", {"a.py": A1}),
                             ("fix: offset b (#18)", {"b.py": B1})],
                  [("feat: both fixes (#17, #18)", AB)])
    assert rows == [([1, 2], [1], "merged", "citation")]


def test_split_by_pr_tags(tmp_path: Path) -> None:
    rows = _world(tmp_path, [("feat: both fixes (#17, #18)", AB)],
                  [("fix: scale a (#17)", {"a.py": A1}), ("fix: offset b (#18)", {"b.py": B1})])
    assert rows == [([1], [1, 2], "split", "citation")]


def test_one_citation_or_no_shared_file_is_no_merge(tmp_path: Path) -> None:
    """(#17, #18) where #18 touches another file than the new patch: #17 alone is cited and
    shares a file, so the content rules decide, and #18 is not taken by its tag."""
    c1 = {"c.py": "c_5 = make_c(5)\n=>c_5 = make_c(5) - other_thing\n"}
    rows = _world(tmp_path, [("fix: scale a (#17)", {"a.py": A1}), ("fix: c (#18)", c1)],
                  [("feat: a again (#17, #18)", {"a.py": AB["a.py"]})])
    assert ([2], [], "dropped", "unpaired") in rows
    assert not any(rule == "citation" for *_, rule in rows)
