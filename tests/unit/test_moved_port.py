"""``moved`` on June's support-partial-checkpoint-loading common.py/1: upstream made the method a
module function (re-indented); the patch adds ``weights_only=False`` to its ``torch.load``. The
proposal said 'the code moved to common.py:46: the edit goes there', and its port was the block
unchanged (old == new): the edit was dropped while the evidence said it was carried. The port
looked the block up by its first line (``else:``), which an earlier block of the region also
has, and so replayed the wrong part of the patch. The port now carries the edit."""

from __future__ import annotations

from rebasectl.engine.proposals.rules import Case, Oracle, Sides, first

LOAD = "            return torch.load(path, map_location='cpu')"
BASE = [
    "class Strategy:",
    "    def save(self, obj, path):",
    "        if msc_enabled():",
    "            msc_save(obj, path)",
    "        else:",
    "            torch.save(obj, path)",
    "    def load(self, path):",
    "        if msc_enabled():",
    "            return msc_load(path)",
    "        else:",
    LOAD,
    "        except_marker_line()",
]
UPSTREAM_FILE = [
    "def save_common(obj, path):",
    "    torch.save(obj, path)",
    "def load_common(path):",
    "    if msc_enabled():",
    "        return msc_load(path)",
    "    else:",
    LOAD[4:],
    "    except_marker_line()",
]


def test_the_port_carries_the_edit_past_an_earlier_line_like_its_first() -> None:
    theirs = [x.replace("map_location='cpu')", "map_location='cpu', weights_only=False)")
              for x in BASE]
    ours = UPSTREAM_FILE[:2]
    found = first(Case("p", "f.py", 1, Sides(ours, BASE, theirs), UPSTREAM_FILE), Oracle())
    assert found is not None and found.rule == "moved", found
    assert found.port is not None
    assert found.port["old"] != found.port["new"], found.port
    assert found.port["new"] == [
        "    else:",
        "        return torch.load(path, map_location='cpu', weights_only=False)",
        "    except_marker_line()",
    ]
