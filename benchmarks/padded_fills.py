"""Fills alone against the same fills padded into a longer request's forward pass.

The batching worker lets rows of different lengths share a pass by padding the
shorter ones on the right and masking their pad for every query
(`serving.StepBatcher`, `TinyModel.hidden`).  In exact arithmetic a padded row's
states are its states alone; in floating point the attention over a longer,
partly masked key row sums in another order, so a logit may move in its last
bits and, rarely, a close choice flip.  This counts how often: each HumanEval
infilling task's fill (the span's tokens, greedy, fixed seed) alone, then run on
the worker beside a fill of a long document, with a step cost that makes every
pass a shared one.  The long fill is compared with its own run alone too.

    OMP_NUM_THREADS=1 PYTHONPATH=. python benchmarks/padded_fills.py --limit 50

Needs the shipped model (or --model); CPU unless --device says otherwise.
"""

from __future__ import annotations

import argparse
import threading

from dlm_lsp.arguments import positive
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.output import write_json
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.costs import StepCost
from dlm_lsp.models import load_model
from dlm_lsp.sampler import Denoising, SamplerConfig, denoise
from dlm_lsp.serving import StepBatcher
from dlm_lsp.span import build_layout

ALWAYS_SHARE = StepCost(1000.0, 0.0)  # a pass's base outweighs any padding: every pass shared


def layout_of(model, prefix: str, suffix: str, tokens: int):
    return build_layout(model.tokenizer, prefix, suffix, tokens, 448,
                        max_length=model.max_length)


def side_by_side(model, short, long, cfg: SamplerConfig, seed: int) -> tuple[list, list, int]:
    """Both fills run together on a worker that pads: their span ids and padded passes."""
    batcher = StepBatcher(model, cost=lambda: ALWAYS_SHARE)
    out: dict[str, list] = {}
    gate = threading.Barrier(2)

    def one(name: str, layout) -> None:
        state = Denoising(model, layout, cfg, seed)
        gate.wait()
        out[name] = batcher.run(state).span_ids.tolist()
    threads = [threading.Thread(target=one, args=a) for a in (("short", short), ("long", long))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        batcher.close()
    return out["short"], out["long"], batcher.stats.padded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model to fill with (default: "
                        "the shipped one)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"],
                        help="as the setting (default auto: bf16 where the CPU has it)")
    parser.add_argument("--limit", type=positive, default=50,
                        help="tasks of each split (default 50)")
    parser.add_argument("--tokens", type=positive, default=16,
                        help="span tokens a fill (default 16)")
    parser.add_argument("--steps", type=positive, default=16, help="steps a fill (default 16)")
    parser.add_argument("--json", dest="json_out", help="write the counts here")
    args = parse_script_arguments(parser)
    model = load_model(args.model, args.device, args.precision)
    cfg = SamplerConfig(steps=args.steps)
    # the companion: the longest prefix of the sample, cut to the model's context
    tasks = [t for split in ("single-line", "multi-line") for t in load_tasks(split, args.limit)]
    big = max(tasks, key=lambda t: len(t.prefix) + len(t.suffix))
    long = layout_of(model, big.prefix * 8, big.suffix, args.tokens)
    same = long_same = padded_runs = positions = differing = 0
    for seed, task in enumerate(tasks):
        short = layout_of(model, task.prefix, task.suffix, args.tokens)
        alone = denoise(model, short, cfg, seed).span_ids.tolist()
        beside, long_ids, padded = side_by_side(model, short, long, cfg, seed)
        padded_runs += padded > 0
        same += beside == alone
        long_same += long_ids == denoise(model, long, cfg, seed).span_ids.tolist()
        positions += len(alone[0])
        differing += sum(a != b for a, b in zip(alone[0], beside[0], strict=True))
    report = {"machine": describe_machine(str(model.device)), "precision":
              getattr(model, "precision", None), "fills": len(tasks), "padded": padded_runs,
              "identical": same, "long_identical": long_same, "positions": positions,
              "differing_positions": differing, "long_tokens": long.span_end
              + len(long.suffix_ids)}
    print(f"{machine_line(report['machine'])}, {report['precision']}: {same}/{len(tasks)} "
          f"fills identical padded beside a {report['long_tokens']}-token fill "
          f"({padded_runs} ran padded passes), {differing}/{positions} span tokens differ; "
          f"the long fill identical {long_same}/{len(tasks)}")
    if args.json_out:
        write_json(args.json_out, report)


if __name__ == "__main__":
    run_script(main)
