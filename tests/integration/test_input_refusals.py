"""Input files that are not what they claim are refused in one line (exit 2), before any work:
a series.yaml that is a FIFO (reading it blocked every command for ever) and a patch file that
holds two mail messages (the first change ended up in a commit message, applied "3/3")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.harness.cli import run as rebasectl
from tests.sfix import Scenario, copy, snapshot


def refused(series: Path, *args: str) -> str:
    """The command's one error line; a command that blocks fails the test (timeout), never
    hangs it."""
    try:
        r = rebasectl(series, *args, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rebasectl {' '.join(args)} blocked (killed after 60 s)")
    assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    return r.stderr


@pytest.mark.parametrize("args", [("check",), ("status",), ("export",),
                                  ("apply", "--upstream", "UP")])
def test_a_fifo_series_yaml_is_refused(sc: Scenario, tmp_path: Path,
                                       args: tuple[str, ...]) -> None:
    """Finding 11: a series.yaml that is a FIFO blocked every command (a FIFO patch file was
    already refused)."""
    series = copy(sc, tmp_path)
    (series / "series.yaml").unlink()
    os.mkfifo(series / "series.yaml")
    args = tuple(str(sc.up.path) if a == "UP" else a for a in args)
    err = refused(series, *args)
    assert "series.yaml" in err and "not a regular file" in err, err


def test_a_series_yaml_linked_to_a_device_is_refused(sc: Scenario, tmp_path: Path) -> None:
    series = copy(sc, tmp_path)
    (series / "series.yaml").unlink()
    os.symlink("/dev/zero", series / "series.yaml")
    assert "not a regular file" in refused(series, "check")


def _two_messages(series: Path) -> Path:
    """Patch 1's file holding patches 1 and 2 (as `git format-patch --stdout -2` writes them),
    patch 2's entry gone from series.yaml."""
    files = sorted((series / "patches").iterdir())
    first, second = files[0], files[1]
    first.write_bytes(first.read_bytes() + second.read_bytes())
    second.unlink()
    text = (series / "series.yaml").read_text()
    start = text.index("- id:", text.index("- id:") + 1)
    end = text.index("- id:", start + 1)
    (series / "series.yaml").write_text(text[:start] + text[end:])
    return first


def test_a_patch_file_with_two_messages_is_refused(sc: Scenario, tmp_path: Path) -> None:
    """Finding 10: check passed it and apply said "applied" while the first message's change
    was in no commit, only in a commit message. check and apply refuse it, naming the line
    where the second message starts, and leave everything as it was."""
    series = copy(sc, tmp_path)
    first = _two_messages(series)
    lines = first.read_bytes().split(b"\n")
    line = next(k for k in range(1, len(lines)) if lines[k].startswith(b"From 0000")) + 1
    before = snapshot(series)
    err = refused(series, "check")
    assert f"patches/{first.name}:{line}: a second mail message" in err, err
    err = refused(series, "apply", "--upstream", str(sc.up.path))
    assert "a second mail message" in err
    assert snapshot(series) == before
    assert not (series / ".rebasectl" / "tree").exists()


def test_a_message_quoting_a_from_line_is_kept(sc: Scenario, tmp_path: Path) -> None:
    """The guard: a 'From ' line that is no mbox separator (prose in a message) is fine."""
    series = copy(sc, tmp_path)
    first = sorted((series / "patches").iterdir())[0]
    data = first.read_bytes()
    at = data.index(b"\n\n") + 2
    first.write_bytes(data[:at] + b"From the upstream docs: keep this.\n\n" + data[at:])
    r = rebasectl(series, "check")
    assert r.returncode in (0, 1), r.stderr
    assert "second mail message" not in r.stderr
