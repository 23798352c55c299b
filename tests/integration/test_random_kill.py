"""Randomly timed SIGKILL / SIGINT on the real Megatron tree (issue 15 acceptance, issue 18 kill
tests): apply, apply --base 3346fa8a2, continue (the first stop resolved with its kept
resolution, tests/june.py), skip (the first stop) and bump, each killed with its process group
(as Ctrl-C or a crash would) after a random delay; then only rebasectl commands, the way a user
would go on:

* apply / apply --base: rerun the same command (``continue`` when it says an apply is in
  progress): the result must be the uninterrupted one (same tip; same conflict state);
* continue: ``continue`` again: the first stopped patch committed with its resolution, the
  same tree and the same next stop as without the kill;
* skip: ``status`` says whether the skip was recorded; ``skip`` again or ``continue``: the
  first stopped patch skipped, the same next stop;
* bump: rerun: the same per-patch result;

and after each: no traceback; a Ctrl-C that arrived before the end is exit 130 and one line
(or the command finished: 0, 1); patches/ and series.yaml byte-identical; and ``abort`` (when
an apply is in progress) then ``apply`` give the pinned series' tip. Fixed seed, twenty trials
(four per command; REBASECTL_KILL_TRIALS / REBASECTL_KILL_SEED for exploratory runs), under
three minutes on two cores; skips without REBASECTL_MEGATRON_MIRROR.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import real_mirror
from tests.harness.git import git as harness_git
from tests.june import resolve_from
from tests.sfix import module_hermetic_git

ROOT = Path(__file__).resolve().parents[2]
NEW = "3346fa8a2"
SEED = int(os.environ.get("REBASECTL_KILL_SEED", "20260615"))
COUNT = int(os.environ.get("REBASECTL_KILL_TRIALS", "20"))  # more for an exploratory run
COMMANDS = ["apply", "apply-base", "continue", "skip", "bump"]
# delays: apply/bump run 2-15 s on the real tree; continue and skip about 1 s
LONGEST = {"apply": 3.0, "apply-base": 3.0, "continue": 1.2, "skip": 1.2, "bump": 3.0}


def _trials() -> list[tuple[int, str, str, float, bool]]:
    rng = random.Random(SEED)
    out = []
    for i in range(COUNT):
        cmd = COMMANDS[i % len(COMMANDS)]
        sig = rng.choice(["SIGKILL", "SIGINT"])
        delay = round(rng.uniform(0.05, LONGEST[cmd]), 2)
        had_tree = rng.random() < 0.5  # apply/bump: start with a finished work tree or none
        out.append((i, cmd, sig, delay, had_tree))
    return out


TRIALS = _trials()


def rc(d: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rebasectl", "-C", str(d), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def git(d: Path, *args: str) -> str:
    """What git prints, or nothing where a killed command left no repository."""
    return harness_git(d, *args, check=False).stdout.strip()


def snap(d: Path) -> dict[str, bytes]:
    out = {"series.yaml": (d / "series.yaml").read_bytes()}
    for p in sorted((d / "patches").iterdir()):
        out[p.name] = p.read_bytes()
    return out


def _link_or_copy(src: str, dst: str) -> None:
    if "/upstream.git/objects/" in src:
        os.link(src, dst)  # git never rewrites an object file in place
    else:
        shutil.copy2(src, dst)


def relocate(src: Path, dst: Path) -> None:
    """A copy of a series checkout with its .rebasectl state, absolute paths rewritten, the work
    tree's stat data refreshed (so git sees what an uncopied tree would)."""
    shutil.copytree(src, dst, symlinks=True, copy_function=_link_or_copy)
    st = dst / ".rebasectl"
    for f in [
        st / "tree" / ".git",
        st / "tree.json",
        st / "apply-state.json",
        *st.glob("upstream.git/worktrees/*/gitdir"),
    ]:
        if f.is_file():
            f.write_text(f.read_text().replace(str(src), str(dst)))
    if (st / "tree" / ".git").is_file():
        git(st / "tree", "update-index", "-q", "--refresh")


def conflict_state(d: Path) -> tuple[str, str, str]:
    t = d / ".rebasectl" / "tree"
    return (
        git(t, "rev-parse", "HEAD"),
        git(t, "status", "--porcelain"),
        git(t, "diff", "--cached", "--no-ext-diff"),
    )


def state_json(d: Path) -> dict[str, Any]:
    p = d / ".rebasectl" / "apply-state.json"
    return json.loads(p.read_text()) if p.exists() else {}


def bump_result(stdout: str) -> list[tuple[str, str, list[str]]]:
    return [
        (p["id"], p["status"], [c["path"] for c in p["conflicts"]])
        for p in json.loads(stdout)["patches"]
    ]


