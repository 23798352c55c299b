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
for SIGSTOP at a fault point and signals sent from outside, a lock held by another process,
rlimits, and what only an interpreter's start reads (PYTHONIOENCODING, the locale), which ``run``
hands over to ``spawn`` by itself. ``forked`` runs the console script's entry (``_entry.main``:
its Ctrl-C handlers, the fault points) in a child forked from this process: a real process that a
fault point kills or interrupts (``kill@``/``int@`` in ``REBASECTL_FAULT``), without an
interpreter's start and the CLI's import, which were most of the CPU of a kill test (0.4 s each);
``run`` hands over to it by itself when the environment names such a fault point.
"""

from __future__ import annotations

import gc
import io
import os
import select
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

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
    if not isinstance(exc.code, int):
        sys.stderr.write(f"{exc.code}\n")  # what the interpreter prints for sys.exit("text")
        return 1
    return exc.code


def _main(argv: list[str]) -> tuple[int, str, str]:
    """``rebasectl.cli.main`` on ``argv``: (exit code, stdout, stderr)."""
    from rebasectl.cli import main
    from rebasectl.git.runner import forget_safe_directories

    forget_safe_directories()  # what a new process starts without
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
FAULT = "REBASECTL_FAULT"


def _needs_process(env: dict[str, str] | None) -> str:
    """How a command must run: ``fork`` where a fault point kills or interrupts the process that
    reaches it; ``exec`` where PYTHONIOENCODING, the locale and the like must reach an
    interpreter's start, or a ``stop@`` fault leaves a process for someone to resume; the empty
    string where this process will do."""
    fault = (env or {}).get(FAULT, os.environ.get(FAULT, ""))
    if any(key.startswith(_INTERPRETER) for key in env or {}) or fault.startswith("stop@"):
        return "exec"
    return "fork" if fault else ""


def run(workdir: Path | str | None, *args: str, env: dict[str, str] | None = None,
        want: int | None = None, timeout: float = 600) -> Result[str]:
    """rebasectl ``-C workdir ARGS`` in this process (or a real one where ``_needs_process``);
    with ``want`` the exit code must be that. ``timeout`` applies to a real process only."""
    how = _needs_process(env)
    if how == "exec":
        result = spawn(workdir, *args, env=env, timeout=timeout)
    elif how == "fork":
        result = forked(workdir, *args, env=env, timeout=timeout)
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


def forked(workdir: Path | str | None, *args: str, env: dict[str, str] | None = None,
           timeout: float = 600) -> Result[str]:
    """rebasectl as a child forked from this process, run to its end: the exit code is the
    child's (``-9`` when a fault point SIGKILLed it), stdout and stderr are what it wrote to its
    own file descriptors 1 and 2 (stdin is /dev/null)."""
    argv = _argv(workdir, args)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            _child(argv, env, out.fileno(), err.fileno())
        code = _wait(pid, timeout, argv)
        out.seek(0)
        err.seek(0)
        texts = [f.read().decode("utf-8", "surrogateescape") for f in (out, err)]
    return Result(["rebasectl", *argv], code, texts[0], texts[1])


def _child(argv: list[str], env: dict[str, str] | None, out: int, err: int) -> NoReturn:
    """The forked child: its own stdio on the given files, the environment, then the console
    script's entry; never returns into the test process's code (``os._exit``)."""
    code = 1
    try:
        gc.freeze()  # the parent's garbage (a TemporaryDirectory's finaliser) is not ours to run
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, target in ((null, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape",  # noqa: SIM115
                          closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",  # noqa: SIM115
                          closefd=False, buffering=1)
        sys.argv = ["rebasectl", *argv]
        # Ctrl-C as a command typed at a terminal gets it: the test process's own disposition
        # (ignored in some workers) is not the user's
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for key, value in (env or {}).items():
            os.environ[key] = value
        from rebasectl._entry import main
        from rebasectl.git.runner import forget_safe_directories
        from rebasectl.infra import faults

        faults._seen.clear()
        forget_safe_directories()
        main()
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # what the interpreter prints on its way out
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: S110  (a closed stream: nothing left to write)
                pass
        os._exit(code)


def _wait(pid: int, timeout: float, argv: list[str]) -> int:
    """The exit code of child ``pid`` (negative: the signal that ended it); a child still
    running after ``timeout`` seconds is killed and the call raises ``TimeoutExpired``."""
    fd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(int(timeout * 1000)):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise subprocess.TimeoutExpired(["rebasectl", *argv], timeout)
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


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
