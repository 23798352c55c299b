"""Export never writes over what a person changed by hand in patches/ or series.yaml since the
work tree was built (rebasectl/engine/edits.py): it refuses with one line (exit 1) naming the
files, writes nothing, and each way out it gives works when followed literally.

The scene: World's series applied on its base (five patches: 0001 changes a.txt line 3, 0002
adds e.txt, 0003 touches b, 0004 empty, 0005 changes a.txt line 30).
"""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

from tests.harness.cli import fails, ok, one_error, popen, run
from tests.harness.git import git
from tests.harness.process import resume, wait_stopped
from tests.harness.scenes import (
    World,
    advised,
    applied,
    commit_in,
    conflicted,
    resolve_a,
    tree,
)
from tests.sfix import snapshot


def _patch(series: Path, tail: str) -> Path:
    return next((series / "patches").glob(f"*{tail}.patch"))


def _refused(series: Path, *args: str) -> str:
    """export refused: exit 1, one error line, not a byte of the series changed."""
    before = snapshot(series)
    line = one_error(fails(series, 1, "export", *args), "changed by hand", "nothing written")
    assert snapshot(series) == before
    return line


def _follow(series: Path, advice: str) -> None:
    """Run a `rebasectl ...` command the refusal gave, word for word."""
    words = shlex.split(advice)
    assert words[0] == "rebasectl", advice
    ok(series, *words[1:])


def _rebuild_advice(line: str) -> str:
    """The rebuild a refusal offers when the tree holds nothing of its own."""
    assert "keep them" in line and "holds changes of its own" not in line, line
    found = [a for a in advised(line) if a.startswith("rebasectl apply")]
    assert len(found) == 1, line
    return found[0]


def test_edited_message_refused_then_kept_by_rebuilding(world: World, tmp_path: Path) -> None:
    """A typo fixed in a patch's message after apply: export refuses to put the old message
    back; the advised `rebasectl apply` rebuilds the tree from the edited file, and export then
    keeps the fix."""
    series = applied(world, tmp_path)
    path = _patch(series, "add-e")
    path.write_bytes(path.read_bytes().replace(b"Subject: feat: add e\n",
                                               b"Subject: feat: add e (typo fixed)\n"))
    edited = path.read_bytes()
    line = _refused(series)
    assert "patches/" + path.name + " (edited)" in line, line
    assert "`rebasectl export --force`" in line, line
    _follow(series, _rebuild_advice(line))
    ok(series, "export")
    assert path.read_bytes() == edited
    assert "title: 'feat: add e (typo fixed)'" in (series / "series.yaml").read_text()


def test_edited_hunk_kept_by_rebuilding(world: World, tmp_path: Path) -> None:
    """A hunk edited by hand (the new file's content): refused, then rebuilt and exported, the
    tree and the file both hold the edit."""
    series = applied(world, tmp_path)
    path = _patch(series, "add-e")
    path.write_bytes(path.read_bytes().replace(b"+new file\n", b"+new file, edited\n"))
    edited = path.read_bytes()
    line = _refused(series)
    _follow(series, _rebuild_advice(line))
    assert (tree(series) / "e.txt").read_text() == "new file, edited\n"
    ok(series, "export")
    # the edit kept; the file's index line now names the edited blob (the hand edit left it)
    assert b"+new file, edited\n" in path.read_bytes()
    assert path.read_bytes() != edited


def test_edit_against_a_changed_tree_offers_force_which_keeps_a_copy(
        world: World, tmp_path: Path) -> None:
    """The tree's own commit for the patch changed too (amended): rebuilding would throw that
    away, so only --force is offered; it writes the tree's version and keeps the person's file
    under .rebasectl/overwritten/."""
    series = applied(world, tmp_path)
    wt = tree(series)
    git(wt, "commit", "-q", "--amend", "-m", "feat: change a line 30\n\nReworded in the tree.\n")
    path = _patch(series, "line-30")
    path.write_bytes(path.read_bytes().replace(b"A body line.", b"A body line, edited by hand."))
    mine = path.read_bytes()
    line = _refused(series)
    force, rebuild = advised(line)
    assert force == "rebasectl export --force" and rebuild == "rebasectl apply", line
    assert line.index("--force") < line.index("merge your change back") < line.index(rebuild)
    _follow(series, force)
    assert b"Reworded in the tree." in path.read_bytes()
    copies = list((series / ".rebasectl" / "overwritten").glob(f"*/patches/{path.name}"))
    assert [c.read_bytes() for c in copies] == [mine]
    # the person merges the two by hand, then rebuilds as advised: export keeps the merge
    path.write_bytes(path.read_bytes().replace(b"Reworded in the tree.",
                                               b"Reworded in the tree, edited by hand."))
    _follow(series, rebuild)
    ok(series, "export")
    assert b"Reworded in the tree, edited by hand." in path.read_bytes()


