"""series.yaml: the model, its validation (file:line errors) and its one saved form."""

from __future__ import annotations

from pathlib import Path

import pytest

from rebasectl.model.series import (
    PatchEntry,
    Series,
    SeriesError,
    Upstream,
    dump,
    load,
    parse,
    patch_filename,
    slugify,
)

BASE = "1dcf0dafa884ad52ffb243625717a3471643e087"
TEXT = f"""version: 1
upstream:
  name: megatron-lm
  url: https://github.com/NVIDIA/Megatron-LM.git
  branch: dev
  base: {BASE}
patches:
  - id: mla-rope-triton
    file: 0001-mla-rope.patch
    title: "fix: MLA RoPE"
    kind: fix
    why: "needed"
    upstream: "NVIDIA/Megatron-LM#1234"
    drop_when: "upstream ships it"
    absorbs: [old-rope]
    tests: [tests/regression/test_mla_rope.py]
  - id: bare
    file: 0002-bare.patch
    title: bare
"""


def _root(tmp_path: Path, text: str = TEXT) -> Path:
    (tmp_path / "patches").mkdir()
    for name in ("0001-mla-rope.patch", "0002-bare.patch"):
        (tmp_path / "patches" / name).write_text("x")
    (tmp_path / "tests" / "regression").mkdir(parents=True)
    (tmp_path / "tests" / "regression" / "test_mla_rope.py").write_text("")
    (tmp_path / "series.yaml").write_text(text)
    return tmp_path


def test_load_fields_and_defaults(tmp_path: Path) -> None:
    series = load(_root(tmp_path))
    assert series.upstream == Upstream("megatron-lm", "https://github.com/NVIDIA/Megatron-LM.git",
                                       "dev", BASE)
    first, bare = series.patches
    assert first == PatchEntry("mla-rope-triton", "0001-mla-rope.patch", "fix: MLA RoPE", "fix",
                               "needed", "NVIDIA/Megatron-LM#1234", "upstream ships it",
                               ("old-rope",), ("tests/regression/test_mla_rope.py",))
    assert bare == PatchEntry("bare", "0002-bare.patch", "bare")
    assert series.by_id("bare") is bare
    with pytest.raises(SeriesError, match="no patch with id 'nope'"):
        series.by_id("nope")


def test_dump_is_deterministic_and_loads_back(tmp_path: Path) -> None:
    root = _root(tmp_path)
    series = load(root)
    data = dump(series)
    assert data == dump(load(root)) and data.endswith(b"\n")
    (root / "series.yaml").write_bytes(data)
    assert load(root) == series
    assert dump(load(root)) == data  # a saved series saves to the same bytes


def test_empty_patch_list_variants(tmp_path: Path) -> None:
    head = TEXT.split("patches:")[0]
    for tail in ("patches: []\n", "patches:\n", "patches: null\n", ""):
        assert parse(head + tail, tmp_path).patches == ()


def test_unicode_and_quotes_survive_dump(tmp_path: Path) -> None:
    entry = PatchEntry("u", "0001-u.patch", "fix: «quoted» 'single' \"double\": colon #hash",
                       why="line one\nline two\n")
    series = Series(Upstream("n", "u", "b", BASE), (entry,))
    assert parse(dump(series).decode(), tmp_path, check_files=False) == series


@pytest.mark.parametrize("change,where", [
    (("absorbs: [old-rope]", "absorbs: [mla-rope-triton, 'Not An Id']"), "series.yaml:8: absorbs"),
    (("kind: fix", "kind: [fix]"), "series.yaml:11: 'kind' must be a single value"),
    (("why: \"needed\"", "why: 3"), "series.yaml:12: 'why' must be str, got 3"),
    (("upstream: \"NVIDIA/Megatron-LM#1234\"", "upstream: yes"),
     "series.yaml:13: 'upstream' must be str or null, got True"),
    (("  branch: dev\n", "  branch: dev\n  branch: main\n"), "series.yaml:6: duplicate key"),
    (("  name: megatron-lm\n", ""), "series.yaml:3: missing key 'name'"),
    (("file: 0002-bare.patch", "file: sub\\\\x.patch"), "must be a relative path"),
    # hostile5 #12: what check accepted and a later command refused
    (("url: https://github.com/NVIDIA/Megatron-LM.git", "url: 'ext::sh -c id'"),
     "series.yaml:4: upstream.url 'ext::sh -c id': transport refused (use https, ssh, git, "
     "file)"),
    (("url: https://github.com/NVIDIA/Megatron-LM.git", "url: fd::3"),
     "series.yaml:4: upstream.url 'fd::3': transport refused"),
    (("url: https://github.com/NVIDIA/Megatron-LM.git", "url: gopher://example.invalid/x"),
     "series.yaml:4: upstream.url 'gopher://example.invalid/x': transport refused"),
    (("url: https://github.com/NVIDIA/Megatron-LM.git", "url: --upload-pack=x"),
     "series.yaml:4: upstream.url '--upload-pack=x': not a URL or path"),
])
def test_errors_name_file_and_line(tmp_path: Path, change: tuple[str, str], where: str) -> None:
    assert change[0] in TEXT
    with pytest.raises(SeriesError) as info:
        parse(TEXT.replace(change[0], change[1], 1), _root(tmp_path))
    assert where in info.value.message and "\n" not in info.value.message


