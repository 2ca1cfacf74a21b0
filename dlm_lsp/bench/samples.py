"""`dlm-lsp bench samples`: a sheet of fills side by side, to read what the numbers mean.

A pass@1 of 4% says little about *how* a model fails.  For a few fixed
HumanEval-Infilling tasks the sheet shows the code around the gap, then the
reference (the canonical middle), the diffusion fill (server defaults: its
strategy and per-kind budget, oracle length, repair on, as a user gets it; or
the budget `--steps` or `--settings` gives, which its column names),
the left-to-right fill of the same model, and optionally an autoregressive
baseline model (`--baseline-model smollm2`), each with whether it passes
the task's tests in the sandbox and whether it is the reference.

A task is filled every way and its programs run before the next task's turn, so
a sheet stopped by Ctrl-C or SIGTERM (the baseline model's fills included) has
the tasks finished, marked partial (`progress.py`); progress goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dlm_lsp.bench.autoregressive import load_baseline
from dlm_lsp.bench.filling import (
    Fill,
    FillSettings,
    bench_engine,
    fill_task,
    oracle_kind,
    planned_options,
)
from dlm_lsp.bench.humaneval import ALIASES, Task, load_tasks
from dlm_lsp.bench.machine import code_label, describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import writing_reports
from dlm_lsp.bench.pass_at_1 import (
    engine_settings,
    passes_by_fill,
    settings_label,
)
from dlm_lsp.bench.progress import Partial, Progress, Stoppable, Stopped
from dlm_lsp.bench.sandbox import (
    NONE,
    SandboxConfig,
    checked_config,
    isolation_used,
    report_isolation_text,
)
from dlm_lsp.bench.scoring import exact_match
from dlm_lsp.config import KINDS, InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.policy import BUDGET_SETTINGS, step_budget

CONTEXT_BEFORE, CONTEXT_AFTER = 4, 2  # lines of code shown around the gap
GAP = "# <<< gap >>>"
REFERENCE = "reference"
# The options that set what the diffusion column's fills ask for, by the setting they
# replace: what `--settings` is told to give instead (`pass_at_1.engine_settings`)
FLAGS = {"steps": "--steps", "strategy": "--strategy", "seed": "--seed"}


@dataclass
class SamplesConfig:
    """Which tasks, and how the diffusion column fills them."""

    split: str = "single-line"
    limit: int = 10
    steps: int | None = None  # None: the server's per-kind budget
    strategy: str | None = None  # None: the server's default
    seed: int = 0
    baseline_model: str | None = None
    model: str = "default"
    device: str = "auto"
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    engine: dict = field(default_factory=dict)  # more server settings (`--settings`, checked)

    def __post_init__(self) -> None:
        self.split = ALIASES.get(self.split, self.split)


@dataclass
class Sample:
    """One column's fill of one task."""

    column: str
    text: str
    passed: bool
    exact: bool
    steps: int
    ms: float


@dataclass
class SampleTask:
    """One task's context and every column's fill."""

    task_id: str
    before: str  # the last lines of the prefix
    after: str  # the first lines of the suffix
    fills: list[Sample]


@dataclass
class SampleSheet:
    """The sheet's data: the columns, the tasks, the machine."""

    config: SamplesConfig
    machine: dict
    revision: str | None
    model: str
    columns: list[str]
    tasks: list[SampleTask]
    wall_s: float
    partial: Partial | None = None  # a run stopped by a signal: the tasks it covers
    isolation: str = NONE  # the sandbox's isolation level (sandbox.py)
    isolation_fallback: str = ""  # why not a stronger one: the probe's reasons
    pids_cgroup: bool = False  # every program ran in a pids cgroup of its own (cgroup.py)
    pids_cgroup_note: str = ""  # where those were made, or why there were none
    seccomp: bool = False  # every program ran behind the seccomp filter (seccomp.py)
    seccomp_note: str = ""  # what it refuses, or why there was none
    landlock: bool = False  # every program ran behind the Landlock layer (landlock.py)
    landlock_note: str = ""  # what it holds, or why there was none


def _fill_settings(config: SamplesConfig) -> tuple[FillSettings, FillSettings]:
    """How the diffusion column and the left-to-right one fill a task."""
    return (FillSettings(strategy=config.strategy, steps=config.steps, seed=config.seed),
            FillSettings(strategy="left-to-right", seed=config.seed))


def _budget(config: SamplesConfig, kinds: set[str]) -> str:
    """What bounds the diffusion column's fills, as its heading says: `--steps`, else
    the budget settings in `--settings` for each kind of task on the sheet, as the
    engine reads them (`policy.step_budget`), else the server's own.  With `--settings
    '{"steps": 4}'` the heading said "server budget" while every fill took 4 steps."""
    if config.steps:
        return f"{config.steps} steps"
    if not any(name in config.engine for name in BUDGET_SETTINGS):
        return "server budget"
    server = ServerConfig(**config.engine)
    said = {}
    for kind in (kind for kind in KINDS if kind in kinds):
        budget = step_budget(server, InfillOptions(), kind)
        said[kind] = (f"{budget.latency_ms} ms target" if budget.latency_ms is not None
                      else f"{budget.steps} steps")
    if len(set(said.values())) == 1:
        return next(iter(said.values()))
    return ", ".join(f"{text} {kind}" for kind, text in said.items())


