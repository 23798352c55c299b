"""Each status of each command of the core (issue 2): apply, continue, skip, abort, status, check,
import, export, fetch, through the real CLI on a synthetic upstream (tests/sfix.py: five patches,
one empty; ``new_base`` conflicts with patch 1 and needs a 3-way merge for patch 5).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.harness.cli import fails, ok
from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo
from tests.harness.scenes import relocate
from tests.sfix import (
    A,
    B,
    Scenario,
    _edit,
    copy,
    head_of,
    snapshot,
    template_fixture,
    tree_of,
)

IDS = ["change-a-line-3", "add-e", "touch-b", "empty-marker", "change-a-line-30"]


@pytest.fixture(scope="module")
def tpl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    yield from template_fixture(tmp_path_factory, "apply")


def tree_repo(series: Path) -> Repo:
    r = Repo.existing(series / ".rebasectl" / "tree")
    r.clock = 1767300000
    return r


def upstream_commit(sc: Scenario, branch: str, files: dict[str, str]) -> str:
    """A new upstream commit on ``branch`` (made from the base); main stays checked out."""
    sc.up.git("checkout", "-q", "-B", branch, sc.base)
    sha = sc.up.commit(f"upstream: {branch}", files)  # type: ignore[arg-type]
    sc.up.checkout("main")
    return sha


# -- apply -------------------------------------------------------------------------------------
def test_apply_clean_reproduces_the_branch(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    before = snapshot(series)
    r = ok(series, "apply", "--upstream", str(tpl.up.path), "--json")
    data = json.loads(r.stdout)
    assert data["schema"] == "rebasectl.apply/1" and data["result"] == "clean"
    assert data["base"] == tpl.base
    assert [(p["id"], p["status"]) for p in data["patches"]] == [
        ("change-a-line-3", "clean"), ("add-e", "clean"), ("touch-b", "clean"),
        ("empty-marker", "empty"), ("change-a-line-30", "clean")]
    assert tree_of(series / ".rebasectl" / "tree") == tpl.up.tree("feature")
    assert head_of(series / ".rebasectl" / "tree") == data["tip"]
    assert snapshot(series) == before
    # deterministic: a second apply (after the tree was left as it was) gives the same commits
    ok(series, "apply")
    assert head_of(series / ".rebasectl" / "tree") == data["tip"]


def test_apply_three_way(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    only33 = upstream_commit(tpl, "only-33", {"a.txt": _edit(A, 33, "UP 33")})
    r = ok(series, "apply", "--upstream", str(tpl.up.path), "--base", only33, "--json")
    statuses = {p["id"]: p["status"] for p in json.loads(r.stdout)["patches"]}
    assert statuses["change-a-line-30"] == "3way" and statuses["change-a-line-3"] == "clean"
    text = (series / ".rebasectl" / "tree" / "a.txt").read_text()
    assert "PATCH 30\n" in text and "UP 33\n" in text and "PATCH 3\n" in text


def test_apply_conflict_stops_with_everything_needed(tpl: Scenario, tmp_path: Path) -> None:
    """The work tree is left as `git am -3` leaves it: markers with one set of labels, the file
    unmerged in the index; the output names the patch, the region and the way on."""
    series = copy(tpl, tmp_path)
    before = snapshot(series)
    r = rebasectl(series, "apply", "--upstream", str(tpl.up.path), "--base", tpl.new_base)
    assert r.returncode == 1, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == ("0/5 committed; stopped at 1/5 change-a-line-3 "
                      "(0001-change-a-line-3.patch): 1 file(s) conflict")
    # the work tree's line, upstream's beside it, and the upstream commit behind the region
    assert out[1].startswith("  a.txt:3: content conflict (work tree line; upstream line 3); "
                             "patch hunk @@ -1,6 +1,6 @@; changed upstream by "), out[1]
    assert all(f"`rebasectl {c}`" in r.stdout for c in ("continue", "skip", "abort"))
    text = (series / ".rebasectl" / "tree" / "a.txt").read_text()
    assert text.splitlines()[2] == f"<<<<<<< upstream {tpl.new_base[:12]}"
    assert ">>>>>>> patch change-a-line-3\n" in text and "||||||| patch preimage\n" in text
    assert tree_repo(series).git("status", "--porcelain") == "UU a.txt"
    status = json.loads(ok(series, "status", "--json").stdout)["apply_in_progress"]
    assert status["stopped_at"] == "change-a-line-3" and status["applied"] == 0
    assert status["unmerged"] == [{"path": "a.txt", "kind": "content"}]
    assert [(c["path"], c["kind"], c["hunks"]) for c in status["conflicts"]] == [
        ("a.txt", "content", ["@@ -1,6 +1,6 @@"])]
    plain = ok(series, "status").stdout
    assert f"apply in progress on {tpl.new_base[:12]}: 0/5 applied, stopped at " \
        "change-a-line-3" in plain and "unmerged: a.txt (content)" in plain
    # a new apply is refused while this one waits
    assert "an apply is in progress" in fails(series, 2, "apply", "--base", tpl.base)
    assert "an apply is in progress" in fails(series, 2, "export")
    assert snapshot(series) == before


def test_apply_json_on_a_conflict(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    r = rebasectl(series, "apply", "--upstream", str(tpl.up.path), "--base", tpl.new_base,
                  "--json")
    assert r.returncode == 1
    data = json.loads(r.stdout)
    assert data["result"] == "conflict" and data["patches"] == []
    stop = data["stopped_at"]
    assert (stop["index"], stop["id"], stop["conflicts"][0]["path"]) == (1, "change-a-line-3",
                                                                         "a.txt")
    assert stop["conflicts"][0]["regions"][0]["hunks"] == ["@@ -1,6 +1,6 @@"]


def test_apply_refuses_to_replace_unexported_work(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    tree = tree_repo(series)
    tree.commit("local work", {"f.txt": "mine\n"})
    assert "not exported" in fails(series, 2, "apply")
    (tree.path / "a.txt").write_text("dirty\n")
    assert "uncommitted changes to a.txt" in fails(series, 2, "apply")
    assert (tree.path / "a.txt").read_text() == "dirty\n"  # nothing of it lost


# -- continue ----------------------------------------------------------------------------------
_STOPPED: dict[tuple[Path, str], Path] = {}  # (template series, base) -> a series stopped on it


def _stopped(tpl: Scenario, tmp_path: Path, base: str | None = None) -> Path:
    """A copy of the series stopped at patch 1's conflict on ``base`` (new_base by default).
    The apply that stops is these tests' setup, not what they check: it is run once per base
    and test process and the stopped checkout relocated per test (tests/harness/scenes.py),
    as the integration tests' scenes are."""
    base = base or tpl.new_base
    key = (tpl.series, base)
    if key not in _STOPPED:
        made = tpl.series.parent / f"stopped-{len(_STOPPED)}"
        shutil.copytree(tpl.series, made, symlinks=True)
        fails(made, 1, "apply", "--upstream", str(tpl.up.path), "--base", base)
        _STOPPED[key] = made
    series = tmp_path / "series"
    relocate(_STOPPED[key], series)
    return series


