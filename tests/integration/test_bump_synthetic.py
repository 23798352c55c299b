"""`bump` across a long synthetic upstream (built with `git fast-import` in a fraction of a
second): 480 first-parent commits of churn, a 40-commit side branch merged in, a revert and a
re-land, an upstream commit that absorbs a patch, and a dependent patch. Every expectation is a
commit built here; the whole bump must stay fast on a 2-core machine."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.harness.cli import run as rebasectl

FILES = [f"src/f{n:02d}.py" for n in range(20)]
LINES = 200


class Stream:
    """A fast-import stream with a deterministic clock; files kept as lists of lines."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.mark = 0
        self.clock = 1767225600
        self.files = {f: [f"{f} line {i}" for i in range(1, LINES + 1)] for f in FILES}

    def commit(self, branch: str, message: str, changes: dict[str, list[str]],
               parent: int | None = None, merge: int | None = None) -> int:
        self.mark += 1
        self.clock += 60
        out = [f"commit refs/heads/{branch}", f"mark :{self.mark}",
               f"author Up Stream <up@example.invalid> {self.clock} +0000",
               f"committer Up Stream <up@example.invalid> {self.clock} +0000",
               f"data {len(message.encode())}", message]
        if parent is not None:
            out.append(f"from :{parent}")
        if merge is not None:
            out.append(f"merge :{merge}")
        body = "\n".join(out).encode() + b"\n"
        for path, content in changes.items():
            data = ("\n".join(content) + "\n").encode()
            body += f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"
        self.parts.append(body)
        return self.mark

    def edit(self, path: str, line: int, text: str) -> dict[str, list[str]]:
        self.files[path] = list(self.files[path])
        self.files[path][line - 1] = text
        return {path: self.files[path]}


def build(root: Path) -> tuple[Path, dict[str, int], dict[int, str]]:
    s = Stream()
    ev: dict[str, int] = {}
    ev["base"] = s.commit("main", "base", dict(s.files))
    base_files = {f: list(c) for f, c in s.files.items()}
    # the series, on `fork` from base
    fork_files = {f: list(c) for f, c in base_files.items()}

    def fork_edit(path: str, line: int, text: str) -> dict[str, list[str]]:
        fork_files[path] = list(fork_files[path])
        fork_files[path][line - 1] = text
        return {path: fork_files[path]}

    tip = s.commit("fork", "[1/5] feat: one", fork_edit(FILES[0], 100, "PATCH ONE"), ev["base"])
    tip = s.commit("fork", "[2/5] feat: two", fork_edit(FILES[1], 100, "PATCH TWO"), tip)
    tip = s.commit("fork", "[3/5] fix: three", fork_edit(FILES[2], 100, "FIXED THREE"), tip)
    tip = s.commit("fork", "[4/5] feat: four", fork_edit(FILES[3], 100, "PATCH FOUR"), tip)
    tip = s.commit("fork", "[5/5] feat: five on one", fork_edit(FILES[0], 101, "PATCH FIVE"), tip)
    ev["fork"] = tip
    # upstream: churn on files 5..19, plus the events
    prev = ev["base"]
    side_start = None
    side_files: dict[str, list[str]] = {}
    for n in range(1, 481):
        if n == 100:
            prev = ev["land"] = s.commit("main", "change one's context",
                                         s.edit(FILES[0], 99, "UPSTREAM 99"), prev)
        elif n == 150:
            prev = ev["revert"] = s.commit("main", "Revert change one's context",
                                           s.edit(FILES[0], 99, f"{FILES[0]} line 99"), prev)
        elif n == 300:
            prev = ev["reland"] = s.commit("main", "Reapply change one's context",
                                           s.edit(FILES[0], 99, "UPSTREAM 99"), prev)
        elif n == 250:
            prev = ev["absorb"] = s.commit("main", "upstream fixes three the same way",
                                           s.edit(FILES[2], 100, "FIXED THREE"), prev)
        elif n in (120, 360):  # touches four's file, far from its hunk: still clean
            prev = s.commit("main", f"edit four's file ({n})", s.edit(FILES[3], 10 + n // 10,
                                                                       f"four {n}"), prev)
        elif n == 200:  # merge a side branch (forked at commit 160) holding two's culprit
            assert side_start is not None
            side = side_start
            saved = s.files
            s.files = side_files
            for k in range(40):
                if k == 17:
                    side = ev["side_culprit"] = s.commit(
                        "side", "side: rewrite two's context", s.edit(FILES[1], 101, "SIDE 101"),
                        side)
                else:
                    side = s.commit("side", f"side churn {k}",
                                    s.edit(FILES[5 + k % 15], 150 + k % 40, f"side {k}"), side)
            side_view = s.files
            s.files = {f: list(c) for f, c in saved.items()}
            for f in FILES:  # no overlap: take the side branch's edits
                for i, (a, b) in enumerate(zip(saved[f], side_view[f])):
                    if b != a and b != base_files[f][i]:
                        s.files[f][i] = b
            prev = ev["merge"] = s.commit("main", "Merge branch 'side'", dict(s.files), prev,
                                          merge=side)
        else:
            path = FILES[5 + (n * 7) % 15]
            prev = s.commit("main", f"churn {n}", s.edit(path, 1 + (n * 13) % 140, f"churn {n}"),
                            prev)
        if n == 160:
            side_start = prev
            side_files = {f: list(c) for f, c in s.files.items()}
    ev["tip"] = prev
    repo = root / "upstream.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    marks = root / "marks"
    subprocess.run(["git", "fast-import", "--quiet", f"--export-marks={marks}"], cwd=repo,
                   input=b"".join(s.parts), check=True)
    shas = {int(m[1:]): sha for m, sha in
            (ln.split() for ln in marks.read_text().splitlines())}
    return repo, ev, shas


