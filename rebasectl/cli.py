"""The click commands: parse arguments, call one function, render its result.

Results decide their own exit code (``exit_code``); their JSON is the serialisers' (engine/,
commands/ and report/serialize.py), and this module only chooses how they look. Every failure
below arrives as ``RebasectlError`` and leaves as one line on stderr with its exit code (2 bad
input, 1 conflicts, 3 failed tests, 130 Ctrl-C); with ``--json`` the same error is also one JSON
document on stdout, so a script reads JSON on every exit. Heavy modules are imported inside the
commands: ``--help`` and ``status`` start at once.
"""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from .infra.errors import ExitCode, Interrupted, RebasectlError
from .model.workspace import Workspace

pass_ws = click.make_pass_decorator(Workspace)
UPSTREAM_HELP = "Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml)."


class Done(Exception):
    """A command finished with a non-zero exit code after rendering its result."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def finish(code: int) -> None:
    if code:
        raise Done(code)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", type=click.Path(file_okay=False, path_type=Path), default=".",
              help="Run as if started in DIR (the repository holding series.yaml).")
@click.version_option(package_name="rebasectl")
@click.pass_context
def cli(ctx: click.Context, directory: Path) -> None:
    """Carry a patch series on a moving upstream: apply, report, bump, test."""
    ctx.obj = Workspace.at(directory, discover=ctx.invoked_subcommand != "import")
    if ctx.invoked_subcommand is not None and ctx.obj.journal_dir.exists():
        _finish_interrupted_write(ctx.obj, ctx.invoked_subcommand)


def _finish_interrupted_write(ws: Workspace, command: str) -> None:
    """An export (import) killed while it wrote the series is finished before any command,
    and said, whichever command it is: ``status`` included, and ``--json`` (on stderr)."""
    from . import ui
    from .commands.common import finish_interrupted_write

    finish_interrupted_write(ws, lambda text: ui.note(f"rebasectl: {text}"), command=command)


def json_option(f: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")(f)


# -- inspection ------------------------------------------------------------------------------------
@cli.command()
@json_option
@pass_ws
def status(ws: Workspace, as_json: bool) -> None:
    """Upstream, base, patches (files, +/-) and any apply in progress."""
    from . import render
    from .commands.status import status as read_status

    data = read_status(ws)
    if as_json:
        render.json(data)
    else:
        render.status(data)


@cli.command()
@click.option("--apply", "apply_", is_flag=True,
              help="Also prove the series applies exactly on the pinned base (no work tree).")
@click.option("--upstream", help=UPSTREAM_HELP)
@json_option
@pass_ws
def check(ws: Workspace, apply_: bool, upstream: str | None, as_json: bool) -> None:
    """Validate series.yaml and the patch files; with --apply, that they apply."""
    from . import render
    from .commands.check import check as run_check
    from .commands.common import source

    data = run_check(ws, apply_, source(ws, upstream))
    render.json(data) if as_json else render.check(data)
    finish(0 if data["valid"] else ExitCode.CONFLICT)


@cli.command()
@click.option("--upstream", help=UPSTREAM_HELP)
@pass_ws
def fetch(ws: Workspace, upstream: str | None) -> None:
    """Create or update the cached bare mirror of the upstream."""
    from . import ui
    from .commands.fetch import fetch as run_fetch

    with ui.progress("fetch"):
        path, created, changed = run_fetch(ws, upstream)
    ui.line(f"mirror created: {path}" if created else f"mirror up to date: {path}" if not changed
            else f"mirror updated ({changed} of the upstream's branches and tags moved, new or "
            f"gone): {path}")


# -- apply session ---------------------------------------------------------------------------------
@cli.command()
@click.option("--base", help="Upstream revision to apply on (default: the pinned base).")
@click.option("--upstream", help=UPSTREAM_HELP)
@click.option("--worktree", type=click.Path(path_type=Path), help="Work tree (default "
              ".rebasectl/tree).")
@click.option("--install", is_flag=True,
              help="Then make the work tree this Python environment's megatron (a .pth file).")
@click.option("--propose", is_flag=True,
              help="At a stop, show each region's proposed resolution (nothing written).")
@json_option
@pass_ws
def apply(ws: Workspace, base: str | None, upstream: str | None, worktree: Path | None,
          install: bool, propose: bool, as_json: bool) -> None:
    """Materialise base + one commit per patch in a work tree; stop at a conflict as git does."""
    from . import render, ui
    from .commands import apply as applying

    with ui.progress("apply", quiet=as_json) as news:
        outcome = applying.apply(ws, base, upstream, worktree, news, propose)
    render.apply_outcome(outcome, as_json)
    pth = applying.install(outcome) if install else None
    if pth is not None and not as_json:
        ui.line(f"installed: import megatron gives {outcome.worktree} ({pth})")
    finish(outcome.exit_code)


@cli.command("continue")
@click.option("--allow-empty", is_flag=True,
              help="Commit the patch even though the resolution leaves it empty.")
@json_option
@pass_ws
def continue_(ws: Workspace, allow_empty: bool, as_json: bool) -> None:
    """Commit the resolution of the stopped patch and go on."""
    from . import render, ui
    from .commands import resume

    with ui.progress("continue", quiet=as_json) as news:
        outcome = resume.cont(ws, allow_empty, news)
    render.apply_outcome(outcome, as_json)
    finish(outcome.exit_code)


@cli.command()
@json_option
@pass_ws
def skip(ws: Workspace, as_json: bool) -> None:
    """Leave the stopped patch out of this apply (its series entry stays) and go on."""
    from . import render, ui
    from .commands import resume

    with ui.progress("skip", quiet=as_json) as news:
        outcome = resume.skip(ws, news)
    render.apply_outcome(outcome, as_json)
    finish(outcome.exit_code)


@cli.command()
@pass_ws
def abort(ws: Workspace) -> None:
    """Give up the apply in progress: the work tree and the state go, nothing else changes."""
    from . import ui
    from .commands import resume

    for line in resume.abort_lines(resume.abort(ws, ui.note)):
        ui.line(line)


@cli.command()
@click.argument("patch_ids", nargs=-1, metavar="[ID]...")
@click.option("--all", "everything", is_flag=True, help="Forget every recorded resolution.")
@pass_ws
def forget(ws: Workspace, patch_ids: tuple[str, ...], everything: bool) -> None:
    """Forget the resolutions recorded for these patches (whole and rerere's), so the next
    apply or bump stops at their conflicts again."""
    from . import ui
    from .commands import resume

    records, rerere = resume.forget(ws, patch_ids, everything)
    ui.line(f"forgot {records} recorded resolution(s) and {rerere} rerere record(s)")


# -- series exchange -------------------------------------------------------------------------------
@cli.command()
@click.option("--worktree", type=click.Path(path_type=Path), help="Work tree to export from.")
@click.option("--drop", "drops", multiple=True, metavar="ID",
              help="Drop this patch from the series (repeatable); nothing is dropped otherwise.")
@click.option("--force", is_flag=True,
              help="Write over patch files and series.yaml fields edited by hand since the work "
                   "tree was built (a copy of each is kept under .rebasectl/overwritten/).")
@pass_ws
def export(ws: Workspace, worktree: Path | None, drops: tuple[str, ...], force: bool) -> None:
    """Write patches/ and series.yaml from the work tree's commits."""
    from . import render
    from .commands.export import export as run_export

    series, built, changed = run_export(ws, worktree, list(drops), force=force)
    render.export(series, built, changed)


@cli.command("import")
@click.argument("rev_range", metavar="RANGE")
@click.option("--repo", type=click.Path(path_type=Path), default=".",
              help="Repository holding the range (default: the -C directory).")
@click.option("--branch", help="Upstream branch name to record (new series only).")
@pass_ws
def import_(ws: Workspace, rev_range: str, repo: Path, branch: str | None) -> None:
    """Build patches/ and series.yaml from a commit range BASE..TIP."""
    from . import render
    from .commands.import_ import do_import

    render.imported(do_import(ws, rev_range, repo, branch))


@cli.command("test")
@click.option("--cpu", "device", flag_value="cpu", help="Only tests that run on a CPU.")
@click.option("--gpu", "device", flag_value="gpu", help="Only tests that need a GPU.")
@click.option("--patch", "patch_id", help="Only the tests of this patch id.")
@click.option("--against", type=click.Choice(["patched", "base"]), default="patched",
              show_default=True, help="Run on the patched tree or on the unpatched base.")
@click.option("--tree", type=click.Path(file_okay=False, path_type=Path),
              help="Run on this Megatron tree as it is (no apply).")
@click.option("--upstream", help=UPSTREAM_HELP)
@click.option("-j", "--jobs", type=click.IntRange(1, 256), default=1,
              help="Run tests in N processes (pytest-xdist).")
@click.option("--multi-gpu", "multi_gpu", type=click.IntRange(2, 256), default=None,
              metavar="N", help="Also run the multi_gpu tests under torchrun, one rank per GPU "
              "(NCCL; REBASECTL_MULTI_GPU_BACKEND=gloo: on CPUs). Alone: only those.")
@json_option
@pass_ws
def test_(ws: Workspace, device: str | None, patch_id: str | None, against: str,
          tree: Path | None, upstream: str | None, jobs: int, multi_gpu: int | None,
          as_json: bool) -> None:
    """Run tests/regression against the patched tree (or the base), per patch."""
    from . import render, ui
    from .commands import test as testing
    from .engine import serialize as engine_json

    trees = testing.prepare(ws, against, upstream, tree, jobs)
    with ui.progress(f"test ({trees.tree})", quiet=as_json) as news:
        run = testing.run(ws, trees, against=against, device=device, patch_id=patch_id,
                          jobs=jobs, multi_gpu=multi_gpu, notify=news)
    render.json(engine_json.test_run(run)) if as_json else render.test_run(run, trees.tree)
    if run.exit_code:
        ui.error(run.verdict())
    finish(run.exit_code)


@cli.command()
@click.option("--old-rev", help="Old side: the series at this revision of this repository.")
@click.option("--new-rev", help="New side: the series at this revision of this repository.")
@click.option("--old-series", type=click.Path(file_okay=False), help="Old side: a series dir.")
@click.option("--new-series", type=click.Path(file_okay=False), help="New side: a series dir.")
@click.option("--old-range", help="Old side: commits BASE..TIP in --repo.")
@click.option("--new-range", help="New side: commits BASE..TIP in --repo.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path),
              help="Repository holding --old-range/--new-range (default: this one).")
@click.option("--upstream", help=UPSTREAM_HELP)
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "html"]),
              default="markdown", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--verbose", is_flag=True, help="Markdown: every detail unfolded.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to FILE instead of stdout.")
