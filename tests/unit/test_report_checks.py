"""The mechanical facts the report states, each where it holds and nowhere else: stale message
(claims only, not narrative; a name the hunk's function holds is not stale), redundant (the same
block, not another block), lost in resolution, partial reverts, a removed name upstream still
uses, and upstream attribution through the side branch of a merge."""

from __future__ import annotations

from pathlib import Path

from rebasectl.git import Repo as GitRepo
from rebasectl.report import Side, build_report
from rebasectl.report.findings import claim_lines, message_identifiers
from rebasectl.report.model import Report
from tests.harness.git import Repo


def text(name: str, n: int = 30) -> str:
    return "".join(f"{name}_value_{i} = compute_{name}({i})\n" for i in range(1, n + 1))


def _report(repo: Repo, base1: str, old: list[str], base2: str, new: list[str]) -> Report:
    git = GitRepo(repo.path)
    return build_report(git, Side(base1, old, None, "old"), Side(base2, new, None, "new"))


def _found(r: Report, kind: str) -> list[str]:
    return [f.text for e in r.mapping for f in e.findings if f.kind == kind]


def test_message_identifiers() -> None:
    msg = ("fix: MLA RoPE for MoE: add `use_gated_attention` and mtp_kwargs to TransformerConfig;"
           " call get_spec() in gpt_layer_specs.py (e.g. v1.2.3), self.router_replay\n")
    assert message_identifiers(msg) == ["use_gated_attention", "mtp_kwargs", "TransformerConfig",
                                        "get_spec", "self.router_replay"]
    assert message_identifiers("fixes for PyTorch, HuggingFace and TE; RouterReplay") == \
        ["RouterReplay"]


def test_claims_are_subject_items_and_fix_paragraphs() -> None:
    """The example's [8/8]: torch.AcceleratorError and cuMemCreate explain a root cause."""
    msg = ("fix: CUDA IPC incompatibility\n\nAfter the bump, the update fails with\n"
           "torch.AcceleratorError: invalid argument.\n\nRoot cause: allocations via cuMemCreate"
           "/cuMemMap.\n\nFix: resolve mapping.py conflicts.\n\n- merge(): truncate padding\n\n"
           "Co-Authored-By: Some One <one@example.invalid>\n")
    assert claim_lines(msg) == ["fix: CUDA IPC incompatibility",
                                "Fix: resolve mapping.py conflicts.",
                                "- merge(): truncate padding"]


def test_stale_message_claims_only(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"config.py": text("cfg"), "mapping.py": text("map")})
    c = repo.commit("feat: add post_mlp_layernorm and use_gated_attention fields\n\n"
                    "Root cause: cuMemCreate and torch.AcceleratorError in mapping.py.\n\n"
                    "- config.py: add post_mlp_layernorm\n- touch mapping.py too",
                    {"config.py": text("cfg") + "post_mlp_layernorm: bool = False\n"})
    r = _report(repo, base, [c], base, [c])
    assert sorted(_found(r, "stale-message")) == [
        "message names `use_gated_attention`, in neither the diff nor the functions it changes",
        "message says it changes `mapping.py`; its diff does not"]
    assert r.mapping[0].status == "identical"
    assert all(f.side == "new" for e in r.mapping for f in e.findings)  # said once, not twice


def test_a_name_the_hunk_sits_in_is_not_stale(tmp_path: Path) -> None:
    """The example's [9/8]: `load_parameter_state_from_dp_reshardable` is the function the hunk
    changes, and `ShardedTensor` the class."""
    body = ("class ShardedTensor:\n    def load_state_from_dp(self, state):\n"
            "        elem = state['padding']\n        keep = elem\n        return keep\n")
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"opt.py": text("o") + body})
    c = repo.commit("fix: compat\n\n- load_state_from_dp: tolerate a missing 'padding' key\n"
                    "- ShardedTensor: relax it\n- uses state_reader_fn",
                    {"opt.py": text("o") + body.replace("state['padding']",
                                                        "state.get('padding', False)")})
    r = _report(repo, base, [c], base, [c])
    assert _found(r, "stale-message") == [
        "message names `state_reader_fn`, in neither the diff nor the functions it changes"]


