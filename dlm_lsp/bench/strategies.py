"""`dlm-lsp bench strategies`: quality and cost of each unmasking strategy.

Runs every strategy on the same fixed HumanEval-Infilling sample, with the
oracle length (the canonical fill's token count, as papers report) and a
fixed step budget, greedy, seed 0, without syntax repair or the left-to-right
fallback (they would mix another order into every strategy's row).  Reports
exact match (up to whitespace that cannot matter, see `scoring.normalise`),
the rate of fills that are valid Python in place (tree-sitter), forward
passes, and wall time.  Execution-based pass@1 belongs to `bench humaneval`
(`pass_at_1.py`), which runs the tests in a sandbox.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from dlm_lsp.bench.filling import (
    Fill,
    FillSettings,
    bench_engine,
    fill_task,
    planned_options,
)
from dlm_lsp.bench.humaneval import Task, load_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import writing_reports
from dlm_lsp.bench.pass_at_1 import settings_label
from dlm_lsp.bench.progress import Progress, Stoppable, Stopped
from dlm_lsp.bench.scoring import exact_match
from dlm_lsp.config import STRATEGIES, InfillOptions
from dlm_lsp.engine import Engine


@dataclass
class StrategyRow:
    """One line of the table."""

    strategy: str
    tasks: int
    exact_match: float  # percent
    syntax_valid: float  # percent
    empty: float  # percent of fills that are empty or whitespace
    mean_steps: float
    ms_per_fill: float


def strategy_settings(strategy: str, steps: int) -> FillSettings:
    """How a row's tasks are filled: its strategy at the budget, greedy, seed 0, one pass."""
    return FillSettings(strategy=strategy, steps=steps, repair=False)


# The option that sets what the rows' fills ask for, by the setting it replaces: what
# `--settings` is told to give instead (`pass_at_1.engine_settings`)
FLAGS = {"steps": "--steps"}


def planned(steps: int) -> tuple[InfillOptions, ...]:
    """The options of the rows' fills (each its strategy; all the budget, the oracle
    length, the seed, greedy, no repair, no fallback): `--settings` may give no setting
    they replace, nor one none of them reads."""
    return tuple(planned_options(strategy_settings(s, steps)) for s in STRATEGIES)


def run_strategy(engine: Engine, tasks: list[Task], strategy: str, steps: int,
                 done: list[tuple[Fill, float]] | None = None,
                 on_fill: Callable[[], None] | None = None) -> StrategyRow:
    """Fill every task with one strategy; tally the table row.  Each fill goes into
    `done` as it comes, with the seconds since the first began, so that a stopped run
    can tally the fills it finished (`tally`)."""
    settings = strategy_settings(strategy, steps)
    done = [] if done is None else done
    began = time.perf_counter()
    for task in tasks:
        fill = fill_task(engine, task, settings)
        done.append((fill, time.perf_counter() - began))
        if on_fill:
            on_fill()
    return tally(strategy, tasks, done)


def tally(strategy: str, tasks: list[Task], done: list[tuple[Fill, float]]) -> StrategyRow:
    """The row of the fills in `done`, those of the first len(done) tasks."""
    fills = [fill for fill, _ in done]
    seconds = done[-1][1] if done else 0.0
    n = max(1, len(fills))
    exact = sum(exact_match(f.text, t.middle)
                for f, t in zip(fills, tasks[:len(fills)], strict=True))
    valid = sum(f.valid is True for f in fills)
    empty = sum(not f.text.strip() for f in fills)
    return StrategyRow(strategy, len(fills), round(100 * exact / n, 1),
                       round(100 * valid / n, 1), round(100 * empty / n, 1),
                       round(sum(f.steps for f in fills) / n, 1), round(1000 * seconds / n, 1))


def main(model: str, device: str, split: str, limit: int | None, steps: int,
         json_out: str | None, settings: dict | None = None) -> int:
    """Print the table (markdown) for every strategy, optionally writing JSON too.
    `settings`: more server settings (`--settings`, checked), named in the table's
    heading and kept in the JSON.

    Progress goes to stderr.  Stopped by a signal, the table has the strategies done
    and the one under way over the tasks it filled, marked partial (`progress.py`)."""
    settings = dict(settings or {})
    engine = bench_engine(model, device, **settings)
    tasks = load_tasks(split, limit)
    progress = Progress("strategies", len(STRATEGIES) * len(tasks), "fills")
    rows: list[StrategyRow] = []
    done: list[tuple[Fill, float]] = []

    def filled() -> None:
        progress.update(len(rows) * len(tasks) + len(done), STRATEGIES[len(rows)])

    def keep_the_one_under_way() -> None:  # over the tasks it filled
        if done and strategy not in {r.strategy for r in rows}:
            rows.append(tally(strategy, tasks, done))
    with Stoppable(progress, lambda: sum(r.tasks for r in rows),
                   on_stop=keep_the_one_under_way) as loop:
        for strategy in STRATEGIES:
            done = []
            rows.append(run_strategy(engine, tasks, strategy, steps, done, filled))
    partial = loop.partial
    machine = describe_machine(str(engine.model.device))
    where = f"{engine.model.name} on {machine_line(machine)}"
    if partial:
        print(partial.heading)
    print(f"HumanEval-Infilling {split}, {len(tasks)} tasks, oracle length, greedy, "
          f"seed 0, {steps} steps (left-to-right: one per token){settings_label(settings)}; "
          f"{where}")
    print("| strategy | exact match % | syntax valid % | empty % | forward passes | ms per fill |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        label = r.strategy + (f" (partial: {r.tasks} of {len(tasks)} tasks)"
                              if r.tasks < len(tasks) else "")
        print(f"| {label} | {r.exact_match} | {r.syntax_valid} | {r.empty} | "
              f"{r.mean_steps} | {r.ms_per_fill} |")
    with writing_reports(partial) as files:
        if json_out:
            files.json(json_out, {"split": split, "steps": steps, "model": engine.model.name,
                                  "engine": settings, "machine": machine,
                                  "revision": source_revision(),
                                  "rows": [asdict(r) for r in rows],
                                  "partial": asdict(partial) if partial else None})
    if partial:
        raise Stopped(partial, files.said())
    return 0
