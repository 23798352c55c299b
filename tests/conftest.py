"""Hermetic git for every tool test: no user or system config, fixed identities and dates.

The user's git config must never leak into tests (a ``diff.algorithm`` or ``format.signature``
there would change patch bytes), so every test runs with HOME in a tmp dir, global and system
config off, and fixed author/committer identities and dates.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_HERMETIC = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    "GIT_AUTHOR_DATE": "1767225600 +0000",
    "GIT_COMMITTER_DATE": "1767225600 +0000",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
    # The pytest processes the tool starts (`rebasectl test`, torchrun's ranks, ci/*.sh) run the
    # tests' small fake suites, none of which uses hypothesis: its plugin, loaded by every pytest
    # start, was 0.85 s of each such process's 1.1 s of CPU.
    "PYTEST_ADDOPTS": "-p no:hypothesispytest",
}


MEMORY_TMP = Path("/dev/shm")
MEMORY_TMP_ROOM = 8 << 30  # the mirror suite's trees peak near 2 GiB: room for four runs at once


def _memory_basetemp() -> Path | None:
    """A fresh folder on the memory file system, when there is one with room: rebasectl saves
    its state with fsync (nothing is lost when killed), and on this machine's disk those fsyncs
    were most of the suite's wall time (3 test files: 82 s on disk, 34-57 s in memory, the
    same CPU). ``REBASECTL_TEST_TMP=disk`` keeps pytest's own default."""
    if os.environ.get("REBASECTL_TEST_TMP") == "disk" or not MEMORY_TMP.is_dir() \
            or not os.access(MEMORY_TMP, os.W_OK):
        return None
    st = os.statvfs(MEMORY_TMP)
    if st.f_bavail * st.f_frsize < MEMORY_TMP_ROOM:
        return None
    return Path(tempfile.mkdtemp(prefix="rebasectl-tests-", dir=MEMORY_TMP))


def _bytecode_beside() -> None:
    """Where PYTHONDONTWRITEBYTECODE keeps bytecode out of the source tree, the Python processes
    of the run (xdist's workers, the ``python -m rebasectl``, pytest and ci/*.sh processes the
    tests start) keep it in a folder of the system's tmp instead (PYTHONPYCACHEPREFIX, one per
    user, kept between runs): the tree stays clean, and rebasectl, the test modules and their
    assertion rewriting are compiled once, not by every worker of every run (about 3.7 s of
    CPU per worker)."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        prefix = Path(tempfile.gettempdir()) / f"rebasectl-pycache-{os.getuid()}"
        prefix.mkdir(mode=0o700, exist_ok=True)
        del os.environ["PYTHONDONTWRITEBYTECODE"]
        os.environ["PYTHONPYCACHEPREFIX"] = str(prefix)


def _ctrl_c_as_at_a_terminal() -> None:
    """A suite started as a background job of a non-interactive shell (``cmd &`` in a script,
    some CI runners) inherits SIGINT ignored, and so would every rebasectl process the tests
    start: rebasectl keeps an ignored SIGINT ignored (a background job's), so the tests of a
    person's Ctrl-C then saw exit 0 instead of 130 (all of them, in every worker so started).
    The test processes take SIGINT as a foreground command does; a test that wants it ignored
    says so for its own process."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """The test processes' temporary folders in memory (see ``_memory_basetemp``). Only the
    controlling process chooses (xdist's workers get a folder under it); an explicit
    ``--basetemp`` always wins. The folder goes at the end of the run."""
    _ctrl_c_as_at_a_terminal()
    if hasattr(config, "workerinput"):
        return
    _bytecode_beside()
    if config.option.basetemp:
        return
    chosen = _memory_basetemp()
    if chosen is not None:
        config.option.basetemp = str(chosen)
        config.stash[_CHOSEN] = chosen


def _inventory(mirror: Path) -> dict[str, str]:
    """Every file of the shared mirror: what a run must leave as it found it. Objects and
    packs are named by their content, so their name and size say it (not their times: git
    freshens a pack's mtime when an object it holds is written again); every other file (refs,
    packed-refs, HEAD, config, shallow, info/) by a hash of its bytes: a moved ref keeps its
    size (hostile11 #2)."""
    found = {}
    for path in mirror.rglob("*"):
        if not path.is_file():
            continue
        name = str(path.relative_to(mirror))
        named_by_content = name.startswith("objects/") and not name.startswith("objects/info/")
        found[name] = str(path.stat().st_size) if named_by_content else \
            hashlib.sha1(path.read_bytes()).hexdigest()
    return found


def _named_mirror(env: str) -> Path:
    """REBASECTL_MEGATRON_MIRROR's path (a relative one from the repository's root, as the
    README gives it)."""
    path = Path(env)
    return path if path.is_absolute() else Path(__file__).resolve().parents[1] / path


def _shared_mirror() -> Path | None:
    env = os.environ.get("REBASECTL_MEGATRON_MIRROR")
    path = _named_mirror(env) if env else None
    return path if path is not None and path.is_dir() else None


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """The shared mirror is read-only to every test (a 3-way apply or a merge on it would write
    objects there for every later run and session): its files are counted before the run."""
    mirror = _shared_mirror()
    if mirror is not None and not hasattr(session.config, "workerinput"):
        session.config.stash[_MIRROR_FILES] = (mirror, _inventory(mirror))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """...and counted again after it: a file added, removed or changed fails the run, named."""
    mirror, before = session.config.stash.get(_MIRROR_FILES, (None, {}))
    if mirror is None:
        return
    after = _inventory(mirror)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        shown = ", ".join(changed[:5]) + more
        print(f"\nFAILED: the run wrote into the shared mirror {mirror}: {shown}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_MIRROR_FILES = pytest.StashKey[tuple[Path, dict[str, str]]]()


def pytest_unconfigure(config: pytest.Config) -> None:
    chosen = config.stash.get(_CHOSEN, None)
    if chosen is not None:
        shutil.rmtree(chosen, ignore_errors=True)


_CHOSEN = pytest.StashKey[Path]()


@pytest.fixture(autouse=True)
def hermetic_git(tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    (home / "gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    for key, value in _HERMETIC.items():
        monkeypatch.setenv(key, value)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "REBASECTL_UPSTREAM",
                "REBASECTL_DEBUG"):
        monkeypatch.delenv(key, raising=False)
    yield


def real_mirror() -> Path:
    """The real Megatron-LM mirror named by REBASECTL_MEGATRON_MIRROR (relative paths are taken
    from the repository's root, as the README gives it); skips the test without one."""
    env = os.environ.get("REBASECTL_MEGATRON_MIRROR")
    if not env:
        pytest.skip("REBASECTL_MEGATRON_MIRROR is not set (path to a Megatron-LM git mirror)")
    path = _named_mirror(env)
    if not path.exists():
        pytest.skip(f"REBASECTL_MEGATRON_MIRROR={env} does not exist")
    return path.resolve()


@pytest.fixture
def mirror_path() -> Path:
    """The real Megatron-LM mirror, for tests that need it (skipped without it)."""
    return real_mirror()


@pytest.fixture(scope="session")
def june_carried(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """This repository's series carried onto the June upstream (3346fa8a2) with the resolutions
    kept under tests/integration/resolutions/3346fa8a2 (tests/june.py); skipped without
    REBASECTL_MEGATRON_MIRROR. Session-wide: one carry serves every test that reads it."""
    from tests.june import carry, copy_series

    mirror = real_mirror()
    return carry(copy_series(tmp_path_factory.mktemp("june") / "series"), mirror)
