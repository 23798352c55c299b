"""Resolution proposals (issue 23): the rules on their own, then bump --propose, apply --propose,
resolve --list/--accept/--reject and continue on a small real fork, and the guard that keeps the
answer keys and the maintainers' branches out of the code that proposes."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from rebasectl.engine.proposals.evidence import Upstream
from rebasectl.engine.proposals.merge import merge, norm
from rebasectl.engine.proposals.rules import Case, Earlier, Oracle, Sides, first
from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo

ROOT = Path(__file__).resolve().parents[2]

SIG = "def build(\n    a: int = 0,\n    b: int = 0,\n) -> int:\n    return a + b\n"
CALL = "def run(a):\n    x = compute(a)\n    return x\n"


def case(base: list[str], ours: list[str], theirs: list[str]) -> Case:
    return Case("p", "f.py", 1, Sides(ours, base, theirs), ours)


class Brought(Oracle):
    def brought(self, path: str, lines: list[str]) -> str | None:
        return "c0ffee" if lines else None


# -- the rules -------------------------------------------------------------------------------------
def test_both_insert_keeps_both_upstream_first() -> None:
    found = first(case(["    b: int = 0,"], ["    b: int = 0,", "    e: int = 0,"],
                       ["    b: int = 0,", "    c: int = 0,"]), Oracle())
    assert found is not None and found.rule == "both-insert"
    assert found.lines == ["    b: int = 0,", "    e: int = 0,", "    c: int = 0,"]


def test_both_insert_refused_when_both_add_positional_items() -> None:
    """Two parameters without defaults at one point: their order decides what each caller's
    value binds to."""
    params = case([], ["        extra: List[int],"], ["        names: Dict[str, int],"])
    assert first(params, Oracle()) is None
    # one of them with a default binds by name: both kept
    found = first(case([], ["        extra: List[int],"], ["        names: bool = False,"]),
                  Oracle())
    assert found is not None and found.rule == "both-insert"


def test_both_insert_keeps_two_new_top_level_definitions() -> None:
    """Whole functions added at one point by both sides are bound by name: both kept, even when
    upstream also renamed the definition that follows them."""
    ours = ["def up_helper():", "    return 1", "", "", "def renamed("]
    theirs = ["def patch_helper(", "    *,", "    x: int,", ") -> int:", "    return x", "", "",
              "def old("]
    found = first(case(["def old("], ours, theirs), Oracle())
    assert found is not None and found.rule == "both-insert"
    assert found.lines == ours[:4] + theirs[:7] + ["def renamed("]
    # the same name defined twice is refused, and so is a definition that is not whole
    assert first(case(["def old("], ["def helper():", "    return 1", "", "", "def new("],
                      ["def helper():", "    return 2", "", "", "def old("]), Oracle()) is None
    assert first(case(["def old("], ours, ["def patch_helper():", "    return 1", "def old("]),
                 Oracle()) is None


def test_both_insert_refused_on_the_same_name_or_line() -> None:
    same_name = case([], ["    c: int = 0,"], ["    c: bool = False,"])
    same_line = case([], ["    import os", "    x = 1,"], ["    import os", "    y = 2,"])
    assert first(same_name, Oracle()) is None
    assert first(same_line, Oracle()) is None


def test_context_only_follows_upstreams_reindentation() -> None:
    base = ["x = 1", "y = 2", "z = 3"]
    ours = ["    x = 1", "    y = 2", "    z = 3"]
    theirs = ["x = 1", "y = 20", "z = 3"]
    found = first(case(base, ours, theirs), Oracle())
    assert found is not None and found.rule == "context-only"
    assert found.lines == ["    x = 1", "    y = 20", "    z = 3"]


def test_context_only_keeps_upstreams_rewrite_of_a_line_the_patch_wrapped() -> None:
    """The patch put a line in a new branch (re-indented it); upstream rewrote that line: the
    patch's branch with upstream's text of the line, at the patch's indentation."""
    base = ["    with ctx() as h:", "        out = norm(h)", "    return out"]
    ours = ["    with manager as h:", "        out = apply(norm)(h)", "    return out"]
    theirs = ["    with ctx() as h:", "        if r is None:", "            out = norm(h)",
              "        else:", "            out = norm(h, r)", "    return out"]
    found = first(case(base, ours, theirs), Oracle())
    assert found is not None and found.rule == "context-only"
    assert found.lines == ["    with manager as h:", "        if r is None:",
                           "            out = apply(norm)(h)", "        else:",
                           "            out = norm(h, r)", "    return out"]


