"""model/ids and model/status: an Oid is the text it was made from (JSON, formatting, dict keys),
made only from a full sha; the status words print and serialise as the words the state files and
goldens hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rebasectl.model.ids import EMPTY_TREE, ZERO, Oid, is_abbrev, is_full, short
from rebasectl.model.status import Applied, BumpStatus, MappingStatus, ProposalState
from tests.synth import Repo


def test_oid_is_its_text() -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    oid = Oid(sha)
    assert oid == sha and hash(oid) == hash(sha) and {sha: 1}[oid] == 1
    assert json.dumps({"c": oid}) == json.dumps({"c": sha})
    assert f"{oid}" == sha and oid.short() == short(sha) == "0123456789ab"


@pytest.mark.parametrize("bad", ["", "0" * 39, "0" * 41, "G" * 40, "A" * 40, " " + "0" * 39])
def test_oid_refuses_what_is_not_a_full_sha(bad: str) -> None:
    with pytest.raises(ValueError, match="not a full sha"):
        Oid(bad)
    assert not is_full(bad)


def test_abbrev() -> None:
    assert is_abbrev("abcdef1") and is_abbrev("0" * 40)
    assert not is_abbrev("abcdef") and not is_abbrev("HEAD") and not is_abbrev("0" * 41)


def test_constants_are_gits(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    assert repo.git("hash-object", "-t", "tree", "/dev/null").strip() == EMPTY_TREE
    assert ZERO == "0" * 40


@pytest.mark.parametrize("enum", [Applied, BumpStatus, MappingStatus, ProposalState])
def test_status_words_print_as_themselves(enum: type) -> None:
    for member in enum:
        assert str(member) == f"{member}" == format(member, "") == member.value
        assert json.dumps(member) == json.dumps(member.value)
        assert enum(member.value) is member


def test_an_oid_writes_series_yaml_as_its_text() -> None:
    """A base resolved by the git door is an Oid; series.yaml gets the same bytes as from a str
    (PyYAML's safe dumper refuses str subclasses: a bump once died of it)."""
    from rebasectl.model.series import PatchEntry, Series, Upstream, dump

    sha = "c209f44eb8b39be61e38e6d709014163d850ab2e"
    entries = (PatchEntry("a", "0001-a.patch", "a"),)

    def series(base: str) -> Series:
        return Series(Upstream("up", "https://example.com/up.git", "main", base), entries)

    assert dump(series(Oid(sha))) == dump(series(sha))
