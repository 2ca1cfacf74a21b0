"""`dlm-lsp bench latency`: wall time per fill as the span grows, diffusion against left to right.

The claim behind a diffusion server: its latency follows the step budget, not
the length of the fill, while left-to-right decoding needs one forward pass
per token.  Here one fixed document is filled at span lengths 8 ... 256
tokens, each length with a fixed budget (16 steps; a span shorter than the
budget takes one step per token, the engine's cap) and with left-to-right
decoding by the same model.  The cost of one pass still grows with the
sequence (prefix + span + suffix), so the diffusion curve is not flat; what
the claim predicts is that it grows far slower than the baseline's, whose
passes grow with the span.

Optionally the autoregressive baseline model (`--baseline-model smollm2`,
`autoregressive.py`) writes the same number of tokens after the same prefix
with its KV cache: the cost of the alternative a user could pick.

Each point is the median of a few fills, after one warm-up fill per decoder,
every one computed (the benchmark engine never answers from its recent
fills, and each fill has its own seed).  Repair and the fallback are off:
only the decoding is timed.  So is the stop of a settled fill: left to right,
it would end at the model's first pad, and the baseline here writes the whole
span, as SmolLM2 writes all its tokens.  Progress goes to stderr; a run stopped by
Ctrl-C or SIGTERM reports the fills it timed, marked partial (`progress.py`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dlm_lsp.bench.autoregressive import ARModel, load_baseline
from dlm_lsp.bench.filling import bench_engine
from dlm_lsp.bench.grids import LEFT_TO_RIGHT, LENGTHS
from dlm_lsp.bench.machine import code_label, describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import median, publish
from dlm_lsp.bench.pass_at_1 import UsageError, distinct, engine_settings, settings_label
from dlm_lsp.bench.progress import Partial, Progress, Stoppable, latest
from dlm_lsp.config import InfillOptions
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.policy import task_kind

# A small module with an empty function body to fill: short enough that the longest
# span plus its context fits the default model's 512 positions untrimmed.
DOCUMENT = (
    "import json\n"
    "from pathlib import Path\n\n\n"
    "def load_settings(path: Path) -> dict:\n"
    '    """Read a JSON settings file; a missing file gives the defaults."""\n'
    "    \n"
    "\n\n"
    "def save_settings(path: Path, settings: dict) -> None:\n"
    "    path.write_text(json.dumps(settings, indent=2))\n"
)
CURSOR = DOCUMENT.index("    \n\n\n") + 4


@dataclass
class LatencyConfig:
    """Span lengths, the diffusion budget, repeats, and what to compare."""

    lengths: tuple[int, ...] = LENGTHS
    steps: int = 16  # the diffusion budget at every length
    strategy: str = "confidence"
    repeats: int = 3  # fills per point; the median is reported
    left_to_right: bool = True
    baseline_model: str | None = None  # e.g. "smollm2": an autoregressive model beside
    seed: int = 0
    model: str = "default"
    device: str = "auto"
    engine: dict = field(default_factory=dict)  # more server settings (`--settings`, checked)

    def __post_init__(self) -> None:
        self.lengths = distinct(self.lengths)  # a length given twice is one point


@dataclass
class LatencyPoint:
    """One decoder at one span length."""

    method: str
    tokens: int  # span length
    steps: int  # forward passes of one fill
    median_ms: float
    min_ms: float
    ms_per_step: float
    fills: int  # fills the median is over: the repeats, fewer in a stopped run's last point


@dataclass
class LatencyReport:
    """Every point, the decoders compared, and how much each slowed from shortest to longest."""

    config: LatencyConfig
    machine: dict
    revision: str | None
    model: str
    methods: list[str]
    points: list[LatencyPoint]
    growth: dict[str, float] = field(default_factory=dict)  # method -> ms at longest / shortest
    wall_s: float = 0.0
    partial: Partial | None = None  # a run stopped by a signal: the fills it covers


# The engine's span cap, which the benchmark sets from its longest span: like the
# settings its fills' options set (`_options`), not one `--settings` may give.
SET_ON_THE_ENGINE = ("max_span_tokens",)
# The options that set what the timed fills ask for, by the setting they replace: what
# `--settings` is told to give instead (`pass_at_1.engine_settings`)
FLAGS = {"steps": "--steps", "strategy": "--strategy", "seed": "--seed",
         "length": "--lengths"}


def _options(tokens: int, strategy: str, steps: int, seed: int) -> InfillOptions:
    """One timed fill's options: the decoding alone, every step of it."""
    return InfillOptions(length=tokens, steps=steps, strategy=strategy, seed=seed,
                         repair_rounds=0, fallback=False, stop_when_settled=False)


def planned(options: InfillOptions) -> InfillOptions:
    """A timed fill's options as `--settings` is checked against them (`pass_at_1.
    engine_settings`): with the kind the policy plans at the cursor, which has no
    selection and so is never a rewrite (`policy.task_kind`; the fill itself leaves its
    kind to the policy, as an editor's does).  `strength` and the rewrite budgets, which
    no such fill reads, were taken and labelled every row (`pass_at_1.UNREAD`)."""
    return replace(options, kind=task_kind(DOCUMENT, CURSOR, CURSOR))


def _infill_ms(engine: Engine, tokens: int, strategy: str, steps: int,
               seed: int) -> tuple[float, int]:
    options = _options(tokens, strategy, steps, seed)
    result = engine.infill(InfillRequest(DOCUMENT, CURSOR, CURSOR, "python", options=options))
    return result.ms, result.steps


def _point(method: str, tokens: int, runs: list[tuple[float, int]]) -> LatencyPoint:
    times = [ms for ms, _ in runs]
    steps = int(median([s for _, s in runs]))
    ms = median(times)
    return LatencyPoint(method, tokens, steps, round(ms, 1), round(min(times), 1),
                        round(ms / max(1, steps), 2), len(runs))


