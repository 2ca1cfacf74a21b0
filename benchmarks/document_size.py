"""Fill latency through the LSP against the size of the document.

A fill should cost what its context costs, not what the file weighs: the model
sees at most `maxContextTokens` around the span, and validation parses a window.
This opens documents of growing size (standard-library modules joined, as
`validation_large.py` builds them) in the real server and asks fills around each
document's middle, one at a time, each after an edit (a new version, as while
typing): single-line fills after the `= ` of assignments (`--at assignments`), or
multi-line fills on a blank line between two top-level definitions (`--at
between`).  The first fill of a document is reported apart: it may also parse the
whole document (the server parses a large one when it is opened; `--pause S` waits S
seconds after didOpen, as a user reads before typing).  `--documents generated` opens
instead a generated file of many small functions (a tree-sitter tree of many top-level
nodes, whose incremental reparse costs the most).  Each size also reports how long
didOpen took to handle (until a `dlm/status` sent after it is answered), the slowest
`dlm/status` answer while its fills ran (polled every 50 ms: does the server still
answer), and the server's resident memory after them.

    OMP_NUM_THREADS=2 python benchmarks/document_size.py --mb 0.1 1 5 --fills 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

from lsp_latency import cursors, stdio_server
from validation_large import build_document

from dlm_lsp.arguments import positive, positive_amount
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script


def between(text: str) -> list[tuple[int, int]]:
    """(line, 0) of each blank line right before a top-level `def` or `class`."""
    rows = text.split("\n")
    return [(i - 1, 0) for i in range(1, len(rows)) if not rows[i - 1].strip()
            and rows[i].startswith(("def ", "class "))]


def generated(megabytes: float) -> str:
    """A generated Python file of `megabytes` million characters: small functions, as
    in generated handlers or bindings (8 lines each, one assignment)."""
    parts, size, k = [], 0, 0
    while size < megabytes * 1e6:
        part = (f"def handler_{k:06d}(request, context=None):\n"
                f"    \"\"\"Handle request kind {k}.\"\"\"\n"
                f"    value = request.get(\"k{k}\", {k % 97})\n"
                "    if context is not None:\n"
                "        value += context.offset\n"
                f"    return value * {k % 13 + 1}\n\n\n")
        parts.append(part)
        size += len(part)
        k += 1
    return "".join(parts)


def resident_mb(pid: int) -> float:
    """The process's resident memory (Linux), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class StatusPoll:
    """`dlm/status` every 50 ms on a thread; `stop` says the slowest answer (ms)."""

    def __init__(self, client) -> None:
        self.client, self.slowest, self.done = client, 0.0, threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        while not self.done.wait(0.05):
            began = time.perf_counter()
            self.client.request("dlm/status", {})
            self.slowest = max(self.slowest, (time.perf_counter() - began) * 1000)

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return round(self.slowest, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=positive_amount, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--fills", type=positive, default=10)
    parser.add_argument("--at", choices=("assignments", "between"), default="assignments")
    parser.add_argument("--documents", choices=("stdlib", "generated"), default="stdlib")
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds between a document's didOpen and its first fill")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="also write the numbers")
    args = parse_script_arguments(parser)
    rows = []
    build = generated if args.documents == "generated" else build_document
    with stdio_server({"reuseFills": False}) as (proc, client):
        for k, megabytes in enumerate(args.mb):
            text = build(megabytes)
            uri = f"file:///bench/size{k}.py"
            began = time.perf_counter()
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
            client.request("dlm/status", {})
            open_ms = (time.perf_counter() - began) * 1000
            time.sleep(args.pause)
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

            poll = StatusPoll(client)
            first = fill(*points[0])
            times = sorted(fill(*p) for p in points[1:])
            row = {"at": args.at, "documents": args.documents, "pause_s": args.pause,
                   "characters": len(text), "lines": lines, "open_ms": round(open_ms, 1),
                   "first_ms": round(first, 1), "fills": len(times),
                   "p50_ms": round(statistics.median(times), 1), "max_ms": round(times[-1], 1),
                   "status_max_ms": poll.stop(), "resident_mb": resident_mb(proc.pid)}
            rows.append(row)
            print(f"{len(text) / 1e6:6.2f} M characters, {lines:7d} lines: didOpen "
                  f"{open_ms:6.1f} ms; first fill {first:7.1f} ms; then {len(times)} fills "
                  f"p50 {row['p50_ms']:7.1f} ms, max {row['max_ms']:7.1f} ms; slowest status "
                  f"{row['status_max_ms']:6.1f} ms; {row['resident_mb']} MB resident",
                  flush=True)
            client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
        machine = describe_machine(client.request("dlm/status", {})["device"])
        print(f"machine: {machine_line(machine)}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({"machine": machine, "rows": rows},
                                                      indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
