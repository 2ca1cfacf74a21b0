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

CALIBRATION_LENGTHS = (64, 256)  # sequence lengths timed, at batch 1 and 2
CALIBRATION_REPEATS = 3  # passes per shape; the fastest counts (the others saw noise)


@dataclass(frozen=True)
class StepCost:
    """The predicted time of one forward pass."""

    base_ms: float  # fixed cost of a pass (dispatch, small kernels)
    per_token_ms: float  # cost of each token of the batch (batch x length)

    def step_ms(self, batch: int, length: int) -> float:
        return self.base_ms + self.per_token_ms * batch * length

    def steps_for(self, latency_ms: float, batch: int, length: int, most: int,
                  overhead_ms: float = 0.0) -> int:
        """The most steps (at least 1, at most `most`) whose predicted time fits the target."""
        room = latency_ms - overhead_ms
        return max(1, min(most, math.floor(room / self.step_ms(batch, length))))


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
    """Time forward passes of `model` at a few shapes and fit the cost line."""
    samples = []
    for batch in (1, 2):
        for length in lengths:
            length = min(length, model.max_length)
            ids = torch.full((batch, length), model.mask_id, device=model.device)
            model.logits(ids)  # warm-up: first passes pay for allocation
            best = math.inf
            for _ in range(repeats):
                began = time.perf_counter()
                model.logits(ids)
                if model.device.type == "cuda":
                    torch.cuda.synchronize(model.device)
                best = min(best, (time.perf_counter() - began) * 1000)
            samples.append((batch * length, best))
    return fit(samples)
