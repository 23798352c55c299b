"""`rebasectl report` end to end through the real CLI: every input kind (ranges with --repo,
series directories, revisions of the series repo, the default previous-base vs working copy),
the three formats, -o, byte-identical reruns and one-line errors with exit code 2."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo
from tests.sfix import module_hermetic_git


def text(name: str, n: int = 40) -> str:
    return "".join(f"{name}_value_{i} = compute_{name}({i})\n" for i in range(1, n + 1))


@pytest.fixture(scope="module")
def fork_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """The upstream of ``fork``, built once per module (with hermetic git) and copied per
    test: (its path, base1, base2)."""
    with module_hermetic_git(tmp_path_factory):
        yield _build_fork(tmp_path_factory.mktemp("report-cli-fork"))


@pytest.fixture
def fork(fork_template: tuple[Path, str, str], tmp_path: Path) -> dict[str, str | Path]:
    """An upstream with two bases and a fork series on each: 1 identical, 2 modified,
    3+4 squashed, 5 empty marker dropped, and one new patch (a copy of the module's: a test
    may commit to it)."""
    built, base1, base2 = fork_template
    shutil.copytree(built, tmp_path / "up", symlinks=True)
    return {"up": tmp_path / "up", "base1": base1, "base2": base2, "tmp": tmp_path}


def _build_fork(tmp_path: Path) -> tuple[Path, str, str]:
    up = Repo(tmp_path / "up")
    files = {"alpha.py": text("alpha"), "beta.py": text("beta"), "gamma.py": text("gamma")}
    base1 = up.commit("upstream: base", files)
    up.commit("upstream: rename the alpha 20 helper (#17)",
              {"alpha.py": files["alpha.py"].replace("compute_alpha(20)", "compute_alpha_v2(20)")})
    base2 = up.head()
    up.branch("base2")

    def series(start: str, alpha20: str, branch: str, squash: bool) -> None:
        up.checkout("-q", "-B", branch, start)
        a = (up.path / "alpha.py").read_text()
        up.commit("[1/4] fix: beta scaling", {"beta.py": text("beta").replace(
            "beta_value_3 = compute_beta(3)\n", "beta_value_3 = compute_beta(3) * beta_scale\n")})
        up.commit("[2/4] feat: alpha 20 tweak", {"alpha.py": a.replace(
            alpha20, alpha20.rstrip("\n") + " + alpha_bias_term\n")})
        g1 = text("gamma").replace("gamma_value_8 = compute_gamma(8)\n",
                                   "gamma_value_8 = compute_gamma(8)\ngamma_extra_a = ga(8)\n")
        g2 = g1.replace("gamma_value_30 = compute_gamma(30)\n",
                        "gamma_value_30 = compute_gamma(30)\ngamma_extra_b = gb(30)\n")
        if squash:
            up.commit("[3/4] feat: gamma extras", {"gamma.py": g2})
            up.commit("[4/4] fix: new upstream needs this", {"new_file.py": "needed_now = True\n"})
        else:
            up.commit("[3/4] feat: gamma extra a", {"gamma.py": g1})
            up.commit("[4/4] feat: gamma extra b", {"gamma.py": g2})
            up.commit("marker: end of miles patches", allow_empty=True)

    series(base1, "alpha_value_20 = compute_alpha(20)\n", "old", squash=False)
    series(base2, "alpha_value_20 = compute_alpha_v2(20)\n", "new", squash=True)
    return up.path, base1, base2


def _ranges(fork: dict[str, str | Path], *extra: str) -> subprocess.CompletedProcess[str]:
    ws = Path(fork["tmp"]) / "ws"
    ws.mkdir(exist_ok=True)
    return rebasectl(ws, "report", "--repo", str(fork["up"]), "--old-range",
                     f"{fork['base1']}..old", "--new-range", f"{fork['base2']}..new", *extra)


# new-only entries come right after the entry holding the new patch before them
EXPECTED = [([1], [1], "identical"), ([2], [2], "modified"), ([3, 4], [3], "merged"),
            ([], [4], "new"), ([5], [], "empty")]


def _mapping(data: dict[str, object]) -> list[tuple[list[int], list[int], str]]:
    return [(m["old"], m["new"], m["status"]) for m in data["mapping"]]  # type: ignore[index,union-attr]


def test_ranges_json(fork: dict[str, str | Path]) -> None:
    r = _ranges(fork, "--format", "json")
    assert r.returncode == 1, r.stderr  # entries to review: DESIGN's "differences that need a
    data = json.loads(r.stdout)  # human" (exit 1), the JSON written all the same
    assert data["review"] == [2, 4]
    assert data["schema"] == "rebasectl.report/1"
    assert data["old"]["base"] == fork["base1"] and data["new"]["base"] == fork["base2"]
    assert data["upstream"] == {"commits": 1, "files_changed": 1}
    assert _mapping(data) == EXPECTED
    p = data["old"]["patches"][1]
    assert p["index"] == 2 and p["files"] == [{"path": "alpha.py", "added": 1, "removed": 1}]
    modified = data["mapping"][1]
    assert [c["subject"] for c in modified["upstream_commits"]] == \
        ["upstream: rename the alpha 20 helper (#17)"]
    assert modified["upstream_commits"][0]["pr"] == "#17"
    assert data["mapping"][2]["message_changed"] is True
    assert _ranges(fork, "--json").stdout == r.stdout  # --json == --format json, byte-identical


def test_markdown_and_html(fork: dict[str, str | Path]) -> None:
    md = _ranges(fork)
    assert md.returncode == 1, md.stderr  # "Review 2 of 5 entries": as the JSON, exit 1
    assert "Review" in md.stdout
    assert "## Mapping" in md.stdout and "## Summary" in md.stdout
    assert "```diff" not in md.stdout  # interdiffs: --verbose or the HTML
    assert "| 3 | \\[3/4\\] feat: gamma extras | 3+4 → 3 | merged |" in md.stdout  # [ escaped
    assert md.stdout == _ranges(fork).stdout
    full = _ranges(fork, "--verbose").stdout
    assert "**interdiff (1 hunks)**" in full and "```diff" in full
    out = Path(fork["tmp"]) / "report.html"
    h = _ranges(fork, "--format", "html", "-o", str(out))
    assert h.returncode == 1 and h.stdout == "" and out.exists()  # -o: the same exit code
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert "class=\"sbs\"" in page and "class=\"del\"" in page and "class=\"add\"" in page


def test_series_directories_and_revisions(fork: dict[str, str | Path]) -> None:
    tmp = Path(fork["tmp"])
    repo = Repo(tmp / "series")
    r = rebasectl(repo.path, "import", f"{fork['base1']}..old", "--repo", str(fork["up"]))
    assert r.returncode == 0, r.stderr
    repo.commit("series on base1")
    old_dir = tmp / "old-series"
    subprocess.run(["cp", "-r", str(repo.path), str(old_dir)], check=True)
    r = rebasectl(repo.path, "import", f"{fork['base2']}..new", "--repo", str(fork["up"]))
    assert r.returncode == 0, r.stderr
    expected = EXPECTED
    # default: old = the series before the last base change, new = the working copy
    d = rebasectl(repo.path, "report", "--json", "--upstream", str(fork["up"]))
    assert d.returncode == 1, d.stderr  # entries to review
    data = json.loads(d.stdout)
    assert data["old"]["base"] == fork["base1"] and data["new"]["base"] == fork["base2"]
    assert _mapping(data) == expected
    assert data["old"]["patches"][0]["id"] == "beta-scaling"  # ids from series.yaml
    repo.commit("bump to base2")
    after = rebasectl(repo.path, "report", "--json")  # committed: same default pair
    assert after.returncode == 1, after.stderr
    assert _mapping(json.loads(after.stdout)) == expected
    revs = rebasectl(repo.path, "report", "--json", "--old-rev", "HEAD~1", "--new-rev", "HEAD")
    assert revs.returncode == 1, revs.stderr
    unlabelled = [json.loads(x.stdout) for x in (revs, after)]
    for data in unlabelled:
        assert data["old"].pop("label") and data["new"].pop("label")
    assert unlabelled[0] == unlabelled[1]
    dirs = rebasectl(repo.path, "report", "--json", "--old-series", str(old_dir),
                     "--new-series", str(repo.path))
    assert dirs.returncode == 1, dirs.stderr
    assert _mapping(json.loads(dirs.stdout)) == expected


@pytest.mark.parametrize("args, message", [
    (["--old-rev", "HEAD", "--old-series", "x"], "give at most one input for the old side"),
    (["--old-range", "nope..old"], "unknown revision"),
    (["--old-range", "old"], "expected BASE..TIP"),
    (["--repo", "."], "--repo goes with --old-range/--new-range"),
    (["--format", "pdf"], "Invalid value"),
])
def test_bad_input_is_one_line_exit_2(fork: dict[str, str | Path], args: list[str],
                                      message: str) -> None:
    ws = Path(fork["tmp"]) / "ws2"
    ws.mkdir()
    if "--old-range" in args:
        args = [*args, "--repo", str(fork["up"]), "--new-range", f"{fork['base2']}..new"]
    r = rebasectl(ws, "report", *args)
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_no_earlier_base_is_exit_2(tmp_path: Path, fork: dict[str, str | Path]) -> None:
    repo = Repo(tmp_path / "s")
    r = rebasectl(repo.path, "import", f"{fork['base1']}..old", "--repo", str(fork["up"]))
    assert r.returncode == 0, r.stderr
    repo.commit("series")
    r = rebasectl(repo.path, "report", "--upstream", str(fork["up"]))
    assert r.returncode == 2 and "no earlier base" in r.stderr


def test_range_tip_series_gives_intent(fork: dict[str, str | Path]) -> None:
    """A range whose tip carries a series.yaml: its why / drop_when reach the report."""
    up = Repo(Path(fork["up"]))
    up.checkout("-q", "new")
    up.commit("series: metadata", {"series.yaml": (
        "version: 1\nupstream:\n  name: up\n  url: x\n  branch: main\n"
        f"  base: {fork['base2']}\npatches:\n"
        "  - id: beta-scaling\n    file: 0001-beta.patch\n    title: '[1/4] fix: beta scaling'\n"
        "    why: beta needs scaling for RL\n"
        "    drop_when: upstream scales beta\n")})
    r = _ranges(fork, "--format", "json")
    assert r.returncode == 1, r.stderr  # entries to review
    patch = json.loads(r.stdout)["new"]["patches"][0]
    assert (patch["id"], patch["why"], patch["drop_when"]) == \
        ("beta-scaling", "beta needs scaling for RL", "upstream scales beta")
    md = _ranges(fork).stdout
    assert "- why: beta needs scaling for RL" in md and "- drop when: upstream scales beta" in md


def test_range_without_repo_says_to_pass_it(fork: dict[str, str | Path]) -> None:
    """--old-range/--new-range without --repo are looked for in the checkout; when they are not
    there the error says so, and the advice (pass --repo) works."""
    ws = Path(fork["tmp"]) / "ws3"
    Repo(ws)
    ranges = ["--old-range", f"{fork['base1']}..old", "--new-range", f"{fork['base2']}..new"]
    r = rebasectl(ws, "report", *ranges)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "unknown revision" in r.stderr and "pass --repo PATH" in r.stderr
    bare = Path(fork["tmp"]) / "not-git"
    bare.mkdir()
    r = rebasectl(bare, "report", *ranges)
    assert r.returncode == 2 and "pass --repo PATH" in r.stderr
    assert rebasectl(ws, "report", *ranges, "--repo", str(fork["up"])).returncode == 1  # a
    # report, with entries to review (0 would be a report with nothing to review)


def _objects(repo: Path) -> dict[str, int]:
    store = repo / ".git" / "objects"
    return {str(p.relative_to(store)): p.stat().st_size for p in store.rglob("*") if p.is_file()}


def test_a_range_report_writes_nothing_into_the_repository(fork: dict[str, str | Path]) -> None:
    """The report reads --repo (someone's repository, a read-only mirror): the objects its
    checks write (3-way applies, merges) go to a folder of its own, removed after it; the
    repository's object store is as it was, byte for byte in size and names."""
    before = _objects(Path(fork["up"]))
    r = _ranges(fork, "--format", "json")
    assert r.returncode == 1, r.stderr
    assert _objects(Path(fork["up"])) == before
