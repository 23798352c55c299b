"""What rebasectl prints for a person never carries control characters from the data it
shows (an upstream file named with ``ESC[31m``, a subject with a bell): each is written as
``\\xNN`` on stdout and stderr, in lines, errors, progress news and tables; newlines and tabs
stay (hostile9 F12)."""

from __future__ import annotations

import pytest

from rebasectl import ui

EVIL = "megatron/e\x1b[31mvil\x07.py"


def test_control_characters_are_written_visibly(capsys: pytest.CaptureFixture[str]) -> None:
    ui.line(f"conflict in {EVIL}\n\tnext")
    ui.error(f"cannot read {EVIL}")
    ui.note(f"note {EVIL}")
    ui.table(None, ["path"], [[EVIL]])
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "megatron/e\\x1b[31mvil\\x07.py" in out and "\n\tnext" in out
    assert err.startswith("rebasectl: error: cannot read megatron/e\\x1b[31mvil\\x07.py\n")
    assert ui.visible("é ü 中 \u00a0") == "é ü 中 \u00a0"  # printable text is untouched
    assert ui.visible("a\u202eb\u2066c") == "a\\u202eb\\u2066c"  # hostile10 B11: bidi
