"""The series model: series.yaml (schema version 1) and its patch entries.

Loading validates everything docs/design.md fixes and names ``file:line`` for each problem (unknown
keys, wrong types, duplicate ids, missing or escaping paths), because a maintainer edits this file
by hand. Saving writes one deterministic form, so an unchanged series saves to the same bytes.
The model knows nothing of git or the screen.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..infra.errors import RebasectlError
from ..infra.fsutil import Confined, read_regular
from .ids import Oid, is_full

_BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):  # type: ignore[misc,valid-type]
    """libyaml's loader when PyYAML has it (about 10x faster on a long series; marks are the
    same), with the tag resolution of plain scalars remembered: a series repeats a handful of
    values (``fix``, ``null``, ``[]``) and PyYAML's resolver tries a list of regular
    expressions on every one (half of the time of a 30 000-entry file)."""

    _resolved: dict[tuple[type, str, tuple[bool, bool]], str] = {}

    def resolve(self, kind: type, value: str, implicit: tuple[bool, bool]) -> str:
        key = (kind, value, implicit)
        tag = self._resolved.get(key)
        if tag is None:
            tag = super().resolve(kind, value, implicit)
            if len(self._resolved) < 4096:
                self._resolved[key] = tag
        return tag


LOADER = _Loader
SERIES_FILE = "series.yaml"
PATCH_DIR = "patches"
KINDS = ("fix", "feature", "compat", "backport", "temporary")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class SeriesError(RebasectlError):
    """series.yaml is invalid; the message starts with ``series.yaml:LINE:``."""


@dataclass(frozen=True)
class Upstream:
    name: str
    url: str
    branch: str
    base: Oid
    web: str = ""  # optional: the upstream's web page (links to its commits and PRs)


@dataclass(frozen=True)
class PatchEntry:
    id: str
    file: str
    title: str
    kind: str = "feature"
    why: str = ""
    upstream: str | None = None
    drop_when: str | None = None
    absorbs: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()

    def with_changes(self, **changes: Any) -> PatchEntry:
        return replace(self, **changes)


@dataclass(frozen=True)
class Series:
    upstream: Upstream
    patches: tuple[PatchEntry, ...] = field(default_factory=tuple)
    version: int = 1
    fork_web: str = ""  # optional ``fork: {web: URL}``: this series' repository on the web

    def by_id(self, patch_id: str) -> PatchEntry:
        for entry in self.patches:
            if entry.id == patch_id:
                return entry
        raise SeriesError(f"no patch with id {patch_id!r} in {SERIES_FILE}")


# -- loading ---------------------------------------------------------------------------------------
_UPSTREAM_KEYS = {"name": str, "url": str, "branch": str, "base": str}
_WEB = re.compile(r"https?://[^\s\"'<>`]+")  # a web page the report may link to
_PATCH_KEYS: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "file": (str,),
    "title": (str,),
    "kind": (str,),
    "why": (str,),
    "upstream": (str, type(None)),
    "drop_when": (str, type(None)),
    "absorbs": (list,),
    "tests": (list,),
}
_REQUIRED_PATCH_KEYS = ("id", "file", "title")


def load(root: Path, *, check_files: bool = True, check_tests: bool = False) -> Series:
    path = root / SERIES_FILE
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        raise SeriesError(
            f"{SERIES_FILE}: not found in {root} (run `rebasectl import` to create one)"
        ) from None
    except OSError as exc:
        raise SeriesError(f"{SERIES_FILE}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SeriesError(f"{SERIES_FILE}: cannot read: {exc}") from None
    return parse(text, root, check_files=check_files, check_tests=check_tests)


def parse(text: str, root: Path, *, check_files: bool = True, check_tests: bool = False,
          name: str = SERIES_FILE) -> Series:
    """The series in ``text``; ``check_files``: its patch files exist; ``check_tests``: its test
    paths exist too (``check`` and ``test``; apply and bump need no test file)."""
    node = _compose(text, name)
    top = _mapping(node, name, "the top level")
    _only_keys(top, {"version", "upstream", "patches", "fork"}, name)
    version = _scalar(top, "version", name, (int,), node)
    if version != 1:
        raise SeriesError(
            f"{name}:{_line(top['version'][1])}: unsupported version {version!r} "
            "(this rebasectl reads version 1)"
        )
    if "upstream" not in top:
        raise SeriesError(f"{name}:{_line(node)}: missing key 'upstream'")
    upstream = _upstream(top["upstream"][1], name)
    fork_web = _fork(top["fork"][1], name) if "fork" in top else ""
    patches_node = top.get("patches", (None, None))[1]
    if patches_node is None or (
        isinstance(patches_node, yaml.ScalarNode) and patches_node.value in ("", "null", "~")
    ):
        return Series(upstream, (), version, fork_web)
    if not isinstance(patches_node, yaml.SequenceNode):
        raise SeriesError(f"{name}:{_line(patches_node)}: 'patches' must be a list")
    within, unique = _Dirs(root, check_tests), _Unique(name)
    entries: list[PatchEntry] = []
    for item in patches_node.value:
        entries.append(_patch_entry(item, name, within, check_files))
        unique.add(item, entries[-1])
    unique.check_absorbs(patches_node.value, entries)
    return Series(upstream, tuple(entries), version, fork_web)


def _web(fields: dict[str, tuple[yaml.Node, yaml.Node]], name: str, parent: yaml.Node) -> str:
    """The optional ``web`` key: an http(s) URL with nothing a link could be broken by."""
    if "web" not in fields:
        return ""
    value = str(_scalar(fields, "web", name, (str,), parent))
    if not _WEB.fullmatch(value):
        raise SeriesError(f"{name}:{_line(fields['web'][1])}: 'web' must be an http(s) URL "
                          f"without spaces or quotes, got {value!r}")
    return value.rstrip("/")


def _fork(node: yaml.Node, name: str) -> str:
    """``fork: {web: URL}``: where this series' repository is on the web (PR links)."""
    fields = _mapping(node, name, "'fork'")
    _only_keys(fields, {"web"}, name)
    return _web(fields, name, node)


