"""An apply in progress: materialise into a work tree, stop at a conflict the way git does, and go
on from there.

At a failing patch the work tree holds what ``git am -3`` would leave: HEAD at the last good
commit, every file that merges applied and staged, each conflicting file with markers
(``upstream <sha>`` / ``patch <id>``) and unmerged index entries — modify/delete and delete/modify
included, so ``git status`` shows them. rerere is on: a conflict resolved once (here or at an
earlier bump) is resolved again from ``.rebasectl/upstream.git/rr-cache``; when that resolves
every file of a patch, the patch is committed and the apply goes on, saying so.

``continue`` commits the resolution: it refuses unresolved paths, conflict markers, an empty
result for a patch that had content (``skip`` drops it; ``--allow-empty`` keeps it) and a HEAD
the user moved (a ``git commit`` made while resolving is not taken for the patch); it commits what
the patch touched plus what the user ``git add``-ed, never untracked files; an unstaged edit to
any other file stays unstaged in the work tree, as ``git am --continue`` leaves it. ``skip``
records the patch as skipped (the series entry stays; export keeps it) and puts back only the
files the stop wrote (``ApplyState.written``), keeping a copy of any the person edited after the
stop. Before the tree moves on, a file with uncommitted changes that the move or the next stop
would write, and an untracked file where one would be written, is a refusal naming it, with
the way past it (see ``in_the_way_message``).
``abort`` (engine/abort.py) removes the work tree (only a work tree registered in rebasectl's
mirror) and the state, and puts back the tree the apply replaced.

State is saved before every step that changes the work tree (``state.ApplyState``), so a crash or
Ctrl-C anywhere leaves a state that ``continue`` or a rerun resumes: commits of ours that reached
the work tree after the last save are recognised by their patch's message and author and adopted;
a missing or half-made work tree is made again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ..git import InTheWay, Repo, TreeStatus, Worktree
from ..git.runner import Started
from ..infra.errors import ConflictError, ExitCode, RebasectlError
from ..infra.faults import boundary
from ..infra.fsutil import write_confined
from ..infra.progress import Counted
from ..model import diffs
from ..model.dependencies import SeriesLines
from ..model.ids import Oid
from ..model.series import load
from ..model.series_patch import AboutPatch, SeriesPatch
from ..model.status import Applied
from ..model.workspace import Workspace
from .abort import copy_edited, edited_files
from .attribution import RegionCulprits, UpstreamRange, attribute, blockers
from .carried import Carried, CarriedLines
from .conflicts import Engine, FileConflict, Labels, Merge, engine_for
from .exchange import load_patches
from .holdups import head_moved, stop_moved, unregistered
from .materialize import Materializer, Step, commit_patch, identity_of
from .resolutions import Memory
from .serialize import file_conflict
from .state import ApplyState, Baseline, TreeMap, tolerant
from .worktrees import check_room, checkout, clear, forget_half_made, kept_folder, registered

Notify = Callable[[str], None]


class Result(str, Enum):
    CLEAN = "clean"
    CONFLICT = "conflict"


@dataclass
class Stop(AboutPatch):
    """The patch an apply stopped at (held, not copied), and its conflicts as they are in the
    work tree."""

    index: int
    total: int
    patch: SeriesPatch
    conflicts: list[FileConflict]
    regions: list[RegionCulprits] = field(default_factory=list)  # why, region by region
    blocked_by: list[str] = field(default_factory=list)  # skipped earlier patches it needs
    upstream: Carried | None = None  # the commit of pinned..base that carries it already

    def why(self, region: object) -> RegionCulprits | None:
        return next((rc for rc in self.regions if rc.region is region), None)


@dataclass
class ApplyOutcome:
    base: Oid
    worktree: Path
    tip: Oid
    total: int
    applied: list[tuple[str, str]] = field(default_factory=list)  # (id, how) in order
    skipped: list[str] = field(default_factory=list)
    stop: Stop | None = None
    proposals: list[dict[str, Any]] | None = None  # apply --propose: the stop's proposals

    @property
    def result(self) -> Result:
        return Result.CONFLICT if self.stop else Result.CLEAN

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.CONFLICT if self.stop else ExitCode.OK


# -- the session -----------------------------------------------------------------------------------
class Session:
    """One apply in progress in workspace ``ws`` over the mirror ``repo``."""

    def __init__(self, ws: Workspace, repo: Repo, notify: Notify | None = None) -> None:
        self.ws = ws
        self.repo = repo
        self.notify = notify or (lambda text: None)
        self.memory = Memory(ws.resolutions)
        self.settled: list[str] = []  # what this command committed or skipped at a stop, said

    def load(self) -> ApplyState | None:
        return ApplyState.load(self.ws.apply_state)

    def require(self) -> ApplyState:
        state = self.load()
        if state is None:
            raise RebasectlError("no apply in progress (start one with `rebasectl apply`)")
        return state

    def save(self, state: ApplyState) -> None:
        self.ws.ensure_state_dir()
        state.save(self.ws.apply_state)

    def patches(self, state: ApplyState) -> dict[str, SeriesPatch]:
        series = load(self.ws.root)
        if [p.id for p in series.patches] != state.ids:
            raise RebasectlError(series_changed(state, [p.id for p in series.patches]))
        return {lp.id: lp for lp in load_patches(self.ws, series)}

    def engine(self, state: ApplyState) -> Engine:
        """On a newer upstream than the series' base, one that names the upstream commits that
        deleted or moved files (the same explanations bump gives)."""
        pinned = load(self.ws.root, check_files=False).upstream.base
        if pinned != state.base and self.repo.resolve(pinned) and \
                self.repo.history.is_ancestor(pinned, state.base):
            return engine_for(self.repo, pinned, state.base)
        return Engine(self.repo)

    def labels(self, state: ApplyState) -> Callable[[str], Labels]:
        upstream = state.labels[0] if state.labels else f"upstream {state.base.short()}"
        return lambda pid: Labels(upstream, f"patch {pid}")

    # -- start / resume ------------------------------------------------------------------------
    def start(self, base: Oid, worktree: Path, loaded: list[SeriesPatch] | None = None,
              pinned: Oid | None = None) -> ApplyOutcome:
        """A new apply onto ``base`` into ``worktree``; ``loaded``: the series' patches when the
        caller has read them already (a long series is held once, not twice), ``pinned`` the
        base its series.yaml names. Both go into the state's baseline, which export checks the
        files against before it writes over them."""
        previous = self.load()
        if previous is not None:
            if previous.current is None and previous.base == base and \
                    previous.worktree == str(worktree):
                return self.resume()  # the same apply, interrupted: a rerun finishes it
            raise RebasectlError("an apply is in progress: `rebasectl continue`, `skip` or "
                                 "`abort` it")
        if loaded is None or pinned is None:
            series = load(self.ws.root)
            loaded, pinned = load_patches(self.ws, series), series.upstream.base
        check_room(self.ws, worktree)
        before, _ = tolerant(TreeMap.load, self.ws.tree_map)
        state = ApplyState(base, str(worktree), [lp.id for lp in loaded], cleared=False,
                           labels=[f"upstream {base.short()}"],
                           baseline=Baseline.built(pinned, loaded,
                                                   before.baseline if before else None))
        self.save(state)  # from here on an interruption is finished by `continue` or a rerun
        clear(self.ws, worktree)
        forget_half_made(self.ws, worktree)
        state.cleared = True
        self.save(state)
        # the base checked out while the patches are computed (a Megatron checkout takes as
        # long as the whole materialiser); the tree then moves to the tip, changed files only
        pending = self.repo.start_worktree(worktree, base)
        return self.run(state, {lp.id: lp for lp in loaded}, pending)

    def resume(self, *, allow_empty: bool = False) -> ApplyOutcome:
        state = self.require()
        patches = self.patches(state)
        state.reread(patches.values())
        tree = self.reconcile(state, patches)
        if tree is not None:
            # before anything changes: nothing said began
            guard_tree(tree, state, "continue", self.ws.mirror)
            self._left_branch(tree)
        state.go_on()  # this run goes past the last refusal or says its own (saved next)
        if state.current is not None:
            if tree is None or not state.in_tree:
                state.redone(patches[state.current])  # the conflict never reached the tree
            else:
                self.commit_resolution(state, tree, patches[state.current], allow_empty)
        return self.run(state, patches)

    def _left_branch(self, tree: Worktree) -> None:
        """A branch the person checked out in the tree stays where it is: the apply goes on
        with HEAD detached (rebasectl's tree is kept so), which is said, with the command that
        moves the branch afterwards (hostile9 F10: it was left behind without a word)."""
        branch = tree.checked_out_branch()
        head = tree.head() if branch else None
        if branch and head:
            self.notify(f"HEAD was on your branch {branch}: the apply goes on with HEAD detached "
                        f"and {branch} stays at {head.short()} (`git -C {tree.path} branch -f "
                        f"{branch} HEAD` moves it once the apply is done)")

    def reconcile(self, state: ApplyState, patches: dict[str, SeriesPatch]) -> Worktree | None:
        """Adopt commits of ours that reached the work tree after the last save; None when the
        work tree is gone."""
        worktree = Path(state.worktree)
        if not state.cleared:  # interrupted before the old work tree went: its commits are not ours
            clear(self.ws, worktree)
            state.cleared = True
            self.save(state)
        tree = Worktree(worktree)
        if not tree.exists or not registered(self.ws, worktree):
            return None
        found = self.unrecorded(state, tree, patches)
        for pid, sha in found:
            state.record(pid, sha, Applied.RESOLVED if state.current == pid else Applied.ADOPTED)
            if state.current == pid:
                state.committed_stop(patches[pid])
                state.current, state.in_tree, state.written = None, False, []
            self.notify(f"{state.position(pid)}/{len(state.ids)} {pid}: committed "
                        f"{sha.short()} before the last run was interrupted; recorded now")
        if found:
            self.save(state)
        return tree

    def unrecorded(self, state: ApplyState, tree: Worktree,
                   patches: dict[str, SeriesPatch]) -> list[tuple[str, Oid]]:
        """Commits of ours on the work tree's HEAD after the state's tip (made, then the run
        was interrupted before the state said so): (patch id, commit), in order. A commit the
        person made ends the list (continue's HEAD guard speaks for it)."""
        head = tree.head()
        if not head or head == state.tip or not self.repo.history.is_ancestor(state.tip, head):
            return []
        extra = self.repo.history.rev_list([f"{state.tip}..{head}"], first_parent=True)
        found = []
        for pid, sha in zip(state.remaining(), extra):
            if not _made_by_us(self.repo, sha, patches[pid]):
                break
            found.append((pid, Oid(sha)))
        return found

    # -- the loop ------------------------------------------------------------------------------
    def run(self, state: ApplyState, patches: dict[str, SeriesPatch],
            pending: Started | None = None) -> ApplyOutcome:
        """Apply the remaining patches in memory, move the work tree there, stop at a conflict
        (after rerere had its say). ``pending``: the work tree's checkout, still running."""
        while True:
            try:
                stopped = self._materialise(state, patches)
            finally:
                if pending is not None:
                    pending.wait()
                    pending = None
            seen = self._discard_leftovers(state)
            self._check_in_the_way(state, stopped, seen)
            tree = checkout(self.ws, self.repo, Path(state.worktree), state.tip)
            boundary("worktree")
            if stopped is None:
                return self._finish(state, patches)
            if self._replay(state, tree, patches[stopped.id]):
                continue
            conflicts = self._write_conflict(state, tree, patches[stopped.id], stopped)
            if conflicts:
                return self._outcome(state, patches, stopped, conflicts)
            self.notify(f"{stopped.id}: every conflict resolved by a recorded resolution "
                        "(rerere); committed")
            self.commit_resolution(state, tree, patches[stopped.id], allow_empty=False,
                                   how=Applied.RERERE)

    def _discard_leftovers(self, state: ApplyState) -> TreeStatus | None:
        """The files this apply wrote for a patch it has moved past (a skip, or a redo after an
        interruption) and any unmerged entry go back to HEAD. Every other change in the work
        tree is the person's and stays, as ``git am --skip`` and ``--continue`` leave it.
        Returns the status it read when it changed nothing (still the tree's status: the
        check that follows reads it instead of asking git again), else None."""
        tree = Worktree(Path(state.worktree))
        if not tree.exists or tree.head() is None:
            return None
        status = tree.status(ignored=True)  # the in-the-way check reads the ignored files too
        leftovers = [*state.written, *status.unmerged]
        if not leftovers:
            return status
        tree.rerere_forget_in_progress()
        tree.restore(leftovers)
        if state.written:
            state.written = []
            self.save(state)
        return None

    def _check_in_the_way(self, state: ApplyState, stopped: Step | None,
                          status: TreeStatus | None) -> None:
        """Refuse, before the work tree moves, when the person's files sit where the move to
        the new tip or the next stop's conflict would write (git refuses the same way); the
        state is saved with the refusal, so ``status`` says the run was refused and how past
        (not "interrupted": nothing was), and ``continue`` goes on once they are out of the
        way. The stop is announced only past this check: a refused run wrote no conflict."""
        tree = Worktree(Path(state.worktree))
        if status is not None or (tree.exists and tree.head() is not None):
            done = "".join(f"{what}; " for what in self.settled)
            moved = head_moved(tree, state)  # moved while this run worked: still not reset
            if moved:
                raise ConflictError(done + moved)
            also = [*stopped.patch.paths(), *stopped.followed.values()] if stopped else []
            blocked = tree.in_the_way(state.tip, also, status)
            if blocked:
                state.refuse(in_the_way_message(tree.path, blocked), blocked.changed,
                             blocked.untracked)
                self.save(state)
                raise ConflictError(done + in_the_way_message(tree.path, blocked))
        if stopped is not None:
            self.notify(_announcement(stopped, len(state.ids)))

    def _materialise(self, state: ApplyState, patches: dict[str, SeriesPatch]) -> Step | None:
        """The remaining patches committed in memory up to the first conflict; each clean one
        is announced as made, the stop later (``_check_in_the_way``)."""
        remaining = [i for i in state.remaining() if i != state.current]
        total = len(state.ids)

        def announce(step: Step) -> None:
            if step.status is not Applied.CONFLICT:
                self.notify(_announcement(step, total))

        mat = Materializer(self.repo, self.labels(state), self.engine(state)).run(
            state.tip, [patches[i] for i in remaining],
            start_index=total - len(remaining) + 1, on_step=announce)
        for step in mat.steps:
            if step.commit:
                state.record(step.id, step.commit, step.status)
        stopped = mat.first_conflict()
        state.current = None
        if stopped is not None:
            state.stopped_at(patches[stopped.id])
        state.conflicts = [file_conflict(c) for c in stopped.conflicts] if stopped else []
        state.in_tree = False
        self.save(state)
        return stopped

    def _replay(self, state: ApplyState, tree: Worktree, lp: SeriesPatch) -> bool:
        """A resolution recorded earlier for this patch on this very state: applied and
        committed, and the apply goes on."""
        recorded = self.memory.find_at(self.repo, lp.patch.diff, state.tip)
        if recorded is None:
            return False
        state.written = list(diffs.parse(recorded).paths())
        self.save(state)
        if not tree.apply_index(recorded):
            return False
        state.in_tree = True
        self.save(state)
        self.notify(f"{lp.id}: resolved as recorded at an earlier apply")
        self.commit_resolution(state, tree, lp, allow_empty=False, how=Applied.RECORDED)
        return True

    def _write_conflict(self, state: ApplyState, tree: Worktree, lp: SeriesPatch,
                        stopped: Step) -> list[FileConflict]:
        """The stopped patch merged into the work tree as git leaves it; returns the conflicts
        rerere did not resolve. The merge the materialiser made on the same tree is installed
        as it left it (``Step.staged``; made again only when it was not kept). It goes into a
        copy of the work tree's index, which replaces it only once the state names every path
        it touches: a kill during the merge leaves the index as it was, and one after it
        leaves paths a redo puts back."""
        live = tree.index()
        with live.staged_copy() as index:
            if stopped.staged is not None:
                index.update(stopped.staged)
                merge = Merge(list(stopped.conflicts), dict(stopped.followed))
            else:  # the materialiser stopped here: no whole-patch try
                merge = self.engine(state).merge(index, lp.patch, self.labels(state)(lp.id),
                                                 tried=True)
            boundary("merged")
            # a renamed file the merge followed is written at its new path too: staged only,
            # the work tree kept upstream's copy and `git add -A` dropped the patch's change
            paths = [*lp.patch.paths(), *merge.followed.values()]
            state.written = list(dict.fromkeys([*paths, *(c.path for c in merge.conflicts)]))
            self.save(state)  # saved first: a kill while writing leaves files a redo puts back
            index.install(live)
        write_files(tree, paths, merge.conflicts)
        resolved = set(tree.rerere()) if merge.conflicts else set()
        state.conflicts = [file_conflict(c) for c in merge.conflicts]
        state.in_tree = True
        self.save(state)
        return [c for c in merge.conflicts if c.path not in resolved]

    def commit_resolution(self, state: ApplyState, tree: Worktree, lp: SeriesPatch,
                          allow_empty: bool, how: Applied = Applied.RESOLVED) -> None:
        assert state.current is not None
        guard_head(tree, state)
        status = tree.status()
        if status.unmerged:
            raise ConflictError(unresolved_message(state, status.unmerged))
        tree.stage([p for p in lp.patch.paths() if (tree.path / p).exists() or
                    p in tree.index().entries([p])])
        left = tree.staged_markers(state.tip)
        if left:
            raise ConflictError(f"conflict markers left at {left}: edit them away, `git add`, "
                                "then `rebasectl continue`")
        new_tree = tree.index().write_tree()
        if not allow_empty and not lp.patch.is_empty and \
                new_tree == self.repo.tree_of(state.tip):
            raise ConflictError(f"{lp.id}: the resolution leaves nothing of the patch "
                                 "(an empty commit): `rebasectl skip` drops it from this apply, "
                                 "or `rebasectl continue --allow-empty` keeps it empty")
        rerere = tree.rerere_ids()
        tree.rerere()  # records the resolution for the next time this conflict comes
        commit = commit_patch(self.repo, new_tree, state.tip, lp.patch)
        if state.diff_edited_at_stop(lp):  # recorded under the new diff, a rebuild would
            # replay it for the edited patch, and the edit would be gone unseen
            self.notify(f"{lp.id}: its diff changed in the patch file after the stop was "
                        "merged: the commit holds your resolution of the diff as it was, the "
                        "edit is not in it (so no resolution is recorded for it)")
        else:
            self._remember(state.tip, commit, lp, rerere)
        tree.set_head(commit)
        boundary("resolved")
        state.record(state.current, commit, how)
        self.settled.append(f"{state.position(state.current)}/{len(state.ids)} "
                            f"{state.current}: committed {commit.short()} ({how})")
        self.notify(self.settled[-1])
        state.committed_stop(lp)
        state.current, state.conflicts, state.in_tree, state.written = None, [], False, []
        self.save(state)

    def _remember(self, parent: str, commit: str, lp: SeriesPatch, rerere: list[str]) -> None:
        """The resolution, whole, for the next time this patch meets this state."""
        resolved = self.repo.diff(parent, commit)
        paths = list(dict.fromkeys([*lp.patch.paths(), *diffs.parse(resolved).paths()]))
        found = self.repo.entries_at(parent, paths)
        state = {p: (found[p].blob if p in found else None) for p in paths}
        self.memory.record(lp.patch.diff, state, resolved, patch_id=lp.id, rerere=rerere)

    def _finish(self, state: ApplyState, patches: dict[str, SeriesPatch]) -> ApplyOutcome:
        TreeMap(state.base, Path(state.worktree), [(i, Oid(c)) for i, c in state.done],
                list(state.skipped), baseline=state.baseline).save(self.ws.tree_map)
        self.ws.apply_state.unlink(missing_ok=True)
        return self._outcome(state, patches, None, [])

    def _outcome(self, state: ApplyState, patches: dict[str, SeriesPatch], stopped: Step | None,
                 conflicts: list[FileConflict]) -> ApplyOutcome:
        out = ApplyOutcome(state.base, Path(state.worktree), state.tip, len(state.ids),
                           [(i, state.how_applied(i)) for i, _ in state.done],
                           list(state.skipped))
        if stopped is not None:
            lp = patches[stopped.id]
            out.stop = Stop(stopped.index, len(state.ids), lp, conflicts)
            out.stop.regions, out.stop.blocked_by = self.explain(state, patches, stopped.id,
                                                                 conflicts)
            if not out.stop.blocked_by:
                out.stop.upstream = self._carrier(state, lp)
        return out

    def _carrier(self, state: ApplyState, lp: SeriesPatch) -> Carried | None:
        """The commit of the apply's base, not of the series' pinned base, that carries the
        stopped patch's change (bump would call it upstreamed): lines the patch adds that the
        pinned base lacks and the apply's base has (the pinned base need not be an ancestor:
        a series imported from a fork's branch)."""
        pinned = load(self.ws.root, check_files=False).upstream.base
        if pinned == state.base or not self.repo.resolve(pinned):
            return None
        found = CarriedLines(UpstreamRange(self.repo, Oid(pinned), state.base)).patch(lp.patch)
        return found if found.commit is not None else None

    def _since_pinned(self, state: ApplyState) -> UpstreamRange | None:
        """The series' pinned base .. the apply's base, when the apply is onto a newer upstream
        (nothing of upstream's to explain a stop by otherwise)."""
        pinned = load(self.ws.root, check_files=False).upstream.base
        if pinned != state.base and self.repo.resolve(pinned) and \
                self.repo.history.is_ancestor(pinned, state.base):
            return UpstreamRange(self.repo, pinned, state.base)
        return None

    def explain(self, state: ApplyState, patches: dict[str, SeriesPatch], pid: str,
                conflicts: list[FileConflict]) -> tuple[list[RegionCulprits], list[str]]:
        """Why the stopped patch conflicts, region by region, as bump says it: the upstream
        commits that changed each region's lines (on a newer upstream than the series' base),
        or the skipped earlier patch whose lines it needs (it is blocked by that one)."""
        stack = [patches[i] for i in state.ids]
        pos = state.ids.index(pid)
        deps = SeriesLines(stack[:pos + 1])
        gone = state.missing()
        rng = self._since_pinned(state)
        if rng is not None:
            att = attribute(rng, stack, pos, conflicts, gone, deps, breaks=False)
            return att.regions, att.blocked_by
        return [], blockers(deps, pos, conflicts, gone)

    # -- skip / abort --------------------------------------------------------------------------
    def skip(self) -> ApplyOutcome:
        state = self.require()
        patches = self.patches(state)
        state.reread(patches.values())
        tree = self.reconcile(state, patches)
        if state.current is None:
            raise RebasectlError("no patch is stopped at a conflict: nothing to skip "
                                 "(`rebasectl continue` goes on with the apply in progress)")
        if tree is not None:
            guard_tree(tree, state, "skip", self.ws.mirror)  # before the skip is recorded
            self._left_branch(tree)
        if not state.in_tree:  # a refusal or a kill came before the stop was written
            at = f"{state.position(state.current)}/{len(state.ids)} {state.current}"
            raise ConflictError(f"{at}: its conflict was never shown (the last run ended "
                                "before writing it): `rebasectl continue` writes it, or says "
                                "what is in its way; then `rebasectl skip` leaves it out")
        state.go_on()  # as in resume: the next save says this run began
        skipped = state.current
        state.written = list(dict.fromkeys([*state.written, *patches[skipped].patch.paths()]))
        kept = self._keep_resolution(state, tree) if tree is not None else None
        state.skipped.append(skipped)
        carrier = self._carrier(state, patches[skipped])
        if carrier is not None and carrier.commit is not None:
            state.carried.append(skipped)  # upstream has its lines: it blocks nothing after it
        state.current, state.conflicts, state.in_tree, state.stop_diff = None, [], False, None
        self.save(state)  # the stop's files go back to HEAD in run(), the person's other edits stay
        self.settled.append(f"{state.position(skipped)}/{len(state.ids)} {skipped}: skipped")
        self.notify(f"{self.settled[-1]} (the series entry stays; `rebasectl export` keeps it)")
        if kept is not None:
            self.notify(f"kept {kept[1]} file(s) of {skipped} edited since the stop (copies in "
                        f"edited/) in {kept[0]}")
        return self.run(state, patches)

    def _keep_resolution(self, state: ApplyState, tree: Worktree) -> tuple[Path, int] | None:
        """Copies of the stop's files the person edited after it (a resolution in progress,
        which skip puts back to HEAD), kept as abort keeps them: (folder, count)."""
        status = tree.status()
        ours = [p for p in status.unmerged + status.changed if p in state.written]
        edited = edited_files(tree.path, ours, self.ws.apply_state.stat().st_mtime_ns, ours)
        if not edited:
            return None
        dest = kept_folder(self.ws)
        copy_edited(tree.path, edited, dest)
        return dest, len(edited)


def _announcement(step: Step, total: int) -> Counted:
    return Counted(f"Applying ({step.index}/{total}) {step.id}: {step.status.value}"
                   f"{followed_words(step.followed)}", step.index, total)


def followed_words(followed: dict[str, str]) -> str:
    """`` (followed upstream's rename a -> b)``, as ``git am -3`` would have carried it."""
    return "".join(f" (followed upstream's rename {a} -> {b})" for a, b in followed.items())


def _made_by_us(repo: Repo, sha: str, lp: SeriesPatch) -> bool:
    """A commit rebasectl made for ``lp``: its message, and author = committer = the patch's."""
    info = repo.commit(sha)
    ident = identity_of(lp.patch)
    return info.message == lp.patch.message and info.author == ident and \
        info.committer_date == ident.date


def guard_head(tree: Worktree, state: ApplyState) -> None:
    """Commit only on the tip the patch stopped at (``holdups.stop_moved`` says why)."""
    head = tree.head()
    if head != state.tip:
        raise ConflictError(stop_moved(tree, state, head, "continue"))


def guard_tree(tree: Worktree, state: ApplyState, command: str, mirror: Path) -> None:
    """Before ``command`` changes anything: the work tree still registered in ``mirror``
    (``holdups.unregistered``), its HEAD where this apply left it (``holdups.head_moved``),
    never reset from anywhere else."""
    moved = unregistered(tree, mirror, state) or head_moved(tree, state, command)
    if moved:
        raise ConflictError(moved)


SHOWN_IDS = 12  # the patch ids a message lists before "..."
SHOWN_FILES = 5  # the files a refusal lists before "..."


def series_changed(state: ApplyState, now: list[str]) -> str:
    """series.yaml no longer lists what this apply started with. Putting it back keeps
    everything, a resolution staged at a stop included; ``abort`` would throw that away, so it
    is the second way out, said as such."""
    added = [i for i in now if i not in state.ids]
    removed = [i for i in state.ids if i not in now]
    what = [f"added {', '.join(added)}"] if added else []
    what += [f"removed {', '.join(removed)}"] if removed else []
    shown = state.ids if len(state.ids) <= SHOWN_IDS else [*state.ids[:SHOWN_IDS], "..."]
    keeps = "the resolution you staged" if state.current else "what is applied"
    return (f"series.yaml changed since this apply started ({'; '.join(what) or 'reordered'}): "
            f"put it back as it was (these patches, in this order: {', '.join(shown)}) and "
            f"`rebasectl continue` keeps {keeps}; change series.yaml once the apply is done "
            "(`rebasectl abort` then apply again also works, but throws "
            f"{'that resolution' if state.current else 'this apply'} away)")


def in_the_way_message(tree: Path, found: InTheWay) -> str:
    """The person's files stand where the next patches write: kept, and the way past them that
    works through any later stop. An untracked file is moved aside (a stash could not put it
    back over the patch's own file); changes are stashed and popped once the apply is done (a
    pop at a later stop fails on its unmerged paths: "needs merge"); status says while a stash
    waits."""
    what, steps = [], []
    if found.untracked:
        what.append(f"untracked {_shown(found.untracked)}")
        steps += [f"`mv {tree / p} {tree / p}.mine`" for p in found.untracked[:SHOWN_FILES]]
    if found.changed:
        what.append(f"your uncommitted changes to {_shown(found.changed)}")
        steps.append(f"`git -C {tree} stash`")
    more = " (and the others likewise)" if len(found.untracked) > SHOWN_FILES else ""
    text = (f"{tree}: {' and '.join(what)} in the way of the next patches (left as they are): "
            f"{', '.join(steps)}{more}, then `rebasectl continue` (resolving any stop as "
            "usual)")
    if found.changed:
        text += (f"; once the apply is done, `git -C {tree} stash pop` brings the changes back "
                 "(status reminds you)")
    return text


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:SHOWN_FILES]) + (" ..." if len(paths) > SHOWN_FILES else "")


def unresolved_message(state: ApplyState, paths: list[str]) -> str:
    kinds = {str(c.get("path")): str(c.get("kind")) for c in state.conflicts}
    shown = ", ".join(f"{p} ({kinds.get(p, 'conflict')})" for p in paths)
    return (f"still unresolved: {shown}: edit (or `git rm` a file you drop), `git add`, then "
            "`rebasectl continue`; or `rebasectl skip`")


def write_files(tree: Worktree, paths: list[str], conflicts: list[FileConflict]) -> None:
    """The files of a merge on disk: merged ones from the index, conflicted ones with their
    content (markers, or the patched file of a modify/delete), removed ones deleted."""
    by_path = {c.path: c for c in conflicts}
    staged = tree.index().entries(paths)
    tree.write_from_index([p for p in paths if p in staged and p not in by_path])
    for path in paths:
        content = by_path[path].content if path in by_path else None
        if content is not None:
            write_confined(tree.path, path, content)
    tree.remove_files([p for p in paths if p not in by_path and p not in staged])
