"""The mechanical facts the report states: stale message (names and files the diff does not
contain), redundant added lines already in the new base, partial reverts of upstream removals,
and upstream attribution through the side branch of a merge."""

from __future__ import annotations

from pathlib import Path

from rebasectl.git import Repo as GitRepo
from rebasectl.report import Side, build_report
from rebasectl.report.build import message_identifiers
from rebasectl.report.model import Report
from tests.synth import Repo


def text(name: str, n: int = 30) -> str:
    return "".join(f"{name}_value_{i} = compute_{name}({i})\n" for i in range(1, n + 1))


def _report(repo: Repo, base1: str, old: list[str], base2: str, new: list[str]) -> Report:
    git = GitRepo(repo.path)
    return build_report(git, Side(base1, old, None, "old"), Side(base2, new, None, "new"))


def test_message_identifiers() -> None:
    msg = ("fix: MLA RoPE for MoE: add `use_gated_attention` and mtp_kwargs to TransformerConfig;"
           " call get_spec() in gpt_layer_specs.py (e.g. v1.2.3), self.router_replay\n")
    assert message_identifiers(msg) == ["use_gated_attention", "mtp_kwargs", "TransformerConfig",
                                        "get_spec", "self.router_replay"]


def test_stale_message_names_and_files(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"config.py": text("cfg"), "mapping.py": text("map")})
    c = repo.commit("feat: add post_mlp_layernorm and use_gated_attention fields\n\n"
                    "Touches config.py and mapping.py.",
                    {"config.py": text("cfg") + "post_mlp_layernorm: bool = False\n"})
    r = _report(repo, base, [c], base, [c])
    texts = sorted(f.text for e in r.mapping for f in e.findings if f.side == "new")
    assert texts == ["message names `use_gated_attention`, which its diff does not contain",
                     "message names file `mapping.py`, which its diff does not change"]
    assert r.mapping[0].status == "identical"


def test_redundant_and_partial_revert(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"mod.py": text("mod")})
    old = repo.commit("fix: guard", {"mod.py": text("mod").replace(
        "mod_value_10 = compute_mod(10)\n",
        "mod_value_10 = compute_mod(10)\nassert_guard_condition(mod_value_10)\n")})
    repo.checkout("-q", "-b", "up", base1)
    upstream_added = "mod_value_25 = compute_mod(25)\nlegacy_hook_registration(mod_value_25)\n"
    repo.commit("upstream: add the guard itself (#5)", {"mod.py": text("mod").replace(
        "mod_value_10 = compute_mod(10)\n",
        "mod_value_10 = compute_mod(10)\nassert_guard_condition(mod_value_10)\n")})
    cur = (repo.path / "mod.py").read_text()
    removed = repo.commit("upstream: drop the legacy hook (#9)",
                          {"mod.py": cur.replace("mod_value_3 = compute_mod(3)\n", "")})
    base2 = repo.head()
    cur = (repo.path / "mod.py").read_text()
    new = repo.commit("fix: guard", {"mod.py": cur.replace(
        "mod_value_2 = compute_mod(2)\n",
        "mod_value_2 = compute_mod(2)\nassert_guard_condition(mod_value_10)\n"
        "mod_value_3 = compute_mod(3)\n")})
    assert upstream_added  # (kept for readability of the scenario)
    r = _report(repo, base1, [old], base2, [new])
    kinds = {(f.kind, f.text, f.commit) for e in r.mapping for f in e.findings}
    assert ("redundant", "added line already in the new base: "
            "assert_guard_condition(mod_value_10)", None) in kinds
    assert ("partial-revert", "re-adds a line upstream removed: mod_value_3 = compute_mod(3)",
            removed) in kinds


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
    assert r.upstream.commits == 3


def test_stale_message_ignores_product_names_and_dotted_words(tmp_path: Path) -> None:
    """Found on the real example pair: "PyTorch" was reported as a missing identifier, and
    "triton.heuristics" as a file `triton.h` the diff does not change."""
    assert message_identifiers("fixes for PyTorch, HuggingFace and TE; RouterReplay") == \
        ["RouterReplay"]
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"kern.py": text("kern")})
    c = repo.commit("fix: misc compatibility fixes for PyTorch\n\n"
                    "K_BLOCK is chosen by triton.heuristics; see kern.py. Also fixes ops.h.",
                    {"kern.py": text("kern") + "K_BLOCK = 64\n"})
    r = _report(repo, base, [c], base, [c])
    texts = sorted(f.text for e in r.mapping for f in e.findings if f.side == "new")
    assert texts == ["message names file `ops.h`, which its diff does not change"]


def test_series_number_prefix_is_not_a_message_change(tmp_path: Path) -> None:
    """``[4/8] subject`` -> ``subject`` (renumbering is its own flag); ``[fix]`` -> ``feat:`` is."""
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"a.py": text("a"), "b.py": text("b")})
    o1 = repo.commit("[4/8] fix: alpha\n\nSame body.", {"a.py": text("a") + "alpha_extra = 1\n"})
    o2 = repo.commit("[fix] beta", {"b.py": text("b") + "beta_extra = 2\n"})
    repo.checkout(base)
    n1 = repo.commit("fix: alpha\n\nSame body.", {"a.py": text("a") + "alpha_extra = 1\n"})
    n2 = repo.commit("fix: beta", {"b.py": text("b") + "beta_extra = 2\n"})
    r = _report(repo, base, [o1, o2], base, [n1, n2])
    assert [(e.old, e.status, e.message_changed) for e in r.mapping] == \
        [((1,), "identical", False), ((2,), "identical", True)]


def test_redundant_ignores_fragments_of_a_new_call(tmp_path: Path) -> None:
    """Found on the real example pair: the argument lines of a new roll_tensor(...) call were
    each reported as "added line already in the new base" (they are, in the other calls)."""
    call = ("labels_rolled, _ = roll_tensor(\n    labels_tensor,\n    cp_group=self.cp_group,\n"
            "    packed_seq_params=packed_seq_params,\n)\n")
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"m.py": text("m") + call})
    c = repo.commit("feat: roll the mask too", {"m.py": text("m") + call + call.replace(
        "labels", "mask") + "m_value_1 = compute_m(1)\n"})
    r = _report(repo, base, [c], base, [c])
    assert [f.text for e in r.mapping for f in e.findings if f.kind == "redundant"] == \
        ["added line already in the new base: m_value_1 = compute_m(1)"]