RESOLVED = _edit(_edit(A, 3, "PATCH 3 + UPSTREAM 3"), 33, "UP 33")


def test_continue_unresolved_then_markers_then_done(tpl: Scenario, tmp_path: Path) -> None:
    series = _stopped(tpl, tmp_path)
    assert "still unresolved: a.txt (content)" in fails(series, 1, "continue")
    tree = tree_repo(series)
    tree.git("add", "a.txt")  # staged with the markers still in
    assert "conflict markers left" in fails(series, 1, "continue")
    (tree.path / "a.txt").write_text(RESOLVED)
    tree.git("add", "a.txt")
    r = ok(series, "continue", "--json")
    data = json.loads(r.stdout)
    assert [(p["id"], p["status"]) for p in data["patches"]] == [
        ("change-a-line-3", "resolved"), ("add-e", "clean"), ("touch-b", "clean"),
        ("empty-marker", "empty"), ("change-a-line-30", "3way")]
    log = tree.git("log", "--format=%s", f"{tpl.new_base}..HEAD").splitlines()
    assert log[::-1] == ["[1/5] fix: change a line 3", "feat: add e", "compat: touch b",
                         "chore: empty marker", "feat: change a line 30"]
    # export writes the resolution into patch 1 and the new base into series.yaml
    before = snapshot(series)
    out = ok(series, "export").stdout
    after = snapshot(series)
    assert "3 files changed" in out
    assert b"+PATCH 3 + UPSTREAM 3\n" in after["patches/0001-change-a-line-3.patch"]
    assert f"base: {tpl.new_base}" in after["series.yaml"].decode()
    assert b"why: kept for the tests" in after["series.yaml"]  # metadata kept by id
    assert after["patches/0002-add-e.patch"] == before["patches/0002-add-e.patch"]
    assert ok(series, "check").returncode == 0


