"""A synthetic old/new pair of commit ranges of any size, for the report's pairing at scale.

``build(path, n)`` writes one repository with ``git fast-import`` (seconds for thousands of
commits): a base of ``files`` Python modules, an old series of ``n`` commits on it (each changes
1-4 lines in 1-3 modules, modules picked with a skewed distribution so some are touched by
hundreds of commits, as real hot files are), a new base (upstream adds modules and rewrites a
line of a few), and the new series: the old one carried there with what a rebase does to a long
series: most commits unchanged, some dropped, some reworded and changed, some folded into their
neighbour, some new. Everything comes from a seeded ``random.Random``: the same arguments give the
same shas. Used by tests/unit/test_report_pairing_scale.py and bench/pairing.py.
"""

from __future__ import annotations

import random
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Ranges:
    repo: Path
    old_base: str
    new_base: str
    old: list[str]  # commits, oldest first
    new: list[str]


class _Writer:
    """fast-import commands for one branch; files as lists of lines."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.mark = 0
        self.clock = 1767225600

    def commit(self, ref: str, parent: int | None, message: str, author: str,
               files: dict[str, list[str]]) -> int:
        self.mark += 1
        self.clock += 60
        msg = message.encode()
        who = f"{author} <{author.lower().replace(' ', '.')}@example.invalid> {self.clock} +0000"
        self.out += [f"commit {ref}\nmark :{self.mark}\n".encode(),
                     f"author {who}\ncommitter {who}\n".encode(),
                     f"data {len(msg)}\n".encode() + msg + b"\n"]
        if parent is not None:
            self.out.append(f"from :{parent}\n".encode())
        for path, lines in sorted(files.items()):
            data = "".join(lines).encode()
            self.out.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
        self.out.append(b"\n")
        return self.mark


def _module(k: int, length: int) -> list[str]:
    return [f"value_{k}_{line} = compute_thing({k}, {line})\n" for line in range(length)]


def _edits(rng: random.Random, n: int, files: int, length: int
           ) -> list[tuple[str, dict[tuple[int, int], str]]]:
    """n commits as (subject, {(module, line): new text}); modules skewed towards low k."""
    weights = [1.0 / (k + 1) for k in range(files)]
    out = []
    for i in range(n):
        change: dict[tuple[int, int], str] = {}
        for k in set(rng.choices(range(files), weights, k=rng.randint(1, 3))):
            for line in rng.sample(range(length), rng.randint(1, 4)):
                change[(k, line)] = f"value_{k}_{line} = patched_{i}_{k}(x, y={line})\n"
        out.append((f"feat(area-{i % 40}): change number {i}", change))
    return out


def _carry(rng: random.Random, edits: list[tuple[str, dict[tuple[int, int], str]]]
           ) -> list[tuple[str, dict[tuple[int, int], str], int]]:
    """The new series: (subject, change, author index) per commit; the author index of the old
    commit it came from (a rebase keeps author and date), or a fresh one for a new commit."""
    out: list[tuple[str, dict[tuple[int, int], str], int]] = []
    i = 0
    while i < len(edits):
        subject, change = edits[i]
        roll = rng.random()
        if roll < 0.03:  # dropped
            pass
        elif roll < 0.07:  # changed while carried
            key = next(iter(change))
            out.append((subject, {**change, key: change[key].replace("y=", "y=1 + ")}, i))
        elif roll < 0.08 and i + 1 < len(edits):  # folded with the next one
            out.append((subject, {**change, **edits[i + 1][1]}, i))
            i += 1
        else:
            out.append((subject, change, i))
        if rng.random() < 0.03:  # a new commit
            k = rng.randrange(50)
            out.append((f"fix: new work {i}", {(k, 3): f"value_{k}_3 = fresh_{i}(z)\n"},
                        len(edits) + i))
        i += 1
    return out


def build(path: Path, n: int, *, files: int = 400, length: int = 60, seed: int = 7) -> Ranges:
    """The repository at ``path`` and its two ranges (see the module doc)."""
    rng = random.Random(seed)
    w = _Writer()
    state = {k: _module(k, length) for k in range(files)}
    base = w.commit("refs/heads/old", None, "base", "Up Stream",
                    {f"pkg/mod_{k}.py": v for k, v in state.items()})
    upstream = {f"upstream/new_{k}.py": _module(10_000 + k, 5) for k in range(20)}
    moved = {}
    for k in range(files - 10, files):  # far from the skewed hot modules
        state_k = list(state[k])
        state_k[0] = f"value_{k}_0 = compute_thing_v2({k}, 0)\n"
        moved[f"pkg/mod_{k}.py"] = state_k
    new_base = w.commit("refs/heads/new", base, "upstream moves", "Up Stream",
                        {**upstream, **moved})
    edits = _edits(rng, n, files, length)
    clock0 = w.clock
    old_marks = _series(w, "refs/heads/old", base, dict(state), [(s, c, i) for i, (s, c) in
                                                                   enumerate(edits)], clock0)
    new_state = dict(state)
    new_state.update({int(p.split("_")[1].split(".")[0]): v for p, v in moved.items()})
    new_marks = _series(w, "refs/heads/new", new_base, new_state, _carry(rng, edits), clock0)
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    marks = path / "marks"
    subprocess.run(["git", "-C", str(path), "fast-import", "--quiet",
                    f"--export-marks={marks}"], input=b"".join(w.out), check=True)
    sha = dict(line.split() for line in marks.read_text().splitlines())
    return Ranges(path, sha[f":{base}"], sha[f":{new_base}"],
                  [sha[f":{m}"] for m in old_marks], [sha[f":{m}"] for m in new_marks])


def _series(w: _Writer, ref: str, parent: int, state: dict[int, list[str]],
            commits: list[tuple[str, dict[tuple[int, int], str], int]], clock0: int) -> list[int]:
    """Commits applying each change to ``state``; author date from the author index, so a
    carried commit keeps its old author date (the lineage a rebase leaves)."""
    marks = []
    for subject, change, who in commits:
        touched: dict[str, list[str]] = {}
        for (k, line), text in change.items():
            lines = touched.setdefault(f"pkg/mod_{k}.py", list(state[k]))
            lines[line] = text
            state[k] = lines
        w.clock = clock0 + who * 60 - 60
        parent = w.commit(ref, parent, subject, f"Dev {who % 50}", touched)
        marks.append(parent)
    return marks
