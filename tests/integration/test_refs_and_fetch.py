"""What rebasectl fetches and which refs it may touch.

The cached mirror (``.rebasectl/upstream.git``) is also the repository of the work tree
(``.rebasectl/tree`` is a linked work tree of it), so a branch a person makes there lives in the
mirror's ``refs/heads``. The upstream's refs therefore live in rebasectl's own namespace
(``refs/rebasectl/upstream/``): nothing a fetch brings can delete or move a branch or tag the
person made. Replace refs and grafts never change what a pinned sha means. And a repository
given with ``--repo`` is opened as the git dir it is, with git's own message when git refuses it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo
from tests.sfix import Scenario, copy, snapshot


def git(path: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True,
                          check=False)
    if check:
        assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout.strip()


def run(series: Path, *args: str, want: int | None = 0) -> subprocess.CompletedProcess[str]:
    r = rebasectl(series, *args, timeout=300)
    if want is not None:
        assert r.returncode == want, (args, r.returncode, r.stdout, r.stderr)
    return r


def own_upstream(sc: Scenario, tmp: Path) -> Repo:
    """A clone of the scenario's upstream this test may change (the template is shared)."""
    path = tmp / "up"
    subprocess.run(["git", "clone", "-q", str(sc.up.path), str(path)], check=True)
    up = Repo.existing(path)
    up.clock = sc.up.clock
    up.git("checkout", "-q", "-B", "main", "origin/main")
    return up


def point_series_at(series: Path, up: Path) -> None:
    text = (series / "series.yaml").read_text()
    lines = [f"  url: {up}" if ln.startswith("  url: ") else ln for ln in text.splitlines()]
    (series / "series.yaml").write_text("\n".join(lines) + "\n")


def work_on_a_branch(series: Path) -> tuple[Path, str]:
    """A person's own branch in the work tree, with a commit of theirs on it."""
    tree = series / ".rebasectl" / "tree"
    git(tree, "switch", "-q", "-c", "my-work")
    (tree / "mine.txt").write_text("my work\n")
    git(tree, "add", "mine.txt")
    git(tree, "commit", "-q", "-m", "my own change")
    return tree, git(tree, "rev-parse", "HEAD")


def test_fetch_keeps_a_branch_made_in_the_work_tree(sc: Scenario, tmp_path: Path) -> None:
    """Finding 1: `rebasectl fetch` fetched the mirror with `--prune` and `+refs/*:refs/*`, and
    the work tree is a linked work tree of the mirror: a branch made there was deleted (the tree
    left on an unborn branch, the commit only in a reflog)."""
    series = copy(sc, tmp_path)
    up = own_upstream(sc, tmp_path)
    point_series_at(series, up.path)
    run(series, "apply", "--upstream", str(up.path))
    tree, mine = work_on_a_branch(series)
    up.commit("upstream moves on", {"later.txt": "later\n"})
    run(series, "fetch")
    assert git(tree, "rev-parse", "HEAD") == mine
    assert git(tree, "symbolic-ref", "HEAD") == "refs/heads/my-work"
    assert git(tree, "rev-parse", "refs/heads/my-work") == mine


def test_fetch_never_moves_a_branch_the_upstream_also_has(sc: Scenario, tmp_path: Path) -> None:
    """A branch a person made in the work tree under a name the upstream also uses (here
    `feature`) is theirs: the upstream's `feature` moving does not move it, and the upstream's
    revision is still reachable by name."""
    series = copy(sc, tmp_path)
    up = own_upstream(sc, tmp_path)
    up.git("branch", "-f", "feature", "origin/feature")
    point_series_at(series, up.path)
    run(series, "apply", "--upstream", str(up.path))
    tree = series / ".rebasectl" / "tree"
    git(tree, "branch", "-f", "feature", "HEAD")
    mine = git(tree, "rev-parse", "HEAD")
    up.checkout("feature")
    theirs = up.commit("feature moves upstream", {"f.txt": "f\n"})
    run(series, "fetch")
    assert git(tree, "rev-parse", "refs/heads/feature") == mine
    mirror = series / ".rebasectl" / "upstream.git"
    assert git(mirror, "rev-parse", "refs/rebasectl/upstream/heads/feature") == theirs
    r = run(series, "blame", "change-a-line-3", "--to", "feature", "--json")
    assert theirs[:12] in r.stdout, r.stdout
    r = run(series, "blame", "change-a-line-3", "--to", "origin/feature", "--json")
    assert theirs[:12] in r.stdout, r.stdout


