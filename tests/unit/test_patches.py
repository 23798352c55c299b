"""Patch files: parse what git format-patch writes, render the one canonical form, stay
``git am``-compatible, and report problems with file:line."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rebasectl.model.patches import (
    READER_VERSION,
    Patch,
    PatchError,
    diff_start_in_message,
    normalise_message,
    parse,
    raw_to_rfc2822,
    rfc2822_to_raw,
)
from tests.harness.cli import fails, ok, one_error
from tests.harness.git import Repo, git, lines

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    r = Repo(tmp_path / "r")
    r.commit("base", {"a.txt": lines(30), "b.txt": "b\n"})
    r.commit("[2/3] fix: two hunks and a new file\n\nWhy it matters.\n\nSigned-off-by: X <x@y>",
             {"a.txt": lines(30).replace("line 2\n", "LINE 2\n").replace("line 25\n", "L25\n"),
              "new.txt": "n\n"}, author="Jöns Ünïcode <jons@example.invalid>")
    return r


def _format_patch(repo: Repo) -> bytes:
    return repo.git("format-patch", "-1", "--stdout", "-k", "HEAD").encode() + b"\n"


def test_parse_git_format_patch(repo: Repo) -> None:
    patch = parse(_format_patch(repo), "p.patch")
    assert patch.author_name == "Jöns Ünïcode" and patch.author_email == "jons@example.invalid"
    assert patch.subject == "[2/3] fix: two hunks and a new file"
    assert patch.message == ("[2/3] fix: two hunks and a new file\n\nWhy it matters.\n\n"
                             "Signed-off-by: X <x@y>\n")
    assert rfc2822_to_raw(patch.date) == "1767225720 +0000"
    assert [(f.path, f.added, f.removed) for f in patch.files] == [("a.txt", 2, 2),
                                                                   ("new.txt", 1, 0)]
    assert [(f.path, h.header) for f in patch.files for h in f.hunks] == [
        ("a.txt", "@@ -1,5 +1,5 @@"), ("a.txt", "@@ -22,7 +22,7 @@ line 21"),
        ("new.txt", "@@ -0,0 +1 @@")]
    assert b"-- \n" not in patch.diff  # format-patch's signature is not part of the diff
    a = patch.files[0]
    assert a.header.startswith(b"diff --git a/a.txt b/a.txt\n") and len(a.hunks) == 2


def test_render_is_canonical_and_git_am_compatible(repo: Repo, tmp_path: Path) -> None:
    patch = parse(_format_patch(repo), "p.patch")
    data = patch.render()
    assert data.startswith(b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00")
    assert b"Content-Type: text/plain; charset=UTF-8\n" in data  # non-ASCII author
    assert parse(data, "p.patch") == patch
    assert parse(data, "p.patch").render() == data
    (tmp_path / "p.patch").write_bytes(data)
    expected_tree = repo.tree()
    repo.git("checkout", "-q", "--detach", "HEAD~1")
    repo.git("am", "-q", "-k", str(tmp_path / "p.patch"))
    assert repo.tree() == expected_tree
    assert repo.git("log", "-1", "--format=%s|%an|%ae") == (
        "[2/3] fix: two hunks and a new file|Jöns Ünïcode|jons@example.invalid")


def test_empty_commit_patch(tmp_path: Path) -> None:
    """An empty commit is written as git format-patch --always writes one: its message, then a
    signature, no `---` line (git am reads `---` with nothing after it as "No valid patches in
    input", the shape of a file cut after its message). git am stops at ours with "Patch is
    empty" and `git am --allow-empty` records it, as it does with format-patch's."""
    patch = Patch("A", "a@b.c", "Thu, 01 Jan 2026 00:00:00 +0000", "chore: nothing\n", b"")
    data = patch.render()
    assert data.endswith(b"Subject: chore: nothing\n\n-- \nrebasectl\n")
    again = parse(data, "e.patch")
    assert again == patch and again.is_empty and again.files == ()
    repo = Repo(tmp_path / "r")
    repo.commit("base", {"a.txt": "a\n"})
    (tmp_path / "e.patch").write_bytes(data)
    stopped = git(repo.path, "am", "-k", str(tmp_path / "e.patch"), check=False)
    assert stopped.returncode != 0 and "Patch is empty." in stopped.stdout + stopped.stderr
    git(repo.path, "am", "--allow-empty")
    assert repo.git("log", "-1", "--format=%s") == "chore: nothing"
    assert repo.git("rev-parse", "HEAD^{tree}") == repo.git("rev-parse", "HEAD~1^{tree}")


def test_non_ascii_subject_round_trip() -> None:
    patch = Patch("A", "a@b.c", "Thu, 01 Jan 2026 00:00:00 +0000",
                  "fix: Übergrößenträger – " + " ".join(["long words"] * 10) + "\n", b"")
    data = patch.render()
    assert b"Subject: =?utf-8?" in data
    assert parse(data, "u.patch") == patch


@pytest.mark.parametrize("raw", ["1767225600 +0000", "1739492930 +0100", "1739492930 -0930",
                                 "0 +0000"])
def test_dates_round_trip(raw: str) -> None:
    assert rfc2822_to_raw(raw_to_rfc2822(raw)) == raw


def test_normalise_message() -> None:
    assert normalise_message("subject  \nwrapped\n\n\nbody  \n\n\n") == \
        "subject wrapped\n\nbody\n"
    assert normalise_message("only\r\n") == "only\n"


def test_some_crlf_content_lines_are_fine() -> None:
    """CRLF inside the changed file's lines is content, not an editor's conversion."""
    data = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            b"From: A <a@b.c>\nDate: Thu, 01 Jan 2026 00:00:00 +0000\nSubject: crlf file\n\n"
            b"---\ndiff --git a/w.bat b/w.bat\nindex 1111111..2222222 100644\n--- a/w.bat\n"
            b"+++ b/w.bat\n@@ -1,2 +1,2 @@\n echo 1\r\n-echo 2\r\n+echo 3\r\n")
    patch = parse(data, "c.patch")
    assert patch.files[0].path == "w.bat"