def test_deleted_patch_file_refused_and_force_writes_it_back(world: World,
                                                             tmp_path: Path) -> None:
    series = applied(world, tmp_path)
    path = _patch(series, "touch-b")
    path.unlink()
    line = _refused(series)
    assert f"patches/{path.name} (deleted)" in line, line
    assert line.index("--force") < line.index("rebasectl apply"), line  # the file back first
    force, rebuild = advised(line)
    _follow(series, force)
    assert path.is_file()
    ok(series, "check")
    _follow(series, rebuild)
    ok(series, "export")


def test_file_already_equal_to_export_is_no_conflict(world: World, tmp_path: Path) -> None:
    """The tree reworded a patch and the person made the same edit in its file: nothing lost,
    export goes through."""
    series = applied(world, tmp_path)
    wt = tree(series)
    git(wt, "commit", "-q", "--amend", "-m", "feat: change a line 30\n\nSame edit both sides.\n")
    path = _patch(series, "line-30")
    path.write_bytes(path.read_bytes().replace(b"A body line.", b"Same edit both sides."))
    ok(series, "export")
    assert b"Same edit both sides." in path.read_bytes()


def test_series_metadata_and_comments_edited_by_hand_are_kept(world: World,
                                                              tmp_path: Path) -> None:
    """series.yaml's own fields (why, comments) are carried by export from the file as it is:
    no refusal, the edit stays, even when the tree changed a patch."""
    series = applied(world, tmp_path)
    commit_in(tree(series), "feat: a new one", {"n.txt": "n\n"})
    text = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text("# kept by hand\n" + text.replace(
        "  why: ''\n", "  why: edited by hand\n", 1))
    ok(series, "export")
    now = (series / "series.yaml").read_text()
    assert now.startswith("# kept by hand\n") and "why: edited by hand" in now, now


def test_title_edited_by_hand_refused_and_advice_keeps_it(world: World, tmp_path: Path) -> None:
    """export writes each patch's subject as its title; a title changed only in series.yaml is
    refused, and the advice (the Subject: line too, then rebuild) makes export keep it."""
    series = applied(world, tmp_path)
    yaml = series / "series.yaml"
    yaml.write_text(yaml.read_text().replace("title: 'feat: add e'", "title: 'feat: add e file'"))
    line = _refused(series)
    assert "series.yaml (title of add-e)" in line and "Subject: line" in line, line
    path = _patch(series, "add-e")
    path.write_bytes(path.read_bytes().replace(b"Subject: feat: add e\n",
                                               b"Subject: feat: add e file\n"))
    _follow(series, _rebuild_advice(line))
    ok(series, "export")
    assert "title: 'feat: add e file'" in yaml.read_text()


def test_order_edited_by_hand_refused_and_rebuild_keeps_it(world: World, tmp_path: Path) -> None:
    series = applied(world, tmp_path)
    yaml = series / "series.yaml"
    text = yaml.read_text()
    head, _, rest = text.partition("patches:\n")
    entries = ["- id:" + e for e in rest.split("- id:")[1:]]
    e2, e3 = next(e for e in entries if "id: add-e" in e), next(e for e in entries
                                                                 if "touch-b" in e)
    i2, i3 = entries.index(e2), entries.index(e3)
    entries[i2], entries[i3] = e3, e2
    yaml.write_text(head + "patches:\n" + "".join(entries))
    line = _refused(series)
    assert "series.yaml (order)" in line, line
    _follow(series, _rebuild_advice(line))
    ok(series, "export")
    now = yaml.read_text()
    assert now.index("id: touch-b") < now.index("id: add-e"), now


