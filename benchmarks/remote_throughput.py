"""Throughput of the shared service with 1 and with 2 replicas, under the same load.

For each replica count it starts `dlm-lsp serve-remote` on this machine (Ray Serve,
CPU replicas of `--cpus-per-replica` cores each), lets `--clients` closed-loop clients
(`backend: remote`, each on its own document) send single-line fills for
`--seconds`, and reports fills per second and the clients' p50/p95 latency.  The
fills are fixed cursor positions in a stdlib file; recent-fill reuse is off so every
request runs the model.

    OMP_NUM_THREADS=1 python benchmarks/remote_throughput.py --replicas 1 2 --clients 8
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sysconfig
import tempfile
import threading
import time
from pathlib import Path

from dlm_lsp.arguments import positive, positive_amount
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.output import write_json
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.config import ServerConfig, SettingsRefused, settings_option
from dlm_lsp.quantiles import status_ms
from dlm_lsp.remote.client import RemoteEngine
from dlm_lsp.remote.launch import LocalService
from dlm_lsp.results import InfillRequest


def cursors(text: str, count: int) -> list[int]:
    """Offsets right after the `= ` of assignment lines: single-line fills."""
    found, offset = [], 0
    for line in text.splitlines(keepends=True):
        at = line.find(" = ")
        if at > 0 and not line.lstrip().startswith("#"):
            found.append(offset + at + 3)
        offset += len(line)
    step = max(1, len(found) // count)
    return found[::step][:count]


def load(url: str, text: str, points: list[int], clients: int, seconds: float,
         settings: ServerConfig) -> dict:
    """`clients` threads filling in a closed loop for `seconds`; what they saw."""
    times: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client(n: int) -> None:
        engine = RemoteEngine(dataclasses.replace(settings, backend="remote", remote_url=url,
                                                  reuse_fills=False))
        i = n
        while time.monotonic() < end:
            at = points[i % len(points)]
            began = time.perf_counter()
            try:
                engine.infill(InfillRequest(text, at, at, "python", f"file:///client{n}.py"))
            except Exception as exc:  # counted and reported, never hidden
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}")
                continue
            with lock:
                times.append((time.perf_counter() - began) * 1000)
            i += clients
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - began
    times.sort()
    return {"fills": len(times), "errors": len(errors), "firstError": errors[:1],
            "seconds": round(wall, 1), "fillsPerSecond": round(len(times) / wall, 2),
            "p50Ms": round(statistics.median(times), 1) if times else None,
            "p95Ms": status_ms(times, 0.95)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=positive, nargs="+", default=[1, 2])
    parser.add_argument("--clients", type=positive, default=8)
    parser.add_argument("--seconds", type=positive_amount, default=60)
    parser.add_argument("--model", default="default")
    parser.add_argument("--cpus-per-replica", type=positive_amount, default=1)
    parser.add_argument("--num-cpus", type=positive, default=2)
    parser.add_argument("--port", type=int, default=8377)
    parser.add_argument("--settings", default="{}",
                        help="the clients' settings, camelCase as an editor sends them (JSON)")
    parser.add_argument("--json", dest="json_out", metavar="OUT")
    args = parse_script_arguments(parser)
    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text()
    points = cursors(text, 64)
    try:  # a misspelt setting was a TypeError's traceback, or a camelCase one
        settings = settings_option(args.settings)[1]
    except SettingsRefused as exc:
        parser.error(str(exc))
    rows = []
    for count in args.replicas:
        with tempfile.TemporaryFile() as log:
            service = LocalService(["--model", args.model, "--replicas", str(count),
                                    "--num-cpus", str(args.num_cpus), "--cpus-per-replica",
                                    str(args.cpus_per_replica)], args.port, log)
            try:
                service.wait_for(count)
                load(service.url, text, points, args.clients, 10, settings)  # warm-up
                row = {"replicas": count, "clients": args.clients,
                       **load(service.url, text, points, args.clients, args.seconds, settings)}
                passes = sum(r["forwardPasses"] for r in service.replicas())
                row["forwardPasses"] = passes
            finally:
                service.stop()
        rows.append(row)
        print(json.dumps(row), flush=True)
    machine = describe_machine("cpu")
    print(f"\n{machine_line(machine)}; model {args.model}; {args.clients} closed-loop clients; "
          f"{args.cpus_per_replica} CPU per replica\n")
    print("| replicas | fills/s | p50 ms | p95 ms | fills | errors |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['replicas']} | {r['fillsPerSecond']} | {r['p50Ms']} | {r['p95Ms']} | "
              f"{r['fills']} | {r['errors']} |")
    if args.json_out:
        write_json(args.json_out, {"machine": machine, "model": args.model, "rows": rows})


if __name__ == "__main__":
    run_script(main)
