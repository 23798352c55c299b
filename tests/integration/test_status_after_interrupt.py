"""``rebasectl status`` after an apply killed between checking out the work tree and writing the
stopped patch's conflict into it (SIGKILL at 5 s of ``apply --base 3346fa8a2`` on our series):
status said 'stopped at partial-ckpt-load' while the tree held a half checkout (3065 staged
deletions, no conflict), and named no command. Now it says the apply was interrupted and
names ``rebasectl continue``/``abort``; ``continue`` writes the conflict. A stop names the
commands that go on from it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.harness.cli import ok, run
from tests.harness.scenes import World, advised


def test_status_after_a_kill_before_the_conflict_is_written(world: World,
                                                             tmp_path: Path) -> None:
    series = tmp_path / "series"
    shutil.copytree(world.sc.series, series)
    killed = run(series, "apply", "--base", world.sc.new_base,
                 env={"REBASECTL_FAULT": "kill@worktree"})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    out = ok(series, "status").stdout
    assert "stopped at" not in out, out
    line = next(x for x in out.splitlines() if x.startswith("apply in progress"))
    assert "interrupted" in line
    assert advised(out.strip().splitlines()[-1]) == ["rebasectl continue", "rebasectl abort"]
    run(series, "continue", want=1)  # the conflict is written now
    out = ok(series, "status").stdout
    assert "stopped at" in out and "unmerged: a.txt" in out, out
    assert {"rebasectl continue", "rebasectl skip", "rebasectl abort"} <= set(
        advised(out.strip().splitlines()[-1])), out
