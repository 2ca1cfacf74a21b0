"""Specification of dlm_lsp.slowdown: the load factor that scales predicted steps."""

from __future__ import annotations

import pytest

from dlm_lsp.slowdown import LoadConfig, LoadFactor


def _noted(*ratios: float, config: LoadConfig | None = None) -> LoadFactor:
    factor = LoadFactor(config)
    for ratio in ratios:
        factor.note(10.0 * ratio, 10.0)
    return factor


def test_the_factor_is_one_before_any_pass_is_measured() -> None:
    assert LoadFactor().value == 1.0


def test_passes_twice_as_slow_as_predicted_double_the_factor() -> None:
    assert _noted(*[2.0] * 8).value == pytest.approx(2.0)


def test_a_quiet_machine_s_small_optimism_keeps_the_factor_at_one() -> None:
    """Calibration keeps the fastest pass; a quiet machine's passes run up to ~1.4x that
    (measured here: a median 1.17 alone, 1.36 for four fills a pass).  Budgets stay as
    the cost model has them."""
    assert _noted(1.1, 1.2, 1.3, 1.4, 1.17, 1.36, 1.6).value == 1.0


def test_passes_faster_than_predicted_never_buy_more_steps() -> None:
    assert _noted(0.5, 0.6, 0.4).value == 1.0


def test_the_factor_is_clamped_to_its_highest() -> None:
    assert _noted(*[20.0] * 4).value == LoadConfig().highest


def test_one_slow_pass_among_many_does_not_move_the_factor() -> None:
    assert _noted(*[1.0] * 7, 10.0).value == 1.0


def test_only_the_most_recent_passes_count() -> None:
    """The load went away: the passes of the busy minute before do not slow budgets."""
    factor = _noted(*[3.0] * 16, *[1.0] * 16)
    assert factor.value == 1.0


def test_clearing_forgets_the_passes_noted() -> None:
    factor = _noted(*[3.0] * 4)
    factor.clear()
    assert factor.value == 1.0


def test_a_prediction_of_nothing_is_not_counted() -> None:
    factor = _noted(2.0)
    factor.note(5.0, 0.0)  # a cost model that predicts 0 ms (a test's made-up one)
    assert factor.value == pytest.approx(2.0)