@pytest.mark.parametrize("url", ["https://github.com/NVIDIA/Megatron-LM.git",
                                 "ssh://git@example.invalid/x.git", "git://example.invalid/x",
                                 "file:///srv/x.git", "git@github.com:NVIDIA/Megatron-LM.git",
                                 "/srv/mirrors/megatron-lm.git", "../megatron-lm"])
def test_urls_git_may_be_handed(tmp_path: Path, url: str) -> None:
    """What `--upstream` accepts, series.yaml's url accepts (a path is not looked for here: the
    series may be checked where the mirror is not)."""
    text = TEXT.replace("url: https://github.com/NVIDIA/Megatron-LM.git", f"url: '{url}'")
    assert parse(text, _root(tmp_path)).upstream.url == url


@pytest.mark.parametrize("tests,where", [
    ("[tests/regression/test_mla_rope.py, tests/regression/test_gone.py]",
     "series.yaml:16: test path 'tests/regression/test_gone.py' not found"),
    ("\n    - tests/regression/test_mla_rope.py\n    - tests/regression/gone.py::test_x",
     "series.yaml:18: test path 'tests/regression/gone.py::test_x' not found"),
])
def test_missing_test_paths(tmp_path: Path, tests: str, where: str) -> None:
    """`check` and `test` load with check_tests: a test path that is not there is refused at
    its line (hostile5 #12); apply and bump, which run no test, still load the series."""
    text = TEXT.replace("tests: [tests/regression/test_mla_rope.py]", f"tests: {tests}")
    root = _root(tmp_path)
    with pytest.raises(SeriesError) as info:
        parse(text, root, check_tests=True)
    assert info.value.message == where
    assert parse(text, root).patches[0].tests[-1].startswith("tests/regression/")


def test_test_paths_may_be_folders_and_node_ids(tmp_path: Path) -> None:
    text = TEXT.replace("tests: [tests/regression/test_mla_rope.py]",
                        "tests: [tests/regression, tests/regression/test_mla_rope.py::test_a]")
    assert parse(text, _root(tmp_path), check_tests=True).patches[0].tests == (
        "tests/regression", "tests/regression/test_mla_rope.py::test_a")
    assert parse(text.replace("tests/regression,", "tests/gone,"), tmp_path / "x",
                 check_files=False).patches[0].tests[0] == "tests/gone"


def test_check_files_off_allows_missing_files(tmp_path: Path) -> None:
    assert len(parse(TEXT, tmp_path, check_files=False).patches) == 2
    with pytest.raises(SeriesError, match="not found"):
        parse(TEXT, tmp_path)


@pytest.mark.parametrize("subject,slug", [
    ("[1/8] fix: MLA RoPE triton kernel", "mla-rope-triton-kernel"),
    ("feat(moe)!: Routing replay (#1234)", "routing-replay"),
    ("[PATCH v2 3/4] compat: TE 2.x", "te-2-x"),
    ("!!!", "patch"),
    ("x" * 80, "x" * 48),
])
def test_slugify(subject: str, slug: str) -> None:
    assert slugify(subject) == slug


def test_patch_filename() -> None:
    assert patch_filename(4, "mla-rope") == "0004-mla-rope.patch"


def test_edit_keeps_what_a_person_wrote() -> None:
    """export writes series.yaml over the old text: unchanged -> same bytes; a new base, a renamed
    file, a dropped and a new entry change only their lines; comments and the wrapping of
    untouched entries stay; what it writes parses back to the series it was given."""
    from dataclasses import replace

    from rebasectl.model.series import PatchEntry, edit, parse

    root = Path(__file__).resolve().parents[2]
    text = "# kept: a note on top\n" + (root / "series.yaml").read_text().replace(
        "- id: mtp-rl", "# kept: a note between entries\n- id: mtp-rl")
    old = parse(text, root, check_files=False)
    assert edit(text, old) == text.encode()
    patches = list(old.patches)
    patches[2] = patches[2].with_changes(file="0003-renamed.patch")
    del patches[0]
    patches.append(PatchEntry(id="new-one", file="0010-new.patch", title="fix: new"))
    new = replace(old, upstream=replace(old.upstream, base="b" * 40), patches=tuple(patches))
    out = edit(text, new).decode()
    assert parse(out, root, check_files=False) == new
    assert "# kept: a note on top" in out and "# kept: a note between entries" in out
    routing = text[text.index("- id: routing-replay"):text.index("- id: int4-qat")]
    assert routing in out  # an untouched entry, byte for byte (its wrapped why: included)
    assert out.count("\n") - text.count("\n") < 0  # the dropped entry went, nothing else grew
