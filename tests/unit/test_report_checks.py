"""The mechanical facts the report states, each where it holds and nowhere else: stale message
(claims only, not narrative; a name the hunk's function holds is not stale), redundant (the same
block, not another block), lost in resolution, partial reverts, a removed name upstream still
uses, and upstream attribution through the side branch of a merge."""

from __future__ import annotations

from pathlib import Path

from rebasectl.engine.attribution import UpstreamRange
from rebasectl.engine.carried import CarriedLines, Change
from rebasectl.git import Repo as GitRepo
from rebasectl.model.diffs import parse
from rebasectl.model.ids import Oid
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


LOADER = ("class Loader:\n    def __init__(self):\n        self.cached = None\n\n"
          "    def load(self, path):\n        return read_state(path)\n")


def _widened(tmp_path: Path, old_sig: str, new_sig: str | None, upstream_sig: str) -> Report:
    """An old patch giving ``Loader.__init__`` a parameter (``old_sig``); upstream gives it
    another (``upstream_sig``); the new patch resolves to ``new_sig`` (None: upstream's line
    taken, the patch's own parameter dropped) and keeps its body line."""
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"load.py": text("l") + LOADER})
    plain = "    def __init__(self):\n"
    body = "        self.cached = None\n"
    own = "        self.allow_partial_load = allow_partial_load\n"
    old = repo.commit("feat: partial load", {"load.py": text("l") + LOADER.replace(
        plain, old_sig).replace(body, body + own)})
    repo.checkout("-b", "up", base1)
    repo.commit("upstream: cache metadata", {"load.py": text("l") + LOADER.replace(
        plain, upstream_sig)})
    base2 = repo.head()
    cur = (repo.path / "load.py").read_text()
    new = repo.commit("feat: partial load", {"load.py": cur.replace(
        upstream_sig, new_sig or upstream_sig).replace(body, body + own)})
    return _report(repo, base1, [old], base2, [new])


def test_a_parameter_kept_in_a_widened_signature_is_not_lost(tmp_path: Path) -> None:
    """Hostile 6 #12 (June, partial-ckpt-load's torch.py): upstream widened the signature the
    patch had changed and the resolution kept both parameters: the old line is rewritten, its
    content all there, not lost."""
    r = _widened(tmp_path, "    def __init__(self, allow_partial_load: bool = False):\n",
                 "    def __init__(self, cache_metadata: bool = False, "
                 "allow_partial_load: bool = False):\n",
                 "    def __init__(self, cache_metadata: bool = False):\n")
    assert r.mapping[0].status == "modified"
    assert _found(r, "lost-in-resolution") == []


def test_a_parameter_the_resolution_dropped_is_lost(tmp_path: Path) -> None:
    """The same bump resolved by taking upstream's signature alone: the patch's parameter is
    gone (its body line still uses it), and the report says so."""
    old_sig = "    def __init__(self, allow_partial_load: bool = False):\n"
    r = _widened(tmp_path, old_sig, None, "    def __init__(self, cache_metadata: bool = False):\n")
    lost = [f for e in r.mapping for f in e.findings if f.kind == "lost-in-resolution"]
    assert [(f.side, f.path, f.items) for f in lost] == [("old", "load.py", (old_sig.strip(),))]


def test_a_changed_value_is_lost(tmp_path: Path) -> None:
    """A rewritten line that keeps the words but changes a value is not "kept"."""
    r = _widened(tmp_path, "    def __init__(self, strict_load: bool = True):\n",
                 "    def __init__(self, cache_metadata: bool = False, "
                 "strict_load: bool = False):\n",
                 "    def __init__(self, cache_metadata: bool = False):\n")
    assert [f.items for e in r.mapping for f in e.findings if f.kind == "lost-in-resolution"] \
        == [("def __init__(self, strict_load: bool = True):",)]


