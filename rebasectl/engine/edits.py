"""Hand edits in the series since its work tree was built: what ``export`` must not write over.

Export writes patches/ and series.yaml from the work tree's commits; the work tree wins. But a
person who fixed a typo in a patch file after ``apply`` and then exported lost that fix without a
word. Git refuses in the same spot ("Your local changes to the following files would be
overwritten"), and so does export: the tree map's baseline (``state.Baseline``: what the apply
or bump read) tells a file the person changed from one rebasectl may rewrite. A file is a hand
edit when it differs from what the tree was built from *and* from what export would write (a
file already equal to export's result loses nothing). series.yaml is compared field by field:
export carries its metadata (why, kind, tests, comments, ...) from the file as it is now, so
only what export derives from the commits can be lost: the pinned base, a title, the order, an
entry removed by hand whose commit would come back as a new patch.

``--force`` writes over them, after copying each such file under ``.rebasectl/overwritten/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..infra.errors import ExitCode, RebasectlError
from ..infra.fsutil import fresh_folder, read_regular
from ..model.ids import short
from ..model.patches import PatchError, parse
from ..model.series import PATCH_DIR, SERIES_FILE, Series
from ..model.series_patch import file_digest
from ..model.workspace import Workspace
from .state import Baseline, TreeMap

SHOWN = 5  # the files a refusal names before "and N more"


@dataclass
class Planned:
    """What an export is about to write: the series, the patch files (name -> bytes) and the
    files it deletes, against series.yaml as it is now (``current``)."""

    current: Series
    series: Series
    files: dict[str, bytes]
    removed: Sequence[str]
    edits: list[str] = field(default_factory=list)  # "patches/NAME (edited)", ...

    def paths(self) -> list[str]:
        """The files holding the edits, series.yaml once."""
        return list(dict.fromkeys(e.split(" (")[0] for e in self.edits))


def _on_disk(ws: Workspace, name: str) -> bytes | None:
    try:
        return read_regular(ws.patch_dir / name)
    except OSError:
        return None


def edited_files(ws: Workspace, baseline: Baseline, plan: Planned) -> list[str]:
    """Patch files export would write or delete that a person changed since the read. A file
    under a name the apply did not read is the person's unless its bytes are some file the
    apply read (a file renamed by hand along with its ``file:``). A file series.yaml does not
    list is not export's to write at all (``write_series`` refuses it by name)."""
    read = set(baseline.files.values())
    listed = {e.file for e in plan.current.patches}
    out: list[str] = []
    for name in sorted((set(plan.files) | set(plan.removed)) & listed):
        now = _on_disk(ws, name)
        if now == plan.files.get(name):
            continue  # already what export writes (or gone, and export deletes it)
        was = baseline.files.get(name)
        if now is None:
            if was is not None and name in plan.files:
                out.append(f"{PATCH_DIR}/{name} (deleted)")
            continue
        digest = file_digest(now)
        if digest != was and (was is not None or digest not in read):
            out.append(f"{PATCH_DIR}/{name} (edited)")
    return out


def readable(ws: Workspace, plan: Planned) -> None:
    """Each patch file edited by hand parses: one that does not (cut short, any refusal of the
    reader) is refused with its own parse error, the line ``check`` gives (exit 2). Called
    before the refusal of hand edits, whose rebuild advice cannot work on such a file (apply
    refuses it too)."""
    for edit in plan.edits:
        rel, _, how = edit.partition(" (")
        if how == "edited)" and rel.startswith(f"{PATCH_DIR}/"):
            data = _on_disk(ws, rel[len(PATCH_DIR) + 1:])
            if data is not None:
                parse(data, rel)


def edited_series(baseline: Baseline, plan: Planned) -> list[str]:
    """The fields of series.yaml export takes from the commits that a person changed since the
    read, where export would write something else."""
    now, out = plan.current, plan.series
    what: list[str] = []
    if now.upstream.base != baseline.pinned and out.upstream.base != now.upstream.base:
        what.append("base")
    was = dict(baseline.entries)
    by_id = {e.id: e for e in now.patches}
    for entry in out.patches:
        mine = by_id.get(entry.id)
        if mine is not None and entry.id in was and mine.title != was[entry.id] \
                and entry.title != mine.title:
            what.append(f"title of {entry.id}")
    common = set(was) & set(by_id) & {e.id for e in out.patches}
    before = [i for i, _ in baseline.entries if i in common]
    kept = [e.id for e in now.patches if e.id in common]
    if kept != before and [e.id for e in out.patches if e.id in common] != kept:
        what.append("order")
    gone = [i for i, _ in baseline.entries if i not in by_id]
    if gone and any(e.id not in by_id for e in out.patches):
        what.append(f"{', '.join(gone)} removed")
    return [f"{SERIES_FILE} ({w})" for w in what]