@pytest.mark.parametrize("cut,where", [
    (b"Subject: ", "c.patch:1: missing 'Subject:' header"),
    (b"From: A <a@b.c>\n", "c.patch:1: missing 'From:' header"),
    (b"+++ b/w.txt\n", "c.patch:11: malformed hunk header"),
])
def test_errors_name_the_line(cut: bytes, where: str) -> None:
    data = (b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            b"From: A <a@b.c>\nDate: Thu, 01 Jan 2026 00:00:00 +0000\nSubject: s\n\n"
            b"---\ndiff --git a/w.txt b/w.txt\nindex 1111111..2222222 100644\n--- a/w.txt\n"
            b"+++ b/w.txt\n@@ -1 +1 @@\n-1\n+2\n")
    if cut == b"+++ b/w.txt\n":
        data = data.replace(b"@@ -1 +1 @@", b"@@ bogus @@")
    else:
        data = data.replace(cut, b"X-" + cut if cut.startswith(b"Subject") else b"", 1)
    with pytest.raises(PatchError) as info:
        parse(data, "c.patch")
    assert where in info.value.message


def test_bot_address_round_trip() -> None:
    """Real Megatron-LM authors such as github-actions[bot]: parseaddr cut the address at '['
    (the author changed on every apply/export round trip)."""
    patch = Patch("github-actions[bot]", "github-actions[bot]@users.noreply.github.com",
                  "Wed, 17 Dec 2025 19:47:06 +0000", "chore: rotate oncall schedule\n", b"")
    data = patch.render()
    assert b'From: "github-actions[bot]" <github-actions[bot]@users.noreply.github.com>\n' in data
    assert parse(data, "bot.patch") == patch