@pass_ws
def report(ws: Workspace, old_rev: str | None, new_rev: str | None, old_series: str | None,
           new_series: str | None, old_range: str | None, new_range: str | None,
           repo: Path | None, upstream: str | None, fmt: str, as_json: bool, verbose: bool,
           output: Path | None) -> None:
    """The rebase report: every patch of the old series mapped to the new one, with evidence."""
    from .commands.report import report as make_report

    text, code = make_report(ws, old_rev=old_rev, new_rev=new_rev, old_series=old_series,
                             new_series=new_series, old_range=old_range, new_range=new_range,
                             repo=repo, upstream=upstream, fmt="json" if as_json else fmt,
                             verbose=verbose, output=output)
    if text is not None:  # a report read on a terminal: its paths drive no escape sequence
        from . import ui

        sys.stdout.write(ui.visible(text) if ui.is_terminal(sys.stdout) and not as_json
                         and fmt != "json" else text)
    finish(code)


@cli.command()
@click.argument("ids", nargs=-1, metavar="[ID]...")
@click.option("--list", "action", flag_value="list", default=True,
              help="The proposals of the stopped patch's regions, with their states (default).")
@click.option("--accept", "action", flag_value="accept",
              help="Write the proposals ID... (or --all) into the work tree and stage them.")
