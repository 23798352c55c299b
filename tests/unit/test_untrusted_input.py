"""Hostile input (issue 7): patches that would write outside the tree, into ``.git``, through an
escaping symlink or with a setuid mode are refused when the patch file is read, before any git
process sees them (``apply`` refuses before it even creates the upstream mirror); upstream URLs
with command-running transports are refused; no shell string anywhere in the package.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebasectl.model.diffs import unquote_path
from rebasectl.model.patches import PatchError, check_symlink, parse
from tests.harness import syntax
from tests.harness.syntax import nodes
from tests.sfix import Scenario, run_cli, snapshot, template_fixture

P1 = "patches/0001-change-a-line-3.patch"
HEAD = (
    "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    "From: Mallory <m@example.invalid>\n"
    "Date: Thu, 01 Jan 2026 00:03:00 +0000\n"
    "Subject: innocent change\n"
    "\n"
    "---\n"
)  # the diff starts on line 7
HUNK_NEW = "--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+owned\n"


def new_file(path: str, mode: str = "100644", quoted: str | None = None) -> str:
    name = quoted or f"a/{path} b/{path}"
    return (f"diff --git {name}\nnew file mode {mode}\n"
            f"index {'0' * 40}..{'1' * 40}\n"
            + HUNK_NEW.format(p=path))


def symlink(path: str, target: str) -> str:
    return (f"diff --git a/{path} b/{path}\nnew file mode 120000\n"
            f"index {'0' * 40}..{'1' * 40}\n"
            f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{target}\n"
            "\\ No newline at end of file\n")


MODIFY_A = ("diff --git a/a.txt b/a.txt\n"
            "index ab22d9096466f767202d180b93e1c6cb1699199f.."
            "52f79b51c2d941d9941c3479936ae1c436d07a80 100644\n"
            "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n a 1\n-a 2\n+A 2\n")

# name -> (diff, the line of the diff (1-based) the refusal names, words of the refusal)
HOSTILE: dict[str, tuple[str, int, str]] = {
    "dotdot": (new_file("../outside.txt"), 1, "path with '..' refused"),
    "dotdot-deep": (new_file("src/../../outside.txt"), 1, "path with '..' refused"),
    "absolute": (new_file("/etc/cron.d/x"), 1, "absolute path refused"),
    "dot-git-hook": (new_file(".git/hooks/post-checkout", "100755"), 1, "path into .git"),
    "dot-git-upper": (new_file("sub/.GIT/config"), 1, "path into .git"),
    "quoted-octal-dotdot": (new_file("x", quoted='"a/\\056\\056/x" "b/\\056\\056/x"'), 1,
                            "path with '..' refused"),
    "plus-line-dotdot": (MODIFY_A.replace("+++ b/a.txt", "+++ b/../a.txt"), 4,
                         "path with '..' refused"),
    "rename-to-outside": ("diff --git a/a.txt b/a.txt\nsimilarity index 100%\n"
                          "rename from a.txt\nrename to ../a.txt\n", 4, "path with '..' refused"),
    "copy-into-git": ("diff --git a/a.txt b/a.txt\nsimilarity index 100%\n"
                      "copy from a.txt\ncopy to .git/config\n", 4, "path into .git"),
    "traditional-after-git": (MODIFY_A + "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n"
                              "@@ -1 +1 @@\n-root\n+owned\n", 9, "path with '..' refused"),
    "symlink-absolute": (symlink("link", "/etc"), 7, "points outside the tree"),
    "symlink-relative-escape": (symlink("d/link", "../../.."), 7, "points outside the tree"),
    "symlink-into-git": (symlink("link", ".git/hooks"), 7, "points outside the tree"),
    "mode-to-symlink-escape": ("diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 120000\n"
                               "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a 1\n+/etc/shadow\n", 8,
                               "points outside the tree"),
    "setuid-new-file": (new_file("tool", "104755"), 2, "file mode 104755 refused"),
    "setuid-mode-change": ("diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 104755\n", 3,
                           "file mode 104755 refused"),
    "setgid-index-line": (MODIFY_A.replace(" 100644\n", " 102755\n"), 2,
                          "file mode 102755 refused"),
    "gitlink-submodule": (new_file("sub", "160000"), 2, "file mode 160000 refused"),
    "binary-literal": ("diff --git a/a.bin b/a.bin\nnew file mode 100644\n"
                       "index 0000000..1111111\nGIT binary patch\nliteral 4\nLcmZ?d00001\n\n"
                       "literal 0\nHcmV?d00001\n", 4, "binary patch refused"),
}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    yield from template_fixture(tmp_path_factory, "hostile")


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patch_refused_by_parser(name: str) -> None:
    diff, line, words = HOSTILE[name]
    with pytest.raises(PatchError) as info:
        parse((HEAD + diff).encode(), "p.patch")
    assert f"p.patch:{6 + line}: " in info.value.message
    assert words in info.value.message


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patch_refused_before_git(name: str, template: Scenario, tmp_path: Path) -> None:
    series = tmp_path / "series"
    shutil.copytree(template.series, series)
    diff, line, words = HOSTILE[name]
    (series / P1).write_text(HEAD + diff)
    before = snapshot(series)
    code, out, err = run_cli(series, "apply", "--upstream", str(template.up.path))
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and f"{P1}:{6 + line}: " in err and words in err, err
    assert not (series / ".rebasectl" / "upstream.git").exists()  # git never ran
    assert not (series / ".rebasectl" / "tree").exists()
    assert snapshot(series) == before
    assert not (tmp_path / "outside.txt").exists()


def test_benign_lookalikes_accepted() -> None:
    """What the checks must not refuse: '..' inside a name, a removed line '-- x' (not a
    header), a symlink that stays inside, a quoted non-ASCII name, executable files."""
    diff = ("diff --git a/a..b.txt b/a..b.txt\nindex 1111111..2222222 100755\n"
            "--- a/a..b.txt\n+++ b/a..b.txt\n@@ -1,3 +1,3 @@\n x\n--- y\n+++ z\n x\n"
            + symlink("docs/link", "../README.md")
            + new_file("x", quoted='"a/\\303\\244.txt" "b/\\303\\244.txt"').replace(
                "+++ b/x", '+++ "b/\\303\\244.txt"'))
    patch = parse((HEAD + diff).encode(), "ok.patch")
    assert [f.path for f in patch.files] == ["a..b.txt", "docs/link", "ä.txt"]


def test_unquote_path() -> None:
    assert unquote_path('"a/\\056\\056/x"') == "a/../x"
    assert unquote_path('"a/tab\\there"') == "a/tab\there"
    assert unquote_path('"a/\\303\\244"') == "a/ä"
    assert unquote_path("a/plain") == "a/plain"


@pytest.mark.parametrize("target", ["/", "..", "a/../../b", ".git", "x/../.git/hooks"])
def test_check_symlink_outside(target: str) -> None:
    with pytest.raises(PatchError):
        check_symlink("link", target, "w")


@pytest.mark.parametrize("url", [
    "ext::sh -c touch% /tmp/rebasectl-pwned",
    "EXT::sh -c id",
    "fd::17",
    "transport::whatever",
    "-uupload-pack=touch /tmp/x",
    "--upload-pack=touch /tmp/x",
    "gopher://example.invalid/repo",
])
@pytest.mark.parametrize("where", ["option", "env", "series"])
def test_upstream_transport_refused(url: str, where: str, template: Scenario,
                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    series = tmp_path / "series"
    shutil.copytree(template.series, series)
    args = ["apply"]
    if where == "option":
        args += [f"--upstream={url}"]
    elif where == "env":
        monkeypatch.setenv("REBASECTL_UPSTREAM", url)
    else:
        text = (series / "series.yaml").read_text()
        (series / "series.yaml").write_text(
            text.replace(f"url: {template.up.path}", f"url: '{url}'"))
    before = snapshot(series)
    code, out, err = run_cli(series, *args)
    assert code == 2, (code, out, err)
    assert err.count("\n") == 1 and ("refused" in err or "not a URL" in err), err
    assert not (series / ".rebasectl" / "upstream.git").exists()
    assert snapshot(series) == before
    assert not Path("/tmp/rebasectl-pwned").exists()


def _package_sources() -> list[Path]:
    return list(syntax.sources())


def test_no_shell_strings_in_the_package() -> None:
    """Argument lists only: no shell=True, os.system, os.popen, or commands built as strings."""
    offenders = []
    for path in _package_sources():
        for node in nodes(syntax.tree(path)):
            if isinstance(node, ast.Call):
                # a plain name (`run(...)`) is its own text and has no dot: none of the names
                # below; the rest are unparsed
                func = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                if func in ("os.system", "os.popen", "subprocess.getoutput",
                            "subprocess.getstatusoutput", "commands.getoutput"):
                    offenders.append(f"{path.name}:{node.lineno}: {func}")
                for kw in node.keywords:
                    if kw.arg == "shell" and not (isinstance(kw.value, ast.Constant)
                                                  and kw.value.value is False):
                        offenders.append(f"{path.name}:{node.lineno}: shell=")
                if func.startswith("subprocess.") and node.args and isinstance(
                        node.args[0], (ast.Constant, ast.JoinedStr)):
                    offenders.append(f"{path.name}:{node.lineno}: command as a string")
    assert offenders == []


def test_only_the_git_door_runs_git() -> None:
    """git is started in rebasectl/git/runner.py and nowhere else (and no module outside
    rebasectl/git/ builds git argument lists by hand)."""
    spawners = []
    for path in _package_sources():
        text = syntax.text(path)
        if path.name != "runner.py" and ('["git"' in text or "'git'," in text
                                         or "\"git\"," in text):
            spawners.append(path.name)
    assert spawners == []