def test_real_megatron_commits_round_trip(mirror_path: Path) -> None:
    """Every commit of 3714d81..1dcf0da: the canonical patch parses back to itself, and only
    true binaries are refused (no false alarm of the safety checks on real diffs). The diffs
    are read as import reads them (one ``git log``); every 25th is checked against the commit's
    own ``git diff``, the other way rebasectl reads one."""
    from rebasectl.engine.exchange import patch_from_commit
    from rebasectl.git import Repo as GitRepo

    git = GitRepo(mirror_path)
    refused = []
    infos = git.commits(git.history.rev_list(["3714d81..1dcf0da"]))
    diffs = git.history.commit_diffs([i.sha for i in infos])  # one git log, as import reads them
    for info in infos[::25]:  # the same bytes one commit's own diff gives (export's way)
        assert git.commit_diff(info) == diffs[info.sha], info.sha
    for info in infos:
        data = patch_from_commit(git, info, diffs[info.sha]).render()
        try:
            assert parse(data, "m.patch").render() == data, info.sha
        except PatchError as exc:
            refused.append(exc.message)
    assert refused and all("binary patch refused (docs/images/" in m for m in refused)


# -- where the message ends and the diff starts (hostile5 #2) -----------------------------------
@pytest.fixture
def three(tmp_path: Path) -> tuple[Repo, bytes]:
    """A commit changing three files, as a patch file (ours), and the repo at its parent."""
    r = Repo(tmp_path / "three")
    r.commit("base", {f"{n}.txt": lines(12, n) for n in "abc"})
    r.commit("fix: three files\n\nWhy.", {f"{n}.txt": lines(12, n).replace(f"{n} 6\n", "six\n")
                                           for n in "abc"})
    from rebasectl.engine.exchange import patch_from_commit
    from rebasectl.git import Repo as GitRepo

    gr = GitRepo(r.path)
    data = patch_from_commit(gr, gr.commits([r.head()])[0]).render()
    r.checkout("--detach", "HEAD~1")
    return r, data


def _git_apply_check(repo: Repo, data: bytes, tmp_path: Path) -> str:
    (tmp_path / "x.patch").write_bytes(data)
    proc = git(repo.path, "apply", "--check", str(tmp_path / "x.patch"), check=False)
    return proc.stderr if proc.returncode else ""


@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_a_hand_broken_hunk_is_an_error_in_any_file(three: tuple[Repo, bytes], name: str,
                                                    tmp_path: Path) -> None:
    """A line added inside one file's hunk without fixing its @@ counts: an error naming that
    hunk's line, whichever file it is in; the files before it were read as message text (and
    the next export deleted them). git apply refuses the same bytes."""
    repo, data = three
    assert [f.path for f in parse(data, "t.patch").files] == ["a.txt", "b.txt", "c.txt"]
    broken = data.replace(b"+six\n", b"+six\n+hand-added\n", "abc".index(name) + 1)
    broken = broken.replace(b"+six\n+hand-added\n", b"+six\n", "abc".index(name))
    assert broken.count(b"hand-added") == 1
    lines_ = broken.split(b"\n")
    at = lines_.index(b"+hand-added")
    hunk = max(i for i in range(at) if lines_[i].startswith(b"@@")) + 1
    with pytest.raises(PatchError) as info:
        parse(broken, "t.patch")
    assert info.value.message == (f"t.patch:{hunk}: hunk longer than its @@ header says in "
                                  f"{name}.txt (git apply: corrupt patch)")
    assert "corrupt patch" in _git_apply_check(repo, broken, tmp_path)