def test_lost_lines_of_a_file_upstream_deleted(tmp_path: Path) -> None:
    """Hostile 7 #12 (June tokenizer.py): the old patch's line is in no file at the new base
    because upstream deleted the file; the finding says so and names the commit that did. A
    file upstream only renamed is not said deleted."""
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"tok.py": text("tok"), "keep.py": text("keep")})
    anchor = "tok_value_3 = compute_tok(3)\n"
    keep = text("keep") + "keep_checking_tokenizer_inputs(tok_value_3)\n"
    old = repo.commit("fix: trust", {"keep.py": keep, "tok.py": text("tok").replace(
        anchor, anchor + "trust_remote_code_for_tokenizers = True\n")})
    repo.checkout("-b", "up", base1)
    deleted = repo.commit("upstream: drop the legacy tokenizer (#7)", {"tok.py": None})
    base2 = repo.head()
    new = repo.commit("fix: trust", {"keep.py": keep})
    r = _report(repo, base1, [old], base2, [new])
    (f,) = [f for e in r.mapping for f in e.findings if f.kind == "lost-in-resolution"]
    assert (f.path, f.items, f.commit) == \
        ("tok.py", ("trust_remote_code_for_tokenizers = True",), deleted)
    assert f.text == ("1 line(s) the old patch added are not in the new patch, and upstream "
                      "deleted this file between the bases: "
                      "`trust_remote_code_for_tokenizers = True`")
    # a file still there without the line is said as before, with no commit
    repo.checkout("-b", "same", base1)
    kept = repo.commit("fix: trust", {"keep.py": keep})
    r = _report(repo, base1, [old], base1, [kept])
    (f,) = [f for e in r.mapping for f in e.findings if f.kind == "lost-in-resolution"]
    assert "nor this file at the new base" in f.text and f.commit is None


def _readding(tmp_path: Path, old_adds: str, new_adds: str) -> tuple[Report, str]:
    """Upstream removes an import, a docstring's ``Defaults to False.``, a lone argument and a
    statement (one commit); the old patch adds a guard and ``old_adds`` after line 10, the new
    one the guard and ``new_adds``."""
    dropped = ["import logging\n", "        Defaults to False.\n", "        position_ids,\n",
               "legacy_state = restore_legacy_state(flag)\n"]
    gone = (dropped[0] + "\ndef build(flag):\n    \"\"\"Build.\n\n    flag: use it.\n" +
            dropped[1] + "    \"\"\"\n    return make(\n        flag,\n" + dropped[2] +
            "    )\n" + dropped[3])
    kept = gone
    for line in dropped:
        kept = kept.replace(line, "")
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"mod.py": text("mod") + gone})
    anchor = "mod_value_10 = compute_mod(10)\n"
    guard = anchor + "assert_guard_condition(mod_value_10)\n"
    old = repo.commit("fix: guard", {"mod.py": text("mod").replace(anchor, guard + old_adds)
                                     + gone})
    repo.checkout("-b", "up", base1)
    removed = repo.commit("upstream: drop the legacy state (#9)", {"mod.py": text("mod") + kept})
    base2 = repo.head()
    new = repo.commit("fix: guard", {"mod.py": text("mod").replace(anchor, guard + new_adds)
                                     + kept})
    return _report(repo, base1, [old], base2, [new]), removed


def test_adds_back_only_lines_the_resolution_wrote(tmp_path: Path) -> None:
    """Hostile 6 #12 (June, post-layernorm's ``Defaults to False.``): a line upstream removed
    that the old patch added too is the patch's own, not the resolution putting back what
    upstream took out; and a line that tells nothing alone (prose, a lone argument) is no
    revert, as in bump's re-adds warning (one rule: ``CarriedLines.removed_upstream``)."""
    own = ("    \"\"\"Guard.\n        Defaults to False.\n    \"\"\"\n"
           "legacy_state = restore_legacy_state(flag)\n")
    r, _ = _readding(tmp_path / "own", own, own + "log_guard(mod_value_10)\n")
    assert r.mapping[0].status == "modified"
    assert _found(r, "partial-revert") == []
    pieces = "    \"\"\"Guard.\n        Defaults to False.\n    \"\"\"\n" \
        "use(\n        position_ids,\n)\n"
    r, _ = _readding(tmp_path / "pieces", "", pieces)
    assert _found(r, "partial-revert") == []


def test_adds_back_a_statement_the_resolution_wrote(tmp_path: Path) -> None:
    """The true finding stays: the new patch alone adds a statement upstream removed, or an
    import (words only, yet code: the grown June report's ``import logging`` in mlp.py)."""
    r, removed = _readding(tmp_path / "a", "", "legacy_state = restore_legacy_state(flag)\n")
    reverts = [f for e in r.mapping for f in e.findings if f.kind == "partial-revert"]
    assert [(f.side, f.path, f.items, f.commit) for f in reverts] == \
        [("new", "mod.py", ("legacy_state = restore_legacy_state(flag)",), removed)]
    r, removed = _readding(tmp_path / "b", "", "import logging\n")
    assert [(f.items, f.commit) for e in r.mapping for f in e.findings
            if f.kind == "partial-revert"] == [(("import logging",), removed)]


