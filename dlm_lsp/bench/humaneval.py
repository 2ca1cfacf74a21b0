"""HumanEval-Infilling tasks (Bavarian et al. 2022; MIT licence, copy shipped here).

Each task is a HumanEval solution with a span removed: `prompt` (the prefix),
`suffix`, and the removed `canonical_solution`.  Samples are fixed (every k-th
task), so the same command gives the same set on every machine.
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "humaneval_infilling"
SPLITS = {
    "single-line": "HumanEval-SingleLineInfilling.jsonl.gz",
    "multi-line": "HumanEval-MultiLineInfilling.jsonl.gz",
    "random-span": "HumanEval-RandomSpanInfilling.jsonl.gz",
    "random-span-light": "HumanEval-RandomSpanInfillingLight.jsonl.gz",
}
ALIASES = {"single": "single-line", "multi": "multi-line"}  # the short names papers use


@dataclass(frozen=True)
class Task:
    """One infilling task."""

    task_id: str
    prefix: str
    suffix: str
    middle: str  # the canonical fill
    test: str
    entry_point: str


def load_tasks(split: str = "single-line", limit: int | None = None) -> list[Task]:
    """The split's tasks; with `limit`, an evenly spaced fixed sample of that many."""
    split = ALIASES.get(split, split)
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    with gzip.open(DATA / SPLITS[split], "rt", encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    tasks = [Task(r["task_id"], r["prompt"], r["suffix"], r["canonical_solution"], r["test"],
                  r["entry_point"]) for r in rows]
    if limit is not None and limit < len(tasks):
        stride = len(tasks) / limit
        tasks = [tasks[int(i * stride)] for i in range(limit)]
    elif limit is not None and limit > len(tasks):  # it ran them all, and said nothing
        print(f"note: a limit of {limit} is more than the {split} split's {len(tasks)} "
              f"tasks: all {len(tasks)} run", file=sys.stderr, flush=True)
    return tasks
