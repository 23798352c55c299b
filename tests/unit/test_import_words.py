"""What import records and says: the upstream's name from where it came from (not a `.git` folder's
or the mirror's), its default branch, counts that mean what they say, an empty commit in words."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rebasectl.engine.exchange import guess_kind
from tests.synth import Repo, lines, rebasectl


def _upstream(tmp: Path) -> tuple[Repo, str, str]:
    up = Repo(tmp / "Proj")
    base = up.commit("base", {"a.txt": lines(10), "b.txt": lines(5, "b")})
    up.git("branch", "-m", "dev")
    up.commit("fix: a", {"a.txt": lines(10).replace("line 3\n", "THREE\n")})
    up.git("commit", "-q", "--allow-empty", "-m", "chore: marker")
    tip = up.commit("feat: b", {"b.txt": lines(5, "b").replace("b 2\n", "TWO\n")})
    return up, base, tip


def test_import_from_a_checkout_and_from_a_bare_clone(tmp_path: Path) -> None:
    up, base, tip = _upstream(tmp_path)
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..{tip}", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    assert "imported 3 patches" in r.stdout and "touching 2 upstream files; wrote 4 files" \
        in r.stdout
    assert "marker: an empty commit (no changes)" in r.stdout
    upstream = yaml.safe_load((series / "series.yaml").read_text())["upstream"]
    assert (upstream["name"], upstream["branch"]) == ("proj", "dev")
    bare = tmp_path / "Mirror-Folder.git"
    up.git("clone", "-q", "--bare", str(up.path), str(bare))
    again = tmp_path / "again"
    again.mkdir()
    r = rebasectl(again, "import", f"{base}..{tip}", "--repo", str(bare))
    assert r.returncode == 0, r.stderr
    upstream = yaml.safe_load((again / "series.yaml").read_text())["upstream"]
    # a clone names where it came from (its origin), not its own folder
    assert (upstream["name"], upstream["branch"]) == ("proj", "dev")


@pytest.mark.parametrize(("subject", "kind"), [
    ("[fix] Add detach() to fp32 param shard", "fix"),  # June #15: was "feature"
    ("[fix] attention_output_gate TP slice (#22)", "fix"),
    ("[feat] distributed optimizer low GPU memory resume", "feature"),
    ("[1/8] fix: misc compatibility fixes", "fix"),
    ("[AMD] Fix QuantizedTensor import for ROCm", "fix"),
    ("fix(dist-ckpt): handle bare BytesIO", "fix"),
    ("Upgrade Megatron from Dec 17 to Feb 13", "feature"),
])
def test_kind_from_the_subject_tag_or_words(subject: str, kind: str) -> None:
    assert guess_kind(subject) == kind


def test_new_files_are_counted_apart_from_upstreams(tmp_path: Path) -> None:
    """hostile5 #12: "touching 60 upstream files" when 21 of them were the patches' own new
    files. A file one patch creates and a later one changes is new; a deleted one is
    upstream's."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": lines(10), "b.txt": lines(5, "b")})
    up.commit("feat: c", {"c.txt": "c\n", "a.txt": lines(10).replace("line 3\n", "3\n")})
    up.commit("feat: c again, no b", {"c.txt": "cc\n", "b.txt": None})
    tip = up.commit("feat: d", {"d/e.txt": "e\n"})
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..{tip}", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    assert "imported 3 patches" in r.stdout and \
        "touching 2 upstream files and creating 2 new files; wrote 4 files" in r.stdout
    assert "warning" not in r.stderr


def _merged_history(tmp: Path) -> tuple[Repo, str, str, str]:
    """base, then on main: a commit, a --no-ff merge of a side branch of two commits (one
    adds a file), a commit. Returns (repo, base, the merge, tip)."""
    up = Repo(tmp / "up")
    base = up.commit("base", {"a.txt": lines(10), "b.txt": lines(10, "b")})
    up.commit("fix: a", {"a.txt": lines(10).replace("line 2\n", "TWO\n")})
    up.git("switch", "-q", "-c", "side")
    up.commit("feat: side one", {"b.txt": lines(10, "b").replace("b 5\n", "FIVE\n")})
    up.commit("feat: side two", {"s.txt": "s\n"})
    up.git("switch", "-q", "main")
    up.git("merge", "-q", "--no-ff", "-m", "Merge branch 'side'", "side")
    merge = up.head()
    tip = up.commit("fix: a again", {"a.txt": lines(10).replace("line 2\n", "TWO\n")
                                     .replace("line 9\n", "NINE\n")})
    return up, base, merge, tip


