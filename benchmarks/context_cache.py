"""The context cache on CPU: time per step and how often fills change, on fixed tasks.

For HumanEval-Infilling single-line tasks (oracle length, greedy, fixed seed)
each fill is made without the cache and with it at several refresh intervals.
Reports the mean forward time per step and the share of fills identical to the
uncached ones: the quality the approximation costs, fill by fill, which pass@1 over
a few tasks is too coarse to show.

    OMP_NUM_THREADS=1 python benchmarks/context_cache.py --limit 50
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from dlm_lsp.arguments import positive
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest


def run(tasks, **settings) -> tuple[list[str], float, int]:
    engine = Engine(ServerConfig(device="cpu", reuse_fills=False, repair_rounds=0,
                                 fallback=False, batch_rows=0, **settings))
    engine.model  # noqa: B018 -- load outside the timing
    fills, seconds, steps = [], 0.0, 0
    for task in tasks:
        text = task.prefix + task.middle + task.suffix
        start, end = len(task.prefix), len(task.prefix) + len(task.middle)
        length = len(engine.model.tokenizer.encode(task.middle))
        began = time.perf_counter()
        result = engine.infill(InfillRequest(text, start, end, "python", is_hole=True,
                                             options=InfillOptions(length=length, steps=8)))
        seconds += time.perf_counter() - began
        steps += result.steps
        fills.append(result.candidates[0].text)
    return fills, seconds, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=positive, default=50)
    args = parser.parse_args()
    tasks = load_tasks("single-line", args.limit)
    machine = machine_line(describe_machine("cpu"))
    print(f"machine: {machine}; torch threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; {len(tasks)} tasks, 8 steps")
    # off by name: the CPU's default is "auto", the cache on (the baseline row was the
    # refresh-2 row, every share "identical" to a cached fill)
    base, seconds, steps = run(tasks, context_cache=False)
    print(f"no cache:            {1000 * seconds / steps:6.2f} ms/step, identical 100%")
    for refresh in (2, 4, 8):
        fills, seconds, steps = run(tasks, context_cache=True, cache_refresh=refresh)
        same = sum(a == b for a, b in zip(fills, base, strict=True)) / len(base)
        print(f"cache, refresh {refresh}:   {1000 * seconds / steps:6.2f} ms/step, "
              f"identical {same:.0%}")


if __name__ == "__main__":
    run_script(main)