def _compose(text: str, name: str) -> yaml.Node:
    """The YAML node tree (libyaml's parser when installed); syntax errors as ``file:line``."""
    try:
        node = yaml.compose(text, Loader=LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["invalid"])[0]
        raise SeriesError(f"{name}:{line}: YAML syntax error: {problem}") from None
    except RecursionError:
        raise SeriesError(f"{name}:1: YAML nested too deeply") from None
    if node is None:
        raise SeriesError(f"{name}:1: empty file")
    return node


_SCHEMES = ("https://", "ssh://", "git://", "file://")
TRANSPORTS = "https, ssh, git, file"


def url_refusal(url: str) -> str | None:
    """Why git must not be handed ``url`` as an upstream, None when it may: only https, ssh,
    git and file URLs, local paths and scp-style ``host:path`` (an ``ext::`` or other
    ``transport::`` URL could run commands). series.yaml's ``url`` and every ``--upstream`` are
    judged here, so ``check`` refuses what the network commands would."""
    if not url or url.startswith("-"):
        return "not a URL or path"
    refused = f"transport refused (use {TRANSPORTS})"
    if "::" in url.split("/", 1)[0]:
        return refused
    if url.lower().startswith(_SCHEMES):
        return None
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", url):
        return refused
    return None


def _upstream(up_node: yaml.Node, name: str) -> Upstream:
    up = _mapping(up_node, name, "'upstream'")
    _only_keys(up, {*_UPSTREAM_KEYS, "web"}, name)
    values = {k: _scalar(up, k, name, (str,), up_node) for k in _UPSTREAM_KEYS}
    values["web"] = _web(up, name, up_node)
    refusal = url_refusal(values["url"])
    if refusal is not None:
        raise SeriesError(f"{name}:{_line(up['url'][1])}: upstream.url {values['url']!r}: "
                          f"{refusal}")
    if not is_full(values["base"]):
        raise SeriesError(
            f"{name}:{_line(up['base'][1])}: upstream.base must be a full 40-hex "
            f"sha, got {values['base']!r}"
        )
    return Upstream(values["name"], values["url"], values["branch"], Oid(values["base"]),
                    values["web"])


