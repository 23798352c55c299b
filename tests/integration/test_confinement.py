"""Nothing rebasectl writes leaves the checkout or the work tree, whatever links the series
makes: each symlink is followed through the links the series made before it (not only read as
text), and a file written into the work tree has the real path of its folder checked when it is
written (rebasectl/infra/fsutil.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from rebasectl.infra.errors import RebasectlError
from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo


def _series_with_links(tmp: Path) -> tuple[Repo, Path, str]:
    """Patch 1 adds ``a/b/c/s -> ../../..`` (the root: inside), patch 2 ``t -> a/b/c/s/../../..``
    (reads as ``a``; really three folders above the root). Imported from real commits."""
    up = Repo(tmp / "up")
    base = up.commit("base", {"a/b/c/keep.txt": "keep\n", "main.py": "x = 1\n"})
    up.branch("feature")
    up.checkout("feature")
    os.symlink("../../..", up.path / "a/b/c/s")
    up.commit("feat: link to the root")
    os.symlink("a/b/c/s/../../..", up.path / "t")
    up.commit("feat: a second link")
    up.checkout("main")
    series = tmp / "deep" / "er" / "series"
    series.mkdir(parents=True)
    r = rebasectl(series, "import", f"{base}..feature", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    return up, series, base


def _add_patch_writing_through(series: Path) -> None:
    """A third patch that creates ``t/x.py`` (a file 'inside' t), written by hand as a patch
    file and listed in series.yaml."""
    first = sorted((series / "patches").iterdir())[0]
    text = first.read_text()
    head = text[: text.index("diff --git")]
    head = re.sub(r"Subject: .*", "Subject: feat: write through the link", head)
    diff = ("diff --git a/t/x.py b/t/x.py\nnew file mode 100644\nindex "
            "0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
            "\n--- /dev/null\n+++ b/t/x.py\n@@ -0,0 +1 @@\n+print('outside')\n")
    (series / "patches" / "0003-write-through.patch").write_text(head + diff)
    with (series / "series.yaml").open("a") as fh:
        fh.write("- id: write-through\n  title: 'feat: write through the link'\n"
                 "  file: 0003-write-through.patch\n")


def test_two_links_that_escape_together_are_refused(tmp_path: Path) -> None:
    """Finding 5: each link passes the text check on its own; together they lead out, and a
    later patch writing ``t/x.py`` made `apply` write outside the checkout while `check` said
    ok. Both refuse it now, in one line, and nothing is written anywhere."""
    up, series, base = _series_with_links(tmp_path)
    _add_patch_writing_through(series)
    r = rebasectl(series, "check")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "outside the tree" in r.stderr and "0002" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = rebasectl(series, "apply", "--upstream", str(up.path))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "outside the tree" in r.stderr, r.stderr
    assert not list(tmp_path.rglob("x.py"))
    assert not (series / ".rebasectl" / "tree").exists()


def test_a_path_beyond_a_link_of_the_series_is_refused(tmp_path: Path) -> None:
    """A link that stays inside (``a/b/c/s`` is the root) may not be written through either:
    git refuses a path "beyond a symbolic link", and so does check."""
    up, series, _ = _series_with_links(tmp_path)
    second = sorted((series / "patches").iterdir())[1]
    second.unlink()
    text = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text(text[: text.index("- id: a-second-link")])
    _add_patch_writing_through(series)
    patch = series / "patches" / "0003-write-through.patch"
    patch.write_text(patch.read_text().replace("t/x.py", "a/b/c/s/x.py"))
    r = rebasectl(series, "check")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "beyond the symbolic link a/b/c/s" in r.stderr, r.stderr


def test_links_that_stay_inside_pass(tmp_path: Path) -> None:
    """The guard: the two links alone (no write through them) still apply; the second one
    leads outside, so it is refused even alone."""
    up, series, _ = _series_with_links(tmp_path)
    text = (series / "series.yaml").read_text()
    (series / "series.yaml").write_text(text[: text.index("- id: a-second-link")])
    (sorted((series / "patches").iterdir())[1]).unlink()
    r = rebasectl(series, "check")
    assert r.returncode == 0, r.stderr
    r = rebasectl(series, "apply", "--upstream", str(up.path))
    assert r.returncode == 0, r.stderr
    assert os.readlink(series / ".rebasectl" / "tree" / "a/b/c/s") == "../../.."


def test_write_checks_the_real_folder_at_write_time(tmp_path: Path) -> None:
    """write_confined resolves the folder when it writes: a link made on disk (not in any
    patch) that leads out is refused, and a link in the file's own place is replaced, never
    followed."""
    from rebasectl.infra.fsutil import write_confined

    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    os.symlink("../..", root / "a" / "up")
    os.symlink(str(outside), root / "out")
    with pytest.raises(RebasectlError, match="outside"):
        write_confined(root, "a/up/outside/x.py", b"no\n")
    with pytest.raises(RebasectlError, match="outside"):
        write_confined(root, "out/x.py", b"no\n")
    os.symlink(str(outside / "victim"), root / "a" / "file.py")
    write_confined(root, "a/file.py", b"yes\n")
    assert not (outside / "victim").exists() and not list(outside.iterdir())
    assert not (root / "a" / "file.py").is_symlink()
    assert (root / "a" / "file.py").read_bytes() == b"yes\n"


def test_a_path_beyond_a_link_of_the_base_is_refused_once_the_base_is_known(
        tmp_path: Path) -> None:
    """The base tree's own links count too: `check` alone cannot see them, `check --apply`,
    `apply` and `bump` read the base and refuse a patch writing through one."""
    up = Repo(tmp_path / "up")
    (up.path / "sub").mkdir(parents=True)
    os.symlink("sub", up.path / "lnk")
    base = up.commit("base", {"sub/keep.txt": "keep\n", "main.py": "x = 1\n"})
    up.branch("feature")
    up.checkout("feature")
    up.commit("feat: ordinary", {"main.py": "x = 2\n"})
    up.checkout("main")
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..feature", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    _add_patch_writing_through(series)
    patch = series / "patches" / "0003-write-through.patch"
    patch.write_text(patch.read_text().replace("t/x.py", "lnk/x.py"))
    assert rebasectl(series, "check").returncode == 0
    for args in (("check", "--apply"), ("apply",)):
        r = rebasectl(series, *args, "--upstream", str(up.path))
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert "beyond the symbolic link lnk" in r.stderr, r.stderr
    assert not (up.path / "sub" / "x.py").exists()
