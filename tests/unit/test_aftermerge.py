"""Checks after a merge, on synthetic upstreams: a patch that adds back a line an upstream commit
removed (the commit named, as 109feda4d's ``weights_only=False`` is on the real June bump), and a
clean hunk whose context upstream duplicated (the copy and the commit that made it named)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.synth import lines, rebasectl
from tests.unit.test_attribution import Fork
from tests.unit.test_bump import TERMINAL, imported

LOAD = "    return torch.load(path, map_location='cpu')\n"
UNSAFE = "    return torch.load(path, map_location='cpu', weights_only=False)\n"


def _second_loader(tmp_path: Path) -> tuple[Fork, Path]:
    """A file with an unsafe load, and the series: a second loader, written with the unsafe
    load the file had then."""
    text = lines(10) + "def load(path):\n" + UNSAFE + lines(10, "tail")
    fork = Fork(tmp_path, {"a.py": text})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    tip = fork.up.commit("feat: second loader", {"a.py": text.replace(
        "tail 5\n", "tail 5\ndef load2(path):\n" + UNSAFE)})
    fork.up.git("checkout", "-q", "main")
    return fork, imported(tmp_path, fork, tip)


def test_readding_a_line_upstream_removed_is_named(tmp_path: Path) -> None:
    fork, series = _second_loader(tmp_path)
    removed = fork.change("get rid of weights_only=False", {"a.py": (UNSAFE, LOAD)})
    out = tmp_path / "art"
    patch_file = next((series / "patches").iterdir())
    patch_text = patch_file.read_text().splitlines()  # as the bump reads it (it exports after)
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(out), "--annotations", env=TERMINAL)
    assert r.returncode == 0, r.stderr
    assert f"re-adds `{UNSAFE.strip()}`, which upstream {removed[:12]} (get rid of " \
        "weights_only=False) removed" in r.stderr
    (risk,) = json.loads((out / "bump.json").read_text())["patches"][0]["risks"]
    assert (risk["kind"], risk["commit"], risk["path"]) == ("re-adds-removed", removed, "a.py")
    assert (out / "risks.txt").read_text().count("\n") == 1
    # the annotation lands on the hunk that adds the line back, not on the patch file's top
    assert risk["hunk"].startswith("@@ ")
    hunk_at = patch_text.index(risk["hunk"]) + 1
    (note,) = [ln for ln in r.stderr.splitlines() if ln.startswith("patches/")]
    assert note.startswith(f"patches/{patch_file.name}:{hunk_at}: ") and "re-adds" in note, note


def test_a_removal_reverted_and_made_again_is_one_warning(tmp_path: Path) -> None:
    """Upstream removed the line, reverted that, and removed it again (June: 300d1b6550b4 and
    its reapply 9d71cb1cd291 for ``mtp_labels, _ = roll_tensor(``): one warning, naming the
    removal that stands at the target and the earlier one, not one warning per removal."""
    fork, series = _second_loader(tmp_path)
    first = fork.change("get rid of weights_only=False", {"a.py": (UNSAFE, LOAD)})
    fork.change("Revert get rid of weights_only=False", {"a.py": (LOAD, UNSAFE)})
    again = fork.change("Reapply get rid of weights_only=False", {"a.py": (UNSAFE, LOAD)})
    out = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(out), env=TERMINAL)
    assert r.returncode == 0, r.stderr
    assert (out / "risks.txt").read_text().splitlines() == [
        f"1/1 second-loader: a.py: re-adds `{UNSAFE.strip()}`, which upstream {again[:12]} "
        f"(Reapply get rid of weights_only=False) removed (as {first[:12]} had before)"]
    (risk,) = json.loads((out / "bump.json").read_text())["patches"][0]["risks"]
    assert (risk["commit"], risk["also"]) == (again, [first])


def test_clean_hunk_beside_an_upstream_duplicate_of_its_context(tmp_path: Path) -> None:
    block = "    x = layer(x)\n    x = norm(x)\n    return x\n"
    text = lines(10) + "def attention(x):\n" + block + lines(10, "mid") + "def mlp(y):\n" + \
        "    return y\n" + lines(10, "tail")
    fork = Fork(tmp_path, {"m.py": text})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    tip = fork.up.commit("feat: post-layernorm", {"m.py": text.replace(
        "    x = norm(x)\n", "    x = norm(x)\n    x = post_norm(x)\n")})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp_path, fork, tip)
    # upstream gives mlp the same block, near the top: the hunk now has two places to go
    copied = fork.change("mlp uses the attention block", {"m.py": (
        "line 5\n", "line 5\ndef early(x):\n" + block)})
    out = tmp_path / "art"
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path),
                  "--artifacts", str(out), "--json", env=TERMINAL)
    assert r.returncode == 0, r.stderr
    (risk,) = json.loads(r.stdout)["patches"][0]["risks"]
    assert risk["kind"] == "duplicate-context" and risk["commit"] == copied
    assert "now has 2 times" in risk["detail"] and risk["hunk"].startswith("@@ ")


def test_readding_a_line_that_tells_nothing_alone_is_not_a_risk(tmp_path: Path) -> None:
    """Hostile 5 #12: a docstring phrase (``Defaults to False.``) or a lone argument
    (``cp_group=self.cp_group,``, ``qk_head_dim,``) that some upstream commit removed
    somewhere in the file is no sign the patch reverts it: no warning. A line that tells alone,
    removed by the same commit, still is one."""
    noise = ["        Defaults to False.\n", "        cp_group=self.cp_group,\n",
             "        qk_head_dim,\n"]
    text = lines(10) + "def f(a):\n    '''A.\n" + noise[0] + "    '''\n    g(\n" + \
        noise[1] + noise[2] + "    )\n" + UNSAFE + lines(10, "tail")
    fork = Fork(tmp_path, {"a.py": text})
    fork.up.git("checkout", "-q", "-b", "fork", fork.base)
    added = "def h(b):\n    '''B.\n" + noise[0] + "    '''\n    k(\n" + noise[1] + noise[2] + \
        "    )\n"
    tip = fork.up.commit("feat: h", {"a.py": text.replace("tail 5\n", "tail 5\n" + added)})
    fork.up.git("checkout", "-q", "main")
    series = imported(tmp_path, fork, tip)
    gone = text
    for ln in [*noise, UNSAFE]:
        gone = gone.replace(ln, "")
    fork.change("drop old arguments and the unsafe load", {"a.py": (text, gone)})
    r = rebasectl(series, "bump", "--to", "main", "--upstream", str(fork.up.path), "--json",
                  env=TERMINAL)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["patches"][0]["risks"] == [], r.stdout
    # (a line that tells alone, removed by such a commit, is still named: the test above)


def test_what_tells_alone_on_the_june_warnings() -> None:
    """The lines the grown June bump once warned about: pieces and prose do not tell alone;
    statements (what the warning is for) do, an import among them (words only, yet code)."""
    from rebasectl.engine.carried import telling_alone

    quiet = [b"Defaults to False.", b"cp_group=self.cp_group,", b"qk_head_dim,",
             b'"megatron.core",', b"gradient_scaling_factor,", b"dims=-1,", b"include = [",
             b"import it first.", b"from the start."]
    loud = [b"return torch.load(load_path, map_location='cpu', weights_only=False)",
            b"hidden_states = self.final_layernorm(hidden_states)",
            b"self.cp_group = cp_group", b"mtp_labels, _ = roll_tensor(",
            b"import logging", b"from typing import Optional, Tuple", b"import numpy as np"]
    assert [ln for ln in quiet if telling_alone(ln)] == []
    assert [ln for ln in loud if not telling_alone(ln)] == []
