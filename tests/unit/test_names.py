"""A clean merge that still breaks: the patch removes an import, upstream has since added a use
of it. bump says so (file, line, the upstream commit that wrote the use); the binding rules are
checked on their own."""

from __future__ import annotations

import json
from pathlib import Path

from rebasectl.report.names import bound
from tests.harness.cli import run as rebasectl
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import imported

MODULE = "".join([
    "import os\n", "from helpers import helper, other\n", "\n",
    *(f"X{i} = {i}\n" for i in range(20)),
    "\n", "def main():\n", "    return other()\n",
])


def test_bump_names_the_upstream_use_of_a_removed_import(tmp_path: Path) -> None:
    fork = Fork(tmp_path, {"a.py": MODULE})
    shas = fork.series([("fix: drop the helper import", {
        "a.py": ("from helpers import helper, other\n", "from helpers import other\n")})])
    series = imported(tmp_path, fork, shas[-1])
    use = fork.change("use the helper again", {"a.py": ("    return other()\n",
                                                       "    return other()\n\n\n"
                                                       "def late():\n    return helper()\n")})
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  "--artifacts", str(tmp_path / "art"), "--annotations")
    assert r.returncode == 0, r.stderr
    (patch,) = json.loads(r.stdout)["patches"]
    assert patch["findings"] == [{"kind": "uses-removed-name", "path": "a.py",
                                  "line": 30, "name": "helper", "commit": use}]
    assert f"a.py:30 uses `helper`, which the patch removes (written by upstream {use[:12]})" \
        in r.stderr


def test_bound_names() -> None:
    lines = [b"import os.path", b"import numpy as np", b"from m import (a, b as c)",
             b"from m import d  # note", b"def f(x):", b"async def g():", b"class K(Base):",
             b"x = 1"]
    assert bound(lines) == {"os", "np", "a", "c", "d", "f", "g", "K"}


def test_an_assignment_rebinds_a_removed_import() -> None:
    """[6/8] of the example pair replaces ``from x import compute_topk`` by ``compute_topk =
    ...``: the name is still bound, so its uses are not dangling."""
    from rebasectl.report.names import bound

    assert "compute_topk" in bound([b"compute_topk = wrap(impl)\n"], assignments=True)
    assert "compute_topk" not in bound([b"compute_topk = wrap(impl)\n"])
    assert "x" not in bound([b"x == 1\n"], assignments=True)
    assert "y" in bound([b"    y: int = 2\n"], assignments=True)