def test_the_real_compat_patch_edited_by_hand(tmp_path: Path) -> None:
    """hostile5 #2 on the shipped patches/0001-compat.patch: a line added after `+import
    torch.distributed as dist` (parallel_state.py, the middle of three files) is refused at
    that hunk, as git apply refuses it; the untouched file reads as three files, +12 -4."""
    data = (ROOT / "patches/0001-compat.patch").read_bytes()
    patch = parse(data, "patches/0001-compat.patch")
    assert (len(patch.files), patch.model.added, patch.model.removed) == (3, 12, 4)
    broken = data.replace(b"+import torch.distributed as dist\n",
                          b"+import torch.distributed as dist\n+# hand-added note\n")
    hunk = broken[: broken.index(b"+# hand-added")].rfind(b"\n@@ ")
    line = broken[: hunk + 1].count(b"\n") + 1
    with pytest.raises(PatchError) as info:
        parse(broken, "patches/0001-compat.patch")
    assert info.value.message == (
        f"patches/0001-compat.patch:{line}: hunk longer than its @@ header says in "
        "megatron/core/parallel_state.py (git apply: corrupt patch)")
    empty = Repo(tmp_path / "empty")
    assert "corrupt patch" in _git_apply_check(empty, broken, tmp_path)


def test_hunks_whose_file_header_is_gone(three: tuple[Repo, bytes], tmp_path: Path) -> None:
    """The first file's `diff --git`/`index`/`---`/`+++` lines deleted: its hunk sits between
    the separator and the next file. It was read as message text (the change gone); now it is
    an error, as git apply's 'patch fragment without header'."""
    repo, data = three
    start = data.index(b"diff --git a/a.txt")
    cut = data[:start] + data[data.index(b"@@", start):]
    line = cut[: cut.index(b"\n@@") + 1].count(b"\n") + 1
    with pytest.raises(PatchError) as info:
        parse(cut, "t.patch")
    assert info.value.message.startswith(f"t.patch:{line}: hunk without a file header")
    assert "patch fragment without header" in _git_apply_check(repo, cut, tmp_path)


def test_a_file_header_with_its_hunks_cut(three: tuple[Repo, bytes], tmp_path: Path) -> None:
    """b.txt's header kept, its hunk deleted: no longer read as "b.txt unchanged"."""
    repo, data = three
    start = data.index(b"diff --git a/b.txt")
    hunk = data.index(b"@@", start)
    cut = data[:hunk] + data[data.index(b"diff --git a/c.txt"):]
    line = data[:start].count(b"\n") + 1
    with pytest.raises(PatchError) as info:
        parse(cut, "t.patch")
    assert info.value.message.startswith(f"t.patch:{line}: b.txt: a file header with no change")
    assert "only garbage" in _git_apply_check(repo, cut, tmp_path)


def test_a_file_cut_down_to_its_header_is_not_an_empty_commit(three: tuple[Repo, bytes]) -> None:
    """A file cut after its mail header, or in its message, has no diff and no signature: an
    error at its last line, never an empty commit (the patch's change dropped without a
    word). Our empty commit and format-patch's (message, signature) read, the message whole."""
    _, data = three
    header = data[: data.index(b"\n\n") + 2]
    with pytest.raises(PatchError, match=r"^t.patch:5: no diff, and no signature after the "
                                         r"message: the file looks cut short"):
        parse(header, "t.patch")
    with pytest.raises(PatchError, match=r"^t.patch:6: no diff, and no signature"):
        parse(header + b"Why.\n", "t.patch")
    signed = header + b"Why.\n-- \n2.39.5\n\n"
    patch = parse(signed, "t.patch")
    assert patch.is_empty and patch.message == "fix: three files\n\nWhy.\n"
    ruled = parse(header + b"Why.\n---\nA rule, then text.\n-- \nrebasectl\n", "t.patch")
    assert ruled.message == "fix: three files\n\nWhy.\n---\nA rule, then text.\n"
    subject_only = parse(header + b"-- \n2.39.5\n\n", "t.patch")
    assert subject_only.is_empty and subject_only.message == "fix: three files\n"