def test_a_moved_line_is_not_added_back(tmp_path: Path) -> None:
    """Hostile 7 #8 (June new[21], attention.py): a patch that removes a line and adds it
    elsewhere in the same file moves it; only the patch that put it back (new[18]) re-adds
    what upstream removed. Bump's re-adds warning asks the same rule of a patch made on the old
    base, where the same move does put the line back on the target (June bump: deepseek-v4's
    schedules.py, true-on-policy's transformer_block.py)."""
    repo = Repo(tmp_path / "r")
    head = "import logging\n"
    base1 = repo.commit("base", {"mod.py": head + text("mod")})
    removed = repo.commit("upstream: drop logging (#9)", {"mod.py": text("mod")})
    base2 = repo.head()
    back = repo.commit("fix: log again", {"mod.py": head + text("mod")})
    anchor = "mod_value_10 = compute_mod(10)\n"
    moved = repo.commit("refactor: import where it is used", {
        "mod.py": text("mod").replace(anchor, anchor + head)})
    r = _report(repo, base1, [], base2, [back, moved])
    reverts = [f for e in r.mapping for f in e.findings if f.kind == "partial-revert"]
    assert [(f.index, f.items, f.commit) for f in reverts] == [(1, ("import logging",), removed)]
    git = GitRepo(repo.path)
    carried = CarriedLines(UpstreamRange(git, Oid(base1), Oid(base2)))
    diffs = git.history.commit_diffs([back, moved])
    changes = [Change.of_file(parse(diffs[sha]).files[0]) for sha in (back, moved)]
    assert [carried.removed_upstream(c, on_target=True) for c in changes] == \
        [[(removed, [b"import logging"])], []]
    # bump asks of a patch made on the old base: one that moves a line upstream has since
    # removed puts it back on the target (its removal finds nothing there)
    repo.checkout("-b", "on-old", base1)
    on_old = repo.commit("refactor: import where it is used", {
        "mod.py": text("mod").replace(anchor, anchor + head)})
    (f,) = parse(git.history.commit_diffs([on_old])[on_old]).files
    assert carried.removed_upstream(Change.of_file(f)) == [(removed, [b"import logging"])]


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


def test_a_rewritten_signature_is_read_in_its_own_class(tmp_path: Path) -> None:
    """hostile5 #5 (June's partial-ckpt-load): the patch adds a parameter to the second class's
    one-line ``__init__``; the first ``def __init__(`` of the file is another class's, over
    several lines. Nothing is removed, so nothing is "still used", and a line the patch itself
    adds (a call passing the parameter, in another file) is never cited as upstream code."""
    lib = ("class Saver:\n    def __init__(\n        self,\n        *args,\n"
           "        dedup: bool = True,\n    ) -> None:\n        self.dedup = dedup\n\n\n"
           "class Loader:\n    def __init__(self, cache_metadata: bool = False):\n"
           "        self.cache = cache_metadata\n")
    caller = text("c") + "strategy = Loader(cache_metadata=True)\nsetup = object.__init__\n"
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"lib.py": lib, "caller.py": caller})
    new = repo.commit("feat: partial load", {
        "lib.py": lib.replace("def __init__(self, cache_metadata: bool = False):",
                              "def __init__(self, cache_metadata: bool = False, "
                              "partial: bool = False):"),
        "caller.py": caller + "again = Loader(cache_metadata=True, partial=True)\n"})
    r = _report(repo, base, [], base, [new])
    assert _found(r, "removed-name-used") == []
    # a parameter it does take away is found in that class, and the patch's own line is not
    # upstream code: only upstream's untouched call (line 31) is cited, never its own (33)
    gone = repo.commit("feat: drop the cache flag", {
        "lib.py": lib.replace("def __init__(self, cache_metadata: bool = False):",
                              "def __init__(self):"),
        "caller.py": caller + "again = Loader(cache_metadata=False)\n"})
    r = _report(repo, base, [], new, [gone])
    used = [f for e in r.mapping for f in e.findings if f.kind == "removed-name-used"]
    assert [f.items for f in used] == [("cache_metadata", "caller.py:31")], used
    assert "parameter `cache_metadata` of `Loader.__init__`" in used[0].text


def test_a_module_qualified_function_the_diff_changes_is_not_stale(tmp_path: Path) -> None:
    """hostile5 #5 (June's dp-reshardable-compat): the message names ``dict_utils.merge`` and
    the diff changes ``merge`` in dict_utils.py; the same name for a module the diff does not
    touch is stale."""
    body = ("def merge(x1, x2, key=()):\n    if isinstance(x1, dict):\n"
            "        x1.update(x2)\n    return x1\n")
    repo = Repo(tmp_path / "r")
    base = repo.commit("base", {"pkg/dict_utils.py": text("d") + body,
                                "pkg/other.py": text("o")})
    c = repo.commit("fix: compat\n\n- dict_utils.merge: keep entries\n"
                    "- list_utils.merge: likewise",
                    {"pkg/dict_utils.py": text("d") + body.replace("x1.update(x2)",
                                                                   "x1.update(dict(x2))")})
    r = _report(repo, base, [c], base, [c])
    assert _found(r, "stale-message") == [
        "message names `list_utils.merge`, in neither the diff nor the functions it changes"]


