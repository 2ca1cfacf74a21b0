"""Latency quantiles: one rule (nearest rank) for `dlm/status`, the benchmarks and the
scripts in benchmarks/."""

import statistics

import pytest
from benchmark_scripts import script

from dlm_lsp.bench.output import quantile as bench_quantile
from dlm_lsp.quantiles import quantile, status_ms


def test_a_quantile_is_the_value_at_its_nearest_rank():
    assert quantile(range(1, 21), 0.95) == 19  # rank ceil(19) = 19
    assert quantile(range(1, 21), 0.5) == 10
    assert quantile(range(1, 21), 1.0) == 20
    assert quantile([7.0], 0.95) == 7.0
    assert quantile([], 0.5) is None


def test_order_does_not_matter_and_status_rounds_to_a_tenth():
    assert quantile([30, 10, 20], 0.5) == 20
    assert status_ms([12.345, 3.0], 0.95) == 12.3 and status_ms([], 0.95) is None


@pytest.mark.parametrize("values", [[766.0, 749.0], [1.0, 2.0, 3.0], [5.0, 5.0, 9.0, 1.0]])
def test_p95_is_never_below_the_median(values):
    assert quantile(values, 0.95) >= statistics.median(values) >= quantile(values, 0.05)
    assert bench_quantile(values, 0.95) >= statistics.median(values)


def test_the_lsp_latency_scripts_use_the_same_rule():
    """benchmarks/lsp_latency.py (and ghost_text.py, which imports it) printed p95 749 ms
    under p50 766 ms for two requests."""
    lsp_latency = script("lsp_latency")
    assert lsp_latency._p95([749.0, 766.0]) == 766.0  # sorted, as its callers pass them
    assert lsp_latency._p95(list(range(1, 21))) == quantile(range(1, 21), 0.95)
