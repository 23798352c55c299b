"""The person's files where the next patches write (hostile6 findings 3 and 4).

3: continue/skip's refusal advised `git stash`, `rebasectl continue`, `git stash pop`; when the
continue stopped at a later patch the pop failed ("needs merge") and status never said a stash
held the edits; the refused run also printed "Applying (3/3) ...: conflict" though nothing was
applied. Now the pop comes once the apply is done, status says a stash waits, and a refused run
announces no stop.

4: an untracked file where the move writes gave git's raw "Untracked working tree file ... would
be overwritten by merge", exit 2, and status said "interrupted"; now it is the same one-line
refusal (exit 1) naming the file, before the tree moves, with a way out that works.

The scene: patch 1 (a.txt) and patch 3 (b.txt, and it adds m.txt) conflict with upstream,
patch 2 adds n.txt."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from rebasectl.commands.resume import cont
from rebasectl.infra.errors import ConflictError
from rebasectl.model.workspace import Workspace
from tests.harness.cli import ok, one_error, run
from tests.harness.git import Repo, git, git_out
from tests.harness.scenes import advised, relocate, resolve_all, tree

TEXT = "".join(f"line {i}\n" for i in range(1, 30))
NOTE = "# my note\n"


_TEMPLATE: list[Path] = []  # the scene, built once per worker and relocated per test


def scene(tmp_path: Path) -> Path:
    """A series stopped at patch 1 of 3 on the new base (a copy of one built once)."""
    if not _TEMPLATE:
        _TEMPLATE.append(_build_scene(tmp_path.parent / "in-the-way-scene"))
    series = tmp_path / "series"
    relocate(_TEMPLATE[0], series)
    return series


def _build_scene(tmp_path: Path) -> Path:
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"a.txt": TEXT, "b.txt": TEXT})
    up.branch("feature")  # b's conflict is not a's (rerere would resolve it as a's)
    up.commit("upstream", {"a.txt": TEXT.replace("line 3\n", "UP 3\n"),
                           "b.txt": TEXT.replace("line 3\n", "UP B 3\n")})
    new_base = up.head()
    up.checkout("feature")
    up.commit("fix: a", {"a.txt": TEXT.replace("line 3\n", "PATCH 3\n")})
    up.commit("feat: n", {"n.txt": "new file\n"})
    up.commit("fix: b", {"b.txt": TEXT.replace("line 3\n", "PATCH B 3\n"),
                         "m.txt": "added by patch 3\n"})
    series = tmp_path / "series"
    series.mkdir()
    ok(series, "import", f"{base}..feature", "--repo", str(up.path))
    assert "stopped at 1/3" in run(series, "apply", "--base", new_base, want=1).stdout
    return series


def resolve(series: Path, name: str) -> None:
    resolve_all(tree(series) / name, "RESOLVED 3\n")
    git(tree(series), "add", name)


def follow(series: Path, message: str, at_stop: str) -> None:
    """Run what ``message`` advises, in order: `mv`, git and rebasectl commands; a continue
    that stops (exit 1) is resolved in ``at_stop`` and continued, as the advice says
    ("resolving any stop as usual")."""
    stopped = False
    for command in advised(message):
        argv = shlex.split(command)
        if argv[0] == "mv":
            shutil.move(argv[1], argv[2])
        elif argv[0] == "git":
            git(series, *argv[1:])
        elif argv[1] == "continue" and run(series, "continue").returncode == 1:
            status = ok(series, "status").stdout
            assert "stopped at b in" in status, status
            if "git" in message and "stash" in message:  # the reminder while the stash waits
                assert "stash(es) in" in status and "once the apply is done" in status, status
            resolve(series, at_stop)
            ok(series, "continue")
            stopped = True
    assert stopped  # the advice was followed through a later stop
    assert not (series / ".rebasectl" / "apply-state.json").exists()


def test_the_stash_advice_works_through_a_later_stop(tmp_path: Path) -> None:
    series = scene(tmp_path)
    resolve(series, "a.txt")
    b = tree(series) / "b.txt"
    b.write_text(b.read_text() + NOTE)
    said: list[str] = []
    with pytest.raises(ConflictError, match="in the way") as refused:
        cont(Workspace(series), notify=said.append)  # the news a slow run prints
    assert "1/3 a: committed " in str(refused.value)
    assert not [x for x in said if "3/3" in x], said  # refused: no stop was announced
    r = run(series, "continue", want=1)  # refused again, the same way
    line = one_error(r.stderr, "b.txt", "in the way")
    assert b.read_text().endswith(NOTE)
    follow(series, line, "b.txt")
    assert b.read_text() == TEXT.replace("line 3\n", "RESOLVED 3\n") + NOTE
    assert git_out(tree(series), "stash", "list") == ""
    assert "stash(es) in" not in ok(series, "status").stdout
    assert "RESOLVED 3" in git_out(tree(series), "show", "HEAD:b.txt")


def test_skip_gives_the_same_advice_and_it_works(tmp_path: Path) -> None:
    series = scene(tmp_path)
    b = tree(series) / "b.txt"
    b.write_text(b.read_text() + NOTE)
    line = one_error(run(series, "skip", want=1).stderr, "b.txt", "in the way", ": skipped")
    follow(series, line, "b.txt")
    assert b.read_text().endswith(NOTE) and "RESOLVED 3" in b.read_text()


def test_an_untracked_file_where_a_patch_adds_one_is_refused_and_kept(tmp_path: Path) -> None:
    series = scene(tmp_path)
    resolve(series, "a.txt")
    n = tree(series) / "n.txt"
    n.write_text("draft\n")
    r = run(series, "continue", want=1)
    line = one_error(r.stderr, "n.txt", "untracked", "in the way")
    assert "overwritten" not in r.stderr and "Applying (3/3)" not in r.stderr, r.stderr
    assert n.read_text() == "draft\n"
    status = ok(series, "status").stdout
    assert "2/3 applied, refused" in status and "work tree is at 1/3 a)" in status, status
    again = run(series, "continue", want=1)  # refused again, nothing moved
    assert one_error(again.stderr, "n.txt", "in the way")
    follow(series, line, "b.txt")
    assert (tree(series) / "n.txt.mine").read_text() == "draft\n"
    assert n.read_text() == "new file\n"


def test_an_ignored_file_where_a_patch_adds_one_is_refused(tmp_path: Path) -> None:
    series = scene(tmp_path)
    git_dir = Path(git_out(tree(series), "rev-parse", "--git-common-dir"))
    (git_dir / "info").mkdir(exist_ok=True)
    (git_dir / "info" / "exclude").write_text("n.txt\n")
    n = tree(series) / "n.txt"
    n.write_text("draft\n")
    line = one_error(run(series, "skip", want=1).stderr, "n.txt", "in the way")
    follow(series, line, "b.txt")
    assert (tree(series) / "n.txt.mine").read_text() == "draft\n"


def test_an_untracked_file_where_the_stop_writes_is_refused(tmp_path: Path) -> None:
    """Patch 3 adds m.txt and stops: its conflict write replaced the person's untracked m.txt
    without a word (git's move never sees it: the tip before patch 3 has no m.txt)."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    m = tree(series) / "m.txt"
    m.write_text("draft\n")
    line = one_error(run(series, "continue", want=1).stderr, "m.txt", "untracked", "in the way")
    assert m.read_text() == "draft\n"
    follow(series, line, "b.txt")
    assert (tree(series) / "m.txt.mine").read_text() == "draft\n"
    assert m.read_text() == "added by patch 3\n"


REFUSED = "going on was refused, and the reason still holds: "


def _refusal_in_status(series: Path) -> str:
    """status's line of the refusal that holds (and that it says refused, not interrupted)."""
    out = ok(series, "status").stdout
    head = next(x for x in out.splitlines() if x.startswith("apply in progress"))
    assert "refused in" in head and "interrupted" not in out, out
    return next(x for x in out.splitlines() if x.startswith(REFUSED))


@pytest.mark.parametrize(("command", "name", "what"), [
    ("continue", "n.txt", "untracked n.txt"),
    ("skip", "n.txt", "untracked n.txt"),
    ("continue", "b.txt", "your uncommitted changes to b.txt")])
def test_status_says_a_refusal_and_its_advice_works(tmp_path: Path, command: str, name: str,
                                                    what: str) -> None:
    """hostile6: after continue/skip refused (an untracked file where a patch adds one, an edit
    where the next stop writes), status said the apply was "interrupted"; nothing was. Now it
    says refused, with the refusal's own reason and way past, the same words the command said
    (and in the JSON); following status's advice finishes the apply, and status no longer says
    refused once a run got past it."""
    series = scene(tmp_path)
    if command == "continue":
        resolve(series, "a.txt")
    mine = tree(series) / name
    mine.write_text(mine.read_text() + NOTE if mine.exists() else "draft\n")
    said = one_error(run(series, command, want=1).stderr, name, "in the way")
    line = _refusal_in_status(series)
    reason = line.removeprefix(REFUSED).removesuffix(
        "; `rebasectl abort` gives up")
    assert reason.startswith(f"{tree(series)}: {what} in the way") and \
        said.endswith(reason), (reason, said)  # said: after what the run committed or skipped
    assert advised(line) == [*advised(said), "rebasectl abort"], (line, said)
    got = json.loads(ok(series, "status", "--json").stdout)["apply_in_progress"]["refused"]
    assert got == reason
    follow(series, reason, "b.txt")  # status's own advice
    if name == "n.txt":
        assert (tree(series) / "n.txt.mine").read_text() == "draft\n"
    else:
        assert mine.read_text().endswith(NOTE) and "RESOLVED 3" in mine.read_text()
    assert "refused" not in ok(series, "status").stdout


def _refused_then_moved_away(tmp_path: Path) -> Path:
    """A continue refused for an untracked n.txt where the next patch writes (status says so),
    then the file moved away as the refusal advised: the next run may go on."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    n = tree(series) / "n.txt"
    n.write_text("draft\n")
    run(series, "continue", want=1)
    _refusal_in_status(series)
    shutil.move(n, tree(series) / "n.txt.mine")
    return series


def test_a_refusal_then_a_stop_is_a_stop(tmp_path: Path) -> None:
    """The continue after a refusal that stops at a later patch clears the refusal: status says
    stopped there, with the stop's advice."""
    series = _refused_then_moved_away(tmp_path)
    run(series, "continue", want=1)  # stops at patch 3 (b.txt)
    out = ok(series, "status").stdout
    assert "stopped at b in" in out and "refused" not in out, out
    assert json.loads(ok(series, "status", "--json").stdout)["apply_in_progress"][
        "refused"] is None


@pytest.mark.parametrize(("fault", "code"), [("kill@state", -9), ("kill@worktree", -9),
                                             ("int@state", 130)])
def test_a_kill_after_a_refusal_is_an_interruption(tmp_path: Path, fault: str,
                                                   code: int) -> None:
    """A run after a refusal killed at a boundary (SIGKILL at its first state save, or after it
    moved the tree; Ctrl-C at the save): status says interrupted, not the old refusal; continue
    goes on."""
    series = _refused_then_moved_away(tmp_path)
    killed = run(series, "continue", env={"REBASECTL_FAULT": fault})
    assert killed.returncode == code, (killed.returncode, killed.stderr)
    out = ok(series, "status").stdout
    assert "interrupted in" in out and "refused" not in out, out
    assert advised(out.strip().splitlines()[-1])[0] == "rebasectl continue", out
    run(series, "continue", want=1)  # goes on, stops at patch 3
    assert "stopped at b in" in ok(series, "status").stdout


def test_a_state_file_from_before_refusals_were_kept_loads(tmp_path: Path) -> None:
    """apply-state.json written before the `refused` field (a refusal then): loads as it did,
    status says interrupted with continue, and continue goes on."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    n = tree(series) / "n.txt"
    n.write_text("draft\n")
    run(series, "continue", want=1)
    path = series / ".rebasectl" / "apply-state.json"
    data = json.loads(path.read_text())
    assert data.pop("refused").startswith(f"{tree(series)}: untracked n.txt")
    assert data.pop("refused_paths") == [["untracked", "n.txt"]]
    path.write_text(json.dumps(data))
    out = ok(series, "status").stdout
    assert "2/3 applied, interrupted" in out and "refused" not in out, out
    shutil.move(n, tree(series) / "n.txt.mine")
    run(series, "continue", want=1)  # stops at patch 3
    assert "stopped at b in" in ok(series, "status").stdout


# -- hostile7 findings 3 and 11: what holds after a refusal, read from the tree as it is now ----
def _state(series: Path) -> bytes:
    return (series / ".rebasectl" / "apply-state.json").read_bytes()


def _moved_line(series: Path) -> str:
    """status's line for a HEAD the person moved (its header says so, not refused)."""
    out = ok(series, "status").stdout
    head = next(x for x in out.splitlines() if x.startswith("apply in progress"))
    assert "HEAD moved in" in head and "refused" not in out, out
    return next(x for x in out.splitlines() if "HEAD moved to" in x)


def _refused_then_committed(tmp_path: Path) -> tuple[Path, Path]:
    """continue refused for the person's edit to b.txt, which they then commit in the tree:
    the series and b.txt."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    b = tree(series) / "b.txt"
    b.write_text(b.read_text() + NOTE)
    run(series, "continue", want=1)
    git(tree(series), "commit", "-qam", "my own commit")
    return series, b


@pytest.mark.parametrize("command", ["continue", "skip"])
def test_a_commit_made_after_a_refusal_is_refused_never_dropped(tmp_path: Path,
                                                              command: str) -> None:
    """hostile7 3: after continue was refused for an edit in the way, the person committed it
    in the tree; status still said refused for "your uncommitted changes" and the next continue
    moved the tree on, the commit left in the reflog only. Now status and continue (and skip)
    say HEAD moved, change nothing, and the advice, followed literally, keeps the change
    through the apply."""
    series, b = _refused_then_committed(tmp_path)
    mine, before = git_out(tree(series), "rev-parse", "HEAD"), _state(series)
    line = _moved_line(series)
    said = one_error(run(series, command, want=1).stderr, "HEAD moved to", "reset --soft")
    assert said == f"rebasectl: error: {line}"  # status says what the command says
    assert git_out(tree(series), "rev-parse", "HEAD") == mine and _state(series) == before
    soft, then = advised(said)
    assert then == "rebasectl continue", said
    git(series, *shlex.split(soft)[1:])
    again = one_error(run(series, "continue", want=1).stderr, "b.txt", "in the way")
    follow(series, again, "b.txt")  # the changes, staged by the reset, stashed and popped
    assert b.read_text() == TEXT.replace("line 3\n", "RESOLVED 3\n") + NOTE


def test_skip_at_a_stop_refuses_a_commit_and_its_advice_works(tmp_path: Path) -> None:
    """At a stop, `git commit` of the resolution then `skip`: skip recorded the skip and moved
    the tree on, the commit lost. Now it refuses before recording anything, as continue does,
    and its advice (reset --soft, then skip) skips the patch, keeping a copy of the edit."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    git(tree(series), "commit", "-qm", "resolved by hand")
    mine, before = git_out(tree(series), "rev-parse", "HEAD"), _state(series)
    out = ok(series, "status").stdout
    assert "stopped at a in" in out and "HEAD moved to" in out, out
    said = one_error(run(series, "skip", want=1).stderr, "HEAD moved to", "waits on")
    assert git_out(tree(series), "rev-parse", "HEAD") == mine and _state(series) == before
    soft, then, _ = advised(said)
    assert then == "rebasectl skip", said
    git(series, *shlex.split(soft)[1:])
    r = run(series, "skip", want=1)  # skipped; stops at patch 3
    assert "1/3 a: skipped" in r.stderr and "kept 1 file(s) of a" in r.stderr, r.stderr
    assert json.loads(_state(series))["skipped"] == ["a"]
    kept = list((series / ".rebasectl" / "aborted").glob("*/edited/a.txt"))
    assert [k.read_text() for k in kept] == [TEXT.replace("line 3\n", "RESOLVED 3\n")]


def test_a_head_moved_off_the_apply_is_refused_and_abort_keeps_its_commit(
        tmp_path: Path) -> None:
    """After a refusal the person checked out another commit in the tree and committed there
    (built on none of the apply's commits): continue refuses; the advice, abort then apply
    again, keeps the commit (format-patch) and the untracked file, replays patch 1's resolution
    and stops at patch 3."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    (tree(series) / "n.txt").write_text("draft\n")
    run(series, "continue", want=1)
    git(tree(series), "checkout", "-q", "--detach", "HEAD~2")  # the series' own base
    (tree(series) / "x.txt").write_text("mine\n")
    git(tree(series), "add", "x.txt")
    git(tree(series), "commit", "-q", "-m", "elsewhere")
    line = _moved_line(series)
    said = one_error(run(series, "continue", want=1).stderr, "not built on")
    assert said == f"rebasectl: error: {line}"
    commands = advised(said)
    assert [c.split()[1] for c in commands] == ["abort", "apply"], said
    aborted = ok(series, *shlex.split(commands[0])[1:]).stdout
    assert "1 untracked file(s) and 1 commit(s)" in aborted, aborted
    (patch,) = (series / ".rebasectl" / "aborted").glob("*/commits/*.patch")
    assert "Subject: [PATCH] elsewhere" in patch.read_text() and "+mine" in patch.read_text()
    r = run(series, *shlex.split(commands[1])[1:], want=1)  # a's resolution is replayed
    assert "a: resolved as recorded" in r.stderr, r.stderr
    assert "stopped at b in" in ok(series, "status").stdout


def test_abort_after_a_refusal_keeps_a_commit_made_since(tmp_path: Path) -> None:
    """abort after a refusal and a commit in the tree: the commit is kept and named."""
    series, b = _refused_then_committed(tmp_path)
    out = ok(series, "abort").stdout
    assert "kept 1 commit(s)" in out and "`git am` the commits in commits/" in out, out
    (patch,) = (series / ".rebasectl" / "aborted").glob("*/commits/*.patch")
    assert "my own commit" in patch.read_text() and f"+{NOTE}" in patch.read_text()


@pytest.mark.parametrize("way", ["mv", "stash", "checkout"])
def test_status_after_the_refused_files_went_says_so(tmp_path: Path, way: str) -> None:
    """hostile7 3: once the files a refusal named are out of the way (moved, stashed, changes
    dropped), status no longer says it was refused: it says they are out of the way and that
    continue goes on (which it does)."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    t = tree(series)
    name = "n.txt" if way == "mv" else "b.txt"
    if way == "mv":
        (t / name).write_text("draft\n")
    else:
        (t / name).write_text((t / name).read_text() + NOTE)
    run(series, "continue", want=1)
    _refusal_in_status(series)
    if way == "mv":
        shutil.move(t / name, t / "n.txt.mine")
    else:
        git(t, *(["stash", "-q"] if way == "stash" else ["checkout", "--", name]))
    out = ok(series, "status").stdout
    assert "paused in" in out and "refused in" not in out, out
    line = next(x for x in out.splitlines() if x.startswith("the files the last refusal"))
    assert f"({name}) are out of the way now" in line, line
    got = json.loads(ok(series, "status", "--json").stdout)["apply_in_progress"]
    assert got["refused"] is None and got["refused_gone"] == [name], got
    assert advised(line)[0] == "rebasectl continue"
    run(series, "continue", want=1)
    assert "stopped at b in" in ok(series, "status").stdout


def test_status_names_only_the_refused_files_still_in_the_way(tmp_path: Path) -> None:
    """A refusal over an untracked file and a changed one; once the untracked one is moved
    away, status's refusal (and its way past) names only the changed one."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    t = tree(series)
    (t / "n.txt").write_text("draft\n")
    (t / "b.txt").write_text((t / "b.txt").read_text() + NOTE)
    said = one_error(run(series, "continue", want=1).stderr, "n.txt", "b.txt", "in the way")
    assert "mv " in said
    shutil.move(t / "n.txt", t / "n.txt.mine")
    line = _refusal_in_status(series)
    assert "n.txt" not in line and "your uncommitted changes to b.txt" in line, line
    follow(series, line.removeprefix(REFUSED), "b.txt")
    assert (t / "b.txt").read_text().endswith(NOTE)


@pytest.mark.parametrize(("fault", "code"), [("kill@start", -9), ("kill@ready", -9),
                                             ("int@start", 130)])
def test_a_run_killed_before_it_began_leaves_the_refusal_as_it_was(tmp_path: Path, fault: str,
                                                                   code: int) -> None:
    """hostile7 11: a continue killed before it began (nothing read, nothing changed) after a
    refusal: status said "the last run was refused", false of that run. It says what it can
    know: the refusal, and that its reason still holds (the files are still in the way); it
    claims nothing of the runs since. The way past still works."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    (tree(series) / "n.txt").write_text("draft\n")
    said = one_error(run(series, "continue", want=1).stderr, "n.txt", "in the way")
    before = _state(series)
    killed = run(series, "continue", env={"REBASECTL_FAULT": fault})
    assert killed.returncode == code, (killed.returncode, killed.stderr)
    assert _state(series) == before
    out = ok(series, "status").stdout
    assert "last run" not in out, out
    line = _refusal_in_status(series)
    assert said.endswith(line.removeprefix(REFUSED).removesuffix("; `rebasectl abort` gives up"))
    follow(series, line, "b.txt")


def test_a_stop_never_shown_is_not_skipped(tmp_path: Path) -> None:
    """skip of patch a refused at patch b (the person's edit to b.txt in the way), then skip
    again: b was recorded as skipped though its conflict was never written or shown. skip now
    refuses until a run has shown the stop (the refusal's own way past, then continue)."""
    series = scene(tmp_path)
    b = tree(series) / "b.txt"
    b.write_text(b.read_text() + NOTE)
    run(series, "skip", want=1)  # a skipped; refused before b's conflict reached the tree
    state = json.loads((series / ".rebasectl" / "apply-state.json").read_text())
    assert state["current"] == "b" and not state["in_tree"], state
    line = one_error(run(series, "skip", want=1).stderr, "3/3 b", "never shown")
    assert json.loads((series / ".rebasectl" / "apply-state.json").read_text()) == state
    assert "`rebasectl continue`" in line
    git(tree(series), "stash", "-q")  # what the continue's refusal advises for an edit
    shown = run(series, "continue", want=1)
    assert "stopped at 3/3 b" in shown.stdout and "<<<<<<<" in b.read_text()
    assert "3/3 b: skipped" in run(series, "skip", want=0).stderr
    git(tree(series), "stash", "pop", "-q")
    assert b.read_text().endswith(NOTE)


def test_skip_at_a_modify_delete_stop(tmp_path: Path) -> None:
    """hostile8 #2: the maintainers' 24-patch series stops first at a modify/delete (upstream
    deleted tokenizer.py, `DU`); skip failed on git's "path ... is unmerged" (git restore
    refuses an unmerged path HEAD lacks), status then said interrupted and continue failed the
    same way. skip drops the stop's entries and file and goes on."""
    from tests.unit.test_attribution import Fork
    from tests.unit.test_bump import imported

    fork = Fork(tmp_path, {"gone.txt": TEXT, "b.txt": TEXT})
    fork.series([("fix: gone", {"gone.txt": ("line 3\n", "PATCH 3\n")}),
                 ("fix: b", {"b.txt": ("line 9\n", "PATCH 9\n")})])
    fork.up.git("rm", "-q", "gone.txt")
    fork.up.commit("upstream: remove gone.txt")
    series = imported(tmp_path, fork, fork.up.git("rev-parse", "fork"))
    stop = run(series, "apply", "--base", "main", "--upstream", str(fork.up.path), want=1)
    assert "stopped at 1/2 gone" in stop.stdout, stop.stdout
    assert git_out(tree(series), "status", "--porcelain") == "DU gone.txt"
    done = run(series, "skip", want=0)
    assert "1/2 gone: skipped" in done.stderr and "applied 1/2" in done.stdout, done
    assert not (tree(series) / "gone.txt").exists()
    assert git_out(tree(series), "status", "--porcelain") == ""
    assert "PATCH 9" in (tree(series) / "b.txt").read_text()


def test_status_after_head_moved_back_gives_one_way_on(tmp_path: Path) -> None:
    """hostile8 #6: HEAD reset back by hand past a commit of the apply; status's first line
    said "(the work tree is at the base: `rebasectl continue` moves it on)" and the next one
    the HEAD-moved advice that continue then gave. Only the advice continue follows is said."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    run(series, "continue", want=1)  # a committed, stopped at b
    git(tree(series), "reset", "-q", "--hard", "HEAD~1")
    out = ok(series, "status").stdout
    assert "HEAD moved to" in out and "`rebasectl continue` moves it on" not in out, out


def test_abort_names_the_stashes_the_refusals_advised(tmp_path: Path) -> None:
    """hostile8 #7: the refusal's way past is `git stash`; an abort then removed the tree and
    said nothing of the stash, which lives on in the mirror's refs/stash where no status
    showed it. abort names it, and its advice (apply again, then `stash pop`) brings it back."""
    series = scene(tmp_path)
    resolve(series, "a.txt")
    b = tree(series) / "b.txt"
    b.write_text(b.read_text() + NOTE)
    run(series, "continue", want=1)  # refused: b.txt in the way of patch 3
    git(tree(series), "stash", "-q")
    out = ok(series, "abort").stdout
    line = next((x for x in out.splitlines() if "stash(es)" in x), out)
    assert line.startswith("1 stash(es) made in the work tree stay in the mirror"), out
    listed = advised(line)
    assert listed[0].endswith("reflog show refs/stash") and listed[1].endswith("stash pop")
    assert "stash@{0}" in subprocess.run(shlex.split(listed[0]), capture_output=True,
                                         text=True, check=True).stdout
    ok(series, "apply")  # the tree made again (on the pinned base)
    subprocess.run(shlex.split(listed[1]), check=True, capture_output=True)
    assert b.read_text().endswith(NOTE)
