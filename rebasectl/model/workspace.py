"""Where things live: the user's series checkout and rebasectl's own state under ``.rebasectl/``.

Everything rebasectl creates (cached mirror, work tree, apply state, lock, export journal, the
base tree of ``test --against base``) lives under ``.rebasectl/``, which ignores itself through
its own ``.gitignore``, so the user's checkout is never modified except by ``export``/``import``.
Every path under ``.rebasectl/`` is spelled here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..infra.errors import RebasectlError
from .series import PATCH_DIR, SERIES_FILE

STATE_DIR = ".rebasectl"


@dataclass(frozen=True)
class Workspace:
    root: Path
    here: Path | None = field(default=None, compare=False)  # where the command was started

    @staticmethod
    def at(directory: Path, *, discover: bool = True) -> Workspace:
        """The checkout holding ``directory``: the nearest folder at or above it with a
        series.yaml, as git finds its repository from a subfolder. So the commands work from
        ``patches/`` or from inside ``.rebasectl/tree``, where every stop sends the person to
        resolve. ``discover=False`` (import, which creates a series) takes ``directory`` itself;
        with no series.yaml above, it is ``directory`` too."""
        here = directory.resolve()
        if not here.is_dir():
            raise RebasectlError(f"-C {directory}: not a directory")
        found = [d for d in (here, *here.parents) if (d / SERIES_FILE).is_file()]
        return Workspace(found[0] if discover and found else here, here)

    def path(self, given: Path | str) -> Path:
        """A path the user gave on the command line, taken relative to where the command was
        started (``-C``, as git does), not to the checkout found above it."""
        p = Path(given).expanduser()
        return p if p.is_absolute() else (self.here or self.root) / p

    @property
    def series_file(self) -> Path:
        return self.root / SERIES_FILE

    @property
    def patch_dir(self) -> Path:
        return self.root / PATCH_DIR

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def mirror(self) -> Path:
        return self.state_dir / "upstream.git"

    @property
    def default_tree(self) -> Path:
        return self.state_dir / "tree"

    @property
    def base_tree(self) -> Path:
        return self.state_dir / "base-tree"

    @property
    def apply_state(self) -> Path:
        return self.state_dir / "apply-state.json"

    @property
    def tree_map(self) -> Path:
        return self.state_dir / "tree.json"

    @property
    def aborting(self) -> Path:
        """Marks an abort under way (engine/abort.py): a kill leaves it for status to name."""
        return self.state_dir / "aborting"

    @property
    def carrying(self) -> Path:
        """A clean bump making the new work tree (engine/state.Carrying)."""
        return self.state_dir / "carrying.json"

    @property
    def resolutions(self) -> Path:
        return self.state_dir / "resolutions"

    @property
    def stats_cache(self) -> Path:
        return self.state_dir / "patch-stats.json"

    @property
    def lock_file(self) -> Path:
        return self.state_dir / "lock"

    @property
    def journal_dir(self) -> Path:
        return self.state_dir / "txn"

    @property
    def overwritten(self) -> Path:
        """Copies of files a person changed that rebasectl then wrote over (``export --force``,
        an interrupted export finished after such a change), a folder per time."""
        return self.state_dir / "overwritten"

    @property
    def default_artifacts(self) -> Path:
        return self.state_dir / "bump"

    @property
    def aborted(self) -> Path:
        return self.state_dir / "aborted"

    def mirror_tmp(self, pid: int) -> Path:
        return self.state_dir / f"upstream.git.tmp-{pid}"

    def stale_mirror_tmps(self) -> list[Path]:
        return list(self.state_dir.glob("upstream.git.tmp-*"))

    def inside_state(self, path: Path) -> bool:
        """Whether ``path`` is under ``.rebasectl/`` (state files may only name such paths,
        or a work tree the user chose and rebasectl registered)."""
        try:
            path.resolve().relative_to(self.state_dir.resolve())
        except ValueError:
            return False
        return True

    def ensure_state_dir(self) -> Path:
        try:
            self.state_dir.mkdir(exist_ok=True)
            ignore = self.state_dir / ".gitignore"
            if not ignore.exists():
                ignore.write_text("*\n")
        except OSError as exc:
            raise RebasectlError(f"{self.state_dir}: cannot create rebasectl's state here: "
                                 f"{exc.strerror}") from None
        if self.lock_file.is_symlink():
            raise RebasectlError(f"{self.lock_file} is a symbolic link: refusing to use it "
                                 "(remove it; rebasectl makes its own)")
        return self.state_dir
