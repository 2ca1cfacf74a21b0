"""What filling a hole costs outside the model, in CPU time, in-process.

`pathological_documents.py --cases holes-200` times `dlm.fillHoles` through the server
in wall time: ~4 minutes for its 200 holes, and on a shared machine the wall time
outside the model's forward passes doubled from one run to the next (other jobs'
threads, not ours).  This fills the first `--holes` holes of the same document the way
the command does (left to right, each hole's fill in the text before the next is
asked, `holes.HoleFilling`) on the engine directly, and reports the process's CPU time
less the CPU time of the model's forward passes (`hidden` and `head`, timed on the
thread that runs them), a hole: what the server spends around the model.

    OMP_NUM_THREADS=1 python benchmarks/holes_cost.py --holes 20 --runs 3

`--fills-out FILE` writes each hole's candidates (text, verdict), to check that a
change leaves them byte-identical.
"""

from __future__ import annotations

import argparse
import statistics
import time

from pathological_documents import ForwardTime, cases

from dlm_lsp.arguments import positive
from dlm_lsp.bench.output import write_json
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.config import ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.holes import HoleFilling, find_holes
from dlm_lsp.results import InfillOptions, InfillRequest
from dlm_lsp.validation import forget_document


def fill_holes(engine: Engine, text: str, uri: str, count: int) -> list[list]:
    """Fill the first `count` holes as dlm.fillHoles does; each hole's candidates."""
    state, found = HoleFilling(text), []
    for hole in find_holes(text, engine.config.hole_marker)[:count]:
        start, end = state.current(hole)
        result = engine.infill(InfillRequest(state.text, start, end, "python", uri,
                                             InfillOptions(), is_hole=True))
        state.accept(hole, result.candidates[0].text)
        found.append([[c.text, c.valid] for c in result.candidates])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--holes", type=positive, default=20)
    parser.add_argument("--runs", type=positive, default=3)
    parser.add_argument("--fills-out", metavar="FILE", help="write every hole's candidates")
    args = parse_script_arguments(parser)
    case = cases()["holes-200"]()
    per_hole, fills = [], None
    for run in range(args.runs):
        # each run on an engine of its own, the document parsed afresh: the same work
        engine = Engine(ServerConfig())
        forget_document(case.uri)
        model = ForwardTime(engine.model, clock=time.thread_time)
        fill_holes(engine, "def f(x):\n    return <FILL>\n", "file:///warm-up.py", 1)
        model.take()
        began = time.process_time()
        found = fill_holes(engine, case.text, case.uri, args.holes)
        inside = model.take()
        outside = ((time.process_time() - began) * 1000 - inside) / len(found)
        per_hole.append(outside)
        print(f"run {run + 1}: {outside:.1f} ms CPU a hole outside the model "
              f"({inside / len(found):.0f} ms in it)", flush=True)
        if fills is not None and found != fills:
            print("  the fills differ from the first run's")
        fills = found
    print(f"{args.holes} holes of holes-200, {args.runs} runs: min {min(per_hole):.1f}, "
          f"median {statistics.median(per_hole):.1f} ms CPU a hole outside the model")
    if args.fills_out:  # as every result is written: a change's diff shows the fills it moved
        write_json(args.fills_out, fills)


if __name__ == "__main__":
    run_script(main)