def test_hunk_shifts_are_said_true_of_every_hunk(tmp_path: Path) -> None:
    """hostile5 #5 (June's routing-replay: +88 in moe_layer.py, +57 and +235 in router.py, a
    new file in place): one number only when every hunk moved by it; else the range of those
    that moved and each file's own shifts, and that some stayed in place."""
    repo = Repo(tmp_path / "r")
    files = {"a.py": text("a", 40), "b.py": text("b")}
    base1 = repo.commit("base", files)

    def patch_on(texts: dict[str, str]) -> dict[str, str]:
        return {"a.py": texts["a.py"].replace("a_value_10 =", "a_value_10: int =")
                .replace("a_value_35 =", "a_value_35: int ="),
                "b.py": texts["b.py"].replace("b_value_5 =", "b_value_5: int =")}

    old = repo.commit("feat: typed", patch_on(files))
    shifted = {"a.py": "import x\n" * 3 + text("a", 20) + "pad = 1\n" * 10
               + text("a", 40).split("\n", 20)[20], "b.py": files["b.py"]}
    repo.git("checkout", "-q", base1)
    base2 = repo.commit("upstream: imports and padding", shifted)
    new = repo.commit("feat: typed", patch_on(shifted))
    (e,) = _report(repo, base1, [old], base2, [new]).mapping
    assert e.status == "identical" and e.moved
    assert "line_shift" not in e.evidence.to_json()
    assert e.evidence.line_shifts == {"a.py": [3, 13], "b.py": [0]}
    assert e.details.endswith("some hunks moved by +3 to +13 lines (a.py +3, +13; b.py in "
                              "place)."), e.details
    assert "some hunks moved by +3 to +13 lines" in e.review.summary
    repo.git("checkout", "-q", base1)  # every hunk 3 lines down: one number, as before
    base3 = repo.commit("upstream: imports", {"a.py": "import x\n" * 3 + files["a.py"],
                                              "b.py": "import x\n" * 3 + files["b.py"]})
    moved = repo.commit("feat: typed", patch_on({"a.py": "import x\n" * 3 + files["a.py"],
                                                 "b.py": "import x\n" * 3 + files["b.py"]}))
    (e,) = _report(repo, base1, [old], base3, [moved]).mapping
    assert e.evidence.line_shift == 3 and "line_shifts" not in e.evidence.to_json()
    assert e.details.endswith("hunks moved by +3 lines.") and "moved +3 lines" in \
        e.review.summary


def test_upstream_files_changed_counts_as_git_diff_shortstat(tmp_path: Path) -> None:
    """hostile5 #11: a file upstream renamed is one changed file, as ``git diff --shortstat A B``
    says (renames detected, git's default), not a deletion plus an addition."""
    repo = Repo(tmp_path / "r")
    base1 = repo.commit("base", {"old_name.py": text("m"), "b.py": text("b")})
    repo.git("mv", "old_name.py", "new_name.py")
    base2 = repo.commit("upstream: rename, edit b", {"b.py": text("b") + "extra = 1\n"})
    r = _report(repo, base1, [], base2, [])
    stat = repo.git("diff", "--shortstat", base1, base2)
    assert stat.startswith("2 files changed") and r.upstream.files_changed == 2, stat


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


def test_partial_revert_names_the_last_remover_of_the_longest_line() -> None:
    """The engine's answer (commits oldest first, the lines each removed) read as one finding per
    file; a line that is not UTF-8 is quoted with replacement characters, its commit still
    found (it is matched as bytes)."""
    from types import SimpleNamespace
    from typing import cast

    from rebasectl.model.ids import Oid
    from rebasectl.report.findings import partial_revert
    from rebasectl.report.lineage import Change

    c = cast(Change, SimpleNamespace(side="new", index=2))
    a, b = Oid("a" * 40), Oid("b" * 40)
    found = [(a, [b"import gc", b"name = b'\xff\xfe long line'"]),
             (b, [b"name = b'\xff\xfe long line'"])]
    (f,) = partial_revert(c, "m.py", found)
    assert f.commit == b and f.items == ("import gc", "name = b'\ufffd\ufffd long line'")
    assert partial_revert(c, "m.py", []) == []
