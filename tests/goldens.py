"""Golden files: whole outputs compared with the copies kept under tests/golden/.

``REBASECTL_UPDATE_GOLDEN=1`` rewrites the copies from this run (then review their diff like
code); otherwise every output must equal its copy, and the failure shows the first lines of
each difference.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path


def check(folder: Path, outputs: dict[str, str]) -> None:
    if os.environ.get("REBASECTL_UPDATE_GOLDEN"):
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in outputs.items():
            (folder / name).write_text(text)
    problems = []
    for name, text in outputs.items():
        want = (folder / name).read_text()
        if text != want:
            diff = difflib.unified_diff(want.splitlines(), text.splitlines(),
                                        f"golden/{folder.name}/{name}", f"now/{name}",
                                        lineterm="", n=1)
            problems.append("\n".join(list(diff)[:40]))
    assert not problems, "\n\n".join(problems)