def test_long_synthetic_upstream(tmp_path: Path) -> None:
    repo, ev, sha = build(tmp_path)
    count = subprocess.run(["git", "rev-list", "--count", f"{sha[ev['base']]}..main"], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert count == "520"  # 480 first-parent commits (incl. the merge) + 40 on the side branch
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{sha[ev['base']]}..{sha[ev['fork']]}", "--repo", str(repo))
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "fetch", "--upstream", str(repo))
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "bump", "--to", sha[ev["tip"]], "--json")
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert data["upstream_commits"] == 520
    one, two, three, four, five = data["patches"]
    assert [p["status"] for p in data["patches"]] == [
        "conflict", "conflict", "upstreamed", "clean", "blocked"]
    # revert + re-land: the first and the permanent break differ; both landings are culprits
    assert one["first_break"]["commit"] == sha[ev["land"]]
    assert one["permanent_break"]["commit"] == sha[ev["reland"]]
    assert {c["commit"] for c in one["culprits"]} == {sha[ev["land"]], sha[ev["reland"]]}
    # the culprit sits on the merged side branch; the break is the merge
    assert two["first_break"]["commit"] == sha[ev["merge"]]
    assert [c["commit"] for c in two["culprits"]] == [sha[ev["side_culprit"]]]
    # absorbed upstream
    assert three["culprits"][0]["commit"] == sha[ev["absorb"]]
    # absorbing it is no break of it: the commit is upstream_commit and the one culprit
    assert three["upstream_commit"] == sha[ev["absorb"]]
    assert three["first_break"] is None and three["permanent_break"] is None
    assert four["culprits"] == [] and four["first_break"] is None
    # five needs one's line: blocked by one, and broken where one broke
    assert five["blocked_by"] == [one["id"]]
    assert five["first_break"]["commit"] == sha[ev["land"]]
    # its trouble is one's, not upstream's: no upstream commit is blamed for its lines
    assert five["culprits"] == []
    # its time (budget 8 s; 1.5-1.9 s measured at load ~5) is bench/budgets.py synthetic-bump
