"""What skipping repair and the retry saves where no single-line fill can mend the line
(`InfillRun.beyond_reach`, dlm_lsp/passes.py).

A cursor after code on a line whose error sits away from it (`if x = 3: foo(|)`) gets
a fill the check rejects whatever the model writes.  The engine then stops after the
first pass; before, it spent the repair rounds and the left-to-right retry too.  This
fills each such line of fixtures/out_of_reach/lines.json (tests/test_repair.py
checks the skip on them) with the shipped model (single-line, the server's
defaults otherwise) as the engine does, and again with `beyond_reach` answering no,
as the engine did before, and prints the forward passes and time of each.

    python benchmarks/out_of_reach.py [--model default] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from dlm_lsp.arguments import positive
from dlm_lsp.bench.script import run_script
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.passes import InfillRun
from dlm_lsp.results import InfillRequest

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "out_of_reach" / "lines.json"


def lines() -> dict[str, str]:
    """Each line's name and document, `|` at the cursor."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return {line["name"]: line["document"] for line in data["lines"]}


def fill(engine: Engine, doc: str) -> tuple[int, str, float, bool]:
    """Forward passes, path, ms and validity of one single-line fill at the cursor."""
    at = doc.index("|")
    result = engine.infill(InfillRequest(doc.replace("|", ""), at, at, "python",
                                         "file:///reach.py", InfillOptions(kind="single-line")))
    return result.steps, result.path, result.ms, bool(result.candidates[0].valid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--repeats", type=positive, default=3)
    args = parser.parse_args()
    engine = Engine(ServerConfig(model=args.model, device="cpu", reuse_fills=False))
    skipping = InfillRun.beyond_reach
    print("| line | now: passes, path, ms | without the skip: passes, path, ms | valid |")
    print("| --- | --- | --- | --- |")
    for name, doc in lines().items():
        rows = {}
        for label, check in (("now", skipping), ("before", lambda run, candidates: False)):
            InfillRun.beyond_reach = check
            try:
                runs = [fill(engine, doc) for _ in range(args.repeats)]
            finally:
                InfillRun.beyond_reach = skipping
            steps, path, _, valid = runs[0]
            rows[label] = (steps, path, statistics.median(ms for _, _, ms, _ in runs), valid)
        now, before = rows["now"], rows["before"]
        print(f"| {name} | {now[0]}, {now[1]}, {now[2]:.0f} | {before[0]}, {before[1]}, "
              f"{before[2]:.0f} | {now[3]} / {before[3]} |")


if __name__ == "__main__":
    run_script(main)
