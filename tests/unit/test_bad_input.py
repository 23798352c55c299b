"""The bad-input corpus (issue 7): every case must end with exit 2, exactly one error line on stderr
(its last line; a case that did work first, such as creating the mirror, may have printed that
news before it on a loaded machine) that names the file and line (or the argument) at fault, no
traceback, and every byte of the series (series.yaml, patches/) as it was before the command.

The series is built once per module (import of a synthetic feature branch) and copied for each
case; the cases run the CLI in-process (``run_cli``) because there are many, and a few of them
also as a real subprocess (``test_subprocess_same_line``) to prove the process-level behaviour.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.harness.cli import one_error, spawn
from tests.harness.git import Repo
from tests.sfix import Scenario, run_cli, snapshot, template_fixture

P1 = "patches/0001-change-a-line-3.patch"
P2 = "patches/0002-add-e.patch"
P3 = "patches/0003-touch-b.patch"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    yield from template_fixture(tmp_path_factory, "bad")


@dataclass(frozen=True)
class Ctx:
    series: Path
    sc: Scenario
    tmp: Path

    def text(self, rel: str = "series.yaml") -> str:
        return (self.series / rel).read_text()

    def write(self, rel: str, text: str | bytes) -> None:
        path = self.series / rel
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)

    def sub(self, old: str, new: str, rel: str = "series.yaml", count: int = 1) -> None:
        text = self.text(rel)
        assert old in text, (old, rel)
        self.write(rel, text.replace(old, new, count))

    @property
    def up(self) -> str:
        return str(self.sc.up.path)


Setup = Callable[[Ctx], list[str]]  # mutates the copy; returns the CLI arguments


@dataclass(frozen=True)
class Case:
    name: str
    setup: Setup
    expect: str  # must appear in the one line (file:line, or the argument)


def _status(ctx: Ctx) -> list[str]:
    return ["status"]


def series_case(name: str, change: Callable[[Ctx], None], expect: str,
                args: Setup = _status) -> Case:
    def setup(ctx: Ctx) -> list[str]:
        change(ctx)
        return args(ctx)

    return Case(name, setup, expect)


def _patch_text(ctx: Ctx, rel: str = P1) -> bytes:
    return (ctx.series / rel).read_bytes()


def _readonly(path: Path) -> None:
    """Make ``path`` (a directory) really unwritable, also for root (chattr +i), or skip."""
    path.chmod(0o555)
    probe = path / ".probe"
    try:
        probe.write_text("x")
    except OSError:
        return
    probe.unlink()
    path.chmod(0o755)
    if shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)],
                                                  capture_output=True).returncode == 0:
        _IMMUTABLE.add(path)
        return
    pytest.skip("cannot make a directory unwritable here (root without chattr)")


_IMMUTABLE: set[Path] = set()  # what _readonly made immutable: only those need a chattr -i


def _writable_again(path: Path) -> None:
    if path in _IMMUTABLE:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
        _IMMUTABLE.discard(path)
    if path.exists():
        path.chmod(0o755)


def _git_checkout(path: Path) -> None:
    """Make ``path`` a git repository with everything in it committed (a user's checkout)."""
    repo = Repo(path)
    (path / "mine.txt").write_text("precious\n")
    repo.commit("user work")


def _hunk_header(ctx: Ctx) -> None:
    ctx.write(P1, _patch_text(ctx).replace(b"@@ -1,6 +1,6 @@", b"@@ -one +two @@"))


CASES: list[Case] = [
    # -- series.yaml ---------------------------------------------------------------------------
    series_case("series-missing", lambda c: (c.series / "series.yaml").unlink(),
                "series.yaml: not found"),
    series_case("series-is-directory",
                lambda c: ((c.series / "series.yaml").unlink(),
                           (c.series / "series.yaml").mkdir()), "series.yaml"),
    series_case("yaml-syntax-error", lambda c: c.write("series.yaml", c.text() + "  - [oops\n"),
                "series.yaml:"),
    series_case("not-utf8", lambda c: c.write("series.yaml", b"version: 1\n\xff\xfe\n"),
                "series.yaml"),
    series_case("empty-series-file", lambda c: c.write("series.yaml", ""), "series.yaml:1"),
    series_case("top-level-list", lambda c: c.write("series.yaml", "- 1\n- 2\n"),
                "series.yaml:1"),
    series_case("version-2", lambda c: c.sub("version: 1", "version: 2"), "series.yaml:1"),
    series_case("version-string", lambda c: c.sub("version: 1", "version: '1'"),
                "series.yaml:1"),
    series_case("unknown-top-key", lambda c: c.write("series.yaml", c.text() + "colour: red\n"),
                "unknown key 'colour'"),
    series_case("unknown-patch-key",
                lambda c: c.sub("  kind: fix\n", "  kind: fix\n  colour: red\n"),
                "series.yaml:12: unknown key 'colour'"),
    series_case("upstream-missing",
                lambda c: c.write("series.yaml", "version: 1\npatches: []\n"),
                "series.yaml:1: missing key 'upstream'"),
    series_case("base-short-sha", lambda c: c.sub(f"base: {c.sc.base}", "base: abc123"),
                "series.yaml:6: upstream.base must be a full 40-hex sha"),
    series_case("url-wrong-type", lambda c: c.sub(f"url: {c.up}", "url: 42"),
                "series.yaml:4: 'url' must be str"),
    series_case("patches-not-a-list",
                lambda c: c.write("series.yaml", c.text().split("patches:")[0] + "patches: 5\n"),
                "series.yaml:7: 'patches' must be a list"),
    series_case("entry-without-id", lambda c: c.sub("- id: add-e\n", "- ids: add-e\n"),
                "series.yaml:17: unknown key 'ids'"),
    series_case("entry-without-file", lambda c: c.sub("  file: 0002-add-e.patch\n", ""),
                "series.yaml:17: patch entry without 'file'"),
    series_case("duplicate-id", lambda c: c.sub("- id: add-e\n", "- id: change-a-line-3\n"),
                "series.yaml:17: duplicate patch id 'change-a-line-3' (first at line 8)"),
    series_case("duplicate-file",
                lambda c: c.sub("file: 0002-add-e.patch", "file: 0001-change-a-line-3.patch"),
                "series.yaml:17: patch file '0001-change-a-line-3.patch' listed twice"),
    series_case("id-not-a-slug", lambda c: c.sub("- id: add-e\n", "- id: Add E\n"),
                "series.yaml:17: id 'Add E' must be a slug"),
    series_case("bad-kind", lambda c: c.sub("kind: fix", "kind: hotfix"),
                "series.yaml:11: kind 'hotfix' is not one of"),
    series_case("tests-not-a-list", lambda c: c.sub("  tests: []\n", "  tests: x.py\n"),
                "series.yaml:16: 'tests' must be a list"),
    series_case("absorbs-not-strings", lambda c: c.sub("  absorbs: []\n", "  absorbs: [[1]]\n"),
                "series.yaml:15: 'absorbs' entries must be strings"),
    series_case("empty-title", lambda c: c.sub("title: 'feat: add e'", "title: ' '"),
                "series.yaml:17: empty title"),
    series_case("file-dotdot",
                lambda c: c.sub("file: 0002-add-e.patch", "file: ../series.yaml"),
                "series.yaml:18: file '../series.yaml' escapes the repository"),
    series_case("file-absolute",
                lambda c: c.sub("file: 0002-add-e.patch", "file: /etc/passwd"),
                "series.yaml:18: file '/etc/passwd' must be a relative path"),
    series_case("file-symlink-escape",
                lambda c: ((c.series / "patches/evil.patch").symlink_to("/etc/passwd"),
                           c.sub("file: 0002-add-e.patch", "file: evil.patch")),
                "series.yaml:18: file 'evil.patch' escapes the repository (symlink?)"),
    series_case("patches-dir-symlink-outside",
                lambda c: (shutil.copytree(c.series / "patches", c.tmp / "elsewhere"),
                           shutil.rmtree(c.series / "patches"),
                           (c.series / "patches").symlink_to(c.tmp / "elsewhere")),
                "series.yaml:9: file 'patches/0001-change-a-line-3.patch' escapes the repository"),
    Case("import-through-symlinked-patches",
         lambda c: ((c.tmp / "elsewhere").mkdir(), shutil.rmtree(c.series / "patches"),
                    (c.series / "patches").symlink_to(c.tmp / "elsewhere"),
                    (c.series / "series.yaml").unlink(),
                    ["import", f"{c.sc.base}..feature", "--repo", c.up])[4],
         "patches: leads outside the repository"),
    series_case("file-into-dot-git",
                lambda c: c.sub("file: 0002-add-e.patch", "file: .git/config"),
                "series.yaml:18: file '.git/config' escapes the repository"),
    series_case("test-path-escape",
                lambda c: c.sub("  tests: []\n", "  tests: [../../outside.py]\n"),
                "series.yaml:16: test path '../../outside.py' escapes the repository"),
    series_case("test-path-missing",
                lambda c: c.sub("  tests: []\n", "  tests: [tests/regression/test_gone.py]\n"),
                "series.yaml:16: test path 'tests/regression/test_gone.py' not found",
                lambda c: ["check"]),
    series_case("test-path-missing-at-test",
                lambda c: c.sub("  tests: []\n", "  tests: [tests/regression/test_gone.py]\n"),
                "series.yaml:16: test path 'tests/regression/test_gone.py' not found",
                lambda c: ["test"]),
    series_case("missing-patch-file", lambda c: (c.series / P2).unlink(),
                "series.yaml:18: patch file patches/0002-add-e.patch not found"),
    series_case("yaml-python-tag",
                lambda c: c.sub("version: 1", "version: !!python/object/apply:os.system [id]"),
                "series.yaml:1"),
    series_case("yaml-bad-int-tag", lambda c: c.sub("version: 1", "version: !!int one"),
                "series.yaml:1"),
    series_case("yaml-two-documents", lambda c: c.write("series.yaml", c.text() + "---\na: 1\n"),
                "series.yaml:"),
    series_case("yaml-nested-too-deep",
                lambda c: c.write("series.yaml", "a: " + "[" * 3000 + "\n"), "series.yaml:"),
    # -- patch files ---------------------------------------------------------------------------
    series_case("patch-not-a-patch", lambda c: c.write(P1, "hello, world\n"),
                f"{P1}:1: no mail header"),
    series_case("patch-empty", lambda c: c.write(P1, b""), f"{P1}:1: empty file"),
    series_case("patch-crlf", lambda c: c.write(P1, _patch_text(c).replace(b"\n", b"\r\n")),
                f"{P1}:1: CRLF line endings"),
    series_case("patch-binary",
                lambda c: c.write(P1, _patch_text(c).split(b"--- a/a.txt")[0]
                                  + b"GIT binary patch\nliteral 4\nLcmZ?d00001\n\n"),
                f"{P1}:9: binary patch refused"),
    series_case("patch-binary-files-differ",
                lambda c: c.write(P1, _patch_text(c).split(b"--- a/a.txt")[0]
                                  + b"Binary files a/a.txt and b/a.txt differ\n"),
                f"{P1}:9: binary patch refused"),
    series_case("patch-nul-byte", lambda c: c.write(P1, _patch_text(c).replace(b"a 4", b"a\0")),
                f"{P1}:16: NUL byte"),
    series_case("patch-truncated-hunk",
                lambda c: c.write(P1, b"\n".join(_patch_text(c).split(b"\n")[:-4]) + b"\n"),
                f"{P1}:11: truncated hunk in a.txt"),
    series_case("patch-hunk-too-long",
                lambda c: c.write(P1, _patch_text(c) + b" a 7\n a 8\n"),
                f"{P1}:11: hunk longer than its @@ header"),
    series_case("patch-corrupt-hunk-header", _hunk_header, f"{P1}:11: malformed hunk header"),
    # hostile5 #2: a hunk made longer by hand, with a good file after it (read as message text,
    # the file dropped)
    series_case("patch-long-hunk-before-a-good-file",
                lambda c: c.write(P1, _patch_text(c).replace(b"+PATCH 3\n", b"+PATCH 3\n+mine\n")
                                  + _patch_text(c, P3).split(b"---\n")[1]),
                f"{P1}:11: hunk longer than its @@ header says in a.txt (git apply: corrupt "
                "patch)", lambda c: ["check"]),
    series_case("patch-cut-to-mail-header",
                lambda c: c.write(P1, _patch_text(c).split(b"\n---\n")[0] + b"\n"),
                f"{P1}:5: no diff, and no signature after the message", lambda c: ["check"]),
    # hostile6 #9: cut after the `---` line (git am: "No valid patches in input"); it read as
    # an empty commit, and apply went on without the patch's change
    series_case("patch-cut-after-its-separator",
                lambda c: c.write(P1, _patch_text(c).split(b"\n---\n")[0] + b"\n---\n"),
                f"{P1}:6: '---' line with no diff after it: the file looks cut short",
                lambda c: ["check", "--apply"]),
    series_case("patch-cut-after-its-separator-apply",
                lambda c: c.write(P1, _patch_text(c).split(b"\n---\n")[0] + b"\n---\n"),
                f"{P1}:6: '---' line with no diff after it", lambda c: ["apply", "--upstream",
                                                                        c.up]),
    series_case("patch-missing-from",
                lambda c: c.write(P1, _patch_text(c).replace(b"From: T", b"X-From: T", 1)
                                  .replace(b"From: Test Author", b"X-From: Test Author", 1)),
                f"{P1}:1: missing 'From:' header"),
    series_case("patch-bad-date",
                lambda c: c.write(P1, _patch_text(c).replace(b"Thu, 01 Jan", b"Thu, 41 Foo")),
                f"{P1}:1: bad or missing 'Date:' header"),
    series_case("patch-not-mail-header",
                lambda c: c.write(P1, b"diff --git a/a.txt b/a.txt\n\n" + _patch_text(c)),
                f"{P1}:1: not a mail header line"),
    # -- upstream and base ---------------------------------------------------------------------
    Case("base-not-in-upstream",
         lambda c: ["apply", "--upstream", c.up, "--base", "deadbeef" * 5],
         "base 'deadbeefdeadbeef"),
    Case("pinned-base-not-in-upstream",
         lambda c: (c.sub(f"base: {c.sc.base}", "base: " + "ab" * 20),
                    ["apply", "--upstream", c.up])[1],
         "base 'abababab"),
    Case("upstream-not-a-git-repo",
         lambda c: ((c.tmp / "plain").mkdir(), ["apply", "--upstream", str(c.tmp / "plain")])[1],
         "plain: not a git repository"),
    Case("upstream-no-such-path",
         lambda c: ["apply", "--upstream", str(c.tmp / "nowhere")], "nowhere: no such path"),
    Case("upstream-ext-transport",
         lambda c: ["apply", "--upstream", f"ext::sh -c touch% {c.tmp}/pwned"],
         "transport refused"),
    Case("upstream-fd-transport", lambda c: ["fetch", "--upstream", "fd::3"], "transport refused"),
    Case("upstream-unknown-scheme",
         lambda c: ["fetch", "--upstream", "gopher://example.invalid/x"], "transport refused"),
    series_case("series-url-ext-transport",
                lambda c: c.sub(f"url: {c.up}", f"url: 'ext::sh -c touch% {c.tmp}/pwned'"),
                "transport refused", lambda c: ["apply"]),
    series_case("series-url-ext-transport-check",
                lambda c: c.sub(f"url: {c.up}", "url: 'ext::sh -c id'"),
                "series.yaml:4: upstream.url 'ext::sh -c id': transport refused",
                lambda c: ["check"]),
    Case("base-option-like-rev",
         lambda c: ["apply", "--upstream", c.up, "--base=--output=/tmp/x"], "--output=/tmp/x"),
    # -- command line --------------------------------------------------------------------------
    Case("unknown-format", lambda c: ["status", "--format", "pdf"], "--format"),
    Case("unknown-option", lambda c: ["apply", "--frobnicate"], "--frobnicate"),
    Case("unknown-command", lambda c: ["frobnicate"], "frobnicate"),
    Case("missing-range", lambda c: ["import"], "RANGE"),
    Case("range-without-dots", lambda c: ["import", "HEAD", "--repo", c.up], "range 'HEAD'"),
    Case("range-three-dots", lambda c: ["import", "main...feature", "--repo", c.up],
         "range 'main...feature'"),
    Case("range-empty-side", lambda c: ["import", "..feature", "--repo", c.up],
         "range '..feature'"),
    Case("range-unknown-rev", lambda c: ["import", "nosuch..feature", "--repo", c.up],
         "unknown revision 'nosuch'"),
    Case("range-option-like-rev", lambda c: ["import", "--repo", c.up, "--", "-x..feature"],
         "range '-x..feature'"),
    Case("range-not-ancestor", lambda c: ["import", f"feature..{c.sc.new_base}", "--repo", c.up],
         "is not an ancestor"),
    Case("import-binary-commit",
         lambda c: (c.sc.up.git("checkout", "-q", "-B", "bin", "feature"),
                    (c.sc.up.path / "logo.png").write_bytes(b"\x89PNG\x00\x01"),
                    c.sc.up.commit("docs: logo"), c.sc.up.checkout("main"),
                    ["import", f"{c.sc.base}..bin", "--repo", c.up])[4],
         "(docs: logo): patches/0006-logo.patch:10: binary patch refused (logo.png)"),
    Case("import-over-unlisted-patch-files",
         lambda c: ((c.series / "series.yaml").unlink(),
                    ["import", f"{c.sc.base}..feature", "--repo", c.up])[1],
         "patches/0001-change-a-line-3.patch: not listed in series.yaml and would be overwritten"),
    Case("import-repo-not-git",
         lambda c: ((c.tmp / "plain").mkdir(), ["import", "a..b", "--repo", str(c.tmp / "plain")]
                    )[1], "plain: not a git repository"),
    Case("patches-not-writable",
         lambda c: (_readonly(c.series / "patches"),
                    ["import", f"{c.sc.base}..feature~1", "--repo", c.up])[1],
         "patches: not writable"),
    Case("state-dir-is-a-file",
         lambda c: (shutil.rmtree(c.series / ".rebasectl", ignore_errors=True),
                    c.write(".rebasectl", "x\n"), ["apply", "--upstream", c.up])[2],
         ".rebasectl: cannot create rebasectl's state here"),
    Case("patches-is-a-file",
         lambda c: (shutil.rmtree(c.series / "patches"), c.write("patches", "not a dir\n"),
                    ["import", f"{c.sc.base}..feature", "--repo", c.up])[2],
         "patches: not a directory"),
    Case("directory-option-missing", lambda c: ["-C", str(c.tmp / "nowhere"), "status"],
         "nowhere"),
    Case("report-unknown-format", lambda c: ["report", "--format", "pdf"], "'--format'"),
    Case("report-malformed-range",
         lambda c: ["report", "--old-range", "abc", "--new-range", "a..b", "--repo", c.up],
         "range 'abc'"),
    Case("report-not-a-series-dir",
         lambda c: ["report", "--old-series", str(c.tmp / "nowhere")], "nowhere"),
    Case("bump-unknown-rev", lambda c: ["bump", "--to", "nosuchrev", "--upstream", c.up],
         "'nosuchrev' not found"),
    Case("bump-option-like-rev", lambda c: ["bump", "--to=--output=x", "--upstream", c.up],
         "'--output=x' is not a revision"),
    Case("bump-ext-transport",
         lambda c: ["bump", "--to", c.sc.new_base, "--upstream", "ext::sh -c id"],
         "transport refused"),
    Case("blame-unknown-patch", lambda c: ["blame", "nosuch-id", "--upstream", c.up],
         "no patch 'nosuch-id'"),
    Case("continue-without-apply", lambda c: ["continue"], "no apply in progress"),
    Case("skip-without-apply", lambda c: ["skip"], "no apply in progress"),
    Case("abort-without-apply", lambda c: ["abort"], "no apply in progress"),
    Case("export-without-work-tree", lambda c: ["export"], "no work tree"),
    Case("worktree-is-a-file",
         lambda c: (c.write("afile", "x\n"), ["apply", "--upstream", c.up,
                                              "--worktree", str(c.series / "afile")])[1],
         "afile exists and is not a directory"),
    Case("worktree-is-the-checkout",
         lambda c: (_git_checkout(c.series), ["apply", "--upstream", c.up, "--worktree",
                                              str(c.series)])[1],
         "is the series checkout or holds it"),
    Case("worktree-holds-the-checkout",
         lambda c: ["apply", "--upstream", c.up, "--worktree", str(c.tmp)],
         "is the series checkout or holds it"),
    Case("worktree-another-clone",
         lambda c: (_git_checkout(c.tmp / "clone"), ["apply", "--upstream", c.up,
                                                     "--worktree", str(c.tmp / "clone")])[1],
         "is a git repository that rebasectl did not make"),
    Case("worktree-foreign-dir",
         lambda c: ((c.tmp / "mine").mkdir(), (c.tmp / "mine" / "keep.txt").write_text("x"),
                    ["apply", "--upstream", c.up, "--worktree", str(c.tmp / "mine")])[2],
         "mine exists and is not a rebasectl work tree"),
    # hostile9 F6/F14: the series itself as its upstream pruned the upstream's refs; '' was
    # taken for no --upstream at all
    Case("upstream-is-the-series",
         lambda c: (_git_checkout(c.series), ["fetch", "--upstream", str(c.series)])[1],
         "is this series' own checkout"),
    Case("upstream-empty", lambda c: ["fetch", "--upstream", ""], "--upstream is empty"),
    # hostile9 F2: in the mirror, the next command's `git worktree prune` deleted it, files and all
    Case("worktree-in-the-mirror",
         lambda c: ["apply", "--upstream", c.up, "--worktree",
                    str(c.series / ".rebasectl" / "upstream.git" / "worktrees")],
         "inside the series' .rebasectl/"),
    Case("worktree-in-a-git-dir",  # hostile10 B5: the series' own .git/worktrees/
         lambda c: (_git_checkout(c.series), ["apply", "--upstream", c.up, "--worktree",
                                              str(c.series / ".git" / "worktrees" / "t")])[1],
         "inside a git repository's own folder"),
    Case("worktree-in-patches",
         lambda c: ["apply", "--upstream", c.up, "--worktree", str(c.series / "patches" / "t")],
         "inside the series' patches/"),
]


def _copy(template: Scenario, tmp_path: Path) -> Ctx:
    series = tmp_path / "series"
    shutil.copytree(template.series, series, symlinks=True)
    return Ctx(series, template, tmp_path)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(case: Case, template: Scenario, tmp_path: Path) -> None:
    ctx = _copy(template, tmp_path)
    try:
        args = case.setup(ctx)
        before = snapshot(ctx.series)
        outside = sorted(p.name for p in tmp_path.iterdir())
        code, out, err = run_cli(ctx.series, *args)
        after = snapshot(ctx.series)
    finally:
        _writable_again(ctx.series / "patches")
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    one_error(err, case.expect)  # news of work done first may precede it (printed live after 0.5 s)
    assert after == before, "the series changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == outside  # nothing written beside it
    assert not (tmp_path / "pwned").exists()


def test_corpus_size() -> None:
    assert len(CASES) >= 30
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name", ["yaml-syntax-error", "patch-truncated-hunk",
                                  "upstream-ext-transport", "unknown-option"])
def test_subprocess_same_line(name: str, template: Scenario, tmp_path: Path) -> None:
    """The real process gives the same one line and exit 2 as the in-process run."""
    case = next(c for c in CASES if c.name == name)
    ctx = _copy(template, tmp_path)
    args = case.setup(ctx)
    before = snapshot(ctx.series)
    r = spawn(ctx.series, *args)
    assert r.returncode == 2, r.stderr
    one_error(r.stderr, case.expect)
    assert "Traceback" not in r.stdout + r.stderr
    assert snapshot(ctx.series) == before
