"""`dlm-lsp bench throughput`: fills per second as concurrent requests grow.

A team server (or one editor asking for several things) has requests in
flight together.  The engine's batching worker (`serving.py`) steps every
running fill in shared forward passes, so N concurrent fills should cost far
less than N times one.  Here N threads (1, 2, 4, ...) call `engine.infill`
at once, each a few times in a row, on same-length fills of one document (the
worker batches fills of the same sequence length), and the run reports fills
per second, the p50 and p95 wall time of one fill as its caller saw it, and
the batch occupancy (rows per forward pass) from the worker's own counters.
The same load with batching off (`batchRows` 0: each fill alone, one after
another) is the comparison.

Every request is computed (no reuse of recent fills, and each has its own
seed); repair and the fallback are off, so every fill costs its budget.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass

from dlm_lsp.bench.filling import bench_engine
from dlm_lsp.bench.grids import CONCURRENCY, MODES
from dlm_lsp.bench.latency import CURSOR, DOCUMENT
from dlm_lsp.bench.machine import describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import publish, quantile
from dlm_lsp.config import InfillOptions
from dlm_lsp.engine import Engine, InfillRequest


@dataclass
class ThroughputConfig:
    """The load: concurrency levels, fills per thread, and each fill's size."""

    concurrency: tuple[int, ...] = CONCURRENCY
    fills_per_thread: int = 4  # each thread's fills, one after another
    tokens: int = 16  # span length of every fill
    steps: int = 8
    strategy: str = "confidence"
    modes: tuple[str, ...] = tuple(MODES)
    seed: int = 0
    model: str = "default"
    device: str = "auto"


@dataclass
class ThroughputPoint:
    """One mode at one concurrency level."""

    mode: str
    concurrency: int
    fills: int
    wall_s: float
    fills_per_s: float
    p50_ms: float  # one fill's wall time as its caller saw it (waiting included)
    p95_ms: float
    passes: int  # forward passes the model ran
    rows: int  # rows in them
    occupancy: float | None  # rows per pass (None without the batching worker)


@dataclass
class ThroughputReport:
    """Every point, with the machine and the code it ran on."""

    config: ThroughputConfig
    machine: dict
    revision: str | None
    model: str
    modes: list[str]
    points: list[ThroughputPoint]
    wall_s: float


class _Seeds:
    """Distinct seeds for every request of a run, handed out across threads."""

    def __init__(self, first: int):
        self._next, self._lock = first, threading.Lock()

    def take(self) -> int:
        with self._lock:
            self._next += 1
            return self._next


def _fill(engine: Engine, config: ThroughputConfig, seed: int) -> int:
    options = InfillOptions(length=config.tokens, steps=config.steps, strategy=config.strategy,
                            seed=seed, repair_rounds=0, fallback=False)
    return engine.infill(InfillRequest(DOCUMENT, CURSOR, CURSOR, "python",
                                       options=options)).steps


def measure(engine: Engine, config: ThroughputConfig, mode: str, threads: int,
            seeds: _Seeds) -> ThroughputPoint:
    """`threads` callers at once, each filling `fills_per_thread` times; count what it cost."""
    batcher = engine.batcher()
    before = (batcher.stats.passes, batcher.stats.rows) if batcher else (0, 0)
    start = threading.Barrier(threads + 1)
    times: list[float] = []
    steps: list[int] = []
    errors: list[BaseException] = []

    def caller() -> None:
        start.wait()
        for _ in range(config.fills_per_thread):
            began = time.perf_counter()
            try:
                steps.append(_fill(engine, config, seeds.take()))
            except BaseException as exc:  # reported after the join, not lost in a thread
                errors.append(exc)
                return
            times.append((time.perf_counter() - began) * 1000)

    workers = [threading.Thread(target=caller) for _ in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    began = time.perf_counter()
    for worker in workers:
        worker.join()
    wall = time.perf_counter() - began
    if errors:
        raise errors[0]
    if batcher:
        passes, rows = batcher.stats.passes - before[0], batcher.stats.rows - before[1]
    else:
        passes = rows = sum(steps)  # one request at a time: one row per pass
    return ThroughputPoint(mode, threads, len(times), round(wall, 2),
                           round(len(times) / wall, 2), round(quantile(times, 0.5), 1),
                           round(quantile(times, 0.95), 1), passes, rows,
                           round(rows / passes, 2) if batcher and passes else None)


def run_throughput(config: ThroughputConfig) -> ThroughputReport:
    """Every mode at every concurrency level, each mode on its own engine.

    The modes take turns at each level (not one whole sweep after the other),
    so on a shared machine both see the same background load.
    """
    began = time.perf_counter()
    seeds = _Seeds(config.seed)
    engines = {mode: bench_engine(config.model, config.device, batch_rows=MODES[mode])
               for mode in config.modes}
    for engine in engines.values():
        _fill(engine, config, seeds.take())  # warm-up
    points = []
    for threads in config.concurrency:
        for mode, engine in engines.items():
            points.append(measure(engine, config, mode, threads, seeds))
            p = points[-1]
            print(f"throughput {mode} x{threads}: {p.fills_per_s} fills/s, p50 {p.p50_ms} ms, "
                  f"occupancy {p.occupancy}", file=sys.stderr, flush=True)
    model = next(iter(engines.values())).model
    for engine in engines.values():
        if engine.batcher() is not None:
            engine.batcher().close()
    points.sort(key=lambda p: config.modes.index(p.mode))  # grouped by mode, levels in order
    return ThroughputReport(config, describe_machine(str(model.device)), source_revision(),
                            model.name, list(config.modes), points,
                            round(time.perf_counter() - began, 1))


def to_markdown(report: ThroughputReport) -> str:
    """A table: mode and concurrency, fills per second, p50/p95, rows per pass."""
    cfg = report.config
    lines = [f"Throughput: {cfg.tokens}-token fills, {cfg.steps} steps, {cfg.strategy}, "
             f"{cfg.fills_per_thread} fills per thread; model {report.model}; "
             f"{machine_line(report.machine)}; {report.machine['date']}, code "
             f"{report.revision or 'unknown'}.", "",
             "| mode | concurrent requests | fills/s | p50 ms | p95 ms | forward passes | "
             "rows per pass |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for p in report.points:
        occupancy = "-" if p.occupancy is None else f"{p.occupancy}"
        lines.append(f"| {p.mode} | {p.concurrency} | {p.fills_per_s} | {p.p50_ms:.0f} | "
                     f"{p.p95_ms:.0f} | {p.passes} | {occupancy} |")
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench throughput`: run, print the table, write JSON, markdown and the plot."""
    config = ThroughputConfig(concurrency=tuple(args.concurrency),
                              fills_per_thread=args.fills_per_thread, tokens=args.tokens,
                              steps=args.steps, modes=tuple(args.modes), seed=args.seed,
                              model=args.model, device=args.device)
    publish(lambda: run_throughput(config), to_markdown, args.json_out, args.markdown_out,
            "plot_throughput", args.plot)
    return 0