def test_bump_to_a_branch_checks_the_tree_before_fetching(sc: Scenario, tmp_path: Path) -> None:
    """Finding 1, bump: `bump --to <branch>` fetched (deleting the person's branch) before its
    own check of the work tree, and the advice it then gave ended with the commit gone. Now the
    check comes first, nothing is fetched, and following the advice (`rebasectl export`) keeps
    the commit: it becomes a patch, and the bump then goes through."""
    series = copy(sc, tmp_path)
    up = own_upstream(sc, tmp_path)
    point_series_at(series, up.path)
    run(series, "apply", "--upstream", str(up.path))
    tree, mine = work_on_a_branch(series)
    up.commit("upstream moves on", {"later.txt": "later\n"})
    mirror = series / ".rebasectl" / "upstream.git"
    refs_before = git(mirror, "for-each-ref")
    before = snapshot(series)
    r = run(series, "bump", "--to", "main", want=2)
    assert "not exported" in r.stderr and "rebasectl export" in r.stderr, r.stderr
    assert git(mirror, "for-each-ref") == refs_before  # nothing fetched
    assert git(tree, "rev-parse", "refs/heads/my-work") == mine
    assert snapshot(series) == before
    run(series, "export")
    assert any(b"my work" in data for name, data in snapshot(series).items()
               if name.startswith("patches/"))
    run(series, "bump", "--to", "main", want=1)  # patch 1 conflicts on the new main


def test_replace_refs_do_not_change_the_pinned_base(sc: Scenario, tmp_path: Path) -> None:
    """Finding 9: the mirror copied the upstream's `refs/replace/*`, so the pinned base could
    be swapped for other content: `check --apply` and `apply` said ok "on <base>" with a tree
    holding a file the real base does not have."""
    series = copy(sc, tmp_path)
    up = own_upstream(sc, tmp_path)
    fake_tree = up.git("mktree", input=(up.git("ls-tree", sc.base) + "\n" + (
        "100644 blob " + up.git("hash-object", "-w", "--stdin", input=b"planted\n")
        + "\tplanted.txt\n")).encode())
    fake = up.git("commit-tree", fake_tree, "-m", "base")
    up.git("replace", sc.base, fake)
    run(series, "check", "--apply", "--upstream", str(up.path))
    run(series, "apply", "--upstream", str(up.path))
    tree = series / ".rebasectl" / "tree"
    assert not (tree / "planted.txt").exists()
    assert git(tree, "rev-parse", "HEAD~5^{tree}") == sc.up.tree(sc.base)
    mirror = series / ".rebasectl" / "upstream.git"
    assert git(mirror, "for-each-ref", "refs/replace/") == ""


def test_grafts_do_not_change_the_pinned_base(sc: Scenario, tmp_path: Path) -> None:
    """A graft file in the mirror (info/grafts, deprecated but still read by git) must not give
    the base other parents: the upstream range of a bump is the real one."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--upstream", str(sc.up.path))
    mirror = series / ".rebasectl" / "upstream.git"
    (mirror / "info").mkdir(exist_ok=True)
    (mirror / "info" / "grafts").write_text(f"{sc.new_base}\n")  # new_base: no parents
    # the patch conflicts at new_base: blame exits 1 and names the real break
    r = run(series, "blame", "change-a-line-3", "--to", sc.new_base, "--json", want=1)
    assert sc.new_base[:12] in r.stdout, r.stdout


def test_bare_repo_without_config_opens_as_given(tmp_path: Path) -> None:
    """`--repo` at a bare repository with no `config` file (git itself reads it) said
    "<sha>: not a commit": the object reader let GitPython guess a work tree from the path.
    It reads the range like git does."""
    src = Repo(tmp_path / "src")
    base = src.commit("base", {"a.txt": "a\n"})
    src.commit("fix: one", {"a.txt": "b\n"})
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src.path), str(bare)], check=True)
    (bare / "config").unlink()
    series = tmp_path / "series"
    series.mkdir()
    r = run(series, "import", f"{base}..main", "--repo", str(bare))
    assert "1 patch" in r.stdout or (series / "series.yaml").is_file(), r.stdout
    assert "fix: one" in (series / "series.yaml").read_text()


def test_git_refusing_a_repo_is_quoted(tmp_path: Path) -> None:
    """A repository git refuses (here: owned by someone else as git sees it) gives git's own
    reason, not a guess."""
    src = Repo(tmp_path / "src")
    base = src.commit("base", {"a.txt": "a\n"})
    src.commit("fix: one", {"a.txt": "b\n"})
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src.path), str(bare)], check=True)
    series = tmp_path / "series"
    series.mkdir()
    env = {"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}
    r = rebasectl(series, "import", f"{base}..main", "--repo", str(bare), env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "dubious ownership" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def _shallow_copy(sc: Scenario, tmp: Path) -> Path:
    """A shallow bare clone of the scenario's upstream (depth 2, every branch), as the shared
    Megatron snapshot is, with one unreachable loose object only a copy of its files carries."""
    path = tmp / "shallow.git"
    subprocess.run(["git", "clone", "-q", "--bare", "--no-single-branch", "--depth", "2",
                    f"file://{sc.up.path}", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "hash-object", "-w", "--stdin"], input=b"only here\n",
                   check=True, capture_output=True)
    return path


def _refs(path: Path) -> list[str]:
    return git(path, "for-each-ref", "--format=%(objectname) %(refname)").splitlines()


def test_a_shallow_local_upstream_is_copied_and_namespaced(sc: Scenario, tmp_path: Path) -> None:
    """git's local clone packs a shallow repository whole (2 s for the Megatron snapshot); the
    mirror copies its object files instead, and ends as `clone --mirror` would have made it:
    the same refs in the namespace, HEAD on the upstream's default branch, the shallow list,
    origin's namespaced fetch specs, and a later fetch that works."""
    source = _shallow_copy(sc, tmp_path)
    series = copy(sc, tmp_path)
    run(series, "fetch", "--upstream", str(source))
    mirror = series / ".rebasectl" / "upstream.git"
    want = sorted(ln.replace(" refs/", " refs/rebasectl/upstream/") for ln in _refs(source))
    assert sorted(_refs(mirror)) == want
    assert git(mirror, "symbolic-ref", "HEAD") == "refs/rebasectl/upstream/" + \
        git(source, "symbolic-ref", "HEAD")[5:]
    assert (mirror / "shallow").read_bytes() == (source / "shallow").read_bytes()
    loose = subprocess.run(["git", "-C", str(source), "hash-object", "--stdin"],
                           input=b"only here\n", capture_output=True, check=True).stdout.strip()
    assert git(mirror, "cat-file", "-t", loose.decode()) == "blob"  # copied, not packed anew
    assert git(mirror, "config", "--get-all", "remote.origin.fetch").splitlines() == [
        "+refs/heads/*:refs/rebasectl/upstream/heads/*",
        "+refs/tags/*:refs/rebasectl/upstream/tags/*"]
    assert git(mirror, "config", "remote.origin.url") == str(source)
    git(mirror, "rev-list", "--objects", "--all")  # every object of every ref is there
    run(series, "apply", "--base", sc.base)


