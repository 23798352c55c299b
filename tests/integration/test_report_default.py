"""`rebasectl report`'s default old side (docs/design.md, ``report`` inputs), through the real CLI:
after a bump is exported but not committed the old side is the series at HEAD, even when HEAD's
last change to the series was not a base change and the history holds merges; once committed, it
is the series just before the last first-parent commit that changed the base. The first line of
the report says which side was taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo


def text(name: str, n: int = 30) -> str:
    return "".join(f"{name}_{i} = f({i})\n" for i in range(1, n + 1))


def _edit(body: str, old: str, new: str) -> str:
    assert old in body
    return body.replace(old, new, 1)


@pytest.fixture
def world(tmp_path: Path) -> dict[str, str | Path]:
    """An upstream (base1 → base2 touches only an unrelated file) and three versions of a
    two-patch series on base1 (v1, v2: patch 1 changed, v3: patch 2 changed too)."""
    up = Repo(tmp_path / "up")
    files = {"a.py": text("a"), "b.py": text("b"), "other.py": text("o")}
    base1 = up.commit("base", files)
    base2 = up.commit("upstream: unrelated (#5)", {"other.py": text("o") + "more = 1\n"})
    a_v1 = _edit(files["a.py"], "a_3 = f(3)\n", "a_3 = f(3) * 2\n")
    a_v2 = _edit(files["a.py"], "a_3 = f(3)\n", "a_3 = f(3) * 3\n")
    b_v1 = _edit(files["b.py"], "b_9 = f(9)\n", "b_9 = f(9) + 1\n")
    b_v3 = _edit(files["b.py"], "b_9 = f(9)\n", "b_9 = f(9) + 7\n")
    for name, a, b in (("v1", a_v1, b_v1), ("v2", a_v2, b_v1), ("v3", a_v2, b_v3)):
        up.checkout("-q", "-B", name, base1)
        up.commit("fix: scale a", {"a.py": a})
        up.commit("fix: shift b", {"b.py": b})
    up.checkout("main")
    return {"up": up.path, "base1": base1, "base2": base2, "tmp": tmp_path}


def _import(repo: Repo, world: dict[str, str | Path], branch: str) -> None:
    r = rebasectl(repo.path, "import", f"{world['base1']}..{branch}", "--repo", str(world["up"]))
    assert r.returncode == 0, r.stderr


def _history(world: dict[str, str | Path]) -> Repo:
    """root: v1 · merge of a side branch carrying v2 · HEAD: v3 (no base change anywhere)."""
    repo = Repo(Path(world["tmp"]) / "series")
    _import(repo, world, "v1")
    repo.commit("series v1")
    repo.git("checkout", "-q", "-b", "side")
    _import(repo, world, "v2")
    repo.commit("series v2")
    repo.git("checkout", "-q", "main")
    repo.clock += 60
    repo.git("merge", "-q", "--no-ff", "side", "-m", "Merge side: v2")
    _import(repo, world, "v3")
    repo.commit("series v3")
    return repo


def _report(repo: Repo, *extra: str) -> dict[str, object]:
    r = rebasectl(repo.path, "report", "--json", *extra)
    data: dict[str, object] = json.loads(r.stdout)
    assert r.returncode == (1 if data["review"] else 0), r.stderr  # 1: entries to review
    return data


def _sha_of(repo: Repo, rev: str, path: str) -> str:
    return repo.git("rev-parse", f"{rev}:{path}")


def _old_patch_blobs(data: dict[str, object]) -> list[str]:
    old = data["old"]
    assert isinstance(old, dict)
    return [p["patch_id"] for p in old["patches"]]


def test_export_after_bump_reports_against_head(world: dict[str, str | Path]) -> None:
    repo = _history(world)
    head = repo.head()
    r = rebasectl(repo.path, "bump", "--to", str(world["base2"]), "--upstream", str(world["up"]),
                  "--artifacts", str(Path(world["tmp"]) / "art"))
    assert r.returncode == 0, r.stderr
    assert repo.git("status", "--porcelain", "--", "series.yaml")  # exported, not committed
    data = _report(repo)
    old = data["old"]
    assert isinstance(old, dict)
    assert old["base"] == world["base1"]
    assert old["label"].startswith(f"HEAD ({head[:12]}")
    # HEAD's series (v3), not the merge's (v2) nor the root's (v1): same patch-ids as --old-rev HEAD
    explicit = _report(repo, "--old-rev", "HEAD")
    assert _old_patch_blobs(data) == _old_patch_blobs(explicit)
    assert _old_patch_blobs(data) != _old_patch_blobs(_report(repo, "--old-rev", "HEAD~1"))
    statuses = [m["status"] for m in data["mapping"]]  # type: ignore[union-attr]
    assert statuses == ["identical", "identical"]  # the bump moved no patch: v3 → v3
    md = rebasectl(repo.path, "report")
    assert md.returncode == 0, md.stderr
    first = "\n".join(md.stdout.splitlines()[:6])  # the first lines say which side was taken
    assert f"HEAD ({head[:12]}; the working copy's base" in first

    # committed: the series just before that commit, the last one that changed the base
    repo.commit("bump to base2")
    after = _report(repo)
    assert after["old"]["label"].startswith(head[:12])  # type: ignore[index]
    assert _old_patch_blobs(after) == _old_patch_blobs(explicit)


def test_base_change_through_a_merge(world: dict[str, str | Path]) -> None:
    """The bump lands through a merge of a side branch, then a patch changes on main: the old
    side is the merge's first parent, not the side branch's commits nor a later one."""
    repo = _history(world)
    before = repo.head()
    repo.git("checkout", "-q", "-b", "bump")
    r = rebasectl(repo.path, "bump", "--to", str(world["base2"]), "--upstream", str(world["up"]),
                  "--artifacts", str(Path(world["tmp"]) / "art"))
    assert r.returncode == 0, r.stderr
    repo.commit("bump to base2")
    repo.git("checkout", "-q", "main")
    repo.clock += 60
    repo.git("merge", "-q", "--no-ff", "bump", "-m", "Merge the bump")
    text_now = (repo.path / "series.yaml").read_text()
    repo.commit("series: reword", {"series.yaml": text_now.replace("why: ''", "why: kept", 1)})
    data = _report(repo)
    assert data["old"]["label"].startswith(before[:12])  # type: ignore[index]
    assert data["old"]["base"] == world["base1"] and data["new"]["base"] == world["base2"]  # type: ignore[index]


def test_root_commit_has_no_earlier_series(world: dict[str, str | Path]) -> None:
    repo = Repo(Path(world["tmp"]) / "lone")
    _import(repo, world, "v1")
    repo.commit("series v1")
    _import(repo, world, "v3")
    repo.commit("series v3: same base")
    r = rebasectl(repo.path, "report", "--upstream", str(world["up"]))
    assert r.returncode == 2 and "no earlier base" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
