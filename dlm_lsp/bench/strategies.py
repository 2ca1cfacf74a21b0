"""`dlm-lsp bench strategies`: quality and cost of each unmasking strategy.

Runs every strategy on the same fixed HumanEval-Infilling sample, with the
oracle length (the canonical fill's token count, as papers report) and a
fixed step budget, greedy, seed 0, without syntax repair or the left-to-right
fallback (they would mix another order into every strategy's row).  Reports
exact match (up to whitespace that cannot matter, see `filling.normalise`),
the rate of fills that are valid Python in place (tree-sitter), forward
passes, and wall time.  Execution-based pass@1 belongs to `bench humaneval`
(`pass_at_1.py`), which runs the tests in a sandbox.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from dlm_lsp.bench.filling import FillSettings, bench_engine, exact_match, fill_task
from dlm_lsp.bench.humaneval import Task, load_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.config import STRATEGIES
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


def run_strategy(engine: Engine, tasks: list[Task], strategy: str, steps: int) -> StrategyRow:
    """Fill every task with one strategy; tally the table row."""
    settings = FillSettings(strategy=strategy, steps=steps, repair=False)
    began = time.perf_counter()
    fills = [fill_task(engine, task, settings) for task in tasks]
    seconds = time.perf_counter() - began
    n = max(1, len(tasks))
    exact = sum(exact_match(f.text, t.middle) for f, t in zip(fills, tasks, strict=True))
    valid = sum(f.valid is True for f in fills)
    empty = sum(not f.text.strip() for f in fills)
    return StrategyRow(strategy, len(tasks), round(100 * exact / n, 1), round(100 * valid / n, 1),
                       round(100 * empty / n, 1), round(sum(f.steps for f in fills) / n, 1),
                       round(1000 * seconds / n, 1))


def main(model: str, device: str, split: str, limit: int | None, steps: int,
         json_out: str | None) -> int:
    """Print the table (markdown) for every strategy, optionally writing JSON too."""
    engine = bench_engine(model, device)
    tasks = load_tasks(split, limit)
    rows = [run_strategy(engine, tasks, s, steps) for s in STRATEGIES]
    machine = describe_machine(str(engine.model.device))
    where = f"{engine.model.name} on {machine_line(machine)}"
    print(f"HumanEval-Infilling {split}, {len(tasks)} tasks, oracle length, greedy, "
          f"seed 0, {steps} steps (left-to-right: one per token); {where}")
    print("| strategy | exact match % | syntax valid % | empty % | forward passes | ms per fill |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r.strategy} | {r.exact_match} | {r.syntax_valid} | {r.empty} | "
              f"{r.mean_steps} | {r.ms_per_fill} |")
    if json_out:
        with open(json_out, "w", encoding="utf-8") as handle:
            json.dump({"split": split, "steps": steps, "model": engine.model.name,
                       "machine": machine, "rows": [asdict(r) for r in rows]}, handle, indent=2)
    return 0
