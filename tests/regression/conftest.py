"""Regression suite harness: put one Megatron tree on sys.path and mark what each test needs.

The suite runs against exactly one tree per pytest process (Megatron modules are cached in
``sys.modules``), chosen by ``REBASECTL_TEST_TREE`` (``rebasectl test`` sets it to the patched or
the base tree). Without it the default is ``.rebasectl/tree`` of this repo; when no tree exists,
every regression test is skipped with one reason that says how to get one.

Markers: ``cpu`` (runs anywhere), ``gpu`` (needs CUDA; skipped without it), ``needs_te``
(needs Transformer Engine; skipped without it), ``multi_gpu`` (torchrun over several GPUs),
``default_path`` (compares a non-opted-in user's path with the base's; written to the JUnit XML as
the property ``marker=default_path`` so that ``rebasectl test --against base`` leaves it out).
The CPU shims Megatron needs without a GPU live in ``shims.py`` beside this file.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def _tree() -> Path | None:
    env = os.environ.get("REBASECTL_TEST_TREE")
    path = Path(env) if env else REPO_ROOT / ".rebasectl" / "tree"
    return path if (path / "megatron" / "core").is_dir() else None


TREE = _tree()
SKIP_REASON = (
    "no Megatron tree: run `rebasectl apply --upstream MIRROR` (or `rebasectl test`), "
    "or set REBASECTL_TEST_TREE to a Megatron-LM checkout"
)

if TREE is not None:
    sys.path.insert(0, str(TREE))
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("REBASECTL_TEST_TREE", str(TREE))
    from compat import python_features

    python_features()


def imported_megatron_core() -> Path | None:
    """Where ``import megatron.core`` is found (without running megatron.core itself): another
    megatron-core installed in the environment, or an earlier tree's ``.pth``, must not shadow
    the tree under test, or every result would be about the wrong code."""
    spec = importlib.util.find_spec("megatron.core")
    return Path(spec.origin).resolve().parent if spec is not None and spec.origin else None


def pytest_sessionstart(session: pytest.Session) -> None:
    if TREE is None:
        return
    found = imported_megatron_core()
    expected = (TREE / "megatron" / "core").resolve()
    if found != expected:
        raise pytest.UsageError(
            f"megatron.core would be imported from {found}, not from the tree under test "
            f"{expected}: uninstall that copy (pip uninstall megatron-core) or fix PYTHONPATH"
        )


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _has_te() -> bool:
    return importlib.util.find_spec("transformer_engine") is not None


def _multi_gpu_skip() -> str | None:
    """``multi_gpu`` tests run only under torchrun (see mgpu.py: NCCL, or gloo for a dry run)."""
    from mgpu import skip_reason

    return skip_reason(torch_cuda_count())


def torch_cuda_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "cpu: runs on a CPU (no CUDA needed)",
        "gpu: needs a CUDA device",
        "needs_te: needs Transformer Engine",
        "multi_gpu: needs several CUDA devices (launched with torchrun)",
        "default_path: a default-path check (upstream's behaviour for a user who does not opt"
        " in): passes on the base by design; `rebasectl test --against base` does not count it",
    ):
        config.addinivalue_line("markers", line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    cuda = _has_cuda()
    te = _has_te()
    for item in items:
        if HERE not in Path(str(item.fspath)).resolve().parents:
            continue
        if item.get_closest_marker("default_path"):  # read by rebasectl from the JUnit XML
            item.user_properties.append(("marker", "default_path"))
        if TREE is None:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
        elif "gpu" in item.keywords and not cuda:
            item.add_marker(pytest.mark.skip(reason="needs CUDA (run with `rebasectl test --gpu`)"))
        elif "needs_te" in item.keywords and not te:
            item.add_marker(pytest.mark.skip(reason="needs Transformer Engine"))
        elif "multi_gpu" in item.keywords and _multi_gpu_skip() is not None:
            item.add_marker(pytest.mark.skip(reason=_multi_gpu_skip()))


class _NoTreeItem(pytest.Item):
    def runtest(self) -> None:
        pytest.skip(SKIP_REASON)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, self.name


class _NoTreeModule(pytest.File):
    """Stands in for a test module when there is no tree: one skipped item, nothing imported."""

    def collect(self) -> list[pytest.Item]:
        return [_NoTreeItem.from_parent(self, name=self.path.stem)]


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.File | None:
    if TREE is None and HERE in module_path.resolve().parents:
        return _NoTreeModule.from_parent(parent, path=module_path)
    return None
