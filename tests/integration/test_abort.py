"""abort keeps what only the removed work tree held, and its advice works: a commit the person
made there comes back with the `git am` abort names; untracked and ignored files are moved to
the folder it prints; nothing is said about commits when there were none."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sfix import Scenario, copy, template_fixture
from tests.synth import rebasectl


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    yield from template_fixture(tmp_path_factory, "abort")


def _git(path: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_abort_says_only_what_it_kept(sc: Scenario, tmp_path: Path) -> None:
    series = copy(sc, tmp_path)
    assert rebasectl(series, "apply", "--base", sc.new_base).returncode == 1
    (series / ".rebasectl" / "tree" / "NOTES.md").write_text("notes\n")
    r = rebasectl(series, "abort")
    assert r.returncode == 0, r.stderr
    assert "kept 1 untracked file(s) of the removed work tree in" in r.stdout
    assert "commit" not in r.stdout
    kept = Path(r.stdout.split(" in ")[-1].strip())
    assert (kept / "untracked" / "NOTES.md").read_text() == "notes\n"
    assert not (kept / "commits").exists()


def test_abort_of_a_tree_with_a_person_s_commit(sc: Scenario, tmp_path: Path) -> None:
    series = copy(sc, tmp_path)
    assert rebasectl(series, "apply", "--base", sc.new_base).returncode == 1
    tree = series / ".rebasectl" / "tree"
    tip = _git(tree, "rev-parse", "HEAD")
    (tree / "mine.txt").write_text("my work\n")
    (tree / "backup~").write_text("editor backup\n")
    (tree / ".gitignore").write_text("*~\n")
    (tree / "a.txt").write_text("resolved by hand, then committed instead of continued\n")
    _git(tree, "add", "mine.txt", "a.txt")
    _git(
        tree,
        "-c",
        "user.name=Me",
        "-c",
        "user.email=me@example.com",
        "commit",
        "-q",
        "-m",
        "wip: my work",
    )
    r = rebasectl(series, "abort")
    assert r.returncode == 0, r.stderr
    found = re.search(r" in (\S+) \(", r.stdout)
    assert found, r.stdout
    kept = Path(found.group(1))
    assert "1 commit(s)" in r.stdout and "`git am` the commits in commits/" in r.stdout
    assert (kept / "untracked" / "backup~").read_text() == "editor backup\n"
    assert (kept / "untracked" / ".gitignore").exists()
    # the advice, followed: a checkout of the tip takes the kept commit with `git am`
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "-q", str(series / ".rebasectl" / "upstream.git"), str(clone)], check=True
    )
    _git(clone, "checkout", "-q", "--detach", sc.new_base)
    patches = sorted((kept / "commits").glob("*.patch"))
    assert len(patches) == 1
    _git(
        clone,
        "-c",
        "user.name=Me",
        "-c",
        "user.email=me@example.com",
        "am",
        "-q",
        *map(str, patches),
    )
    assert (clone / "mine.txt").read_text() == "my work\n"
    assert _git(clone, "log", "-1", "--format=%s") == "wip: my work"
    assert _git(clone, "rev-parse", "HEAD~1") == tip  # only the person's commit was kept
