"""A small synthetic upstream with a downstream series on it, for the core and reliability tests.

``make(tmp)`` builds, with real git and a deterministic clock:

* an upstream ``up`` whose ``main`` has a base commit and then one commit that moves the base
  (``new_base``): it rewrites line 3 of ``a.txt`` (so patch 1 conflicts there) and line 33
  (so patch 4 applies only with a 3-way merge);
* a ``feature`` branch on the base with five patches (one of them an empty commit), imported into
  the series checkout ``series`` (patches/ + series.yaml), with metadata added to series.yaml.

``snapshot(dir)`` captures every byte of patches/ and series.yaml, to prove a command left them
alone. The CLI runs through ``tests.harness.cli`` (in this process unless a fault point is set).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness.cli import run
from tests.harness.git import Repo, lines
from tests.harness.git import head_of as head_of  # re-exported: tests import it from here
from tests.harness.git import tree_of as tree_of

A = lines(40, "a")
B = lines(20, "b")


@dataclass
class Scenario:
    up: Repo
    series: Path
    base: str
    new_base: str
    tip: str  # the feature branch tip: the tree `apply` must reproduce on the base


def _edit(text: str, number: int, new: str, prefix: str = "a") -> str:
    return text.replace(f"{prefix} {number}\n", f"{new}\n", 1)


def make(tmp: Path, *, empty_commit: bool = True, meta: bool = True) -> Scenario:
    up = Repo(tmp / "up")
    base = up.commit("base", {"a.txt": A, "b.txt": B, "c/d.txt": lines(5, "d")})
    up.branch("feature")
    up.commit("upstream: rework a", {"a.txt": _edit(_edit(A, 3, "UPSTREAM 3"), 33, "UP 33")})
    new_base = up.head()
    up.checkout("feature")
    a1 = _edit(A, 3, "PATCH 3")
    up.commit("[1/5] fix: change a line 3", {"a.txt": a1})
    up.commit("feat: add e", {"e.txt": "new file\n"})
    up.commit("compat: touch b", {"b.txt": _edit(B, 10, "PATCHED b 10", "b")})
    if empty_commit:
        up.commit("chore: empty marker", allow_empty=True)
    up.commit("feat: change a line 30\n\nA body line.\n", {"a.txt": _edit(a1, 30, "PATCH 30")})
    tip = up.head()
    up.checkout("main")
    series = tmp / "series"
    series.mkdir()
    r = run(series, "import", f"{base}..feature", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    if meta:
        text = (series / "series.yaml").read_text()
        text = text.replace("why: ''", "why: kept for the tests", 1)
        (series / "series.yaml").write_text(text)
    return Scenario(up, series, base, new_base, tip)


def snapshot(series: Path) -> dict[str, bytes]:
    """Every byte of the series (series.yaml and everything under patches/)."""
    out: dict[str, bytes] = {}
    if (series / "series.yaml").is_file():
        out["series.yaml"] = (series / "series.yaml").read_bytes()
    pdir = series / "patches"
    if pdir.is_dir():
        for p in sorted(pdir.rglob("*")):
            if p.is_file():
                out[str(p.relative_to(series))] = p.read_bytes()
    return out


def run_cli(workdir: Path, *args: str) -> tuple[int, str, str]:
    """The CLI in this process: (exit code, stdout, stderr)."""
    r = run(workdir, *args)
    return r.returncode, r.stdout, r.stderr


@contextlib.contextmanager
def module_hermetic_git(factory: Any) -> Iterator[None]:
    """Hermetic git for module-scoped fixtures (the autouse per-test fixture of conftest does
    not cover module scope): HOME in a tmp dir, no global config, fixed identities and dates."""
    import pytest

    from tests.conftest import _HERMETIC

    home = factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(home))
        mp.setenv("GIT_CONFIG_GLOBAL", os.devnull)
        for key, value in _HERMETIC.items():
            mp.setenv(key, value)
        for key in ("REBASECTL_UPSTREAM", "REBASECTL_DEBUG", "REBASECTL_FAULT"):
            mp.delenv(key, raising=False)
        yield


def template_fixture(factory: Any, name: str, **kw: Any) -> Iterator[Scenario]:
    """Body of a module-scoped fixture: one scenario built with hermetic git, copied per test
    by ``copy``."""
    with module_hermetic_git(factory):
        yield make(factory.mktemp(name), **kw)


def copy(sc: Scenario, tmp: Path) -> Path:
    series = tmp / "series"
    shutil.copytree(sc.series, series, symlinks=True)
    return series