class _Unique:
    """Ids and files once each (a file compared in normal form: ``./x.patch`` is ``x.patch``,
    and two entries applying one file would apply it twice), checked entry by entry so that a
    long file stops at its first repeat; ``absorbs:`` names ids."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ids: dict[str, int] = {}
        self.files: dict[str, int] = {}

    def add(self, item: yaml.Node, entry: PatchEntry) -> None:
        line = _line(item)
        if entry.id in self.ids:
            raise SeriesError(f"{self.name}:{line}: duplicate patch id {entry.id!r} (first at "
                              f"line {self.ids[entry.id]})")
        normal = posixpath.normpath(entry.file)
        if normal in self.files:
            raise SeriesError(f"{self.name}:{line}: patch file {entry.file!r} listed twice "
                              f"(first at line {self.files[normal]})")
        self.ids[entry.id], self.files[normal] = line, line

    def check_absorbs(self, items: list[yaml.Node], entries: list[PatchEntry]) -> None:
        for item, entry in zip(items, entries):
            for absorbed in entry.absorbs:
                # ids of patches no longer in the series are lineage: allowed, if they look so
                if absorbed not in self.ids and not ID_RE.match(absorbed):
                    raise SeriesError(f"{self.name}:{_line(item)}: absorbs: {absorbed!r} is not "
                                      "an id")


class _Dirs:
    """The checkout and its patches/ folder, each resolved once for the whole file."""

    def __init__(self, root: Path, check_tests: bool = False) -> None:
        self.root, self.patches = Confined(root), Confined(root / PATCH_DIR)
        self.check_tests = check_tests
        self.patches_inside = self.root.resolve(PATCH_DIR) is not None


def _patch_entry(item: yaml.Node, name: str, within: _Dirs, check_files: bool) -> PatchEntry:
    fields = _mapping(item, name, "a patch entry")
    _only_keys(fields, set(_PATCH_KEYS), name)
    for key in _REQUIRED_PATCH_KEYS:
        if key not in fields:
            raise SeriesError(f"{name}:{_line(item)}: patch entry without '{key}'")
    values: dict[str, Any] = {}
    for key, types in _PATCH_KEYS.items():
        if key not in fields:
            continue
        knode, vnode = fields[key]
        if key in ("absorbs", "tests"):
            if not isinstance(vnode, yaml.SequenceNode):
                raise SeriesError(f"{name}:{_line(vnode)}: '{key}' must be a list")
            items = []
            for sub in vnode.value:
                if not isinstance(sub, yaml.ScalarNode) or sub.tag != "tag:yaml.org,2002:str":
                    raise SeriesError(f"{name}:{_line(sub)}: '{key}' entries must be strings")
                items.append(sub.value)
            values[key] = tuple(items)
        else:
            values[key] = _scalar(fields, key, name, types, item)
    line = _line(item)
    pid = values["id"]
    if not ID_RE.match(pid):
        raise SeriesError(f"{name}:{line}: id {pid!r} must be a slug (a-z, 0-9, '.', '_', '-')")
    kind = values.get("kind", "feature")
    if kind not in KINDS:
        raise SeriesError(
            f"{name}:{_line(fields['kind'][1])}: kind {kind!r} is not one of {', '.join(KINDS)}"
        )
    if not values["title"].strip():
        raise SeriesError(f"{name}:{line}: empty title")
    file_line = _line(fields["file"][1])
    real = _inside(within.patches, values["file"], f"{name}:{file_line}", "file")
    if not within.patches_inside:  # patches/ itself must not lead out (a symlink)
        _inside(within.root, f"{PATCH_DIR}/{values['file']}", f"{name}:{file_line}", "file")
    if check_files and not os.path.isfile(real):
        raise SeriesError(f"{name}:{file_line}: patch file {PATCH_DIR}/{values['file']} not found")
    if "tests" in fields:
        _tests(fields["tests"][1], name, within)
    return PatchEntry(**values)


def _tests(node: yaml.Node, name: str, within: _Dirs) -> None:
    """Each ``tests:`` entry (a pytest file or folder, ``::test`` allowed) inside the checkout
    and, when asked, there: a missing one made ``rebasectl test`` fail later, on the bump PR,
    instead of at ``check``."""
    assert isinstance(node, yaml.SequenceNode)  # _patch_entry checked it
    for sub in node.value:
        where = f"{name}:{_line(sub)}"
        path = sub.value.split("::", 1)[0]
        real = _inside(within.root, path, where, "test path")
        if within.check_tests and not os.path.exists(real):
            raise SeriesError(f"{where}: test path {sub.value!r} not found")


def _inside(within: Confined, rel: str, where: str, what: str) -> str:
    """``rel`` under the checkout, as a real path; refused when absolute, when it climbs out
    (``..``, a symlink) or enters ``.git``."""
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel:
        raise SeriesError(f"{where}: {what} {rel!r} must be a relative path")
    parts = rel.split("/")
    if ".." in parts or ".git" in parts:
        raise SeriesError(f"{where}: {what} {rel!r} escapes the repository")
    real = within.resolve(rel)
    if real is None:
        raise SeriesError(f"{where}: {what} {rel!r} escapes the repository (symlink?)")
    return real


def _line(node: yaml.Node | None) -> int:
    return node.start_mark.line + 1 if node is not None else 1


def _mapping(node: yaml.Node, name: str, what: str) -> dict[str, tuple[yaml.Node, yaml.Node]]:
    if not isinstance(node, yaml.MappingNode):
        raise SeriesError(f"{name}:{_line(node)}: {what} must be a mapping")
    result: dict[str, tuple[yaml.Node, yaml.Node]] = {}
    for knode, vnode in node.value:
        key = knode.value
        if not isinstance(knode, yaml.ScalarNode):
            raise SeriesError(f"{name}:{_line(knode)}: keys must be plain strings")
        if key in result:
            raise SeriesError(f"{name}:{_line(knode)}: duplicate key {key!r}")
        result[key] = (knode, vnode)
    return result


def _only_keys(
    fields: dict[str, tuple[yaml.Node, yaml.Node]], allowed: set[str], name: str
) -> None:
    for key, (knode, _) in fields.items():
        if key not in allowed:
            raise SeriesError(
                f"{name}:{_line(knode)}: unknown key {key!r} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )


def _scalar(
    fields: dict[str, tuple[yaml.Node, yaml.Node]],
    key: str,
    name: str,
    types: tuple[type, ...],
    parent: yaml.Node,
) -> Any:
    if key not in fields:
        raise SeriesError(f"{name}:{_line(parent)}: missing key {key!r}")
    vnode = fields[key][1]
    if not isinstance(vnode, yaml.ScalarNode):
        raise SeriesError(f"{name}:{_line(vnode)}: {key!r} must be a single value")
    try:  # the composer already resolved the node's type: construct it directly
        value = yaml.constructor.SafeConstructor().construct_object(vnode, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SeriesError(f"{name}:{_line(vnode)}: {key!r}: bad value ({problem})") from None
    if isinstance(value, bool) or not isinstance(value, types):
        wanted = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise SeriesError(f"{name}:{_line(vnode)}: {key!r} must be {wanted}, got {value!r}")
    return value


# -- saving ----------------------------------------------------------------------------------------
def _entry_doc(p: PatchEntry) -> dict[str, Any]:
    return {"id": p.id, "file": p.file, "title": p.title, "kind": p.kind, "why": p.why,
            "upstream": p.upstream, "drop_when": p.drop_when, "absorbs": list(p.absorbs),
            "tests": list(p.tests)}


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, which also writes a ``str`` subclass (an ``Oid``) as the text it
    is; the safe one refuses any type it was not told about."""


