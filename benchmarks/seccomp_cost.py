"""What the sandbox's seccomp filter (or, with `--layer landlock`, its Landlock layer)
costs a program: the same programs run with and without it, interleaved, at the
isolation level this machine gives (the README's Security section quotes these).

Two programs: `assert True` (the cost of installing the layer, against a program's
start-up), and one that makes 200,000 cheap system calls (`os.getppid`, which the filter
lets through after its longest path: every refused number is compared first), or for
Landlock 20,000 opens of a standard library file (each path walked to the root for its
rules), the cost per call.  Prints the medians of the wall time (the sandbox's
`Outcome.seconds`) each way, and their difference, per round.  Then, in one fresh
process, what the sandbox cannot time apart in a program's 50-100 ms: installing the
layer (`install_seccomp` or `install_landlock`, ctypes' import included: the child too
loads it anew, `_forget_ctypes`) and a call's cost before and after it (the best of 5
runs each).

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/seccomp_cost.py [--runs 40] [--rounds 4]
        [--layer landlock]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from dlm_lsp.arguments import positive
from dlm_lsp.bench import sandbox
from dlm_lsp.bench.sandbox import SandboxConfig, run_program
from dlm_lsp.bench.script import run_script

# Each layer's many calls (how many, what, the statement), and how it is installed in
# a fresh interpreter (this one has ctypes loaded already, and threads)
CALLS = {"seccomp": (200_000, "getppid", "os.getppid()"),
         "landlock": (20_000, "open", "open(os.__file__, 'rb').close()")}
# (what it needs, made untimed; the installing, timed)
INSTALL = {"seccomp": ("program = sandbox.seccomp.program(sandbox_child.interpreter_abi())[0]",
                       "sandbox_child.install_seccomp(program)"),
           "landlock": ("policy, work = landlock.policy(landlock.abi()[0]), tempfile.mkdtemp()"
                        "; sandbox_child._forget_ctypes()",
                        "sandbox_child.install_landlock(policy, work)")}


def programs(layer: str) -> dict[str, str]:
    count, name, statement = CALLS[layer]
    return {"assert True": "assert True\n",
            f"{count:,} {name} calls": f"import os\nfor _ in range({count}):\n    {statement}\n"}


def in_one_process(layer: str) -> str:
    count, name, statement = CALLS[layer]
    return f"""
import os, tempfile, time
from dlm_lsp.bench import landlock, sandbox, sandbox_child
def best():
    runs = []
    for _ in range(5):
        began = time.perf_counter()
        for _ in range({count}):
            {statement}
        runs.append(time.perf_counter() - began)
    return min(runs) / {count} * 1e9
before = best()
{INSTALL[layer][0]}
began = time.perf_counter()
{INSTALL[layer][1]}
installed = time.perf_counter() - began
after = best()
print(f"installing the {layer} layer: {{installed * 1000:.2f}} ms; {name}: {{before:.0f}} ns a "
      f"call without, {{after:.0f}} ns behind it ({{after - before:+.0f}} ns)")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=positive, default=40, help="runs each way, per round")
    parser.add_argument("--rounds", type=positive, default=4)
    parser.add_argument("--in-one-process-only", action="store_true",
                        help="skip the sandboxed runs")
    parser.add_argument("--layer", choices=sorted(CALLS), default="seccomp",
                        help="the layer timed (default seccomp)")
    args = parser.parse_args()
    if args.layer == "seccomp":
        seccomp = sandbox.probe_seccomp()
        found, note = seccomp.program is not None, seccomp.note
    else:
        landlock = sandbox.probe_landlock()
        found, note = bool(landlock.version), landlock.note
    if not found:
        raise SystemExit(f"no {args.layer} layer here: {note}")
    print(f"isolation {sandbox.isolation_available()}; {args.layer} {note}; "
          f"load {os.getloadavg()[0]:.1f}")
    configs = {on: SandboxConfig(timeout_s=30.0, **{args.layer: on}) for on in (True, False)}
    for name, source in ({} if args.in_one_process_only else programs(args.layer)).items():
        for round_ in range(args.rounds):
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.runs):
                for on, config in configs.items():
                    outcome = run_program(source, config)
                    assert outcome.passed and getattr(outcome, args.layer) == on, outcome
                    times[on].append(1000 * outcome.seconds)
            with_, without = (statistics.median(times[on]) for on in (True, False))
            print(f"{name}, round {round_ + 1}: median {with_:.1f} ms with the layer, "
                  f"{without:.1f} ms without, difference {with_ - without:+.1f} ms "
                  f"(load {os.getloadavg()[0]:.1f})")
    for _ in range(args.rounds):
        print(subprocess.run([sys.executable, "-c", in_one_process(args.layer)],
                             capture_output=True,
                             text=True, check=True).stdout.strip(),
              f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    run_script(main)
