"""The one error type below the CLI, carrying the exit code of docs/design.md.

Nothing below ``cli.py`` prints or exits; it raises ``RebasectlError`` (or a subclass) with a
one-line message, and the CLI turns it into that line on stderr and the exit code.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    CONFLICT = 1  # conflicts, or differences that need a human
    BAD_INPUT = 2  # bad input or usage
    TESTS_FAILED = 3
    INTERRUPTED = 130


class RebasectlError(Exception):
    """A failure with a one-line, user-facing reason and the exit code it maps to."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConflictError(RebasectlError):
    """A patch does not apply; the state needed to go on has been saved."""

    exit_code = ExitCode.CONFLICT


class GitError(RebasectlError):
    """git failed in a way the user can act on (missing repo, unknown revision, ...)."""

    exit_code = ExitCode.BAD_INPUT


class Interrupted(BaseException):
    """Ctrl-C (SIGINT). Not a KeyboardInterrupt, so that click does not swallow it into its own
    Abort (which prints a blank line); the CLI turns it into one line and exit 130."""