def _ok(r: subprocess.CompletedProcess[str], want: int = 0) -> None:
    assert r.returncode == want, (r.args[4:], r.returncode, r.stderr[-2000:])


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The uninterrupted results, and prepared states to copy."""
    mirror = real_mirror()
    with module_hermetic_git(tmp_path_factory):
        root = tmp_path_factory.mktemp("kill-ref")
        tpl = root / "tpl"
        tpl.mkdir()
        shutil.copy(ROOT / "series.yaml", tpl)
        shutil.copytree(ROOT / "patches", tpl / "patches")
        _ok(rc(tpl, "fetch", "--upstream", str(mirror)))
        out: dict[str, Any] = {"tpl": tpl, "series": snap(tpl)}
        done = root / "applied"
        relocate(tpl, done)
        _ok(rc(done, "apply"))
        out["applied"], out["tip"] = done, git(done / ".rebasectl/tree", "rev-parse", "HEAD")
        conflict = root / "conflict"
        relocate(tpl, conflict)
        _ok(rc(conflict, "apply", "--base", NEW), 1)
        out["conflict"], out["conflict_state"] = conflict, conflict_state(conflict)
        stop = out["stop"] = state_json(conflict)["current"]  # the first patch that stops
        resolved = root / "resolved"
        relocate(conflict, resolved)
        resolve_from(resolved / ".rebasectl/tree", stop)  # its kept resolution (tests/june.py)
        out["resolved"] = resolved
        cont = root / "continued"
        relocate(resolved, cont)
        r = rc(cont, "continue")
        assert r.returncode in (0, 1), r.stderr
        done = dict(state_json(cont).get("done") or [])
        assert stop in done, f"continue did not commit {stop}"
        out["stop_tree"] = git(cont / ".rebasectl/tree", "rev-parse", done[stop] + "^{tree}")
        out["continued_state"] = conflict_state(cont)
        skipped = root / "skipped"
        relocate(conflict, skipped)
        _ok(rc(skipped, "skip"), 1)
        out["skipped_state"] = conflict_state(skipped)
        out["skipped_current"] = state_json(skipped)["current"]
        bumped = root / "bumped"
        relocate(tpl, bumped)
        r = rc(bumped, "bump", "--to", NEW, "--json")
        _ok(r, 1)
        out["bump"] = bump_result(r.stdout)
        yield out


def killed(d: Path, args: list[str], sig: str, delay: float) -> tuple[int, str, bool]:
    """Run, send ``sig`` to the process group after ``delay`` (unless it ended first): exit
    code, stderr, and whether the signal was sent."""
    p = subprocess.Popen(
        [sys.executable, "-m", "rebasectl", "-C", str(d), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    sent = False
    try:
        p.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, getattr(signal, sig))
            sent = True
        except ProcessLookupError:
            pass
    _, err = p.communicate(timeout=120)
    return p.returncode, err, sent


def recover(ref: dict[str, Any], cmd: str, d: Path, log: list[str]) -> None:
    """Only rebasectl commands; asserts the uninterrupted result."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        r = rc(d, *args)
        log.append(
            f"rebasectl {' '.join(args)} -> {r.returncode} "
            f"{(r.stderr.strip().splitlines() or [''])[-1][:300]}"
        )
        return r

    assert run("status").returncode == 0
    if cmd in ("apply", "apply-base"):
        args = ["apply"] + (["--base", NEW] if cmd == "apply-base" else [])
        r = run(*args)
        if "apply is in progress" in r.stderr:
            r = run("continue")
        assert r.returncode == (0 if cmd == "apply" else 1)
        if cmd == "apply":
            assert git(d / ".rebasectl/tree", "rev-parse", "HEAD") == ref["tip"]
        else:
            assert conflict_state(d) == ref["conflict_state"]
    elif cmd == "continue":
        r = run("continue")
        assert r.returncode in (0, 1)
        done = dict(state_json(d).get("done") or [])
        assert ref["stop"] in done, f"the {ref['stop']} resolution was lost"
        assert git(d / ".rebasectl/tree", "rev-parse", done[ref["stop"]] + "^{tree}") \
            == ref["stop_tree"]
        assert conflict_state(d) == ref["continued_state"]
    elif cmd == "skip":
        r = run("status", "--json")
        stopped = (json.loads(r.stdout).get("apply_in_progress") or {}).get("stopped_at")
        r = run("skip") if stopped == ref["stop"] else run("continue")
        assert r.returncode == 1
        st = state_json(d)
        assert st["skipped"] == [ref["stop"]] and st["current"] == ref["skipped_current"]
        assert conflict_state(d) == ref["skipped_state"]
    elif cmd == "bump":
        r = run("bump", "--to", NEW, "--json")
        assert r.returncode == 1
        assert bump_result(r.stdout) == ref["bump"]
    assert snap(d) == ref["series"], "patches/ or series.yaml changed"
    if (d / ".rebasectl" / "apply-state.json").exists():
        assert run("abort").returncode == 0
    assert run("apply").returncode == 0
    assert git(d / ".rebasectl/tree", "rev-parse", "HEAD") == ref["tip"]
    assert snap(d) == ref["series"], "patches/ or series.yaml changed"


@pytest.mark.parametrize(
    "i,cmd,sig,delay,had_tree", TRIALS, ids=[f"{i}-{c}-{s}-{d}s" for i, c, s, d, _ in TRIALS]
)
def test_random_kill(
    ref: dict[str, Any], tmp_path: Path, i: int, cmd: str, sig: str, delay: float, had_tree: bool
) -> None:
    d = tmp_path / "series"
    start = {"continue": ref["resolved"], "skip": ref["conflict"]}.get(
        cmd, ref["applied"] if had_tree else ref["tpl"]
    )
    relocate(start, d)
    args = {
        "apply": ["apply"],
        "apply-base": ["apply", "--base", NEW],
        "continue": ["continue"],
        "skip": ["skip"],
        "bump": ["bump", "--to", NEW],
    }[cmd]
    t0 = time.perf_counter()
    code, err, sent = killed(d, args, sig, delay)
    log = [
        f"{' '.join(args)} killed by {sig} after {delay} s: exit {code} "
        f"({time.perf_counter() - t0:.1f} s) {err.strip().splitlines()[-1:]}"
    ]
    print(log[0])  # shown by `pytest -rA`: the kill trial statistics
    assert "Traceback" not in err, err
    if sent and sig == "SIGINT":  # Ctrl-C: finished anyway (0, 1) or interrupted (130)
        assert code in (0, 1, 130), "\n".join(log)
    if code == 130:
        assert err.strip().splitlines()[-1].startswith("rebasectl: error: interrupted"), err
    try:
        recover(ref, cmd, d, log)
    except AssertionError as exc:
        raise AssertionError("\n".join([*log, str(exc)])) from None
