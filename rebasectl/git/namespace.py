"""The upstream's refs in the cached mirror live in rebasectl's own namespace.

The mirror is also the repository of every work tree rebasectl makes (``git worktree add``), so
a branch or tag a person makes in ``.rebasectl/tree`` is a ref of the mirror. A mirror fetched
``+refs/*:refs/*`` with ``--prune`` deleted such a branch (the upstream does not have it) and
moved one the upstream happened to share a name with. So the upstream's branches and tags are
fetched into ``refs/rebasectl/upstream/heads/*`` and ``.../tags/*`` (``--prune`` then only ever
deletes refs there), with ``--no-tags`` (tag auto-following writes ``refs/tags``), and nothing
else the upstream has (``refs/replace/*``, ``refs/pull/*``, notes) is fetched at all. Names a
user gives (``dev``, ``origin/dev``, ``v1.0``, ``refs/heads/dev``, with ``~``/``^`` suffixes)
resolve in that namespace first, in git's own order (the name, a tag, a branch), then as git
resolves them (a sha, or a ref of an older mirror that still holds the upstream's refs at the
top level: those are left where they are, since rebasectl cannot tell them from a person's).
"""

from __future__ import annotations

import re

from ..model.ids import is_abbrev
from .runner import Runner

UPSTREAM_REFS = "refs/rebasectl/upstream/"
FETCH_SPECS = (f"+refs/heads/*:{UPSTREAM_REFS}heads/*", f"+refs/tags/*:{UPSTREAM_REFS}tags/*")
_SPLIT = re.compile(r"^(.*?)((?:[~^:]|@\{).*)?$", re.S)


def configure(runner: Runner) -> None:
    """The fetch refspecs of ``origin`` set to the namespaced ones (a mirror made by an older
    rebasectl with ``clone --mirror`` fetched ``+refs/*:refs/*``). One read when they already
    are."""
    proc = runner.run(["config", "--get-regexp", r"^remote\.origin\.(fetch|tagopt|mirror)$"],
                      check=False)
    pairs = [ln.split(" ", 1) for ln in proc.stdout.decode(errors="replace").splitlines()]
    specs = [v for k, v in pairs if k == "remote.origin.fetch"]
    if specs == list(FETCH_SPECS) and ["remote.origin.tagopt", "--no-tags"] in pairs and \
            not any(k == "remote.origin.mirror" for k, _ in pairs):
        return
    if any(k == "remote.origin.mirror" for k, _ in pairs):
        runner.run(["config", "--unset-all", "remote.origin.mirror"], check=False)
    runner.run(["config", "--replace-all", "remote.origin.fetch", FETCH_SPECS[0]])
    for spec in FETCH_SPECS[1:]:
        runner.run(["config", "--add", "remote.origin.fetch", spec])
    runner.run(["config", "remote.origin.tagOpt", "--no-tags"])


def adopt_clone(runner: Runner) -> None:
    """A fresh bare clone made with ``FETCH_SPECS`` and ``--no-tags`` (its config already says
    so, and the upstream's branches and tags are already under ``refs/rebasectl/upstream/``)
    turned into the namespaced layout: the ``refs/heads/*`` a bare clone also writes deleted in
    one ref transaction, HEAD pointed at the upstream's default branch in the namespace. Only
    ever run on a clone no one else has seen yet (the temporary directory of
    ``ensure_mirror``)."""
    out = runner.out(["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"])
    lines = [f"delete {ref} {sha}" for sha, ref in
             (record.split(" ", 1) for record in out.splitlines())]
    if lines:
        runner.run(["update-ref", "--stdin"], input=("\n".join(lines) + "\n").encode())
    adopt_head(runner, runner.run(["symbolic-ref", "-q", "HEAD"], check=False).stdout.decode()
               .strip())


def adopt_head(runner: Runner, head: str) -> None:
    """HEAD pointed at the upstream's default branch ``head`` (``refs/heads/<name>``) in the
    namespace; a detached or unreadable upstream HEAD leaves it as ``init`` made it."""
    if head.startswith("refs/heads/"):
        runner.run(["symbolic-ref", "HEAD", UPSTREAM_REFS + head[5:]])


def candidates(rev: str) -> tuple[list[str], str]:
    """The namespaced refs ``rev``'s name may mean, in git's order of preference, and the rest
    of ``rev`` (``~2``, ``^{tree}``, ``:path``). No candidates for a sha-like name."""
    match = _SPLIT.match(rev)
    name, rest = (match.group(1), match.group(2) or "") if match else (rev, "")
    if not name or name == "HEAD" or is_abbrev(name):
        return [], rest
    if name.startswith("refs/"):
        return [UPSTREAM_REFS + name[5:]], rest
    names = [UPSTREAM_REFS + name, f"{UPSTREAM_REFS}tags/{name}", f"{UPSTREAM_REFS}heads/{name}"]
    if name.startswith("origin/"):
        names.append(f"{UPSTREAM_REFS}heads/{name[7:]}")
    return names, rest


def dwim(runner: Runner, rev: str) -> str:
    """``rev`` with its name spelled as the full namespaced ref it means, or ``rev`` as given
    when no upstream ref has that name (one ``for-each-ref`` for all candidates)."""
    names, rest = candidates(rev)
    if not names:
        return rev
    out = runner.run(["for-each-ref", "--format=%(refname)", *names], check=False)
    found = set(out.stdout.decode(errors="surrogateescape").split())
    for name in names:
        if name in found:
            return name + rest
    return rev
