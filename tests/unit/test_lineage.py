"""lineage building blocks: diff parsing, significant lines, series entries for commits (also
when a materialisation left a patch out), and why/drop_when reaching the report."""

from __future__ import annotations

from pathlib import Path

from rebasectl.git import Repo as GitRepo
from rebasectl.model.diffs import parse
from rebasectl.model.lines import significant
from rebasectl.model.series import PatchEntry, Series, Upstream
from rebasectl.report import Side, build_report, render_markdown, to_json
from rebasectl.report.lineage import hunk_lines, load_changes
from tests.harness.git import Repo

DIFF = b"""diff --git a/x.py b/x.py
index 1111111..2222222 100644
--- a/x.py
+++ b/x.py
@@ -1,3 +1,4 @@ def f():
 a = 1
-b = 2
+b = 3
+c = 4

@@ -10,2 +11,2 @@
 k = 1
-k2 = 2
+k2 = 3
\\ No newline at end of file
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
"""


def test_the_diff_model_as_lineage_reads_it() -> None:
    files = parse(DIFF).files
    assert [f.path for f in files] == ["x.py", "new.txt"]
    x = files[0]
    assert [h.header for h in x.hunks] == ["@@ -1,3 +1,4 @@ def f():", "@@ -10,2 +11,2 @@"]
    assert hunk_lines(x.hunks[0]) == (" a = 1", "-b = 2", "+b = 3", "+c = 4", " ")
    assert hunk_lines(x.hunks[1]) == (" k = 1", "-k2 = 2", "+k2 = 3")  # no "\\ No newline"
    assert (x.added, x.removed) == (3, 2)
    assert files[1].hunks[0].old_len == 0 and files[1].added == 1


def test_significant() -> None:
    assert significant("+    return   compute(x)") == "+return compute(x)"
    for dull in ("+", "+    )", "-else:", "+  }", "+1234567890"):
        assert significant(dull) is None


def _repo(tmp: Path) -> tuple[Repo, str, list[str]]:
    repo = Repo(tmp / "r")
    base = repo.commit("base", {"a.py": "alpha_value = compute_alpha()\n"})
    shas = [repo.commit("one", {"one.py": "first_value = one_thing()\n"}),
            repo.commit("three", {"three.py": "third_value = three_thing()\n"})]
    return repo, base, shas


def test_entries_by_title_when_a_patch_is_missing(tmp_path: Path) -> None:
    repo, base, shas = _repo(tmp_path)
    series = Series(Upstream("u", "x", "main", base), (
        PatchEntry("one-id", "0001-one.patch", "one", why="first reason"),
        PatchEntry("two-id", "0002-two.patch", "two"),
        PatchEntry("three-id", "0003-three.patch", "three", drop_when="upstream ships three")))
    changes = load_changes(GitRepo(repo.path), "old", shas, series)
    assert [c.id for c in changes] == ["one-id", "three-id"]
    report = build_report(GitRepo(repo.path), Side(base, shas, series, "old"),
                          Side(base, shas, series, "new"))
    md = render_markdown(report)
    assert "- why: first reason" in md and "- drop when: upstream ships three" in md
    assert '"id": "three-id"' in to_json(report)
    assert [e.status for e in report.mapping] == ["identical", "identical"]


def test_replay_reproduces_differs_or_conflicts(tmp_path: Path) -> None:
    """An old patch replayed on the new one's parent, file by file (one file exactly, one by a
    3-way merge) gives the tree a whole-patch ``apply --3way`` gives (here the new commit's:
    'reproduces'), or the conflicting files with their hunks."""
    from rebasectl.report.lineage import replay_tree

    up = Repo(tmp_path / "up")
    body = "".join(f"line {n}\n" for n in range(1, 31))
    base = up.commit("base", {"a.txt": body, "b.txt": body})
    old = up.commit("patch", {"a.txt": body.replace("line 5\n", "FIVE\n"),
                              "b.txt": body.replace("line 20\n", "TWENTY\n")})
    up.git("checkout", "-q", "-b", "new", base)
    parent = up.commit("upstream", {"b.txt": "line 0\n" + body.replace("line 25\n", "X\n")})
    merged = {"a.txt": body.replace("line 5\n", "FIVE\n"),
              "b.txt": "line 0\n" + body.replace("line 20\n", "TWENTY\n").replace("line 25\n",
                                                                                  "X\n")}
    same = up.commit("patch again", merged)
    git = GitRepo(up.path)
    (o,) = load_changes(git, "old", [old], None)
    tree, conflicts = replay_tree(git, o, parent)
    assert tree == up.tree(same) and conflicts == []
    up.git("checkout", "-q", "-b", "clash", parent)
    clash = up.commit("upstream clash", {"b.txt": "line 0\n" + body.replace("line 20\n", "T\n")})
    tree, conflicts = replay_tree(git, o, clash)
    assert tree is None and [(c["path"], c["kind"]) for c in conflicts] == [("b.txt", "content")]
    assert conflicts[0]["hunks"] and conflicts[0]["hunks"][0].startswith("@@ -17,7 +17,7 @@")
