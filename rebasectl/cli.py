"""The click commands: parse arguments, call one function, render its result.

No logic lives here. Every failure below arrives as ``RebasectlError`` and leaves as one line on
stderr with the exit code of docs/design.md (2 for bad input, 1 for conflicts, 3 for failed tests,
130 for Ctrl-C); click's usage errors are folded into the same one-line form.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import click

from . import actions, checks, ui
from .errors import ConflictError, ExitCode, Interrupted, RebasectlError
from .workspace import Workspace

pass_ws = click.make_pass_decorator(Workspace)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-C", "directory", type=click.Path(file_okay=False, path_type=Path), default=".",
              help="Run as if started in DIR (the repository holding series.yaml).")
@click.version_option(package_name="rebasectl")
@click.pass_context
def cli(ctx: click.Context, directory: Path) -> None:
    """Carry a patch series on a moving upstream: apply, report, bump, test."""
    ctx.obj = Workspace.at(directory)


# -- inspection --------------------------------------------------------------------------------
@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_ws
def status(ws: Workspace, as_json: bool) -> None:
    """Upstream, base, patches (files, +/-) and any apply in progress."""
    data = checks.status(ws)
    if as_json:
        ui.emit_json(data)
        return
    up = data["upstream"]
    ui.line(f"upstream {up['name']} {up['url']} ({up['branch']}) base {up['base'][:12]}")
    ui.table(None, ["#", "id", "kind", "files", "+", "-", "title"],
             [[p["index"], p["id"], p["kind"], p["files"], p["added"], p["removed"], p["title"]]
              for p in data["patches"]])
    progress = data["apply_in_progress"]
    if progress:
        ui.line(f"apply in progress: {progress['applied']}/{progress['total']} applied, "
                f"stopped at {progress['stopped_at']} in {progress['worktree']}")


@cli.command()
@click.option("--apply", "apply_", is_flag=True,
              help="Also prove the series applies exactly on the pinned base (no work tree).")
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@click.option("--json", "as_json", is_flag=True)
@pass_ws
def check(ws: Workspace, apply_: bool, upstream: str | None, as_json: bool) -> None:
    """Validate series.yaml and the patch files; with --apply, that they apply."""
    with ui.progress("checking"):
        data = checks.check(ws, apply_, upstream)
    if as_json:
        ui.emit_json(data)
    else:
        for problem in data["problems"]:
            ui.line(f"problem: {problem}")
        verdict = "ok" if data["valid"] else "needs attention"
        extra = f", applies on the base (tip {data['tip'][:12]})" if data.get("applies") else ""
        ui.line(f"{data['patches']} patches: {verdict}{extra}")
    if not data["valid"]:
        raise RebasectlError("check found problems", ExitCode.CONFLICT)


@cli.command()
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@pass_ws
def fetch(ws: Workspace, upstream: str | None) -> None:
    """Create or update the cached bare mirror of the upstream."""
    with ui.progress("fetching upstream"):
        path = actions.fetch(ws, upstream)
    ui.line(f"mirror up to date: {path}")


# -- apply session -----------------------------------------------------------------------------
def _render_apply(outcome: Any, as_json: bool) -> None:
    if as_json:
        ui.emit_json({"schema": "rebasectl.apply/1", "result": "clean", "base": outcome.base,
                      "tip": outcome.tip, "worktree": str(outcome.worktree),
                      "patches": outcome.steps})
        return
    ui.line(f"applied on {outcome.base[:12]}: work tree {outcome.worktree} at {outcome.tip[:12]}")


@cli.command()
@click.option("--base", help="Upstream revision to apply on (default: the pinned base).")
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@click.option(
    "--worktree", type=click.Path(path_type=Path), help="Work tree (default .rebasectl/tree)."
)
@click.option("--install", is_flag=True,
              help="Then make the work tree this Python environment's megatron (a .pth file).")
@click.option("--json", "as_json", is_flag=True)
@pass_ws
def apply(ws: Workspace, base: str | None, upstream: str | None, worktree: Path | None,
          install: bool, as_json: bool) -> None:
    """Materialise base + one commit per patch in a work tree."""
    with ui.progress("applying"):
        outcome = actions.apply(ws, base, upstream, worktree)
    _render_apply(outcome, as_json)
    if install:
        from .pyenv import install_tree

        pth = install_tree(outcome.worktree)
        if not as_json:
            ui.line(f"installed: import megatron gives {outcome.worktree} ({pth})")


@cli.command("continue")
@click.option("--json", "as_json", is_flag=True)
@pass_ws
def continue_(ws: Workspace, as_json: bool) -> None:
    """Resume after resolving a conflict."""
    _render_apply(actions.cont(ws), as_json)


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@pass_ws
def skip(ws: Workspace, as_json: bool) -> None:
    """Drop the patch stopped at and go on."""
    _render_apply(actions.skip(ws), as_json)


@cli.command()
@pass_ws
def abort(ws: Workspace) -> None:
    """Give up the apply in progress, leaving everything as before."""
    path = actions.abort(ws)
    ui.line(f"aborted; removed {path}")


# -- series exchange ---------------------------------------------------------------------------
@cli.command()
@click.option("--worktree", type=click.Path(path_type=Path), help="Work tree to export from.")
@pass_ws
def export(ws: Workspace, worktree: Path | None) -> None:
    """Write patches/ and series.yaml from the work tree's commits."""
    series, changed = actions.export(ws, worktree)
    ui.line(f"exported {len(series.patches)} patches; {len(changed)} files changed")
    for path in changed:
        ui.line(f"  {path}")


