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
another) is the comparison.  Both modes run without the context cache, which is on by
default on a CPU (`contextCache: "auto"`): a fill with it runs alone, so the batched mode
would have shared no pass; `--settings '{"contextCache": true}'` measures it, both modes
then alone.

With `--beside-long`, every other caller fills a long document instead
(`LONG_DOCUMENT`: the same function after enough code to fill the model's
context), so small fills run beside large ones, whose sequences differ in
length: the report gives each kind's p50 too.  Fills of different lengths share a
pass only where the cost model says a padded pass is faster than two
(`costs.passes_of`).

With `--latency-ms`, each fill's steps come from that latency target (the
callers start together: what the batching worker's timing of shared rounds is for).

Every request is computed (no reuse of recent fills, and each has its own
seed); repair and the fallback are off, so every fill costs its budget.
Progress goes to stderr; a run stopped by Ctrl-C or SIGTERM reports the fills
finished before the signal (those under way are stopped at their next step),
marked partial (`progress.py`).
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlm_lsp.bench.filling import bench_engine
from dlm_lsp.bench.grids import CONCURRENCY, MODES
from dlm_lsp.bench.latency import CURSOR, DOCUMENT, planned
from dlm_lsp.bench.machine import code_label, describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import publish, quantile
from dlm_lsp.bench.pass_at_1 import (
    UsageError,
    distinct,
    engine_settings,
    refuse_repeats,
    settings_label,
)
from dlm_lsp.bench.progress import Partial, Progress, Stoppable, latest
from dlm_lsp.config import InfillOptions
from dlm_lsp.engine import Engine, InfillRequest

WAIT_S = 0.5  # how often the thread waiting for a point's callers looks up (progress)
# The bench document after 60 small functions: its context fills the model's 448 tokens.
LONG_DOCUMENT = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n"
                        for i in range(60)) + DOCUMENT
LONG_CURSOR = len(LONG_DOCUMENT) - len(DOCUMENT) + CURSOR


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
    beside_long: bool = False  # every other caller fills LONG_DOCUMENT
    latency_ms: int | None = None  # a latency target: each fill's steps from it, not `steps`
    engine: dict = field(default_factory=dict)  # more server settings (`--settings`, checked)

    def __post_init__(self) -> None:
        refuse_repeats("--modes", self.modes)  # one engine per mode: a repeat was counted twice
        self.concurrency = distinct(self.concurrency)


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
    # with --beside-long: the p50 of the short document's fills and of the long one's
    p50_short_ms: float | None = None
    p50_long_ms: float | None = None


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
    partial: Partial | None = None  # a run stopped by a signal: the fills it covers


class _Seeds:
    """Distinct seeds for every request of a run, handed out across threads."""

    def __init__(self, first: int):
        self._next, self._lock = first, threading.Lock()

    def take(self) -> int:
        with self._lock:
            self._next += 1
            return self._next


# Each mode's engine sets its batching itself (`MODES`): like the settings its fills'
# options set (`_options`), not one `--settings` may give.
SET_ON_THE_ENGINE = ("batch_rows",)
# The options that set what each fill asks for and the batching, by the setting they
# replace: what `--settings` is told to give instead (`pass_at_1.engine_settings`)
FLAGS = {"steps": "--steps", "latency_ms": "--latency-ms", "seed": "--seed",
         "length": "--tokens", "batch_rows": "--modes"}


def _options(config: ThroughputConfig, seed: int) -> InfillOptions:
    """One fill's options: its budget (or latency target), no repair, no fallback."""
    return InfillOptions(length=config.tokens, steps=config.steps, strategy=config.strategy,
                         seed=seed, repair_rounds=0, fallback=False,
                         latency_ms=config.latency_ms)


def _fill(engine: Engine, config: ThroughputConfig, seed: int,
          should_stop: Callable[[], bool] | None = None, long: bool = False) -> int:
    options = _options(config, seed)
    text, at = (LONG_DOCUMENT, LONG_CURSOR) if long else (DOCUMENT, CURSOR)
    return engine.infill(InfillRequest(text, at, at, "python", options=options,
                                       should_stop=should_stop)).steps


