"""Regression tests for patch ``ipc-tms`` (fix: CUDA IPC incompatibility from the Megatron bump).

At 1dcf0da, importing the GPT model imports ``inference/contexts/dynamic_context.py``, which imports
``torch_memory_saver`` and sets its process-wide ``hook_mode = "torch"`` (upstream 42986ac, #3048).
Memory served by that allocator breaks ``torch.multiprocessing`` CUDA IPC, which miles uses for
colocated weight updates, and it overrides the hook mode miles chose itself.

What the tests prove: in a fresh interpreter (a subprocess, so no module is cached) with a fake
``torch_memory_saver`` on ``PYTHONPATH`` that records every attribute write, importing
``megatron.core.models.gpt.gpt_model`` does import ``dynamic_context`` yet leaves ``hook_mode``
unchanged and writes nothing to the memory saver. The fake stands in for the third-party package
only; the code under test is Megatron's import path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

FAKE_TMS = textwrap.dedent(
    """
    '''Fake torch_memory_saver: records attribute writes on the singleton.'''

    WRITES = []


    class _TorchMemorySaver:
        def __init__(self):
            object.__setattr__(self, "hook_mode", "preload")

        def __setattr__(self, name, value):
            WRITES.append([name, repr(value)])
            object.__setattr__(self, name, value)

        def region(self, *args, **kwargs):
            WRITES.append(["region()", repr(kwargs)])
            raise RuntimeError("fake torch_memory_saver: region() must not be used")

        def pause(self, *args, **kwargs):
            WRITES.append(["pause()", repr(args)])

        def resume(self, *args, **kwargs):
            WRITES.append(["resume()", repr(args)])


    torch_memory_saver = _TorchMemorySaver()
    """
)

PROBE = textwrap.dedent(
    """
    import json
    import sys
    import warnings

    warnings.simplefilter("ignore")
    import torch_memory_saver as tms_module

    from megatron.core.models.gpt.gpt_model import GPTModel  # noqa: F401

    result = {
        "hook_mode": tms_module.torch_memory_saver.hook_mode,
        "writes": tms_module.WRITES,
        "dynamic_context_imported": "megatron.core.inference.contexts.dynamic_context"
        in sys.modules,
        "tms_file": tms_module.__file__,
    }
    print("RESULT:" + json.dumps(result))
    """
)


def _run_probe(tmp_path: Path) -> dict[str, Any]:
    fake_dir = tmp_path / "fake_site"
    fake_dir.mkdir()
    (fake_dir / "torch_memory_saver.py").write_text(FAKE_TMS)
    tree = os.environ["REBASECTL_TEST_TREE"]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(fake_dir), tree] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT:")]
    assert proc.returncode == 0 and lines, (
        f"probe failed (rc={proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT:") :])
    assert Path(result["tms_file"]).parent == fake_dir, "the fake torch_memory_saver must be used"
    return result


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_probe(tmp_path_factory.mktemp("ipc_tms"))


@pytest.mark.cpu
def test_gpt_model_import_reaches_dynamic_context(probe: dict[str, Any]) -> None:
    # Guards the test's premise: the GPT model import does pull in the inference context.
    assert probe["dynamic_context_imported"]


@pytest.mark.cpu
def test_gpt_model_import_leaves_hook_mode_unchanged(probe: dict[str, Any]) -> None:
    assert probe["hook_mode"] == "preload"


@pytest.mark.cpu
def test_gpt_model_import_does_not_touch_memory_saver(probe: dict[str, Any]) -> None:
    assert probe["writes"] == []
