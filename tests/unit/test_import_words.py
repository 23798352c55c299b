"""What import records and says: the upstream's name from where it came from (not a `.git` folder's
or the mirror's), its default branch, counts that mean what they say, an empty commit in words."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rebasectl.engine.exchange import guess_kind
from tests.synth import Repo, lines, rebasectl


def _upstream(tmp: Path) -> tuple[Repo, str, str]:
    up = Repo(tmp / "Proj")
    base = up.commit("base", {"a.txt": lines(10), "b.txt": lines(5, "b")})
    up.git("branch", "-m", "dev")
    up.commit("fix: a", {"a.txt": lines(10).replace("line 3\n", "THREE\n")})
    up.git("commit", "-q", "--allow-empty", "-m", "chore: marker")
    tip = up.commit("feat: b", {"b.txt": lines(5, "b").replace("b 2\n", "TWO\n")})
    return up, base, tip


def test_import_from_a_checkout_and_from_a_bare_clone(tmp_path: Path) -> None:
    up, base, tip = _upstream(tmp_path)
    series = tmp_path / "series"
    series.mkdir()
    r = rebasectl(series, "import", f"{base}..{tip}", "--repo", str(up.path))
    assert r.returncode == 0, r.stderr
    assert "imported 3 patches" in r.stdout and "touching 2 upstream files; wrote 4 files" \
        in r.stdout
    assert "marker: an empty commit (no changes)" in r.stdout
    upstream = yaml.safe_load((series / "series.yaml").read_text())["upstream"]
    assert (upstream["name"], upstream["branch"]) == ("proj", "dev")
    bare = tmp_path / "Mirror-Folder.git"
    up.git("clone", "-q", "--bare", str(up.path), str(bare))
    again = tmp_path / "again"
    again.mkdir()
    r = rebasectl(again, "import", f"{base}..{tip}", "--repo", str(bare))
    assert r.returncode == 0, r.stderr
    upstream = yaml.safe_load((again / "series.yaml").read_text())["upstream"]
    # a clone names where it came from (its origin), not its own folder
    assert (upstream["name"], upstream["branch"]) == ("proj", "dev")


@pytest.mark.parametrize(("subject", "kind"), [
    ("[fix] Add detach() to fp32 param shard", "fix"),  # June #15: was "feature"
    ("[fix] attention_output_gate TP slice (#22)", "fix"),
    ("[feat] distributed optimizer low GPU memory resume", "feature"),
    ("[1/8] fix: misc compatibility fixes", "fix"),
    ("[AMD] Fix QuantizedTensor import for ROCm", "fix"),
    ("fix(dist-ckpt): handle bare BytesIO", "fix"),
    ("Upgrade Megatron from Dec 17 to Feb 13", "feature"),
])
def test_kind_from_the_subject_tag_or_words(subject: str, kind: str) -> None:
    assert guess_kind(subject) == kind
