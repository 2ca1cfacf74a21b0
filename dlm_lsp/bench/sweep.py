"""`dlm-lsp bench sweep`: quality and latency as the step budget varies.

The step budget is the knob a diffusion server offers between latency and
quality; this measures the curve behind it.  For each task kind (HumanEval-
Infilling single-line, multi-line) and each unmasking strategy, the same fixed
tasks are filled at every budget (1, 2, 4, ... steps), greedy, with the oracle
length, and each fill runs against the task's tests in the sandbox (pass@1,
exact match beside it).  The left-to-right baseline (one token per step, the
same model) is one point per kind: it has no budget to vary.

Repair and the left-to-right fallback are off: they would spend passes beyond
the budget and mix another order into every curve.  The engine caps a budget
at the span's token count (one token per step is the most a step can do), so
the large budgets of short spans repeat a point: `mean_steps` says what ran.

Every curve is marked (`curves.py`): where more steps stop helping
(saturation) and where quality falls apart (collapse), on pass@1 and on exact
match.  The empty fill's pass@1 is each kind's floor: some removed lines are
not needed by the tests, so a curve at the floor shows cost, not quality.

Progress goes to stderr, a point at a time; a sweep stopped by Ctrl-C or SIGTERM
reports the points it finished, marked partial (`progress.py`).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from dlm_lsp.bench.curves import CurveMarks, mark_curve
from dlm_lsp.bench.filling import (
    Fill,
    FillSettings,
    bench_engine,
    fill_task,
    planned_options,
)
from dlm_lsp.bench.grids import BUDGETS, DIFFUSION_STRATEGIES, KINDS, LEFT_TO_RIGHT
from dlm_lsp.bench.humaneval import ALIASES, Task, load_tasks
from dlm_lsp.bench.machine import code_label, describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import median, percent, publish
from dlm_lsp.bench.pass_at_1 import (
    engine_settings,
    passes_by_fill,
    refuse_repeats,
    settings_label,
)
from dlm_lsp.bench.progress import Partial, Progress, Stoppable, latest
from dlm_lsp.bench.sandbox import (
    NONE,
    SandboxConfig,
    checked_config,
    isolation_used,
    report_isolation_text,
)
from dlm_lsp.bench.scoring import exact_match
from dlm_lsp.engine import Engine

METRICS = ("pass_at_1", "exact_match")


@dataclass
class SweepConfig:
    """One sweep: which tasks, budgets and strategies, and the marks' thresholds."""

    kinds: tuple[str, ...] = KINDS
    limit: int | None = 30  # an evenly spaced fixed sample of this many tasks per kind
    budgets: tuple[int, ...] = BUDGETS
    strategies: tuple[str, ...] = DIFFUSION_STRATEGIES
    left_to_right: bool = True  # the one-token-per-step baseline, one point per kind
    seed: int = 0
    epsilon: float = 2.0  # saturation: within this many points of the best
    ratio: float = 0.5  # collapse: below this share of the best
    model: str = "default"
    device: str = "auto"
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    # more server settings for the engine, snake_case (`--settings`, checked): a
    # sweep on a bf16 machine can be measured again in fp32
    engine: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kinds = tuple(ALIASES.get(k, k) for k in self.kinds)
        refuse_repeats("--kinds", self.kinds, " (single is single-line, multi multi-line)")
        refuse_repeats("--strategies", self.strategies)
        self.budgets = tuple(sorted(set(self.budgets)))
        if LEFT_TO_RIGHT in self.strategies:  # named as a strategy: it is the baseline
            self.strategies = tuple(s for s in self.strategies if s != LEFT_TO_RIGHT)
            self.left_to_right = True


@dataclass
class SweepPoint:
    """One strategy at one budget on one kind's tasks."""

    kind: str
    strategy: str
    budget: int | None  # requested steps; None for left-to-right (one per token)
    tasks: int
    pass_at_1: float  # percent
    exact_match: float  # percent
    syntax_valid: float  # percent of fills tree-sitter accepts in place
    empty: float  # percent of fills that are empty or blank
    mean_steps: float  # forward passes that ran
    ms_per_fill: float  # mean
    median_ms: float


@dataclass
class SweepCurve:
    """One strategy's points on one kind, budgets ascending, with its marks per metric."""

    kind: str
    strategy: str
    points: list[SweepPoint]
    marks: dict[str, CurveMarks]
    above_floor: bool = False  # some budget's pass@1 beats the empty fill's: a quality signal


