"""What the fill made at the end of an accepted suggestion would offer (dlm_lsp/offers.py).

Ghost text is asked for at a line's start and after its first 3 characters, on held-out
lines and HumanEval multi-line tasks (their middle removed), through the engine with the
server's defaults; a suggestion is what the server would offer (`_suggestions`: not
whitespace, not rejected).  For each first suggestion it counts whether the model ended
it before its span (`Candidate.ended`), and for those the fill an editor would ask for
next, at its end with it accepted: what that fill offers, and the time of both kinds.

    python benchmarks/accepted_fills.py [--heldout 40] [--humaneval 20] [--model default]
"""

from __future__ import annotations

import argparse
import collections
import time
from types import SimpleNamespace

from dlm_lsp.arguments import positive
from dlm_lsp.bench.heldout import heldout_files, line_tasks
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.results import InfillRequest
from dlm_lsp.server import _suggestions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", type=positive, default=40, help="held-out lines")
    parser.add_argument("--humaneval", type=positive, default=20, help="HumanEval multi-line tasks")
    parser.add_argument("--model", default="default")
    args = parser.parse_args()
    engine = Engine(ServerConfig(model=args.model, device="cpu"))
    server = SimpleNamespace(config=engine.config)  # what `_suggestions` reads
    tasks = line_tasks(heldout_files(), args.heldout) + load_tasks("multi", args.humaneval)
    asked = offered = ended = 0
    after: collections.Counter[str] = collections.Counter()
    first_s = next_s = 0.0
    for number, task in enumerate(tasks):
        for typed in (0, 3):
            asked += 1
            prefix = task.prefix + task.middle[:typed]
            uri = f"file:///accepted/{number}-{typed}.py"  # no fill reused from another
            began = time.perf_counter()
            result = engine.infill(InfillRequest(prefix + task.suffix, len(prefix), len(prefix),
                                                 "python", uri, InfillOptions()))
            first_s += time.perf_counter() - began
            texts = _suggestions(server, result)
            if not texts:
                continue
            offered += 1
            best = next(c for c in result.candidates if c.text == texts[0])
            if not best.ended:
                continue
            ended += 1
            accepted = prefix + texts[0]
            began = time.perf_counter()
            again = engine.infill(InfillRequest(accepted + task.suffix, len(accepted),
                                                len(accepted), "python", uri + ".next",
                                                InfillOptions()))
            next_s += time.perf_counter() - began
            shown = _suggestions(server, again)
            rest = task.middle[typed + len(texts[0]):] if task.middle[typed:].startswith(
                texts[0]) else None
            after["the rest of the middle" if shown and rest and shown[0] == rest
                  else repr(shown[0][:24]) if shown else "nothing"] += 1
    print(f"{asked} requests, {offered} offered, {ended} ended before their span")
    print(f"after each ended one: {dict(after.most_common())}")
    print(f"first fills {first_s:.1f} s, fills after the ended ones {next_s:.1f} s")


if __name__ == "__main__":
    run_script(main)
