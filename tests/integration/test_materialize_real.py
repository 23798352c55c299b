"""The Python materialiser (applier + fast-import) gives exactly what git gives, on the real
Megatron-LM tree: for each patch of this repository's series, on its pinned base and on the June
upstream (3346fa8a2, where most patches conflict and int4-qat needs a 3-way merge), the commit
sha equals the one that `git apply --cached --3way` + `write-tree` + `commit-tree` make from the
same parent — so the trees are git's, the commit objects are byte-identical, and a conflict is a
conflict for both. Skips without REBASECTL_MEGATRON_MIRROR."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebasectl.engine.exchange import load_patches
from rebasectl.engine.materialize import Materializer, commit_patch
from rebasectl.git import Repo
from rebasectl.model.series import load
from rebasectl.model.series_patch import SeriesPatch
from rebasectl.model.status import Applied
from rebasectl.model.workspace import Workspace
from tests.harness.git import borrowing

REPO_ROOT = Path(__file__).resolve().parents[2]
JUNE = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"


def git_reference(repo: Repo, base: str, stack: list[SeriesPatch]) -> list[str | None]:
    """Each patch with git alone (3-way, a conflicting one left out): its commit, or None."""
    out: list[str | None] = []
    parent = base
    for patch in (sp.patch for sp in stack):
        with repo.index() as index:
            index.read_tree(repo.tree_of(parent))
            if not patch.is_empty and not index.apply(patch.diff, three_way=True).ok:
                out.append(None)
                continue
            commit = commit_patch(repo, index.write_tree(), parent, patch)
        out.append(commit)
        parent = commit
    return out


@pytest.mark.parametrize("base", ["pinned", JUNE])
def test_python_materialiser_equals_git(mirror_path: Path, base: str, tmp_path: Path) -> None:
    ws = Workspace(REPO_ROOT)
    series = load(ws.root)
    stack = load_patches(ws, series)
    repo = Repo(borrowing(mirror_path, tmp_path / "scratch.git"))  # commits land there
    start = series.upstream.base if base == "pinned" else base
    ours = Materializer(repo).run(start, stack, keep_going=True)
    reference = git_reference(repo, start, stack)
    assert [s.commit for s in ours.steps] == reference
    if base == "pinned":
        assert all(s.status in (Applied.CLEAN, Applied.EMPTY) for s in ours.steps)
    else:
        assert Applied.CONFLICT in {s.status for s in ours.steps}
        assert Applied.MERGED in {s.status for s in ours.steps}