_YAML_BREAKS = ("\x85", "\u2028", "\u2029")  # line breaks to YAML, not to Python


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """A string as PyYAML writes it, except one holding a character YAML reads as a line break
    (NEL, LS, PS): with ``allow_unicode`` those are written raw in a plain or single-quoted
    scalar, and read back folded into a space; double quotes escape them (\\N, \\L, \\P), so
    the name loads back as it was (a property test found an upstream name "\\x85")."""
    if any(ch in text for ch in _YAML_BREAKS):
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(text), style='"')
    return dumper.represent_str(str(text))


_Dumper.add_representer(str, _represent_str)
_Dumper.add_multi_representer(str, _represent_str)


def _yaml(doc: Any) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)


def dump(series: Series) -> bytes:
    """series.yaml written from scratch (a new series; see ``edit`` for an existing file)."""
    up = series.upstream
    upstream = {"name": up.name, "url": up.url, "branch": up.branch, "base": up.base}
    doc: dict[str, Any] = {"version": series.version,
                           "upstream": {**upstream, **({"web": up.web} if up.web else {})}}
    if series.fork_web:
        doc["fork"] = {"web": series.fork_web}
    doc["patches"] = [_entry_doc(p) for p in series.patches]
    return _yaml(doc).encode("utf-8")