@dataclass
class SweepReport:
    """Every number of a sweep, with the machine and the code it ran on."""

    config: SweepConfig
    machine: dict
    revision: str | None
    model: str
    floors: dict[str, float]  # per kind: pass@1 of the empty fill
    curves: list[SweepCurve]
    left_to_right: list[SweepPoint]  # one per kind
    fills: int  # model fills made
    programs: int  # distinct programs run in the sandbox
    wall_s: float
    partial: Partial | None = None  # a sweep stopped by a signal: the points it covers
    isolation: str = NONE  # the sandbox's isolation level (sandbox.py)
    isolation_fallback: str = ""  # why not a stronger one: the probe's reasons
    pids_cgroup: bool = False  # every program ran in a pids cgroup of its own (cgroup.py)
    pids_cgroup_note: str = ""  # where those were made, or why there were none
    seccomp: bool = False  # every program ran behind the seccomp filter (seccomp.py)
    seccomp_note: str = ""  # what it refuses, or why there was none
    landlock: bool = False  # every program ran behind the Landlock layer (landlock.py)
    landlock_note: str = ""  # what it holds, or why there was none


def _point(kind: str, strategy: str, budget: int | None, tasks: list[Task], fills: list[Fill],
           passed: dict[tuple[str, str], bool]) -> SweepPoint:
    n = len(tasks)
    pairs = list(zip(tasks, fills, strict=True))
    return SweepPoint(
        kind, strategy, budget, n,
        pass_at_1=percent(sum(passed[t.task_id, f.text] for t, f in pairs), n),
        exact_match=percent(sum(exact_match(f.text, t.middle) for t, f in pairs), n),
        syntax_valid=percent(sum(f.valid is True for f in fills), n),
        empty=percent(sum(not f.text.strip() for f in fills), n),
        mean_steps=round(sum(f.steps for f in fills) / max(1, n), 2),
        ms_per_fill=round(sum(f.ms for f in fills) / max(1, n), 1),
        median_ms=round(median([f.ms for f in fills]), 1))


# The options that set what each point's fills ask for, by the setting they replace:
# what `--settings` is told to give instead (`pass_at_1.engine_settings`)
FLAGS = {"steps": "--steps", "strategy": "--strategies", "seed": "--seed"}


def _runs(config: SweepConfig) -> list[tuple[str, int | None]]:
    """Each curve's (strategy, budget) points, then the left-to-right one (no budget)."""
    runs: list[tuple[str, int | None]] = [(s, b) for s in config.strategies
                                          for b in config.budgets]
    return runs + [(LEFT_TO_RIGHT, None)] if config.left_to_right else runs


def _fill_settings(config: SweepConfig, strategy: str, budget: int | None) -> FillSettings:
    """How one point's tasks are filled: its strategy and budget, greedy, no repair."""
    return FillSettings(strategy=strategy, steps=budget, seed=config.seed, repair=False)


def run_sweep(config: SweepConfig, engine: Engine | None = None) -> SweepReport:
    """Fill every kind's tasks at every (strategy, budget), judge them, mark the curves.

    Each point's programs run once its fills are made (those of a fill already judged
    on this kind are not run again), so a stop loses at most the point under way: the
    report covers the points finished, marked partial (`progress.py`).
    """
    began = time.perf_counter()
    engine = engine or bench_engine(config.model, config.device, **config.engine)
    runs = _runs(config)
    progress = Progress("sweep", len(config.kinds) * len(runs), "points")
    points: list[SweepPoint] = []
    floors: dict[str, float] = {}
    passed: dict[tuple[str, str], bool] = {}  # task ids differ between kinds
    made = 0
    detail = latest(points, lambda p: f"{p.kind} {p.strategy} {p.budget or 'per token'}: "
                    f"pass@1 {p.pass_at_1}%, {p.ms_per_fill:.0f} ms per fill")
    with Stoppable(progress, lambda: len(points), detail) as loop:
        for kind in config.kinds:
            tasks = load_tasks(kind, config.limit)
            passes_by_fill(tasks, [[""] * len(tasks)], config.sandbox, known=passed)
            floors[kind] = percent(sum(passed[t.task_id, ""] for t in tasks), len(tasks))
            for strategy, budget in runs:
                settings = _fill_settings(config, strategy, budget)
                fills = [fill_task(engine, t, settings) for t in tasks]
                made += len(tasks)
                passes_by_fill(tasks, [[f.text for f in fills]], config.sandbox, known=passed)
                points.append(_point(kind, strategy, budget, tasks, fills, passed))
                loop.update()
    floors = {kind: floor for kind, floor in floors.items()  # a stop may come before
              if any(p.kind == kind for p in points)}  # a kind's first point
    curves = [_curve(config, kind, strategy, points, floors[kind])
              for kind in floors for strategy in config.strategies
              if any(p.kind == kind and p.strategy == strategy for p in points)]
    ltr = [p for p in points if p.strategy == LEFT_TO_RIGHT]
    return SweepReport(config, describe_machine(str(engine.model.device)), source_revision(),
                       engine.model.name, floors, curves, ltr, made, len(passed),
                       round(time.perf_counter() - began, 1), loop.partial,
                       *isolation_used(config.sandbox))


