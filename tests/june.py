"""Carry a series onto the June upstream (3346fa8a2) with the resolutions kept in the tests.

One helper, shared by the CI fixture (tests/integration/test_series_on_june.py), the regression
suite's June run and anyone scoring proposals against our own nine patches: ``carry(series_dir,
mirror)`` runs the real console script (``apply --base 3346fa8a2``), and at every stop resolves
the stopped patch's conflicts from ``tests/integration/resolutions/3346fa8a2/<patch-id>/``, then
``continue``, until every patch is committed; ``export`` writes the carried series.

A patch's resolution folder holds ``resolution.diff``: for every path the resolution writes, the
diff from the target's version of the file (nothing, for a new file) to the resolved one, so only
our own lines are kept here, never upstream's files; and, for paths the resolution removes (a
modify/delete taken as upstream's delete), a ``deleted`` file listing them one per line. A
``skip`` file instead (its text says why) leaves the patch out with ``rebasectl skip``:
``Carried.skipped`` names it, so a caller can tell a carried series from one not whole yet.
A stop with no resolution for its patch, a resolution that leaves a path unresolved, or a patch
that stops twice is an error naming the patch and paths: the kept resolutions must match the
series exactly (a changed patch means a changed resolution).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.cli import run as rebasectl

REPO_ROOT = Path(__file__).resolve().parents[1]
JUNE = "3346fa8a2614efe6e4f459bca0bdda4f97a2f0a8"
RESOLUTIONS = REPO_ROOT / "tests" / "integration" / "resolutions" / JUNE[:9]


class CarryError(AssertionError):
    """The kept resolutions do not carry this series (named patch and paths)."""


@dataclass
class Carried:
    """A series carried onto ``target``: its folder, the work tree, and what each patch needed."""

    series: Path
    tree: Path
    target: str
    resolved: dict[str, list[str]] = field(default_factory=dict)  # patch id -> paths resolved
    skipped: dict[str, str] = field(default_factory=dict)  # patch id -> why (its `skip` file)
    log: list[str] = field(default_factory=list)  # stdout of each apply/continue


def copy_series(dest: Path, source: Path = REPO_ROOT) -> Path:
    """series.yaml, patches/ and the regression tests series.yaml names (`check` refuses a
    `tests:` path that is not there) of ``source`` in ``dest`` (made), ready for apply."""
    (dest / "patches").mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "series.yaml", dest / "series.yaml")
    for patch in (source / "patches").glob("*.patch"):
        shutil.copy(patch, dest / "patches" / patch.name)
    if (source / "tests" / "regression").is_dir():
        shutil.copytree(source / "tests" / "regression", dest / "tests" / "regression",
                        ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    return dest


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True,
                          text=True).stdout


def unresolved(tree: Path) -> list[str]:
    """Paths git still has as unmerged in ``tree``."""
    return sorted(set(_git(tree, "diff", "--name-only", "--diff-filter=U").split()))


def stopped_at(stdout: str) -> str | None:
    """The patch id of ``stopped at K/N <id> (...)``, or None when the run finished."""
    for line in stdout.splitlines():
        if " stopped at " in f" {line}":
            return line.split("stopped at ", 1)[1].split()[1]
    return None


def resolve_from(tree: Path, patch_id: str, resolutions: Path = RESOLUTIONS,
                 target: str = JUNE) -> list[str]:
    """Resolve the open conflicts of ``patch_id`` in ``tree`` from its kept resolution (diffs
    from ``target``'s files)."""
    folder = resolutions / patch_id
    if not folder.is_dir():
        raise CarryError(f"{patch_id}: stopped, and no kept resolution in {folder}")
    diff = folder / "resolution.diff"
    text = diff.read_text() if diff.is_file() else ""
    paths = sorted({ln[6:].strip() for ln in text.splitlines() if ln.startswith("+++ b/")})
    deleted_list = folder / "deleted"
    deleted = deleted_list.read_text().split() if deleted_list.is_file() else []
    upstream = set(_git(tree, "ls-tree", "-r", "--name-only", target, "--", *paths).split()) \
        if paths else set()
    for rel in paths:  # the target's version (or none), then our diff on it
        if rel in upstream:
            _git(tree, "checkout", target, "--", rel)
        else:
            _git(tree, "rm", "-q", "-f", "--cached", "--ignore-unmatch", "--", rel)
            (tree / rel).unlink(missing_ok=True)
    if paths:
        subprocess.run(["git", "-C", str(tree), "apply", "--index", "-"], input=text.encode(),
                       check=True, capture_output=True)
    if deleted:
        _git(tree, "rm", "-q", "--ignore-unmatch", "--", *deleted)
    left = unresolved(tree)
    if left:
        raise CarryError(f"{patch_id}: the kept resolution leaves {', '.join(left)} unresolved")
    return paths + deleted


def carry(series: Path, mirror: Path, target: str = JUNE, *,
          resolutions: Path = RESOLUTIONS, export: bool = True) -> Carried:
    """Apply ``series`` onto ``target`` from ``mirror``, resolving every stop from
    ``resolutions``; export at the end (unless ``export=False``)."""
    def run(*args: str, codes: tuple[int, ...] = (0, 1)) -> str:
        r = rebasectl(series, *args, timeout=900)
        if r.returncode not in codes:
            raise CarryError(f"rebasectl {' '.join(args)}: exit {r.returncode}: "
                             f"{r.stderr.strip()[-1500:]}")
        return r.stdout

    run("fetch", "--upstream", str(mirror), codes=(0,))
    done = Carried(series, series / ".rebasectl" / "tree", target)
    out = run("apply", "--base", target)
    done.log.append(out)
    while (pid := stopped_at(out)) is not None:
        if pid in done.resolved or pid in done.skipped:
            raise CarryError(f"{pid}: still stopped after its kept resolution:\n{out[-1500:]}")
        skip = resolutions / pid / "skip"
        if skip.is_file():
            done.skipped[pid] = skip.read_text().strip()
            out = run("skip")
        else:
            done.resolved[pid] = resolve_from(done.tree, pid, resolutions, target)
            out = run("continue")
        done.log.append(out)
    if export:
        run("export", codes=(0,))
    return done
