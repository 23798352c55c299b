"""A patch that moves a file (a deletion and a creation, as rebasectl's own patch files write a
move: no rename headers) onto an upstream that changed the file merges as ``git am -3`` of the
same patch files merges it (hostile11 #1): git's merge of the fake ancestor finds the rename and
carries upstream's change into the new path. rebasectl called it a delete/modify conflict and
every later patch on the new path "blocked"."""

from __future__ import annotations

from pathlib import Path

from rebasectl.engine.materialize import Materializer
from rebasectl.git import Repo as GitRepo
from rebasectl.model.ids import Oid
from rebasectl.model.patches import parse
from rebasectl.model.series import PatchEntry
from rebasectl.model.series_patch import SeriesPatch
from rebasectl.model.status import Applied
from tests.harness.cli import run
from tests.harness.git import Repo, git, lines

A = lines(40, "a")


def _series(tmp: Path, first: str) -> list[tuple[bytes, SeriesPatch]]:
    """p1 moves f.txt to g.txt and changes line 10 (``first``); p2 changes line 14 of g.txt."""
    dev = Repo(tmp / "dev")
    dev.commit("base", {"f.txt": A})
    moved = A.replace("a 10\n", first)
    dev.commit("fix: move", {"f.txt": None, "g.txt": moved})
    dev.commit("fix: on the moved file", {"g.txt": moved.replace("a 14\n", "P 14\n")})
    out = []
    for k, rev in enumerate(("HEAD~1", "HEAD"), start=1):
        data = dev.git("format-patch", "--full-index", "--no-renames", "--stdout", "-1",
                       rev).encode() + b"\n"
        patch = parse(data, f"{k}.patch")
        out.append((data, SeriesPatch(PatchEntry(f"p{k}", f"{k}.patch", patch.subject), patch)))
    return out


def _upstream(tmp: Path, old: str, new: str) -> tuple[Repo, str]:
    up = Repo(tmp / "up")
    up.commit("base", {"f.txt": A})
    return up, up.commit("upstream", {"f.txt": A.replace(old, new)})


def test_a_moved_file_takes_upstreams_change_as_git_am_3_does(tmp_path: Path) -> None:
    up, new = _upstream(tmp_path, "a 16\n", "UP 16\n")
    files = _series(tmp_path, "P 10\n")
    steps = Materializer(GitRepo(up.path)).run(Oid(new), [sp for _, sp in files]).steps

    assert [s.status for s in steps] == [Applied.MERGED, Applied.MERGED]  # p2: UP 16 in context
    clone = tmp_path / "am"
    git(tmp_path, "clone", "-q", str(up.path), str(clone))
    for data, _ in files:
        git(clone, "am", "-q", "-3", input=data)
    assert steps[-1].commit is not None
    assert git(up.path, "rev-parse", f"{steps[-1].commit}^{{tree}}").stdout == \
        git(clone, "rev-parse", "HEAD^{tree}").stdout
    moved = git(up.path, "show", f"{steps[-1].commit}:g.txt").stdout
    assert "UP 16\n" in moved and "P 10\n" in moved and "P 14\n" in moved


def test_a_moved_file_whose_change_meets_upstreams_still_conflicts(tmp_path: Path) -> None:
    """Upstream rewrote the line the move also changes: a conflict, never a silent pick."""
    up, new = _upstream(tmp_path, "a 10\n", "UP 10\n")
    files = _series(tmp_path, "P 10\n")
    steps = Materializer(GitRepo(up.path)).run(Oid(new), [sp for _, sp in files],
                                               keep_going=True).steps
    assert steps[0].status is Applied.CONFLICT


def test_a_conflicting_move_says_where_the_file_went_and_its_advice_works(
        tmp_path: Path) -> None:
    """hostile12 #1: the move's merge conflicts (upstream rewrote the moved line, and another
    one). The stop names the move, never "marked files" where none is marked, and says how to
    carry upstream's changes; followed, continue commits the new path with upstream's other
    change (the old advice lost it silently)."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"f.txt": A})
    up.branch("feature")
    up.checkout("feature")
    up.commit("fix: move", {"f.txt": None, "g.txt": A.replace("a 10\n", "P 10\n")})
    up.checkout("main")
    up.commit("upstream", {"f.txt": A.replace("a 10\n", "UP 10\n").replace("a 30\n", "UP 30\n")})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    r = run(series, "apply", "--base", "main", "--upstream", str(up.path), want=1)
    assert "f.txt: delete/modify: the patch moves this file to g.txt, which upstream changed" \
        in r.stdout, r.stdout
    assert "edit the marked files" not in r.stdout
    advice = "carry upstream's changes (`git diff :1:f.txt :2:f.txt`) into g.txt, " \
        "`git add g.txt`, then `git rm f.txt`"
    assert advice in r.stdout, r.stdout
    work = series / ".rebasectl" / "tree"
    shown = git(work, "diff", ":1:f.txt", ":2:f.txt").stdout
    assert "+UP 10" in shown and "+UP 30" in shown
    moved = (work / "g.txt").read_text()
    (work / "g.txt").write_text(moved.replace("a 30\n", "UP 30\n"))  # P 10 kept over UP 10
    git(work, "add", "g.txt")
    git(work, "rm", "-q", "f.txt")
    run(series, "continue", want=0)
    done = git(work, "show", "HEAD:g.txt").stdout
    assert "P 10\n" in done and "UP 30\n" in done
    assert git(work, "ls-tree", "--name-only", "HEAD").stdout.split() == ["g.txt"]