def _curve(config: SweepConfig, kind: str, strategy: str, points: list[SweepPoint],
           floor: float) -> SweepCurve:
    """One strategy's points on one kind (those measured, budgets ascending), marked."""
    mine = [p for p in points if p.kind == kind and p.strategy == strategy]
    marks = {m: mark_curve([p.budget for p in mine], [getattr(p, m) for p in mine],
                           m, config.epsilon, config.ratio) for m in METRICS}
    return SweepCurve(kind, strategy, mine, marks, max(p.pass_at_1 for p in mine) > floor)


def _mark_text(marks: CurveMarks) -> tuple[str, str]:
    saturation = f"{marks.saturation}" + (" (flat)" if marks.flat else "")
    return saturation, "none" if marks.collapse is None else str(marks.collapse)


def to_markdown(report: SweepReport) -> str:
    """Per kind: pass@1 % (ms per fill) at each budget, the marks, the baseline and floor.
    A stopped sweep's kinds, curves and cells not measured are left out or "-"."""
    cfg = report.config
    lines = [f"Step-budget sweep: HumanEval-Infilling, {cfg.limit or 'all'} tasks per kind, "
             f"oracle length, greedy, seed {cfg.seed}, no repair{settings_label(cfg.engine)}; "
             f"model {report.model}; "
             f"{machine_line(report.machine)}; {report.machine['date']}, code "
             f"{code_label(report.revision)}. Saturation: first budget within {cfg.epsilon} "
             f"points of the best pass@1 (flat: the whole curve is); collapse: largest budget "
             f"under it below {cfg.ratio:g} x the best. {report.fills} fills, "
             f"{report.programs} distinct programs, {report.wall_s} s; "
             f"{report_isolation_text(report)}.", ""]
    if report.partial:
        lines.insert(0, report.partial.heading)
    budgets = " | ".join(str(b) for b in cfg.budgets)
    for kind in report.floors:
        lines += [f"**{kind}** (empty-fill floor: pass@1 {report.floors[kind]}%); cells: "
                  "pass@1 % (ms per fill, mean steps)", "",
                  f"| strategy | {budgets} | saturation | collapse |",
                  "| --- |" + " --- |" * (len(cfg.budgets) + 2)]
        for curve in (c for c in report.curves if c.kind == kind):
            at = {p.budget: p for p in curve.points}
            cells = " | ".join(f"{at[b].pass_at_1} ({at[b].ms_per_fill:.0f} ms, "
                               f"{at[b].mean_steps:g})" if b in at else "-"
                               for b in cfg.budgets)
            label = curve.strategy + (f" (partial: {len(at)} of {len(cfg.budgets)} budgets)"
                                      if len(at) < len(cfg.budgets) else "")
            saturation, collapse = _mark_text(curve.marks["pass_at_1"])
            lines.append(f"| {label} | {cells} | {saturation} | {collapse} |")
        if not any(c.above_floor for c in report.curves if c.kind == kind):
            lines.append(f"\nNo strategy beats the empty fill on {kind} at any budget: the "
                         "marks locate noise around the floor, not a knee in quality.")
        for p in (p for p in report.left_to_right if p.kind == kind):
            lines.append(f"\nLeft-to-right (same model, one token per step): pass@1 "
                         f"{p.pass_at_1}%, exact {p.exact_match}%, {p.mean_steps:g} steps, "
                         f"{p.ms_per_fill:.0f} ms per fill.")
        lines.append("")
    return "\n".join(lines)


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench sweep`: run, print the summary, write JSON, markdown and plots."""
    config = SweepConfig(kinds=tuple(args.kinds), limit=args.limit, budgets=tuple(args.steps),
                         strategies=tuple(args.strategies), left_to_right=not args.no_ltr,
                         seed=args.seed, epsilon=args.epsilon, ratio=args.ratio,
                         model=args.model, device=args.device,
                         sandbox=checked_config(args.timeout, args.workers,
                                                args.require_isolation))
    # refused before the model loads; so are the settings each point's fills set
    config.engine = engine_settings(args.settings, requests=tuple(
        planned_options(_fill_settings(config, *run)) for run in _runs(config)), flags=FLAGS)
    publish(lambda: run_sweep(config), to_markdown, args.json_out,
            args.markdown_out, "plot_sweep", args.plots)
    return 0