def changed_since_built(ws: Workspace, baseline: Baseline, series: Series) -> list[str]:
    """What of the series is no longer what the work tree was built from: a patch file whose
    bytes changed (edited, cut, deleted), or the entries' ids and order. Titles are left out
    (a title changes no file of the tree). What ``test`` reads before it tests the tree as
    built: a changed series is tested through a rebuild."""
    changed = [f"{PATCH_DIR}/{e.file}" for e in series.patches
               if (want := baseline.files.get(e.file)) is not None and
               ((data := _on_disk(ws, e.file)) is None or file_digest(data) != want)]
    if [e.id for e in series.patches] != [i for i, _ in baseline.entries]:
        changed.append(f"{SERIES_FILE} (its patches)")
    return changed


def find_edits(ws: Workspace, tmap: TreeMap, plan: Planned) -> bool:
    """Fill ``plan.edits``; False when the tree map has no baseline (written by an older
    rebasectl: nothing to compare with, export goes on as it did)."""
    if tmap.baseline is None:
        return False
    plan.edits = edited_files(ws, tmap.baseline, plan) + edited_series(tmap.baseline, plan)
    return True


class Rebuild(Enum):
    """What ``rebasectl apply`` would make of the tree from the edited series."""

    SAME = "same"  # every file export writes is what the apply read: the same tree again
    REDONE = "redone"  # the apply's own work (resolutions, another base) redone: nothing lost
    MOVED = "moved"  # HEAD left the recorded tip: commits or amends a rebuild would lose
    UNREADABLE = "unreadable"  # a listed file deleted: apply cannot read the series


def rebuildable(ws: Workspace, baseline: Baseline, at_tip: bool, plan: Planned) -> Rebuild:
    """What ``rebasectl apply`` would rebuild from the edited series. Only a tree at the tip
    rebasectl recorded (``at_tip``: apply refuses otherwise) holds nothing but rebasectl's own
    work: its commits were applied from the files, merged onto the tree's base, or resolved
    at a stop, and every resolution is recorded, so a rebuild replays it (``REDONE``) where
    the files it resolved are unchanged. Off the tip the tree has commits or amends of the
    person's that only export would save. At the tip, a patch series.yaml no longer lists is
    one the apply made from an entry the person removed: a rebuild leaves it out, as the
    person meant."""
    if any(e.endswith(" (deleted)") for e in plan.edits):
        return Rebuild.UNREADABLE
    if not at_tip or plan.removed:
        return Rebuild.MOVED  # (removed: files of entries this export drops or folds)
    listed = {e.file for e in plan.current.patches}
    for name, data in plan.files.items():
        if name in listed and data != _on_disk(ws, name) and \
                file_digest(data) != baseline.files.get(name):
            return Rebuild.REDONE
    return Rebuild.SAME


class HandEdits(RebasectlError):
    """Export refused to write over hand edits (exit 1); ``edits`` names them."""

    def __init__(self, message: str, edits: list[str]) -> None:
        super().__init__(message, ExitCode.CONFLICT)
        self.edits = edits


def _shown(edits: list[str]) -> str:
    more = len(edits) - SHOWN
    return ", ".join(edits[:SHOWN] + ([f"and {more} more"] if more > 0 else []))


