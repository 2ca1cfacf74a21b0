"""Step budgets from latency targets: a per-step cost model of the model on its device.

A diffusion fill costs (steps x time of one forward pass), and the time of one
pass depends on the batch and the sequence length, not on how many tokens the
span will produce.  So a latency target becomes a step budget: measure a few
forward passes once per model and device, fit `ms = base + per_token * batch *
length` by least squares, and give a request the most steps that fit its target.
Calibration takes a few passes (well under a second for the shipped model on a
CPU) and is kept for the life of the engine.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.sampler import span_forward
from dlm_lsp.serving import passes_of

CALIBRATION_LENGTHS = (64, 256)  # sequence lengths timed, at batch 1 and 2
CALIBRATION_REPEATS = 3  # passes per shape; the fastest counts (the others saw noise)
CALIBRATION_SPAN = 16  # span rows the output head scores in a timed pass (a single line's)


@dataclass(frozen=True)
class StepCost:
    """The predicted time of one forward pass."""

    base_ms: float  # fixed cost of a pass (dispatch, small kernels)
    per_token_ms: float  # cost of each token of the batch (batch x length)

    def step_ms(self, batch: int, length: int) -> float:
        return self.base_ms + self.per_token_ms * batch * length

    def cycle_ms(self, batch: int, length: int, window: int, refresh: int) -> float:
        """The mean time of a step with the context cache: one step in `refresh` is a
        full pass over `length` tokens, the others run only `window` tokens (the span
        and the context recomputed beside it; dlm_lsp/models/cache.py)."""
        refresh = max(1, refresh)
        return (self.step_ms(batch, length)
                + (refresh - 1) * self.step_ms(batch, min(window, length))) / refresh

    def steps_for(self, latency_ms: float, batch: int, length: int, most: int,
                  overhead_ms: float = 0.0) -> int:
        """The most steps (at least 1, at most `most`) whose predicted time fits the target."""
        return steps_within(latency_ms, self.step_ms(batch, length), most, overhead_ms)


def shared_step_ms(cost: StepCost, rows: int, length: int, others: list[tuple[int, int]],
                   max_rows: int) -> float:
    """The predicted time of one step of a request (`rows` x `length`) that the batching
    worker runs beside `others` ((rows, length) each): the worker steps every request it
    holds once a round, so the request's step lasts the whole round, a pass per group of
    one length and at most `max_rows` rows.  On a CPU a pass costs about its rows' tokens
    (four fills at once took four times as long a step): a step budget timed as if the
    request ran alone gave four fills with a 300 ms target 3.8 s each."""
    shapes = [(rows, length), *others]
    total = 0.0
    for group in passes_of(shapes, max_rows):  # the worker's own packing
        n = shapes[group[0]][1]
        total += cost.base_ms + cost.per_token_ms * sum(shapes[i][0] for i in group) * n
    return total


def steps_within(latency_ms: float, step_ms: float, most: int, overhead_ms: float = 0.0) -> int:
    """The most steps (at least 1, at most `most`) of `step_ms` each that fit the target."""
    room = latency_ms - overhead_ms
    return max(1, min(most, math.floor(room / max(step_ms, 1e-9))))


def fit(samples: list[tuple[int, float]]) -> StepCost:
    """Least-squares line through (batch x length, ms) samples; never negative."""
    n = len(samples)
    mean_x = sum(x for x, _ in samples) / n
    mean_y = sum(y for _, y in samples) / n
    var = sum((x - mean_x) ** 2 for x, _ in samples)
    slope = 0.0 if var == 0 else sum((x - mean_x) * (y - mean_y) for x, y in samples) / var
    slope = max(slope, 0.0)
    return StepCost(max(mean_y - slope * mean_x, 0.0), slope)


def calibrate(model: DiffusionModel, lengths: tuple[int, ...] = CALIBRATION_LENGTHS,
              repeats: int = CALIBRATION_REPEATS) -> StepCost:
    """Time forward passes of `model` at a few shapes and fit the cost line.

    A pass is timed as the engine's steps run it: the output head on a span's rows
    only, where the model allows (`span_forward`), since scoring every position
    would cost more than a step does (a quarter of a step for the shipped model)."""
    samples = []
    for batch in (1, 2):
        for length in lengths:
            length = min(length, model.max_length)
            ids = torch.full((batch, length), model.mask_id, device=model.device)
            forward = span_forward(model, 0, min(CALIBRATION_SPAN, length))
            forward(ids)  # warm-up: first passes pay for allocation
            best = math.inf
            for _ in range(repeats):
                began = time.perf_counter()
                forward(ids)
                if model.device.type == "cuda":
                    torch.cuda.synchronize(model.device)
                best = min(best, (time.perf_counter() - began) * 1000)
            samples.append((batch * length, best))
    return fit(samples)
