"""``rebasectl resolve``: the proposals of the patch an apply stopped at, and accepting them.

The stop's conflicts are computed again the way ``apply`` made them (the conflict engine on the
tip's tree, in a scratch index: the same regions, the same ids), and the proposal engine runs on
them. The board (``.rebasectl/proposals.json``) keeps each proposal's state:

* ``proposed``: shown, nothing written;
* ``accepted``: its lines replaced the region's markers in the work tree (found by its three
  sides, so a region the person edited is never overwritten) and, once a file has no markers
  left, the file is staged;
* ``verified``: every region of the patch accepted or resolved, and the patch's regression
  tests (series.yaml ``tests:``) passed on the work tree;
* ``hand-resolved``: the region's markers are gone, but not through ``resolve``.

The board belongs to one stop (patch and tip): a board of another stop is computed again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..git import Repo, Worktree
from ..infra.errors import RebasectlError
from ..infra.fsutil import atomic_write
from ..model.series import load
from ..model.status import ProposalState
from ..model.workspace import Workspace
from .attribution import UpstreamRange
from .carried import CarriedLines
from .proposals import (
    GitOracle,
    Oracle,
    Proposal,
    blocks,
    consistent,
    propose_file,
    superseded,
)
from .proposals.evidence import Recorded
from .session import Session
from .state import ApplyState

SCHEMA = "rebasectl.resolve/1"
Notify = Callable[[str], None]


@dataclass
class Board:
    patch: str
    tip: str
    proposals: list[Proposal] = field(default_factory=list)
    regions: int = 0  # open regions at the stop, proposed or not
    tests: dict[str, Any] | None = None  # the last regression run after accepting
    unresolved: list[str] = field(default_factory=list)  # unmerged paths now (not saved)

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "patch": self.patch, "tip": self.tip, "regions": self.regions,
                "proposals": [p.to_json() for p in self.proposals], "tests": self.tests,
                "unresolved": self.unresolved}

    def save(self, path: Path) -> None:
        data = {**self.to_json(), "marked": {p.id: p.marked for p in self.proposals}}
        data.pop("unresolved")
        atomic_write(path, (json.dumps(data, indent=1) + "\n").encode())

    @classmethod
    def load(cls, path: Path) -> Board | None:
        try:
            data = json.loads(path.read_text())
            props = [Proposal.from_json({**p, "marked": data["marked"].get(p["id"], [])})
                     for p in data["proposals"]]
            return cls(str(data["patch"]), str(data["tip"]), props, int(data["regions"]),
                       data.get("tests"))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def pick(self, ids: list[str], everything: bool) -> list[Proposal]:
        if everything:
            return [p for p in self.proposals if p.state == "proposed"]
        known = {p.id: p for p in self.proposals}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise RebasectlError(f"no proposal {unknown[0]!r} at this stop "
                                 "(`rebasectl resolve --list` shows them)")
        return [known[i] for i in ids]


def board_file(ws: Workspace) -> Path:
    return ws.state_dir / "proposals.json"


def stopped(ws: Workspace, repo: Repo) -> tuple[Session, ApplyState, Worktree]:
    session = Session(ws, repo)
    state = session.load()
    if state is None or state.current is None:
        raise RebasectlError("no apply is stopped at a conflict: `rebasectl apply` first "
                             "(`rebasectl bump --propose` shows proposals for a bump)")
    return session, state, Worktree(Path(state.worktree))


def compute(ws: Workspace, repo: Repo, session: Session, state: ApplyState) -> Board:
    """The stop's regions, made again as apply made them, and their proposals."""
    assert state.current is not None
    lp = session.patches(state)[state.current]
    with repo.index() as scratch:
        scratch.read_tree(repo.tree_of(state.tip))
        merge = session.engine(state).merge(scratch, lp.patch,
                                            session.labels(state)(lp.id))
        replayed = repo.rerere_replay(scratch, {c.path: c.content for c in merge.conflicts
                                                if c.content is not None and c.regions})
    oracle = _oracle(ws, repo, state)
    found: list[Proposal | None] = []
    for c in merge.conflicts:
        if c.path in replayed and c.content is not None:
            found += recorded(lp.id, c, replayed[c.path])
        else:
            found += propose_file(lp.id, c, [], oracle)
    consistent(found, merge.conflicts, [ln for f in lp.patch.model.files for h in f.hunks
                                        for ln in h.added])
    if len(merge.conflicts) == len(lp.patch.files):
        superseded(found)
    return Board(lp.id, state.tip, [p for p in found if p is not None], len(found))


