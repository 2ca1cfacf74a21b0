"""Step budgets from latency targets: a per-step cost model of the model on its device.

A diffusion fill costs (steps x time of one forward pass), and the time of one
pass depends on the batch and the sequence length, not on how many tokens the
span will produce.  So a latency target becomes a step budget: measure a few
forward passes once per model and device, fit `ms = base + per_token * batch *
length` by least squares, and give a request the most steps that fit its target.
Calibration takes 16 passes (1.4 s for the shipped model on a quiet 2-core CPU, 8 s
on a busy one) and is kept for the life of the engine.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass

import torch

from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.sampler import span_forward

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


def passes_of(shapes: list[tuple[int, int]], max_rows: int,
              cost: StepCost | None = None) -> list[list[int]]:
    """How the batching worker packs requests of these (rows, sequence length) into forward
    passes: the indices of each pass's requests, at most `max_rows` rows a pass (a request
    larger than that alone), ordered by their first request.  The worker steps by it
    (`StepBatcher._groups`), and a latency target's budget is timed by it (`round_ms`).

    Requests of one length share a pass.  Without `cost` (a model that cannot pad a row,
    or none known) that is all.  With it, a pass of shorter rows joins a longer one,
    padded to its length (the pad masked for every query, `TinyModel.hidden`), where the
    cost model predicts the one pass faster than the two: padding costs the short rows'
    tokens up to the longer length, sharing saves a pass's fixed cost.  So it pays for
    lengths close together, or on a device where a pass costs little more than its base
    (a GPU), and not for a short fill beside a long one on a CPU, where a pass costs
    about its tokens: there the short fill's pass would cost the long one's."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, (_, length) in enumerate(shapes):
        by_length[length].append(i)
    passes = []
    for same in by_length.values():
        group: list[int] = []
        rows = 0
        for i in same:
            if group and rows + shapes[i][0] > max_rows:
                passes.append(group)
                group, rows = [], 0
            group.append(i)
            rows += shapes[i][0]
        passes.append(group)
    if cost is None:
        return passes

    def rows_of(p: list[int]) -> int:
        return sum(shapes[i][0] for i in p)

    def length_of(p: list[int]) -> int:
        return max(shapes[i][1] for i in p)

    merged: list[list[int]] = []
    for p in sorted(passes, key=length_of, reverse=True):  # each may join a longer one
        rows, length = rows_of(p), length_of(p)
        joins = [q for q in merged if rows_of(q) + rows <= max_rows
                 and cost.step_ms(rows_of(q) + rows, length_of(q))
                 < cost.step_ms(rows_of(q), length_of(q)) + cost.step_ms(rows, length)]
        if joins:  # the one padding it least
            min(joins, key=length_of).extend(p)
        else:
            merged.append(list(p))
    return sorted((sorted(p) for p in merged), key=min)


def round_ms(cost: StepCost, shapes: list[tuple[int, int]], max_rows: int,
             pads: bool = False) -> float:
    """The predicted time of one round of the batching worker over requests of these
    (rows, length): it steps every request once a round, a pass per group of
    `passes_of` (with the cost when the model `pads` rows), each costing its base and
    all its rows at its longest length."""
    return sum(cost.step_ms(sum(shapes[i][0] for i in p), max(shapes[i][1] for i in p))
               for p in passes_of(shapes, max_rows, cost if pads else None))


def shared_step_ms(cost: StepCost, rows: int, length: int, others: list[tuple[int, int]],
                   max_rows: int, pads: bool = False) -> float:
    """The predicted time of one step of a request (`rows` x `length`) that the batching
    worker runs beside `others` ((rows, length) each): the request's step lasts the
    worker's whole round (`round_ms`).  On a CPU a pass costs about its rows' tokens
    (four fills at once took four times as long a step): a step budget timed as if the
    request ran alone gave four fills with a 300 ms target 3.8 s each."""
    return round_ms(cost, [(rows, length), *others], max_rows, pads)


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