def test_a_shallow_upstream_behind_alternates_is_fetched_whole(sc: Scenario,
                                                               tmp_path: Path) -> None:
    """Objects the shallow source keeps in another repository (its alternates) are not among
    the files copied: the fetch after the copy transfers them, and the mirror needs nothing of
    the source's alternates afterwards."""
    source = _shallow_copy(sc, tmp_path)
    other = own_upstream(sc, tmp_path)
    tip = other.commit("only in the alternate", {"alt.txt": "alt\n"})
    (source / "objects" / "info").mkdir(exist_ok=True)
    (source / "objects" / "info" / "alternates").write_text(f"{other.path}/.git/objects\n")
    git(source, "update-ref", "refs/heads/alt", tip)
    series = copy(sc, tmp_path)
    run(series, "fetch", "--upstream", str(source))
    mirror = series / ".rebasectl" / "upstream.git"
    assert git(mirror, "rev-parse", "refs/rebasectl/upstream/heads/alt") == tip
    assert not (mirror / "objects" / "info" / "alternates").exists()
    (source / "objects" / "info" / "alternates").unlink()
    assert git(mirror, "cat-file", "-t", f"{tip}:alt.txt") == "blob"


def test_a_first_clone_holds_only_the_namespaced_refs(sc: Scenario, tmp_path: Path) -> None:
    """The first clone of an ordinary upstream: its branches and every tag (one on no branch
    included) under `refs/rebasectl/upstream/`, nothing in `refs/heads` or `refs/tags`, none of
    its other refs (a pull request's head, notes), HEAD on its default branch there, and the
    config a later fetch reads: the namespaced specs and `--no-tags`, no mirror flag."""
    up = own_upstream(sc, tmp_path)
    loose = up.commit("on no branch", {"loose.txt": "x\n"})
    up.git("tag", "v-loose", loose)
    up.git("update-ref", "refs/pull/1/head", loose)
    up.git("notes", "add", "-m", "a note", sc.base)
    up.git("reset", "-q", "--hard", "HEAD~1")
    series = copy(sc, tmp_path)
    point_series_at(series, up.path)
    run(series, "fetch")
    mirror = series / ".rebasectl" / "upstream.git"
    want = sorted(ln.replace(" refs/", " refs/rebasectl/upstream/") for ln in _refs(up.path)
                  if " refs/heads/" in ln or " refs/tags/" in ln)
    assert any("tags/v-loose" in ln for ln in want)
    assert sorted(_refs(mirror)) == want
    assert git(mirror, "symbolic-ref", "HEAD") == "refs/rebasectl/upstream/heads/main"
    assert git(mirror, "config", "--get-all", "remote.origin.fetch").splitlines() == [
        "+refs/heads/*:refs/rebasectl/upstream/heads/*",
        "+refs/tags/*:refs/rebasectl/upstream/tags/*"]
    assert git(mirror, "config", "remote.origin.tagOpt") == "--no-tags"
    assert git(mirror, "config", "remote.origin.mirror", check=False) == ""
    run(series, "apply", "--base", sc.base)
    assert sorted(_refs(mirror)) == want  # materialising left no ref of its own behind


