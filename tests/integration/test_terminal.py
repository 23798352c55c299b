"""What a person sees on a terminal, checked on a real pseudo-terminal (util-linux `script`):
plain progress lines (no log-handler timestamp, no `ui.py:N` column), a live bar with the count
and the elapsed time, no CI annotation lines (those come on GitHub Actions or when asked for);
and the artifacts folder a bump makes in a checkout ignores itself."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sfix import make

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_tty(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """The command's terminal output (stdout and stderr as the terminal got them), colours out."""
    script = shutil.which("script")
    if script is None:
        pytest.fail("util-linux `script` is needed to test terminal output")
    typescript = cwd / "typescript"
    command = " ".join([sys.executable, "-m", "rebasectl", *args])
    full = {**os.environ, "COLUMNS": "120", "TERM": "xterm-256color", "GITHUB_ACTIONS": "",
            **(env or {})}
    full.pop("NO_COLOR", None)
    subprocess.run([script, "-q", "-e", "-c", command, str(typescript)], cwd=cwd, env=full,
                   stdin=subprocess.DEVNULL, capture_output=True, timeout=300, check=False)
    return ANSI.sub("", typescript.read_text(errors="replace")).replace("\r", "\n")


def test_bump_on_a_terminal(tmp_path: Path) -> None:
    sc = make(tmp_path)
    subprocess.run(["git", "init", "-q", str(sc.series)], check=True)
    out = on_tty(sc.series, "bump", "--to", sc.new_base, "--upstream", str(sc.up.path),
                 "--artifacts", "out")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert "rebasectl: Applying (1/5) change-a-line-3: conflict" in lines, out
    assert not re.search(r"\[\d\d:\d\d:\d\d\]", out) and "ui.py:" not in out
    assert re.search(r"bump to \w+ .*5/5 0:00:\d\d", out), out  # the bar: count and elapsed
    assert not any(ln.startswith("patches/") for ln in lines)  # no annotations off CI
    assert any(ln.startswith(" 1 ") and "change-a-line-3" in ln and "conflict" in ln
               for ln in lines)
    # the artifacts folder it made ignores itself: nothing untracked appears
    status = subprocess.run(["git", "-C", str(sc.series), "status", "--porcelain",
                             "--untracked-files=all", "--", "out"],
                            capture_output=True, text=True, check=True).stdout
    assert (sc.series / "out" / "bump.json").is_file() and status == ""
    # asked for, the annotation lines come on a terminal too
    again = on_tty(sc.series, "bump", "--to", sc.new_base, "--upstream", str(sc.up.path),
                   "--artifacts", "out", "--annotations")
    assert any(ln.startswith("patches/0001-") for ln in again.splitlines()), again


def test_annotations_on_github_actions(tmp_path: Path) -> None:
    sc = make(tmp_path)
    r = subprocess.run([sys.executable, "-m", "rebasectl", "-C", str(sc.series), "bump", "--to",
                        sc.new_base, "--upstream", str(sc.up.path)],
                       capture_output=True, text=True, check=False, timeout=300,
                       env={**os.environ, "GITHUB_ACTIONS": "true"})
    assert r.returncode == 1, r.stderr
    assert any(ln.startswith("patches/0001-") for ln in r.stderr.splitlines()), r.stderr