def test_a_file_cut_after_its_separator_is_refused_as_git_am_refuses_it(
        three: tuple[Repo, bytes], tmp_path: Path) -> None:
    """hostile6 #9: a patch cut to its mail header, message and `---` line (`sed -n
    '1,/^---$/p'`) read as an empty commit: check said ok, apply "empty" and went on. git am
    refuses those bytes ("No valid patches in input"); so does the reader, naming the `---`
    line and saying the file looks cut short (a diffstat with no diff after it too). An empty
    commit meant as one ends in a signature instead of the `---` line, as the line says."""
    repo, data = three
    cut = data[: data.index(b"\n---\n") + 5]
    assert cut.endswith(b"Why.\n---\n")
    with pytest.raises(PatchError) as info:
        parse(cut, "t.patch")
    assert info.value.message.startswith(
        "t.patch:7: '---' line with no diff after it: the file looks cut short after its "
        "message (git am: No valid patches in input)")
    assert "\n" not in info.value.message
    (tmp_path / "cut.patch").write_bytes(cut)
    am = git(repo.path, "am", "-k", str(tmp_path / "cut.patch"), check=False)
    assert am.returncode != 0 and "No valid patches in input" in am.stdout + am.stderr
    git(repo.path, "am", "--abort")
    stat = cut + b" a.txt | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n\n"
    with pytest.raises(PatchError, match=r"^t.patch:7: '---' line with no diff after it"):
        parse(stat, "t.patch")
    signed = cut.replace(b"Why.\n---\n", b"Why.\n-- \nrebasectl\n")  # what the line says
    assert parse(signed, "t.patch").is_empty
    # an empty commit an older rebasectl exported has these bytes (hostile7 #10): the line says
    # so, and its conversion is the same edit
    assert "exported by rebasectl before December 2026 ends in '---': replace that line by " \
        "'-- ' and a line 'rebasectl'" in info.value.message


def test_a_shipped_patch_cut_after_its_separator_is_refused() -> None:
    """The repository's own ipc-tms patch cut as hostile6 cut it: refused, not empty."""
    data = (ROOT / "patches" / "0008-ipc-tms.patch").read_bytes()
    assert parse(data, "p").files
    cut = data[: data.index(b"\n---\n") + 5]
    line = cut.count(b"\n")
    with pytest.raises(PatchError, match=rf"^p:{line}: '---' line with no diff after it"):
        parse(cut, "p")


def test_a_git_format_patch_empty_commit(repo: Repo) -> None:
    """`git format-patch --always` of an empty commit has no `---` line, only its signature."""
    repo.commit("chore: marker\n\nNothing changes.", allow_empty=True)
    data = repo.git("format-patch", "-1", "--stdout", "-k", "--always", "HEAD").encode() + b"\n"
    assert b"\n---\n" not in data
    patch = parse(data, "m.patch")
    assert patch.is_empty and patch.message == "chore: marker\n\nNothing changes.\n"


def test_message_quotes_read_as_git_am_reads_them(repo: Repo, tmp_path: Path) -> None:
    """A message quoting a diff indented, and one with `---` rule lines: our reader keeps the
    whole message; git am keeps the indented quote the same (its message is ours) and cuts at
    the first `---` line, which our reader does not (it cuts at the last, the separator)."""
    quoted = ("fix: quote\n\nThe old code did:\n\n    diff --git a/x b/x\n    --- a/x\n"
              "    +++ b/x\n    @@ -1 +1 @@\n    -a\n    +b\n")
    ruled = "fix: rules\n\nAbove.\n---\nBelow the rule.\n"
    for message in (quoted, ruled):
        repo.git("commit", "-q", "--amend", "-m", message)
        from rebasectl.engine.exchange import patch_from_commit
        from rebasectl.git import Repo as GitRepo

        gr = GitRepo(repo.path)
        data = patch_from_commit(gr, gr.commits([repo.head()])[0]).render()
        assert parse(data, "q.patch").message == message
        (tmp_path / "q.patch").write_bytes(data)
        git(repo.path, "checkout", "-q", "--detach", "HEAD~1")
        git(repo.path, "am", "-q", "-k", str(tmp_path / "q.patch"))
        got = git(repo.path, "log", "-1", "--format=%B").stdout.rstrip("\n") + "\n"
        assert got == (message if message is quoted else "fix: rules\n\nAbove.\n")


