"""How much slower forward passes run now than the cost model predicts: the load factor.

A latency target becomes a step budget through the cost model (`costs.StepCost`),
calibrated once from the fastest of a few timed passes.  On a machine that other
work shares (another job on the CPU's cores, a GPU serving someone else) passes run
about twice that long, and fills overran their targets by about that factor: rounds
of four fills took a median 135 ms against 65 ms predicted
(benchmarks/results/batching-lengths-cpu.md).  The batching worker times the passes
of fills with a target anyway, and a fill with a target run alone (no worker, or a
context cache) times its denoising; `LoadFactor` keeps the ratio of those measured
to predicted times and scales the predicted step by its recent median, so budgets
follow the load.

A quiet machine keeps its budgets exactly: the factor is never below 1 (a pass
that ran faster than calibrated buys no extra steps), and a median under `LoadConfig.
threshold` counts as 1 (the passes of a quiet machine run a little slower than the
fastest calibration pass; that small optimism was there before and budgets stay as
they were).  The median of a short window follows a change of load within a few
passes and ignores a single slow pass (a page fault, a garbage collection).
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class LoadConfig:
    """How the load factor is estimated."""

    window: int = 16  # the most recent passes whose ratio counts
    threshold: float = 1.5  # a median below this is a quiet machine's noise: factor 1
    highest: float = 4.0  # never scale a step by more (a stalled pass must not zero budgets)


class LoadFactor:
    """Measured / predicted time of recent forward passes, as a factor for predicted steps.

    Thread-safe: the batching worker notes passes, fills read the factor as they start,
    and `dlm/status` shows it."""

    def __init__(self, config: LoadConfig | None = None):
        self.config = config or LoadConfig()
        self._ratios: deque[float] = deque(maxlen=self.config.window)
        self._lock = threading.Lock()

    def note(self, measured_ms: float, predicted_ms: float) -> None:
        """Count one pass that took `measured_ms` where the cost model said `predicted_ms`."""
        if predicted_ms <= 0 or measured_ms < 0:
            return  # a cost model that predicts nothing has no ratio to keep
        with self._lock:
            self._ratios.append(measured_ms / predicted_ms)

    def clear(self) -> None:
        """Forget the passes noted: their ratios were to a cost model now replaced."""
        with self._lock:
            self._ratios.clear()

    @property
    def value(self) -> float:
        """The factor to scale a predicted step by: 1 until passes are measured, on a quiet
        machine, or where passes run faster than predicted; else the recent median ratio,
        at most `highest`."""
        with self._lock:
            if not self._ratios:
                return 1.0
            median = statistics.median(self._ratios)
        if median < self.config.threshold:
            return 1.0
        return min(median, self.config.highest)