def recorded(patch_id: str, c: Any, resolved: bytes) -> list[Proposal | None]:
    """Rule ``recorded``: rerere holds a resolution of this file's conflicts (met at an earlier
    apply or bump); each region's proposal is what it wrote there."""
    text = c.content.decode("utf-8", "surrogateescape")
    marked = text.split("\n")
    done = resolved.decode("utf-8", "surrogateescape").split("\n")
    found = blocks(text)
    out: list[Proposal | None] = []
    at = 0  # position in the resolved file
    for n, block in enumerate(found, 1):
        lead = marked[(found[n - 2].end + 1) if n > 1 else 0:block.start]
        at += len(lead)
        tail_end = found[n].start if n < len(found) else len(marked)
        tail = marked[block.end + 1:tail_end]
        end = _find(done, tail, at) if tail else len(done) - 0
        if end is None:
            return [None] * len(found)
        out.append(Proposal(f"{patch_id}/{c.path}/{n}", patch_id, c.path, n, "recorded",
                            done[at:end], Recorded("rerere: a resolution recorded earlier"),
                            block.marked))
        at = end
    return out


def _find(lines: list[str], block: list[str], after: int) -> int | None:
    for k in range(after, len(lines) - len(block) + 1):
        if lines[k:k + len(block)] == block:
            return k
    return None


def _oracle(ws: Workspace, repo: Repo, state: ApplyState) -> Oracle:
    pinned = load(ws.root, check_files=False).upstream.base
    if pinned != state.base and repo.resolve(pinned) and \
            repo.history.is_ancestor(pinned, state.base):
        return GitOracle(repo, state.base, CarriedLines(UpstreamRange(repo, pinned, state.base)))
    return Oracle()


def board(ws: Workspace, repo: Repo) -> Board:
    """The current stop's board (computed when there is none for this stop), states refreshed
    from the work tree."""
    session, state, tree = stopped(ws, repo)
    found = Board.load(board_file(ws))
    if found is None or found.patch != state.current or found.tip != state.tip:
        found = compute(ws, repo, session, state)
    _refresh(found, tree)
    found.save(board_file(ws))
    found.unresolved = sorted(tree.index().unmerged())
    return found


def _refresh(b: Board, tree: Worktree) -> None:
    """A proposed region whose markers are gone was resolved by hand."""
    texts: dict[str, list[Any]] = {}
    for p in b.proposals:
        if p.state != "proposed":
            continue
        if p.path not in texts:
            texts[p.path] = _blocks_of(tree, p.path)
        if not any(bl.marked == p.marked for bl in texts[p.path]):
            # rerere wrote a recorded resolution itself (apply says so); else a person did
            p.state = ProposalState.ACCEPTED if p.rule == "recorded" else \
                ProposalState.HAND_RESOLVED


def _blocks_of(tree: Worktree, path: str) -> list[Any]:
    try:
        return blocks((tree.path / path).read_bytes().decode("utf-8", "surrogateescape"))
    except OSError:
        return []


def reject(ws: Workspace, repo: Repo, ids: list[str]) -> Board:
    """Take proposals back. An accepted (or verified) one is undone first: its region is the
    conflict it was, markers and the file's unmerged index entries restored, its ``moved`` edit
    taken out again; the patch's other accepted proposals are no longer verified. A region
    resolved by hand is not ours to undo."""
    b = board(ws, repo)
    chosen = b.pick(ids, False)
    for p in chosen:
        if p.state == ProposalState.HAND_RESOLVED:
            raise RebasectlError(f"{p.id} is {p.state}: resolved by hand, not by `resolve`; "
                                 "edit the file back yourself")
    undo = [p for p in chosen if p.state != ProposalState.PROPOSED]
    if undo:
        _unaccept(ws, repo, b, undo)
    b.proposals = [p for p in b.proposals if p.id not in set(ids)]
    b.save(board_file(ws))
    b.unresolved = sorted(stopped(ws, repo)[2].index().unmerged())
    return b


def _unaccept(ws: Workspace, repo: Repo, b: Board, undo: list[Proposal]) -> None:
    """The accepted proposals ``undo`` written back to their conflicts (every one checked
    before anything is written)."""
    session, state, tree = stopped(ws, repo)
    assert state.current is not None
    lp = session.patches(state)[state.current]
    with repo.index() as scratch:
        scratch.read_tree(repo.tree_of(state.tip))
        merge = session.engine(state).merge(scratch, lp.patch, session.labels(state)(lp.id))
    stages = {c.path: c.stages for c in merge.conflicts}
    texts = {p.path: _read_lines(tree, p.path) for p in undo}
    for p in undo:
        at = _accepted_at(p, texts[p.path], merge.conflicts)
        texts[p.path][at:at + len(p.lines)] = p.marked
    for p in undo:
        if p.port:
            _unport(tree, p)
    for path, lines in texts.items():
        (tree.path / path).write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    tree.index().update({path: stages[path] for path in texts if path in stages})
    for p in b.proposals:
        if p.state == ProposalState.VERIFIED:
            p.state = ProposalState.ACCEPTED
        if p in undo:
            p.state = ProposalState.PROPOSED
    b.tests = None


def _read_lines(tree: Worktree, path: str) -> list[str]:
    return (tree.path / path).read_bytes().decode("utf-8", "surrogateescape").split("\n")