@cli.command("import")
@click.argument("rev_range", metavar="RANGE")
@click.option("--repo", type=click.Path(path_type=Path), default=".",
              help="Repository holding the range (default: current directory).")
@click.option("--branch", help="Upstream branch name to record (new series only).")
@pass_ws
def import_(ws: Workspace, rev_range: str, repo: Path, branch: str | None) -> None:
    """Build patches/ and series.yaml from a commit range BASE..TIP."""
    series, changed = actions.do_import(ws, rev_range, repo, branch)
    ui.line(f"imported {len(series.patches)} patches on {series.upstream.base[:12]}; "
            f"{len(changed)} files changed")


@cli.command("test")
@click.option("--cpu", "device", flag_value="cpu", help="Only tests that run on a CPU.")
@click.option("--gpu", "device", flag_value="gpu", help="Only tests that need a GPU.")
@click.option("--patch", "patch_id", help="Only the tests of this patch id.")
@click.option("--against", type=click.Choice(["patched", "base"]), default="patched",
              show_default=True, help="Run on the patched tree or on the unpatched base.")
@click.option("--tree", type=click.Path(file_okay=False, path_type=Path),
              help="Run on this Megatron tree as it is (no apply).")
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@click.option("-j", "--jobs", type=click.IntRange(1, 256), default=1,
              help="Run tests in N processes (pytest-xdist).")
@click.option("--multi-gpu", "multi_gpu", type=click.IntRange(2, 256), default=None,
              metavar="N",
              help="Also run the multi_gpu tests under torchrun, one rank per GPU (NCCL; "
                   "REBASECTL_MULTI_GPU_BACKEND=gloo: on CPUs). Alone: only those.")