def refusal(ws: Workspace, tmap: TreeMap, plan: Planned, rebuild: Rebuild) -> HandEdits:
    """One line: the edits, and the ways out that work (each tested, followed literally).
    Where the tree holds work of its own (``Rebuild.MOVED``), no rebuild can keep both:
    ``--force`` takes the tree's and keeps the person's copy, to merge back and rebuild from.
    A title edit needs its patch's Subject: line to say it too (the commit's subject is what
    export writes as the title): that step is named first, by file."""
    apply = _apply_command(ws, tmap, plan)
    subjects = _subject_steps(ws, plan)
    force = "`rebasectl export --force`"
    if rebuild in (Rebuild.SAME, Rebuild.REDONE):
        first = f"first set the Subject: line of {subjects} to its new title, then " \
            if subjects else ""
        ways = (f"keep them: {first}`{apply}` rebuilds the work tree from them"
                f"{_redo_words(tmap, rebuild)}, then `rebasectl export`; or {force} writes "
                "over them (yours kept in .rebasectl/overwritten/)")
    else:
        why = ("a rebuild cannot read the series while a patch file it lists is deleted"
               if rebuild is Rebuild.UNREADABLE else
               "the work tree holds commits or amends of its own since rebasectl built it "
               "(or drops entries), which a rebuild from the series would lose")
        also = f" and set the Subject: line of {subjects} to its new title" if subjects else ""
        ways = (f"{why}: {force} writes the tree's and keeps yours in "
                f".rebasectl/overwritten/; merge your change back{also}, then `{apply}` "
                f"rebuilds the work tree from the series{_skip_words(tmap)}")
    return HandEdits(
        f"export would write over what was changed by hand since the work tree was built: "
        f"{_shown(plan.edits)}; nothing written; {ways}", plan.edits)


def _redo_words(tmap: TreeMap, rebuild: Rebuild) -> str:
    """What a rebuild does again by itself and what it leaves to the person: the resolutions
    rebasectl recorded are replayed (where an edit changed what one resolved, it stops for it
    to be resolved again), and a patch skipped before stops again, to be skipped again."""
    words = ""
    if rebuild is Rebuild.REDONE:
        words = (" (the work tree's patches differ from their files by what the apply did: "
                 "resolved conflicts or another base; the rebuild replays the resolutions "
                 "rebasectl recorded and stops only where an edit changed what one resolved)")
    return words + _skip_words(tmap)


def _skip_words(tmap: TreeMap) -> str:
    """A patch skipped when the tree was built is applied again by a rebuild: where it still
    conflicts, the rebuild stops there, to be skipped again."""
    if not tmap.skipped:
        return ""
    return (f" (it stops again at {', '.join(tmap.skipped)}, skipped before, where it still "
            "conflicts: `rebasectl skip`)")


def _subject_steps(ws: Workspace, plan: Planned) -> str:
    """The patch files whose Subject: line is not yet the title series.yaml now gives them,
    for titles edited by hand ("" when none: the person changed both)."""
    edited = {e[len(f"{SERIES_FILE} (title of "):-1] for e in plan.edits
              if e.startswith(f"{SERIES_FILE} (title of ")}
    files = []
    for entry in plan.current.patches:
        data = _on_disk(ws, entry.file) if entry.id in edited else None
        if data is None:
            continue
        try:
            subject = parse(data, entry.file).subject
        except PatchError:
            continue  # (refused by ``readable`` when export reaches it)
        if subject != entry.title:
            files.append(f"{PATCH_DIR}/{entry.file}")
    return ", ".join(files)


def during_bump(refused: HandEdits, rerun: str) -> HandEdits:
    """A bump reads the series once and exports what it carried at its end: an edit made in
    between is refused the same way, and the way out is the bump again, which carries the
    series as it is now (its half-made tree is its own to replace)."""
    return HandEdits(f"the series was changed by hand while this bump ran: "
                     f"{_shown(refused.edits)}; nothing written; `{rerun}` carries it as it "
                     "is now, the changes included", refused.edits)


def _apply_command(ws: Workspace, tmap: TreeMap, plan: Planned) -> str:
    """``rebasectl apply`` onto the tree's own base and into its own folder (a base edited by
    hand in series.yaml is the base the person wants)."""
    words = ["rebasectl apply"]
    if tmap.base != plan.current.upstream.base and f"{SERIES_FILE} (base)" not in plan.edits:
        words.append(f"--base {short(tmap.base)}")
    if tmap.worktree.resolve() != ws.default_tree.resolve():
        words.append(f"--worktree {tmap.worktree}")
    return " ".join(words)


def keep_copies(ws: Workspace, plan: Planned) -> Path | None:
    """``--force``: each file it writes over, copied first to a folder of its own under
    ``.rebasectl/overwritten/`` (patches/NAME, series.yaml), which is returned."""
    paths = [p for p in plan.paths() if (ws.root / p).is_file()]
    if not paths:
        return None
    dest = fresh_folder(ws.overwritten)
    for rel in paths:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ws.root / rel, dest / rel)
    return dest
