"""Shared scenarios of the integration tests, built once per test process by the fixtures of
tests/integration/conftest.py and copied per test.

* ``World``: tests/sfix.py's scenario (patch 1 conflicts on ``new_base``) plus ``clean``, an
  upstream commit on the base on which every patch applies;
* ``Two``: an upstream that rewrites lines 3 and 20 of a.txt under two patches that change them,
  so the second stop is reached through ``continue`` (as every stop after the first of a real
  bump is); the upstream ignores ``local/`` and ``*~`` as Megatron-LM's .gitignore does.

And the steps those tests share: a checkout stopped at the conflict, an applied one (each made
once per world by the real command and copied per test with ``relocate``), patch 1's resolution,
a commit made by hand, the commands a message advises.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.cli import run
from tests.harness.git import Repo, git, head_of, lines
from tests.sfix import Scenario, module_hermetic_git, template_fixture

A = lines(40, "a")
RESOLVED_A = A.replace("a 3\n", "PATCH 3 + UPSTREAM 3\n").replace("a 33\n", "UP 33\n")
_REGION = re.compile(r"<<<<<<< [^\n]*\n.*?>>>>>>> [^\n]*\n", re.S)


@dataclass
class World:
    sc: Scenario
    clean: str  # an upstream commit on the base on which every patch applies
    prepared: dict[str, Path] = field(default_factory=dict)  # checkouts after a command


def build_world(factory: Any) -> Iterator[World]:
    gen = template_fixture(factory, "world")
    sc = next(gen)
    sc.up.checkout("-q", "-b", "clean-target", sc.base)
    clean = sc.up.commit("upstream: unrelated", {"z.txt": "z\n"})
    sc.up.checkout("main")
    yield World(sc, clean)
    gen.close()


@dataclass
class Two:
    up: Repo
    series: Path
    new_base: str


def build_two(factory: Any) -> Iterator[Two]:
    with module_hermetic_git(factory):
        root = factory.mktemp("two")
        up = Repo(root / "up")
        base = up.commit("base", {"a.txt": A, ".gitignore": "local/\n*~\n"})
        up.branch("feature")
        up.commit("upstream", {"a.txt": A.replace("a 3\n", "UP 3\n").replace("a 20\n", "UP 20\n")})
        new_base = up.head()
        up.checkout("feature")
        up.commit("fix: one", {"a.txt": A.replace("a 3\n", "P 3\n")})
        up.commit("fix: two", {"a.txt": A.replace("a 3\n", "P 3\n").replace("a 20\n", "P 20\n")})
        up.checkout("main")
        series = root / "series"
        series.mkdir()
        run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
        yield Two(up, series, new_base)


def copy_two(two: Two, tmp: Path) -> Path:
    series = tmp / "series"
    shutil.copytree(two.series, series, symlinks=True)
    return series


def tree(series: Path) -> Path:
    return series / ".rebasectl" / "tree"


def relocate(src: Path, dst: Path) -> None:
    """Copy a series checkout with its .rebasectl state (mirror, work tree, apply state) to
    ``dst``, rewriting the absolute paths git and rebasectl keep, so each test starts from a
    prepared state without re-running the commands that made it."""
    shutil.copytree(src, dst, symlinks=True)
    state = dst / ".rebasectl"
    files = [state / "tree" / ".git", state / "tree.json", state / "apply-state.json",
             *state.glob("upstream.git/worktrees/*/gitdir")]
    for f in files:
        if f.is_file():
            f.write_text(f.read_text().replace(str(src), str(dst)))


def _prepared(world: World, key: str, *args: str, want: int) -> Path:
    """World's series after ``rebasectl ARGS`` (which must exit ``want``), made the first time a
    test asks and kept beside the world: the command is these tests' setup, not what they
    check, and a copy costs a fraction of running it again."""
    if key not in world.prepared:
        series = world.sc.series.parent / f"prepared-{key}"
        shutil.copytree(world.sc.series, series)
        run(series, *args, want=want)
        world.prepared[key] = series
    return world.prepared[key]


def conflicted(world: World, tmp_path: Path, name: str = "series") -> Path:
    """A series checkout stopped at patch 1's conflict on new_base."""
    series = tmp_path / name
    relocate(_prepared(world, "conflicted", "apply", "--base", world.sc.new_base, want=1), series)
    return series


def applied(world: World, tmp_path: Path, name: str = "series") -> Path:
    """A series checkout applied on its base (every patch committed)."""
    series = tmp_path / name
    relocate(_prepared(world, "applied", "apply", want=0), series)
    return series


def resolve_a(series: Path, add: bool = True) -> None:
    (tree(series) / "a.txt").write_text(RESOLVED_A)
    if add:
        git(tree(series), "add", "a.txt")


def resolve_all(path: Path, text: str) -> None:
    """Replace every conflict region of ``path`` with ``text`` (a person's resolution)."""
    path.write_text(_REGION.sub(text, path.read_text()))


def commit_in(path: Path, message: str, files: dict[str, str]) -> str:
    """A commit made by hand in ``path`` (files written, added, committed): its sha."""
    for rel, text in files.items():
        (path / rel).write_text(text)
    if files:
        git(path, "add", "--", *files)
    git(path, "commit", "-q", "-m", message)
    return head_of(path)


def advised(message: str) -> list[str]:
    """The commands a message tells the user to run (text in backticks)."""
    return re.findall(r"`([^`]+)`", message)


Files = dict[str, str | None]  # path -> content (None: deleted)


def forked(tmp: Path, base: Files, patches: list[tuple[str, Files]],
           upstream: list[tuple[str, Files]] | None = None) -> tuple[Repo, str]:
    """An upstream at ``tmp``/up: ``base``, then a ``feature`` branch with ``patches`` (message,
    files; no files: an empty commit) and ``upstream``'s commits on main. (It, the base's sha.)"""
    up = Repo(tmp / "up")
    base_sha = up.commit("base", base)
    up.branch("feature")
    up.checkout("feature")
    for message, files in patches:
        up.commit(message, files, allow_empty=not files)
    up.checkout("main")
    for message, files in upstream or []:
        up.commit(message, files)
    return up, base_sha


def imported(tmp: Path, up: Repo, base: str) -> Path:
    """``tmp``/series: the ``feature`` branch imported (``rebasectl import``) and committed in a
    repository of its own, as a series is kept."""
    series = tmp / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    git(series, "init", "-q")
    git(series, "add", "-A")
    git(series, "commit", "-q", "-m", "series")
    return series

