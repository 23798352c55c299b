"""A stop in a patch one of whose files upstream renamed (the rename followed, as ``git am -3``
does): the patch's change to the renamed file was staged but the work tree kept upstream's file
without it (``git status``: MM), so ``git add -A`` after resolving the other files (or a test of
the work tree at the stop) silently lost it; our series at 3346fa8a2: post-layernorm's
tests/unit_tests/models/test_hybrid_moe_model.py change missing from its commit after
``git add -A`` + ``continue``. Now the followed file is on disk as staged."""

from __future__ import annotations

from pathlib import Path

from tests.harness.cli import ok, run
from tests.harness.git import Repo, git_out, lines

BODY = lines(30, "value")


def test_followed_rename_is_on_disk_at_the_stop(tmp_path: Path) -> None:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"mod.py": BODY, "other.py": "x = 1\n"})
    up.git("checkout", "-q", "-b", "fork")
    tip = up.commit("patch", {"mod.py": BODY.replace("value 5\n", "value 5 patched\n"),
                              "other.py": "x = 2\n"})
    up.checkout("main")
    up.git("mv", "mod.py", "renamed.py")
    new = up.commit("upstream: rename mod.py, x = 3", {"other.py": "x = 3\n"})
    series = Repo(tmp_path / "series")
    series.commit("init", allow_empty=True)
    ok(series.path, "import", f"{base}..{tip}", "--repo", str(up.path))
    series.commit("series")
    run(series.path, "apply", "--base", new, "--upstream", str(up.path), want=1)
    tree = series.path / ".rebasectl" / "tree"
    assert "value 5 patched" in (tree / "renamed.py").read_text()
    assert set(git_out(tree, "diff", "--name-only").split()) == {"other.py"}  # only the conflict
    (tree / "other.py").write_text("x = 3\n")
    Repo.existing(tree).git("add", "-A")
    ok(series.path, "continue")
    assert "value 5 patched" in git_out(tree, "show", "HEAD:renamed.py")
