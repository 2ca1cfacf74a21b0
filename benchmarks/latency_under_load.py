"""Fills with a latency target on a machine loaded after calibration.

A server calibrates its step cost once, usually on a quiet machine; load that comes
later (another job on the cores) makes passes slower than calibrated, and fills
overran their targets by that factor.  `dlm-lsp bench throughput --latency-ms`
calibrates at its warm-up fill, under whatever load is already there, so it cannot
show that case: this script calibrates and warms up first, then starts `--load`
busy-loop processes (killed at the end, whatever happens), then runs `--concurrency`
callers of `--fills` fills each with the target, and prints one line: p50 and p95
of the fills' times, the share over the target, mean steps a fill, and the engine's
load factor (`-` on code without one).

    PYTHONPATH=. python benchmarks/latency_under_load.py --load 2 --concurrency 4

Results: benchmarks/results/latency-under-load-cpu.md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time

from dlm_lsp.arguments import positive
from dlm_lsp.bench.filling import bench_engine
from dlm_lsp.bench.script import run_script
from dlm_lsp.bench.throughput import ThroughputConfig, _fill

# a busy loop that ends when its parent does: one started as a stop came was left behind,
# a core spinning for ever
BUSY = "import os\nparent = os.getppid()\nwhile os.getppid() == parent:\n    pass\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load", type=int, default=0, help="busy-loop processes started")
    parser.add_argument("--concurrency", type=positive, default=1, help="callers at once")
    parser.add_argument("--fills", type=positive, default=40, help="fills each caller makes")
    parser.add_argument("--latency-ms", type=positive, default=300)
    parser.add_argument("--tokens", type=positive, default=16, help="span length of each fill")
    parser.add_argument("--batch-rows", type=int, default=16,
                        help="the setting batchRows: 0 runs each fill alone, without the worker")
    args = parser.parse_args()
    config = ThroughputConfig(latency_ms=args.latency_ms, tokens=args.tokens)
    engine = bench_engine("default", "cpu", batch_rows=args.batch_rows)
    fills: list[tuple[float, int]] = []
    lock = threading.Lock()
    # a stop (Ctrl-C, SIGTERM) ends the callers after their fill under way, and the
    # engine's batching worker, also in the calibration and the warm-up: left running into
    # the interpreter's exit, they aborted it ("terminate called without an active
    # exception", status 134 instead of 143)
    stopping = threading.Event()
    threads: list[threading.Thread] = []
    busy: list[subprocess.Popen] = []

    def caller(k: int) -> None:
        for j in range(args.fills):
            if stopping.is_set():
                return
            began = time.perf_counter()
            steps = _fill(engine, config, 1000 * k + j)
            with lock:
                fills.append(((time.perf_counter() - began) * 1000, steps))
    try:
        engine.step_cost()  # calibrated before the load starts
        for seed in range(3):
            _fill(engine, config, 10_000 + seed)  # warm-up, quiet too
        for _ in range(args.load):  # each ends with this process, whatever ends it
            busy.append(subprocess.Popen([sys.executable, "-c", BUSY]))
        time.sleep(0.5 if busy else 0.0)  # the load under way
        threads += [threading.Thread(target=caller, args=(k,))
                    for k in range(args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stopping.set()
        for t in threads:
            if t.ident is not None:  # started
                t.join()
        for proc in busy:
            proc.kill()
            proc.wait()
        batcher = engine.batcher()
        if batcher is not None:
            batcher.close()
    ms = sorted(m for m, _ in fills)
    factor = getattr(engine, "load_factor", None)
    print(f"load {args.load}, {args.concurrency} callers, {len(ms)} fills, target "
          f"{args.latency_ms} ms: p50 {statistics.median(ms):.0f} ms, p95 "
          f"{ms[min(len(ms) - 1, int(0.95 * len(ms)))]:.0f} ms, over target "
          f"{sum(m > args.latency_ms for m in ms) / len(ms):.0%}, mean steps "
          f"{statistics.mean(s for _, s in fills):.2f}, load factor "
          f"{'-' if factor is None else f'{factor.value:.2f}'}")


if __name__ == "__main__":
    run_script(main)
