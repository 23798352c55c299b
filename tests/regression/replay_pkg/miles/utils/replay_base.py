"""A small, independent routing replay manager: the contract of docs/series.md (patch 6).

Megatron's routers import ``routing_replay_manager`` from here when ``miles`` is importable. The
regression test puts this package on ``sys.path`` so that the patched routers can be exercised
without miles itself. Semantics:

- ``register_to_module(module, attr_name)`` only acts when ``enabled`` is already True: it creates
  a :class:`Replay`, appends it to ``replays`` (registration order), sets ``module.<attr_name>``
  and adds a forward pre-hook that makes that replay ``current``.
- ``get_topk_fn(fn, return_probs)`` wraps a top-k function called as ``fn(scores, topk, *args)``.
  Stage ``fallthrough`` (or a disabled manager) calls ``fn``; ``record`` calls ``fn`` and records
  the indices; ``replay_forward`` / ``replay_backward`` pop the next entry of ``current`` by the
  forward / backward cursor, turn all -1 (padding) rows into ``arange(topk) % num_experts`` and
  return ``(scores.gather(1, idx), idx)`` (or ``idx`` without ``return_probs``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

STAGES = ("fallthrough", "record", "replay_forward", "replay_backward")


class Replay:
    """Recorded top-k indices of one router, with independent forward and backward cursors."""

    def __init__(self) -> None:
        self.top_indices: list[torch.Tensor] = []
        self.forward_index = 0
        self.backward_index = 0

    def record(self, top_indices: torch.Tensor) -> None:
        self.top_indices.append(top_indices.detach().to("cpu", copy=True))

    def _pop(self, cursor: str, device: torch.device | str | None) -> torch.Tensor:
        index = getattr(self, cursor)
        if index >= len(self.top_indices):
            raise IndexError(f"routing replay exhausted ({cursor}={index})")
        setattr(self, cursor, index + 1)
        entry = self.top_indices[index]
        return entry if device is None else entry.to(device)

    def pop_forward(self, device: torch.device | str | None = None) -> torch.Tensor:
        return self._pop("forward_index", device)

    def pop_backward(self, device: torch.device | str | None = None) -> torch.Tensor:
        return self._pop("backward_index", device)

    def clear(self) -> None:
        self.top_indices = []
        self.forward_index = 0
        self.backward_index = 0

    def clear_forward(self) -> None:
        self.forward_index = 0


class RoutingReplayManager:
    """Process-wide registry of the routers' replays and the current replay stage."""

    def __init__(self) -> None:
        self.enabled = False
        self.stage = "fallthrough"
        self.replays: list[Replay] = []
        self.current: Replay | None = None

    def register_to_module(self, module: torch.nn.Module, attr_name: str) -> None:
        if not self.enabled:
            return
        replay = Replay()
        self.replays.append(replay)
        setattr(module, attr_name, replay)

        def make_current(_module: torch.nn.Module, _args: Any) -> None:
            self.current = replay

        module.register_forward_pre_hook(make_current)

    def get_topk_fn(self, fn: Callable[..., Any], return_probs: bool = True) -> Callable[..., Any]:
        def wrapper(scores: torch.Tensor, topk: int, *args: Any, **kwargs: Any) -> Any:
            if not self.enabled or self.stage == "fallthrough":
                return fn(scores, topk, *args, **kwargs)
            if self.stage == "record":
                result = fn(scores, topk, *args, **kwargs)
                assert self.current is not None, "record without a current replay"
                self.current.record(result[1] if return_probs else result)
                return result
            if self.stage not in ("replay_forward", "replay_backward"):
                raise ValueError(f"unknown routing replay stage {self.stage!r}")
            assert self.current is not None, "replay without a current replay"
            if self.stage == "replay_forward":
                top_indices = self.current.pop_forward(scores.device)
            else:
                top_indices = self.current.pop_backward(scores.device)
            expected = (scores.shape[0], topk)
            if tuple(top_indices.shape) != expected:
                raise ValueError(f"replayed indices {tuple(top_indices.shape)} != {expected}")
            padding = (top_indices == -1).all(dim=1)
            if bool(padding.any()):
                fill = torch.arange(topk, device=scores.device) % scores.shape[1]
                top_indices = torch.where(padding.unsqueeze(1), fill, top_indices)
            top_indices = top_indices.long()
            if return_probs:
                return scores.gather(1, top_indices), top_indices
            return top_indices

        return wrapper

    def reset(self) -> None:
        """Back to the defaults (tests call this between cases)."""
        self.__init__()  # type: ignore[misc]


routing_replay_manager = RoutingReplayManager()
