"""The bars at a Python line's start on real code: how often they bar a line a person
wrote, and their cost.

`dlm_lsp/python_indents.py` bars, at the first position of a span that starts a line,
the tokens that would put that line at a width Python refuses there.  A bar on a token
a person's line begins with would cost a user a good fill, so the bars are meant never
to hold one.  This script asks them of code people wrote: each line start of the
held-out standard-library files (`bench heldout`'s, which no model of ours trained on),
and each canonical middle of HumanEval-Infilling's single- and multi-line tasks, as the
engine lays the span out (the prefix's line break moved into it, the line taken out
of the code below): it counts the spans
that get bars and, of those, the ones whose first token (after the line break) is
barred, each printed; and times `with_line_start_bars`, min and median a span.

    OMP_NUM_THREADS=1 python benchmarks/line_starts_check.py
"""

from __future__ import annotations

import argparse
import statistics
import time

from dlm_lsp.arguments import positive
from dlm_lsp.bench.heldout import heldout_files
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import run_script
from dlm_lsp.models import DEFAULT_MODEL_DIR
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.python_indents import with_line_start_bars
from dlm_lsp.span import reproducible_layout

MIDDLE_CHARS = 400  # of the line and what follows: enough for its first tokens


def _barred(tok: Tokenizer, prefix: str, middle: str, suffix: str,
            times: list[float]) -> bool | None:
    """Whether a span between `prefix` (which ends a line) and `suffix` bars the first
    token of `middle`, the line a person wrote there; None where it gets no bars."""
    layout = reproducible_layout(tok, prefix, suffix, 8, 1024)
    at = len(prefix)
    began = time.perf_counter()
    barred = with_line_start_bars(layout, tok, prefix + suffix, at).banned
    times.append((time.perf_counter() - began) * 1000)
    if not barred:
        return None
    ids = tok.encode(layout.head + middle[:MIDDLE_CHARS])
    position = barred[0][0]
    return (position, ids[position]) in set(barred)


def _count(kind: str, spans, tok: Tokenizer, times: list[float]) -> str:
    barred = asked = 0
    for name, prefix, middle, suffix in spans:
        found = _barred(tok, prefix, middle, suffix, times)
        asked += found is not None
        if found:
            barred += 1
            print(f"  barred: {name} {middle.split(chr(10))[0][:70]!r}")
    return f"{kind}: {asked} spans get bars; the person's first token barred in {barred}"


def _line_starts(files, limit: int | None):
    """Each code line of each file as (name, the text above, the line, the text below)."""
    for name, text in files:
        lines = text.splitlines(keepends=True)
        at = 0
        for n, line in enumerate(lines[:limit]):
            if line.strip():
                yield f"{name}:{n + 1}", text[:at], line, text[at + len(line):]
            at += len(line)


def _tasks(split: str):
    for task in load_tasks(split):
        if not task.prefix or task.prefix.endswith("\n"):
            yield task.task_id, task.prefix, task.middle, task.suffix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=positive, default=None,
                        help="line starts a held-out file (default: all)")
    args = parser.parse_args()
    tok = Tokenizer.from_file(DEFAULT_MODEL_DIR / "tokenizer.json")
    print(machine_line(describe_machine("cpu")))
    times: list[float] = []
    print(_count("held-out line starts", _line_starts(heldout_files(), args.lines), tok, times))
    print(_count("single-line canonical middles", _tasks("single-line"), tok, times))
    print(_count("multi-line canonical middles", _tasks("multi-line"), tok, times))
    print(f"with_line_start_bars, ms a span: min {min(times):.2f}, "
          f"median {statistics.median(times):.2f}, of {len(times)}")


if __name__ == "__main__":
    run_script(main)