def test_entry_removed_by_hand_refused_and_rebuild_leaves_it_out(world: World,
                                                                  tmp_path: Path) -> None:
    """An entry taken out of series.yaml after apply: export would bring its commit back as a
    new patch; refused, and the rebuild it advises leaves the patch out."""
    series = applied(world, tmp_path)
    yaml = series / "series.yaml"
    text = yaml.read_text()
    start = text.index("- id: add-e\n")
    yaml.write_text(text[:start] + text[text.index("- id: touch-b\n"):])
    line = _refused(series)
    assert "series.yaml (add-e removed)" in line, line
    _follow(series, _rebuild_advice(line))
    assert not (tree(series) / "e.txt").exists()
    ok(series, "export")
    assert "add-e" not in yaml.read_text()
    assert sorted(p.name for p in (series / "patches").glob("0006*")) == []


def test_base_edited_by_hand_refused_and_rebuild_keeps_it(world: World, tmp_path: Path) -> None:
    """series.yaml's base changed by hand after apply: export would write the tree's base back;
    the rebuild it advises applies onto the edited base, and export keeps it."""
    series = applied(world, tmp_path)
    yaml = series / "series.yaml"
    yaml.write_text(yaml.read_text().replace(world.sc.base, world.clean))
    line = _refused(series)
    assert "series.yaml (base)" in line, line
    rebuild = _rebuild_advice(line)
    assert "--base" not in rebuild, line  # the edited base is the one wanted
    _follow(series, rebuild)
    ok(series, "export")
    assert f"base: {world.clean}" in yaml.read_text()


def test_apply_state_from_before_baselines_still_continues(world: World,
                                                          tmp_path: Path) -> None:
    """An apply stopped by an older rebasectl (its state has no baseline): continue finishes
    it and export writes as before, saying it could not check."""
    series = conflicted(world, tmp_path)
    state = series / ".rebasectl" / "apply-state.json"
    data = json.loads(state.read_text())
    del data["baseline"]
    state.write_text(json.dumps(data))
    resolve_a(series)
    ok(series, "continue")
    assert "not checked" in ok(series, "export").stdout


def test_older_tree_map_without_baseline_exports_as_before(world: World,
                                                           tmp_path: Path) -> None:
    """A tree map written before baselines: export goes on (as it did) and says it could not
    check; the next export has a baseline."""
    series = applied(world, tmp_path)
    tmap = series / ".rebasectl" / "tree.json"
    data = json.loads(tmap.read_text())
    del data["baseline"]
    tmap.write_text(json.dumps(data))
    out = ok(series, "export").stdout
    assert "not checked" in out, out
    assert "baseline" in json.loads(tmap.read_text())


def _killed_apply(world: World, tmp_path: Path, point: str) -> tuple[Path, Path]:
    """World's series with an apply killed at ``point``; patch 1's file then edited by hand."""
    series = tmp_path / "series"
    shutil.copytree(world.sc.series, series)
    r = run(series, "apply", env={"REBASECTL_FAULT": f"kill@{point}"})
    assert r.returncode == -9, (r.returncode, r.stdout, r.stderr)
    path = _patch(series, "0001-change-a-line-3")
    path.write_bytes(path.read_bytes().replace(b"+PATCH 3", b"+PATCH 3 edited"))
    return series, path


def test_kill_after_apply_recorded_keeps_the_record(world: World, tmp_path: Path) -> None:
    """apply killed once every patch was committed and its state (with the baseline) saved,
    before the tree moved; a patch file edited by hand, the apply finished by `continue`:
    export still sees the edit as the person's."""
    series, path = _killed_apply(world, tmp_path, "state:3")
    ok(series, "continue")
    line = _refused(series)
    assert f"patches/{path.name} (edited)" in line, line


def test_edit_before_the_patch_was_applied_goes_into_the_tree(world: World,
                                                              tmp_path: Path) -> None:
    """apply killed before it committed any patch; the edit made then is read by `continue`,
    which applies the patch from it: the tree carries the edit and export writes it (no
    refusal: nothing of the person's is overwritten)."""
    series, path = _killed_apply(world, tmp_path, "state:2")
    ok(series, "continue")
    ok(series, "export")
    assert b"+PATCH 3 edited\n" in path.read_bytes()