@pytest.mark.parametrize("message,found", [
    ("s\n\n    diff --git a/x b/x\n", None),
    ("s\n\nsee\ndiff --git a/x b/x\nmore\n", (4, "diff --git a/x b/x")),
    ("s\n\n--- a/x\n+++ b/x\n", (3, "--- a/x")),
    ("s\n\n--- a rule and text\nno plus line\n", None),
    ("s\n\n---\n", None),
])
def test_diff_start_in_message(message: str, found: tuple[int, str] | None) -> None:
    assert diff_start_in_message(message) == found


def test_hand_edits_read_as_git_apply_reads_them_or_refused(tmp_path: Path) -> None:
    """Random one-line hand edits of the shipped patches (a `+`, `-` or context line inserted, a
    line deleted, anywhere from the first `diff --git` on; seeded): whatever the reader accepts,
    `git apply --numstat` accepts too with the same files and counts; whatever git refuses
    (corrupt patch, a header without file names), the reader refuses. It refuses more than git
    does: lines after a hunk's counts and junk inside a file header, which git drops without a
    word."""
    import random

    rng = random.Random(7)
    files = sorted((ROOT / "patches").glob("*.patch"))
    seen = {"both accept": 0, "both refuse": 0, "only git accepts": 0}
    for _ in range(150):
        lines_ = rng.choice(files).read_bytes().split(b"\n")
        start = next(i for i, ln in enumerate(lines_) if ln.startswith(b"diff --git"))
        at = rng.randrange(start, len(lines_) - 1)
        kind = rng.choice([b"+x", b"-x", b" x", None])
        if kind is None:
            del lines_[at]
        else:
            lines_.insert(at, kind)
        data = b"\n".join(lines_)
        (tmp_path / "x.patch").write_bytes(data)
        g = git(tmp_path, "apply", "--numstat", str(tmp_path / "x.patch"), check=False)
        theirs = None if g.returncode else sorted(
            (int(a), int(r), p) for a, r, p in (ln.split("\t") for ln in g.stdout.splitlines()))
        try:
            ours = sorted((f.added, f.removed, f.path) for f in parse(data, "x.patch").files)
        except PatchError:
            ours = None
        assert ours is None or ours == theirs, (at, kind)
        seen["both accept" if ours else "only git accepts" if theirs else "both refuse"] += 1
    assert all(seen.values()), seen


_QUOTE = ("diff --git a/foo.py b/foo.py\n--- a/foo.py\n+++ b/foo.py\n@@ -1 +1 @@\n-old\n"
          "+new\n")


@pytest.mark.parametrize("after", ["", "\nThat was the bug.\n"])
def test_a_patch_file_whose_message_quotes_a_diff(tmp_path: Path, after: str) -> None:
    """hostile6 #10: a patch file (git format-patch writes it) whose message quotes a diff at
    the start of a line, at the message's end or followed by more text. Refused in one line
    that says so and what to do, attributing nothing to git (git apply reads both diffs, the
    quote as a change to foo.py); git am ends the message at the quote, as the line says. The
    advice works: the quote indented, the file checks and applies with that message."""
    repo = Repo(tmp_path / "up")
    base = repo.commit("base", {"a.txt": lines(10)})
    message = "fix: a\n\nThe old code did this:\n" + _QUOTE + after
    repo.commit(message, {"a.txt": lines(10).replace("line 3\n", "THREE\n")})
    series = tmp_path / "series"
    series.mkdir()
    repo.git("commit", "-q", "--amend", "-m", "fix: a")
    ok(series, "import", f"{base}..HEAD", "--repo", str(repo.path))
    repo.git("commit", "-q", "--amend", "-m", message)
    [name] = [p.name for p in (series / "patches").iterdir()]
    data = repo.git("format-patch", "-1", "--stdout", "-k", "HEAD").encode()
    (series / "patches" / name).write_bytes(data)
    line = data[: data.index(b"diff --git a/foo.py")].count(b"\n") + 1
    error = one_error(fails(series, 2, "check"), f"patches/{name}:{line}: the message quotes a "
                      "diff at the start of a line ('diff --git a/foo.py b/foo.py')",
                      "indent the quoted diff's lines in the message, then run this again")
    assert "git apply" not in error and "corrupt" not in error
    mailinfo = git(repo.path, "mailinfo", str(tmp_path / "msg"), str(tmp_path / "diff"),
                   input=data)
    assert mailinfo.returncode == 0
    assert (tmp_path / "msg").read_text() == "The old code did this:\n"
    indented = data.replace(_QUOTE.encode(), "".join(f"    {ln}\n" for ln in
                                                     _QUOTE.splitlines()).encode())
    (series / "patches" / name).write_bytes(indented)
    ok(series, "check")
    ok(series, "apply", "--upstream", str(repo.path))
    body = git(series / ".rebasectl/tree", "log", "-1", "--format=%B").stdout
    assert "    diff --git a/foo.py b/foo.py\n    --- a/foo.py\n" in body
    assert git(series / ".rebasectl/tree", "diff", "--name-only", "HEAD^", "HEAD").stdout == \
        "a.txt\n"


