"""``report``: explain a rebase. The two sides come from revisions of this repository, series
folders or commit ranges (``report.inputs.choose``); the report is written to a file or returned
for the front to print."""

from __future__ import annotations

from pathlib import Path

from ..infra.errors import ExitCode, RebasectlError
from ..infra.faults import boundary
from ..infra.fsutil import atomic_write
from ..model.workspace import Workspace
from .common import locked, source


def report(ws: Workspace, *, old_rev: str | None, new_rev: str | None, old_series: str | None,
           new_series: str | None, old_range: str | None, new_range: str | None,
           repo: Path | None, upstream: str | None, fmt: str, verbose: bool,
           output: Path | None) -> tuple[str | None, ExitCode]:
    """The report as text, or None when it was written to ``output`` (atomically: a reader
    never sees half a report), and the exit code: 1 when it asks a person to review an entry
    (DESIGN: differences that need a human), whatever the format, 0 when nothing needs one.
    Under the lock when a side is a series of this checkout (an export may be half done; others
    must keep out), without it for commit ranges of another
    repository. Series folders and ``--repo`` are taken from ``-C``, as git does."""
    from ..report.inputs import choose, report_text

    def here(path: str | None) -> str | None:
        return str(ws.path(path)) if path else None

    if output is not None:
        refuse_series_output(ws, ws.path(output))
    old = choose("old", old_rev, here(old_series), old_range)
    new = choose("new", new_rev, here(new_series), new_range)
    where = ws.path(repo) if repo else None
    boundary("report")
    if not ws.series_file.exists():
        text, review = report_text(ws, old, new, where, source(ws, upstream), fmt, verbose)
    else:
        with locked(ws, "report"):
            text, review = report_text(ws, old, new, where, source(ws, upstream), fmt, verbose)
    code = ExitCode.CONFLICT if review else ExitCode.OK
    if output is None:
        return text, code
    atomic_write(ws.path(output), text.encode("utf-8"))
    return None, code


def refuse_series_output(ws: Workspace, target: Path) -> None:
    """``-o`` never lands on the series itself (series.yaml, patches/) or rebasectl's state:
    ``-o series.yaml`` replaced an unexported series.yaml with the report."""
    place = target.resolve()
    ours = [ws.series_file.resolve(), ws.patch_dir.resolve(), ws.state_dir.resolve()]
    if any(place == p or p in place.parents for p in ours):
        raise RebasectlError(f"-o {target}: that is the series or rebasectl's state "
                             "(series.yaml, patches/, .rebasectl/); write the report elsewhere")
