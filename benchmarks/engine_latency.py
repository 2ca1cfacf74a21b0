"""Wall time of one fill with a given model on this machine, per task kind.

Usage: python benchmarks/engine_latency.py [--model default] [--device cpu] [--repeats 10]
Prints a markdown table: task kind, masked tokens, steps, median ms per fill and per step.
Only the decoding is timed: syntax repair and the left-to-right retry are off, since
what they cost depends on whether this model's fill is valid (the LSP benchmark,
`lsp_latency.py`, times whole fills).  The left-to-right row stops at the fill's end,
as an autoregressive model does (setting `stopWhenSettled`).
"""

from __future__ import annotations

import argparse
import statistics

from dlm_lsp.arguments import positive
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import InfillOptions, ServerConfig, from_json
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models.interface import ModelLoadError

DOCUMENT = (
    "import os\n\n\n"
    "def read_lines(path):\n"
    '    """Return the lines of a text file without their line breaks."""\n'
    "    with open(path) as handle:\n"
    "        \n"
    "\n\n"
    "def main():\n"
    "    for line in read_lines(os.environ['FILE']):\n"
    "        print(line.upper())\n"
)
CASES = {  # kind -> (cursor offset, strategy)
    "single-line": (DOCUMENT.index("['FILE']") + 2, "confidence"),
    "multi-line": (DOCUMENT.index("        \n") + 8, "confidence"),
    "multi-line, left-to-right": (DOCUMENT.index("        \n") + 8, "left-to-right"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default",
                        help="a model spec, as the `model` setting (default: the shipped one)")
    parser.add_argument("--device", default="cpu", help="as the `device` setting (default cpu)")
    parser.add_argument("--repeats", type=positive, default=10,
                        help="fills of each kind, one seed each (default 10)")
    args = parser.parse_args()
    problems = from_json(ServerConfig, {"model": args.model, "device": args.device},
                         strict=True)[1]
    if problems:  # `--device tpu` was torch's RuntimeError, after the model had loaded
        parser.error(problems[0])
    engine = Engine(ServerConfig(model=args.model, device=args.device))
    try:
        engine.infill(InfillRequest(DOCUMENT, 10, 10))  # warm-up, and the model's load
    except ModelLoadError as exc:  # a missing model, no CUDA: its message, no traceback
        parser.exit(1, f"{parser.prog}: {exc}\n")
    # the machine named as the other scripts name it (`x86_64` said nothing of the CPU)
    print(f"model {args.model} on {args.device}; machine: "
          f"{machine_line(describe_machine(args.device))}")
    print("| task | tokens | steps | ms per fill (median) | ms per step |")
    print("| --- | --- | --- | --- | --- |")
    for kind, (at, strategy) in CASES.items():
        times, result = [], None
        for seed in range(args.repeats):
            result = engine.infill(InfillRequest(DOCUMENT, at, at, "python",
                                                 options=InfillOptions(
                                                     seed=seed, strategy=strategy,
                                                     repair_rounds=0, fallback=False)))
            times.append(result.ms)
        ms = statistics.median(times)
        print(f"| {kind} | {result.tokens} | {result.steps} | {ms:.0f} | "
              f"{ms / result.steps:.1f} |")


if __name__ == "__main__":
    run_script(main)
