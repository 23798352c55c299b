"""The report on the maintainers' own June bump (1dcf0da..miles-main-20260619 →
3346fa8a2..miles-main-20260622 in the real Megatron-LM mirror): every row the commits settle
(../shared/answer-keys/june/report-mapping.md, copied here as data) comes out right, among them
the two merges whose new subject names both PR tags, the merge that cites #19, and #22, which
upstream 2e4a5d48 (#3529) made: upstreamed, naming that commit. Timing is in bench/ (no time
asserts here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.synth import rebasectl

OLD = "1dcf0da..miles-main-20260619"
NEW = "3346fa8a2..miles-main-20260622"

# (old short shas, new short shas, the statuses the commits allow)
ROWS: list[tuple[tuple[str, ...], tuple[str, ...], set[str]]] = [
    (("b4d401c71",), ("c9d2a2d82",), {"modified", "equivalent"}),
    (("6c3fb8c1b",), ("c315a1c55",), {"modified", "equivalent"}),
    (("3f0fcacb7",), ("175598465",), {"modified", "equivalent"}),
    (("e82d9ee66",), ("a4cab2758",), {"modified", "equivalent"}),
    (("3011052b7",), (), {"dropped", "upstreamed"}),
    (("228a36409",), ("9d51a87d4",), {"modified", "equivalent"}),
    (("a95ad1435",), ("aeb5e0fbf",), {"identical", "equivalent", "modified"}),
    (("57784b872",), ("390d6d0e3",), {"identical", "equivalent", "modified"}),
    (("038e8e5a2",), (), {"empty", "dropped"}),
    (("74f0b3869", "5243579d0"), ("76ea05005",), {"merged"}),
    (("cf014f903", "32dbe9f1c"), ("868a59a58",), {"merged"}),
    (("90f69fa6c",), ("70a0784ac",), {"modified", "equivalent", "identical"}),
    (("923b85b0d",), (), {"upstreamed"}),
    (("d9a5080f2",), ("e1b757c0a",), {"modified", "equivalent", "identical"}),
    (("3a607060c", "a381c7da6"), ("65e12b33b",), {"merged"}),
    (("3a8f0c7b7",), ("39b7c437e",), {"identical"}),
    (("87d1155be",), ("ae6384a9a",), {"identical"}),
    ((), ("a854e9e8b",), {"new"}),
    ((), ("ac7a4a411",), {"new"}),
    ((), ("3fb8ab7a1",), {"new"}),
    ((), ("753c56842",), {"new"}),
]
# true-on-policy: the new subject cites 23924a0b6; modified, or split with the isort commit
TRUE_ON_POLICY = {(("23924a0b6",), ("e0deeb912",), "modified"),
                  (("23924a0b6",), ("e0deeb912", "40f2a76ee"), "split")}


@pytest.fixture(scope="module")
def june(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from tests.conftest import real_mirror

    mirror = real_mirror()
    ws = tmp_path_factory.mktemp("june")
    r = rebasectl(ws, "report", "--old-range", OLD, "--new-range", NEW, "--repo", str(mirror),
                  "--format", "json", timeout=600)
    data: dict[str, Any] = json.loads(r.stdout)
    assert r.returncode == 1 and data["review"], r.stderr  # entries to review: exit 1
    return data


Row = tuple[tuple[str, ...], tuple[str, ...], str, dict[str, Any]]


def _rows(data: dict[str, Any]) -> list[Row]:
    old = {p["index"]: p["commit"] for p in data["old"]["patches"]}
    new = {p["index"]: p["commit"] for p in data["new"]["patches"]}
    return [(tuple(old[i][:9] for i in m["old"]), tuple(new[j][:9] for j in m["new"]),
             m["status"], m) for m in data["mapping"]]


@pytest.mark.parametrize("old, new, allowed", ROWS, ids=[",".join(r[0] or r[1]) for r in ROWS])
def test_row(june: dict[str, Any], old: tuple[str, ...], new: tuple[str, ...],
             allowed: set[str]) -> None:
    rows = {(o, n): status for o, n, status, _ in _rows(june)}
    assert (old, new) in rows, [r[:3] for r in _rows(june) if set(r[0]) & set(old)
                                or set(r[1]) & set(new)]
    assert rows[(old, new)] in allowed


def test_true_on_policy(june: dict[str, Any]) -> None:
    rows = {(o, n, s) for o, n, s, _ in _rows(june) if "23924a0b6" in o}
    assert rows & TRUE_ON_POLICY, rows


def test_evidence_names_the_citation_and_the_upstream_commit(june: dict[str, Any]) -> None:
    by_old = {o: m for o, _, _, m in _rows(june)}
    tms = by_old[("74f0b3869", "5243579d0")]
    assert tms["evidence"]["rule"] == "citation"
    assert tms["evidence"]["cited"] == ["#17", "#18"]
    gate = by_old[("923b85b0d",)]
    assert gate["evidence"]["upstream_commit"].startswith("2e4a5d48")
    assert "2e4a5d48" in gate["details"]


def test_no_review_without_a_reason_of_this_bump(june: dict[str, Any]) -> None:
    """CUDA IPC (#11) is the same change, moved; its message names a file its diff does not
    touch, on the old side as before the bump: said ("as before"), not a reason to review."""
    by_old = {o: m for o, _, _, m in _rows(june)}
    ipc = by_old[("57784b872",)]
    assert ipc["status"] == "identical" and not ipc["review"]["needed"]
    assert "stale-message" in ipc["review"]["reasons"] and "(as before)" in ipc["review"]["summary"]
    assert all(f["standing"] for f in ipc["findings"])
    for o, _, status, m in _rows(june):  # every flagged entry has a reason of this bump
        if m["review"]["needed"]:
            assert status in ("modified", "merged", "split", "dropped", "new") or any(
                not f["standing"] for f in m["findings"]), (o, m["review"])


def test_answer_key_is_the_data_here() -> None:
    """The rows above are the answer key's, where the shared answer keys are beside the repo."""
    key = Path(__file__).resolve().parents[2] / ".." / "shared" / "answer-keys" / "june" / \
        "report-mapping.md"
    if not key.is_file():
        pytest.skip("no ../shared/answer-keys beside the repository")
    text = key.read_text()
    for old, new, _ in ROWS:
        for sha in old + new:
            assert sha in text, sha


def _items(data: dict[str, Any], kind: str, path: str) -> list[str]:
    return [x for e in data["mapping"] for f in e["findings"]
            if f["kind"] == kind and f["path"].endswith(path) for x in f["items"]]


def test_lost_and_put_back_lines_are_true(june: dict[str, Any]) -> None:
    """Hostile 6 #12's rules on the maintainers' bump: true-on-policy's ``layer_norm`` gained a
    parameter upstream and kept its own (not lost), while the shape without the hc dimension is
    not the shape with it (still lost: a list item added is no widened signature); the new
    patch's ``import gc`` and ``import logging`` in mlp.py, which fa9c71454 removed and the old
    patch never added, are said put back (an import is code, not prose), beside the one
    attention.py finding of patch 18 (patch 21 only moves that import: hostile 7 #8)."""
    lost = _items(june, "lost-in-resolution", "true_on_policy/provider.py")
    assert "def layer_norm(self, rms_norm: bool = False, for_qk: bool = False):" not in lost
    assert "def grouped_mlp_modules(" in lost  # the check ran on that file
    assert "tensor_shape = [seq_length, micro_batch_size, config.hidden_size]" in \
        _items(june, "lost-in-resolution", "pipeline_parallel/schedules.py")
    back = [f for e in june["mapping"] for f in e["findings"] if f["kind"] == "partial-revert"]
    spec = ["from megatron.core.transformer.spec_utils import ModuleSpec, build_module"]
    assert [(f["index"], f["path"].rsplit("/", 1)[-1], f["items"], f["commit"][:9])
            for f in back] == [(18, "attention.py", spec, "dbfc96b08"),
                               (18, "mlp.py", ["import gc", "import logging"], "fa9c71454")]


ATTENTION = "megatron/core/transformer/attention.py"
SPEC_IMPORT = "from megatron.core.transformer.spec_utils import ModuleSpec, build_module"


def test_a_moved_import_is_not_added_back(june: dict[str, Any]) -> None:
    """Hostile 7 #8: upstream dbfc96b08 removed the import from attention.py; new patch 18
    (true-on-policy) puts it back, new patch 21 (ac7a4a411) only moves it within the file (a
    ``-`` and a ``+`` of the same line). Only the first is a partial revert."""
    new = {p["index"]: p["commit"] for p in june["new"]["patches"]}
    said = [(new[f["index"]][:9], f["commit"][:9]) for m in june["mapping"]
            for f in m["findings"] if f["kind"] == "partial-revert" and f["path"] == ATTENTION
            and SPEC_IMPORT in f["items"]]
    assert said == [(new[18][:9], "dbfc96b08")], said
    assert new[21].startswith("ac7a4a411")
    row = next(m for m in june["mapping"] if m["new"] == [21])
    assert "partial-revert" not in row["review"]["reasons"], row["review"]


def test_lost_lines_of_a_file_upstream_deleted_say_so(june: dict[str, Any]) -> None:
    """Hostile 7 #12: the old patch's line in tokenizer.py, which upstream 32570939 deleted,
    is not said to be missing from "this file at the new base" (there is none)."""
    lost = [f for m in june["mapping"] for f in m["findings"]
            if f["kind"] == "lost-in-resolution"
            and f["path"] == "megatron/training/tokenizer/tokenizer.py"]
    assert [(f["items"], (f["commit"] or "")[:9]) for f in lost] == \
        [(["trust_remote_code=True,"], "325709393")], lost
    assert "upstream deleted this file between the bases" in lost[0]["text"]
    assert "nor this file at the new base" not in lost[0]["text"]