def edit(old_text: str, series: Series) -> bytes:
    """series.yaml for ``series``, written over ``old_text`` the way a person would edit it: an
    unchanged series keeps every byte; otherwise the upstream values that changed are replaced
    in place, entries that did not change keep their text (comments, wrapping, quoting), and
    only new or changed entries are written fresh. A layout this cannot follow (flow style,
    multi-line upstream values) is written from scratch."""
    try:
        node = _compose(old_text, SERIES_FILE)
        old = parse(old_text, Path("/nonexistent"), check_files=False)
    except SeriesError:
        return dump(series)
    if old == series:
        return old_text.encode("utf-8")
    if not series.patches:
        return dump(series)
    lines = old_text.splitlines(keepends=True)
    top = {k.value: (k, v) for k, v in node.value} if isinstance(node, yaml.MappingNode) else {}
    head_end, blocks, tail_start = _entry_blocks(lines, top.get("patches", (None, None))[1])
    if old.version != series.version or head_end is None or not _edit_upstream(
            lines, top.get("upstream", (None, None))[1], old.upstream, series.upstream):
        return dump(series)
    kept = {e.id: blocks[i] for i, e in enumerate(old.patches)}
    indent = _indent_of(blocks[0]) if blocks else ""
    body = [kept[e.id] if e.id in kept and old.by_id(e.id) == e else
            _fresh_block(e, indent) for e in series.patches]
    return "".join(lines[:head_end] + body + lines[tail_start:]).encode("utf-8")


def _entry_blocks(lines: list[str], seq: yaml.Node | None
                  ) -> tuple[int | None, list[str], int]:
    """(first line of the entries, each entry's text, first line after them) of a block
    sequence whose items start their own line with ``-``; (None, ...) otherwise."""
    if not isinstance(seq, yaml.SequenceNode) or seq.flow_style or not seq.value:
        return None, [], 0
    starts = [item.start_mark.line for item in seq.value]
    if any(not lines[n].lstrip().startswith("-") for n in starts):
        return None, [], 0
    end = seq.end_mark.line + (1 if seq.end_mark.column else 0)
    bounds = starts + [min(end, len(lines))]
    blocks = ["".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]
    return starts[0], blocks, bounds[-1]


def _edit_upstream(lines: list[str], node: yaml.Node | None, old: Upstream,
                   new: Upstream) -> bool:
    """Replace, in ``lines``, each upstream value that changed (one-line plain values only)."""
    if not isinstance(node, yaml.MappingNode):
        return False
    values = {k.value: v for k, v in node.value}
    for key in _UPSTREAM_KEYS:
        if getattr(old, key) == getattr(new, key):
            continue
        v = values.get(key)
        if v is None or v.start_mark.line != v.end_mark.line:
            return False
        line = lines[v.start_mark.line]
        text = _yaml(getattr(new, key)).removesuffix("\n...\n").strip()
        lines[v.start_mark.line] = line[:v.start_mark.column] + text + line[v.end_mark.column:]
    return True


def _indent_of(block: str) -> str:
    return block[: len(block) - len(block.lstrip(" "))]


def _fresh_block(entry: PatchEntry, indent: str) -> str:
    text = _yaml([_entry_doc(entry)])
    return "".join(indent + ln for ln in text.splitlines(keepends=True))


def slugify(subject: str) -> str:
    """An id from a subject: '[1/8] fix: MLA RoPE kernel' -> 'mla-rope-kernel'."""
    text = re.sub(r"^(\[[^\]]*\]\s*)+", "", subject)
    text = re.sub(r"^[A-Za-z]+(\([^)]*\))?!?:\s*", "", text)  # conventional-commit prefix
    text = re.sub(r"\(#\d+\)", "", text)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:48].rstrip("-") or "patch"


def patch_filename(index: int, patch_id: str) -> str:
    return f"{index:04d}-{patch_id}.patch"
