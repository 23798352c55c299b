"""A fixed synthetic old/new pair that exercises every part of the report: an identical patch
whose hunk moved, a patch modified because upstream changed the line it needs, a patch folded
into an already-paired one by lineage (same author and date), a dropped patch, a new patch that
removes a parameter upstream's test still passes and adds back a line upstream removed, a
redundant import, a stale message claim, and an empty marker. Every commit date comes from the
``tests.harness.git.Repo`` clock, so the same calls give the same shas: the golden tests and the
browser test read it.
"""

from __future__ import annotations

from pathlib import Path

from rebasectl.git import Repo as GitRepo
from rebasectl.report import Side, build_report
from rebasectl.report.model import Report
from tests.harness.git import Repo

AUTHOR = "Pat Cher <pat@example.invalid>"

MODEL = '''import math


class Model:
    def forward(self, x):
        y = prepare_input(x)
        z = legacy_transform(y)
        return z

    def loss(self, out, target):
        diff = out - target
        return (diff * diff).mean()


def scale_fn(x, fused=False, scale=1.0):
    return x * scale
'''
UTILS = "".join(f"def util_{i}(value):\n    return value + {i}\n\n\n" for i in range(1, 6))
CONFIG = "".join(f"option_{i} = make_option({i})\n" for i in range(1, 15))
EXTRA = "".join(f"extra_{i} = build_extra({i})\n" for i in range(1, 12))


def _edit(repo: Repo, path: str, old: str, new: str) -> dict[str, str | None]:
    text = (repo.path / path).read_text()
    assert old in text, (path, old)
    return {path: text.replace(old, new, 1)}


def _upstream(repo: Repo) -> tuple[str, str]:
    base1 = repo.commit("upstream: base", {"model.py": MODEL, "utils.py": UTILS,
                                            "config.py": CONFIG, "extra.py": EXTRA})
    repo.commit("upstream: faster transform (#11)", _edit(
        repo, "model.py", "z = legacy_transform(y)", "z = fast_transform(y, inplace=True)"))
    repo.commit("upstream: typing import (#12)",
                {"utils.py": "from typing import Any\n\nVERSION = 2\n\n\n" + UTILS})
    repo.commit("upstream: drop option 7 (#13)",
                _edit(repo, "config.py", "option_7 = make_option(7)\n", ""))
    repo.commit("upstream: test the scale parameter (#14)", {
        "test_model.py": "from model import scale_fn\n\n\ndef test_scale():\n"
                         "    assert scale_fn(2, scale=3.0) == 6\n"})
    repo.commit("upstream: option 11 v2 (#15)", _edit(
        repo, "config.py", "option_11 = make_option(11)", "option_11 = make_option_v2(11)"))
    return base1, repo.head()


GUARD = ("utils.py", "    return value + 3\n",
         "    assert value is not None\n    return value + 3\n")
OPTION_12 = ("config.py", "option_12 = make_option(12)\n", "option_12 = make_option(12) or 0\n")
HOOKS = "        diff = out - target\n"
HOOKED = HOOKS + ("        diff = apply_loss_hooks(diff)\n"
                  "        hooks_applied = count_hooks(diff)\n")


def _old(repo: Repo, base1: str) -> tuple[list[str], int]:
    repo.checkout("-q", "-B", "old", base1)
    shas = [repo.commit("[1/6] fix: guard util 3 (#1)", _edit(repo, *GUARD), author=AUTHOR)]
    shas.append(repo.commit("[2/6] feat: clamp the transform (#2)", _edit(
        repo, "model.py", "z = legacy_transform(y)", "z = legacy_transform(y).clamp(0, 1)"),
        author=AUTHOR))
    detach_date = repo.clock + 60
    extras = _edit(repo, "extra.py", "extra_5 = build_extra(5)\n",
                   "extra_5 = build_extra(5).detach()\n")
    extras["extra.py"] = (extras["extra.py"] or "").replace(
        "extra_6 = build_extra(6)\n", "extra_6 = build_extra(6).detach()\n")
    shas.append(repo.commit("[3/6] feat: detach extras for RL (#3)", extras, author=AUTHOR))
    shas.append(repo.commit("[4/6] feat: loss hooks (#4)", _edit(repo, "model.py", HOOKS, HOOKED),
                            author=AUTHOR))
    shas.append(repo.commit("[5/6] chore: tune option 2 (#5)", _edit(
        repo, "config.py", "option_2 = make_option(2)\n", "option_2 = make_option(2, tuned=1)\n"),
        author=AUTHOR))
    shas.append(repo.commit("[6/6] fix: option 12 default (#6)", _edit(repo, *OPTION_12),
                            author=AUTHOR))
    return shas, detach_date


def _hooks(repo: Repo) -> dict[str, str | None]:
    """The loss hooks with the detach folded in (and a redundant second ``import math``)."""
    change = _edit(repo, "model.py", HOOKED.replace(
        "        diff = apply_loss_hooks(diff)\n        hooks_applied = count_hooks(diff)\n", ""),
        HOOKED + "        diff = diff.detach()\n")
    change["model.py"] = "import math\n" + (change["model.py"] or "")
    change.update(_edit(repo, "extra.py", "extra_9 = build_extra(9)\n",
                        "extra_9 = build_extra(9).detach()\n"))
    return change


def _new(repo: Repo, base2: str, detach_date: int) -> list[str]:
    repo.checkout("-q", "-B", "new", base2)
    shas = [repo.commit("[1/5] fix: guard util 3 (#1)", _edit(repo, *GUARD), author=AUTHOR)]
    shas.append(repo.commit(
        "[2/5] feat: clamp the transform (#2)\n\n- forward: clamp via clamp_output_range",
        _edit(repo, "model.py", "z = fast_transform(y, inplace=True)",
              "z = fast_transform(y, inplace=False).clamp(0, 1)"), author=AUTHOR))
    clock = repo.clock
    repo.clock = detach_date - 60  # a rebase keeps the author date of the detach patch
    shas.append(repo.commit("[3/5] feat: loss hooks (#4)", _hooks(repo), author=AUTHOR))
    repo.clock = clock
    shas.append(repo.commit("[4/5] fix: option 12 default (#6)", _edit(repo, *OPTION_12),
                            author=AUTHOR))
    bypass = _edit(repo, "model.py",
                   "def scale_fn(x, fused=False, scale=1.0):\n    return x * scale",
                   "def scale_fn(x, fused=False):\n    return x")
    bypass.update(_edit(repo, "config.py", "option_8 = make_option(8)\n",
                        "option_7 = make_option(7)\noption_8 = make_option(8)\n"))
    shas.append(repo.commit("[5/5] fix: bypass the scale", bypass, author=AUTHOR))
    shas.append(repo.commit("marker: rebased", allow_empty=True, author=AUTHOR))
    return shas


def build_pair(tmp: Path) -> Report:
    repo = Repo(tmp / "pair")
    base1, base2 = _upstream(repo)
    old, detach_date = _old(repo, base1)
    new = _new(repo, base2, detach_date)
    git = GitRepo(repo.path)
    return build_report(git, Side(base1, old, None, "old series"),
                        Side(base2, new, None, "new series"))
