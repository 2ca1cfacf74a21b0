"""`dlm-lsp bench strategies`: quality and cost of each unmasking strategy.

Runs every strategy on the same fixed HumanEval-Infilling sample, with the
oracle length (the canonical fill's token count, as papers report) and a
fixed step budget, greedy, seed 0.  Reports exact match (ignoring surrounding
whitespace), the rate of fills that are valid Python in place (tree-sitter),
forward passes, and wall time.  Execution-based pass@1 belongs to the
`humaneval` benchmark, which runs the tests in a sandbox.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass

import torch

from dlm_lsp.bench.humaneval import Task, load_tasks
from dlm_lsp.config import STRATEGIES, InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest


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
    tok = engine.model.tokenizer
    exact = valid = empty = passes = 0
    began = time.perf_counter()
    for task in tasks:
        text = task.prefix + task.suffix
        at = len(task.prefix)
        length = max(1, len(tok.encode(task.middle)))
        result = engine.infill(InfillRequest(
            text, at, at, "python", options=InfillOptions(
                length=length, steps=steps, strategy=strategy, seed=0, temperature=0.0)))
        best = result.candidates[0]
        exact += best.text.strip() == task.middle.strip()
        valid += best.valid is True
        empty += not best.text.strip()
        passes += result.steps
    n = max(1, len(tasks))
    return StrategyRow(strategy, len(tasks), round(100 * exact / n, 1), round(100 * valid / n, 1),
                       round(100 * empty / n, 1), round(passes / n, 1),
                       round(1000 * (time.perf_counter() - began) / n, 1))


def main(model: str, device: str, split: str, limit: int | None, steps: int,
         json_out: str | None) -> int:
    """Print the table (markdown) for every strategy, optionally writing JSON too."""
    engine = Engine(ServerConfig(model=model, device=device, max_span_tokens=512))
    tasks = load_tasks(split, limit)
    rows = [run_strategy(engine, tasks, s, steps) for s in STRATEGIES]
    where = (f"{engine.model.name} on {engine.model.device}, torch {torch.__version__}, "
             f"{torch.get_num_threads()} threads, {platform.machine()}")
    print(f"HumanEval-Infilling {split}, {len(tasks)} tasks, oracle length, greedy, "
          f"seed 0, {steps} steps (left-to-right: one per token); {where}")
    print("| strategy | exact match % | syntax valid % | empty % | forward passes | ms per fill |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r.strategy} | {r.exact_match} | {r.syntax_valid} | {r.empty} | "
              f"{r.mean_steps} | {r.ms_per_fill} |")
    if json_out:
        with open(json_out, "w", encoding="utf-8") as handle:
            json.dump({"split": split, "steps": steps, "machine": where,
                       "rows": [asdict(r) for r in rows]}, handle, indent=2)
    return 0