def test_kill_in_export_then_rerun_is_not_taken_for_hand_edits(world: World,
                                                               tmp_path: Path) -> None:
    """export killed after its file moved into place (the tree map's baseline still the
    apply's): the rerun takes that file for its own result, not a hand edit, and still sees
    the edit the person made since."""
    series = applied(world, tmp_path)
    git(tree(series), "commit", "-q", "--amend", "-m", "feat: change a line 30\n\nReworded.\n")
    r = run(series, "export", env={"REBASECTL_FAULT": "kill@txn-move:1"})
    assert r.returncode == -9, (r.returncode, r.stdout, r.stderr)
    mine = _patch(series, "add-e")
    mine.write_bytes(mine.read_bytes().replace(b"+new file\n", b"+new file, mine\n"))
    line = one_error(fails(series, 1, "export"), "changed by hand")  # rolls the write forward
    assert f"patches/{mine.name} (edited)" in line and "line-30" not in line, line
    assert b"Reworded." in _patch(series, "line-30").read_bytes()
    # the tree map still names the tip before the amend, so apply would refuse the tree:
    # --force, then the person's copy back (nothing to merge here), then the rebuild
    force, rebuild = advised(line)
    _follow(series, force)
    copy = next((series / ".rebasectl" / "overwritten").glob(f"*/patches/{mine.name}"))
    mine.write_bytes(copy.read_bytes())
    _follow(series, rebuild)
    ok(series, "export")
    assert b"Reworded." in _patch(series, "line-30").read_bytes()
    assert b"+new file, mine\n" in mine.read_bytes()


def test_bump_refuses_an_edit_made_while_it_ran_and_its_rerun_carries_it(
        world: World, tmp_path: Path) -> None:
    """bump reads the series, carries it, exports at its end: a patch file edited in between
    (the bump frozen at its `carried` point) is refused the same way, and the rerun it advises
    carries the file as it is now, the edit included."""
    series = applied(world, tmp_path)
    ok(series, "export")  # nothing to write: the tree holds the series as it is
    proc = popen(series, "bump", "--to", world.clean,
                 env={"REBASECTL_FAULT": "stop@carried:1"})
    wait_stopped(proc)
    path = _patch(series, "add-e")
    path.write_bytes(path.read_bytes().replace(b"+new file\n", b"+new file, edited\n"))
    resume(proc)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, (proc.returncode, err)
    line = one_error(err, "changed by hand while this bump ran", f"patches/{path.name} (edited)",
                     "nothing written")
    assert b"+new file, edited\n" in path.read_bytes()
    rerun = advised(line)
    assert len(rerun) == 1 and rerun[0].startswith("rebasectl bump --to "), line
    _follow(series, rerun[0])
    assert b"+new file, edited\n" in path.read_bytes()
    assert world.clean in (series / "series.yaml").read_text()


def _redated(world: World, tmp_path: Path) -> tuple[Path, list[Path]]:
    """World's series applied, every commit of its tree given a new author date: export then
    rewrites all five patch files (in name order, series.yaml unchanged)."""
    series = applied(world, tmp_path)
    git(tree(series), "rebase", "-q", "--exec",
        "git commit -q --amend --no-edit --allow-empty --date=2030-01-02T03:04:05Z",
        world.sc.base)
    files = sorted((series / "patches").glob("*.patch"))
    assert len(files) == 5
    return series, files