def test_import_says_which_merges_it_flattens(tmp_path: Path) -> None:
    """hostile5 #9: a merge on the range's first-parent line is one patch, its first-parent
    diff (so the series gives TIP's tree), and import says so, one warning line per merge:
    the merge, how many commits its side brings, the patch that holds them. The advice it
    gives (linearise with git rebase, import that) gives one patch per commit and the same
    tree."""
    up, base, merge, tip = _merged_history(tmp_path)
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..{tip}", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    assert "imported 3 patches" in r.stdout
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: {merge[:12]} is a merge (Merge branch 'side'): its side brings 2 commits, and "
        "patches/0002-merge-branch-side.patch holds their combined diff (2 files), not 2 "
        "patches as git format-patch would give"]
    advice = r.stderr.split("for one patch per commit, make the range linear in a clone with a "
                            "work tree (`")[1]
    commands, _, rest = advice.partition("`")
    assert commands == f"git switch -c linear {tip[:12]} && git rebase {base[:12]}"
    assert f"then `rebasectl import {base[:12]}..linear --repo CLONE`" in rest
    clone = tmp_path / "clone"
    up.git("clone", "-q", str(up.path), str(clone))
    for step in commands.split(" && "):
        subprocess.run(step.split(), cwd=clone, check=True, capture_output=True)
    again = tmp_path / "linear-series"
    again.mkdir()
    r = rebasectl(again, "import", f"{base[:12]}..linear", "--repo", str(clone))
    assert r.returncode == 0, r.stderr
    assert "imported 4 patches" in r.stdout and "warning" not in r.stderr
    for where in (series, again):
        r = rebasectl(where, "apply", "--upstream", str(up.path))
        assert r.returncode == 0, r.stderr
        tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=where / ".rebasectl/tree",
                              capture_output=True, text=True, check=True).stdout.strip()
        assert tree == up.tree(tip)


def _conflicting_merge(tmp: Path) -> tuple[Repo, str, str, str]:
    """base; main changes a.txt's line 5; a side branch changes that line too, merges a branch
    of its own (a nested merge) and changes b.txt; main merges the side, resolving line 5 as
    BOTH; then a commit. Returns (repo, base, the merge, tip)."""
    up = Repo(tmp / "up")
    base = up.commit("base", {"a.txt": lines(10), "b.txt": lines(10, "b")})
    five = lines(10).replace("line 5\n", "{}\n")
    up.commit("fix: a", {"a.txt": five.format("MAIN")})
    up.git("switch", "-q", "-c", "side", base)
    up.commit("feat: side one", {"a.txt": five.format("SIDE")})
    up.git("switch", "-q", "-c", "nested")
    up.commit("feat: nested", {"s.txt": "s\n"})
    up.git("switch", "-q", "side")
    up.git("merge", "-q", "--no-ff", "-m", "Merge branch 'nested' into side", "nested")
    up.commit("feat: side two", {"b.txt": lines(10, "b").replace("b 3\n", "THREE\n")})
    up.git("switch", "-q", "main")
    subprocess.run(["git", "merge", "-q", "--no-ff", "side"], cwd=up.path, capture_output=True)
    (up.path / "a.txt").write_text(five.format("BOTH"))
    up.git("add", "a.txt")
    up.git("commit", "-q", "-m", "Merge branch 'side'")
    merge = up.head()
    tip = up.commit("fix: b", {"b.txt": lines(10, "b").replace("b 3\n", "THREE\n")
                               .replace("b 9\n", "NINE\n")})
    return up, base, merge, tip


def test_a_merge_is_counted_as_format_patch_counts_and_its_advice_works(tmp_path: Path) -> None:
    """hostile6 #7: the side's count leaves its own merges out, as git format-patch does (the
    warning said 219 where format-patch gives 218), and the advice says the rebase stops on a
    conflict the merge had resolved, and how to go on: followed to the end (resolving as `git
    show` of the merge shows), it gives one patch per commit and TIP's tree."""
    up, base, merge, tip = _conflicting_merge(tmp_path)
    patches = up.git("format-patch", "--stdout", f"{base}..{tip}").count("\nSubject: ")
    assert patches == 5  # fix: a, side one, nested, side two, fix: b
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..{tip}", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    assert f"is a merge (Merge branch 'side'): its side brings {patches - 2} commits" in r.stderr
    assert f"not {patches - 2} patches as git format-patch would give" in r.stderr
    advice = r.stderr.split("work tree (`")[1]
    commands = advice.partition("`")[0]
    assert "it stops at each commit that conflicts" in advice
    assert "`git add` the files, `git rebase --continue`), then `rebasectl import " \
        f"{base[:12]}..linear --repo CLONE`" in advice
    assert "++BOTH" in up.git("show", merge)  # where the merge's resolution shows
    clone = tmp_path / "clone"
    up.git("clone", "-q", str(up.path), str(clone))
    switch, rebase = commands.split(" && ")
    subprocess.run(switch.split(), cwd=clone, check=True, capture_output=True)
    stops = 0
    proc = subprocess.run(rebase.split(), cwd=clone, capture_output=True, text=True)
    while proc.returncode != 0:
        stops += 1
        assert "CONFLICT" in proc.stdout + proc.stderr and stops < 5
        (clone / "a.txt").write_text(lines(10).replace("line 5\n", "BOTH\n"))
        subprocess.run(["git", "add", "a.txt"], cwd=clone, check=True)
        proc = subprocess.run(["git", "rebase", "--continue"], cwd=clone, capture_output=True,
                              text=True, env={**os.environ, "GIT_EDITOR": "true"})
    assert stops == 1
    again = tmp_path / "linear-series"
    again.mkdir()
    r = rebasectl(again, "import", f"{base[:12]}..linear", "--repo", str(clone))
    assert r.returncode == 0, r.stderr
    assert f"imported {patches} patches" in r.stdout and "warning" not in r.stderr
    r = rebasectl(again, "apply", "--upstream", str(up.path))
    assert r.returncode == 0, r.stderr
    tree = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], cwd=again / ".rebasectl/tree",
                          capture_output=True, text=True, check=True).stdout.strip()
    assert tree == up.tree(tip)