class Load:
    """One point: `threads` callers at once on one engine, each filling `fills_per_thread`
    times in a row.

    Stopped (a signal in the thread that waits for them), the callers start no other
    fill and those under way end at their next step; the point is then the fills
    finished before the signal, over the time until it.
    """

    def __init__(self, engine: Engine, config: ThroughputConfig, mode: str, threads: int,
                 seeds: _Seeds) -> None:
        self.engine, self.config, self.mode, self.threads, self.seeds = (engine, config, mode,
                                                                         threads, seeds)
        self.batcher = engine.batcher()
        self.before = self._counters()
        # (ms as the caller saw it, steps, of the long document) each
        self.fills: list[tuple[float, int, bool]] = []
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()
        self.began: float | None = None
        self.kept = 0  # the fills the point counts: all, or those before the signal
        self.ended = 0.0
        self.after = self.before

    def _counters(self) -> tuple[int, int]:
        """The batching worker's forward passes and rows so far."""
        return (self.batcher.stats.passes, self.batcher.stats.rows) if self.batcher else (0, 0)

    def run(self, waiting: Callable[[], None]) -> None:
        """Start the callers together and wait for them, calling `waiting` now and then.

        Each caller says it has ended with an event, not its thread's join: on Python
        3.11 a join that a signal interrupts marks the thread as ended while it runs on,
        so the callers were not waited for, and the process could exit with one inside
        a forward pass (torch then aborts it: "terminate called without an active
        exception").
        """
        start = threading.Barrier(self.threads + 1)
        ended = [threading.Event() for _ in range(self.threads)]
        workers = [threading.Thread(target=self._caller, args=(
            start, end, self.config.beside_long and i % 2 == 1)) for i, end in enumerate(ended)]
        try:
            for worker in workers:
                worker.start()
            start.wait()
            self.began = time.perf_counter()
            for end in ended:
                while not end.wait(WAIT_S):
                    waiting()
        except KeyboardInterrupt:
            self._end()
            self.stopping.set()
            start.abort()  # callers not yet at the start do not begin
            for worker, end in zip(workers, ended, strict=True):
                if worker.ident is not None:  # started: it ends at its fill's next step
                    end.wait()
            raise
        self._end()
        if self.errors:
            raise self.errors[0]

    def _end(self) -> None:
        self.ended, self.after = time.perf_counter(), self._counters()
        self.kept = len(self.fills) if self.began is not None else 0

    def _caller(self, start: threading.Barrier, end: threading.Event, long: bool) -> None:
        try:
            start.wait()
            for _ in range(self.config.fills_per_thread):
                if self.stopping.is_set():
                    return
                began = time.perf_counter()
                steps = _fill(self.engine, self.config, self.seeds.take(), self.stopping.is_set,
                              long)
                self.fills.append(((time.perf_counter() - began) * 1000, steps, long))
        except threading.BrokenBarrierError:  # stopped before the callers began
            pass
        except BaseException as exc:  # reported once the callers end, not lost in a thread
            self.errors.append(exc)
        finally:
            end.set()

    def point(self) -> ThroughputPoint:
        """What the fills kept cost."""
        assert self.began is not None
        kept = self.fills[:self.kept]
        times = [ms for ms, _, _ in kept]
        wall = self.ended - self.began
        if self.batcher:
            passes, rows = self.after[0] - self.before[0], self.after[1] - self.before[1]
        else:  # one request at a time: one row per pass
            passes = rows = sum(steps for _, steps, _ in kept)

        def p50(long: bool) -> float | None:
            mine = [ms for ms, _, of_long in kept if of_long == long]
            return round(quantile(mine, 0.5), 1) if self.config.beside_long and mine else None
        return ThroughputPoint(self.mode, self.threads, len(times), round(wall, 2),
                               round(len(times) / wall, 2), round(quantile(times, 0.5), 1),
                               round(quantile(times, 0.95), 1), passes, rows,
                               round(rows / passes, 2) if self.batcher and passes else None,
                               p50(False), p50(True))


