"""Unmasking schedules: how many masked positions to commit at each step.

A schedule spreads a span of N tokens over a budget of S steps by a masking
curve m(t): after step s, about N * m((s+1)/S) positions are still masked.
N is what is masked when the loop (or a semi-autoregressive block) starts: the
whole span, or the masked part of a refinement or a repair.
`linear` (m = 1 - t) commits an equal share at every step.  `cosine`
(m = cos(pi/2 t), as in MaskGIT) and `back` (m = 1 - t^2) commit few tokens
early, when the model knows least, and many late; `front` (m = (1 - t)^2)
commits many early and refines the rest slowly.  Every schedule commits at
least one token per step while any remain, never more than remain, and all
that remain at the last step, so the loop always finishes within its budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable

Schedule = Callable[[int, int, int, int], int]
Curve = Callable[[float], float]


def _from_curve(curve: Curve) -> Schedule:
    """A schedule that keeps the masked count on `curve` (fraction masked vs. progress)."""

    def schedule(step: int, steps: int, remaining: int, total: int) -> int:
        if remaining <= 0:
            return 0
        if step >= steps - 1:
            return remaining
        still_masked = math.floor(total * curve((step + 1) / steps))
        return max(1, min(remaining, remaining - still_masked))

    return schedule


def linear(step: int, steps: int, remaining: int, total: int) -> int:
    """Commit an equal share of what remains (robust when re-masking adds some back)."""
    if remaining <= 0:
        return 0
    return min(remaining, math.ceil(remaining / max(1, steps - step)))


cosine = _from_curve(lambda t: math.cos(math.pi / 2 * t))
front = _from_curve(lambda t: (1 - t) ** 2)
back = _from_curve(lambda t: 1 - t * t)

SCHEDULES: dict[str, Schedule] = {"linear": linear, "cosine": cosine, "front": front,
                                  "back": back}