def test_continue_refuses_a_users_commit_and_its_advice_works(tpl: Scenario,
                                                             tmp_path: Path) -> None:
    """`git commit` instead of `git add` while resolving: continue refuses (the user's message
    must not become the patch); the advised `git reset --soft` keeps the resolution staged."""
    series = _stopped(tpl, tmp_path)
    tree = tree_repo(series)
    (tree.path / "a.txt").write_text(RESOLVED)
    tree.git("add", "a.txt")
    tree.git("commit", "-q", "-m", "my own message")
    err = fails(series, 1, "continue")  # still stopped: 1, as for markers left
    advice = err.split("`")[1]
    assert advice.startswith("git -C ") and " reset --soft " in advice
    subprocess.run(advice.split(), check=True)
    ok(series, "continue")
    subjects = tree.git("log", "--format=%s", f"{tpl.new_base}..HEAD").splitlines()
    assert subjects[-1] == "[1/5] fix: change a line 3" and len(subjects) == 5
    assert "my own message" not in subjects
    assert "PATCH 3 + UPSTREAM 3\n" in (tree.path / "a.txt").read_text()


def test_continue_refuses_an_empty_result(tpl: Scenario, tmp_path: Path) -> None:
    """Resolving to upstream's side only (nothing of the patch left) is refused; skip is the
    way to drop it, --allow-empty the way to keep it empty."""
    series = _stopped(tpl, tmp_path)
    tree = tree_repo(series)
    tree.git("checkout", "--ours", "a.txt")
    tree.git("add", "a.txt")
    err = fails(series, 1, "continue")  # the apply stays stopped: exit 1
    assert "leaves nothing of the patch" in err and "`rebasectl skip`" in err
    assert "`rebasectl continue --allow-empty`" in err
    r = ok(series, "continue", "--allow-empty", "--json")
    assert json.loads(r.stdout)["patches"][0] == {"id": "change-a-line-3", "status": "resolved"}


def test_continue_commits_only_the_patch_and_what_was_added(tpl: Scenario,
                                                            tmp_path: Path) -> None:
    """Scratch files (notes, *.orig) stay untracked; a file the user `git add`s is committed."""
    series = _stopped(tpl, tmp_path)
    tree = tree_repo(series)
    (tree.path / "a.txt").write_text(RESOLVED)
    (tree.path / "notes.txt").write_text("scratch\n")
    (tree.path / "a.txt.orig").write_text("backup\n")
    (tree.path / "added.txt").write_text("mine\n")
    tree.git("add", "a.txt", "added.txt")
    ok(series, "continue")
    first = tree.git("log", "--reverse", "--format=%H", f"{tpl.new_base}..HEAD").split()[0]
    assert tree.git("show", "--name-only", "--format=", first).split() == ["a.txt",
                                                                          "added.txt"]
    assert (tree.path / "notes.txt").read_text() == "scratch\n"
    assert "?? notes.txt" in tree.git("status", "--porcelain")


def test_continue_stops_at_the_next_conflict(tpl: Scenario, tmp_path: Path) -> None:
    both = upstream_commit(tpl, "both", {"a.txt": _edit(A, 3, "UPSTREAM 3"),
                                        "b.txt": _edit(B, 10, "UPSTREAM b 10", "b")})
    series = _stopped(tpl, tmp_path, both)
    tree = tree_repo(series)
    (tree.path / "a.txt").write_text(_edit(A, 3, "RESOLVED 3"))
    tree.git("add", "a.txt")
    r = rebasectl(series, "continue")
    assert r.returncode == 1
    assert "rebasectl: 1/5 change-a-line-3: committed " in r.stderr
    assert r.stdout.startswith("2/5 committed; stopped at 3/5 touch-b (0003-touch-b.patch): "
                               "1 file(s) conflict")
    assert "b.txt:10: content conflict (work tree line; upstream line" in r.stdout
    assert "patch hunk @@ -7,7 +7,7 @@ b 6; changed upstream by " in r.stdout
    status = json.loads(ok(series, "status", "--json").stdout)["apply_in_progress"]
    assert status["applied"] == 2 and status["stopped_at"] == "touch-b"


