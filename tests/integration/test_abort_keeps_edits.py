"""abort after a person began resolving: their edits to the conflicted files went with the work
tree, unsaid (found on June's 24-patch bump: half a hand resolution of a region, then `rebasectl
abort`: 'aborted; removed .../.rebasectl/tree', the edit nowhere; rerere records nothing before
``continue``). Now each tracked file changed since the stop is copied under edited/ of the folder
abort names, and said; files as the stop left them are not kept, and nothing more is said."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.harness.cli import ok
from tests.harness.scenes import World, conflicted, tree


def kept_folder(stdout: str) -> Path:
    found = re.search(r".* in (\S+)", stdout.splitlines()[-1])
    assert found, stdout
    return Path(found.group(1))


def test_abort_keeps_a_resolution_in_progress(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    a = tree(series) / "a.txt"
    half = a.read_text().replace("=======", "======= (my notes: keep both)", 1)
    a.write_text(half)
    state = series / ".rebasectl" / "apply-state.json"
    stopped = state.stat().st_mtime_ns
    os.utime(a, ns=(stopped + 10**9, stopped + 10**9))  # edited a second after the stop
    out = ok(series, "abort").stdout
    assert "1 file(s) edited since the stop (copies in edited/)" in out, out
    assert (kept_folder(out) / "edited" / "a.txt").read_text() == half


def test_abort_right_after_the_stop_keeps_nothing(world: World, tmp_path: Path) -> None:
    series = conflicted(world, tmp_path)
    out = ok(series, "abort").stdout
    assert "kept" not in out and "edited" not in out, out
    assert not (series / ".rebasectl" / "aborted").exists() or not any(
        (series / ".rebasectl" / "aborted").rglob("edited"))
