"""One denoising step of the shipped model, eager and replayed as a CUDA graph.

A step as the engine runs it: hidden states of the whole sequence, then the
output head on a 32-token span (`sampler.span_forward`).  Timed at batch 1 and
8 and at 256 and 512 tokens, on the same weights loaded twice (`cudaGraphs`
off and on), each time the minimum and median of `--repeats` synchronized
steps after warm-up, and the largest difference of the two models' logits.

    PYTHONPATH=. python benchmarks/graph_step.py --json graph-step-h200.json

Needs torch, tokenizers and safetensors only.  Without CUDA it times the eager
step on the CPU and says that graphs need CUDA.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from dlm_lsp.arguments import positive
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.models import load_model
from dlm_lsp.sampler import span_forward


def time_step(model, batch: int, length: int, span: int, warmup: int,
              repeats: int) -> tuple[list[float], torch.Tensor]:
    """Milliseconds of `repeats` steps, and the last step's logits."""
    gen = torch.Generator().manual_seed(batch * 7919 + length)
    ids = torch.randint(2, model.tokenizer.vocab_size, (batch, length), generator=gen)
    ids = ids.to(model.device)
    lo = (length - span) // 2
    forward = span_forward(model, lo, lo + span)
    cuda = model.device.type == "cuda"
    for _ in range(warmup):
        out = forward(ids)
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize(model.device)
        began = time.perf_counter()
        out = forward(ids)
        if cuda:
            torch.cuda.synchronize(model.device)
        times.append((time.perf_counter() - began) * 1000)
    return times, out.float().cpu()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--batches", type=positive, nargs="+", default=[1, 8])
    parser.add_argument("--lengths", type=positive, nargs="+", default=[256, 512])
    parser.add_argument("--span", type=positive, default=32)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=positive, default=50)
    parser.add_argument("--json", dest="json_out", metavar="OUT")
    args = parse_script_arguments(parser)

    eager = load_model(args.model, args.device, args.precision, graphs=False)
    graphed = load_model(args.model, args.device, args.precision, graphs=True)
    machine = describe_machine(str(eager.device))
    print(f"machine: {machine_line(machine)}; model {args.model}, precision {eager.precision}")
    if graphed.graphs is None:
        print("CUDA graphs need a CUDA device: timing the eager step only")
    rows = []
    print("| batch | tokens | eager ms (min / median) | graph ms (min / median) | speed-up "
          "| max logit difference |")
    print("| --- | --- | --- | --- | --- | --- |")
    for batch in args.batches:
        for length in args.lengths:
            length = min(length, eager.max_length)
            plain, reference = time_step(eager, batch, length, args.span, args.warmup,
                                         args.repeats)
            row = {"batch": batch, "tokens": length, "span": args.span,
                   "eager_ms_min": min(plain), "eager_ms_median": statistics.median(plain)}
            graph_text = speedup = diff = "-"
            if graphed.graphs is not None:
                replayed, out = time_step(graphed, batch, length, args.span, args.warmup,
                                          args.repeats)
                row.update(graph_ms_min=min(replayed), graph_ms_median=statistics.median(replayed),
                           max_logit_diff=float((out - reference).abs().max()))
                graph_text = f"{min(replayed):.3f} / {statistics.median(replayed):.3f}"
                speedup = f"{statistics.median(plain) / statistics.median(replayed):.1f}x"
                diff = f"{row['max_logit_diff']:.2g}"
            rows.append(row)
            print(f"| {batch} | {length} | {min(plain):.3f} / {statistics.median(plain):.3f} | "
                  f"{graph_text} | {speedup} | {diff} |")
    if graphed.graphs is not None:
        print(f"graphs: {graphed.graphs.stats}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({
            "machine": machine, "model": args.model, "precision": eager.precision, "rows": rows,
            "graphs": vars(graphed.graphs.stats) if graphed.graphs is not None else None},
            indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
