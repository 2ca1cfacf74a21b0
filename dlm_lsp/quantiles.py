"""Latency quantiles, computed one way everywhere they are reported.

`dlm/status`, the remote backend's status, the benchmarks and the scripts in
benchmarks/ each had their own rule; one of them gave a p95 below the p50 for two
fills.  Nearest rank on the sorted values: the value at rank ceil(q * n), so a
quantile is always one of the values measured and never decreases as q grows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def quantile(values: Iterable[float], q: float) -> float | None:
    """The q-quantile (0 < q <= 1) of the values by nearest rank; None for no values."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def status_ms(ms: Iterable[float], q: float) -> float | None:
    """The q-quantile of fill times in milliseconds, to 0.1 ms, as `dlm/status` shows it."""
    found = quantile(ms, q)
    return None if found is None else round(found, 1)
