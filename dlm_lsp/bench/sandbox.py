"""Run untrusted, model-written programs in a subprocess with limits.

A benchmark executes what a model wrote: it may loop forever, allocate
without bound, print without end, delete files or open connections.  Each
program runs in its own short-lived child (`sandbox_child.py`) with

- `python -I -B`: isolated mode (no user site, no PYTHON* variables, no
  script directory on the path) and no bytecode written anywhere;
- a fresh temporary working directory, deleted afterwards, a minimal
  environment, stdin closed, stdout and stderr captured into a file there;
- resource limits set before the interpreter starts (`preexec_fn`): address
  space, CPU seconds, file size (which also caps the captured output), no core
  dumps and, for a user other than root (the kernel exempts root), a process
  count just above what the user already runs;
- its own process group, killed whole at the wall-clock timeout;
- an empty network namespace (`unshare --user --net`) where the kernel lets an
  unprivileged user create one: only a loopback device that is down;
- in every case, an audit hook installed before the program runs that refuses
  sockets, processes, ctypes and writes outside the working directory.

The hook guards against accidents and casual escapes; the limits and the
namespace are what hold when code works around the hook on purpose.  What
it does not give is file-system isolation: the program runs as the calling
user and could read what that user can.
"""

from __future__ import annotations

import functools
import json
import math
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dlm_lsp.bench.sandbox_child import TOKEN_VARIABLE

REASONS = ("passed", "failed", "timeout", "error", "blocked")
UNSHARE_ARGS = ("--user", "--net", "--map-root-user", "--")


@dataclass(frozen=True)
class SandboxConfig:
    """Limits for one program; the defaults suit HumanEval-sized tests."""

    timeout_s: float = 5.0  # wall clock; then the whole process group is killed
    memory_bytes: int = 1 << 30  # address space (RLIMIT_AS): a MemoryError beyond it
    file_bytes: int = 16 << 20  # largest file written, the captured output included
    extra_processes: int = 32  # RLIMIT_NPROC headroom over the user's running tasks
    output_chars: int = 2000  # captured stdout + stderr kept in the outcome
    network_namespace: bool | None = None  # None: when available; True: required; False: off
    workers: int = 2  # programs run at the same time by `run_programs`


@dataclass(frozen=True)
class Outcome:
    """What became of one program."""

    passed: bool
    reason: str  # one of REASONS
    detail: str  # a short why: the failed assertion, the exception, the refused event
    seconds: float
    output: str = ""  # the start of stdout + stderr
    network_isolated: bool = False  # ran in an empty network namespace


@functools.lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """Whether `unshare --user --net` works here (checked once, by running it)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run([unshare, *UNSHARE_ARGS, sys.executable, "-I", "-S", "-c", "pass"],
                              stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.lru_cache(maxsize=1)
def _child_source() -> str:
    return (Path(__file__).with_name("sandbox_child.py")).read_text(encoding="utf-8")


def _user_tasks() -> int:
    """Tasks (threads) the calling user runs now: what RLIMIT_NPROC counts against."""
    uid, total = str(os.getuid()), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            status = Path("/proc", pid, "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [uid]:
            total += int(fields.get("Threads", "1"))
    return total


def _limits(config: SandboxConfig) -> Callable[[], None]:
    """The preexec function: set every limit in the child, before exec.

    Values are computed here, in the parent, and clamped to the current hard
    limits, so the child only makes plain system calls between fork and exec.
    """
    cpu = math.ceil(config.timeout_s) + 1  # SIGXCPU at the soft limit, SIGKILL one second on
    wanted = [(resource.RLIMIT_AS, config.memory_bytes, config.memory_bytes),
              (resource.RLIMIT_CPU, cpu, cpu + 1),
              (resource.RLIMIT_FSIZE, config.file_bytes, config.file_bytes),
              (resource.RLIMIT_CORE, 0, 0)]
    if os.geteuid() != 0:
        processes = _user_tasks() + config.extra_processes
        wanted.append((resource.RLIMIT_NPROC, processes, processes))
    limits = []
    for which, soft, hard in wanted:
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        limits.append((which, (soft, hard)))

    def apply() -> None:
        for which, pair in limits:
            resource.setrlimit(which, pair)
    return apply


def _use_namespace(config: SandboxConfig) -> bool:
    if config.network_namespace is False:
        return False
    available = network_namespace_available()
    if config.network_namespace and not available:
        raise RuntimeError("a network namespace was required, but `unshare --user --net` "
                           "does not work here")
    return available


def _wait_unreaped(pid: int, deadline: float) -> bool:
    """Wait until the child exits (True) or the deadline passes (False), without reaping it."""
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.perf_counter() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_outcome(fd: int) -> dict:
    """The child's last outcome line on the pipe, or {} when it wrote none."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) < 65536:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    except BlockingIOError:
        pass
    for line in reversed(data.decode("utf-8", "replace").splitlines()):
        try:
            outcome = json.loads(line)
        except ValueError:
            continue
        if isinstance(outcome, dict) and outcome.get("reason") in REASONS:
            return outcome
    return {}


