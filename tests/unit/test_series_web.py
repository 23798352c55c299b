"""series.yaml's optional web keys (``upstream.web``, ``fork.web``): read and checked (schema
version 1 stays; other unknown keys are still refused), kept by export's edit and by a dump."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rebasectl.model.series import SeriesError, dump, edit, parse

BASE = "a1" * 20
TEXT = f"""version: 1
upstream:
  name: megatron-lm
  url: https://github.com/NVIDIA/Megatron-LM.git
  web: https://github.com/NVIDIA/Megatron-LM
  branch: dev
  base: {BASE}
fork:
  web: https://github.com/radixark/Megatron-LM/
patches:
- id: one
  file: 0001-one.patch
  title: 'fix: one (#3)'
"""


def test_web_keys_read() -> None:
    s = parse(TEXT, Path("/nonexistent"), check_files=False)
    assert s.upstream.web == "https://github.com/NVIDIA/Megatron-LM"
    assert s.fork_web == "https://github.com/radixark/Megatron-LM"  # trailing slash dropped
    plain = parse(TEXT.replace("  web: https://github.com/NVIDIA/Megatron-LM\n", "")
                  .replace("fork:\n  web: https://github.com/radixark/Megatron-LM/\n", ""),
                  Path("/nonexistent"), check_files=False)
    assert plain.upstream.web == "" and plain.fork_web == ""


@pytest.mark.parametrize("old, new, message", [
    ("  web: https://github.com/NVIDIA/Megatron-LM\n", "  web: javascript:alert(1)\n",
     "'web' must be an http\\(s\\) URL"),
    ("  web: https://github.com/NVIDIA/Megatron-LM\n",
     "  web: 'https://x.org/a\"onmouseover=\"x'\n", "'web' must be an http\\(s\\) URL"),
    ("fork:\n  web:", "fork:\n  site:", "unknown key 'site'"),
    ("  branch: dev\n", "  branch: dev\n  homepage: https://x.org\n", "unknown key 'homepage'"),
    ("version: 1\n", "version: 2\n", "unsupported version 2"),
])
def test_bad_web_keys_refused(old: str, new: str, message: str) -> None:
    assert old in TEXT
    with pytest.raises(SeriesError, match=message):
        parse(TEXT.replace(old, new, 1), Path("/nonexistent"), check_files=False)


def test_export_keeps_them() -> None:
    s = parse(TEXT, Path("/nonexistent"), check_files=False)
    moved = replace(s, upstream=replace(s.upstream, base="b2" * 20))
    text = edit(TEXT, moved).decode()
    assert text == TEXT.replace(BASE, "b2" * 20)
    again = parse(dump(moved).decode(), Path("/nonexistent"), check_files=False)
    assert again == moved