def test_edit_after_a_killed_export_is_kept_when_the_next_command_finishes_it(
        world: World, tmp_path: Path) -> None:
    """export killed after 2 of its 5 moves; the person then edits a file it had not written
    yet (patch 4) and one it had (patch 1). The next command (status) finishes the export and
    says so; patch 4 gets the export's version and the person's is kept, named, under
    .rebasectl/overwritten/; patch 1 (already the export's) keeps the edit. Nothing lost."""
    series, files = _redated(world, tmp_path)
    r = run(series, "export", env={"REBASECTL_FAULT": "kill@txn-move:2"})
    assert r.returncode == -9, (r.returncode, r.stdout, r.stderr)
    assert b"Date: Wed, 02 Jan 2030" in files[1].read_bytes()
    assert b"Date: Wed, 02 Jan 2030" not in files[3].read_bytes()
    late, early = files[3], files[0]
    late.write_bytes(late.read_bytes().replace(b"Subject: ", b"Subject: HANDEDIT "))
    mine_late = late.read_bytes()
    early.write_bytes(early.read_bytes().replace(b"Subject: ", b"Subject: EARLY "))
    mine_early = early.read_bytes()
    err = ok(series, "status").stderr
    said = [x for x in err.splitlines() if "finished the export interrupted at " in x]
    assert len(said) == 1 and ": 3 more files written;" in said[0], err
    assert f"patches/{late.name} had been changed since the interruption" in said[0], err
    assert early.name not in said[0], err
    copies = list((series / ".rebasectl" / "overwritten").glob(f"*/patches/{late.name}"))
    assert [c.read_bytes() for c in copies] == [mine_late]
    assert str(copies[0].parent.parent.relative_to(series)) + "/" in said[0], said
    assert b"Date: Wed, 02 Jan 2030" in late.read_bytes() and b"HANDEDIT" not in late.read_bytes()
    assert early.read_bytes() == mine_early
    assert not (series / ".rebasectl" / "txn").exists()
    # the person brings the change back as the line says: export now guards both edits
    late.write_bytes(copies[0].read_bytes())
    line = _refused(series)
    assert f"patches/{late.name} (edited)" in line and f"patches/{early.name} (edited)" in line


def test_export_interrupted_by_ctrl_c_is_finished_and_said_by_status(
        world: World, tmp_path: Path) -> None:
    """Ctrl-C during the moves: the message sends the person to `rebasectl status`, which
    finishes the export and says so (nothing changed by hand: nothing kept)."""
    series, files = _redated(world, tmp_path)
    r = run(series, "export", env={"REBASECTL_FAULT": "int@txn-move:3"})
    assert r.returncode == 130 and "`rebasectl status`" in r.stderr, (r.returncode, r.stderr)
    err = ok(series, "status", "--json").stderr
    assert "finished the export interrupted at " in err and ": 2 more files written" in err, err
    assert "changed since" not in err and not (series / ".rebasectl" / "overwritten").exists()
    assert all(b"Date: Wed, 02 Jan 2030" in f.read_bytes() for f in files)
    assert ok(series, "status").stderr.count("finished") == 0  # said once


def test_stopped_patch_message_edited_during_the_stop_is_committed_not_refused(
        world: World, tmp_path: Path) -> None:
    """At a stop, the person fixes the stopped patch's own Subject: line in its file;
    `continue` commits from the file as it is now (the new subject), so export writes that
    very message back: no refusal, the edit kept in file, commit and title."""
    series = conflicted(world, tmp_path)
    path = _patch(series, "0001-change-a-line-3")
    path.write_bytes(path.read_bytes().replace(b"fix: change a line 3\n",
                                               b"fix: change a line 3 (HANDCUR)\n", 1))
    resolve_a(series)
    ok(series, "continue")
    subject = git(tree(series), "log", "-1", "--format=%s", "HEAD~4").stdout.strip()
    assert subject.endswith("(HANDCUR)"), subject
    ok(series, "export")
    assert b"fix: change a line 3 (HANDCUR)\n" in path.read_bytes()
    assert "line 3 (HANDCUR)" in (series / "series.yaml").read_text()


def test_stopped_patch_diff_edited_during_the_stop_is_still_refused(world: World,
                                                                   tmp_path: Path) -> None:
    """A hunk of the stopped patch's file edited during the stop is not what continue
    commits (the resolution in the tree is): export still refuses to write over it."""
    series = conflicted(world, tmp_path)
    path = _patch(series, "0001-change-a-line-3")
    path.write_bytes(path.read_bytes().replace(b"+PATCH 3\n", b"+PATCH 3 by hand\n"))
    resolve_a(series)
    said = ok(series, "continue").stderr
    assert "its diff changed in the patch file after the stop was merged" in said, said
    line = _refused(series)
    assert f"patches/{path.name} (edited)" in line, line
    # hostile8 #1: the rebuild the line advises replayed the resolution recorded under the
    # edited diff, and the edit was gone; none is recorded for it, so the rebuild stops there
    # with the edit in the conflict
    rebuild = _rebuild_advice(line)
    stop = run(series, *shlex.split(rebuild)[1:], want=1)
    assert "stopped at 1/" in stop.stdout and "PATCH 3 by hand" in (
        tree(series) / "a.txt").read_text(), stop


