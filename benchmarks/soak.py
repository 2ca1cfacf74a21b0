"""Resident memory and fill latency over a long editing session: the real server, soaked.

Starts `python -m dlm_lsp` over stdio, as editors do, and opens the standard
library's `textwrap.py` once per simulated editor (`--concurrent`, each driven by its
own thread, so that fills overlap and run on the server's worker threads as they do
with several files open).  Until `--minutes` have passed, each editor types a key at
a cursor and deletes it again (two `didChange`, a new version each) and asks for
`dlm/infill` there.  The cursors are those of benchmarks/lsp_latency.py (after the
`= ` of assignments: single-line fills) and of benchmarks/ghost_text.py (a blank line
inside a function body: multi-line fills).  Recent-fill reuse is off, so every fill
runs the model.

Every `--sample-seconds` it reads the server's resident memory (VmRSS in
/proc/PID/status), what glibc's malloc holds of it (the main `[heap]` and the heaps of
the threads' arenas, from /proc/PID/smaps), the CPU time the server has used and the
machine's load average (the machine may be shared: a latency is only comparable with
the load it ran under; CPU time per fill much less depends on it).  It prints a line
a minute and, at the end, the RSS curve's start, middle, end and peak, its growth over
the second half (a least-squares slope, MiB per minute: ~0 for a server whose memory
levels off), and fill latency p50 / p95 per quarter of the run.  `--json` keeps every
sample and fill.

Why: a 20-minute session once doubled the server's RSS (345 -> 690 MiB) while the
memory Python and torch had in use stayed ~115 MiB; glibc kept much of the rest,
freed, in the malloc arenas of the server's worker threads.  The server now caps them
at 2 (dlm_lsp/allocator.py) unless `MALLOC_ARENA_MAX` is set; `--env
MALLOC_ARENA_MAX=16` gives it glibc's own limit on a 2-core machine back, to compare
(benchmarks/results/soak-cpu.md):

    OMP_NUM_THREADS=1 python benchmarks/soak.py --minutes 9 --concurrent 8 --json capped.json
    OMP_NUM_THREADS=1 python benchmarks/soak.py --minutes 9 --concurrent 8 \\
        --env MALLOC_ARENA_MAX=16 --json uncapped.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sysconfig
import threading
import time
from collections import Counter
from pathlib import Path

from ghost_text import new_lines
from lsp_latency import _p95, cursors, server_settings, stdio_server

from dlm_lsp.arguments import positive, positive_amount
from dlm_lsp.bench.machine import describe_machine, load_average, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.framing import Client, ResponseError

_MIB = 1024  # KiB


def resident_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process, in KiB: its resident memory now and at its peak."""
    with open(f"/proc/{pid}/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


def malloc_heaps(pid: int) -> dict[str, float]:
    """What glibc's malloc holds, from /proc/PID/smaps: the main arena's `[heap]` and the
    heaps of the other arenas (those of threads), with their resident MiB.

    glibc maps each heap of a thread's arena as 64 MiB of address space aligned to 64
    MiB, readable and writable as far as it has grown (the rest `---p`); nothing else in
    this process is mapped that way.  Zeros where there is no such file (not Linux)."""
    heap_size = 64 << 20
    maps: list[tuple[int, int, str, str, int]] = []  # start, end, perms, path, rss KiB
    try:
        with open(f"/proc/{pid}/smaps") as smaps:
            for line in smaps:
                head = line.split(maxsplit=5)
                if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                    start, end = (int(x, 16) for x in head[0].split("-"))
                    maps.append((start, end, head[1], head[5].strip() if len(head) > 5
                                 else "", 0))
                elif head[0] == "Rss:" and maps:
                    maps[-1] = (*maps[-1][:4], int(head[1]))
    except OSError:
        return {"heaps": 0, "heaps_mib": 0.0, "main_mib": 0.0}
    heaps, heaps_kib, main_kib = 0, 0, 0
    for k, (start, end, perms, path, rss) in enumerate(maps):
        if path == "[heap]":
            main_kib += rss
        elif path or not perms.startswith("rw") or start % heap_size:
            continue
        else:
            rest = maps[k + 1] if k + 1 < len(maps) else None
            reserved = rest[1] if rest and rest[0] == end and rest[2] == "---p" \
                and not rest[3] else end
            if reserved - start == heap_size:
                heaps, heaps_kib = heaps + 1, heaps_kib + rss
    return {"heaps": heaps, "heaps_mib": round(heaps_kib / _MIB, 1),
            "main_mib": round(main_kib / _MIB, 1)}


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used (fields 14 and 15 of /proc/PID/stat,
    counted after the command name, which may hold spaces)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def edit_and_fill(client: Client, uri: str, points: list[tuple[int, int]], first: int,
                  until: float, fills: list[tuple[float, float]], errors: Counter) -> None:
    """One editor until `until` (time.monotonic): a key typed and deleted at the next
    cursor, then a fill there; each fill's (end time, ms) goes to `fills`, each error's
    code to `errors`."""
    version, turn = 1, first
    while time.monotonic() < until:
        line, column = points[turn % len(points)]
        turn += 1
        at = {"line": line, "character": column}
        after = {"line": line, "character": column + 1}
        for change in ({"range": {"start": at, "end": at}, "text": "x"},
                       {"range": {"start": at, "end": after}, "text": ""}):
            version += 1
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]})
        began = time.perf_counter()
        try:
            client.request("dlm/infill", {"textDocument": {"uri": uri},
                                          "range": {"start": at, "end": at}, "options": {}})
        except ResponseError as exc:
            errors[exc.error.get("code")] += 1
            continue
        fills.append((time.monotonic(), (time.perf_counter() - began) * 1000))


