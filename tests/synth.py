"""Old import path of the harness (kept so tests written against it elsewhere keep working):
``Repo`` and ``lines`` are ``tests.harness.git``'s, ``rebasectl`` is ``tests.harness.cli.run``
(in this process; a real one where the environment names a fault point). New tests import from
``tests.harness`` directly."""

from __future__ import annotations

from tests.harness.cli import run as rebasectl
from tests.harness.git import Repo, lines

__all__ = ["Repo", "lines", "rebasectl"]
