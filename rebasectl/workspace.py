"""Where things live: the user's series checkout and rebasectl's own state under ``.rebasectl/``.

Everything rebasectl creates (cached mirror, work tree, apply state, lock, export journal) lives
under ``.rebasectl/``, which ignores itself through its own ``.gitignore``, so the user's checkout
is never modified except by ``export``/``import``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import RebasectlError
from .series import PATCH_DIR, SERIES_FILE

STATE_DIR = ".rebasectl"


@dataclass(frozen=True)
class Workspace:
    root: Path

    @staticmethod
    def at(directory: Path) -> Workspace:
        root = directory.resolve()
        if not root.is_dir():
            raise RebasectlError(f"-C {directory}: not a directory")
        return Workspace(root)

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
    def apply_state(self) -> Path:
        return self.state_dir / "apply-state.json"

    @property
    def lock_file(self) -> Path:
        return self.state_dir / "lock"

    @property
    def journal_dir(self) -> Path:
        return self.state_dir / "txn"

    def ensure_state_dir(self) -> Path:
        try:
            self.state_dir.mkdir(exist_ok=True)
            ignore = self.state_dir / ".gitignore"
            if not ignore.exists():
                ignore.write_text("*\n")
        except OSError as exc:
            raise RebasectlError(f"{self.state_dir}: cannot create rebasectl's state here: "
                                 f"{exc.strerror}") from None
        return self.state_dir
