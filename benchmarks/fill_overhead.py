"""What a fill costs outside the model's forward passes, stage by stage, in CPU time.

`fill_stages.py` splits the single-line fills of `lsp_latency.py` (one file, cursors
after `= `).  This one splits two kinds of fill of HumanEval-Infilling's functions:
single-line (a line of a single-line task cut in the middle of its code, the rest of
the line the fill) and multi-line (a multi-line task's cursor, where its lines were
taken out), each filled `--runs` times on the engine in-process (one torch thread,
no batching worker, so every stage runs on the thread that times it), and reports
each stage's CPU time a fill, the min and median over the runs: the machine is shared,
and the min is the run least disturbed.  The sampler's step is split further (its
scoring, choosing tokens, choosing positions, the early stop, the settled check).

    OMP_NUM_THREADS=1 python benchmarks/fill_overhead.py --fills 10 --runs 5

`--server` also sends the same fills to `python -m dlm_lsp` over stdio (the server's
own settings, its batching worker on) and reads each of the server's threads' CPU time
from /proc: the protocol's (the event loop that reads, parses and answers messages)
apart from the fill's.  `--profile N` prints the N functions with the most CPU time of
their own (cProfile, thread CPU clock) over one run; `--fills-out FILE` writes every
fill's candidates and passes, to check that a change leaves them byte-identical.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch
from fill_stages import STAGES, timed
from forward_passes import time_forward_passes
from lsp_latency import stdio_server

from dlm_lsp import sampler, strategies
from dlm_lsp.arguments import positive
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.config import ServerConfig
from dlm_lsp.engine import Engine, InfillRequest

# the sampler step's parts (nested in "sampler step"), timed as the stages are
STEP_PARTS = [
    (sampler, "choose", "  of which: choosing tokens (argmax or sampling)"),
    (sampler, "_row_commits", "  of which: choosing positions to commit"),
    (sampler.Denoising, "_stop_early", "  of which: the early stop (holds its validation)"),
    (sampler.Denoising, "_text_settled", "  of which: the settled check"),
]


def requests(kind: str, count: int) -> list[InfillRequest]:
    """`count` fills of `kind` ("single" or "multi") of HumanEval-Infilling's functions."""
    found = []
    for i, task in enumerate(load_tasks("single-line" if kind == "single" else "multi-line",
                                        count)):
        if kind == "single":  # a cursor in the middle of the line's code, the rest to fill
            line = task.middle.split("\n")[0]
            code = line.lstrip()
            at = len(line) - len(code) + len(code) // 2
            text, at = task.prefix + line[:at] + "\n" + task.suffix, len(task.prefix) + at
        else:
            text, at = task.prefix + task.suffix, len(task.prefix)
        found.append(InfillRequest(text, at, at, "python", uri=f"file:///{kind}/{i}.py"))
    return found


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of process `pid`, by 'name/tid' (Linux /proc)."""
    tick, found = os.sysconf("SC_CLK_TCK"), {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        name, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
        fields = rest.split()
        found[f"{name}/{tid}"] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return found


def through_server(fills: dict[str, list[InfillRequest]]) -> None:
    """Each kind's fills through the server; its threads' CPU a fill."""
    settings = {"model": "default", "reuseFills": False}
    with stdio_server(settings) as (proc, client):
        def send(req: InfillRequest) -> None:
            line = req.text.count("\n", 0, req.start)
            column = req.start - (req.text.rfind("\n", 0, req.start) + 1)
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": req.uri, "languageId": "python", "version": 1, "text": req.text}})
            point = {"line": line, "character": column}
            client.request("dlm/infill", {"textDocument": {"uri": req.uri},
                                          "range": {"start": point, "end": point}})
        send(next(iter(fills.values()))[0])  # warm-up: loads the model
        for kind, reqs in fills.items():
            before, began = thread_cpu(proc.pid), time.perf_counter()
            for req in reqs:
                send(req)
            wall = (time.perf_counter() - began) * 1000 / len(reqs)
            after = thread_cpu(proc.pid)
            used = {t: (after[t] - before.get(t, 0.0)) * 1000 / len(reqs) for t in after}
            print(f"server, {len(reqs)} {kind}-line fills: wall {wall:.0f} ms a fill; CPU a "
                  "fill by thread: " + ", ".join(f"{t} {ms:.1f} ms" for t, ms in
                                               sorted(used.items(), key=lambda x: -x[1])
                                               if ms > 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fills", type=positive, default=10, help="fills of each kind")
    parser.add_argument("--runs", type=positive, default=5)
    parser.add_argument("--server", action="store_true",
                        help="also through the server, CPU by thread")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the N functions with the most CPU of their own")
    parser.add_argument("--fills-out", help="write each fill's candidates and passes (JSON)")
    args = parse_script_arguments(parser)
    fills = {kind: requests(kind, args.fills) for kind in ("single", "multi")}
    seconds: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for owner, name, stage in STAGES + STEP_PARTS:
        timed(owner, name, stage, seconds, calls)
    table = strategies.STRATEGIES  # looked up by name when a denoising starts
    for name in list(table):
        holder = type("Strategy", (), {"run": staticmethod(table[name])})
        timed(holder, "run", "  of which: scoring positions (strategy)", seconds, calls)
        table[name] = holder.run
    eng = Engine(ServerConfig(reuse_fills=False, batch_rows=0))
    model = eng.model
    time_forward_passes(model, lambda owner, name, label: timed(
        owner, name, f"forward pass: {label}", seconds, calls))
    eng.infill(fills["single"][0])  # warm-up: loads the model and its tables
    print(f"machine: {machine_line(describe_machine(str(model.device)))}; "
          f"{torch.get_num_threads()} torch threads")
    kept = []
    for kind, reqs in fills.items():
        per_run: dict[str, list[float]] = defaultdict(list)
        passes, profile = 0, cProfile.Profile(time.thread_time)
        for run in range(args.runs):
            seconds.clear()
            calls.clear()
            if run == 0 and args.profile:
                profile.enable()
            began = time.thread_time()
            results = [eng.infill(req) for req in reqs]
            total = (time.thread_time() - began) * 1000 / len(reqs)
            profile.disable()
            forward = sum(s for stage, s in seconds.items() if stage.startswith("forward"))
            per_run["all of the fill"].append(total)
            per_run["outside the forward passes"].append(total - forward * 1000 / len(reqs))
            for stage in seconds:
                per_run[stage].append(seconds[stage] * 1000 / len(reqs))
            passes = sum(r.steps for r in results) / len(reqs)
            if run == 0:
                kept += [{"kind": kind, "at": req.start, "passes": r.steps,
                          "candidates": [c.text for c in r.candidates]}
                         for req, r in zip(reqs, results, strict=True)]
        print(f"\n{len(reqs)} {kind}-line fills, {args.runs} runs, {passes:.1f} passes a fill")
        print("| stage | calls a fill | ms CPU a fill, min | median |")
        print("| --- | --- | --- | --- |")
        for stage, ms in sorted(per_run.items(), key=lambda x: -statistics.median(x[1])):
            count = f"{calls[stage] / len(reqs):.1f}" if stage in calls else ""
            print(f"| {stage} | {count} | {min(ms):.2f} | {statistics.median(ms):.2f} |")
        if args.profile:
            print(f"\nfunctions with the most CPU of their own, one run of the {kind}-line fills:")
            pstats.Stats(profile).sort_stats("tottime").print_stats(args.profile)
    if args.fills_out:
        Path(args.fills_out).write_text(json.dumps(kept, indent=1) + "\n")
    if args.server:
        through_server(fills)


if __name__ == "__main__":
    run_script(main)