@click.option("--json", "as_json", is_flag=True)
@pass_ws
def test_(ws: Workspace, device: str | None, patch_id: str | None, against: str,
          tree: Path | None, upstream: str | None, jobs: int, multi_gpu: int | None,
          as_json: bool) -> None:
    """Run tests/regression against the patched tree (or the base), per patch."""
    from . import testing

    path = actions.test_tree(ws, against, upstream, tree)
    with ui.progress(f"running regression tests on {path}"):
        run = testing.run_tests(ws, path, against=against, device=device, patch_id=patch_id,
                                jobs=jobs, multi_gpu=multi_gpu or 0)
    if as_json:
        ui.emit_json(run.to_json())
    else:
        ui.table(f"regression tests against {against} ({path})",
                 ["patch", "passed", "failed", "skipped"],
                 [[p.id, p.passed, p.failed, p.skipped] for p in run.patches])
        for p in run.patches:
            for failure in p.failures:
                first = failure.message.splitlines()[0] if failure.message else ""
                kind = failure.kind.value if failure.kind else ""
                ui.line(f"FAILED {p.id}: {failure.node} [{kind}] {failure.location}: {first}")
        if run.result == "failed" and against == "patched":
            ui.line(run.log_tail)
    if run.result == "failed":
        what = ("not covered (no test fails on an assertion on the base): "
                f"{', '.join(run.uncovered)}") if against == "base" else "regression tests failed"
        raise RebasectlError(what, ExitCode.TESTS_FAILED)