def test_context_only_puts_upstreams_new_lines_before_the_patchs_new_block() -> None:
    base = ["    data = zeros(", "        n,", "    )"]
    ours = ["    m = packed if small else n", "    data = zeros(", "        m,", "    )"]
    theirs = ["    with pool():", "        data = zeros(", "            n,", "        )"]
    found = first(case(base, ours, theirs), Oracle())
    assert found is not None and found.rule == "context-only"
    assert found.lines == ["    m = packed if small else n", "    with pool():",
                           "        data = zeros(", "            m,", "        )"]


def test_wrapped_lines_refused_when_upstream_grew_them() -> None:
    """Upstream added lines where the patch wrapped: inside the patch's block or after it is
    for a person."""
    base = ["x = f(", "    a,", ")"]
    ours = ["x = f(a)", "if y:", "    y = f(a)"]
    theirs = ["if x is None:", "    x = f(", "        a,", "    )"]
    assert merge(base, ours, theirs) is None or first(case(base, ours, theirs), Oracle()) is None


def test_token_change_made_on_upstreams_wrapped_call_with_an_appended_argument() -> None:
    base = ["    f(t, cp_size=g.size(), cp_rank=g.rank())"]
    ours = ["    f(", "        t,", "        cp_size=g.size(),", "        cp_rank=g.rank(),",
            "        extra=1,", "    )"]
    theirs = ["    f(t, cp_size=size, cp_rank=rank)"]
    found = first(case(base, ours, theirs), Oracle())
    assert found is not None and found.rule == "context-only"
    assert found.lines == ["    f(", "        t,", "        cp_size=size,", "        cp_rank=rank,",
                           "        extra=1,", "    )"]


def test_token_insertions_at_upstreams_appended_point_are_refused() -> None:
    base = ["    def __init__(self, a, b=None"]
    ours = ["    def __init__(self, a, b=None, c=False, d=None"]
    theirs = ["    def __init__(self, a, b=None, d: int = None"]
    assert first(case(base, ours, theirs), Oracle()) is None


def test_moved_carries_a_keyword_to_the_call_upstream_moved_out_of_the_region() -> None:
    base = ["    for k in keys:", "        buf = Buffer(", "            cfg,", "            group,",
            "        )"]
    theirs = base[:4] + ["            no_backup=no_backup,"] + base[4:]
    ours = ["    layout = plan(keys)"]
    file = ["def build(keys, no_backup):", "    layout = plan(keys)", "    buf = Buffer(",
            "        cfg,", "        group,", "        layout=layout,", "    )", ""]
    c = Case("p", "f.py", 1, Sides(ours, base, theirs), file)
    found = first(c, Oracle())
    assert found is not None and found.rule == "moved" and found.lines == ours
    assert found.port is not None and found.port["new"] == file[2:6] + [
        "        no_backup=no_backup,", "    )"]
    # two calls of that callee, or one that passes the name already: a person decides
    twice = file[:7] + file[2:7]
    assert first(Case("p", "f.py", 1, Sides(ours, base, theirs), twice), Oracle()) is None
    passes = file[:5] + ["        no_backup=False,"] + file[6:]
    assert first(Case("p", "f.py", 1, Sides(ours, base, theirs), passes), Oracle()) is None
    # a culprit that touched another file with such a call: the call in the region's own file
    # is the one upstream restructured
    class Other(Oracle):
        def files(self, commits: Sequence[str]) -> dict[str, list[str]]:
            return {"g.py": ["c1"]}

        def read(self, path: str) -> list[str] | None:
            return file if path == "g.py" else None

    culprit = Case("p", "f.py", 1, Sides(ours, base, theirs), file, culprits=["c1"])
    found = first(culprit, Other())
    assert found is not None and found.port is not None and found.port["path"] == "f.py"


def test_already_upstream_needs_the_names_and_a_commit() -> None:
    c = case(["    x = compute(a)"], ["    x = compute(", "        a, fast=True", "    )"],
             ["    x = compute(a, fast=True)"])
    assert first(c, Oracle()) is None or first(c, Oracle()).rule != "already-upstream"  # type: ignore[union-attr]
    found = first(c, Brought())
    assert found is not None and found.rule == "already-upstream"
    assert found.lines == c.sides.ours and isinstance(found.evidence, Upstream)
    assert found.evidence.commit == "c0ffee"
    # a name the patch removes is still upstream's: not the same change
    kept = case(["    y = old(a)"], ["    y = old(a)", "    z = new(a)"], ["    y = new(a)"])
    assert first(kept, Brought()) is None or first(kept, Brought()).rule != "already-upstream"  # type: ignore[union-attr]