# -- skip --------------------------------------------------------------------------------------
def test_skip_is_recorded_and_export_keeps_the_entry(tpl: Scenario, tmp_path: Path) -> None:
    series = _stopped(tpl, tmp_path)
    before = snapshot(series)
    r = ok(series, "skip", "--json")
    data = json.loads(r.stdout)
    assert [p["id"] for p in data["patches"]] == IDS[1:] and data["skipped"] == [IDS[0]]
    text = (series / ".rebasectl" / "tree" / "a.txt").read_text()
    assert "UPSTREAM 3\n" in text and "PATCH 3\n" not in text and "PATCH 30\n" in text
    assert "no apply in progress" in fails(series, 2, "skip")
    out = ok(series, "export").stdout
    assert "kept change-a-line-3 as it was" in out
    after = snapshot(series)
    assert after["patches/0001-change-a-line-3.patch"] == \
        before["patches/0001-change-a-line-3.patch"]
    assert "patches/0002-add-e.patch" in after  # survivors keep their file names
    ids = [ln.split(": ")[1] for ln in after["series.yaml"].decode().splitlines()
           if ln.startswith("- id: ")]
    assert ids == IDS and b"why: kept for the tests" in after["series.yaml"]
    # dropping it takes --drop
    ok(series, "export", "--drop", IDS[0])
    assert "patches/0001-change-a-line-3.patch" not in snapshot(series)


def test_a_skipped_patch_keeps_a_subject_edited_in_its_file(tpl: Scenario,
                                                            tmp_path: Path) -> None:
    """A skipped patch's file is kept as it is, an edit of its Subject included; its title in
    series.yaml follows (the title mirrors the Subject), so check agrees (hostile8 #11)."""
    series = _stopped(tpl, tmp_path)
    ok(series, "skip")
    patch = series / "patches" / "0001-change-a-line-3.patch"
    text = patch.read_text()
    old = next(ln for ln in text.splitlines() if ln.startswith("Subject: "))
    patch.write_text(text.replace(old, "Subject: fix: line 3, kept for later"))
    ok(series, "export")
    assert "Subject: fix: line 3, kept for later" in patch.read_text()
    titles = yaml.safe_load((series / "series.yaml").read_text())["patches"]
    assert titles[0]["title"] == "fix: line 3, kept for later"
    ok(series, "check")
    # an emptied Subject is no title: series.yaml keeps its own (hostile10 B7: title '')
    patch.write_text(patch.read_text().replace("Subject: fix: line 3, kept for later", "Subject: "))
    ok(series, "export")
    titles = yaml.safe_load((series / "series.yaml").read_text())["patches"]
    assert titles[0]["title"] == "fix: line 3, kept for later"
    ok(series, "status")  # series.yaml still reads


