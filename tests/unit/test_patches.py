"""Patch files: parse what git format-patch writes, render the one canonical form, stay
``git am``-compatible, and report problems with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebasectl.model.patches import (
    Patch,
    PatchError,
    normalise_message,
    parse,
    raw_to_rfc2822,
    rfc2822_to_raw,
)
from tests.harness.git import Repo, lines


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


def test_empty_commit_patch() -> None:
    patch = Patch("A", "a@b.c", "Thu, 01 Jan 2026 00:00:00 +0000", "chore: nothing\n", b"")
    data = patch.render()
    assert data.endswith(b"Subject: chore: nothing\n\n---\n")
    again = parse(data, "e.patch")
    assert again == patch and again.is_empty and again.files == ()


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
    true binaries are refused (no false alarm of the safety checks on real diffs)."""
    from rebasectl.engine.exchange import patch_from_commit
    from rebasectl.git import Repo as GitRepo

    git = GitRepo(mirror_path)
    refused = []
    for info in git.commits(git.history.rev_list(["3714d81..1dcf0da"])):
        data = patch_from_commit(git, info).render()
        try:
            assert parse(data, "m.patch").render() == data, info.sha
        except PatchError as exc:
            refused.append(exc.message)
    assert refused and all("binary patch refused (docs/images/" in m for m in refused)