def test_overlapping_edits_are_no_proposal() -> None:
    assert merge(["x = 1"], ["x = 2"], ["x = 3"]) is None
    assert first(case(["x = 1"], ["x = 2"], ["x = 3"]), Brought()) is None


# -- the commands on a real fork -------------------------------------------------------------------
def fork(tmp: Path) -> tuple[Repo, str, str, str]:
    """upstream base; two patches (a parameter appended, a keyword added); upstream then appends
    its own parameter at the same place and makes the keyword change itself, wrapped."""
    up = Repo(tmp / "up")
    base = up.commit("base", {"mod.py": SIG, "run.py": CALL})
    up.git("checkout", "-q", "-b", "fork")
    up.commit("add parameter c", {"mod.py": SIG.replace("    b: int = 0,\n",
                                                        "    b: int = 0,\n    c: int = 0,\n")})
    tip = up.commit("compute fast", {"run.py": CALL.replace("compute(a)", "compute(a, fast=True)")})
    up.checkout("main")
    new = up.commit("upstream: parameter e, fast compute", {
        "mod.py": SIG.replace("    b: int = 0,\n", "    b: int = 0,\n    e: int = 0,\n"),
        "run.py": CALL.replace("    x = compute(a)\n",
                               "    x = compute(\n        a, fast=True\n    )\n")})
    return up, base, tip, new


def series_of(tmp: Path, up: Repo, base: str, tip: str) -> Path:
    series = Repo(tmp / "series")
    series.commit("init", allow_empty=True)
    r = rebasectl(series.path, "import", f"{base}..{tip}", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    series.commit("series")
    return series.path


def test_bump_propose_shows_and_writes_nothing(tmp_path: Path) -> None:
    up, base, tip, new = fork(tmp_path)
    series = series_of(tmp_path, up, base, tip)
    before = (series / "series.yaml").read_text()
    out = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", new, "--upstream", str(up.path), "--propose",
                  "--json", "--artifacts", str(out))
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    regions = {reg["id"]: reg for p in data["patches"] for c in p["conflicts"]
               for reg in c["regions"]}
    both = regions["add-parameter-c/mod.py/1"]["proposal"]
    assert both["rule"] == "both-insert" and both["state"] == "proposed"
    assert both["lines"] == ["    e: int = 0,", "    c: int = 0,"]  # git's region: the inserts
    same = regions["compute-fast/run.py/1"]["proposal"]
    assert same["rule"] == "superseded" and same["evidence"]["commit"] == new
    assert (series / "series.yaml").read_text() == before
    assert not (series / ".rebasectl" / "tree").exists()
    listed = json.loads((out / "proposals.json").read_text())
    assert {p["id"] for p in listed} == set(regions)
    assert "add-parameter-c/mod.py/1" in (out / "README.md").read_text()


