"""What the sandbox's seccomp filter costs a program: the same programs run with and
without it, interleaved, at the isolation level this machine gives (the README's Security
section quotes these).

Two programs: `assert True` (the cost of installing the filter, against a program's
start-up), and one that makes 200,000 cheap system calls (`os.getppid`, which the filter
lets through after its longest path: every refused number is compared first), the cost
per call.  Prints the medians of the wall time (the sandbox's `Outcome.seconds`) each
way, and their difference, per round.  Then, in one fresh process, what the sandbox
cannot time apart in a program's 50-100 ms: installing the filter (`install_seccomp`,
ctypes' import included) and a system call's cost before and after it (the best of 5
runs of 200,000 `os.getppid` calls each).

    PYTHONPATH=. OMP_NUM_THREADS=1 python benchmarks/seccomp_cost.py [--runs 40] [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from dlm_lsp.bench import sandbox
from dlm_lsp.bench.sandbox import SandboxConfig, run_program

CALLS = 200_000
PROGRAMS = {"assert True": "assert True\n",
            f"{CALLS:,} getppid calls": f"import os\nfor _ in range({CALLS}):\n    os.getppid()\n"}


# Run in a fresh interpreter (this one has ctypes loaded already, and threads).
IN_ONE_PROCESS = f"""
import os, time
from dlm_lsp.bench import sandbox, sandbox_child
def best():
    runs = []
    for _ in range(5):
        began = time.perf_counter()
        for _ in range({CALLS}):
            os.getppid()
        runs.append(time.perf_counter() - began)
    return min(runs) / {CALLS} * 1e9
before = best()
program = sandbox.seccomp.program(sandbox_child.interpreter_abi())[0]
began = time.perf_counter()
sandbox_child.install_seccomp(program)
installed = time.perf_counter() - began
after = best()
print(f"installing the filter: {{installed * 1000:.2f}} ms; getppid: {{before:.0f}} ns a call "
      f"without, {{after:.0f}} ns behind it ({{after - before:+.0f}} ns)")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs each way, per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--in-one-process-only", action="store_true",
                        help="skip the sandboxed runs")
    args = parser.parse_args()
    found = sandbox.probe_seccomp()
    if found.program is None:
        raise SystemExit(f"no seccomp filter here: {found.note}")
    print(f"isolation {sandbox.isolation_available()}; filter {found.note}; "
          f"load {os.getloadavg()[0]:.1f}")
    configs = {on: SandboxConfig(timeout_s=30.0, seccomp=on) for on in (True, False)}
    for name, source in ({} if args.in_one_process_only else PROGRAMS).items():
        for round_ in range(args.rounds):
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.runs):
                for on, config in configs.items():
                    outcome = run_program(source, config)
                    assert outcome.passed and outcome.seccomp == on, outcome
                    times[on].append(1000 * outcome.seconds)
            with_, without = (statistics.median(times[on]) for on in (True, False))
            print(f"{name}, round {round_ + 1}: median {with_:.1f} ms with the filter, "
                  f"{without:.1f} ms without, difference {with_ - without:+.1f} ms "
                  f"(load {os.getloadavg()[0]:.1f})")
    for _ in range(args.rounds):
        print(subprocess.run([sys.executable, "-c", IN_ONE_PROCESS], capture_output=True,
                             text=True, check=True).stdout.strip(),
              f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
