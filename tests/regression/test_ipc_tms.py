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
rl_utils pauses and resumes. The fake stands in for the third-party package only; the code under
test is Megatron's. (The patch now changes one line of upstream: the forced hook mode.)
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
    '''Fake torch_memory_saver: records attribute writes and regions entered.'''

    import contextlib

    WRITES = []
    REGIONS = []


    class _TorchMemorySaver:
        def __init__(self):
            object.__setattr__(self, "hook_mode", "preload")

        def __setattr__(self, name, value):
            WRITES.append([name, repr(value)])
            object.__setattr__(self, name, value)

        @contextlib.contextmanager
        def region(self, tag="default", enable_cpu_backup=False):
            REGIONS.append([tag, enable_cpu_backup])
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
        "hook_mode": tms_module.torch_memory_saver.hook_mode,
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
    import warnings

    import torch

    warnings.simplefilter("ignore")
    import torch_memory_saver as tms_module
    from shims import Patches, single_rank_gloo_context

    results = {}
    with single_rank_gloo_context(), Patches() as patches:
        patches.set(torch.cuda, "current_device", lambda: "cpu")
        from megatron.core.inference.contexts import dynamic_context

        for offload in (True, False):
            del tms_module.REGIONS[:]
            context = dynamic_context.DynamicInferenceContext(
                params_dtype=torch.float32, num_layers=2, kv_channels=8, num_attention_heads=2,
                max_sequence_length=64, buffer_size_gb=0.0005, tensor_model_parallel_size=1,
                pipeline_model_parallel_size=1, block_size_tokens=16, max_tokens=128,
                offload_kv_cache=offload,
            )
            results[str(offload)] = {
                "regions": list(tms_module.REGIONS),
                "buffer_shape": list(context.memory_buffer.shape),
            }
    results["have_tms"] = dynamic_context.HAVE_TORCH_MEMORY_SAVER
    results["hook_mode"] = tms_module.torch_memory_saver.hook_mode
    results["writes"] = tms_module.WRITES
    results["tms_file"] = tms_module.__file__
    print("RESULT:" + json.dumps(results))
    """
)


def _run_probe(tmp_path: Path, probe: str = PROBE) -> dict[str, Any]:
    fake_dir = tmp_path / "fake_site"
    fake_dir.mkdir()
    (fake_dir / "torch_memory_saver.py").write_text(FAKE_TMS)
    tree = os.environ["REBASECTL_TEST_TREE"]
    env = dict(os.environ)
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
    assert probe["hook_mode"] == "preload"


@pytest.mark.cpu
def test_gpt_model_import_does_not_touch_memory_saver(probe: dict[str, Any]) -> None:
    assert probe["writes"] == []


@pytest.fixture(scope="module")
def kv_probe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run_probe(tmp_path_factory.mktemp("ipc_tms_kv"), KV_PROBE)


@pytest.mark.cpu
def test_offloaded_kv_cache_lives_in_the_memory_saver_region(kv_probe: dict[str, Any]) -> None:
    """Issue 16, defect 6: ``--rl-offload-kv-cache-during-training`` must work. The previous
    patch allocated the KV cache plainly while ``HAVE_TORCH_MEMORY_SAVER`` stayed True, so
    rl_utils paused and resumed a "kv_cache" region that did not exist: silently nothing. The
    real ``DynamicInferenceContext`` (built on the CPU) allocates an offloadable KV cache inside
    ``torch_memory_saver.region("kv_cache")`` (with CPU backup, as upstream), a plain one outside
    any region, and leaves the hook mode the trainer chose (upstream forced "torch")."""
    assert kv_probe["have_tms"] is True
    assert kv_probe["True"]["regions"] == [["kv_cache", True]], kv_probe["True"]
    assert kv_probe["False"]["regions"] == []
    assert kv_probe["True"]["buffer_shape"] == kv_probe["False"]["buffer_shape"]
    assert kv_probe["hook_mode"] == "preload" and kv_probe["writes"] == []


def _rl_utils_memory_saver_tags() -> dict[str, list[str]]:
    """The tags rl_utils passes to torch_memory_saver.pause/resume (its module needs
    tensorboard and more to import, so this reads it)."""
    import ast

    source = (Path(os.environ["REBASECTL_TEST_TREE"]) / "megatron/rl/rl_utils.py").read_text()
    tags: dict[str, list[str]] = {"pause": [], "resume": []}
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in tags
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "torch_memory_saver"
        ):
            tags[node.func.attr].append(ast.literal_eval(node.args[0]))
    return tags


@pytest.mark.cpu
def test_rl_utils_pauses_and_resumes_the_kv_cache_region(kv_probe: dict[str, Any]) -> None:
    """Non-regression (holds on the base and the previous patch): what rl_utils pauses and
    resumes around training is the region the context allocates the offloadable KV cache in."""
    tags = _rl_utils_memory_saver_tags()
    region = kv_probe["True"]["regions"][0][0] if kv_probe["True"]["regions"] else "kv_cache"
    assert tags == {"pause": [region], "resume": [region]}, tags