def _classify(returncode: int, timed_out: bool, outcome: dict, token: str,
              config: SandboxConfig, output: str) -> tuple[str, str]:
    """(reason, detail) from how the child ended and what it reported."""
    if timed_out:
        return "timeout", f"killed after {config.timeout_s:g} s"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if -returncode == signal.SIGXCPU:
            return "timeout", "CPU time limit"
        return "error", f"killed by {name}"
    reason = outcome.get("reason")
    if reason == "passed":
        if returncode == 0 and secrets.compare_digest(str(outcome.get("token", "")), token):
            return "passed", ""
        return "error", "a pass reported without the sandbox's token"
    if reason is not None:
        return reason, str(outcome.get("detail", ""))
    last = output.strip().splitlines()[-1:] or [""]
    return "error", f"exited with code {returncode} before its tests finished {last[0]}".strip()


def run_program(source: str, config: SandboxConfig | None = None) -> Outcome:
    """Execute one program in the sandbox; its tests pass when it runs to the end."""
    config = config or SandboxConfig()
    isolated = _use_namespace(config)
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="dlm-sandbox-", ignore_cleanup_errors=True) as work:
        Path(work, "program.py").write_text(source, encoding="utf-8")
        read_fd, write_fd = os.pipe()
        command = [sys.executable, "-I", "-B", "-c", _child_source(), "program.py", str(write_fd)]
        if isolated:
            command = [shutil.which("unshare") or "unshare", *UNSHARE_ARGS, *command]
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work, "TMPDIR": work,
               TOKEN_VARIABLE: token}
        began = time.perf_counter()
        try:
            with open(Path(work, "output"), "wb") as output:
                child = subprocess.Popen(
                    command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=output,
                    stderr=subprocess.STDOUT, pass_fds=(write_fd,), start_new_session=True,
                    preexec_fn=_limits(config))
        finally:
            os.close(write_fd)
        timed_out = not _wait_unreaped(child.pid, began + config.timeout_s)
        # The group leader is a zombie at most, so its pid (the group id) cannot have been
        # reused: this kills the program on timeout, else anything it left behind.
        _kill_group(child.pid)
        child.wait()
        seconds = time.perf_counter() - began
        try:
            outcome = _read_outcome(read_fd)
        finally:
            os.close(read_fd)
        with open(Path(work, "output"), "rb") as handle:
            text = handle.read(config.output_chars * 4).decode("utf-8", "replace")
    text = text[:config.output_chars]
    reason, detail = _classify(child.returncode, timed_out, outcome, token, config, text)
    return Outcome(reason == "passed", reason, detail, round(seconds, 3), text, isolated)


def run_programs(sources: Sequence[str], config: SandboxConfig | None = None) -> list[Outcome]:
    """Execute many programs, `config.workers` at a time; outcomes in input order."""
    config = config or SandboxConfig()
    with ThreadPoolExecutor(max_workers=max(1, config.workers)) as pool:
        return list(pool.map(lambda source: run_program(source, config), sources))