def test_resolve_accept_then_continue(tmp_path: Path) -> None:
    up, base, tip, new = fork(tmp_path)
    series = series_of(tmp_path, up, base, tip)
    r = rebasectl(series, "apply", "--base", new, "--upstream", str(up.path), "--propose",
                  "--json")
    assert r.returncode == 1, r.stderr
    assert [p["id"] for p in json.loads(r.stdout)["proposals"]] == ["add-parameter-c/mod.py/1"]
    tree = series / ".rebasectl" / "tree"
    listed = json.loads(rebasectl(series, "resolve", "--list", "--json").stdout)
    assert [p["state"] for p in listed["proposals"]] == ["proposed"]
    bad = rebasectl(series, "resolve", "--accept", "nope/x.py/1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    r = rebasectl(series, "resolve", "--accept", "--all", "--json")
    assert r.returncode == 0, r.stderr
    assert [p["state"] for p in json.loads(r.stdout)["proposals"]] == ["accepted"]
    assert (tree / "mod.py").read_text() == SIG.replace(
        "    b: int = 0,\n", "    b: int = 0,\n    e: int = 0,\n    c: int = 0,\n")
    staged = Repo.__new__(Repo)
    staged.path, staged.clock = tree, 0
    assert staged.git("ls-files", "-u") == ""  # staged: no unmerged entry left
    r = rebasectl(series, "continue", "--json")
    assert r.returncode == 1, r.stdout + r.stderr  # the second patch stops: upstream has it
    listed = json.loads(rebasectl(series, "resolve", "--json").stdout)
    assert [(p["id"], p["rule"]) for p in listed["proposals"]] == [
        ("compute-fast/run.py/1", "superseded")]
    r = rebasectl(series, "resolve", "--reject", "compute-fast/run.py/1", "--json")
    assert json.loads(r.stdout)["proposals"] == []


def test_reject_of_an_accepted_region_restores_the_conflict(tmp_path: Path) -> None:
    """Hostile 5 #12: `resolve --reject` of an accepted proposal takes it back: the file has its
    markers again as apply left them, its unmerged index entries are back (git status shows the
    conflict), continue refuses as at the stop, and resolving by hand then continues."""
    up, base, tip, new = fork(tmp_path)
    series = series_of(tmp_path, up, base, tip)
    assert rebasectl(series, "apply", "--base", new, "--upstream", str(up.path)).returncode == 1
    tree = Repo.__new__(Repo)
    tree.path, tree.clock = series / ".rebasectl" / "tree", 0
    at_stop = (tree.path / "mod.py").read_text()
    unmerged = tree.git("ls-files", "-u")
    assert "<<<<<<<" in at_stop and unmerged
    assert rebasectl(series, "resolve", "--accept", "--all").returncode == 0
    assert tree.git("ls-files", "-u") == ""
    r = rebasectl(series, "resolve", "--reject", "add-parameter-c/mod.py/1", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["proposals"] == [] and data["unresolved"] == ["mod.py"]
    assert (tree.path / "mod.py").read_text() == at_stop
    assert tree.git("ls-files", "-u") == unmerged
    assert rebasectl(series, "continue").returncode == 1  # the conflict is open again
    (tree.path / "mod.py").write_text(SIG.replace(
        "    b: int = 0,\n", "    b: int = 0,\n    c: int = 0,\n    e: int = 0,\n"))
    tree.git("add", "mod.py")
    r = rebasectl(series, "continue")
    assert r.returncode == 1 and "compute-fast" in r.stdout, r.stdout + r.stderr


def test_no_key_branch_sha_or_path_in_the_proposing_code() -> None:
    """Only bench/resolve.py's scoring step names the keys and the maintainers' branches; the
    rules carry no sha, PR number or path of these series."""
    words = re.compile(r"answer-keys|miles-main-2026|miles-2026|upstream/1dcf0dafa")
    for path in sorted((ROOT / "rebasectl").rglob("*.py")):
        assert not words.search(path.read_text()), path
    rules = [*(ROOT / "rebasectl/engine/proposals").glob("*.py"),
             ROOT / "rebasectl/engine/resolving.py"]
    sha = re.compile(r"\b[0-9a-f]{7,40}\b")
    for path in rules:
        text = path.read_text()
        assert not sha.search(text), (path, sha.search(text))
        assert not re.search(r"#\d{3,}", text), path
        assert "megatron/" not in text and "miles" not in text, path
    bench = (ROOT / "bench/resolve.py").read_text()
    assert "answer-keys" in bench and "miles-main-20260619" in bench


def test_token_change_made_on_upstreams_rewrapped_line() -> None:
    base = ["    f(t, cu, cp_size=group.size(), cp_rank=group.rank())"]
    ours = ["    f(", "        t,", "        cu,", "        cp_size=group.size(),",
            "        cp_rank=group.rank(),", "    )"]
    theirs = ["    f(t, cu, cp_size=cp_size, cp_rank=group.rank())"]
    found = first(case(base, ours, theirs), Oracle())
    assert found is not None and found.rule == "context-only"
    assert found.lines == ["    f(", "        t,", "        cu,", "        cp_size=cp_size,",
                           "        cp_rank=group.rank(),", "    )"]
    # an edit whose alignment splits a bracket pair (``group.rank())`` -> ``cp_rank)``) is
    # taken whole; one that leaves a bracket open proposes nothing
    twice = ["    f(t, cu, cp_size=cp_size, cp_rank=cp_rank)"]
    found = first(case(base, ours, twice), Oracle())
    assert found is not None and found.lines[3:5] == ["        cp_size=cp_size,",
                                                      "        cp_rank=cp_rank,"]
    assert first(case(base, ours, ["    f(t, cu, cp_size=(cp_size, cp_rank=cp_rank)"]),
                 Oracle()) is None
    # upstream changed a token too (not only the layout): a person decides
    ours[3] = "        cp_size=group.world(),"
    assert first(case(base, ours, theirs), Oracle()) is None


def test_docstring_entries_both_kept_and_a_duplicate_import_refused() -> None:
    up = ["        e (int): upstream's.", "            More of it."]
    pa = ["        c (int): the patch's."]
    found = first(case([], up, pa), Oracle())
    assert found is not None and found.rule == "both-insert" and found.lines == up + pa
    dup = Case("p", "f.py", 1, Sides(["import operator"], [], ["import os"]),
               ["import sys", "import os", "", "import operator"])
    assert first(dup, Oracle()) is None


def test_region_ids_are_stable(tmp_path: Path) -> None:
    up, base, tip, new = fork(tmp_path)
    series = series_of(tmp_path, up, base, tip)
    ids = []
    for n in (1, 2):
        r = rebasectl(series, "bump", "--to", new, "--upstream", str(up.path), "--propose",
                      "--json", "--artifacts", str(tmp_path / f"art{n}"))
        ids.append([reg["id"] for p in json.loads(r.stdout)["patches"]
                    for c in p["conflicts"] for reg in c["regions"]])
    assert ids[0] == ids[1] == ["add-parameter-c/mod.py/1", "compute-fast/run.py/1"]


def test_recorded_resolution_is_its_own_rule(tmp_path: Path) -> None:
    """rerere resolves one file of a stop with a resolution made at an earlier apply; the other
    file's conflict is new: resolve lists the first as ``recorded`` (written by rerere)."""
    up = Repo(tmp_path / "up")
    a, b = "x = 1\ny = 2\nz = 3\n", "p = 1\nq = 2\nr = 3\n"
    base = up.commit("base", {"a.py": a, "b.py": b})
    up.git("checkout", "-q", "-b", "fork")
    tip = up.commit("patch both", {"a.py": a.replace("y = 2", "y = 20"),
                                   "b.py": b.replace("q = 2", "q = 20")})
    up.checkout("main")
    first_up = up.commit("upstream 1", {"a.py": a.replace("y = 2", "y = 200"),
                                        "b.py": b.replace("q = 2", "q = 200")})
    series = series_of(tmp_path, up, base, tip)
    r = rebasectl(series, "apply", "--base", first_up, "--upstream", str(up.path))
    assert r.returncode == 1, r.stderr
    tree = series / ".rebasectl" / "tree"
    (tree / "a.py").write_text(a.replace("y = 2", "y = 2000"))
    (tree / "b.py").write_text(b.replace("q = 2", "q = 2000"))
    staged = Repo.__new__(Repo)
    staged.path, staged.clock = tree, 0
    staged.git("add", "a.py", "b.py")
    assert rebasectl(series, "continue").returncode == 0
    up.git("checkout", "-q", "-B", "second", first_up)
    second = up.commit("upstream 2", {"b.py": b.replace("q = 2", "q = 300")})
    up.checkout("main")
    r = rebasectl(series, "apply", "--base", second, "--upstream", str(up.path), "--worktree",
                  str(tmp_path / "tree2"))
    assert r.returncode == 1, r.stdout + r.stderr
    board = json.loads(rebasectl(series, "resolve", "--json").stdout)
    rules = {p["id"]: (p["rule"], p["state"], p["lines"]) for p in board["proposals"]}
    assert rules["patch-both/a.py/1"] == ("recorded", "accepted", ["y = 2000"])
    assert "patch-both/b.py/1" not in rules  # a new conflict: no rule holds


# -- issue 23, third round: the same item upstream added; regions that need an earlier patch -----
def test_already_upstream_when_upstream_documents_the_same_argument_in_its_own_words() -> None:
    """The patch adds a docstring entry (or a parameter) and upstream added an entry for the same
    name with other words: upstream's is kept (the names rule misses it: the free text differs),
    with the commit that brought it; without a commit, no verdict."""
    base = ["            mask (Tensor, optional): The mask. Defaults to None."]
    theirs = base + ["            input_ids (Tensor, optional): Input token IDs for routing."]
    ours = base + ["            input_ids (Tensor, optional): The input IDs tensor.",
                   "                                          Defaults to None."]
    found = first(case(base, ours, theirs), Brought())
    assert found is not None and found.rule == "already-upstream", found
    assert found.lines == ours and found.evidence == Upstream(
        "c0ffee", "items", ("input_ids",), (ours[1],))  # upstream's line that holds it
    nothing = first(case(base, ours, theirs), Oracle())
    assert nothing is None or nothing.rule != "already-upstream"
    # another argument documented upstream: both entries are kept, not upstream's alone
    other = base + ["            layer (int, optional): The layer."]
    found = first(case(base, other, theirs), Brought())
    assert found is not None and found.rule == "both-insert"


def blocked_fork(tmp: Path) -> tuple[Repo, str, str, str]:
    """Patch 1 adds parameter ``c`` and a helper; upstream adds its own parameter ``e`` where
    ``c`` goes (patch 1 conflicts). Patch 2 adds ``d`` after ``c`` and changes the helper's
    body, both lines of patch 1: it is blocked by patch 1."""
    up = Repo(tmp / "up")
    tail = "\n\ndef other():\n    return 0\n"
    base = up.commit("base", {"mod.py": SIG + tail})
    up.git("checkout", "-q", "-b", "fork")
    helper = "\n\ndef helper():\n    return 1\n"
    one = SIG.replace("    b: int = 0,\n", "    b: int = 0,\n    c: int = 0,\n") + tail + helper
    up.commit("add c and helper", {"mod.py": one})
    two = one.replace("    c: int = 0,\n", "    c: int = 0,\n    d: int = 0,\n").replace(
        "    return 1\n", "    return 2\n")
    tip = up.commit("add d and change helper", {"mod.py": two})
    up.checkout("main")
    new = up.commit("upstream: parameter e", {
        "mod.py": SIG.replace("    b: int = 0,\n", "    b: int = 0,\n    e: int = 0,\n") + tail})
    return up, base, tip, new


def test_a_blocked_patchs_regions_are_made_on_the_earlier_patchs_resolution(
        tmp_path: Path) -> None:
    up, base, tip, new = blocked_fork(tmp_path)
    series = series_of(tmp_path, up, base, tip)
    r = rebasectl(series, "bump", "--to", new, "--upstream", str(up.path), "--propose",
                  "--json", "--artifacts", str(tmp_path / "art"))
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert [p["status"] for p in data["patches"]] == ["conflict", "blocked"]
    regions = {reg["id"]: reg for p in data["patches"] for c in p["conflicts"]
               for reg in c["regions"]}
    assert regions["add-c-and-helper/mod.py/1"]["proposal"]["lines"] == [
        "    e: int = 0,", "    c: int = 0,"]
    blocked = [reg for rid, reg in regions.items() if rid.startswith("add-d")]
    got = [(reg["proposal"]["rule"], reg["proposal"]["lines"]) for reg in blocked]
    # the parameter: made on patch 1's proposal (e, then c), d after c
    assert ("context-only", ["    e: int = 0,", "    c: int = 0,", "    d: int = 0,"]) in got
    # the helper's body: patch 1's lines, as patch 2 changes them
    assert any(rule == "context-only" and "    return 2" in lines and "    return 1" not in lines
               for rule, lines in got), got
    assert all(reg["proposal"]["evidence"]["needs"] == ["add-c-and-helper"] for reg in blocked)
    # the evidence says which patch and how: its proposal, or its own lines
    contexts = sorted(reg["proposal"]["evidence"]["context"] for reg in blocked)
    assert "its proposal add-c-and-helper/mod.py/1 resolves them" in contexts[0] + contexts[1]
    assert all("lines of add-c-and-helper, which does not apply" in c for c in contexts)


def test_statements_added_next_to_an_earlier_patchs_lines_are_left_to_a_person() -> None:
    """The patch only adds statements after lines of a patch that does not apply: where they go
    once that patch is done again is for a person; a change of those lines is not."""
    mine = ["def helper():", "    return 1"]
    earlier = Earlier(["p1"], frozenset(norm(x) for x in mine))
    added = Case("p2", "f.py", 1, Sides([], mine, mine + ["    log()", "    x = 2"]), [],
                 earlier=earlier)
    assert first(added, Oracle()) is None
    changed = Case("p2", "f.py", 1, Sides([], mine, ["def helper():", "    return 2"]), [],
                   earlier=earlier)
    found = first(changed, Oracle())
    assert found is not None and found.lines == ["def helper():", "    return 2"]
    # lines the earlier patch does not add are not its: no proposal
    alien = Case("p2", "f.py", 1, Sides([], mine + ["    pass"], ["def helper():", "    pass"]),
                 [], earlier=earlier)
    assert first(alien, Oracle()) is None


def test_an_insertion_goes_beside_upstreams_rewrite_of_the_line_it_stands_beside() -> None:
    """The patch adds an import before a line upstream grew: the import goes before upstream's
    text of that line. Refused when upstream renamed what the insertion joins, or when the
    insertion binds something upstream's side binds already."""
    found = first(case(["from typing import Dict, Optional"],
                       ["from typing import Any, Dict, Optional"],
                       ["from pathlib import Path", "from typing import Dict, Optional"]),
                  Oracle())
    assert found is not None and found.rule == "context-only", found
    assert found.lines == ["from pathlib import Path", "from typing import Any, Dict, Optional"]
    renamed = case(["            **(extra_kwargs or {}),"],
                   ["            **decoder_extra_kwargs,"],
                   ["            input_ids=input_ids,", "            **(extra_kwargs or {}),"])
    assert first(renamed, Oracle()) is None
    scale = ["    group.add_argument('--scale', type=float,", "                       default=1.0)"]
    flag = case(scale,
                ["    group.add_argument(", "        '--scale', type=float, default=1.0", "    )",
                 "    group.add_argument('--beta', type=int)"],
                ["    group.add_argument('--beta', type=int)", *scale])
    assert first(flag, Oracle()) is None


def test_both_insert_keeps_two_elif_arms_that_set_the_same_name() -> None:
    """Arms of one if-chain bind the same name by design (only one runs): both kept."""
    found = first(case([], ["    elif impl == 'fast':", "        norm = FastNorm"],
                       ["    elif uses_backend:", "        norm = BackendNorm"]), Oracle())
    assert found is not None and found.rule == "both-insert"
    assert found.lines == ["    elif impl == 'fast':", "        norm = FastNorm",
                           "    elif uses_backend:", "        norm = BackendNorm"]


def test_definitions_go_before_a_class_upstream_renamed_with_its_docstring() -> None:
    """Upstream renamed the class the patch's new functions stand before, and reworded its
    docstring (two rewrites of consecutive lines: one rewrite of the block)."""
    helper = ["def _helper(x: int) -> int:", "    return x", "", ""]
    found = first(case(["class Qkv(Protocol):", '    """Protocol for qkv."""'],
                       ["class QkvInterface(Protocol):", '    """Interface for qkv."""'],
                       helper + ["class Qkv(Protocol):", '    """Protocol for qkv."""']),
                  Oracle())
    assert found is not None and found.rule == "context-only", found
    assert found.lines == helper + ["class QkvInterface(Protocol):", '    """Interface for qkv."""']


def test_rewrites_of_neighbouring_lines_are_both_kept() -> None:
    """Upstream rewrote one line, the patch the next one: both rewrites. Not when upstream only
    added lines around the line the patch rewrote (they were written against the old line)."""
    base = ['py_version = 310  # python 3.8 target', 'first_party = ["core"]  # FIRSTPARTY']
    ours = ['py_version = 310  # python 3.10 target', 'first_party = ["core"]  # FIRSTPARTY']
    theirs = [base[0], 'first_party = ["core", "plugins"]  # FIRSTPARTY']
    found = first(case(base, ours, theirs), Oracle())
    assert found is not None and found.rule == "context-only", found
    assert found.lines == [ours[0], theirs[1]]
    line = ["    h = make_viewless(inp=h, keep_graph=True)"]
    around = case(line, ["    if detach:", "        x = x.detach()", *line,
                         "    if not h.requires_grad:", "        h.requires_grad_(True)"],
                  ["    h = make_viewless(inp=h, keep_graph=False)"])
    assert first(around, Oracle()) is None


def test_an_upstreamed_patchs_regions_are_shown_as_proposed_drops(tmp_path: Path) -> None:
    """Upstream made the patch's fix without its comment: git's merge still marks a region, the
    bump drops the patch as upstreamed (the commit named). With --propose, bump.json lists that
    region under dropped_regions with a proposed drop (upstream's side), the commit named;
    without, the region is still listed (bump counts it: the answer keys' count), unproposed."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"run.py": CALL})
    up.git("checkout", "-q", "-b", "fork")
    fixed = "    x = compute(a, fast=True)\n"
    tip = up.commit("compute fast", {"run.py": CALL.replace(
        "    x = compute(a)\n", "    # the fast path: same result, less memory\n" + fixed)})
    up.checkout("main")
    new = up.commit("upstream: compute fast", {"run.py": CALL.replace("    x = compute(a)\n",
                                                                        fixed)})
    series = series_of(tmp_path, up, base, tip)
    args = ["bump", "--to", new, "--upstream", str(up.path), "--json"]
    r = rebasectl(series, *args, "--propose", "--artifacts", str(tmp_path / "art"))
    assert r.returncode in (0, 1), r.stderr
    patch = json.loads(r.stdout)["patches"][0]
    assert patch["status"] == "upstreamed" and patch["conflicts"] == []
    [region] = [reg for c in patch["dropped_regions"] for reg in c["regions"]]
    prop = region["proposal"]
    assert region["id"] == "compute-fast/run.py/1" and prop["rule"] == "superseded"
    assert prop["lines"] == [fixed.rstrip("\n")] and prop["evidence"]["commit"] == new
    assert prop["evidence"]["drop"] is True
    r = rebasectl(series, *args, "--artifacts", str(tmp_path / "art2"))
    [bare] = [reg for c in json.loads(r.stdout)["patches"][0]["dropped_regions"]
              for reg in c["regions"]]
    assert bare["id"] == "compute-fast/run.py/1" and "proposal" not in bare


def test_a_parameter_used_only_in_regions_left_to_a_person_is_not_proposed_alone(
        tmp_path: Path) -> None:
    """The patch adds parameter ``extra`` (both sides add one at that point) and uses it only in a
    line upstream rewrote too (a region no rule resolves): keeping the parameter is part of what
    a person decides there, so the both-insert is withdrawn. Used also in lines that merged
    cleanly, it stays."""
    body = "def build(\n    a: int = 0,\n) -> int:\n    x = a + 1\n    y = 2\n    y = 3\n" \
        "    return x\n"

    def bump(name: str, also: bool) -> dict[str, dict[str, object]]:
        up = Repo(tmp_path / name / "up")
        base = up.commit("base", {"mod.py": body})
        up.git("checkout", "-q", "-b", "fork")
        mine = body.replace("    a: int = 0,\n", "    a: int = 0,\n    extra: int = 0,\n")
        mine = mine.replace("x = a + 1", "x = a + extra")
        if also:
            mine = mine.replace("    y = 3\n", "    y = 3 + extra\n")
        tip = up.commit("add extra", {"mod.py": mine})
        up.checkout("main")
        new = up.commit("upstream", {"mod.py": body.replace(
            "    a: int = 0,\n", "    a: int = 0,\n    b: int = 0,\n").replace(
            "x = a + 1", "x = a + b + 1")})
        series = series_of(tmp_path / name, up, base, tip)
        r = rebasectl(series, "bump", "--to", new, "--upstream", str(up.path), "--propose",
                      "--json", "--artifacts", str(tmp_path / name / "art"))
        assert r.returncode == 1, r.stderr
        return {reg["id"]: reg for p in json.loads(r.stdout)["patches"]
                for c in p["conflicts"] for reg in c["regions"]}

    alone = bump("alone", also=False)
    assert sorted(alone) == ["add-extra/mod.py/1", "add-extra/mod.py/2"]
    assert not any("proposal" in reg for reg in alone.values())
    used = bump("used", also=True)
    assert used["add-extra/mod.py/1"]["proposal"]["rule"] == "both-insert"
    assert "proposal" not in used["add-extra/mod.py/2"]


def test_a_keyword_for_a_parameter_whose_declaration_is_left_to_a_person_is_not_proposed(
        tmp_path: Path) -> None:
    """Both sides add a positional parameter to ``build`` (no rule orders those) and a keyword
    for it at the call: the call's both-insert is withdrawn, since whether ``build`` keeps the
    patch's parameter is decided in the signature's region."""
    text = "def build(\n    a: int,\n) -> int:\n    total = a\n    total += 1\n    total += 2\n" \
        "    total += 3\n    return total\n\n\ndef run():\n    return build(\n        a=1,\n    )\n"
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"mod.py": text})
    up.git("checkout", "-q", "-b", "fork")
    tip = up.commit("add names", {"mod.py": text.replace(
        "    a: int,\n", "    a: int,\n    names: dict,\n").replace(
        "total += 3", "total += len(names)").replace("a=1,\n", "a=1,\n        names={},\n")})
    up.checkout("main")
    new = up.commit("upstream", {"mod.py": text.replace(
        "    a: int,\n", "    a: int,\n    extra: list,\n").replace(
        "a=1,\n", "a=1,\n        extra=[],\n")})
    series = series_of(tmp_path, up, base, tip)
    r = rebasectl(series, "bump", "--to", new, "--upstream", str(up.path), "--propose",
                  "--json", "--artifacts", str(tmp_path / "art"))
    assert r.returncode == 1, r.stderr
    regions = {reg["id"]: reg for p in json.loads(r.stdout)["patches"]
               for c in p["conflicts"] for reg in c["regions"]}
    assert sorted(regions) == ["add-names/mod.py/1", "add-names/mod.py/2"]
    assert not any("proposal" in reg for reg in regions.values())


def test_a_patch_that_only_reformats_lines_upstream_rewrote_keeps_upstreams_side() -> None:
    """The patch only re-wraps a call (the same tokens, a formatter's trailing comma) that
    upstream rewrote: nothing of the patch's to carry. A change of a token is not layout."""
    base = ["    y, _ = roll(y, shifts=-1, dims=-1)"]
    wrapped = ["    y, _ = roll(", "        y,", "        shifts=-1,", "        dims=-1,", "    )"]
    ours = ["    y = process(y, group=group)"]
    found = first(case(base, ours, wrapped), Oracle())
    assert found is not None and found.rule == "context-only" and found.lines == ours
    changed = ["    y, _ = roll(", "        y,", "        shifts=-2,", "        dims=-1,", "    )"]
    other = first(case(base, ours, changed), Oracle())
    assert other is None or other.lines != ours