def run_latency(config: LatencyConfig, engine: Engine | None = None,
                baseline: ARModel | None = None) -> LatencyReport:
    """Time every decoder at every span length.  Stopped by a signal, report the points
    measured, the one under way over the fills it made, marked partial (`progress.py`)."""
    began = time.perf_counter()
    engine = engine or bench_engine(config.model, config.device,
                                    max_span_tokens=max(config.lengths), **config.engine)
    positions = engine.model.max_length
    too_long = [tokens for tokens in config.lengths if tokens >= positions]
    if too_long:  # ran for minutes without a line (100,000 tokens: 120 s and more)
        raise UsageError(f"--lengths {' '.join(map(str, too_long))}: the model holds "
                         f"{positions} positions, the span and the document around it; give "
                         f"lengths below {positions}")
    if config.baseline_model and baseline is None:
        baseline = load_baseline(config.baseline_model, config.device)
    seeds = iter(range(config.seed, config.seed + 1_000_000))
    timers: dict[str, Callable[[int], tuple[float, int]]] = {
        f"diffusion, {config.strategy}, {config.steps} steps":
            lambda tokens: _infill_ms(engine, tokens, config.strategy, config.steps,
                                      next(seeds))}
    if config.left_to_right:
        timers[f"{LEFT_TO_RIGHT} (same model)"] = lambda tokens: _infill_ms(
            engine, tokens, LEFT_TO_RIGHT, config.steps, next(seeds))
    if baseline is not None:
        timers[f"{baseline.short or baseline.name} (autoregressive, KV cache)"] = (
            lambda tokens: baseline.time_tokens(DOCUMENT[:CURSOR], tokens))
    for time_fill in timers.values():  # warm-up: first passes pay for allocation
        time_fill(min(config.lengths))
    progress = Progress("latency", len(config.lengths) * len(timers) * config.repeats, "fills")
    points: list[LatencyPoint] = []
    runs: list[tuple[float, int]] = []  # the fills of the point under way
    detail = latest(points, lambda p: f"{p.tokens} tokens, {p.method}: {p.median_ms:.0f} ms")

    def keep_the_point_under_way() -> None:  # over the fills it made
        if runs and (method, tokens) not in {(p.method, p.tokens) for p in points}:
            points.append(_point(method, tokens, runs))
    with Stoppable(progress, lambda: sum(p.fills for p in points), detail,
                   keep_the_point_under_way) as loop:
        for tokens in config.lengths:
            for method, time_fill in timers.items():
                runs = []
                for _ in range(config.repeats):
                    runs.append(time_fill(tokens))
                    progress.update(sum(p.fills for p in points) + len(runs), detail())
                points.append(_point(method, tokens, runs))
    methods = list(dict.fromkeys(p.method for p in points))
    growth = {}
    for method in methods:
        ms = [p.median_ms for p in points if p.method == method]
        growth[method] = round(ms[-1] / ms[0], 1) if ms and ms[0] else 0.0
    return LatencyReport(config, describe_machine(str(engine.model.device)), source_revision(),
                         engine.model.name, methods, points, growth,
                         round(time.perf_counter() - began, 1), loop.partial)


def to_markdown(report: LatencyReport) -> str:
    """A table: span length by decoder, median ms per fill (forward passes).  A stopped
    run's lengths not begun are left out, its points not measured are "-"."""
    cfg = report.config
    lines = [f"Latency per fill against span length: model {report.model}"
             f"{settings_label(cfg.engine)}, median of "
             f"{cfg.repeats} fills, {machine_line(report.machine)}; {report.machine['date']}, "
             f"code {code_label(report.revision)}. Cells: median ms per fill (forward passes).",
             "", "| span tokens | " + " | ".join(report.methods) + " |",
             "| --- |" + " --- |" * len(report.methods)]
    if report.partial:
        lines.insert(0, report.partial.heading)
    at = {(p.method, p.tokens): p for p in report.points}
    for tokens in dict.fromkeys(p.tokens for p in report.points):
        cells = []
        for method in report.methods:
            p = at.get((method, tokens))
            cells.append("-" if p is None else f"{p.median_ms:.0f} ({p.steps})" + (
                f" (partial: {p.fills} of {cfg.repeats} fills)" if p.fills < cfg.repeats
                else ""))
        lines.append(f"| {tokens} | " + " | ".join(cells) + " |")
    spans = {m: [p.tokens for p in report.points if p.method == m] for m in report.methods}
    if all(span == list(cfg.lengths) for span in spans.values()):
        lines += ["", f"From {cfg.lengths[0]} to {cfg.lengths[-1]} tokens the time per fill "
                  "grew " + ", ".join(f"x{g} for {m}" for m, g in report.growth.items()) + "."]
    else:  # a stopped run: each decoder over the lengths it measured
        lines += ["", "The time per fill grew " + ", ".join(
            f"x{g} for {m} ({spans[m][0]} to {spans[m][-1]} tokens)"
            for m, g in report.growth.items()) + "."]
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench latency`: run, print the table, write JSON, markdown and the plot."""
    config = LatencyConfig(lengths=tuple(args.lengths), steps=args.steps,
                           strategy=args.strategy, repeats=args.repeats,
                           baseline_model=args.baseline_model, seed=args.seed,
                           model=args.model, device=args.device)
    # refused before the model loads; so are the settings every timed fill sets
    config.engine = engine_settings(args.settings, SET_ON_THE_ENGINE, (planned(_options(
        min(config.lengths), config.strategy, config.steps, config.seed)),), FLAGS)
    publish(lambda: run_latency(config), to_markdown, args.json_out,
            args.markdown_out, "plot_latency", args.plot)
    return 0
