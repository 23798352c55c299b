"""Export after ``apply --base`` onto an upstream that already holds a patch (hostile10 B6).

The patch applies as a no-op there (its commit changes nothing). Export used to write its file
without the diff, silently, leaving an empty patch where the change was. It now refuses (exit 1,
nothing written) as it refuses to drop an entry silently, naming the ``--drop`` that drops it;
followed, the entry and its file go, and a second export (the no-op commit still in the work
tree) does not read that commit back as a new empty patch. A patch that was empty before (a
marker) is written as it was.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness.cli import one_error, run
from tests.harness.git import git, lines
from tests.harness.scenes import forked, imported

A = lines(40, "a")


def _series(tmp: Path) -> tuple[Path, Path]:
    up, base = forked(tmp, {"a.txt": A}, [
        ("fix: one", {"a.txt": A.replace("a 3\n", "P 3\n")}), ("marker: nothing", {}),
        ("fix: two", {"a.txt": A.replace("a 3\n", "P 3\n").replace("a 20\n", "P 20\n")})],
        [("upstream: takes fix one", {"a.txt": A.replace("a 3\n", "P 3\n")})])
    return up.path, imported(tmp, up, base)


def test_an_upstreamed_patch_is_never_exported_without_its_diff(tmp_path: Path) -> None:
    up, series = _series(tmp_path)
    before = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    r = run(series, "apply", "--base", "main", "--upstream", str(up))
    assert r.returncode == 0 and "(1/3) one: no-op" in r.stderr, r.stderr

    r = run(series, "export")
    assert r.returncode == 1, r.stderr
    assert one_error(r.stderr).startswith("rebasectl: error: export would write one without its "
                                          "diff")
    assert r.stderr.rstrip().endswith("--drop one to drop on purpose")
    assert {p.name: p.read_bytes() for p in (series / "patches").iterdir()} == before
    assert git(series, "status", "--porcelain").stdout == ""

    r = run(series, "export", "--drop", "one")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (series / "patches").iterdir()) == \
        ["0002-nothing.patch", "0003-two.patch"]
    assert (series / "patches" / "0002-nothing.patch").read_bytes() == \
        before["0002-nothing.patch"]  # the marker, empty before, is written as it was
    ids = [ln.split()[-1] for ln in (series / "series.yaml").read_text().splitlines()
           if ln.startswith("- id:")]
    assert ids == ["nothing", "two"]
    written = (series / "series.yaml").read_bytes()

    r = run(series, "export")  # the no-op commit is still in the work tree
    assert r.returncode == 0, r.stderr
    assert (series / "series.yaml").read_bytes() == written
    assert sorted(p.name for p in (series / "patches").iterdir()) == \
        ["0002-nothing.patch", "0003-two.patch"]
    assert run(series, "check").returncode == 0


def test_a_new_patch_may_take_a_dropped_patchs_id(tmp_path: Path) -> None:
    """hostile12 #2: the tree map remembers the dropped no-op commit, not its id: a new commit
    with the same subject (the patch done again) is exported, and exporting the unchanged tree
    again writes nothing (it said "export would drop one", and its --drop deleted the new patch)."""
    up, series = _series(tmp_path)
    run(series, "apply", "--base", "main", "--upstream", str(up), want=0)
    run(series, "export", "--drop", "one", want=0)
    work = series / ".rebasectl" / "tree"
    (work / "a.txt").write_text((work / "a.txt").read_text().replace("a 30\n", "NEW 30\n"))
    git(work, "commit", "-q", "-am", "fix: one")
    r = run(series, "export", want=0)
    assert "new patch one" in r.stdout, r.stdout
    written = {p.name: p.read_bytes() for p in (series / "patches").iterdir()}
    assert any(b"+NEW 30" in data for data in written.values())
    again = run(series, "export", want=0)
    assert {p.name: p.read_bytes() for p in (series / "patches").iterdir()} == written, again


def test_an_export_drop_killed_after_the_series_was_written(tmp_path: Path) -> None:
    """hostile12 #3: `export --drop one` killed once the series files were written but before
    the tree map: the same command again finishes it and says so (it said "--drop one: no such
    patch id", exit 2); the no-op commit of the dropped patch is never read back as a new patch
    without its diff, by a plain export nor with --force."""
    up, series = _series(tmp_path)
    run(series, "apply", "--base", "main", "--upstream", str(up), want=0)
    r = run(series, "export", "--drop", "one", env={"REBASECTL_FAULT": "kill@txn-move:1"})
    assert r.returncode == -9, r.stderr
    again = run(series, "export", "--drop", "one", want=0)
    assert "one was dropped already" in again.stdout, again.stdout
    run(series, "export", want=0)
    run(series, "export", "--force", want=0)
    assert sorted(p.name for p in (series / "patches").iterdir()) == \
        ["0002-nothing.patch", "0003-two.patch"]
    assert "one" not in [ln.split()[-1] for ln in (series / "series.yaml").read_text(
        ).splitlines() if ln.startswith("- id:")]
