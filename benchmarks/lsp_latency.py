"""End-to-end fill latency through the LSP, as an editor sees it.

Starts the real server (`python -m dlm_lsp`, stdio), opens a real Python file,
and asks `dlm/infill` for single-line fills at fixed cursor positions (inside
lines of code), one at a time and then `--concurrent` at once over several
documents.  Reports client-side p50/p95 and fills per second.  Recent-fill reuse
is off so every request runs the model.

    OMP_NUM_THREADS=1 python benchmarks/lsp_latency.py --fills 40 --concurrent 8

On a GPU, the serving targets' shape (32-token spans, 16 clients at once):

    python benchmarks/lsp_latency.py --settings '{"device": "cuda"}' \
        --options '{"length": 32}' --fills 64 --concurrent 16 --json lsp-h200.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.framing import Client


def start_server(options: dict) -> tuple[subprocess.Popen, Client]:
    """`python -m dlm_lsp` over stdio, initialized with `options`."""
    proc = subprocess.Popen([sys.executable, "-m", "dlm_lsp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)
    client = Client.over_pipes(proc.stdin, proc.stdout)
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                  "initializationOptions": options})
    client.notify("initialized", {})
    return proc, client


def _p95(sorted_ms: list[float]) -> float:
    return sorted_ms[int(0.95 * (len(sorted_ms) - 1))]


def cursors(text: str, count: int) -> list[tuple[int, int]]:
    """(line, character) after the `= ` of assignment lines: single-line fills."""
    found = []
    for number, line in enumerate(text.splitlines()):
        at = line.find(" = ")
        if at > 0 and line.strip() and not line.lstrip().startswith("#"):
            found.append((number, at + 3))
    step = max(1, len(found) // count)
    return found[::step][:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fills", type=int, default=40)
    parser.add_argument("--concurrent", type=int, default=8)
    parser.add_argument("--model", default="default")
    parser.add_argument("--settings", default="{}", help="more server settings, as JSON")
    parser.add_argument("--options", default="{}",
                        help="options of every dlm/infill request, as JSON (e.g. a length)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="also write the numbers")
    args = parser.parse_args()
    options = json.loads(args.options)
    source = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"
    text = source.read_text()
    settings = {"model": args.model, "reuseFills": False, **json.loads(args.settings)}
    proc, client = start_server(settings)
    try:
        uris = [f"file:///bench/doc{i}.py" for i in range(args.concurrent)]
        for uri in uris:
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
        points = cursors(text, args.fills)

        def fill(uri: str, line: int, column: int) -> float:
            began = time.perf_counter()
            client.request("dlm/infill", {"textDocument": {"uri": uri}, "range": {
                "start": {"line": line, "character": column},
                "end": {"line": line, "character": column}}, "options": options})
            return (time.perf_counter() - began) * 1000

        fill(uris[0], *points[0])  # warm-up: loads the model
        alone = sorted(fill(uris[0], *p) for p in points)
        device = client.request("dlm/status", {})["device"]
        machine = describe_machine(device)
        print(f"machine: {machine_line(machine)}; settings {settings}; options {options}")
        print(f"one at a time: {len(alone)} single-line fills, p50 {statistics.median(alone):.1f}"
              f" ms, p95 {_p95(alone):.1f} ms")
        times: list[float] = []
        began = time.perf_counter()
        for batch in range(0, len(points), args.concurrent):
            group = [threading.Thread(target=lambda u=uri, p=p: times.append(fill(u, *p)))
                     for uri, p in zip(uris, points[batch:batch + args.concurrent], strict=False)]
            for t in group:
                t.start()
            for t in group:
                t.join()
        wall = time.perf_counter() - began
        times.sort()
        status = client.request("dlm/status", {})
        print(f"{args.concurrent} at once: {len(times)} fills in {wall:.1f} s "
              f"({len(times) / wall:.1f} fills/s vs {1000 / statistics.mean(alone):.1f} alone), "
              f"p50 {statistics.median(times):.1f} ms, p95 {_p95(times):.1f} ms, "
              f"batch occupancy {status['batchOccupancy']}, CUDA graphs {status['cudaGraphs']}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({
                "machine": machine, "settings": settings, "options": options,
                "alone": {"fills": len(alone), "p50_ms": statistics.median(alone),
                          "p95_ms": _p95(alone), "fills_per_s": 1000 / statistics.mean(alone)},
                "concurrent": {"clients": args.concurrent, "fills": len(times),
                               "p50_ms": statistics.median(times), "p95_ms": _p95(times),
                               "fills_per_s": len(times) / wall},
                "status": status}, indent=1) + "\n")
    finally:
        client.close()
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
