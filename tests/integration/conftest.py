"""Session-scoped scenarios shared by the integration suites (tests/harness/scenes.py): built
once per test process, read only: every test copies what it changes (``copy``, ``relocate``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.scenes import Two, World, build_two, build_world
from tests.sfix import Scenario, template_fixture


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """tests/sfix.py's scenario plus ``clean``, a target on which every patch applies."""
    yield from build_world(tmp_path_factory)


@pytest.fixture(scope="session")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """tests/sfix.py's scenario (patch 1 conflicts on ``new_base``)."""
    yield from template_fixture(tmp_path_factory, "scenario")


@pytest.fixture(scope="session")
def two_conflicts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Two]:
    """Both patches conflict on the new base (the second stop reached through continue)."""
    yield from build_two(tmp_path_factory)
