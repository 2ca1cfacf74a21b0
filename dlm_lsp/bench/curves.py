"""Where a quality-versus-steps curve stops rising and where it falls apart.

A step budget is the server's knob between latency and quality, so the two
points a user needs are: the *saturation point*, the smallest budget whose
quality is already within `epsilon` of the best the curve reaches (more steps
after it buy latency, not quality), and the *collapse point*, the largest
budget under the saturation point whose quality is below `ratio` of the best
(at and under it, fewer steps break the fills).  A dip above the saturation
point is noise or over-refinement, not a collapse: the collapse is what
happens as the budget shrinks.  Both are read off the measured points only;
nothing is interpolated, so they are budgets someone can set.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CurveMarks:
    """The saturation and collapse points of one curve, and what they were measured against."""

    metric: str  # the quality measure: pass_at_1 or exact_match (percent)
    best: float  # the highest quality on the curve
    saturation: int | None  # smallest budget within epsilon of the best; None without points
    collapse: int | None  # largest budget under saturation below ratio * best; None: none is
    flat: bool  # the whole curve lies within epsilon: the budget does not move quality
    epsilon: float = 2.0  # percentage points
    ratio: float = 0.5


def saturation_point(budgets: list[int], quality: list[float], epsilon: float) -> int | None:
    """The smallest budget whose quality is within `epsilon` of the curve's best."""
    if not budgets:
        return None
    best = max(quality)
    return min(b for b, q in zip(budgets, quality, strict=True) if q >= best - epsilon)


def collapse_point(budgets: list[int], quality: list[float], ratio: float,
                   epsilon: float = 0.0) -> int | None:
    """The largest budget under the saturation point whose quality is below `ratio` of the
    best; None if there is none.

    A curve whose best is 0 has nothing to lose, so it has no collapse point.
    """
    if not budgets or max(quality) <= 0:
        return None
    bar, saturation = ratio * max(quality), saturation_point(budgets, quality, epsilon)
    below = [b for b, q in zip(budgets, quality, strict=True) if q < bar and b < saturation]
    return max(below) if below else None


def mark_curve(budgets: list[int], quality: list[float], metric: str, epsilon: float = 2.0,
               ratio: float = 0.5) -> CurveMarks:
    """Both points of one curve (budgets and quality in the same order)."""
    best = max(quality) if quality else 0.0
    flat = bool(quality) and best - min(quality) <= epsilon
    return CurveMarks(metric, best, saturation_point(budgets, quality, epsilon),
                      collapse_point(budgets, quality, ratio, epsilon), flat, epsilon, ratio)
