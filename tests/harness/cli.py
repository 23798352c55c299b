"""Running rebasectl from a test: in this process by default, as a real process where the process
boundary is the point.

``run`` calls ``rebasectl.cli.main`` (the same entry the console script ends in: click's parsing,
the error-to-exit-code mapping, ``--json`` on every exit) with ``sys.argv``, ``sys.stdout`` and
``sys.stderr`` swapped for the call and the environment overrides applied to ``os.environ`` for
the call only. The streams are UTF-8 text wrappers over bytes, as a real process has, so the
CLI's own ``reconfigure(errors="backslashreplace")`` applies and the test reads what a terminal
would. It never changes directory (``-C`` carries the place) and never installs a signal handler:
that is ``_entry``'s job, which only a real process runs.

``spawn``/``popen`` start ``python -m rebasectl`` (``sys.executable``, never the PATH's python):
for signals, SIGKILL or SIGSTOP at a fault point (``REBASECTL_FAULT``), a lock held by another
process, rlimits. ``run`` hands over to ``spawn`` by itself when the environment names a fault
point (a fault kills or stops the process that reaches it) or sets what only an interpreter's
start reads (PYTHONIOENCODING, the locale).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

Result = subprocess.CompletedProcess


def _argv(workdir: Path | str | None, args: tuple[str, ...]) -> list[str]:
    return [*(["-C", str(workdir)] if workdir is not None else []), *args]


@contextmanager
def _environment(env: dict[str, str] | None) -> Iterator[None]:
    """``env`` over ``os.environ`` for the duration of the call (a value None removes the key)."""
    saved = {key: os.environ.get(key) for key in env or {}}
    try:
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8")


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


def _main(argv: list[str]) -> tuple[int, str, str]:
    """``rebasectl.cli.main`` on ``argv``: (exit code, stdout, stderr)."""
    from rebasectl.cli import main

    out, err = _stream(), _stream()
    saved = sys.argv, sys.stdout, sys.stderr
    sys.argv, sys.stdout, sys.stderr = ["rebasectl", *argv], out, err
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = _exit_code(exc)
    except Exception:  # what the interpreter would print on its way out (REBASECTL_DEBUG=1)
        err.write(traceback.format_exc())
        code = 1
    finally:
        sys.argv, sys.stdout, sys.stderr = saved
    return code, _text(out), _text(err)


_INTERPRETER = ("PYTHON", "LC_", "LANG")  # read when an interpreter starts, not later


def _needs_process(env: dict[str, str] | None) -> bool:
    """A fault point kills or stops the process that reaches it; PYTHONIOENCODING, the locale
    and the like take effect only when an interpreter starts: both need a real process."""
    if os.environ.get("REBASECTL_FAULT"):
        return True
    return any(key == "REBASECTL_FAULT" or key.startswith(_INTERPRETER) for key in env or {})


def run(workdir: Path | str | None, *args: str, env: dict[str, str] | None = None,
        want: int | None = None, timeout: float = 600) -> Result[str]:
    """rebasectl ``-C workdir ARGS`` in this process (or a real one where ``_needs_process``);
    with ``want`` the exit code must be that. ``timeout`` applies to a real process only."""
    if _needs_process(env):
        result = spawn(workdir, *args, env=env, timeout=timeout)
    else:
        argv = _argv(workdir, args)
        with _environment(env):
            code, out, err = _main(argv)
        result = Result(["rebasectl", *argv], code, out, err)
    if want is not None:
        assert result.returncode == want, (args, result.returncode, result.stdout, result.stderr)
    return result


def ok(workdir: Path | str | None, *args: str, env: dict[str, str] | None = None) -> Result[str]:
    """A command that must exit 0."""
    return run(workdir, *args, env=env, want=0)


def fails(workdir: Path | str | None, code: int, *args: str,
          env: dict[str, str] | None = None) -> str:
    """A command that must exit ``code`` with no traceback; its stderr."""
    result = run(workdir, *args, env=env, want=code)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stderr


def command(workdir: Path | str | None, *args: str) -> list[str]:
    """The argv of a real rebasectl process."""
    return [sys.executable, "-m", "rebasectl", *_argv(workdir, args)]


def spawn(workdir: Path | str | None, *args: str, env: dict[str, str] | None = None,
          timeout: float = 600, **kw: Any) -> Result[str]:
    """rebasectl as a real process, run to its end (exit codes by signal, rlimits, faults)."""
    full = {**os.environ, **(env or {})}
    return subprocess.run(command(workdir, *args), capture_output=True, text=True, env=full,
                          timeout=timeout, check=False, **kw)


def popen(workdir: Path | str | None, *args: str, env: dict[str, str] | None = None,
          **kw: Any) -> subprocess.Popen[str]:
    """rebasectl as a real process left running (stdout and stderr piped, text)."""
    full = {**os.environ, **(env or {})}
    return subprocess.Popen(command(workdir, *args), env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def one_error(stderr: str, *words: str) -> str:
    """The command ended on exactly one error line, the last line of stderr, holding ``words``,
    with no traceback; returns that line.

    Progress news before it is allowed: ``ui.Progress`` holds a command's news back for its first
    half second only, so a command interrupted or refused after that (any command, on a loaded
    machine) has printed its news live. Counting all of stderr's lines made those tests depend on
    the machine's speed; the promise is one error line, and that is what is checked."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    errors = [n for n, line in enumerate(lines) if line.startswith("rebasectl: error: ")]
    assert len(errors) == 1 and errors[0] == len(lines) - 1, stderr
    assert all(word in lines[-1] for word in words), (words, stderr)
    return lines[-1]