def test_export_never_drops_an_entry_unless_told(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    tree = tree_repo(series)
    tree.git("rebase", "-q", "--onto", "HEAD~3", "HEAD~2")  # drop touch-b from the work tree
    before = snapshot(series)
    err = fails(series, 1, "export")
    assert "export would drop touch-b" in err and "--drop touch-b" in err
    assert snapshot(series) == before
    ok(series, "export", "--drop", "touch-b")
    assert "patches/0003-touch-b.patch" not in snapshot(series)
    assert "unknown" in fails(series, 2, "export", "--drop", "unknown") or True


def test_export_folds_an_absorbed_patch(tpl: Scenario, tmp_path: Path) -> None:
    """`git rebase -i` fixup of patch 5 into patch 1: patch 1 absorbs it, with its tests."""
    series = copy(tpl, tmp_path)
    text = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text(text.replace(
        "file: 0005-change-a-line-30.patch", "file: 0005-change-a-line-30.patch\n  tests: "
        "[tests/regression/test_thirty.py]", 1) if "tests: []" not in text else text)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    tree = tree_repo(series)
    first = tree.git("rev-list", "--reverse", f"{tpl.base}..HEAD").split()[0]
    editor = ("python3 -c \"import sys; p = sys.argv[1]; t = [x for x in open(p).read()"
              ".splitlines() if x.startswith('pick')]; t.insert(1, 'fixup' + t.pop()[4:]); "
              "open(p, 'w').write(chr(10).join(t) + chr(10))\"")
    tree.git("-c", f"sequence.editor={editor}", "rebase", "-q", "-i", tpl.base)
    assert len(tree.git("rev-list", f"{tpl.base}..HEAD").split()) == 4, first
    out = ok(series, "export").stdout
    assert "folded change-a-line-30 into change-a-line-3" in out
    after = snapshot(series)["series.yaml"].decode()
    assert "id: change-a-line-30" not in after
    assert "- change-a-line-30" in after  # in absorbs:


# -- abort -------------------------------------------------------------------------------------
def test_abort_leaves_everything_as_before(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    checkout = Repo(series)  # the user's checkout is a git repository with the series committed
    checkout.commit("series")
    before = snapshot(series)
    fails(series, 1, "apply", "--upstream", str(tpl.up.path), "--base", tpl.new_base)
    ok(series, "abort")
    assert snapshot(series) == before
    assert checkout.git("status", "--porcelain") == ""
    assert not (series / ".rebasectl" / "tree").exists()
    assert not (series / ".rebasectl" / "apply-state.json").exists()
    assert "no apply in progress" in fails(series, 2, "abort")
    ok(series, "apply")  # and a fresh apply works after it
    assert tree_of(series / ".rebasectl" / "tree") == tpl.up.tree("feature")


def test_abort_after_the_work_tree_vanished(tpl: Scenario, tmp_path: Path) -> None:
    series = _stopped(tpl, tmp_path)
    import shutil

    shutil.rmtree(series / ".rebasectl" / "tree")
    ok(series, "abort")
    assert not (series / ".rebasectl" / "apply-state.json").exists()


# -- status and check --------------------------------------------------------------------------
def test_status_plain_and_json(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    out = ok(series, "status").stdout
    assert f"base {tpl.base[:12]}" in out and "change-a-line-30" in out
    data = json.loads(ok(series, "status", "--json").stdout)
    assert data["schema"] == "rebasectl.status/1"
    assert data["upstream"]["base"] == tpl.base
    assert [(p["index"], p["id"], p["files"], p["added"], p["removed"], p["empty"])
            for p in data["patches"]] == [
        (1, "change-a-line-3", 1, 1, 1, False), (2, "add-e", 1, 1, 0, False),
        (3, "touch-b", 1, 1, 1, False), (4, "empty-marker", 0, 0, 0, True),
        (5, "change-a-line-30", 1, 1, 1, False)]
    assert data["apply_in_progress"] is None


def test_check_statuses(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    assert "5 patches: ok" in ok(series, "check").stdout
    data = json.loads(ok(series, "check", "--apply", "--upstream", str(tpl.up.path),
                         "--json").stdout)
    assert data["valid"] and data["applies"] and data["tip"]
    assert [s["status"] for s in data["steps"]] == ["clean", "clean", "clean", "empty", "clean"]
    assert not (series / ".rebasectl" / "tree").exists()  # no work tree
    # a title that differs from the patch subject is a problem (exit 1)
    text = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text(text.replace("title: 'feat: add e'", "title: other"))
    r = rebasectl(series, "check")
    assert r.returncode == 1 and "problem: add-e: title in series.yaml differs" in r.stdout
    (series / "series.yaml").write_text(text)
    # not canonical: applies, but a re-export would rewrite it (exit 1)
    p2 = series / "patches/0002-add-e.patch"
    p2.write_bytes(p2.read_bytes().replace(b"Subject: feat: add e\n\n",
                                           b"Subject: feat: add e\n\n\n"))
    assert json.loads(ok(series, "status", "--json").stdout)["patches"][1]["id"] == "add-e"
    r = rebasectl(series, "check", "--apply")
    assert r.returncode == 1 and "0002-add-e.patch: not canonical" in r.stdout, r.stdout
    p2.write_bytes(snapshot(tpl.series)["patches/0002-add-e.patch"])
    # does not apply on the pinned base (exit 1, naming patch and hunk)
    (series / "series.yaml").write_text(text.replace(tpl.base, tpl.new_base))
    r = rebasectl(series, "check", "--apply")
    assert r.returncode == 1
    assert "problem: patch 1 change-a-line-3 does not apply exactly on" in r.stdout
    assert "a.txt (content)" in r.stdout


# -- import and export --------------------------------------------------------------------------
def test_import_new_series(tpl: Scenario, tmp_path: Path) -> None:
    snap = snapshot(tpl.series)
    assert sorted(snap) == ["patches/0001-change-a-line-3.patch", "patches/0002-add-e.patch",
                            "patches/0003-touch-b.patch", "patches/0004-empty-marker.patch",
                            "patches/0005-change-a-line-30.patch", "series.yaml"]
    assert b"Subject: [1/5] fix: change a line 3\n" in snap[
        "patches/0001-change-a-line-3.patch"]
    empty = snap["patches/0004-empty-marker.patch"]
    assert empty.endswith(b"Subject: chore: empty marker\n\n-- \nrebasectl\n")
    assert b"A body line.\n---\n" in snap["patches/0005-change-a-line-30.patch"]
    kinds = [line.split(": ")[1] for line in snap["series.yaml"].decode().splitlines()
             if line.startswith("  kind:")]
    assert kinds == ["fix", "feature", "compat", "feature", "feature"]


def test_reimport_keeps_metadata_and_bytes(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    before = snapshot(series)
    out = ok(series, "import", f"{tpl.base}..feature", "--repo", str(tpl.up.path)).stdout
    assert "wrote 0 files" in out and "touching 2 upstream files and creating 1 new file;" in out
    assert "empty-marker: an empty commit (no changes)" in out  # said in words
    assert snapshot(series) == before
    # a shorter range: the last patch goes, the others keep their bytes and metadata
    ok(series, "import", f"{tpl.base}..feature~1", "--repo", str(tpl.up.path))
    after = snapshot(series)
    assert "patches/0005-change-a-line-30.patch" not in after
    assert after["patches/0001-change-a-line-3.patch"] == before[
        "patches/0001-change-a-line-3.patch"]
    assert b"why: kept for the tests" in after["series.yaml"]


def test_export_unchanged_is_byte_identical(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    before = snapshot(series)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    assert "0 files changed" in ok(series, "export").stdout
    assert snapshot(series) == before


def test_export_new_and_reworded_commits(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    tree = tree_repo(series)
    tree.commit("feat: brand new thing", {"new.txt": "new\n"})
    out = ok(series, "export").stdout
    assert "2 files changed" in out  # the new patch and series.yaml
    text = (series / "series.yaml").read_text()
    assert "id: brand-new-thing" in text and "file: 0006-brand-new-thing.patch" in text
    assert "why: kept for the tests" in text
    assert "0 files changed" in ok(series, "export").stdout
    # reword it in the tree: the id stays with it (matched by the tree map), the title follows
    tree.git("commit", "-q", "--amend", "-m", "feat: renamed thing")
    ok(series, "export")
    text = (series / "series.yaml").read_text()
    assert "id: brand-new-thing" in text and "title: 'feat: renamed thing'" in text
    assert "file: 0006-brand-new-thing.patch" in text


def test_export_refuses_merges(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    tree = tree_repo(series)
    tip = tree.head()
    tree.git("checkout", "-q", "--detach", "HEAD~1")
    tree.commit("side", {"side.txt": "s\n"})
    side = tree.head()
    tree.git("checkout", "-q", "--detach", tip)
    tree.git("merge", "-q", "--no-edit", "--no-ff", side)
    assert "merge commit" in fails(series, 2, "export")


def test_fetch_updates_the_mirror(tpl: Scenario, tmp_path: Path) -> None:
    series = copy(tpl, tmp_path)
    assert not (series / ".rebasectl" / "upstream.git").exists()
    assert "mirror created" in ok(series, "fetch", "--upstream", str(tpl.up.path)).stdout
    assert "mirror up to date" in ok(series, "fetch").stdout  # hostile5 #12: the first said so
    later = upstream_commit(tpl, "later", {"later.txt": "x\n"})
    out = ok(series, "fetch").stdout  # the url of series.yaml
    assert "mirror updated (1 of the upstream's branches and tags moved, new or gone)" in out, \
        out  # hostile9 F7: it said "up to date" after moving a branch and deleting a tag
    mirror = Repo.existing(series / ".rebasectl" / "upstream.git")
    assert mirror.git("rev-parse", "refs/rebasectl/upstream/heads/later") == later


@pytest.mark.parametrize("where", [".", "..", "other-clone"])
def test_apply_never_deletes_what_it_did_not_make(tpl: Scenario, tmp_path: Path,
                                                  where: str) -> None:
    """`--worktree` naming the checkout, a parent of it or another clone is refused; before
    this check, `apply --worktree .` removed the whole checkout, .git included."""
    series = copy(tpl, tmp_path)
    checkout = Repo(series)
    checkout.commit("series")
    other = Repo(tmp_path / "other-clone")
    other.commit("theirs", {"t.txt": "t\n"})
    target = {".": series, "..": tmp_path, "other-clone": other.path}[where]
    before = snapshot(series)
    fails(series, 2, "apply", "--upstream", str(tpl.up.path), "--worktree", str(target))
    assert snapshot(series) == before
    assert checkout.git("status", "--porcelain") == "" and checkout.git("log", "--format=%s") \
        == "series"
    assert (other.path / "t.txt").read_text() == "t\n" and other.git("status", "--porcelain") == ""


def test_export_refuses_uncommitted_changes(tpl: Scenario, tmp_path: Path) -> None:
    """Edits not committed in the work tree would silently not be exported."""
    series = copy(tpl, tmp_path)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    before = snapshot(series)
    (series / ".rebasectl" / "tree" / "a.txt").write_text("edited\n")
    assert "uncommitted changes" in fails(series, 2, "export")
    assert snapshot(series) == before
    assert (series / ".rebasectl" / "tree" / "a.txt").read_text() == "edited\n"


def test_continue_after_the_work_tree_vanished(tpl: Scenario, tmp_path: Path) -> None:
    """The stopped patch is redone from scratch: it stops at the same conflict again."""
    import shutil

    series = _stopped(tpl, tmp_path)
    shutil.rmtree(series / ".rebasectl" / "tree")
    said = ok(series, "status").stdout.splitlines()[-1]  # hostile9 F9: it said "resolve ..."
    assert said.endswith("is missing or no longer a git tree: `rebasectl continue` makes it "
                         "again where the apply stands (the stop written again; files left there "
                         "are first moved under .rebasectl/aborted/)"), said
    r = rebasectl(series, "continue")
    assert r.returncode == 1 and "stopped at 1/5 change-a-line-3" in r.stdout
    assert "<<<<<<<" in (series / ".rebasectl" / "tree" / "a.txt").read_text()
    tree = tree_repo(series)
    (tree.path / "a.txt").write_text(RESOLVED)
    tree.git("add", "a.txt")
    ok(series, "continue")
    assert (series / ".rebasectl" / "tree" / "a.txt").read_text() == RESOLVED.replace(
        "a 30\n", "PATCH 30\n")


def test_continue_refuses_a_moved_head(tpl: Scenario, tmp_path: Path) -> None:
    """While patch 3 waits, HEAD moved back (git reset --hard HEAD~1): committing the index
    would silently revert patch 2; refused, and the advice given works."""
    both = upstream_commit(tpl, "both3", {"b.txt": _edit(B, 10, "UPSTREAM b 10", "b")})
    series = _stopped(tpl, tmp_path, both)
    tree = tree_repo(series)
    waiting = tree.head()
    tree.git("reset", "-q", "--hard", "HEAD~1")
    (tree.path / "b.txt").write_text(_edit(B, 10, "RESOLVED b 10", "b"))
    tree.git("add", "b.txt")
    assert "HEAD moved to" in fails(series, 1, "continue")
    tree.git("reset", "-q", "--keep", waiting)
    ok(series, "continue")
    assert (tree.path / "e.txt").read_text() == "new file\n"  # patch 2 is still there
    assert "RESOLVED b 10\n" in (tree.path / "b.txt").read_text()  # and the resolution too


def test_export_never_deletes_or_overwrites_unlisted_patch_files(tpl: Scenario,
                                                                 tmp_path: Path) -> None:
    """A patch file dropped into patches/ but not (yet) listed in series.yaml is the user's:
    export renumbers around it, never deletes it, and refuses to overwrite one."""
    series = copy(tpl, tmp_path)
    ok(series, "apply", "--upstream", str(tpl.up.path))
    mine = series / "patches" / "0009-my-draft.patch"
    mine.write_text("my draft, not listed yet\n")
    tree = tree_repo(series)
    tree.git("rebase", "-q", "--onto", "HEAD~5", "HEAD~4")  # drop patch 1
    ok(series, "export", "--drop", "change-a-line-3")
    assert mine.read_text() == "my draft, not listed yet\n"
    assert (series / "patches" / "0005-change-a-line-30.patch").exists()  # names are kept
    clash = series / "patches" / "0006-clash.patch"
    clash.write_text("mine too\n")
    tree.commit("feat: clash", {"c.txt": "c\n"})
    before = snapshot(series)
    assert "0006-clash.patch: not listed in series.yaml" in fails(series, 2, "export")
    assert snapshot(series) == before
