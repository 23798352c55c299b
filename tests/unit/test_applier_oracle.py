"""The Python applier against its oracle, ``git apply --check`` itself, on generated cases.

The materialiser and the attribution scan decide "does this patch apply here" in Python
(rebasectl/engine/applier.py) because asking git at every state of a bump costs thousands of
processes.
A wrong answer is silent (a patch called clean that ``git am`` refuses, or a conflict that is
none), so the answer is compared with git's on random files: a base, the patch's side and an
upstream side, each an edit of the base, with and without a final newline, with repeated lines
(where git's search order and its LINE_PATCHED rule decide), and hunks that end up adjacent.

One ``git diff --no-index`` makes every patch and one ``git apply --check`` judges every case
(git checks all files and names each that fails), so hundreds of cases cost two processes.
REBASECTL_ORACLE_CASES / REBASECTL_ORACLE_SEED widen an exploratory run.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

from rebasectl.engine.applier import NotExact, Unsupported, apply_file
from rebasectl.model.diffs import parse as parse_diff

CASES = int(os.environ.get("REBASECTL_ORACLE_CASES", "600"))
SEED = int(os.environ.get("REBASECTL_ORACLE_SEED", "20261130"))
WORDS = ["a", "b", "c", "def f():", "    return x", "", "x = 1", "y = 2"]


def _edit(rng: random.Random, lines: list[str], most: int = 4) -> list[str]:
    """A few random replacements, insertions and deletions."""
    out = list(lines)
    for _ in range(rng.randint(1, most)):
        op = rng.choice(["replace", "insert", "delete", "delete-run"])
        at = rng.randrange(len(out) + 1)
        if op == "insert" or not out:
            out.insert(at, rng.choice(WORDS) + f" {rng.randint(0, 3)}")
        elif op == "replace":
            out[min(at, len(out) - 1)] = rng.choice(WORDS) + " new"
        else:
            del out[min(at, len(out) - 1) : min(at, len(out) - 1) + (1 if op == "delete" else 6)]
    return out


def _text(rng: random.Random, lines: list[str]) -> str:
    body = "\n".join(lines)
    return body + ("\n" if lines and rng.random() < 0.7 else "")


def _cases(rng: random.Random, n: int) -> list[tuple[str, str, str]]:
    out = []
    for _ in range(n):
        base = [rng.choice(WORDS) for _ in range(rng.randint(1, 30))]
        upstream = _edit(rng, base, 2) if rng.random() < 0.8 else base
        out.append((_text(rng, base), _text(rng, _edit(rng, base)), _text(rng, upstream)))
    return out


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def _git_failures(work: Path, diff: bytes) -> set[str]:
    """The case files ``git apply --check`` refuses."""
    proc = subprocess.run(
        ["git", "apply", "--check", "-"], cwd=work, input=diff, capture_output=True, check=False
    )
    names = re.findall(r"error: (?:patch failed: )?(c\d+)", proc.stderr.decode())
    return set(names)


def _git_results(work: Path, diff: bytes) -> None:
    """``git apply --reject``: every file whose hunks all apply is written (the rest get .rej)."""
    subprocess.run(
        ["git", "apply", "--reject", "-"], cwd=work, input=diff, capture_output=True, check=False
    )


def _python(work: Path, diff: bytes) -> tuple[set[str], dict[str, bytes | None]]:
    failed, results = set(), {}
    for f in parse_diff(diff).files:
        data = (work / f.path).read_bytes()
        try:
            results[f.path] = apply_file(data, f)
        except NotExact:
            failed.add(f.path)
        except Unsupported:
            pass
    return failed, results


def test_python_applier_agrees_with_git_apply(tmp_path: Path) -> None:
    cases = _cases(random.Random(SEED), CASES)
    names = [f"c{i}" for i in range(len(cases))]
    _write(tmp_path / "a", {n: c[0] for n, c in zip(names, cases)})
    _write(tmp_path / "b", {n: c[1] for n, c in zip(names, cases)})
    _write(tmp_path / "work", {n: c[2] for n, c in zip(names, cases)})
    proc = subprocess.run(
        ["git", "diff", "--no-index", "--no-color", "--no-renames", "a", "b"],
        cwd=tmp_path,
        capture_output=True,
        check=False,
    )
    diff = re.sub(rb"(?m)^(---|\+\+\+) (a|b)/(a|b)/", rb"\1 \2/", proc.stdout)
    diff = re.sub(rb"(?m)^diff --git a/a/(\S+) b/b/(\S+)$", rb"diff --git a/\1 b/\2", diff)
    assert diff.count(b"diff --git") > CASES // 2  # the generator made real patches
    git = _git_failures(tmp_path / "work", diff)
    python, results = _python(tmp_path / "work", diff)
    assert CASES // 5 < len(git) < CASES * 4 // 5  # both answers are common: the test can fail
    wrong = sorted(git ^ python, key=lambda n: int(n[1:]))
    assert not wrong, (
        f"{len(wrong)} of {CASES} cases disagree with git apply (first: "
        f"{wrong[:5]}; git refuses {len(git)}, python {len(python)})"
    )
    _git_results(tmp_path / "work", diff)
    differ = [
        name for name, data in results.items() if (tmp_path / "work" / name).read_bytes() != data
    ]
    assert not differ, f"{len(differ)} results differ from git apply's bytes: {differ[:5]}"
