"""Where a benchmark's numbers go: a JSON of every number, a markdown summary, plots.

Every report here is a dataclass; JSON is its `asdict`, so nothing measured is
left out of the file and the file reads back with the same names.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TypeVar

from dlm_lsp.held_signals import held_signals
from dlm_lsp.quantiles import quantile as nearest_rank

R = TypeVar("R")


class OutputError(Exception):
    """A report file that could not be written: found before the run, not after it."""


def check_writable(option: str, path: str | Path) -> None:
    """Refuse a report path that cannot be written before the benchmark runs: a missing
    folder (or a file where one should be) raised its traceback only when the report
    was written, after every task had run."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise OutputError(f"{option} {path} is a folder; name a file")
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: no folder {folder}")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise OutputError(f"{option} {path}: cannot write there")


def write_json(path: str | Path, report: object) -> None:
    """Write a report (a dataclass or plain data) as indented JSON."""
    data = asdict(report) if is_dataclass(report) and not isinstance(report, type) else report
    write_text(path, json.dumps(data, indent=1) + "\n")


class StoppedAfterWriting(KeyboardInterrupt):
    """A signal held while a report was written, raised once the file was whole: the
    command line's last line said "no report written" of a file that was there."""

    def __init__(self, interrupt: KeyboardInterrupt, path: str | Path) -> None:
        super().__init__(*interrupt.args)  # the signal's name stays readable (signal_name)
        self.report = f"report written to {path}"  # for the command line's last line


def write_text(path: str | Path, text: str) -> None:
    """Write a markdown summary (or any text) as UTF-8.  Ctrl-C and SIGTERM wait for the
    write to end (`held_signals`): one that came while the report was written (a
    partial one after the first Ctrl-C, or a whole run's at its end) left the file cut
    short, JSON that no longer parsed.  The signal then stops the command as
    `StoppedAfterWriting`, which names the file."""
    try:
        with held_signals():
            Path(path).write_text(text, encoding="utf-8")
    except KeyboardInterrupt as exc:  # only as the block ends: the file is whole
        raise StoppedAfterWriting(exc, path) from None


def percent(count: int | float, total: int) -> float:
    """`count` of `total` in percent, one decimal (0 for an empty total)."""
    return round(100 * count / total, 1) if total else 0.0


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of the values (dlm_lsp.quantiles), 0 for no values."""
    found = nearest_rank(values, q)
    return 0.0 if found is None else found


def median(values: list[float]) -> float:
    """The median, 0 for no values."""
    return statistics.median(values) if values else 0.0


def publish(run: Callable[[], R], summarise: Callable[[R], str], json_out: str | None = None,
            markdown_out: str | None = None, plot: str | None = None,
            plot_to: str | None = None) -> R:
    """Run a benchmark, print its summary and write what was asked: JSON, markdown, plots.

    `plot` names the function of `plots.py` that draws the report into `plot_to`;
    matplotlib is checked before the run, so a missing extra costs no wasted run.
    """
    if plot_to:
        from dlm_lsp.bench.plots import require_matplotlib

        require_matplotlib()
    report = run()
    summary = summarise(report)
    print(summary, end="")
    if json_out:
        write_json(json_out, report)
    if markdown_out:
        write_text(markdown_out, summary)
    if plot and plot_to:
        from dlm_lsp.bench import plots

        drawn = getattr(plots, plot)(report, plot_to)
        for path in drawn if isinstance(drawn, list) else [drawn]:
            print(f"wrote {path}", file=sys.stderr)
    return report
