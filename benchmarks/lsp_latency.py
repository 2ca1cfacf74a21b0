"""End-to-end fill latency through the LSP, as an editor sees it.

Starts the real server (`python -m dlm_lsp`, stdio), opens a real Python file,
and asks `dlm/infill` for single-line fills at fixed cursor positions (inside
lines of code), one at a time and then `--concurrent` at once over several
documents.  Reports client-side p50/p95 and fills per second.  Recent-fill reuse
is off so every request runs the model.

    OMP_NUM_THREADS=1 python benchmarks/lsp_latency.py --fills 40 --concurrent 8
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
    args = parser.parse_args()
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
                "end": {"line": line, "character": column}}})
            return (time.perf_counter() - began) * 1000

        fill(uris[0], *points[0])  # warm-up: loads the model
        alone = sorted(fill(uris[0], *p) for p in points)
        print(f"machine: {machine_line(describe_machine('cpu'))}; settings {settings}")
        print(f"one at a time: {len(alone)} single-line fills, p50 {statistics.median(alone):.0f}"
              f" ms, p95 {alone[int(0.95 * (len(alone) - 1))]:.0f} ms")
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
              f"p50 {statistics.median(times):.0f} ms, p95 "
              f"{times[int(0.95 * (len(times) - 1))]:.0f} ms, batch occupancy "
              f"{status['batchOccupancy']}")
    finally:
        client.close()
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
