"""Where a fill's CPU time goes, stage by stage, in-process.

The engine runs the single-line fills of `lsp_latency.py` (the same cursors in the
standard library's `textwrap.py`, recent-fill reuse off) and each stage is timed in
CPU time of the thread that runs it (`time.thread_time`), so a busy shared machine
changes the numbers less than it changes wall time; it also counts the calls.  With
`--batch-rows 0` and `OMP_NUM_THREADS=1` every stage runs on one thread and the
forward passes' CPU is all of theirs.

    OMP_NUM_THREADS=1 python benchmarks/fill_stages.py --fills 30 --batch-rows 0

Stages nest: the sampler step holds the early stop's validation, and with
`--batch-rows 0` the repairs hold their forward passes.  `--fills-out FILE` writes
every fill's candidate texts and forward passes, to check that a change leaves them
byte-identical.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sysconfig
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import torch
from forward_passes import time_forward_passes
from lsp_latency import cursors

from dlm_lsp import engine, passes, sampler, validation
from dlm_lsp.arguments import positive, whole
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.config import ServerConfig, value_range
from dlm_lsp.engine import Engine, InfillRequest

# (owner, attribute, stage name): what is timed
STAGES = [
    (engine, "plan_span", "span plan (kind, length; parses the lines around the cursor)"),
    (engine, "reproducible_layout", "span layout (tokenizes prefix and suffix)"),
    (engine, "document_for", "document parse (incremental, per version)"),
    (sampler.Denoising, "__init__", "sampler setup"),
    (sampler.Denoising, "advance", "sampler step (bookkeeping around the logits)"),
    (sampler, "head_tokens", "  of which: spelling the head"),
    (validation.ParsedDocument, "validate", "validation (tree-sitter and CPython)"),
    (passes.InfillRun, "fill_text", "shaping a fill (indentation, units)"),
    (passes.InfillRun, "repair", "repair rounds (their passes too)"),
]


def timed(owner: object, name: str, stage: str, seconds: dict, calls: dict) -> None:
    """Replace owner.name by a wrapper that adds its thread CPU time to `seconds[stage]`."""
    original: Callable = getattr(owner, name)

    def wrapper(*args, **kwargs):
        began = time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            seconds[stage] += time.thread_time() - began
            calls[stage] += 1
    setattr(owner, name, wrapper)



def _batch_rows(text: str) -> int:
    """`--batch-rows`, in the bounds the setting has (`-1` ran, reporting "batchRows -1",
    where `--settings '{"batchRows": -1}'` is refused)."""
    value = whole(text)
    bounds = value_range("batch_rows")
    if bounds is not None and not bounds(value):
        raise argparse.ArgumentTypeError(
            f"{text}: batchRows is an integer from {bounds.low:.0f} to {bounds.high:.0f}")
    return value

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fills", type=positive, default=30)
    parser.add_argument("--model", default="default")
    parser.add_argument("--batch-rows", type=_batch_rows, default=16,
                        help="the server's batchRows (0 to 256)")
    parser.add_argument("--fills-out", help="write each fill's candidates and passes (JSON)")
    args = parse_script_arguments(parser)
    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text()
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    offsets = [starts[line] + column for line, column in cursors(text, args.fills)]
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for owner, name, stage in STAGES:
        timed(owner, name, stage, seconds, calls)
    eng = Engine(ServerConfig(model=args.model, reuse_fills=False, batch_rows=args.batch_rows))
    model = eng.model
    # the forward pass: the body, then the head on the span; or the context cache's step
    time_forward_passes(model, lambda owner, name, label: timed(
        owner, name, f"forward pass: {label}", seconds, calls))

    def fill(at: int):
        return eng.infill(InfillRequest(text, at, at, "python", uri="file:///textwrap.py"))

    fill(offsets[0])  # warm-up: loads the model and its tables
    seconds.clear()
    calls.clear()
    cpu, passes_, kept = [], [], []
    for at in offsets:
        began = time.process_time()
        result = fill(at)
        cpu.append((time.process_time() - began) * 1000)
        passes_.append(result.steps)
        kept.append({"at": at, "passes": result.steps,
                     "candidates": [c.text for c in result.candidates]})
    n = len(offsets)
    print(f"machine: {machine_line(describe_machine(str(model.device)))}")
    forward = sum(s for stage, s in seconds.items() if stage.startswith("forward")) * 1000 / n
    print(f"{n} single-line fills, {torch.get_num_threads()} torch threads, batchRows "
          f"{args.batch_rows}: process CPU p50 {statistics.median(cpu):.1f} ms a fill; forward "
          f"passes {statistics.median(passes_)} a fill (p50), {statistics.mean(passes_):.2f} "
          f"mean, {forward / statistics.mean(passes_):.1f} ms CPU each")
    if torch.get_num_threads() == 1:  # else the pass's other threads escape thread_time
        print(f"outside the forward passes: {statistics.mean(cpu) - forward:.1f} ms CPU a fill "
              f"(mean), {100 * (1 - forward / statistics.mean(cpu)):.1f}% of it")
    print("| stage | ms CPU a fill (mean) | calls a fill |")
    print("| --- | --- | --- |")
    for stage in sorted(seconds, key=lambda s: -seconds[s]):
        print(f"| {stage} | {seconds[stage] * 1000 / n:.2f} | {calls[stage] / n:.2f} |")
    if args.fills_out:
        Path(args.fills_out).write_text(json.dumps(kept, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