def test_redundant_is_the_same_block(tmp_path: Path) -> None:
    """The example's [8/8] sets HAVE_SAVER = False in the `try:` (the base has it in `except:`:
    not redundant); [5/8] adds `import warnings` to a module that imports it (redundant)."""
    src = ("import warnings\nimport os\n\ntry:\n    from saver import saver\n\n"
           "    HAVE_SAVER = True\nexcept ImportError:\n    HAVE_SAVER = False\n\n" + text("m"))
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"m.py": src})
    c = repo.commit("fix: saver off", {"m.py": src.replace(
        "    HAVE_SAVER = True\n", "    HAVE_SAVER = False\n").replace(
        "import os\n", "import os\nimport warnings\n")})
    r = _report(repo, base, [c], base, [c])
    assert _found(r, "redundant") == [
        "adds `import warnings`, which the same block already has (line 1)"]


def test_redundant_ignores_fragments_of_a_new_call(tmp_path: Path) -> None:
    """Found on a real pair: the argument lines of a new roll_tensor(...) call were each
    reported as "added line already in the new base" (they are, in the other calls)."""
    call = ("labels_rolled, _ = roll_tensor(\n    labels_tensor,\n    cp_group=self.cp_group,\n"
            "    packed_seq_params=packed_seq_params,\n)\n")
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"m.py": text("m") + call})
    c = repo.commit("feat: roll the mask too", {"m.py": text("m") + call + call.replace(
        "labels", "mask") + "m_value_1 = compute_m(1)\n"})
    r = _report(repo, base, [c], base, [c])
    assert _found(r, "redundant") == [
        "adds `m_value_1 = compute_m(1)`, which the same block already has (line 1)"]


def test_partial_revert_and_lost_in_resolution(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"mod.py": text("mod")})
    old = repo.commit("fix: guard", {"mod.py": text("mod").replace(
        "mod_value_10 = compute_mod(10)\n",
        "mod_value_10 = compute_mod(10)\nassert_guard_condition(mod_value_10)\n"
        "register_legacy_guard(mod_value_10)\n")})
    repo.checkout("-q", "-b", "up", base1)
    removed = repo.commit("upstream: drop value 3 (#9)",
                          {"mod.py": text("mod").replace("mod_value_3 = compute_mod(3)\n", "")})
    base2 = repo.head()
    cur = (repo.path / "mod.py").read_text()
    new = repo.commit("fix: guard", {"mod.py": cur.replace(
        "mod_value_10 = compute_mod(10)\n",
        "mod_value_10 = compute_mod(10)\nassert_guard_condition(mod_value_10)\n"
        "mod_value_3 = compute_mod(3)\n")})
    r = _report(repo, base1, [old], base2, [new])
    e = r.mapping[0]
    assert e.status == "modified"
    reverts = [f for f in e.findings if f.kind == "partial-revert"]
    assert [(f.items, f.commit) for f in reverts] == [(("mod_value_3 = compute_mod(3)",), removed)]
    lost = [f for f in e.findings if f.kind == "lost-in-resolution"]
    assert [(f.side, f.items) for f in lost] == [("old", ("register_legacy_guard(mod_value_10)",))]


def test_removed_parameter_still_used_upstream(tmp_path: Path) -> None:
    """The example's [6/8] removes `router_replay` from topk_routing(...); upstream's test
    still passes it."""
    lib = ("def topk_routing(\n    logits,\n    fused: bool = False,\n"
           "    router_replay: Optional['RouterReplay'] = None,\n):\n    return logits\n")
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"lib.py": lib, "other.py": text("o")})
    repo.commit("upstream: test replay (#5)", {"test_lib.py": "from lib import topk_routing\n"
                                               "topk_routing(1, router_replay=rr)\n"})
    base2 = repo.head()
    new = repo.commit("feat: bypass", {"lib.py": lib.replace(
        "    router_replay: Optional['RouterReplay'] = None,\n", "    is_mtp: bool = False,\n")})
    r = _report(repo, base1, [], base2, [new])
    used = [f for e in r.mapping for f in e.findings if f.kind == "removed-name-used"]
    assert [(f.path, f.items) for f in used] == [("lib.py", ("router_replay", "test_lib.py:2"))]
    assert used[0].commit == base2


