"""The diff model against an independent parser: unidiff, on the diffs both can read.

rebasectl parses diffs itself (rebasectl/model/diffs.py: hunks as views onto the diff bytes, git's
quoting, renames and modes), so a second parser written by other people checks it: on every
file of every patch of the series, on the integration data, and (with REBASECTL_MEGATRON_MIRROR)
on the real upstream's own history, 200 commits of Megatron-LM as ``git log -p`` prints
them. For each file: the paths, the counts of added and removed lines, and per hunk its four
numbers and its lines. Paths unidiff cannot spell (quoted names, names with a space) are left
to the tests that pin git's own spelling (tests/unit/test_patches.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from unidiff import PatchSet

from rebasectl.model.diffs import Diff, parse
from tests.conftest import real_mirror

ROOT = Path(__file__).resolve().parents[2]


def _plain(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _compare(data: bytes, where: str) -> int:
    """Compare both parsers on ``data``; returns how many files were compared."""
    ours = parse(data)
    theirs = PatchSet(data.decode("utf-8", errors="surrogateescape"))
    assert len(ours.files) == len(theirs), where  # in order: a path may appear twice (a type
    compared = 0  # change is a deletion and a creation)
    for f, pf in zip(ours.files, theirs):
        if pf.is_binary_file or '"' in pf.path or " " in pf.path:
            continue
        assert f.path == (_plain(pf.target_file) or _plain(pf.source_file)), (where, pf.path)
        assert (f.added, f.removed) == (pf.added, pf.removed), (where, pf.path)
        assert len(f.hunks) == len(pf), (where, pf.path)
        for h, ph in zip(f.hunks, pf):
            assert (h.old_start, h.old_len, h.new_start, h.new_len) == (
                ph.source_start,
                ph.source_length,
                ph.target_start,
                ph.target_length,
            ), where
            body = [
                line.line_type + line.value.rstrip("\n") for line in ph if line.line_type in " +-"
            ]
            mine_body = [
                ln.decode("utf-8", errors="surrogateescape").rstrip("\n")
                for ln in h.lines
                if ln[:1] in (b" ", b"+", b"-")
            ]
            assert mine_body == body, (where, pf.path, h.header)
        compared += 1
    return compared


def _patch_files() -> list[Path]:
    found = sorted((ROOT / "patches").glob("*.patch"))
    found += sorted((ROOT / "tests").rglob("*.patch"))
    return found


def test_series_and_data_patches_agree_with_unidiff() -> None:
    files = _patch_files()
    assert len(files) >= 9
    compared = sum(_compare(p.read_bytes(), p.name) for p in files)
    assert compared >= 30


def test_render_gives_the_input_back() -> None:
    for p in _patch_files():
        data = p.read_bytes()
        body = data[data.index(b"diff --git") :] if b"diff --git" in data else data
        assert parse(body).render() == body, p.name


def test_upstream_history_agrees_with_unidiff() -> None:
    mirror = real_mirror()  # skips without one
    out = subprocess.run(
        [
            "git",
            "-C",
            str(mirror),
            "log",
            "-p",
            "--no-renames",
            "--format=%x00commit %H",
            "--no-merges",
            "-200",
            "3346fa8a2",
        ],
        capture_output=True,
        check=True,
    ).stdout
    compared = 0
    for chunk in out.split(b"\0commit ")[1:]:
        sha, _, body = chunk.partition(b"\n")
        start = body.find(b"diff --git")
        if start >= 0:
            compared += _compare(body[start:], sha[:12].decode())
    assert compared >= 500


def test_a_diff_is_a_model_of_files() -> None:
    """The type the comparisons above rely on (guards against comparing nothing)."""
    assert isinstance(parse(b""), Diff) and parse(b"").empty
