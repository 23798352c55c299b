"""The person's git set-up never reaches rebasectl's own git (hostile12 #6, #7): hooks their
``init.templateDir`` holds are not copied into the mirror, and no hook there runs (a failing
git-lfs post-checkout hook broke every apply); ``GIT_DIFF_OPTS`` and the like in the
environment do not change the bytes of the patches rebasectl writes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.harness.cli import run
from tests.harness.git import git, lines
from tests.harness.scenes import forked

A = lines(30, "a")


def _series(tmp: Path) -> tuple[Path, str]:
    up, base = forked(tmp, {"a.txt": A}, [("fix: one", {"a.txt": A.replace("a 3\n", "P 3\n")})])
    (tmp / "series").mkdir()
    return up.path, base


def test_the_persons_template_hooks_neither_land_nor_run(tmp_path: Path) -> None:
    up, base = _series(tmp_path)
    template = tmp_path / "template"
    hook = template / "hooks" / "post-checkout"
    hook.parent.mkdir(parents=True)
    hook.write_text("#!/bin/sh\necho 'lfs hook failed' >&2\nexit 1\n")
    hook.chmod(hook.stat().st_mode | stat.S_IXUSR)
    (template / "info").mkdir()
    (template / "info" / "exclude").write_text("*.txt\n")  # would hide every file from status
    config = Path(os.environ["GIT_CONFIG_GLOBAL"])
    config.write_text(config.read_text() + f"[init]\n\ttemplateDir = {template}\n")
    series = tmp_path / "series"
    run(series, "import", f"{base}..feature", "--repo", str(up), want=0)
    run(series, "apply", "--upstream", str(up), want=0)
    mirror = series / ".rebasectl" / "upstream.git"
    assert not (mirror / "hooks" / "post-checkout").exists()
    assert not (mirror / "info" / "exclude").exists()
    planted = mirror / "hooks" / "post-checkout"  # a hook put there anyway does not run
    planted.parent.mkdir(exist_ok=True)
    planted.write_text(hook.read_text())
    planted.chmod(0o755)
    run(series, "apply", "--base", "main", want=0)


@pytest.mark.parametrize("name, value", [("GIT_DIFF_OPTS", "-u0"),
                                         ("GIT_EXTERNAL_DIFF", "false")])
def test_diff_options_in_the_environment_change_no_patch(tmp_path: Path, name: str,
                                                        value: str) -> None:
    up, base = _series(tmp_path)
    plain, odd = tmp_path / "plain", tmp_path / "odd"
    for where, env in ((plain, None), (odd, {name: value})):
        where.mkdir()
        run(where, "import", f"{base}..feature", "--repo", str(up), env=env, want=0)
    assert (odd / "patches").is_dir()
    assert {p.name: p.read_bytes() for p in (odd / "patches").iterdir()} == \
        {p.name: p.read_bytes() for p in (plain / "patches").iterdir()}
    assert git(up, "rev-parse", "main").stdout
