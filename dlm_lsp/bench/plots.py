"""PNG plots of the benchmark curves (matplotlib, the optional `bench` extra).

matplotlib is imported only when a plot is asked for, with the Agg backend
(files, no display), so the server and the tests without plots never need it.
Figures are small on purpose (a few tens of KB): they are committed beside the
JSON that holds every number, and the README shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dlm_lsp.bench.pass_at_1 import settings_label

if TYPE_CHECKING:  # only for annotations: importing them needs no matplotlib
    from dlm_lsp.bench.latency import LatencyReport
    from dlm_lsp.bench.sweep import SweepReport
    from dlm_lsp.bench.throughput import ThroughputReport

SIZE = (9.0, 3.4)  # inches: two panels side by side
DPI = 90


class MissingMatplotlib(RuntimeError):
    """Plots were asked for but matplotlib is not installed."""


def require_matplotlib():
    """matplotlib.pyplot on the Agg backend, or MissingMatplotlib saying how to get it."""
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingMatplotlib("plots need matplotlib: pip install 'dlm-lsp[bench]' "
                                "(or pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _figure(title: str):
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=SIZE, dpi=DPI)
    fig.suptitle(title, fontsize=10)
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
    return plt, fig, axes


def _save(plt, fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _line(ax, xs: list, ys: list, label: str, **style):
    """One measured curve: small markers on every point (there are few, and each is a run)."""
    line, = ax.plot(xs, ys, **{"marker": "o", "markersize": 3, "label": label, **style})
    return line


def _where(report) -> str:
    """The model, device and threads a figure's numbers come from, for its title, the
    `--settings` it ran with, and "(partial: 7 of 50)" for a run stopped before it
    measured every point."""
    return (f"{report.model} ({report.machine.get('device')}, "
            f"{report.machine.get('torch_threads')} threads"
            f"{settings_label(report.config.engine)})"
            + (report.partial.mark() if report.partial else ""))


def _log2_axis(ax, ticks: list[int], label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel(label, fontsize=9)


def plot_sweep(report: SweepReport, directory: str | Path) -> list[Path]:
    """One PNG per task kind: pass@1 and ms per fill against the step budget.

    Stars mark saturation points, crosses collapse points (pass@1); the dotted
    line is left-to-right decoding by the same model, the dashed one the
    empty fill's pass@1 (the floor).
    """
    paths = []
    budgets = list(report.config.budgets)
    for kind in report.floors:  # the kinds measured (a stopped sweep may lack some)
        plt, fig, (quality, latency) = _figure(f"{kind}: step budget sweep, {_where(report)}")
        for curve in (c for c in report.curves if c.kind == kind):
            xs = [p.budget for p in curve.points]
            line = _line(quality, xs, [p.pass_at_1 for p in curve.points], curve.strategy)
            _line(latency, xs, [p.ms_per_fill for p in curve.points], curve.strategy,
                  color=line.get_color())
            marks = curve.marks["pass_at_1"]
            by_budget = {p.budget: p.pass_at_1 for p in curve.points}
            if marks.saturation is not None:
                quality.plot([marks.saturation], [by_budget[marks.saturation]], marker="*",
                             markersize=11, color=line.get_color(), linestyle="none")
            if marks.collapse is not None:
                quality.plot([marks.collapse], [by_budget[marks.collapse]], marker="x",
                             markersize=9, color=line.get_color(), linestyle="none")
        for p in (p for p in report.left_to_right if p.kind == kind):
            label = f"left-to-right ({p.mean_steps:g} steps)"
            quality.axhline(p.pass_at_1, color="black", linestyle=":", label=label)
            latency.axhline(p.ms_per_fill, color="black", linestyle=":", label=label)
        quality.axhline(report.floors[kind], color="grey", linestyle="--", label="empty fill")
        highest = max([p.pass_at_1 for c in report.curves for p in c.points if c.kind == kind]
                      + [p.pass_at_1 for p in report.left_to_right if p.kind == kind]
                      + [report.floors[kind]])
        quality.set_ylim(-1, max(10.0, 1.15 * highest))  # a flat curve at 0 stays readable
        quality.set_ylabel("pass@1 %  (* saturation, x collapse)", fontsize=9)
        latency.set_ylabel("ms per fill", fontsize=9)
        for ax in (quality, latency):
            _log2_axis(ax, budgets, "step budget")
        quality.legend(fontsize=7, loc="best", framealpha=0.6)
        latency.legend(fontsize=7, loc="best", framealpha=0.6)
        paths.append(_save(plt, fig, Path(directory) / f"sweep-{kind}.png"))
    return paths


def plot_latency(report: LatencyReport, path: str | Path) -> Path:
    """ms per fill and forward passes against the span length, one line per decoder."""
    plt, fig, (wall, passes) = _figure(f"latency vs span length: {_where(report)}")
    for method in report.methods:
        points = [p for p in report.points if p.method == method]
        xs = [p.tokens for p in points]
        _line(wall, xs, [p.median_ms for p in points], method)
        _line(passes, xs, [p.steps for p in points], method)
    wall.set_ylabel("ms per fill (median)", fontsize=9)
    passes.set_ylabel("forward passes", fontsize=9)
    for ax in (wall, passes):
        _log2_axis(ax, list(report.config.lengths), "span length (tokens)")
        ax.set_yscale("log")
        ax.legend(fontsize=7, loc="best", framealpha=0.6)
    return _save(plt, fig, Path(path))


def plot_throughput(report: ThroughputReport, path: str | Path) -> Path:
    """Fills per second and p50/p95 latency against concurrent requests, batched or alone."""
    plt, fig, (rate, latency) = _figure(
        f"throughput: {report.config.tokens}-token fills, {report.config.steps} steps, "
        f"{_where(report)}")
    for mode in report.modes:
        points = [p for p in report.points if p.mode == mode]
        xs = [p.concurrency for p in points]
        line = _line(rate, xs, [p.fills_per_s for p in points], mode)
        for p in points:
            if p.occupancy:
                rate.annotate(f"{p.occupancy:.1f}", (p.concurrency, p.fills_per_s),
                              fontsize=6, textcoords="offset points", xytext=(0, 4))
        _line(latency, xs, [p.p50_ms for p in points], f"{mode} p50", color=line.get_color())
        _line(latency, xs, [p.p95_ms for p in points], f"{mode} p95", color=line.get_color(),
              marker="^", linestyle="--")
    rate.set_ylabel("fills per second (labels: rows per pass)", fontsize=9)
    latency.set_ylabel("ms per fill", fontsize=9)
    for ax in (rate, latency):
        _log2_axis(ax, list(report.config.concurrency), "concurrent requests")
        ax.legend(fontsize=7, loc="best", framealpha=0.6)
    return _save(plt, fig, Path(path))
