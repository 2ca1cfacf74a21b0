"""Replaying a step's forward pass as a captured CUDA graph, one graph per input shape.

A step of the shipped model is a few dozen small kernels.  On a GPU the time to
launch them from Python is most of the step (on an H200, at batch 1 and 512
tokens, a 30M-parameter model's step took about 3.2 ms eager and 0.7 ms as a
replayed graph), so the engine's latency on CUDA is set by launch overhead, not
arithmetic.  A CUDA graph records the kernels once and replays them with one
launch, but only for the exact shapes, buffers and memory it recorded: the input
must be copied into the buffer the graph reads, and its output buffer is
rewritten by the next replay.

`ShapeGraphs` wraps a forward function with that bookkeeping:

- A shape is captured on its `after`-th call (a fill runs one shape for all of
  its steps, so its first step runs eagerly and the rest replay; a shape seen
  once, such as an editor's one-off request, never costs a capture).
- At most `max_graphs` shapes are kept; the least recently used is dropped.
  All graphs share one memory pool: replays never overlap (a lock), and each
  replay recomputes every intermediate it reads.
- Each call copies its input in, replays, and returns a copy of the output
  while holding the lock, so concurrent callers (requests running without the
  batching worker) never see each other's results.
- If a capture fails (an operation that cannot be captured, a driver that does
  not support it), the wrapper says why once and runs eagerly from then on: a
  graph is an optimisation, never a reason for a fill to fail.

The capture itself is `cuda_capture`; tests substitute a capture with the same
buffer semantics to check the bookkeeping on machines without CUDA.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

Forward = Callable[[torch.Tensor], torch.Tensor]
WARMUP_RUNS = 2  # eager runs on a side stream before capturing (lazy init, autotuning)
MAX_TRACKED = 1024  # shapes counted towards a capture; the count restarts past it


@dataclass
class GraphConfig:
    """When shapes are captured and how many are kept."""

    after: int = 2  # capture a shape on its after-th call; the calls before run eagerly
    max_graphs: int = 32  # shapes kept (batch rows x sequence length); LRU beyond


@dataclass
class GraphStats:
    """What the wrapper has done, for `dlm/status`."""

    captured: int = 0
    replays: int = 0
    eager: int = 0
    evicted: int = 0
    failed: str | None = None  # why graphs were switched off, if they were


class Replay(Protocol):
    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """Copy `ids` into the captured input, replay, return the captured output."""


Capture = Callable[[Forward, torch.Tensor, object], tuple[Replay, object]]


def cuda_capture(fn: Forward, example: torch.Tensor, pool: object) -> tuple[Replay, object]:
    """Capture fn over a static copy of `example`; returns (replay, memory pool).

    Warm-up runs go on a side stream, as CUDA requires before a capture;
    `thread_local` capture lets other threads keep using the device meanwhile.
    """
    device = example.device
    static_in = example.clone()
    side = torch.cuda.Stream(device=device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_RUNS):
            fn(static_in)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
        static_out = fn(static_in)

    def replay(ids: torch.Tensor) -> torch.Tensor:
        static_in.copy_(ids)
        graph.replay()
        return static_out

    return replay, graph.pool()


class ShapeGraphs:
    """`fn` run eagerly for new shapes and as a replayed graph for repeated ones."""

    def __init__(self, fn: Forward, config: GraphConfig | None = None,
                 capture: Capture = cuda_capture):
        self.fn, self.config, self.capture = fn, config or GraphConfig(), capture
        self.stats = GraphStats()
        self._graphs: OrderedDict[tuple, Replay] = OrderedDict()
        self._seen: dict[tuple, int] = {}
        self._pool: object = None
        self._lock = threading.Lock()

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        key = (tuple(ids.shape), ids.dtype, str(ids.device))
        with self._lock:
            replay = self._graphs.get(key)
            if replay is None and self.stats.failed is None:
                replay = self._maybe_capture(key, ids)
            if replay is None:
                self.stats.eager += 1
                return self.fn(ids)
            self._graphs.move_to_end(key)
            self.stats.replays += 1
            return replay(ids).clone()

    def _maybe_capture(self, key: tuple, ids: torch.Tensor) -> Replay | None:
        if len(self._seen) >= MAX_TRACKED and key not in self._seen:
            self._seen.clear()  # many one-off shapes: forget them rather than grow
        seen = self._seen[key] = self._seen.get(key, 0) + 1
        if seen < self.config.after:
            return None
        try:
            replay, self._pool = self.capture(self.fn, ids, self._pool)
        except Exception as exc:  # noqa: BLE001 -- any failure: run eagerly for good
            self.stats.failed = f"{type(exc).__name__}: {exc}"
            self._graphs.clear()
            return None
        del self._seen[key]
        self._graphs[key] = replay
        self.stats.captured += 1
        while len(self._graphs) > self.config.max_graphs:
            self._graphs.popitem(last=False)
            self.stats.evicted += 1
        return replay

    def shapes(self) -> list[tuple[int, ...]]:
        """The captured input shapes, least recently used first."""
        with self._lock:
            return [key[0] for key in self._graphs]