def test_attribution_follows_merge_side_branch(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"m.py": text("m"), "other.py": text("o")})
    old = repo.commit("feat: tweak 15", {"m.py": text("m").replace(
        "m_value_15 = compute_m(15)\n", "m_value_15 = compute_m(15) + tweak_term\n")})
    repo.checkout("-q", "-b", "side", base1)
    side = repo.commit("side: rework m 15 (#77)", {"m.py": text("m").replace(
        "compute_m(15)", "compute_m_fast(15)")})
    repo.checkout("-q", "-b", "trunk", base1)
    repo.commit("trunk: unrelated", {"other.py": text("o") + "o_more = 1\n"})
    repo.git("merge", "-q", "--no-ff", "-m", "Merge branch 'side' (#78)", "side")
    base2 = repo.head()
    new = repo.commit("feat: tweak 15", {"m.py": (repo.path / "m.py").read_text().replace(
        "m_value_15 = compute_m_fast(15)\n", "m_value_15 = compute_m_fast(15) + tweak_term\n")})
    r = _report(repo, base1, [old], base2, [new])
    e = r.mapping[0]
    assert e.status == "modified"
    assert [(c.commit, c.pr) for c in e.upstream_commits] == [(side, "#77")]
    assert [h.commits for f in e.files for h in f.hunks] == [(side,)]
    assert e.review.needed and e.review.forced_by == (side,)
    assert r.upstream.commits == 3


def test_series_number_prefix_is_not_a_message_change(tmp_path: Path) -> None:
    """``[4/8] subject`` -> ``subject`` (renumbering is its own flag); ``[fix]`` -> ``feat:`` is."""
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"a.py": text("a"), "b.py": text("b")})
    o1 = repo.commit("[4/8] fix: alpha\n\nSame body.", {"a.py": text("a") + "alpha_extra = 1\n"})
    o2 = repo.commit("[fix] beta", {"b.py": text("b") + "beta_extra = 2\n"})
    repo.checkout(base)
    n1 = repo.commit("fix: alpha\n\nSame body.", {"a.py": text("a") + "alpha_extra = 1\n"})
    n2 = repo.commit("fix: beta\n\nCo-authored-by: A B <ab@example.invalid>",
                     {"b.py": text("b") + "beta_extra = 2\n"})
    r = _report(repo, base, [o1, o2], base, [n1, n2])
    assert [(e.old, e.status, e.message_changed) for e in r.mapping] == \
        [((1,), "identical", False), ((2,), "identical", True)]
    m = r.mapping[1].message
    assert m.subject and not m.body
    assert m.trailers_added == ("Co-authored-by: A B <ab@example.invalid>",)


def test_in_file_use_of_a_removed_import_but_not_of_a_rebound_name(tmp_path: Path) -> None:
    """Bump's check (names.uses_of_removed) in the report: a removed import still used is a
    finding; a removed ``def`` the patch replaces by an assignment (the example's [6/8],
    ``compute_topk = ...``) is not."""
    src = ("import saver\n\n\ndef run(x):\n    def pick(v):\n        return v\n\n"
           "    saver.save(x)\n    return pick(x)\n")
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"m.py": src})
    c = repo.commit("fix: no saver, pick by table", {"m.py": src.replace(
        "import saver\n", "").replace("    def pick(v):\n        return v\n",
                                      "    pick = PICKERS['default']\n")})
    r = _report(repo, base, [], base, [c])
    used = [f for e in r.mapping for f in e.findings if f.kind == "removed-name-used"]
    assert [(f.path, f.items) for f in used] == [("m.py", ("saver", "m.py:6"))]