def _accepted_at(p: Proposal, lines: list[str], conflicts: list[Any]) -> int:
    """Where ``p``'s lines stand in the work tree's file: the one place they sit between the
    lines the marked-up file has around the region."""
    c = next((c for c in conflicts if c.path == p.path and c.content is not None), None)
    marked = c.content.decode("utf-8", "surrogateescape").split("\n") if c else []
    block = next((bl for bl in blocks("\n".join(marked)) if bl.marked == p.marked), None)
    if block is None:
        raise RebasectlError(f"{p.id}: the stop's conflict has no such region any more")
    before, after = marked[max(0, block.start - 2):block.start], marked[block.end + 1:block.end + 3]
    run = [*before, *p.lines, *after]
    hits = [k for k in range(len(lines) - len(run) + 1) if lines[k:k + len(run)] == run]
    if len(hits) != 1:
        raise RebasectlError(
            f"{p.id}: its accepted lines are not in {p.path} once, as written (edited since?): "
            "nothing restored; edit the region back by hand")
    return hits[0] + len(before)


def _unport(tree: Worktree, p: Proposal) -> None:
    """``moved``: the edit written at the code's new place taken out again, and staged."""
    assert p.port is not None
    path, at = str(p.port["path"]), int(p.port["line"]) - 1
    lines = _read_lines(tree, path)
    new = list(p.port["new"])
    if lines[at:at + len(new)] == new:
        lines[at:at + len(new)] = list(p.port["old"])
        (tree.path / path).write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
        tree.stage([path])


def accept(ws: Workspace, repo: Repo, ids: list[str], everything: bool,
           notify: Notify) -> Board:
    """Write the chosen proposals into the work tree, stage the files left without markers,
    then run the patch's regression tests when nothing of the patch is left open."""
    b = board(ws, repo)
    _, state, tree = stopped(ws, repo)
    chosen = b.pick(ids, everything)
    for p in chosen:
        if p.state != "proposed":
            raise RebasectlError(f"{p.id} is {p.state} already")
    touched: set[str] = set()
    for p in chosen:
        touched |= _write(tree, p)
        p.state = ProposalState.ACCEPTED
    tree.stage(sorted(path for path in touched if not _marked(tree, path)))
    b.save(board_file(ws))
    b.unresolved = sorted(tree.index().unmerged())
    if chosen and not b.unresolved and \
            not any(_marked(tree, c["path"]) for c in state.conflicts):
        _verify(ws, b, tree, notify)
        b.save(board_file(ws))
    return b


def _marked(tree: Worktree, path: str) -> bool:
    """Whether a file of the work tree still holds a conflict block."""
    return bool(_blocks_of(tree, path))


def _write(tree: Worktree, p: Proposal) -> set[str]:
    target = tree.path / p.path
    text = target.read_bytes().decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    hit = next((bl for bl in blocks(text) if bl.marked == p.marked), None)
    if hit is None:
        raise RebasectlError(f"{p.id}: the region is not in {p.path} as proposed any more "
                             "(edited by hand?): nothing written")
    lines[hit.start:hit.end + 1] = p.lines
    target.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    if not p.port:
        return {p.path}
    return {p.path, _port(tree, p)}


def _port(tree: Worktree, p: Proposal) -> str:
    """``moved``: the patch's edit written at the code's new place, when it is still there."""
    assert p.port is not None
    path, at = str(p.port["path"]), int(p.port["line"]) - 1
    target = tree.path / path
    lines = target.read_bytes().decode("utf-8", "surrogateescape").split("\n")
    old = list(p.port["old"])
    if lines[at:at + len(old)] != old:
        raise RebasectlError(f"{p.id}: {path}:{at + 1} changed since the proposal: the edit "
                             "was not carried there")
    lines[at:at + len(old)] = list(p.port["new"])
    target.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    return path


def _verify(ws: Workspace, b: Board, tree: Worktree, notify: Notify) -> None:
    """The patch's regression tests on the work tree; accepted proposals become verified."""
    from .testing import run_tests

    entry = next((e for e in load(ws.root).patches if e.id == b.patch), None)
    if entry is None or not entry.tests:
        b.tests = {"ran": False, "why": "the patch has no regression tests in series.yaml"}
        return
    notify(f"running the regression tests of {b.patch}")
    try:
        run = run_tests(ws, tree.path, against="patched", device=None, patch_id=b.patch)
    except RebasectlError as e:
        b.tests = {"ran": False, "why": str(e)}
        return
    b.tests = {"ran": True, "result": run.result, "verdict": run.verdict()}
    if run.result == "passed":
        for p in b.proposals:
            if p.state == "accepted":
                p.state = ProposalState.VERIFIED


def for_stop(ws: Workspace, repo: Repo) -> Board:
    """``apply --propose``: the board of the stop just made (shown; the work tree untouched)."""
    return board(ws, repo)
