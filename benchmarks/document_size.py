"""Fill latency through the LSP against the size of the document.

A fill should cost what its context costs, not what the file weighs: the model
sees at most `maxContextTokens` around the span, and validation parses a window.
This opens documents of growing size (standard-library modules joined, as
`validation_large.py` builds them) in the real server and asks fills around each
document's middle, one at a time, each after an edit (a new version, as while
typing): single-line fills after the `= ` of assignments (`--at assignments`), or
multi-line fills on a blank line between two top-level definitions (`--at
between`).  The first fill of a document is reported apart: it also parses the
whole document.

    OMP_NUM_THREADS=2 python benchmarks/document_size.py --mb 0.1 1 5 --fills 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from lsp_latency import cursors, stdio_server
from validation_large import build_document

from dlm_lsp.bench.machine import describe_machine, machine_line


def between(text: str) -> list[tuple[int, int]]:
    """(line, 0) of each blank line right before a top-level `def` or `class`."""
    rows = text.split("\n")
    return [(i - 1, 0) for i in range(1, len(rows)) if not rows[i - 1].strip()
            and rows[i].startswith(("def ", "class "))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--fills", type=int, default=10)
    parser.add_argument("--at", choices=("assignments", "between"), default="assignments")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="also write the numbers")
    args = parser.parse_args()
    rows = []
    with stdio_server({"reuseFills": False}) as (_, client):
        for k, megabytes in enumerate(args.mb):
            text = build_document(megabytes)
            uri = f"file:///bench/size{k}.py"
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
            lines = text.count("\n")
            found = cursors(text, 10 ** 6) if args.at == "assignments" else between(text)
            middle = [p for p in found if abs(p[0] - lines // 2) < 2000]
            points = middle[::max(1, len(middle) // (args.fills + 1))][:args.fills + 1]
            version = iter(range(2, 10 ** 6))

            def fill(line: int, column: int, uri: str = uri, last: int = lines,
                     version=version) -> float:
                end = {"line": last, "character": 0}  # a keystroke at the end: a new version
                client.notify("textDocument/didChange", {
                    "textDocument": {"uri": uri, "version": next(version)},
                    "contentChanges": [{"range": {"start": end, "end": end}, "text": " "}]})
                began = time.perf_counter()
                answer = client.request("dlm/infill", {"textDocument": {"uri": uri}, "range": {
                    "start": {"line": line, "character": column},
                    "end": {"line": line, "character": column}}, "options": {}})
                assert "candidates" in answer, answer
                return (time.perf_counter() - began) * 1000

            first = fill(*points[0])
            times = sorted(fill(*p) for p in points[1:])
            row = {"at": args.at, "characters": len(text), "lines": lines,
                   "first_ms": round(first, 1), "fills": len(times),
                   "p50_ms": round(statistics.median(times), 1), "max_ms": round(times[-1], 1)}
            rows.append(row)
            print(f"{len(text) / 1e6:6.2f} M characters, {lines:7d} lines: first fill "
                  f"{first:7.1f} ms; then {len(times)} fills p50 {row['p50_ms']:7.1f} ms, "
                  f"max {row['max_ms']:7.1f} ms", flush=True)
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        machine = describe_machine(client.request("dlm/status", {})["device"])
        print(f"machine: {machine_line(machine)}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"machine": machine, "rows": rows},
                                                      indent=1) + "\n")


if __name__ == "__main__":
    main()