def test_patch_file_cut_short_is_refused_with_its_parse_error(world: World,
                                                              tmp_path: Path) -> None:
    """A patch file cut after its `---` line: export refuses it with the reader's own error,
    the line `check` gives (exit 2), not as an edit to rebuild from (apply cannot read it
    either); once the file is whole again, export goes through."""
    series = applied(world, tmp_path)
    path = _patch(series, "line-30")
    whole = path.read_bytes()
    path.write_bytes(whole[:whole.index(b"\n---\n") + 5])
    said = one_error(fails(series, 2, "check"), f"patches/{path.name}")
    before = snapshot(series)
    assert one_error(fails(series, 2, "export"), f"patches/{path.name}") == said
    assert snapshot(series) == before
    assert "edited" not in said and "rebasectl apply" not in said, said
    path.write_bytes(whole)
    ok(series, "export")


def test_title_advice_followed_literally_never_reverts_the_title(world: World,
                                                                 tmp_path: Path) -> None:
    """A title changed in series.yaml alone: the refusal names the Subject: line to change
    first, by file. Running only its commands (`rebasectl apply`, then `rebasectl export`)
    leaves the title as the person wrote it and is refused again; with the Subject: step
    done, the same commands keep the title in series.yaml and in the patch."""
    series = applied(world, tmp_path)
    yaml = series / "series.yaml"
    yaml.write_text(yaml.read_text().replace("title: 'feat: add e'", "title: 'feat: add e file'"))
    path = _patch(series, "add-e")
    line = _refused(series)
    step = f"first set the Subject: line of patches/{path.name} to its new title, then "
    assert step in line, line
    rebuild = _rebuild_advice(line)
    assert line.index(step) < line.index(rebuild), line
    _follow(series, rebuild)  # the Subject: step left out
    again = _refused(series)
    assert "series.yaml (title of add-e)" in again and step in again, again
    assert "title: 'feat: add e file'" in yaml.read_text()
    path.write_bytes(path.read_bytes().replace(b"Subject: feat: add e\n",
                                               b"Subject: feat: add e file\n"))
    _follow(series, rebuild)
    ok(series, "export")
    assert "title: 'feat: add e file'" in yaml.read_text()
    assert b"Subject: feat: add e file\n" in path.read_bytes()


def test_rebuild_after_resolutions_is_offered_and_replays_them(world: World,
                                                                tmp_path: Path) -> None:
    """The tree was made onto another base with a conflict resolved at a stop: its patches
    differ from their files by the apply's own work, which a rebuild redoes (the resolution
    was recorded), so the refusal says so, not that a rebuild would lose anything; its
    rebuild, followed literally, replays the resolution and export keeps both."""
    series = conflicted(world, tmp_path)
    resolve_a(series)
    ok(series, "continue")
    resolved = (tree(series) / "a.txt").read_text()
    assert "PATCH 3 + UPSTREAM 3" in resolved
    path = _patch(series, "add-e")
    path.write_bytes(path.read_bytes().replace(b"+new file\n", b"+new file, edited\n"))
    line = _refused(series)
    assert "would lose" not in line and "replays the resolutions rebasectl recorded" in line
    rebuild = _rebuild_advice(line)
    assert rebuild == f"rebasectl apply --base {world.sc.new_base[:12]}", line
    _follow(series, rebuild)
    assert (tree(series) / "a.txt").read_text() == resolved
    ok(series, "export")
    assert b"+new file, edited\n" in path.read_bytes()
    assert b"UPSTREAM 3" in _patch(series, "0001-change-a-line-3").read_bytes()


