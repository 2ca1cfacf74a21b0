"""End-to-end fill latency through the LSP, as an editor sees it.

Starts the real server (`python -m dlm_lsp`, stdio), opens a real Python file,
and asks `dlm/infill` for single-line fills at fixed cursor positions (inside
lines of code), one at a time and then `--concurrent` at once over several
documents.  Reports client-side p50/p95 and fills per second.  Recent-fill reuse
is off so every request runs the model.

    OMP_NUM_THREADS=1 python benchmarks/lsp_latency.py --fills 40 --concurrent 8

On a GPU, the serving targets' shape (32-token spans, 16 clients at once):

    python benchmarks/lsp_latency.py --settings '{"device": "cuda"}' --tcp \
        --options '{"length": 32}' --fills 64 --concurrent 16 --json lsp-h200.json

(`--tcp`: one server, a TCP connection per client, as separate editors would be.)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from dlm_lsp.arguments import positive
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.config import SettingsRefused, settings_option
from dlm_lsp.framing import Client
from dlm_lsp.quantiles import quantile


def _initialized(client: Client, options: dict) -> Client:
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                  "initializationOptions": options})
    client.notify("initialized", {})
    return client


def start_server(options: dict, env: dict[str, str] | None = None,
                 ) -> tuple[subprocess.Popen, Client]:
    """`python -m dlm_lsp` over stdio, initialized with `options`; `env`: more variables
    of its environment (benchmarks/soak.py sets the allocator's)."""
    proc = subprocess.Popen([sys.executable, "-m", "dlm_lsp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, **(env or {})})
    return proc, _initialized(Client.over_pipes(proc.stdin, proc.stdout), options)


@contextlib.contextmanager
def stdio_server(options: dict, env: dict[str, str] | None = None,
                 ) -> Iterator[tuple[subprocess.Popen, Client]]:
    """`start_server` for a `with` block: however the block ends (done, an error, Ctrl-C),
    the client is closed and the server killed and waited for, so no server outlives
    the script that measured it."""
    proc, client = start_server(options, env)
    try:
        yield proc, client
    finally:
        client.close()
        proc.kill()
        proc.wait()


def start_tcp_server(options: dict, clients: int) -> tuple[subprocess.Popen, list[Client]]:
    """`python -m dlm_lsp --tcp` on a free loopback port, and `clients` connections to it,
    each its own LSP session (as separate editors would be), initialized with `options`."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "dlm_lsp", "--tcp", f"127.0.0.1:{port}"])
    deadline = time.monotonic() + 60
    while True:
        try:
            first = socket.create_connection(("127.0.0.1", port), timeout=60)
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.1)
    socks = [first] + [socket.create_connection(("127.0.0.1", port), timeout=60)
                       for _ in range(clients - 1)]
    return proc, [_initialized(Client.over_socket(sock), options) for sock in socks]


def server_settings(text: str) -> dict:
    """`--settings` (JSON), checked as the server would check it, before any server
    starts: a misspelt or wrong setting was only warned of in a message the script's
    client never shows, and the run's numbers were of the defaults, its header naming
    the setting as if applied.  A usage error (exit 2) names each problem."""
    try:
        return settings_option(text)[0]
    except SettingsRefused as exc:
        _usage_error(str(exc))


def _usage_error(message: str) -> NoReturn:
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    raise SystemExit(2)


def _p95(ms: list[float]) -> float:
    return quantile(ms, 0.95) or 0.0


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
    parser.add_argument("--fills", type=positive, default=40)
    parser.add_argument("--concurrent", type=positive, default=8)
    parser.add_argument("--model", default="default")
    parser.add_argument("--settings", default="{}", help="more server settings, as JSON")
    parser.add_argument("--options", default="{}",
                        help="options of every dlm/infill request, as JSON (e.g. a length)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="also write the numbers")
    parser.add_argument("--tcp", action="store_true",
                        help="one server over TCP and a connection per concurrent client "
                        "(separate editors on one server), instead of one stdio client")
    args = parse_script_arguments(parser)
    options = json.loads(args.options)
    source = Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py"
    text = source.read_text()
    settings = {"model": args.model, "reuseFills": False, **server_settings(args.settings)}
    if args.tcp:
        proc, clients = start_tcp_server(settings, args.concurrent)
    else:
        proc, single = start_server(settings)
        clients = [single] * args.concurrent
    client = clients[0]
    try:
        uris = [f"file:///bench/doc{i}.py" for i in range(args.concurrent)]
        for uri, each in zip(uris, clients, strict=True):
            each.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}})
        points = cursors(text, args.fills)

        def fill(k: int, line: int, column: int) -> float:
            began = time.perf_counter()
            clients[k].request("dlm/infill", {"textDocument": {"uri": uris[k]}, "range": {
                "start": {"line": line, "character": column},
                "end": {"line": line, "character": column}}, "options": options})
            return (time.perf_counter() - began) * 1000

        fill(0, *points[0])  # warm-up: loads the model
        alone = sorted(fill(0, *p) for p in points)
        # None where a remote backend's service is not reached (the fills fell back)
        device = client.request("dlm/status", {}).get("device")
        machine = describe_machine(device)
        print(f"machine: {machine_line(machine)}; settings {settings}; options {options}")
        print(f"one at a time: {len(alone)} single-line fills, p50 {statistics.median(alone):.1f}"
              f" ms, p95 {_p95(alone):.1f} ms")
        times: list[float] = []
        began = time.perf_counter()
        for batch in range(0, len(points), args.concurrent):
            group = [threading.Thread(target=lambda k=k, p=p: times.append(fill(k, *p)))
                     for k, p in enumerate(points[batch:batch + args.concurrent])]
            for t in group:
                t.start()
            for t in group:
                t.join()
        wall = time.perf_counter() - began
        times.sort()
        status = client.request("dlm/status", {})
        how = "clients (TCP)" if args.tcp else "at once"
        # a local engine's batching, or, with `backend: remote` or `sglang`, whose status
        # has no batching of its own (dlm/status), where the fills went
        # cudaGraphs is null off CUDA: "-", not Python's None
        graphs = "-" if status.get("cudaGraphs") is None else status["cudaGraphs"]
        where = (f"batch occupancy {status['batchOccupancy']}, CUDA graphs {graphs}"
                 if "batchOccupancy" in status else
                 f"backend {status.get('backend')} at {status.get('url')}, fallbacks "
                 f"{status.get('fallbacks')}")
        # fewer fills than --concurrent run no more at once than there are ("8 at once: 3
        # fills" read as a measurement of 8 concurrent requests)
        print(f"{min(args.concurrent, len(points))} {how}: {len(times)} fills in {wall:.1f} s "
              f"({len(times) / wall:.1f} fills/s vs {1000 / statistics.mean(alone):.1f} alone), "
              f"p50 {statistics.median(times):.1f} ms, p95 {_p95(times):.1f} ms, {where}")
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({
                "machine": machine, "settings": settings, "options": options,
                "alone": {"fills": len(alone), "p50_ms": statistics.median(alone),
                          "p95_ms": _p95(alone), "fills_per_s": 1000 / statistics.mean(alone)},
                "concurrent": {"clients": args.concurrent, "tcp": args.tcp, "fills": len(times),
                               "p50_ms": statistics.median(times), "p95_ms": _p95(times),
                               "fills_per_s": len(times) / wall},
                "status": status}, indent=1) + "\n")
    finally:
        for each in set(clients):
            each.close()
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    run_script(main)
