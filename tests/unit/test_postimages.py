"""A patch whose preimage is an earlier patch's postimage merges 3-way as a rebase of the series'
commits merges it, in a repository that never held the series on its base.

The 3-way base of patch k is the series' own tree at patch k on its pinned base: what ``git
rebase`` of the series' commits uses, and what ``git am -3`` uses where the repository holds the
series' blobs (the maintainer's own). ``git apply --3way`` also writes each file's postimage
(preimage + patch) before it merges, so later patches find theirs. The Python materialiser
writes nothing while it applies: without its own record of those postimages it called the second
patch below a conflict, and only a repository that earlier commands (or tests) had filled with
the series' blobs hid it (the real June series' int4-qat on compat's lines).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rebasectl.engine.materialize import Materializer
from rebasectl.git import Repo as GitRepo
from rebasectl.model.ids import Oid
from rebasectl.model.patches import parse
from rebasectl.model.series import PatchEntry
from rebasectl.model.series_patch import SeriesPatch
from rebasectl.model.status import Applied
from tests.harness.git import Repo, git, lines

A = lines(20, "a")


def _series(tmp: Path, index: tuple[str, str] = ("--full-index", "--full-index")
            ) -> list[tuple[bytes, SeriesPatch]]:
    """Two patches made in a repository of their own on the base's content: the second changes
    line 8 with the first's line 10 in its context."""
    dev = Repo(tmp / "dev")
    dev.commit("base", {"a.txt": A})
    dev.commit("fix: one", {"a.txt": A.replace("a 10\n", "P 10\n")})
    dev.commit("fix: two", {"a.txt": A.replace("a 10\n", "P 10\n").replace("a 8\n", "Q 8\n")})
    out = []
    for k, rev in enumerate(("HEAD~1", "HEAD"), start=1):
        data = dev.git("format-patch", index[k - 1], "--stdout", "-1", rev).encode() + b"\n"
        patch = parse(data, f"{k}.patch")
        out.append((data, SeriesPatch(PatchEntry(f"p{k}", f"{k}.patch", patch.subject), patch)))
    return out


@pytest.mark.parametrize("index", [("--full-index", "--full-index"), ("--abbrev=12", "--abbrev=7"),
                                   ("--abbrev=7", "--full-index")])
def test_an_earlier_patchs_postimage_is_a_later_patchs_preimage(tmp_path: Path,
                                                                index: tuple[str, str]) -> None:
    """Also with abbreviated index lines, of other lengths in each patch, as hand-made patches
    have them (hostile11 #12)."""
    up = Repo(tmp_path / "up")
    up.commit("base", {"a.txt": A})
    new = up.commit("upstream", {"a.txt": A.replace("a 6\n", "UP 6\n")})
    files = _series(tmp_path, index)
    series = [sp for _, sp in files]
    preimage = series[1].patch.files[0].old_blob
    assert preimage and git(up.path, "cat-file", "-e", preimage, check=False).returncode != 0

    steps = Materializer(GitRepo(up.path)).run(Oid(new), series).steps

    # the first applies as it is (git's 3-way wrote its postimage all the same); the second
    # merges on it
    assert [s.status for s in steps] == [Applied.CLEAN, Applied.MERGED]
    clone = tmp_path / "am"  # git's own answer: am -3 of the same files, on the same commit, in
    git(tmp_path, "clone", "-q", str(up.path), str(clone))  # a repository holding the series
    git(clone, "fetch", "-q", str(tmp_path / "dev"), "main")
    for data, _ in files:
        git(clone, "am", "-q", "-3", input=data)
    assert steps[-1].commit is not None
    assert git(up.path, "rev-parse", f"{steps[-1].commit}^{{tree}}").stdout == \
        git(clone, "rev-parse", "HEAD^{tree}").stdout


def test_a_conflict_on_such_a_preimage_has_git_am_3s_markers(tmp_path: Path) -> None:
    """The same two patches on an upstream that also rewrote line 8: the second conflicts, and
    its stop has the region and markers of a 3-way merge (git finds the preimage), never a
    "does not apply" without regions."""
    up = Repo(tmp_path / "up")
    up.commit("base", {"a.txt": A})
    new = up.commit("upstream", {"a.txt": A.replace("a 6\n", "UP 6\n").replace("a 8\n", "UP 8\n")})
    files = _series(tmp_path)
    steps = Materializer(GitRepo(up.path)).run(Oid(new), [sp for _, sp in files]).steps

    assert [s.status for s in steps] == [Applied.MERGED, Applied.CONFLICT]
    (conflict,) = steps[1].conflicts
    assert conflict.path == "a.txt" and len(conflict.regions) == 1
    assert conflict.content is not None and b"<<<<<<< " in conflict.content
    assert b"UP 8\n" in conflict.content and b"Q 8\n" in conflict.content


def test_a_long_chain_of_postimages_is_rebuilt_without_recursion(tmp_path: Path) -> None:
    """hostile11 #5: 150 patches each changing the next line of one file, the last one meeting
    an upstream change beside it: its preimage is rebuilt through 149 earlier postimages, in a
    loop (the stack stays shallow) and with a bounded cache."""
    count = 150
    text = [f"line {i}\n" for i in range(1, 2 * count + 11)]
    stream = []
    for k in range(count + 1):  # one fast-import stream: the base, then patch k on line 2k
        if k:
            text[2 * k - 1] = f"P {2 * k}\n"
        data, message = "".join(text).encode(), (f"fix: {k}" if k else "base").encode()
        stream += [b"commit refs/heads/main\ncommitter t <t@e> %d +0000\n" % (1767225600 + k),
                   b"data %d\n%s\n" % (len(message), message),
                   b"M 100644 inline a.txt\ndata %d\n%s\n" % (len(data), data)]
    dev = tmp_path / "dev"
    git(tmp_path, "init", "-q", "--bare", str(dev))
    git(dev, "fast-import", "--quiet", input=b"".join(stream))
    out = git(dev, "format-patch", "--full-index", "-o", str(tmp_path / "pat"),
              f"main~{count}..main").stdout
    series = []
    for k, name in enumerate(out.split(), start=1):
        patch = parse(Path(name).read_bytes(), name)
        series.append(SeriesPatch(PatchEntry(f"p{k}", name, patch.subject), patch))
    up = Repo(tmp_path / "up")
    base = [f"line {i}\n" for i in range(1, 2 * count + 11)]
    up.commit("base", {"a.txt": "".join(base)})
    base[2 * count + 1] = "UP\n"
    new = up.commit("upstream", {"a.txt": "".join(base)})
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)  # 149 nested rebuilds would need far more frames than this
    try:
        steps = Materializer(GitRepo(up.path)).run(Oid(new), series).steps
    finally:
        sys.setrecursionlimit(limit)
    assert [s.status for s in steps] == [Applied.CLEAN] * (count - 1) + [Applied.MERGED]
    assert git(up.path, "show", f"{steps[-1].commit}:a.txt").stdout == "".join(text).replace(
        f"line {2 * count + 2}\n", "UP\n")
