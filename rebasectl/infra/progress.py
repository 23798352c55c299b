"""News of a long command, as it travels up to the front: plain strings through the ``notify``
callback each command passes down, and, for steps that can be counted (patch 3 of 9, test 120 of
340), a ``Counted``: still the same string, so every callback that takes text takes it, but one that
knows (the front's progress bar) reads how far along the work is."""

from __future__ import annotations

from collections.abc import Callable

Notify = Callable[[str], None]


class Counted(str):
    """A progress line that also says ``done`` of ``total`` (a str, so plain callbacks work)."""

    done: int
    total: int

    def __new__(cls, text: str, done: int, total: int) -> Counted:
        step = super().__new__(cls, text)
        step.done, step.total = done, total
        return step
