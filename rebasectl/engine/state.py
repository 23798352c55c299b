"""rebasectl's own state files under ``.rebasectl/``: the apply in progress and the tree map.

Both are JSON written atomically. Both are read as untrusted input: a stale, hand-edited or
half-written file must never make a command act on paths outside its reach, so every field is
type-checked on load, and a file that does not check out is one line (exit 2) naming it and the
command that clears it (``rebasectl abort``), never a traceback.

``ApplyState``: the series being applied (ids in order), the patches done (id, commit), those
skipped, the one stopped at and its conflicts, and two flags that close the gaps between saves:
``cleared`` (an older work tree is gone, so commits found in the tree are this apply's) and
``in_tree`` (the stopped patch's conflict reached the work tree, so ``continue`` may commit it);
and ``refused``: the refusal that ended the last run before it moved the tree (the person's
files in the way), so that ``status`` says "refused" and its way past, not "interrupted", with
the files it named (``refused_paths``), so that it says so only while they are still in the
way.

``TreeMap``: which commit of the finished work tree is which patch (and which were skipped), for
``export``.

``Baseline`` (held by both): the series the work tree was built from, as read (series.yaml's
base, its entries' ids and titles, each patch file's digest), so that export can tell a file a
person edited since from one it may rewrite. Files written before it existed have none: export
then behaves as it did and says it could not check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ..infra.errors import RebasectlError
from ..infra.faults import boundary
from ..infra.fsutil import atomic_write
from ..model.ids import Oid, is_full
from ..model.series import Series
from ..model.series_patch import SeriesPatch, file_digest
from ..model.status import Applied


class StateError(RebasectlError):
    pass


def _fail(path: Path, why: str) -> StateError:
    return StateError(f"{path}: unreadable rebasectl state ({why}); `rebasectl abort` clears it")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise _fail(path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None
    if not isinstance(data, dict):
        raise _fail(path, "not a JSON object")
    return data


T = TypeVar("T")


def tolerant(load: Callable[[Path], T | None], path: Path) -> tuple[T | None, bool]:
    """(the state, whether it was unreadable): for the commands that must go on past a bad
    state file (abort clears it; repairs and advice just do without it)."""
    try:
        return load(path), False
    except StateError:
        return None, True


def _series_root(state_file: Path) -> Path:
    """The series checkout a state file belongs to (``ROOT/.rebasectl/FILE``)."""
    return state_file.parent.parent


def _stored_tree(state_file: Path, worktree: str | Path) -> str:
    """A work tree inside the checkout is stored relative to it, so that a checkout moved
    with ``mv`` (its ``.rebasectl/`` with it) names its own tree, never the old path, where
    another checkout may live by now."""
    path = Path(worktree)
    try:
        return path.relative_to(_series_root(state_file).resolve()).as_posix()
    except ValueError:
        return str(path)


def _loaded_tree(state_file: Path, stored: str) -> Path:
    path = Path(stored)
    return path if path.is_absolute() else _series_root(state_file).resolve() / path


def _check(path: Path, data: dict[str, Any], spec: dict[str, str]) -> None:
    """Every key of ``spec`` present with its type: str, sha, bool, ids (list of str), pairs
    (list of [str, str]), commits (list of [str, sha]), objects (list of objects), str? (str
    or null)."""
    for key, kind in spec.items():
        value = data.get(key)
        ok = {
            "str": isinstance(value, str),
            "str?": value is None or isinstance(value, str),
            "sha": isinstance(value, str) and is_full(value),
            "bool": isinstance(value, bool),
            "ids": isinstance(value, list) and all(isinstance(v, str) for v in value),
            "pairs": isinstance(value, list) and all(
                isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)
                for v in value),
            "commits": isinstance(value, list) and all(
                isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) and
                isinstance(v[1], str) and is_full(v[1]) for v in value),
            "objects": isinstance(value, list) and all(isinstance(v, dict) for v in value),
        }[kind]
        if not ok:
            raise _fail(path, f"field {key!r} is not a valid {kind}")


@dataclass(frozen=True)
class Baseline:
    """What the work tree was built from, as read: series.yaml's pinned base (``pinned``), its
    entries in order as (id, title), and each patch file's digest (``model.series_patch.
    file_digest``) keyed by its name under patches/. A file on disk whose digest differs was
    edited (or deleted) by a person after the read; export refuses to write over that."""

    pinned: Oid
    entries: tuple[tuple[str, str], ...]
    files: dict[str, str]

    @classmethod
    def of(cls, pinned: Oid, loaded: Iterable[SeriesPatch]) -> Baseline:
        """The series as read, titles as series.yaml has them (a bump's: a title that was
        never its patch's subject is not an edit made while the bump ran)."""
        patches = list(loaded)
        return cls(pinned, tuple((lp.id, lp.entry.title) for lp in patches),
                   {lp.file: lp.digest for lp in patches if lp.digest})

    @classmethod
    def built(cls, pinned: Oid, loaded: Iterable[SeriesPatch],
              previous: Baseline | None) -> Baseline:
        """An apply's: the series as read, except a title series.yaml changed since the tree
        before this one was built (``previous``, the tree map's baseline) that is still not
        its patch's Subject: line. The commit carries the subject, which export writes back as
        the title, so that title is recorded as the subject: export sees the person's title as
        an edit it would lose and refuses again, where a rebuild made without changing the
        Subject: line would otherwise undo it silently. A title that only lags behind a
        Subject: line edited by hand (series.yaml unchanged) is export's to update."""
        patches = list(loaded)
        was = dict(previous.entries) if previous is not None else {}

        def title(lp: SeriesPatch) -> str:
            mine = lp.entry.title
            edited = lp.id in was and was[lp.id] != mine
            return lp.subject if edited and lp.subject != mine else mine

        return cls(pinned, tuple((lp.id, title(lp)) for lp in patches),
                   {lp.file: lp.digest for lp in patches if lp.digest})

    @classmethod
    def written(cls, series: Series, files: dict[str, bytes]) -> Baseline:
        """What an export wrote: the next export compares the files with these."""
        return cls(series.upstream.base, tuple((e.id, e.title) for e in series.patches),
                   {name: file_digest(data) for name, data in files.items()})

    def reread(self, loaded: Iterable[SeriesPatch]) -> Baseline:
        """The digests of ``loaded`` replace those read before (patches an apply goes on to
        commit from their files as read now)."""
        files = dict(self.files)
        files.update({lp.file: lp.digest for lp in loaded if lp.digest})
        return Baseline(self.pinned, self.entries, files)

    def stored(self) -> dict[str, Any]:
        """Its part of the state file (which its loader, ``from_stored``, reads back)."""
        return {"pinned": self.pinned, "entries": [list(e) for e in self.entries],
                "files": [[f, d] for f, d in sorted(self.files.items())]}

    @classmethod
    def from_stored(cls, path: Path, raw: object) -> Baseline | None:
        """None for a file written before baselines were kept (no key, or null)."""
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise _fail(path, "field 'baseline' is not an object")
        _check(path, raw, {"pinned": "sha", "entries": "pairs", "files": "pairs"})
        return cls(Oid(raw["pinned"]), tuple((i, t) for i, t in raw["entries"]),
                   {f: d for f, d in raw["files"]})


@dataclass
class ApplyState:
    base: Oid
    worktree: str
    ids: list[str]  # the whole series, in order
    done: list[list[str]] = field(default_factory=list)  # [id, commit] of applied patches
    skipped: list[str] = field(default_factory=list)
    current: str | None = None  # the patch stopped at (conflict in the work tree)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    in_tree: bool = False
    cleared: bool = True
    labels: list[str] = field(default_factory=list)  # [upstream label] of this apply
    how: list[list[str]] = field(default_factory=list)  # [id, clean|3way|empty|resolved|...]
    # files of the work tree written for a patch not committed yet (its conflict or recorded
    # resolution): what skip and a redo put back; every other change there is the person's
    written: list[str] = field(default_factory=list)
    # the refusal that ended the last run before the tree moved (its one line, the way past it
    # included); None once a later run starts: a kill from then on is an interruption
    refused: str | None = None
    # the files it named, [changed|untracked, path]: status tells a refusal that still holds
    refused_paths: list[list[str]] = field(default_factory=list)
    baseline: Baseline | None = None  # the series as read (None: a state from before baselines)
    # the digest (file_digest) of the diff the stopped patch was merged with: its file edited
    # during the stop is committed by continue with the new message; the diff is the person's
    # resolution either way (None: no stop, or a state from before it was kept)
    stop_diff: str | None = None
    # skipped patches whose lines upstream already carries: no later patch is blocked by them
    carried: list[str] = field(default_factory=list)

    _SPEC = {"base": "sha", "worktree": "str", "ids": "ids", "done": "commits", "skipped": "ids",
             "current": "str?", "conflicts": "objects", "in_tree": "bool", "cleared": "bool",
             "labels": "ids", "how": "pairs", "written": "ids", "refused": "str?",
             "refused_paths": "pairs", "stop_diff": "str?", "carried": "ids"}

    def missing(self) -> list[str]:
        """The skipped patches a later patch may be blocked by: not those whose lines upstream
        carries (a stop said so; bump calls them upstreamed, never a prerequisite)."""
        return [pid for pid in self.skipped if pid not in self.carried]

    def remaining(self) -> list[str]:
        finished = {i for i, _ in self.done} | set(self.skipped)
        return [i for i in self.ids if i not in finished]

    @property
    def tip(self) -> Oid:
        """The last commit made (each ``done`` commit is checked a full sha on load)."""
        return Oid(self.done[-1][1]) if self.done else self.base

    def position(self, pid: str) -> int:
        return self.ids.index(pid) + 1

    def record(self, pid: str, commit: str, how: Applied) -> None:
        self.done.append([pid, commit])
        self.how.append([pid, how.value])

    def reread(self, loaded: Iterable[SeriesPatch]) -> None:
        """A continue or skip read the series again: the patches not begun yet will be
        committed from these bytes, so their digests are these. The committed ones and the
        one at the stop keep the digests of the bytes they were made from."""
        if self.baseline is None:
            return
        fresh = set(self.remaining()) - {self.current}
        self.baseline = self.baseline.reread(lp for lp in loaded if lp.id in fresh)

    def stopped_at(self, lp: SeriesPatch) -> None:
        """The apply stops at ``lp``, merged with its diff as read now."""
        self.current, self.stop_diff = lp.id, file_digest(lp.diff)

    def diff_edited_at_stop(self, lp: SeriesPatch) -> bool:
        """Was ``lp``'s diff (its file as read now) changed since the stop was merged with it?
        Then the resolution in the tree answers the old diff, not this one."""
        return self.stop_diff is not None and self.stop_diff != file_digest(lp.diff)

    def committed_stop(self, lp: SeriesPatch) -> None:
        """The stopped patch committed from ``lp`` (its file as read by this continue): its
        message, author and date are the commit's, its diff was only the stop's start. When
        that diff is the one the stop was merged with, the file's bytes are what the commit
        holds, and they become its baseline (a message edited during the stop is no hand
        edit export must keep); an edited diff is not in the commit, and stays the person's."""
        if self.baseline is not None and self.stop_diff == file_digest(lp.diff):
            self.baseline = self.baseline.reread([lp])
        self.stop_diff = None

    def redone(self, lp: SeriesPatch) -> None:
        """The stopped patch never reached the work tree: it is applied again, whole, from
        ``lp`` (its file as read now), which is what its commit will hold."""
        if self.baseline is not None:
            self.baseline = self.baseline.reread([lp])
        self.current, self.stop_diff = None, None

    def refuse(self, message: str, changed: Iterable[str], untracked: Iterable[str]) -> None:
        """The run ends refused (before the tree moved): its line and the files it named."""
        self.refused = message
        self.refused_paths = [*(["changed", p] for p in changed),
                              *(["untracked", p] for p in untracked)]

    def go_on(self) -> None:
        """A run begins: the last refusal is past (the run says its own, if any)."""
        self.refused, self.refused_paths = None, []

    def how_applied(self, pid: str) -> str:
        """The word recorded for ``pid`` (as read: a state file is kept as it was written)."""
        return next((h for i, h in self.how if i == pid), Applied.ADOPTED.value)

    @classmethod
    def load(cls, path: Path) -> ApplyState | None:
        data = _read(path)
        if data is None:
            return None
        data.setdefault("how", [])
        data.setdefault("written", [])
        data.setdefault("refused", None)  # written before refusals were kept
        data.setdefault("stop_diff", None)  # written before the stop's diff was kept
        data.setdefault("refused_paths", [])  # before their files were
        data.setdefault("carried", [])  # before skipped upstreamed patches were told apart
        _check(path, data, {k: v for k, v in cls._SPEC.items()})
        state = cls(**{k: data[k] for k in cls._SPEC},
                    baseline=Baseline.from_stored(path, data.get("baseline")))
        state.base = Oid(state.base)  # checked by _check: a full sha
        state.worktree = str(_loaded_tree(path, state.worktree))
        known = set(state.ids)
        if any(pid not in known for pid, _ in state.done) or \
                any(pid not in known for pid in state.skipped) or \
                any(pid not in state.skipped for pid in state.carried) or \
                (state.current is not None and state.current not in known):
            raise _fail(path, "names a patch that is not in its series")
        named = [*state.written, *(p for _, p in state.refused_paths)]
        if any(p.startswith("/") or ".." in p.split("/") or not p for p in named):
            raise _fail(path, "names a file outside its work tree")
        if any(kind not in ("changed", "untracked") for kind, _ in state.refused_paths):
            raise _fail(path, "field 'refused_paths' is not a valid pairs")
        return state

    def save(self, path: Path) -> None:
        data = {k: getattr(self, k) for k in self._SPEC}
        data["worktree"] = _stored_tree(path, self.worktree)
        if self.baseline is not None:
            data["baseline"] = self.baseline.stored()
        atomic_write(path, json.dumps(data, indent=1).encode())
        boundary("state")


@dataclass(frozen=True)
class TreeMap:
    """Which commit of the work tree is which patch (written by apply, read by export), and the
    tip every other work tree of this checkout had when it was last applied or exported
    (``others``): a tree at its recorded tip holds nothing unexported, even after a later
    apply into another ``--worktree`` took over the map."""

    base: Oid
    worktree: Path
    commits: list[tuple[str, Oid]]  # (patch id, commit sha), in order
    skipped: list[str] = field(default_factory=list)
    others: dict[Path, str] = field(default_factory=dict)  # other work tree -> its tip
    baseline: Baseline | None = None  # what the tree was built from (None: an older map)
    dropped: list[str] = field(default_factory=list)  # commits export left out, still here

    @property
    def tip(self) -> Oid:
        return self.commits[-1][1] if self.commits else self.base

    def tip_of(self, worktree: Path) -> str | None:
        """The tip ``worktree`` had when rebasectl last wrote or exported it."""
        if worktree.resolve() == self.worktree.resolve():
            return self.tip
        return self.others.get(worktree.resolve())

    @classmethod
    def load(cls, path: Path) -> TreeMap | None:
        data = _read(path)
        if data is None:
            return None
        data.setdefault("skipped", [])
        data.setdefault("others", [])
        data.setdefault("dropped", [])
        _check(path, data, {"base": "sha", "worktree": "str", "commits": "commits",
                            "skipped": "ids", "others": "pairs", "dropped": "ids"})
        return cls(Oid(data["base"]), _loaded_tree(path, data["worktree"]),
                   [(pid, Oid(sha)) for pid, sha in data["commits"]], list(data["skipped"]),
                   {_loaded_tree(path, w): tip for w, tip in data["others"]},
                   Baseline.from_stored(path, data.get("baseline")), list(data["dropped"]))

    def save(self, path: Path) -> None:
        """Write the map, keeping the previous map's tree (when another one, still there)
        among ``others``."""
        previous, _ = tolerant(TreeMap.load, path)
        others = dict(previous.others) if previous else {}
        if previous is not None:
            others[previous.worktree.resolve()] = previous.tip
        others.update(self.others)
        mine = self.worktree.resolve()
        kept = [[_stored_tree(path, w), tip] for w, tip in sorted(others.items())
                if w != mine and w.is_dir()]
        data: dict[str, Any] = {
            "base": self.base, "worktree": _stored_tree(path, self.worktree),
            "commits": [list(c) for c in self.commits], "skipped": self.skipped, "others": kept}
        if self.baseline is not None:
            data["baseline"] = self.baseline.stored()
        if self.dropped:
            data["dropped"] = self.dropped
        atomic_write(path, json.dumps(data, indent=1).encode())


@dataclass
class Carrying:
    """A clean bump making the new work tree (``.rebasectl/carrying.json``), written after the
    old tree is gone and removed once the series is exported. A bump killed in between left a
    tree at the new upstream (whole or half checked out) under the old series.yaml, and the
    next command took its upstream commits for unexported work ("`rebasectl export` writes
    them": export then wrote them as patches). With the marker, that tree is known to be the
    bump's own: a rerun (or an apply) replaces it, and status names the bump to rerun."""

    worktree: Path
    to: Oid

    @classmethod
    def load(cls, path: Path) -> Carrying | None:
        data = _read(path)
        if data is None:
            return None
        _check(path, data, {"worktree": "str", "to": "sha"})
        return cls(_loaded_tree(path, data["worktree"]), Oid(data["to"]))

    def save(self, path: Path) -> None:
        atomic_write(path, json.dumps({"worktree": _stored_tree(path, self.worktree),
                                       "to": self.to}, indent=1).encode())

    def names(self, worktree: Path) -> bool:
        return self.worktree.resolve() == worktree.resolve()

    @staticmethod
    def remove(path: Path) -> None:
        path.unlink(missing_ok=True)