@cli.command()
@click.option("--old-rev", help="Old side: the series at this revision of this repository.")
@click.option("--new-rev", help="New side: the series at this revision of this repository.")
@click.option("--old-series", type=click.Path(file_okay=False), help="Old side: a series dir.")
@click.option("--new-series", type=click.Path(file_okay=False), help="New side: a series dir.")
@click.option("--old-range", help="Old side: commits BASE..TIP in --repo.")
@click.option("--new-range", help="New side: commits BASE..TIP in --repo.")
@click.option("--repo", type=click.Path(file_okay=False, path_type=Path),
              help="Repository holding --old-range/--new-range (default: this one).")
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@click.option("--format", "fmt", type=click.Choice(["markdown", "json", "html"]),
              default="markdown", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to FILE instead of stdout.")
@pass_ws
def report(ws: Workspace, old_rev: str | None, new_rev: str | None, old_series: str | None,
           new_series: str | None, old_range: str | None, new_range: str | None,
           repo: Path | None, upstream: str | None, fmt: str, as_json: bool,
           output: Path | None) -> None:
    """The rebase report: every patch of the old series mapped to the new one, with evidence."""
    from .fsutil import atomic_write
    from .report.inputs import choose, report_text

    old = choose("old", old_rev, old_series, old_range)
    new = choose("new", new_rev, new_series, new_range)
    with ui.progress("building the report"):
        text = report_text(ws, old, new, repo, upstream, "json" if as_json else fmt)
    if output is not None:
        atomic_write(output, text.encode("utf-8"))
    else:
        sys.stdout.write(text)


# -- bump / blame ------------------------------------------------------------------------------
@cli.command()
@click.option("--to", "to_rev", required=True, help="Upstream revision to carry the series to.")
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@click.option("--artifacts", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for bump.json, report.md/json or the conflict artifacts "
                   "(default .rebasectl/bump).")
@click.option("--test", "run_tests", is_flag=True, help="When clean, run the regression suite.")
@click.option("--json", "as_json", is_flag=True, help="rebasectl.bump/1 on stdout.")
@pass_ws
def bump(ws: Workspace, to_rev: str, upstream: str | None, artifacts: Path | None,
         run_tests: bool, as_json: bool) -> None:
    """Carry the series onto a new upstream revision; name what broke each failing patch."""
    from . import bump as bumping

    with ui.progress(f"bumping to {to_rev}"):
        result = bumping.bump(ws, to_rev, upstream, artifacts, run_tests=run_tests)
    if as_json:
        ui.emit_json(result.to_json())
    else:
        ui.line(f"bump {result.old[:12]} -> {result.new[:12]} "
                f"({result.upstream_commits} upstream commits): "
                f"{'clean' if result.clean else 'conflicts'}")
        ui.table(None, ["#", "id", "status", "first break", "culprits"],
                 [[p.index, p.id, p.status,
                   p.attribution.first_break.commit[:12]
                   if p.attribution and p.attribution.first_break else "",
                   " ".join(c.commit[:12] for c in p.attribution.culprits)
                   if p.attribution else ""] for p in result.patches])
        ui.line(f"artifacts: {result.artifacts}")
    for p in result.patches:  # one line per conflict: ci/ annotates them (problem matcher)
        for m in p.markers:
            where = f"{m.path}:{m.line}" if m.line else m.path
            culprits = " ".join(c.commit[:12] for c in p.attribution.culprits) \
                if p.attribution else ""
            ui.note(f"conflict: {m.patch_file}:{m.patch_line}: patch {p.index} {p.id} does not "
                    f"apply at {where} ({m.hunk}); culprits: {culprits or 'unknown'}")
    if not result.clean:
        bad = [p.id for p in result.patches if p.status == "conflict"]
        raise ConflictError(f"{len(bad)} patch(es) do not apply on {result.new[:12]}: "
                            f"{', '.join(bad)}; reproduce with `{result.reproduce}`")
    if not as_json:
        ui.line(f"series carried to {result.new[:12]}; exported "
                f"({len(result.changed)} files changed); work tree {result.worktree}")
    if result.test is not None and result.test.result == "failed":
        raise RebasectlError("regression tests failed on the bumped tree", ExitCode.TESTS_FAILED)


@cli.command()
@click.argument("patch_ref", metavar="PATCH")
@click.option("--from", "from_rev", help="Old upstream revision (default: the pinned base).")
@click.option("--to", "to_rev", help="New upstream revision (default: the upstream branch).")
@click.option("--upstream", help="Upstream URL or path (else $REBASECTL_UPSTREAM, series.yaml).")
@click.option("--json", "as_json", is_flag=True)
@pass_ws
def blame(ws: Workspace, patch_ref: str, from_rev: str | None, to_rev: str | None,
          upstream: str | None, as_json: bool) -> None:
    """The upstream commits that broke or touched one patch between two bases."""
    from . import bump as bumping

    with ui.progress(f"blaming {patch_ref}"):
        data = bumping.blame(ws, patch_ref, from_rev, to_rev, upstream)
    if as_json:
        ui.emit_json(data)
        return
    ui.line(f"{data['id']}: {data['status']} on {data['to'][:12]} "
            f"({data['upstream_commits']} upstream commits since {data['from'][:12]})")
    for key in ("first_break", "permanent_break"):
        if data[key]:
            ui.line(f"{key.replace('_', ' ')}: {data[key]['commit'][:12]} {data[key]['subject']}")
    for c in data["culprits"]:
        ui.line(f"culprit {c['commit'][:12]} {c['path']}: {c['subject']}")
    if data["blocked_by"]:
        ui.line(f"needs lines of earlier patch(es): {', '.join(data['blocked_by'])}")
    ui.line(f"{len(data['touching'])} first-parent commits touch its files")


def main() -> None:
    """Entry point: run the CLI, mapping every failure to one line and an exit code."""
    debug = bool(os.environ.get("REBASECTL_DEBUG"))
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, _interrupted)
    try:
        cli.main(standalone_mode=False, prog_name="rebasectl")
    except Interrupted:
        ui.error(INTERRUPTED_MSG)
        sys.exit(int(ExitCode.INTERRUPTED))
    except ConflictError as exc:
        ui.error(exc.message)
        sys.exit(int(exc.exit_code))
    except RebasectlError as exc:
        ui.error(exc.message)
        sys.exit(int(exc.exit_code))
    except click.exceptions.Abort:
        ui.error("interrupted")
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.ClickException as exc:
        ui.error(exc.format_message().replace("\n", " "))
        sys.exit(int(ExitCode.BAD_INPUT))
    except KeyboardInterrupt:
        ui.error(INTERRUPTED_MSG)
        sys.exit(int(ExitCode.INTERRUPTED))
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: one line, the traceback only on request
        if debug:
            raise
        ui.error(f"internal error: {type(exc).__name__}: {exc} (set REBASECTL_DEBUG=1 for details)")
        sys.exit(70)
    finally:
        signal.signal(signal.SIGINT, previous)


INTERRUPTED_MSG = "interrupted; state is saved: rerun the command or `rebasectl continue`/`abort`"


def _interrupted(signum: int, frame: object) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not break the cleanup
    raise Interrupted()