def slope_per_minute(samples: list[dict]) -> float:
    """Least-squares growth of RSS in MiB per minute over `samples`."""
    if len(samples) < 2:
        return 0.0
    ts = [s["seconds"] / 60 for s in samples]
    mean_t, mean_r = statistics.fmean(ts), statistics.fmean(s["rss_mib"] for s in samples)
    spread = sum((t - mean_t) ** 2 for t in ts)
    return sum((t - mean_t) * (s["rss_mib"] - mean_r)
               for t, s in zip(ts, samples, strict=True)) / spread if spread else 0.0


def latency(ms: list[float]) -> dict:
    ordered = sorted(ms)
    return {"fills": len(ordered), "p50_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(_p95(ordered), 1)} if ordered else {"fills": 0}


def summarize(samples: list[dict], fills: list[tuple[float, float]], began: float,
              seconds: float, errors: Counter) -> dict:
    """The numbers a run is judged by: RSS curve and growth, latency per quarter, load."""
    quarters = [latency([ms for end, ms in fills
                         if q * seconds / 4 <= end - began < (q + 1) * seconds / 4
                         or (q == 3 and end - began >= seconds)]) for q in range(4)]
    middle = len(samples) // 2
    loads = [s["load"] for s in samples if s["load"] is not None]
    cpu = samples[-1]["cpu_s"] - samples[0]["cpu_s"]
    return {
        "fills": len(fills), "errors": dict(errors),
        "fills_per_s": round(len(fills) / seconds, 2),
        "latency": latency([ms for _, ms in fills]), "latency_by_quarter": quarters,
        "rss_mib": {"start": samples[0]["rss_mib"], "middle": samples[middle]["rss_mib"],
                    "end": samples[-1]["rss_mib"],
                    "max": max(s["rss_mib"] for s in samples),
                    "peak_hwm": samples[-1]["peak_mib"]},
        "growth_second_half_mib_per_min": round(slope_per_minute(samples[middle:]), 2),
        "malloc_end_mib": {"main": samples[-1]["main_mib"], "thread_heaps":
                           samples[-1]["heaps"], "in_thread_heaps": samples[-1]["heaps_mib"]},
        "server_cpu_cores": round(cpu / max(samples[-1]["seconds"], 1e-9), 2),
        "server_cpu_ms_per_fill": round(1000 * cpu / max(len(fills), 1), 1),
        "load_1min": {"mean": round(statistics.fmean(loads), 2), "min": min(loads),
                      "max": max(loads)} if loads else None,
    }


def warm_up_fill(client: Client, uri: str, point: tuple[int, int]) -> float:
    """The first fill, which waits for the model to load: ms."""
    at = {"line": point[0], "character": point[1]}
    began = time.perf_counter()
    client.request("dlm/infill", {"textDocument": {"uri": uri}, "range": {"start": at,
                                                                       "end": at}})
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=positive_amount, default=9.0)
    parser.add_argument("--concurrent", type=positive, default=8, help="editors at once")
    parser.add_argument("--sample-seconds", type=positive_amount, default=5.0)
    parser.add_argument("--model", default="default")
    parser.add_argument("--settings", default="{}", help="more server settings, as JSON")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable of the server's environment (repeatable)")
    parser.add_argument("--json", dest="json_out", metavar="OUT", help="also write the numbers")
    args = parse_script_arguments(parser)
    env = dict(item.split("=", 1) for item in args.env)
    settings = {"model": args.model, "reuseFills": False, **server_settings(args.settings)}
    text = (Path(sysconfig.get_paths()["stdlib"]) / "textwrap.py").read_text()
    blank_text, blank_points = new_lines(text, 10)
    points = []  # 40 single-line cursors and, after every 4th, a multi-line one
    for k, point in enumerate(cursors(blank_text, 40)):  # new_lines adds no line
        points += [point, *blank_points[k // 4:k // 4 + 1]] if k % 4 == 3 else [point]
    uris = [f"file:///soak/editor{k}.py" for k in range(args.concurrent)]
    with stdio_server(settings, env) as (proc, client):
        for uri in uris:
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": blank_text}})
        warm_up = warm_up_fill(client, uris[0], points[0])
        device = client.request("dlm/status", {})["device"]
        print(f"server pid {proc.pid}, env {env}, settings {settings}; warm-up fill "
              f"{warm_up:.0f} ms; {args.concurrent} editors for {args.minutes} min", flush=True)
        fills: list[tuple[float, float]] = []
        errors: Counter = Counter()
        began = time.monotonic()
        seconds = args.minutes * 60
        editors = [threading.Thread(target=edit_and_fill, daemon=True, args=(
            client, uri, points, k * len(points) // args.concurrent, began + seconds, fills,
            errors)) for k, uri in enumerate(uris)]
        for editor in editors:
            editor.start()
        samples: list[dict] = []
        next_line = 0.0
        while True:
            now = time.monotonic() - began
            rss, peak = resident_kib(proc.pid)
            load = load_average()
            samples.append({"seconds": round(now, 1), "rss_mib": round(rss / _MIB, 1),
                            "peak_mib": round(peak / _MIB, 1), **malloc_heaps(proc.pid),
                            "fills": len(fills), "cpu_s": round(cpu_seconds(proc.pid), 2),
                            "load": load[0] if load else None})
            if now >= next_line:
                recent = [ms for end, ms in fills if end - began > now - 60]
                last = samples[-1]
                print(f"{now / 60:5.1f} min  RSS {rss / _MIB:6.1f} MiB (malloc: [heap] "
                      f"{last['main_mib']}, {last['heaps']} thread heaps {last['heaps_mib']})"
                      f"  fills {len(fills):5d}  last minute {latency(recent)}  load "
                      f"{last['load']}", flush=True)
                next_line += 60
            if not any(editor.is_alive() for editor in editors):
                break
            time.sleep(args.sample_seconds)
        summary = summarize(samples, fills, began, seconds, errors)
        machine = describe_machine(device)
        print(f"machine: {machine_line(machine)}")
        print(json.dumps(summary, indent=1))
        if args.json_out:
            Path(args.json_out).write_text(json.dumps({
                "machine": machine, "settings": settings, "env": env,
                "concurrent": args.concurrent, "minutes": args.minutes, "summary": summary,
                "samples": samples,
                "fills": [[round(end - began, 2), round(ms, 1)] for end, ms in fills]},
                indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
