"""Export writes back what the person has: entries kept by id, skips kept, folds become
`absorbs:`, messages, authors, CRLF content and series.yaml's own text unchanged through
import, apply and export.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from tests.conftest import real_mirror
from tests.harness.cli import run
from tests.harness.git import Repo, git, lines
from tests.harness.scenes import (
    World,
    applied,
    conflicted,
    tree,
)
from tests.june import copy_series
from tests.sfix import Scenario, copy, snapshot

ROOT = Path(__file__).resolve().parents[2]


def test_export_keeps_a_dropped_patch_named_in_another_message(
    world: World, tmp_path: Path
) -> None:
    """Patch add-e dropped in the work tree (git rebase -i `drop`) while a later patch's message
    mentions its subject: export does not take it for folded into that patch; without --drop
    its file and entry stay (exit 1)."""
    series = applied(world, tmp_path)
    wt = tree(series)
    git(
        wt,
        "commit",
        "-q",
        "--amend",
        "-m",
        "feat: change a line 30\n\nIndependent of 'feat: add e', which we used to need.\n",
    )
    git(wt, "rebase", "-q", "-i", "HEAD~4", env={"GIT_SEQUENCE_EDITOR": "sed -i '1s/^pick/drop/'"})
    r = run(series, "export")
    assert (series / "patches" / "0002-add-e.patch").exists(), r.stdout
    assert "id: add-e" in (series / "series.yaml").read_text()
    assert r.returncode == 1, (r.stdout, r.stderr)


def test_readme_git_am_command_applies_exported_crlf_patches(tmp_path: Path) -> None:
    """The README's command for applying the exported patches with git am works on a patch whose
    content has CRLF lines (carried byte for byte): this runs that command."""
    readme = (ROOT / "README.md").read_text()
    command = re.search(r"`(git am [^`]+)` applies them too", readme)
    assert command, "README no longer says how to git am the patches"
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"crlf.txt": "x\r\ny\r\n"})
    up.branch("feature")
    up.checkout("feature")
    up.commit("crlf change", {"crlf.txt": "x\r\nY changed\r\n"})
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(up.path), str(clone))
    git(clone, "checkout", "-q", base)
    patch = next((series / "patches").glob("*.patch"))
    r = git(clone, *command.group(1).split()[1:], "-q", str(patch), check=False)
    assert r.returncode == 0, r.stderr


def test_plain_diff_patch_refused_or_kept(world: World, tmp_path: Path) -> None:
    """A `diff -u` patch with no mail header is refused (exit 2); with a mail header its content
    survives apply + export."""
    series = copy(world.sc, tmp_path)
    plain = (
        "--- a/b.txt\t2026-01-01 00:00:00\n+++ b/b.txt\t2026-01-01 00:00:00\n"
        "@@ -4,3 +4,3 @@\n b 4\n-b 5\n+PLAIN 5\n b 6\n"
    )
    (series / "patches" / "0006-plain.patch").write_text(plain)
    with (series / "series.yaml").open("a") as fh:
        fh.write(
            "- id: plain\n  file: 0006-plain.patch\n  title: plain diff\n  kind: fix\n"
            "  why: ''\n  upstream: null\n  drop_when: null\n  absorbs: []\n  tests: []\n"
        )
    run(series, "check", want=2)
    (series / "patches" / "0006-plain.patch").write_text(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
        "From: Q <q@example.com>\nDate: Mon, 1 Jan 2024 00:00:00 +0000\nSubject: plain diff\n\n"
        "body\n---\n" + plain
    )
    run(series, "apply", want=0)
    assert "PLAIN 5" in (tree(series) / "b.txt").read_text()
    run(series, "export", want=0)
    assert "+PLAIN 5" in (series / "patches" / "0006-plain.patch").read_text()
    run(series, "check", "--apply", want=0)


def test_export_after_skip_keeps_the_entry(world: World, tmp_path: Path) -> None:
    """skip, then export: the skipped entry (file bytes, metadata) stays; `--drop` drops."""
    series = conflicted(world, tmp_path)
    before = snapshot(series)
    run(series, "skip", want=0)
    run(series, "export", want=0)
    after = snapshot(series)
    assert (
        after["patches/0001-change-a-line-3.patch"] == before["patches/0001-change-a-line-3.patch"]
    )
    assert "why: kept for the tests" in after["series.yaml"].decode()
    run(series, "export", "--drop", "change-a-line-3", want=0)
    assert not (series / "patches" / "0001-change-a-line-3.patch").exists()


def test_fold_becomes_absorbs_with_tests(world: World, tmp_path: Path) -> None:
    """`git rebase -i` fixup of touch-b into add-e: export writes `absorbs: [touch-b]` on add-e,
    carries touch-b's tests, removes touch-b's file."""
    series = copy(world.sc, tmp_path)
    text = (
        (series / "series.yaml")
        .read_text()
        .replace(
            "kind: compat\n  why: ''\n  upstream: null\n  drop_when: null\n  absorbs: []\n"
            "  tests: []",
            "kind: compat\n  why: ''\n  upstream: null\n  drop_when: null\n"
            "  absorbs: []\n  tests: [tests/regression/test_b.py]",
        )
    )
    (series / "series.yaml").write_text(text)
    (series / "tests" / "regression").mkdir(parents=True)
    (series / "tests" / "regression" / "test_b.py").write_text("")
    run(series, "apply", want=0)
    git(
        tree(series),
        "rebase",
        "-q",
        "-i",
        "HEAD~4",
        env={"GIT_SEQUENCE_EDITOR": "sed -i '2s/^pick/fixup/'"},
    )
    r = run(series, "export", want=0)
    assert "absorbs: touch-b" in r.stdout
    data = (series / "series.yaml").read_text()
    add_e = data.split("- id: add-e")[1].split("- id:")[0]
    assert "- touch-b" in add_e and "tests/regression/test_b.py" in add_e


QUOTED = ("diff --git a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n-line 1\n"
          "+one\n")


def test_messages_round_trip(tmp_path: Path) -> None:
    """A literal `=?utf-8?b?…?=` subject and author, a message quoting a diff (indented, as a
    message must: git am ends a message at a line starting `diff -`), a message with `---`
    lines of its own: import, apply, export: messages, authors and patch bytes unchanged."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"f.txt": lines(20)})
    up.branch("feature")
    up.checkout("feature")
    up.commit(
        "=?utf-8?b?SGVsbG8=?= literal subject",
        {"f.txt": lines(20).replace("line 5\n", "five\n")},
        author="=?utf-8?q?Mall=C3=B6ry?= <m@example.com>",
    )
    up.commit(
        "quote a diff\n\n" + "".join(f"    {ln}\n" for ln in QUOTED.splitlines())
        + "\n---\nA rule, then more text.\n---\n",
        {"f.txt": lines(20).replace("line 5\n", "five\n").replace("line 7\n", "seven\n")},
    )
    series = tmp_path / "series"
    series.mkdir()
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    before = snapshot(series)
    run(series, "apply", want=0)
    fmt = "%an%n%B"
    assert (
        git(tree(series), "log", f"--format={fmt}", "-2").stdout
        == git(up.path, "log", f"--format={fmt}", "-2", "feature").stdout
    )
    run(series, "export", want=0)
    assert snapshot(series) == before


