"""`continue` after series.yaml changed under an open conflict: the advice keeps the person's
staged resolution, and following it works."""

from __future__ import annotations

import re
from pathlib import Path

from tests.harness.cli import run
from tests.harness.git import git_out as git
from tests.sfix import Scenario, copy

_REGION = re.compile(r"<<<<<<< [^\n]*\n.*?>>>>>>> [^\n]*\n", re.S)


def _swap_entries(text: str, a: int, b: int) -> str:
    """series.yaml with its a-th and b-th patch entries (0-based) swapped."""
    head, _, rest = text.partition("patches:\n")
    entries = ["- " + e for e in rest.split("- ")[1:]]
    entries[a], entries[b] = entries[b], entries[a]
    return head + "patches:\n" + "".join(entries)


def test_reordered_series_advice_keeps_the_staged_resolution(sc: Scenario,
                                                             tmp_path: Path) -> None:
    """Finding 6: series.yaml reordered while a conflict is open made `continue` advise
    `abort`, which throws the staged resolution away; putting series.yaml back and continuing
    keeps it, and now the message says so (and doing it works)."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--base", sc.new_base, "--upstream", str(sc.up.path), want=1)
    tree = series / ".rebasectl" / "tree"
    a = tree / "a.txt"
    a.write_text(_REGION.sub("RESOLVED BY HAND 3\n", a.read_text()))
    git(tree, "add", "a.txt")
    original = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text(_swap_entries(original, 2, 3))
    r = run(series, "continue", want=2)
    err = r.stderr
    assert "put it back as it was" in err and "keeps the resolution you staged" in err, err
    assert "`rebasectl abort` then apply again also works, but throws that resolution" in err
    ids = re.search(r"in this order: ([^)]*)\)", err)
    assert ids is not None
    assert ids.group(1).split(", ") == re.findall(r"(?m)^- id: (\S+)$", original)
    assert git(tree, "diff", "--cached", "--name-only") == "a.txt"  # nothing touched
    # the advice: put it back (here: the entries in the order the message names), continue
    (series / "series.yaml").write_text(_swap_entries(_swap_entries(original, 2, 3), 2, 3))
    assert (series / "series.yaml").read_text() == original
    run(series, "continue", want=0)
    first = git(tree, "log", "--reverse", "--format=%H", f"{sc.new_base}..HEAD").split()[0]
    assert "RESOLVED BY HAND 3" in git(tree, "show", f"{first}:a.txt")
    assert "RESOLVED BY HAND 3" in (tree / "a.txt").read_text()


def test_a_removed_patch_is_named(sc: Scenario, tmp_path: Path) -> None:
    """An entry taken out of series.yaml mid-apply is named, with the same way back."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--base", sc.new_base, "--upstream", str(sc.up.path), want=1)
    text = (series / "series.yaml").read_text()
    head, _, rest = text.partition("patches:\n")
    entries = ["- " + e for e in rest.split("- ")[1:]]
    gone = re.search(r"id: (\S+)", entries[-1])
    assert gone is not None
    (series / "series.yaml").write_text(head + "patches:\n" + "".join(entries[:-1]))
    r = run(series, "continue", want=2)
    assert f"removed {gone.group(1)}" in r.stderr, r.stderr