def test_the_mirrors_own_origin_is_not_opened_again(sc: Scenario, tmp_path: Path) -> None:
    """`--upstream PATH` naming the mirror's origin, when nothing needs fetching: the mirror
    answers and the path is not opened (one git process per command less; a folder that stopped
    being a repository since does not stop the work). A revision the mirror lacks still needs
    the fetch: its absence is said, and the fetch it advises says in one line why it fails."""
    up = own_upstream(sc, tmp_path)
    series = copy(sc, tmp_path)
    run(series, "fetch", "--upstream", str(up.path))
    shutil.rmtree(up.path / ".git")
    run(series, "apply", "--base", sc.base, "--upstream", str(up.path))
    r = run(series, "apply", "--base", "0" * 39 + "1", "--upstream", str(up.path), want=None)
    assert r.returncode == 2 and "not found in the upstream mirror" in r.stderr, r.stderr
    f = run(series, "fetch", "--upstream", str(up.path), want=2)
    assert "Traceback" not in f.stderr and len(f.stderr.strip().splitlines()) == 1, f.stderr


def test_a_first_clone_ignores_the_users_default_remote_name(sc: Scenario, tmp_path: Path) -> None:
    """The user's git config applies to the transport, but `clone.defaultRemoteName` must not
    rename the mirror's remote: the namespaced refs arrive and origin is the source (hostile9
    F8: no ref at all, and a stray `remote.upstream`)."""
    config = tmp_path / "gitconfig"
    config.write_text("[clone]\n\tdefaultRemoteName = upstream\n")
    series = copy(sc, tmp_path)
    r = rebasectl(series, "fetch", "--upstream", str(sc.up.path),
                  env={"GIT_CONFIG_GLOBAL": str(config)})
    assert r.returncode == 0, r.stderr
    mirror = series / ".rebasectl" / "upstream.git"
    assert git(mirror, "rev-parse", "refs/rebasectl/upstream/heads/main") == sc.up.head()
    assert git(mirror, "config", "remote.origin.url") == str(sc.up.path)
    assert git(mirror, "config", "--get-regexp", "^remote[.]upstream[.]", check=False) == ""



def test_the_work_tree_is_no_upstream(sc: Scenario, tmp_path: Path) -> None:
    """`--upstream .rebasectl/tree` (a tree of the mirror itself) is refused: a fetch from it
    pruned the upstream's refs and took the person's branches for the upstream's (hostile9
    F6); the mirror keeps its refs."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--upstream", str(sc.up.path))
    mirror = series / ".rebasectl" / "upstream.git"
    before = _refs(mirror)
    for own in (series / ".rebasectl" / "tree", f"file://{mirror}", series / ".git"):
        if own == series / ".git":
            git(series, "init", "-q")  # the series checkout is a git repository of its own
        r = run(series, "fetch", "--upstream", str(own), want=2)  # hostile10 B3: the last two
        assert "is this series' own checkout, mirror or work tree" in r.stderr, (own, r.stderr)
    assert _refs(mirror) == before


def test_a_ref_made_in_the_work_tree_is_no_upstream_revision(sc: Scenario,
                                                              tmp_path: Path) -> None:
    """A tag or branch the person made in the work tree is a ref of the mirror too: `bump --to`
    or `apply --base` naming it is refused, exit 2, nothing changed (hostile9 F3: the series
    was pinned to a commit the upstream never had, and a patch called "upstreamed" by the
    series' own commit)."""
    series = copy(sc, tmp_path)
    run(series, "apply", "--upstream", str(sc.up.path))
    tip = git(series / ".rebasectl" / "tree", "rev-parse", "HEAD")
    tree, mine = work_on_a_branch(series)
    git(tree, "tag", "mytag", mine)
    git(tree, "checkout", "-q", "--detach", tip)  # the tree back where the apply left it
    before = snapshot(series)
    for args in (["bump", "--to", "mytag"], ["bump", "--to", mine], ["apply", "--base", "my-work"]):
        r = run(series, *args, want=2)
        assert "is on no branch or tag of the upstream" in r.stderr, (args, r.stderr)
    assert snapshot(series) == before
    run(series, "bump", "--to", "main", want=None)  # the upstream's own branch still goes