@click.option("--reject", "action", flag_value="reject", help="Take the proposals ID... back.")
@click.option("--all", "everything", is_flag=True, help="With --accept: every proposal.")
@json_option
@pass_ws
def resolve(ws: Workspace, ids: tuple[str, ...], action: str, everything: bool,
            as_json: bool) -> None:
    """At a stop: proposed resolutions of the conflict regions; accept or reject them."""
    from . import render, ui
    from .commands import resolve as resolving

    with ui.progress("resolve", quiet=as_json) as news:
        b = resolving.run(ws, action, list(ids), everything, news)
    render.resolve(b, as_json)


# -- bump / blame ----------------------------------------------------------------------------------
@cli.command()
@click.option("--to", "to_rev", required=True, help="Upstream revision to carry the series to.")
@click.option("--upstream", help=UPSTREAM_HELP)
@click.option("--artifacts", type=click.Path(file_okay=False, path_type=Path),
              help="New (or rebasectl's own) folder for bump.json, README.md, report.md/json "
                   "and conflicts/ (default .rebasectl/bump).")
@click.option("--test", "run_tests", is_flag=True, help="When clean, run the regression suite.")
@click.option("--propose", "proposals", is_flag=True,
              help="Propose a resolution for each conflict region (shown, nothing written).")
@click.option("-v", "--verbose", is_flag=True, help="List every conflict region on stderr.")
@click.option("--annotations", is_flag=True,
              help="Print one `patches/FILE:LINE: ...` line per conflict region on stderr (for a "
                   "CI problem matcher; the default where GITHUB_ACTIONS is set).")
@json_option
@pass_ws
def bump(ws: Workspace, to_rev: str, upstream: str | None, artifacts: Path | None,
         run_tests: bool, proposals: bool, verbose: bool, annotations: bool,
         as_json: bool) -> None:
    """Carry the series onto a new upstream revision; name what broke each failing patch."""
    from . import render, ui
    from .commands import bump as bumping

    with ui.progress(f"bump to {to_rev}", quiet=as_json) as news:
        result = bumping.run(ws, to_rev, upstream, artifacts, news, run_tests, proposals)
    render.bump(result, as_json, verbose, annotate=annotations)
    finish(result.exit_code)