def run_throughput(config: ThroughputConfig) -> ThroughputReport:
    """Every mode at every concurrency level, each mode on its own engine.

    The modes take turns at each level (not one whole sweep after the other),
    so on a shared machine both see the same background load.  Stopped by a
    signal, the report has the points measured and the one under way over the fills
    it finished, marked partial (`progress.py`).
    """
    began = time.perf_counter()
    seeds = _Seeds(config.seed)
    engines = {mode: bench_engine(config.model, config.device, batch_rows=MODES[mode],
                                  **{"context_cache": False, **config.engine})
               for mode in config.modes}
    for engine in engines.values():
        _fill(engine, config, seeds.take())  # warm-up
    progress = Progress("throughput", len(config.modes) * config.fills_per_thread
                        * sum(config.concurrency), "fills")
    points: list[ThroughputPoint] = []
    load: Load | None = None
    # occupancy "-" without the batching worker, as the table says it (not Python's None)
    detail = latest(points, lambda p: f"{p.mode} x{p.concurrency}: {p.fills_per_s} fills/s, "
                    f"p50 {p.p50_ms} ms, occupancy "
                    f"{'-' if p.occupancy is None else p.occupancy}")

    def waiting() -> None:
        progress.update(sum(p.fills for p in points) + len(load.fills), detail())

    def keep_the_point_under_way() -> None:  # over the fills it finished
        if load is not None and load.kept and (load.mode, load.threads) not in {
                (p.mode, p.concurrency) for p in points}:
            points.append(load.point())
    try:
        with Stoppable(progress, lambda: sum(p.fills for p in points), detail,
                       keep_the_point_under_way) as loop:
            for threads in config.concurrency:
                for mode, engine in engines.items():
                    load = Load(engine, config, mode, threads, seeds)
                    load.run(waiting)
                    points.append(load.point())
    finally:  # the batching workers end before the report (None: batching off)
        for batcher in (engine.batcher() for engine in engines.values()):
            if batcher is not None:
                batcher.close()
    model = next(iter(engines.values())).model
    points.sort(key=lambda p: config.modes.index(p.mode))  # grouped by mode, levels in order
    return ThroughputReport(config, describe_machine(str(model.device)), source_revision(),
                            model.name, list(config.modes), points,
                            round(time.perf_counter() - began, 1), loop.partial)


def to_markdown(report: ThroughputReport) -> str:
    """A table: mode and concurrency, fills per second, p50/p95, rows per pass."""
    cfg = report.config
    budget = f"{cfg.steps} steps" if cfg.latency_ms is None else (
        f"steps from a {cfg.latency_ms} ms latency target")
    lines = [f"Throughput: {cfg.tokens}-token fills, {budget}, {cfg.strategy}, "
             f"{cfg.fills_per_thread} fills per thread{settings_label(cfg.engine)}; "
             f"model {report.model}; "
             f"{machine_line(report.machine)}; {report.machine['date']}, code "
             f"{code_label(report.revision)}.", "",
             "| mode | concurrent requests | fills/s | p50 ms | p95 ms | forward passes | "
             "rows per pass |", "| --- | --- | --- | --- | --- | --- | --- |"]
    if cfg.beside_long:
        lines[0] += (" Every other caller fills a long document (its context the model's "
                     "whole): p50 of the short and of the long fills.")
        lines[2] += " short p50 ms | long p50 ms |"
        lines[3] += " --- | --- |"
    if report.partial:
        lines.insert(0, report.partial.heading)
    for p in report.points:
        occupancy = "-" if p.occupancy is None else f"{p.occupancy}"
        planned = p.concurrency * cfg.fills_per_thread
        mode = p.mode + (f" (partial: {p.fills} of {planned} fills)" if p.fills < planned
                         else "")
        row = (f"| {mode} | {p.concurrency} | {p.fills_per_s} | {p.p50_ms:.0f} | "
               f"{p.p95_ms:.0f} | {p.passes} | {occupancy} |")
        if cfg.beside_long:
            row += "".join(" - |" if ms is None else f" {ms:.0f} |"
                           for ms in (p.p50_short_ms, p.p50_long_ms))
        lines.append(row)
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench throughput`: run, print the table, write JSON, markdown and the plot."""
    if args.steps is not None and args.latency_ms is not None:  # --steps was ignored
        raise UsageError("--steps and --latency-ms: the latency target picks each fill's "
                         "steps; give one of them")
    config = ThroughputConfig(concurrency=tuple(args.concurrency),
                              fills_per_thread=args.fills_per_thread, tokens=args.tokens,
                              steps=ThroughputConfig.steps if args.steps is None else args.steps,
                              modes=tuple(args.modes), seed=args.seed,
                              model=args.model, device=args.device,
                              beside_long=args.beside_long, latency_ms=args.latency_ms)
    # refused before the model loads; so are the settings every fill sets, and those
    # none reads (a rewrite's: the long document's cursor is the same empty line)
    config.engine = engine_settings(args.settings, SET_ON_THE_ENGINE,
                                    (planned(_options(config, config.seed)),), FLAGS)
    publish(lambda: run_throughput(config), to_markdown, args.json_out,
            args.markdown_out, "plot_throughput", args.plot)
    return 0
