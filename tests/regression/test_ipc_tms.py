"""Regression tests for patch ``ipc-tms`` (fix: CUDA IPC incompatibility from the Megatron bump).

At 1dcf0da, importing the GPT model imports ``inference/contexts/dynamic_context.py``, which imports
``torch_memory_saver`` and sets its process-wide ``hook_mode = "torch"`` (upstream 42986ac, #3048).
Memory served by that allocator breaks ``torch.multiprocessing`` CUDA IPC, which miles uses for
colocated weight updates, and it overrides the hook mode miles chose itself.

What the tests prove: in a fresh interpreter (a subprocess, so no module is cached) with a fake
``torch_memory_saver`` on ``PYTHONPATH`` that records every attribute write, importing
``megatron.core.models.gpt.gpt_model`` does import ``dynamic_context`` yet leaves ``hook_mode``
unchanged and writes nothing to the memory saver. And ``--rl-offload-kv-cache-during-training``
still works: the real ``DynamicInferenceContext``, built on the CPU, allocates an offloadable KV
cache inside the memory saver's "kv_cache" region (with the trainer's hook mode), which is what
rl_utils pauses and resumes: in upstream's "torch" mode when nobody configured the saver (the fake
asserts LD_PRELOAD in "preload" mode, as the real one does), in the trainer's mode when it chose
one. The fake stands in for the third-party package only; the code under test is Megatron's.
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
from compat import kv_cache_pausers, kv_cache_saver_tag

TREE = Path(os.environ.get("REBASECTL_TEST_TREE", "."))

FAKE_TMS = textwrap.dedent(
    """
    '''Fake torch_memory_saver, shaped like the real one (0.0.10): ``hook_mode`` is set before
    first use and kept in ``_impl_ctor_kwargs``; the first region initializes it; the default
    "preload" mode asserts that LD_PRELOAD names its library. Records writes and regions.'''

    import contextlib
    import os

    WRITES = []
    REGIONS = []


    class _TorchMemorySaver:
        def __init__(self):
            object.__setattr__(self, "_impl_ctor_kwargs", {})
            object.__setattr__(self, "_impl", None)

        def __setattr__(self, name, value):
            WRITES.append([name, repr(value)])
            object.__setattr__(self, name, value)

        @property
        def hook_mode(self):
            raise AttributeError  # as the real one: write-only

        @hook_mode.setter
        def hook_mode(self, mode):
            assert self._impl_ctor_kwargs is not None, "Cannot configure after initialization"
            self._impl_ctor_kwargs["hook_mode"] = mode

        def configured(self):
            '''The mode in force (initialized) or asked for (pending); None: nobody chose.'''
            if self._impl is not None:
                return self._impl
            return self._impl_ctor_kwargs.get("hook_mode")

        def _ensure_initialized(self):
            if self._impl is None:
                mode = self._impl_ctor_kwargs.get("hook_mode", "preload")
                if mode == "preload":
                    preload = os.environ.get("LD_PRELOAD", "")
                    assert "torch_memory_saver" in preload, (
                        f"TorchMemorySaver observes invalid LD_PRELOAD ({preload!r})")
                object.__setattr__(self, "_impl", mode)

        @contextlib.contextmanager
        def region(self, tag="default", enable_cpu_backup=False):
            self._ensure_initialized()
            REGIONS.append([tag, enable_cpu_backup, self._impl])
            yield

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
        "hook_mode": tms_module.torch_memory_saver.configured(),
        "writes": tms_module.WRITES,
        "dynamic_context_imported": "megatron.core.inference.contexts.dynamic_context"
        in sys.modules,
        "tms_file": tms_module.__file__,
    }
    print("RESULT:" + json.dumps(result))
    """
)


KV_PROBE = textwrap.dedent(
    """
    import json
    import os
    import warnings

    import torch

    warnings.simplefilter("ignore")
    import torch_memory_saver as tms_module
    from compat import build_dynamic_context
    from shims import Patches, single_rank_gloo_context

    chosen = os.environ.get("PROBE_TRAINER_HOOK_MODE")
    if chosen:  # the trainer configures the saver before building the model
        tms_module.torch_memory_saver.hook_mode = chosen
    results = {}
    with single_rank_gloo_context(), Patches() as patches:
        patches.set(torch.cuda, "current_device", lambda: "cpu")
        from megatron.core.inference.contexts import dynamic_context

        for offload in (False, True):
            del tms_module.REGIONS[:]
            context = build_dynamic_context(offload)
            results[str(offload)] = {
                "regions": list(tms_module.REGIONS),
                "buffer_shape": list(context.memory_buffer.shape),
            }
    results["have_tms"] = dynamic_context.HAVE_TORCH_MEMORY_SAVER
    results["hook_mode"] = tms_module.torch_memory_saver.configured()
    results["writes"] = tms_module.WRITES
    results["tms_file"] = tms_module.__file__
    print("RESULT:" + json.dumps(results))
    """
)


def _run_probe(tmp_path: Path, probe: str = PROBE, **extra_env: str) -> dict[str, Any]:
    fake_dir = tmp_path / "fake_site"
    fake_dir.mkdir()
    (fake_dir / "torch_memory_saver.py").write_text(FAKE_TMS)
    tree = os.environ["REBASECTL_TEST_TREE"]
    env = dict(os.environ, **extra_env)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(fake_dir), tree, str(Path(__file__).resolve().parent)]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
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
    """Guards the test's premise (true on the base too): the GPT model import pulls in the
    inference context."""
    assert probe["dynamic_context_imported"]


@pytest.mark.cpu
def test_gpt_model_import_leaves_hook_mode_unchanged(probe: dict[str, Any]) -> None:
    assert probe["hook_mode"] is None, "importing the GPT model chose a hook mode"


@pytest.mark.cpu
def test_gpt_model_import_does_not_touch_memory_saver(probe: dict[str, Any]) -> None:
    assert probe["writes"] == []


@pytest.mark.cpu
@pytest.mark.default_path
def test_offloaded_kv_cache_gets_upstreams_mode_when_nobody_configured_the_saver(
    tmp_path: Path,
) -> None:
    """Fix 5 of issue 24: upstream's own ``--rl-offload-kv-cache-during-training``, for a user who
    never chose a hook mode, allocates its KV cache in the saver's region in upstream's "torch"
    mode (round 2 left the saver at its "preload" default, whose LD_PRELOAD assertion failed at
    allocation). A plain KV cache stays outside any region. (Passes on the base by design.)"""
    kv_probe = _run_probe(tmp_path, KV_PROBE, LD_PRELOAD="")  # nobody configured the saver
    assert kv_probe["have_tms"] is True
    assert [r[:2] for r in kv_probe["True"]["regions"]] == [[kv_cache_saver_tag(TREE), True]], (
        kv_probe["True"]
    )
    assert kv_probe["True"]["regions"][0][2] == "torch"
    assert kv_probe["False"]["regions"] == []
    assert kv_probe["True"]["buffer_shape"] == kv_probe["False"]["buffer_shape"]


@pytest.mark.cpu
@pytest.mark.parametrize("mode", ["torch", "preload"])
def test_a_trainers_hook_mode_is_kept(tmp_path: Path, mode: str) -> None:
    """The trainer (miles) chose the hook mode before building the model: the KV cache is
    allocated in that mode, and Megatron writes nothing to the saver (upstream overrode a
    "preload" choice with "torch" at import)."""
    preload = "/opt/torch_memory_saver_hook_mode_preload.so" if mode == "preload" else ""
    result = _run_probe(tmp_path, KV_PROBE, PROBE_TRAINER_HOOK_MODE=mode, LD_PRELOAD=preload)
    assert [r[2] for r in result["True"]["regions"]] == [mode]
    assert result["writes"] == [["hook_mode", repr(mode)]], result["writes"]


@pytest.mark.cpu
def test_rl_utils_pauses_and_resumes_the_kv_cache_region() -> None:
    """Non-regression (holds on the base and the previous patch): what is paused and resumed
    around training (by rl_utils at 1dcf0da, by the context itself at 3346fa8a2) is the region
    the context allocates the offloadable KV cache in."""
    tags = kv_cache_pausers(TREE)
    region = kv_cache_saver_tag(TREE)
    assert tags == {"pause": [region], "resume": [region]}, tags