@cli.command()
@click.argument("patch_ref", metavar="PATCH")
@click.option("--from", "from_rev", help="Old upstream revision (default: the pinned base).")
@click.option("--to", "to_rev", help="New upstream revision (default: the upstream branch).")
@click.option("--upstream", help=UPSTREAM_HELP)
@json_option
@pass_ws
def blame(ws: Workspace, patch_ref: str, from_rev: str | None, to_rev: str | None,
          upstream: str | None, as_json: bool) -> None:
    """The upstream commits that broke or touched one patch between two bases."""
    from . import render, ui
    from .commands.blame import blame as run_blame

    with ui.progress(f"blame {patch_ref}", quiet=as_json) as news:
        data = run_blame(ws, patch_ref, from_rev, to_rev, upstream, news)
    render.json(data) if as_json else render.blame(data)
    finish(ExitCode.CONFLICT if data["status"] in ("conflict", "blocked") else 0)


# -- entry point -----------------------------------------------------------------------------------
INTERRUPTED_MSG = ("interrupted; what was done is saved: `rebasectl status` says where things "
                   "stand and, with an apply in progress, what goes on from there; any other "
                   "command goes on when run again")
READ_ONLY_INTERRUPTED = "interrupted; this command changes nothing of yours: run it again"
READS_ONLY = frozenset({"status", "report", "blame"})  # nothing of the person's to resume


def _interrupted_message(argv: list[str]) -> str:
    """What an interruption says: a command that only reads says so (hostile11 #11: a report
    outside a checkout advised `rebasectl status`, which fails there)."""
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        rest = rest[2:] if rest[0] == "-C" else rest[1:]
    return READ_ONLY_INTERRUPTED if rest and rest[0] in READS_ONLY else INTERRUPTED_MSG


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv or any(a in ("--format=json",) for a in argv) or \
        any(a == "--format" and b == "json" for a, b in zip(argv, argv[1:]))


def _fail(message: str, code: int, as_json: bool) -> None:
    from . import ui

    ui.error(message)
    if as_json:
        ui.emit_json({"schema": "rebasectl.error/1", "error": message.splitlines()[0],
                      "details": message.splitlines()[1:], "exit_code": int(code)})
    sys.exit(int(code))


def main() -> None:
    """Entry point: run the CLI, mapping every failure to one line and an exit code."""
    try:
        _main()
    except Interrupted:  # between the command's end and its exit: still one line and 130
        sys.stderr.write(f"rebasectl: error: {_interrupted_message(sys.argv[1:])}\n")
        sys.exit(int(ExitCode.INTERRUPTED))


def _main() -> None:
    as_json = _wants_json(sys.argv[1:])
    interrupted = _interrupted_message(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):  # a path git printed must never fail a command
        if isinstance(stream, io.TextIOWrapper):  # on an ASCII terminal after its work is done
            stream.reconfigure(errors="backslashreplace")
    try:
        cli.main(standalone_mode=False, prog_name="rebasectl")
    except Done as done:
        sys.exit(done.code)
    except Interrupted:
        _fail(interrupted, ExitCode.INTERRUPTED, as_json)
    except RebasectlError as exc:
        _fail(exc.message, exc.exit_code, as_json)
    except click.exceptions.Abort:
        _fail(interrupted, ExitCode.INTERRUPTED, as_json)
    except click.ClickException as exc:
        _fail(exc.format_message().replace("\n", " "), ExitCode.BAD_INPUT, as_json)
    except KeyboardInterrupt:
        _fail(interrupted, ExitCode.INTERRUPTED, as_json)
    except BrokenPipeError:
        sys.exit(0)
    except UnicodeEncodeError as exc:
        _fail(f"cannot print in this terminal's encoding ({exc.encoding}): set "
              "PYTHONIOENCODING=utf-8 or a UTF-8 locale", ExitCode.BAD_INPUT, as_json)
    except OSError as exc:
        _fail(f"{exc.filename or 'file system'}: {exc.strerror or exc}", ExitCode.BAD_INPUT,
              as_json)
    except Exception as exc:  # a bug: one line, the traceback only on request
        if os.environ.get("REBASECTL_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set REBASECTL_DEBUG=1 for "
              "details)", 70, as_json)


def _interrupted(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not break the cleanup
    raise Interrupted()


def install_interrupt_handler(previous: Any = None) -> None:
    """Ctrl-C raises ``Interrupted`` (not a KeyboardInterrupt click would swallow into Abort):
    state is saved, then one line and exit 130. Left alone when the caller ignores SIGINT (a
    background job)."""
    if previous is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _interrupted)