def test_a_message_quoting_a_diff_at_line_start_is_refused(tmp_path: Path) -> None:
    """A commit whose message quotes a diff at the start of a line cannot be a patch file: its
    reader, like git am, starts the diff there. import refuses it by name (exit 2, nothing
    written), and the advice works: the message reworded with the quote indented imports and
    applies with that message."""
    up = Repo(tmp_path / "up")
    base = up.commit("base", {"f.txt": lines(20)})
    up.branch("feature")
    up.checkout("feature")
    up.commit("quote a diff\n\nLike this:\n" + QUOTED,
              {"f.txt": lines(20).replace("line 5\n", "five\n")})
    series = tmp_path / "series"
    series.mkdir()
    r = run(series, "import", f"{base}..feature", "--repo", str(up.path), want=2)
    assert "(quote a diff): message line 4 'diff --git a/f.txt b/f.txt' would be read as the " \
        "start of the diff" in r.stderr and "indent the quoted diff" in r.stderr
    assert not (series / "series.yaml").exists() and not (series / "patches").exists()
    reworded = "quote a diff\n\nLike this:\n" + "".join(f"    {ln}\n" for ln in
                                                       QUOTED.splitlines())
    up.git("commit", "-q", "--amend", "-m", reworded)
    run(series, "import", f"{base}..feature", "--repo", str(up.path), want=0)
    run(series, "apply", want=0)
    assert git(tree(series), "log", "--format=%B", "-1").stdout.rstrip("\n") == \
        reworded.rstrip("\n")


def test_crlf_file_of_upstream_carried(tmp_path: Path) -> None:
    """A patch to megatron/legacy/fp16_deprecated/loss_scaler.py (CRLF at 1dcf0da): exported,
    `check --apply` ok, re-applied byte for byte."""
    mirror = real_mirror()
    series = copy_series(tmp_path / "series")
    run(series, "apply", "--upstream", str(mirror), want=0)
    path = tree(series) / "megatron/legacy/fp16_deprecated/loss_scaler.py"
    data = path.read_bytes()
    assert b"\r\n" in data
    lines_ = data.split(b"\r\n")
    lines_[2] += b"  # patched"
    path.write_bytes(b"\r\n".join(lines_))
    git(tree(series), "commit", "-q", "-am", "fix: crlf file")
    want = path.read_bytes()
    run(series, "export", want=0)
    run(series, "check", "--apply", want=0)
    run(series, "apply", want=0)
    assert path.read_bytes() == want


def test_export_keeps_comments_of_series_yaml(sc: Scenario, tmp_path: Path) -> None:
    """series.yaml is edited by hand (docs/design.md: "a maintainer edits this file by hand"):
    `apply` then `export` with nothing changed in the work tree leaves it as it was, comments
    included."""
    series = copy(sc, tmp_path)
    text = (series / "series.yaml").read_text()
    text = "# miles carries these on Megatron; ask #infra before dropping one\n" + text.replace(
        "patches:\n", "patches:\n# keep change-a-line-3 first: later patches build on it\n", 1
    )
    (series / "series.yaml").write_text(text)
    run(series, "check", want=0)
    run(series, "apply", want=0)
    run(series, "export", want=0)
    after = (series / "series.yaml").read_text()
    assert "ask #infra before dropping one" in after
    assert "keep change-a-line-3 first" in after


def test_noop_export_leaves_the_projects_series_yaml(tmp_path: Path) -> None:
    """This repository's own series.yaml: `apply --upstream MIRROR` on the pinned 1dcf0da, then
    `export` with no change at all changes no byte (routing-replay's long `why:` is not
    re-wrapped; docs/design.md: "Re-exporting an unchanged series changes no byte")."""
    mirror = real_mirror()
    series = tmp_path / "series"
    shutil.copytree(ROOT / "patches", series / "patches")
    shutil.copy(ROOT / "series.yaml", series / "series.yaml")
    run(series, "apply", "--upstream", str(mirror), want=0)
    r = run(series, "export", want=0)
    assert (series / "series.yaml").read_bytes() == (ROOT / "series.yaml").read_bytes(), r.stdout
