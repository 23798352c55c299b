"""Make the patched tree the ``megatron`` of this Python environment (``apply --install``).

miles imports ``megatron.core`` and ``megatron.training`` from its environment, so the patched tree
is useful only once that environment finds it. An editable install of megatron-core would build
its C++ helpers and install only ``megatron.core``; what an editable install does at its heart is
a ``.pth`` file naming the source directory, and that is what we write: one file,
``rebasectl-megatron.pth``, in the environment's ``purelib``, naming the tree. No dependency is
installed (the ``regression`` extra has what the tested modules need). It is checked by asking a
fresh interpreter where ``megatron.core`` comes from: another megatron-core installed in the
environment would shadow the tree, and then the install is refused with the command that fixes
it.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from .errors import RebasectlError
from .fsutil import atomic_write

PTH_NAME = "rebasectl-megatron.pth"
_PROBE = ("import importlib.util as u; s = u.find_spec('megatron.core'); "
          "print(s.origin if s and s.origin else '')")


def site_dir() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def where_megatron_core() -> Path | None:
    """The ``megatron/core`` directory a fresh interpreter of this environment imports, if any
    (run from ``/`` so that the current directory plays no part)."""
    proc = subprocess.run([sys.executable, "-c", _PROBE], cwd="/", capture_output=True,
                          text=True, check=False)
    origin = proc.stdout.strip()
    return Path(origin).resolve().parent if proc.returncode == 0 and origin else None


def install_tree(tree: Path) -> Path:
    """Point this environment's ``megatron`` at ``tree``; returns the ``.pth`` written."""
    tree = tree.resolve()
    pth = site_dir() / PTH_NAME
    if not pth.parent.is_dir():
        raise RebasectlError(f"--install: {pth.parent} does not exist (not a usable Python "
                             "environment)")
    atomic_write(pth, f"{tree}\n".encode())
    found = where_megatron_core()
    expected = tree / "megatron" / "core"
    if found != expected:
        raise RebasectlError(f"--install: wrote {pth}, but this environment imports megatron.core "
                             f"from {found}: `{sys.executable} -m pip uninstall -y megatron-core` "
                             "then run `rebasectl apply --install` again")
    return pth