def test_rebuild_advice_names_the_skip_to_repeat(world: World, tmp_path: Path) -> None:
    """A patch skipped when the tree was built stops the rebuild again: the refusal names it
    and the skip, and following the whole advice gets the edit exported."""
    series = conflicted(world, tmp_path)
    ok(series, "skip")
    path = _patch(series, "add-e")
    path.write_bytes(path.read_bytes().replace(b"+new file\n", b"+new file, edited\n"))
    line = _refused(series)
    assert "it stops again at change-a-line-3, skipped before" in line, line
    rebuild = _rebuild_advice(line)
    assert "`rebasectl skip`" in line and line.index(rebuild) < line.index("rebasectl skip")
    fails(series, 1, *shlex.split(rebuild)[1:])
    ok(series, "skip")
    ok(series, "export")
    assert b"+new file, edited\n" in path.read_bytes()


def test_a_command_finishing_an_export_is_named_as_itself_to_a_second_one(
        world: World, tmp_path: Path) -> None:
    """hostile8 #9: while a command finished an interrupted export, a second rebasectl was
    told "another rebasectl is running: `rebasectl recover`", a command that does not exist.
    It names the command the person ran."""
    series, _ = _redated(world, tmp_path)
    assert run(series, "export", env={"REBASECTL_FAULT": "int@txn-move:3"}).returncode == 130
    first = popen(series, "status", env={"REBASECTL_FAULT": "stop@txn-move:1"})
    try:
        wait_stopped(first)  # holding the lock, mid-way through the finishing
        line = one_error(fails(series, 2, "check"), "another rebasectl is running")
        assert "`rebasectl status` (pid" in line and "recover" not in line, line
    finally:
        resume(first)
    first.communicate(timeout=300)
    assert first.returncode == 0


def test_an_export_stopped_after_its_last_write_is_said_so(world: World,
                                                          tmp_path: Path) -> None:
    """hostile8 #10: Ctrl-C after the last file moved into place, before the journal was
    cleared: the finishing line said "0 files written", which read as an export that did
    nothing. It says every file had been written."""
    series, files = _redated(world, tmp_path)
    last = len(files)  # the re-dated patch files are what it writes
    r = run(series, "export", env={"REBASECTL_FAULT": f"int@txn-move:{last}"})
    assert r.returncode == 130, (r.returncode, r.stderr)
    err = ok(series, "status").stderr
    assert "every file had been written before the interruption" in err, err
    assert "0 more files" not in err and "0 files" not in err


def test_a_file_deleted_after_a_killed_export_is_said_written_again(world: World,
                                                                    tmp_path: Path) -> None:
    """hostile8 #4: a patch file the interrupted export had not written yet, deleted by hand
    before the next command: the finishing wrote it again without a word (a delete is a hand
    change export itself refuses). The line names it, and how a patch is left out."""
    series, files = _redated(world, tmp_path)
    assert run(series, "export", env={"REBASECTL_FAULT": "kill@txn-move:2"}).returncode == -9
    files[3].unlink()
    err = ok(series, "status").stderr
    assert f"patches/{files[3].name} had been deleted since the interruption and is written " \
        "again (`rebasectl export --drop ID` leaves a patch out)" in err, err
    assert files[3].is_file()


def test_a_copy_made_by_a_killed_finishing_is_named_by_the_next(world: World,
                                                               tmp_path: Path) -> None:
    """hostile8 #3: the finishing itself killed after it had copied the person's file away and
    written the export's: the next finishing said nothing of the copy, which no line ever
    named. The copies made so far are kept with the journal and named by whichever
    finishing ends."""
    series, files = _redated(world, tmp_path)
    assert run(series, "export", env={"REBASECTL_FAULT": "kill@txn-move:2"}).returncode == -9
    late = files[3]
    late.write_bytes(late.read_bytes().replace(b"Subject: ", b"Subject: HANDC "))
    mine = late.read_bytes()
    # the journal's 4th move (each counts, done or not): killed right after patch 4's write
    killed = run(series, "status", env={"REBASECTL_FAULT": "kill@txn-move:4"})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    assert b"HANDC" not in late.read_bytes()
    err = ok(series, "status").stderr
    said = [x for x in err.splitlines() if "finished the export interrupted at " in x]
    assert len(said) == 1 and f"patches/{late.name} had been changed" in said[0], err
    copies = list((series / ".rebasectl" / "overwritten").glob(f"*/patches/{late.name}"))
    assert [c.read_bytes() for c in copies] == [mine]