@pytest.mark.parametrize("cut", [3000, 2999])
def test_a_patch_file_cut_mid_line_is_refused_where_git_apply_says(tmp_path: Path,
                                                                    cut: int) -> None:
    """A file cut inside a line (hostile6 #5: post-layernorm cut at 3000 bytes, its last line
    `         with layer.bias_dro`) read as a complete shorter line: check said ok and four of
    the six files were gone. It is refused at the line git apply names ("corrupt patch at line
    52"), and the advice (git checkout the file) gives back a patch that reads."""
    from tests.harness.cli import run

    series = tmp_path / "series"
    series.mkdir()
    for name in ("series.yaml", "patches", "tests/regression"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, series / name)
        else:
            (series / name).write_bytes(src.read_bytes())
    git(series, "init", "-q")
    git(series, "add", "-A")
    git(series, "commit", "-q", "-m", "series")
    target = series / "patches" / "0003-post-layernorm.patch"
    data = target.read_bytes()[:cut]
    if data.endswith(b"\n"):
        data = data[:-1]
    target.write_bytes(data)
    said = git(series, "apply", "--numstat", str(target), check=False).stderr
    r = run(series, "check", want=2)
    (line,) = r.stderr.splitlines()
    where = line.split(".patch:", 1)[1].split(":", 1)[0]
    assert f"corrupt patch at line {where}\n" in said, (line, said)
    assert "git checkout -- FILE" in line
    git(series, "checkout", "--", "patches/0003-post-layernorm.patch")  # the advice
    run(series, "check", want=0)


def test_status_does_not_read_a_cut_file_from_an_older_readers_cache(tmp_path: Path) -> None:
    """status keeps each patch file's numbers by the sha1 of its bytes; a cache written by a
    reader that took the cut file for an empty commit (0 files) would have status show it so
    while check refuses it. The cache holds the reader's version: an older one's is read
    again, and status refuses the file as check does; the intact file's numbers come back."""
    repo = Repo(tmp_path / "up")
    base = repo.commit("base", {"a.txt": lines(10)})
    repo.commit("fix: a\n\nWhy.", {"a.txt": lines(10).replace("line 3\n", "THREE\n")})
    series = tmp_path / "series"
    series.mkdir()
    ok(series, "import", f"{base}..HEAD", "--repo", str(repo.path))
    [path] = list((series / "patches").iterdir())
    data = path.read_bytes()
    cut = data[: data.index(b"\n---\n") + 5]
    path.write_bytes(cut)
    cache = series / ".rebasectl" / "patch-stats.json"
    old = {"stats": {hashlib.sha1(cut).hexdigest(): [0, 0, 0]}}  # what the old reader kept
    cache.write_text(json.dumps(old))
    one_error(fails(series, 2, "status"), f"patches/{path.name}:7: '---' line with no diff "
              "after it: the file looks cut short")
    path.write_bytes(data)
    assert json.loads(ok(series, "status", "--json").stdout)["patches"][0]["files"] == 1
    assert json.loads(cache.read_text())["reader"] == READER_VERSION