def _columns(config: SamplesConfig, engine: Engine,
             kinds: set[str]) -> dict[str, Callable[[Task], Fill]]:
    """How each column fills a task (a baseline model is loaded here, before any fill);
    `kinds`: those of the sheet's tasks (`filling.oracle_kind`)."""
    steps = _budget(config, kinds)
    diffusion, ltr = _fill_settings(config)
    columns: dict[str, Callable[[Task], Fill]] = {
        REFERENCE: lambda t: Fill(t.middle, None, 0, 0.0, REFERENCE),
        f"diffusion ({config.strategy or 'server strategy'}, {steps})":
            lambda t: fill_task(engine, t, diffusion),
        "left-to-right (same model)": lambda t: fill_task(engine, t, ltr)}
    if config.baseline_model:
        baseline = load_baseline(config.baseline_model, config.device)
        columns[baseline.name] = baseline.fill
    return columns


def make_sheet(config: SamplesConfig, engine: Engine | None = None) -> SampleSheet:
    """Fill each task every way and run its distinct programs, a task at a time; collect
    the sheet.  Stopped by a signal, the sheet has the tasks finished, marked partial
    (`progress.py`)."""
    began = time.perf_counter()
    engine = engine or bench_engine(config.model, config.device, **config.engine)
    tasks = load_tasks(config.split, config.limit)
    columns = _columns(config, engine, {oracle_kind(task) for task in tasks})
    rows: list[SampleTask] = []

    def passing() -> str:  # the progress line's details (fills[1]: after the reference)
        return f"{sum(r.fills[1].passed for r in rows)} diffusion fills pass"
    with Stoppable(Progress("samples", len(tasks), "tasks"), lambda: len(rows),
                   passing) as loop:
        for task in tasks:
            fills = {name: fill(task) for name, fill in columns.items()}
            passed = passes_by_fill([task], [[f.text] for f in fills.values()], config.sandbox)
            rows.append(SampleTask(
                task.task_id, "".join(task.prefix.splitlines(True)[-CONTEXT_BEFORE:]),
                "".join(task.suffix.splitlines(True)[:CONTEXT_AFTER]),
                [Sample(name, f.text, passed[task.task_id, f.text],
                        exact_match(f.text, task.middle), f.steps, round(f.ms, 1))
                 for name, f in fills.items()]))
            loop.update()
    return SampleSheet(config, describe_machine(str(engine.model.device)), source_revision(),
                       engine.model.name, list(columns), rows,
                       round(time.perf_counter() - began, 1), loop.partial,
                       *isolation_used(config.sandbox))


def _aligned(fills: list[Sample]) -> list[str]:
    """Each fill's lines after its column's name, so the fills read side by side."""
    width = max(len(f.column) for f in fills)
    lines = []
    for f in fills:
        text = f.text.rstrip("\n")
        body = text.split("\n") if text.strip() else ["(empty)"]
        lines.append(f"{f.column:<{width}} | {body[0]}")
        lines += [f"{'':<{width}} | {line}" for line in body[1:]]
    return lines


def to_markdown(sheet: SampleSheet) -> str:
    """The sheet: a tally per column, then per task the context, the fills and their marks."""
    cfg = sheet.config
    n = len(sheet.tasks)
    lines = [f"# Sample fills: HumanEval-Infilling {cfg.split}", "",
             f"{n} fixed tasks, oracle length, greedy, seed {cfg.seed}"
             f"{settings_label(cfg.engine)}; model {sheet.model}; "
             f"{machine_line(sheet.machine)}; {sheet.machine['date']}, code "
             f"{code_label(sheet.revision)}; "
             f"{report_isolation_text(sheet)}.", "",
             "| fill | passes tests | exact match |", "| --- | --- | --- |"]
    if sheet.partial:
        lines[2:2] = [f"{sheet.partial}; the sheet below covers only these", ""]
    mark = sheet.partial.mark() if sheet.partial else ""
    for column in sheet.columns:
        fills = [f for t in sheet.tasks for f in t.fills if f.column == column]
        lines.append(f"| {column}{mark} | {sum(f.passed for f in fills)}/{n} | "
                     f"{sum(f.exact for f in fills)}/{n} |")
    for task in sheet.tasks:
        marks = "; ".join(f"{f.column}: {'passes' if f.passed else 'fails'}"
                          f"{', exact' if f.exact and f.column != REFERENCE else ''}"
                          for f in task.fills)
        lines += ["", f"## {task.task_id}", "", "```python",
                  task.before.rstrip("\n"), GAP, task.after.rstrip("\n"), "```", "",
                  "```text", *_aligned(task.fills), "```", "", marks]
    return "\n".join(lines) + "\n"


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench samples`: write the sheet (markdown, and JSON with --json)."""
    config = SamplesConfig(split=args.split, limit=args.limit, steps=args.steps,
                           strategy=args.strategy, seed=args.seed,
                           baseline_model=args.baseline_model, model=args.model,
                           device=args.device,
                           sandbox=checked_config(args.timeout, args.workers,
                                                  args.require_isolation))
    # refused before the model loads; so are the settings a column's fills set
    config.engine = engine_settings(args.settings,
                                    requests=tuple(map(planned_options, _fill_settings(config))),
                                    flags=FLAGS)
    sheet = make_sheet(config)
    text = to_markdown(sheet)
    if not args.out:
        print(text, end="")
    with writing_reports(sheet.partial) as files:
        if args.out:
            files.text(args.out, text)
        if args.json_out:
            files.json(args.json_out, sheet)
    if sheet.partial:
        raise Stopped(sheet.partial, files.said())
    if files.written:  # each file ("wrote s.md" left the JSON beside it out)
        print(f"wrote {' and '.join(files.written)}", file=sys.stderr)
    return 0
