"""Unmasking schedules: how many masked positions to commit at each step.

A schedule spreads the span's N tokens over the step budget S.  Linear commits
an equal share of what is left at every step; cosine follows the masking level
cos(pi/2 * s/S) of MaskGIT, committing few tokens early (when the model knows
least) and many late.  Both always finish by the last step.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int, int, int, int], int]


def linear(step: int, steps: int, remaining: int, total: int) -> int:
    """Commit an equal share of the remaining masked positions."""
    left = max(1, steps - step)
    return min(remaining, math.ceil(remaining / left))


def cosine(step: int, steps: int, remaining: int, total: int) -> int:
    """Commit so that the masked fraction after this step is cos(pi/2 * (step+1)/steps)."""
    if step >= steps - 1 or remaining <= 0:
        return max(0, remaining)
    still_masked = math.floor(total * math.cos(math.pi / 2 * (step + 1) / steps))
    return max(1, min(remaining, remaining - still_masked))


SCHEDULES: dict[str, Schedule] = {"linear": linear, "cosine": cosine}
