"""A file upstream renamed is followed the way ``git am -3`` follows it: no stop, the hunk carried
to the new path, the rename named (bump and apply), on a synthetic upstream that renames
``test_mamba_moe_model.py`` to ``test_hybrid_moe_model.py`` (as Megatron-LM did)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.synth import lines, rebasectl
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import TERMINAL, imported

OLD, NEW = "tests/test_mamba_moe_model.py", "tests/test_hybrid_moe_model.py"


def _renamed(tmp: Path) -> tuple[Fork, Path]:
    text = lines(40)
    fork = Fork(tmp, {OLD: text, "b.txt": lines(5, "b")})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    checked = text.replace("line 20\n", "line 20 checked\n")
    tip = fork.up.commit("test: check line 20", {OLD: checked})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp, fork, tip)
    fork.up.git("mv", OLD, NEW)
    fork.up.git("commit", "-q", "-m", "rename mamba -> hybrid")
    fork.change("edit far from the hunk", {NEW: ("line 2\n", "line 2 hybrid\n")})
    return fork, series


def test_bump_follows_an_upstream_rename(tmp_path: Path) -> None:
    fork, series = _renamed(tmp_path)
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(tmp_path / "art"), env=TERMINAL)
    assert r.returncode == 0, r.stderr
    assert f"followed upstream's rename {OLD} -> {NEW}" in r.stdout
    bumped = (series / ".rebasectl" / "tree" / NEW).read_text()
    assert "line 20 checked\n" in bumped and "line 2 hybrid\n" in bumped
    assert not (series / ".rebasectl" / "tree" / OLD).exists()
    patch = next((series / "patches").glob("0001-*.patch")).read_text()
    assert f"+++ b/{NEW}" in patch  # the exported patch changes the new path
    data = json.loads((tmp_path / "art" / "bump.json").read_text())
    assert data["patches"][0]["renames_followed"] == {OLD: NEW}


def test_apply_follows_an_upstream_rename_without_a_stop(tmp_path: Path) -> None:
    fork, series = _renamed(tmp_path)
    r = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(followed upstream's rename {OLD} -> {NEW})" in r.stderr
    tree = series / ".rebasectl" / "tree"
    assert "line 20 checked\n" in (tree / NEW).read_text() and not (tree / OLD).exists()


def test_renames_are_kept_for_the_next_process_and_a_cut_answer_is_asked_again(
        tmp_path: Path) -> None:
    """Rename detection over a bump's range costs 0.3 s on Megatron and every command of one
    bump (apply, each continue and skip, export) asks it: the mirror keeps the answer per pair of
    full shas. A kept answer is what the next History reads (here one naming a rename git would
    not find, to tell it from asking git); one cut short (no end mark) is asked of git again."""
    from rebasectl.git import Repo

    fork, series = _renamed(tmp_path)
    rebasectl(series, "fetch", "--upstream", str(fork.up.path))
    mirror = Repo(series / ".rebasectl" / "upstream.git", upstream=True)
    old, new = str(mirror.resolve(fork.base)), str(mirror.resolve("main"))
    assert mirror.history.renames(old, new) == {OLD: NEW}
    (kept,) = (mirror.path / "rebasectl-kept").iterdir()
    assert kept.name == f"renames-{old}-{new}"
    kept.write_bytes(b"R100\0b.txt\0c.txt\0\0#end")
    again = Repo(mirror.path, upstream=True)
    assert again.history.renames(old, new) == {"b.txt": "c.txt"}
    kept.write_bytes(b"R100\0b.txt\0c.txt\0")  # cut short: no end mark
    assert Repo(mirror.path, upstream=True).history.renames(old, new) == {OLD: NEW}
    assert kept.read_bytes().endswith(b"\0#end")  # asked again, kept whole again
    assert Repo(mirror.path, upstream=True).history.renames(old[:12], new) == {OLD: NEW}
    assert len(list((mirror.path / "rebasectl-kept").iterdir())) == 1  # an abbreviation never is


def test_a_conflict_in_a_file_upstream_renamed_names_its_culprit(tmp_path: Path) -> None:
    """Upstream renamed the file and then changed the patch's line in it: the stop (and bump)
    follow the rename and name the commit that changed the line, as for any other file
    (hostile9 F11: no culprit, "no upstream commit found")."""
    text = lines(40)
    fork = Fork(tmp_path, {OLD: text, "b.txt": lines(5, "b")})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    tip = fork.up.commit("fix: line 15", {OLD: text.replace("line 15\n", "line 15 patched\n")})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp_path, fork, tip)
    fork.up.git("mv", OLD, NEW)
    fork.up.git("commit", "-q", "-m", "rename mamba -> hybrid")
    culprit = fork.change("edit line 15 upstream", {NEW: ("line 15\n", "line 15 upstream\n")})
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json")
    assert r.returncode == 1, r.stderr
    (conflict,) = json.loads(r.stdout)["patches"][0]["conflicts"]
    assert conflict["path"] == NEW
    assert conflict["regions"][0]["culprits"] == [culprit], conflict
    r = rebasectl(series, "apply", "--base", "main", "--upstream", str(fork.up.path))
    assert r.returncode == 1 and f"{NEW}:15: content conflict" in r.stdout
    assert f"changed upstream by {culprit[:12]}" in r.stdout, r.stdout
