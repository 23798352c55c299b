"""The series model: series.yaml (schema version 1) and its patch entries.

Loading validates everything docs/design.md fixes and names ``file:line`` for each problem (unknown
keys, wrong types, duplicate ids, missing or escaping paths), because a maintainer edits this file
by hand. Saving writes one deterministic form, so an unchanged series saves to the same bytes.
The model knows nothing of git or the screen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .errors import RebasectlError

# libyaml's loader when PyYAML has it (about 10x faster on a long series); marks are the same
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
SERIES_FILE = "series.yaml"
PATCH_DIR = "patches"
KINDS = ("fix", "feature", "compat", "backport", "temporary")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
SHA_RE = re.compile(r"^[0-9a-f]{40}$")


class SeriesError(RebasectlError):
    """series.yaml is invalid; the message starts with ``series.yaml:LINE:``."""


@dataclass(frozen=True)
class Upstream:
    name: str
    url: str
    branch: str
    base: str


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

    def by_id(self, patch_id: str) -> PatchEntry:
        for entry in self.patches:
            if entry.id == patch_id:
                return entry
        raise SeriesError(f"no patch with id {patch_id!r} in {SERIES_FILE}")

    def index_of(self, patch_id: str) -> int:
        return [p.id for p in self.patches].index(patch_id)


# -- loading ---------------------------------------------------------------------------------------
_UPSTREAM_KEYS = {"name": str, "url": str, "branch": str, "base": str}
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


def load(root: Path, *, check_files: bool = True) -> Series:
    path = root / SERIES_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SeriesError(
            f"{SERIES_FILE}: not found in {root} (run `rebasectl import` to create one)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SeriesError(f"{SERIES_FILE}: cannot read: {exc}") from None
    return parse(text, root, check_files=check_files)


def parse(text: str, root: Path, *, check_files: bool = True, name: str = SERIES_FILE) -> Series:
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
    top = _mapping(node, name, "the top level")
    _only_keys(top, {"version", "upstream", "patches"}, name)
    version = _scalar(top, "version", name, (int,), node)
    if version != 1:
        raise SeriesError(
            f"{name}:{_line(top['version'][1])}: unsupported version {version!r} "
            "(this rebasectl reads version 1)"
        )
    if "upstream" not in top:
        raise SeriesError(f"{name}:{_line(node)}: missing key 'upstream'")
    up_node = top["upstream"][1]
    up = _mapping(up_node, name, "'upstream'")
    _only_keys(up, set(_UPSTREAM_KEYS), name)
    values = {k: _scalar(up, k, name, (str,), up_node) for k in _UPSTREAM_KEYS}
    if not SHA_RE.match(values["base"]):
        raise SeriesError(
            f"{name}:{_line(up['base'][1])}: upstream.base must be a full 40-hex "
            f"sha, got {values['base']!r}"
        )
    upstream = Upstream(**values)
    patches_node = top.get("patches", (None, None))[1]
    entries: list[PatchEntry] = []
    if patches_node is not None and not (
        isinstance(patches_node, yaml.ScalarNode) and patches_node.value in ("", "null", "~")
    ):
        if not isinstance(patches_node, yaml.SequenceNode):
            raise SeriesError(f"{name}:{_line(patches_node)}: 'patches' must be a list")
        seen: dict[str, int] = {}
        files: dict[str, int] = {}
        for item in patches_node.value:
            entry = _patch_entry(item, name, root, check_files)
            line = _line(item)
            if entry.id in seen:
                raise SeriesError(
                    f"{name}:{line}: duplicate patch id {entry.id!r} "
                    f"(first at line {seen[entry.id]})"
                )
            if entry.file in files:
                raise SeriesError(f"{name}:{line}: patch file {entry.file!r} listed twice")
            seen[entry.id] = line
            files[entry.file] = line
            entries.append(entry)
        known = set(seen)
        for item, entry in zip(patches_node.value, entries):
            for absorbed in entry.absorbs:
                if absorbed in known:
                    continue
                # ids of patches no longer in the series are lineage: allowed, if they look like ids
                if not ID_RE.match(absorbed):
                    raise SeriesError(f"{name}:{_line(item)}: absorbs: {absorbed!r} is not an id")
    return Series(upstream, tuple(entries), version)


def _patch_entry(item: yaml.Node, name: str, root: Path, check_files: bool) -> PatchEntry:
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
    _inside(root / PATCH_DIR, values["file"], f"{name}:{file_line}", "file")
    if (root / PATCH_DIR).exists():  # patches/ itself must not lead out (a symlink)
        _inside(root, f"{PATCH_DIR}/{values['file']}", f"{name}:{file_line}", "file")
    if check_files and not (root / PATCH_DIR / values["file"]).is_file():
        raise SeriesError(f"{name}:{file_line}: patch file {PATCH_DIR}/{values['file']} not found")
    for test in values.get("tests", ()):
        _inside(root, test, f"{name}:{_line(fields['tests'][1])}", "test path")
    return PatchEntry(**values)


def _inside(base: Path, rel: str, where: str, what: str) -> None:
    if not rel or rel.startswith("/") or "\\" in rel or "\0" in rel:
        raise SeriesError(f"{where}: {what} {rel!r} must be a relative path")
    parts = rel.split("/")
    if ".." in parts or ".git" in parts:
        raise SeriesError(f"{where}: {what} {rel!r} escapes the repository")
    try:
        resolved = (base / rel).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise SeriesError(f"{where}: {what} {rel!r}: {exc}") from None
    if base.resolve() not in resolved.parents and resolved != base.resolve():
        raise SeriesError(f"{where}: {what} {rel!r} escapes the repository (symlink?)")


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
def dump(series: Series) -> bytes:
    doc: dict[str, Any] = {
        "version": series.version,
        "upstream": {
            "name": series.upstream.name,
            "url": series.upstream.url,
            "branch": series.upstream.branch,
            "base": series.upstream.base,
        },
        "patches": [
            {
                "id": p.id,
                "file": p.file,
                "title": p.title,
                "kind": p.kind,
                "why": p.why,
                "upstream": p.upstream,
                "drop_when": p.drop_when,
                "absorbs": list(p.absorbs),
                "tests": list(p.tests),
            }
            for p in series.patches
        ],
    }
    text = yaml.safe_dump(
        doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100
    )
    return text.encode("utf-8")


def slugify(subject: str) -> str:
    """An id from a subject: '[1/8] fix: MLA RoPE kernel' -> 'mla-rope-kernel'."""
    text = re.sub(r"^(\[[^\]]*\]\s*)+", "", subject)
    text = re.sub(r"^[A-Za-z]+(\([^)]*\))?!?:\s*", "", text)  # conventional-commit prefix
    text = re.sub(r"\(#\d+\)", "", text)
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:48].rstrip("-") or "patch"


def patch_filename(index: int, patch_id: str) -> str:
    return f"{index:04d}-{patch_id}.patch"
