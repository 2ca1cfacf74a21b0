"""Run untrusted, model-written programs in a subprocess with limits.

A benchmark executes what a model wrote: it may loop forever, allocate
without bound, print without end, delete files or open connections.  Each
program runs in its own short-lived child (`sandbox_child.py`) with

- `python -I -B`: isolated mode (no user site, no PYTHON* variables, no
  script directory on the path) and no bytecode written anywhere;
- a fresh temporary working directory inside one only this user may enter,
  both deleted afterwards, a minimal environment, a new and empty session
  keyring (not the caller's, whose keys it would possess), stdin closed, stdout and
  stderr captured into a file beside it (read back through its descriptor);
- resource limits set before the interpreter starts (`preexec_fn`): address
  space, CPU seconds, file size (which also caps the captured output), open
  descriptors, no core dumps and a process count just above what the program's
  user already runs;
- run as root, the program gives up root's ids for nobody's (`UNPRIVILEGED`) before it
  starts: the kernel exempts root from the process count, and a fork bomb ran on to
  the timeout (200 forks of 200, 2026-12-03).  It owns its directory and source; root
  keeps the rest.  Where nobody cannot reach the interpreter (one in root's home,
  without the namespaces' root that shows it), it runs as root, the report says so;
- its own process group, killed whole at the wall-clock timeout;
- where a pids controller is writable (`cgroup.find`: cgroup v1's pids hierarchy, or
  v2's), a cgroup of its own whose `pids.max` is the process headroom: it binds root,
  whom the process limit does not, and every process the program leaves, in whatever
  group or session (`setsid` escaped the group's kill below the PID namespace), is
  killed and the cgroup removed when it ends (`cgroup.PidsCgroup`);
- where the kernel installs one and `seccomp.py` has a system call table for the
  interpreter's ABI (x86_64, aarch64), a seccomp filter, installed in the program's
  process once the sandbox's own setup is done: what no benchmark program needs
  (ptrace, mounts, new namespaces, keyrings, bpf, kernel modules, io_uring, pidfds,
  sockets other than AF_UNIX, a socket reached by its name, signals to processes
  other than its own, ...) fails with EPERM, hook or no hook; checked once
  (`probe_seccomp`), and where it does not work programs run without it and the
  reports say why;
- where the kernel has Landlock (`landlock.py`), a Landlock layer, installed in the
  program's process just before the seccomp filter: files are written only in its
  working directory (and /dev/null, zero, full), read only in the namespaces'
  allow-list, /proc and its directory, at every level; no TCP bind or connect (ABI 4);
  signals and abstract Unix sockets only within the program's own processes (ABI 6);
  checked once (`probe_landlock`), and where it does not work programs run without it
  and the reports say why;
- where the kernel lets an unprivileged user create them, new namespaces
  (`unshare --user --net --ipc --pid --mount`): an empty network (a loopback
  device that is down), System V IPC of its own (gone with it), a process tree of
  its own that dies whole with its first process (a child that leaves the
  process group with `setsid` dies too), and a root file system of its own that
  holds, read-only, only what programs and the interpreter need: the system's
  /usr and /lib (with /bin and /sbin), the dynamic loader's cache and the local
  time zone from /etc, the interpreter's own directories (its prefixes: a virtual environment's and
  the installation's, wherever they are), /proc of its PID namespace, a /dev
  of five harmless devices, and a fresh small tmpfs as the working directory.
  The rest of the host is out of sight: the user's home (keys, tokens),
  other projects, /etc's other files, /tmp and /run, where local sockets
  live.  The child then moves into a user namespace of its own (run as root: no user
  namespace, and the child gives up root's ids), so the program cannot undo any of it
  (`sandbox_child.isolate`).
  Where only `unshare --user --net --ipc` works, the network (and IPC) namespace
  alone; where that fails too (no `unshare`, user namespaces refused), none.  The level is
  probed once (`probe_isolation`); each fallback says why on stderr and in the
  benchmark's report, and `SandboxConfig.required` refuses to run below a level;
- in every case, an audit hook installed before the program runs that refuses
  sockets, processes, ctypes and writes outside the working directory.  It cannot
  refuse what raises no audit event: `signal.pidfd_send_signal` (with
  `os.pidfd_open`) signals any process of the user's below the namespaces.

The hook guards against accidents and casual escapes; it runs in the program's
own interpreter, so a program that sets out to can get around it (CPython
documents audit hooks as monitoring, not a boundary).  What holds then is what
the kernel enforces: the limits and, where available, the namespaces.  Without
the namespaces (the network's alone, or none) reading is not isolated: the
program runs as the calling user and can read whatever that user can.  And a
program can always report a pass it did not earn by finding
the token in its own process's memory; the token stops accidental early exits,
not a program written to cheat (`Outcome.isolation` says what held).
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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from dlm_lsp.bench import cgroup, landlock, seccomp
from dlm_lsp.bench.sandbox_child import (
    DROP,
    ISOLATE,
    NO_HOOK,
    PR_SET_PDEATHSIG,
    STARTED,
    UNPRIVILEGED,
    interpreter_abi,
    pivot_root_number,
)

# "sandbox": the program never ran, the harness failed (no temporary directory, `unshare`
# or the namespaces refused, no process): a verdict on the machine, not on the program
REASONS = ("passed", "failed", "timeout", "error", "blocked", "sandbox")
SANDBOX = "sandbox"
# Isolation levels, strongest first, and the `unshare` arguments of each.
NAMESPACES, NETWORK, NONE = "namespaces", "network", "none"
ISOLATION_LEVELS = (NONE, NETWORK, NAMESPACES)  # weakest first
ISOLATION_WORDS = {
    NAMESPACES: "namespaces (no network, its own processes, a read-only file system of only "
                "the system's and Python's own files)",
    NETWORK: "network and IPC namespaces only",
    NONE: "none (the audit hook and the limits only)",
}
# Each level has an IPC namespace of its own too: System V shared memory, semaphores and
# message queues outlive their processes, and in the host's a program saw the user's
# segments and left its own behind, memory held until someone removed them.
UNSHARE_ARGS = {
    NAMESPACES: ("--user", "--map-root-user", "--net", "--ipc", "--pid", "--fork",
                 "--kill-child", "--mount-proc", "--"),
    NETWORK: ("--user", "--net", "--ipc", "--map-root-user", "--"),
}
# Root's, where its programs drop root's ids (`Isolation.drop`): no user namespace.  One
# mapping root to root left the program root on the host, whom the kernel exempts from
# RLIMIT_NPROC, with no other id to become; root makes the other namespaces without one.
ROOT_UNSHARE_ARGS = {level: tuple(a for a in args if a not in ("--user", "--map-root-user"))
                     for level, args in UNSHARE_ARGS.items()}


@dataclass(frozen=True)
class SandboxConfig:
    """Limits for one program; the defaults suit HumanEval-sized tests."""

    timeout_s: float = 5.0  # wall clock; then the whole process group is killed
    memory_bytes: int = 1 << 30  # address space (RLIMIT_AS): a MemoryError beyond it
    file_bytes: int = 16 << 20  # largest file written, the captured output included
    # RLIMIT_NPROC headroom over the user's running tasks, and the pids cgroup's pids.max
    # (above the harness's own processes), the program itself included
    extra_processes: int = 32
    output_chars: int = 2000  # captured stdout + stderr kept in the outcome
    open_files: int = 64  # descriptors (each memfd could hold file_bytes of memory)
    # Programs run in the strongest isolation that works here (`probe_isolation`).  This is
    # the weakest one accepted (`ISOLATION_LEVELS`): where the probe finds only a weaker
    # one, no program runs (IsolationRefused) instead of the sandbox falling back.  NETWORK
    # says what `network_namespace=True` said, a field this one replaced (the two
    # overlapped); its False, no namespaces even where they work, is no longer offered.
    required: str = NONE
    hook: bool = True  # False: no audit hook, to test what the kernel enforces alone
    seccomp: bool = True  # False: no seccomp filter (`seccomp.py`), to test what it adds
    landlock: bool = True  # False: no Landlock layer (`landlock.py`), to test what it adds
    workers: int = 2  # programs run at the same time by `run_programs`

    def __post_init__(self) -> None:
        if self.required not in ISOLATION_LEVELS:  # found out only as programs were to run
            raise ValueError(f"SandboxConfig.required must be one of "
                             f"{', '.join(map(repr, ISOLATION_LEVELS))}, got {self.required!r}")


@dataclass(frozen=True)
class Outcome:
    """What became of one program."""

    passed: bool
    reason: str  # one of REASONS
    detail: str  # a short why: the failed assertion, the exception, the refused event
    seconds: float
    output: str = ""  # the start of stdout + stderr
    isolation: str = NONE  # NAMESPACES, NETWORK (network and IPC namespaces alone) or NONE
    pids_cgroup: bool = False  # ran in a pids cgroup of its own (`cgroup.py`)
    seccomp: bool = False  # ran behind the seccomp filter (`seccomp.py`)
    landlock: bool = False  # ran behind the Landlock layer (`landlock.py`)
    memory_cgroup: bool = False  # its processes' memory capped together (`_ProgramCgroups`)

    @property
    def network_isolated(self) -> bool:
        """Ran in an empty network namespace."""
        return self.isolation != NONE


# What the benchmarks' programs import: every module the prompts, tests and canonical
# solutions of HumanEval-Infilling import (math, typing, copy, random, collections, re,
# string, hashlib), and others a model's fill reaches for.  Most load an extension module
# or a system library (hashlib's libcrypto, decimal's libmpdec) when imported, which the
# namespaces' root may not show where they lie outside its allow-list.
PROBE_MODULES = ("math", "typing", "copy", "random", "collections", "re", "string", "hashlib",
                 "itertools", "functools", "operator", "heapq", "bisect", "json", "fractions",
                 "decimal", "statistics", "datetime", "unicodedata")


def _probe_program() -> str:
    """Imports `PROBE_MODULES`, failing with the name and error of each that does not
    import, and makes an md5 (HumanEval 162's), which needs libcrypto where the interpreter
    has no md5 of its own (not for security: a FIPS-mode OpenSSL refuses it otherwise, in
    every isolation alike, and the probe would give up the namespaces for nothing)."""
    return ("import importlib\nmissing = []\n"
            f"for name in {PROBE_MODULES!r}:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception as exc:\n"
            "        missing.append(f'{name} ({type(exc).__name__}: {exc})')\n"
            "assert not missing, 'cannot import ' + ', '.join(missing)\n"
            "import hashlib\nhashlib.md5(b'', usedforsecurity=False).hexdigest()\n")


@dataclass(frozen=True)
class Isolation:
    """What the probe found: the strongest level that works here and, where that is not
    the strongest of all, why each stronger one was left (one line, for the reports)."""

    level: str
    fallback: str = ""  # "" when NAMESPACES works
    # The caller is root and its programs drop to the unprivileged user (`UNPRIVILEGED`),
    # so that the process limit binds them: at `level` only, where the probe saw it work.
    drop: bool = False


# How a caller refuses to run programs below the namespaces, as the warning names it: a
# library caller's way, or the command line's (`checked_config`).
LIBRARY_REFUSAL = f"SandboxConfig(required={NAMESPACES!r})"
COMMAND_REFUSAL = "--require-isolation"


def isolation_warning(level: str, refusal: str = LIBRARY_REFUSAL, drop: bool = False) -> str:
    """The warning that programs will run below the namespaces, at `level` (NONE or
    NETWORK), naming `refusal`, the way to refuse that; `drop`: root's programs run as
    the unprivileged user, not as root."""
    how = ("no isolation, only the audit hook, resource limits and a timeout" if level == NONE
           else "no network but no root of their own either")
    who = (f"as the unprivileged user {UNPRIVILEGED} (nobody), able to read whatever any "
           f"user can and to signal that user's processes" if drop
           else "as your user, able to read whatever you can and to signal your processes")
    return (f"sandbox: WARNING: model-written programs will run with {how}: {who}; "
            f"{refusal} refuses to run them so")


class _Once:
    """Whether something was done yet in this process, claimed by one thread only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = False

    def claim(self) -> bool:
        """True the first time only."""
        with self._lock:
            first, self._done = not self._done, True
            return first


_WARNED = _Once()  # the warning is said once a process, where the isolation is first used


def _warn(level: str, refusal: str, drop: bool = False) -> None:
    """Say, once, that programs will run below the namespaces, and how to refuse that.

    The probe said it, naming the command line's --require-isolation, to library callers of
    `run_program` too, who have no such flag; the caller now names its own way."""
    if level != NAMESPACES and _WARNED.claim():
        print(isolation_warning(level, refusal, drop), file=sys.stderr)


class IsolationRefused(RuntimeError):
    """The isolation found here is weaker than `SandboxConfig.required`."""


@functools.lru_cache(maxsize=1)
def probe_isolation() -> Isolation:
    """The strongest isolation that works here, checked once by running a program in it
    that imports what benchmark programs import (`_probe_program`); each level left says
    why on stderr (and a level that leaves the user's files readable says so loudly where
    programs are to run at it: `_warn`).

    The probe was `assert True`, which needs nothing the interpreter had not loaded before
    the namespaces' root hid the rest: where the interpreter's extension modules or the
    libraries they load lie outside that root (a Nix store, a library directory reached
    through a link out of /usr), it passed while every real program failed on its first
    import, an error of the model's in pass@1.  No `unshare`, or a machine with no known
    pivot_root number, fell back with no word at all, and the reasons reached only
    stderr: the reports now keep them (`Isolation.fallback`).

    Run as root, each level is tried first with the program dropping root's ids
    (`sandbox_child.drop_root`), then as root, as before: the kernel exempts root from
    the process limit, so that a fork bomb ran on to the timeout.  The drop fails where
    the unprivileged user cannot reach the interpreter (one in root's home, without the
    namespaces' root that shows it), and the report says that programs ran as root."""
    reasons: list[str] = []
    root = os.geteuid() == 0
    # Root's programs drop root's ids where that works at a level, else run as root
    drops = (True, False) if root else (False,)

    def named(level: str, drop: bool) -> str:
        return repr(level) + ((" as nobody" if drop else " as root") if root else "")

    def leave(names: list[str], weaker: str, why: str) -> None:
        named_all = " and ".join(names)
        reasons.append(f"{named_all}: {why}")
        print(f"sandbox: isolation {named_all} {'fails' if len(names) == 1 else 'fail'} "
              f"here ({why}); falling back to {weaker}", file=sys.stderr)

    levels = (NAMESPACES, NETWORK, NONE)
    # each level's variants, strongest first; NONE as the caller is the last resort
    candidates = [(level, drop) for level in levels for drop in drops][:-1]
    last = (NONE, False)
    index = 0
    while index < len(candidates):
        level, drop = candidates[index]
        why = _unavailable(level)
        if why:  # every variant of this level, and of the next ones left for the same reason
            end = index
            while end + 1 < len(candidates) and _unavailable(candidates[end + 1][0]) == why:
                end += 1
            left = list(dict.fromkeys(repr(lv) for lv, _ in candidates[index:end + 1]))
            index = end + 1
            leave(left, named(*(candidates[index] if index < len(candidates) else last)), why)
            continue
        outcome = _run(_probe_program(), SandboxConfig(timeout_s=30.0), level, drop=drop)
        if outcome.passed:
            return Isolation(level, "; ".join(reasons + _as_root(root and not drop)), drop)
        index += 1
        leave([named(level, drop)],
              named(*(candidates[index] if index < len(candidates) else last)),
              f"{outcome.reason}: {outcome.detail}")
    return Isolation(NONE, "; ".join(reasons + _as_root(root)))


def _unavailable(level: str) -> str:
    """Why `level` cannot work here whatever is run in it ("" when it may)."""
    if level == NONE:
        return ""
    if shutil.which("unshare") is None:
        return "no `unshare` command (util-linux) on the PATH"
    if level == NAMESPACES and pivot_root_number() is None:
        machine, bits = interpreter_abi()
        return f"no pivot_root system call number known for {machine} ({bits}-bit Python)"
    return ""


def _as_root(as_root: bool) -> list[str]:
    """The fallback's words for programs that run as root (none for others)."""
    return ["programs run as root, whom the kernel's process limit does not bind"
            ] if as_root else []


def isolation_available() -> str:
    """The strongest isolation level that works here (`probe_isolation`)."""
    return probe_isolation().level


@dataclass(frozen=True)
class Seccomp:
    """What `probe_seccomp` found: the filter programs run behind (None where it does
    not work here) and, for the reports, what it refuses or why there is none."""

    program: bytes | None
    note: str


# Run behind the filter, the hook off: passes where the kernel refused the socket.
SECCOMP_PROBE = ("import _socket\ntry:\n    _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
                 "except PermissionError:\n    pass\nelse:\n"
                 "    raise AssertionError('socket(AF_INET) was not refused')\n")


@functools.lru_cache(maxsize=1)
def probe_seccomp() -> Seccomp:
    """The seccomp filter for this interpreter's ABI, checked once by running a program
    behind it (no isolation, no hook) whose AF_INET socket it must refuse: a kernel built
    without seccomp filters, or a container's own filter that forbids installing one,
    leaves the programs without it, as before, and the reports say why."""
    if not sys.platform.startswith("linux"):
        return Seccomp(None, "not Linux")
    program, note = seccomp.program(interpreter_abi())
    if program is None:
        return Seccomp(None, note)
    outcome = _run(SECCOMP_PROBE, SandboxConfig(timeout_s=30.0, hook=False), NONE,
                   seccomp_filter=program)
    if not outcome.passed:
        why = f"it did not work here: {outcome.reason}: {outcome.detail}"
        print(f"sandbox: no seccomp filter ({why})", file=sys.stderr)
        return Seccomp(None, why)
    return Seccomp(program, note)


def _seccomp(config: SandboxConfig) -> bytes | None:
    """The filter programs run behind under `config` (None: none)."""
    return probe_seccomp().program if config.seccomp else None


@dataclass(frozen=True)
class Landlock:
    """What `probe_landlock` found: the kernel's Landlock ABI (0 where the layer does not
    work here), the policy programs run behind (`landlock.policy`) and, for the reports,
    what the layer holds or why there is none."""

    version: int
    policy: str
    note: str


# Run behind the layer alone (no hook, no filter): passes where a file beside its
# working directory, which its user may write, was refused, and what programs import
# still imports.
LANDLOCK_PROBE = ("try:\n    open('../landlock-probe', 'x').close()\n"
                  "except PermissionError:\n    pass\nelse:\n"
                  "    raise AssertionError('a write outside was not refused')\n")


@functools.lru_cache(maxsize=1)
def probe_landlock() -> Landlock:
    """The Landlock layer, checked once by running a program behind it (no isolation,
    no hook, no seccomp filter) that must be refused a write beside its directory and
    still import what benchmark programs import (`_probe_program`): a kernel without
    Landlock, or one whose ruleset the child cannot make, leaves the programs without
    it, as before, and the reports say why."""
    if not sys.platform.startswith("linux"):
        return Landlock(0, "", "not Linux")
    version, why = landlock.abi()
    if not version:
        return Landlock(0, "", why)
    found = Landlock(version, landlock.policy(version), landlock.describe(version))
    outcome = _run(LANDLOCK_PROBE + _probe_program(),
                   SandboxConfig(timeout_s=30.0, hook=False), NONE, landlock_found=found)
    if not outcome.passed:
        why = f"it did not work here: {outcome.reason}: {outcome.detail}"
        print(f"sandbox: no Landlock layer ({why})", file=sys.stderr)
        return Landlock(0, "", why)
    return found


def _landlock(config: SandboxConfig) -> Landlock | None:
    """The layer programs run behind under `config` (None: none)."""
    found = probe_landlock() if config.landlock else None
    return found if found is not None and found.version else None


def network_namespace_available() -> bool:
    """Whether programs can run in an empty network namespace here."""
    return isolation_available() != NONE


@functools.lru_cache(maxsize=1)
def _child_source() -> str:
    return (Path(__file__).with_name("sandbox_child.py")).read_text(encoding="utf-8")


def _user_tasks(uid: int) -> int:
    """Tasks (threads) user `uid` runs now: what RLIMIT_NPROC counts against.

    Read before every program, root's too now (`drop`): each process's status is searched
    for its real uid (the first of its Uid line) and thread count, not split into a dict
    of all its fields, which took 8 ms a program here (115 processes, load 10), now 3."""
    real, total = f"\nUid:\t{uid}\t", 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as handle:
                status = handle.read()
        except OSError:
            continue
        if real in status:
            at = status.find("\nThreads:")
            total += int(status[at + 9:status.index("\n", at + 1)]) if at >= 0 else 1
    return total


def _limits(config: SandboxConfig, drop: bool = False,
            join: Callable[[], None] | None = None) -> Callable[[], None]:
    """The preexec function: join the program's pids cgroup (`join`, where it has one),
    then set every limit in the child, before exec.

    Values are computed here, in the parent, and clamped to the current hard
    limits, so the child only makes plain system calls between fork and exec.  The
    process limit counts the tasks of the user the program runs as: the caller, or with
    `drop` the unprivileged user root's programs become (root itself is exempt).
    """
    cpu = math.ceil(config.timeout_s) + 1  # SIGXCPU at the soft limit, SIGKILL one second on
    wanted = [(resource.RLIMIT_AS, config.memory_bytes, config.memory_bytes),
              (resource.RLIMIT_CPU, cpu, cpu + 1),
              (resource.RLIMIT_FSIZE, config.file_bytes, config.file_bytes),
              (resource.RLIMIT_CORE, 0, 0),
              (resource.RLIMIT_NOFILE, config.open_files, config.open_files)]
    if drop or os.geteuid() != 0:
        # RLIMIT_NPROC counts the user's tasks, every program's together: a fork bomb filled
        # it for the program beside it too, whose setup then could not fork ("sandbox", CI
        # 2026-12-04).  Where the program has a pids cgroup, that is its own cap, and the
        # user's limit only a backstop with room for every program under way
        # (`config.workers` at a time) and one more.
        share = 1 if join is None else config.workers + 1
        processes = (_user_tasks(UNPRIVILEGED if drop else os.getuid())
                     + config.extra_processes * share)
        wanted.append((resource.RLIMIT_NPROC, processes, processes))
    limits = []
    for which, soft, hard in wanted:
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        limits.append((which, (soft, hard)))

    prctl, parent = _prctl(), os.getpid()

    def apply() -> None:
        if prctl is not None:  # first; a parent gone before it leaves no one to time it
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:
                os._exit(1)
        if join is not None:
            join()
        for which, pair in limits:
            resource.setrlimit(which, pair)
    return apply


def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up in the parent (the child only calls it), or None off
    Linux.  The child asks for SIGKILL when the thread that started it dies: the
    timeout is kept by this process alone, and a benchmark killed outright (SIGKILL,
    the OOM killer) left its programs running with no time limit, under init, with
    their folders and cgroups (a program asleep in a loop ran a minute past its 30 s,
    2026-12-07).  With the namespaces the child is `unshare`, whose death ends the
    namespace's init (--kill-child), and that every process in it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def _isolation(config: SandboxConfig, refusal: str = LIBRARY_REFUSAL) -> str:
    """The level programs run at under `config`: the strongest that works here, refused
    (IsolationRefused) below `config.required`, and warned of below the namespaces."""
    available = isolation_available()
    if ISOLATION_LEVELS.index(available) < ISOLATION_LEVELS.index(config.required):
        raise IsolationRefused(
            f"sandbox isolation {config.required!r} is required, but only {available!r} "
            f"works here ({probe_isolation().fallback}); model-written programs were not run")
    _warn(available, refusal, _drops(available))
    return available


def _drops(level: str) -> bool:
    """Whether programs run at `level` drop root's ids: where the caller is root and the
    probe saw that work at this level (a level chosen otherwise, by a test, runs as root)."""
    found = probe_isolation()
    return found.drop and found.level == level


def checked_config(timeout_s: float, workers: int, require_isolation: bool) -> SandboxConfig:
    """A benchmark command's sandbox, checked here, before any model loads or task is
    filled: with `require_isolation`, the namespaces must work (IsolationRefused); without,
    a weaker isolation is warned of now, naming the command's --require-isolation."""
    config = SandboxConfig(timeout_s=timeout_s, workers=workers,
                           required=NAMESPACES if require_isolation else NONE)
    _isolation(config, COMMAND_REFUSAL)
    return config


def fallback_reason(config: SandboxConfig) -> str:
    """Why programs run under `config` got less than the strongest isolation ("" when
    they did not)."""
    return probe_isolation().fallback


def isolation_used(config: SandboxConfig
                   ) -> tuple[str, str, bool, str, bool, str, bool, str]:
    """(level, why it fell back, whether a pids cgroup bounded each, where or why not,
    whether a seccomp filter did, what it refuses or why not, whether a Landlock layer
    did, what it holds or why not) of every program run under `config` here: for the
    reports that keep only each program's verdict (`bench sweep`, `samples`)."""
    used = cgroup.find()[0] is not None
    filtered = _seccomp(config) is not None
    landlocked = _landlock(config) is not None
    return (_isolation(config), fallback_reason(config), used, pids_cgroup_note(used),
            filtered, seccomp_note(filtered, config), landlocked,
            landlock_note(landlocked, config))


def pids_cgroup_note(used: bool) -> str:
    """Where the programs' pids cgroups were made (`used`: each ran in one), or why they
    had none, for the reports; then whether a memory cgroup capped each program's
    processes together, and where or why not."""
    controller, why = cgroup.find()
    memory, memory_why = cgroup.find("memory")
    if memory is not None:
        capped = (f"; the memory of each program's processes capped at "
                  f"{_memory_cap(SandboxConfig()) >> 20} MiB together ({memory.describe()})")
    else:
        capped = f"; no memory cgroup ({memory_why})"
    if used:
        return (controller.describe() if controller else "") + capped
    return (why or "not every program ran in one") + capped


def seccomp_note(used: bool, config: SandboxConfig | None = None) -> str:
    """What the programs' seccomp filter refuses (`used`: each ran behind it), or why
    they had none, for the reports."""
    if config is not None and not config.seccomp:
        return "turned off (SandboxConfig(seccomp=False))"
    found = probe_seccomp()
    if used or found.program is None:
        return found.note
    return "not every program ran behind it"


def landlock_note(used: bool, config: SandboxConfig | None = None) -> str:
    """What the programs' Landlock layer holds (`used`: each ran behind it), or why
    they had none, for the reports."""
    if config is not None and not config.landlock:
        return "turned off (SandboxConfig(landlock=False))"
    found = probe_landlock()
    if used or not found.version:
        return found.note
    return "not every program ran behind it"


def report_isolation_text(report) -> str:
    """`isolation_text` of a report that keeps the eight (`bench humaneval`'s run,
    `sweep`'s, `samples`')."""
    return isolation_text(report.isolation, report.isolation_fallback, report.pids_cgroup,
                          report.pids_cgroup_note, report.seccomp, report.seccomp_note,
                          report.landlock, report.landlock_note)


def isolation_text(level: str, fallback: str, pids_cgroup: bool = False,
                   pids_note: str = "", seccomp_used: bool = False,
                   seccomp_why: str = "", landlock_used: bool = False,
                   landlock_why: str = "") -> str:
    """A summary's `sandbox isolation: ...`: the level in words and, after a fallback, why;
    then whether each program ran in a pids cgroup of its own, and where or why not,
    behind a seccomp filter, and what it refuses or why not, and behind a Landlock
    layer, and what it holds or why not (a report that does not say, its note "", says
    nothing of it)."""
    text = (f"sandbox isolation: {ISOLATION_WORDS[level]}"
            + (f" (fell back: {fallback})" if fallback else ""))
    if pids_cgroup:
        text += f"; each program in a pids cgroup of its own ({pids_note})"
    elif pids_note:
        text += f"; no pids cgroup ({pids_note})"
    if seccomp_used:
        text += f"; each behind a seccomp filter ({seccomp_why})"
    elif seccomp_why:
        text += f"; no seccomp filter ({seccomp_why})"
    if landlock_used:
        return text + f"; each behind a Landlock layer ({landlock_why})"
    return text + (f"; no Landlock layer ({landlock_why})" if landlock_why else "")


def _remove(work: str) -> None:
    """Delete the working directory whatever the program left there: a tree too deep for
    shutil.rmtree's recursion (RecursionError) is removed by `rm -rf`."""
    try:
        shutil.rmtree(work)
    except (OSError, RecursionError):
        subprocess.run(["rm", "-rf", "--", work], stdin=subprocess.DEVNULL,
                       capture_output=True, check=False)


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


def _read_pipe(fd: int) -> bytes:
    """What the exited child left on a pipe, at most 64 KiB."""
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
    return data


def _read_outcome(fd: int) -> dict:
    """The child's last outcome line on the pipe ({} when it wrote none)."""
    data = _read_pipe(fd)
    for line in reversed(data.decode("utf-8", "replace").splitlines()):
        try:
            outcome = json.loads(line)
        except ValueError:
            continue
        if isinstance(outcome, dict) and outcome.get("reason") in REASONS:
            return outcome
    return {}


def _classify(returncode: int, timed_out: bool, outcome: dict, token: str,
              config: SandboxConfig, output: str, started: bool) -> tuple[str, str]:
    """(reason, detail) from how the child ended and what it reported; a child that
    ended on its own, reporting nothing, before the program started, is the sandbox's
    failure (`unshare` refused: the program's "error" lowered pass@1 with no word of it).
    The harness says "sandbox" only before the program starts: after, the program wrote it
    on the pipe it holds, to be counted apart and have the run blame the machine."""
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
    if reason == SANDBOX and started:
        return "error", "the program reported a sandbox failure of its own after it started"
    if reason is not None:
        return reason, str(outcome.get("detail", ""))
    last = output.strip().splitlines()[-1:] or [""]
    if not started:
        return SANDBOX, f"the sandbox failed: exited with code {returncode} before the " \
            f"program started {last[0]}".strip()
    return "error", f"exited with code {returncode} before its tests finished {last[0]}".strip()


class _Running:
    """The programs a `run_programs` call has under way, so an interrupted benchmark can
    end them at once.  A group leader stays registered until just before it is reaped,
    so its process-group id cannot have been reused when `kill` reaches it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pids: set[int] = set()

    def add(self, pid: int) -> None:
        with self._lock:
            self._pids.add(pid)

    def discard(self, pid: int) -> None:
        with self._lock:
            self._pids.discard(pid)

    def kill(self) -> None:
        with self._lock:
            for pid in self._pids:
                _kill_group(pid)


def run_program(source: str, config: SandboxConfig | None = None,
                running: _Running | None = None) -> Outcome:
    """Execute one program in the sandbox; its tests pass when it runs to the end."""
    config = config or SandboxConfig()
    isolation = _isolation(config)
    return _run(source, config, isolation, running, _drops(isolation), _seccomp(config),
                _landlock(config))


def _run(source: str, config: SandboxConfig, isolation: str,
         running: _Running | None = None, drop: bool = False,
         seccomp_filter: bytes | None = None, landlock_found: Landlock | None = None
         ) -> Outcome:
    """One program; a failure of the sandbox itself is that program's error, not the
    end of a whole benchmark.  `drop`: the caller is root and the program runs as
    `UNPRIVILEGED` instead; `seccomp_filter`: the filter it runs behind (`seccomp.build`);
    `landlock_found`: the Landlock layer it runs behind (`probe_landlock`)."""
    began = time.perf_counter()
    try:
        return _run_in(source, config, isolation, running, drop, seccomp_filter,
                       landlock_found)
    except Exception as exc:  # noqa: BLE001 - e.g. a working directory the program mangled
        return Outcome(False, SANDBOX, f"the sandbox failed: {type(exc).__name__}: {exc}",
                       round(time.perf_counter() - began, 3), "", isolation)


def _run_in(source: str, config: SandboxConfig, isolation: str,
            running: _Running | None = None, drop: bool = False,
            seccomp_filter: bytes | None = None, landlock_found: Landlock | None = None
            ) -> Outcome:
    token = secrets.token_hex(16)
    # The program's directory sits in one only this user can enter, which holds the
    # captured output: the program may open its own directory to everyone (it may
    # chmod inside it), not the way to it, and it cannot reach the output's name.
    # A program that drops root's ids owns its directory and its source, and may pass
    # through the one that holds them (its group's search bit), not list it, nor read
    # the output there (root's, 0600).
    outer = tempfile.mkdtemp(prefix=cgroup.owned_name())
    work = os.path.join(outer, "work")
    group = None
    try:
        group = _ProgramCgroups(config, isolation)
        os.mkdir(work, 0o700)
        Path(work, "program.py").write_text(source, encoding="utf-8")
        if drop:
            os.chown(outer, -1, UNPRIVILEGED)
            os.chmod(outer, 0o710)
            for path in (work, os.path.join(work, "program.py")):
                os.chown(path, UNPRIVILEGED, UNPRIVILEGED)
        read_fd, write_fd = os.pipe()
        token_fd, token_write = os.pipe()
        started_read, started_fd = os.pipe()  # the start's line, out of the program's reach
        # The token's line, the Landlock policy's (`sandbox_child.install_landlock`, ""
        # for none), then the seccomp filter (`sandbox_child.install_seccomp`): 33 bytes,
        # some 170 and some 500, far below a pipe's buffer
        policy = landlock_found.policy if landlock_found else ""
        os.write(token_write, token.encode("ascii") + b"\n" + policy.encode("utf-8") + b"\n"
                 + (seccomp_filter or b""))
        os.close(token_write)
        command = [sys.executable, "-I", "-B", "-c", _child_source(), "program.py",
                   str(write_fd), str(token_fd), str(started_fd)]
        if isolation != NONE:
            args = (ROOT_UNSHARE_ARGS if drop else UNSHARE_ARGS)[isolation]
            command = [shutil.which("unshare") or "unshare", *args, *command]
        if isolation == NAMESPACES:
            command.append(ISOLATE)
        if not config.hook:
            command.append(NO_HOOK)
        if drop:
            command.append(DROP)
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": work, "TMPDIR": work}
        began = time.perf_counter()
        # noqa: SIM115 - read back below; 0600: none but this user (root) reads it by name
        output = os.fdopen(os.open(Path(outer, "output"), os.O_RDWR | os.O_CREAT | os.O_EXCL,
                                   0o600), "w+b")
        try:
            child = subprocess.Popen(
                command, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=output,
                stderr=subprocess.STDOUT, pass_fds=(write_fd, token_fd, started_fd),
                start_new_session=True,
                preexec_fn=_limits(config, drop, group.join if group.groups else None))
        except BaseException:
            output.close()
            os.close(read_fd)
            os.close(started_read)
            raise
        finally:
            os.close(write_fd)
            os.close(token_fd)
            os.close(started_fd)
        if running is not None:
            running.add(child.pid)
        timed_out = not _wait_unreaped(child.pid, began + config.timeout_s)
        # The group leader is a zombie at most, so its pid (the group id) cannot have been
        # reused: this kills the program on timeout, else anything it left behind.  In
        # the namespaces, the leader is `unshare`, whose death (--kill-child) ends every
        # process of the program's PID namespace, in whatever group or session.
        _kill_group(child.pid)
        if running is not None:
            running.discard(child.pid)
        child.wait()
        seconds = time.perf_counter() - began
        try:
            outcome = _read_outcome(read_fd)
            started = STARTED in _read_pipe(started_read)
        finally:
            os.close(read_fd)
            os.close(started_read)
        with output:  # read through the descriptor the child wrote to, never by its name
            output.seek(0)
            text = output.read(config.output_chars * 4).decode("utf-8", "replace")
    finally:
        try:
            if group is not None:  # what left the process group too (`setsid`), then it
                group.close()
        finally:
            _remove(outer)
    text = text[:config.output_chars]
    reason, detail = _classify(child.returncode, timed_out, outcome, token, config, text,
                               started)
    return Outcome(reason == "passed", reason, detail, round(seconds, 3), text, isolation,
                   group.pids, seccomp_filter is not None, landlock_found is not None,
                   group.memory)


# The processes above the program in its cgroup: at NAMESPACES, `unshare` and the PID
# namespace's init that waits for it (`sandbox_child._wait_as_init`); below, the child
# the sandbox starts is the program's own interpreter.
HARNESS_PROCESSES = {NAMESPACES: 2, NETWORK: 0, NONE: 0}


# Room for the harness's processes beside the program's address space (RLIMIT_AS),
# in the memory cap of all the program's processes together (`_memory_cap`).
MEMORY_HEADROOM = 256 << 20


def _memory_cap(config: SandboxConfig) -> int:
    return config.memory_bytes + MEMORY_HEADROOM


class _ProgramCgroups:
    """A program's cgroups, where they can be made here (`cgroup.find`): its pids cgroup,
    with room for `config.extra_processes` tasks of the program's, itself included, as
    the process limit has (it binds root too, and names every process the program left),
    and a memory cgroup that caps the memory of all its processes together
    (`_memory_cap`).  RLIMIT_AS caps each process alone: four children of one program,
    made past the hook, held 3.6 GiB, and the ~32 a pids cgroup allows could take ~30
    GiB, a VM of 24 GiB to its OOM killer, which may pick the benchmark (a red-team
    pass, 2026-12-06).  On v2 the one cgroup holds both caps; v1 has a hierarchy each."""

    def __init__(self, config: SandboxConfig, isolation: str) -> None:
        pids, _ = cgroup.find()
        memory, _ = cgroup.find("memory")
        cap = {cgroup.memory_limit_file(memory.version): _memory_cap(config)} if memory else {}
        self.groups: list[cgroup.PidsCgroup] = []
        self.pids, self.memory = pids is not None, memory is not None
        try:
            if pids is not None:
                self.groups.append(cgroup.PidsCgroup(
                    pids, config.extra_processes + HARNESS_PROCESSES[isolation],
                    cap if memory == pids else None))
            if memory is not None and memory != pids:
                self.groups.append(cgroup.PidsCgroup(memory, None, cap))
        except BaseException:
            self.close()
            raise

    def join(self) -> None:
        """Join every one of them (the child between fork and exec: system calls only)."""
        for group in self.groups:
            group.join()

    def close(self) -> None:
        """Kill what is left in each and remove it; the first failure raised once every
        one was tried."""
        failed = None
        for group in self.groups:
            try:
                group.close()
            except OSError as exc:
                failed = failed or exc
        self.groups = []
        if failed is not None:
            raise failed


def sweep_folders() -> list[str]:
    """Remove the folders (a program's source and output) that a benchmark killed
    outright (SIGKILL, the OOM killer: no `finally` ran) left in the temporary folder,
    their maker gone (`cgroup.left_by_a_process_gone`); only this user's.  Its programs
    died with it (`_prctl`), and their folders stayed, one per program under way, for
    good.  Returns the paths removed."""
    removed, top = [], tempfile.gettempdir()
    try:
        names = os.listdir(top)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(top, name)
        try:
            if not (name.startswith(cgroup.PREFIX) and os.lstat(path).st_uid == os.geteuid()
                    and os.path.isdir(path) and cgroup.left_by_a_process_gone(name)):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def run_programs(sources: Sequence[str], config: SandboxConfig | None = None) -> list[Outcome]:
    """Execute many programs, `config.workers` at a time; outcomes in input order.

    When the caller is interrupted (Ctrl-C, or SIGTERM made an exception by the
    command), the programs not started are dropped and those under way are killed
    before this returns: they run in sessions of their own, which a terminal's Ctrl-C
    does not reach, so they would otherwise run on to their timeout (the process
    waiting for them), or outlive the process and leave their folders in /tmp.
    """
    config = config or SandboxConfig()
    sweep_folders()
    isolation = _isolation(config)  # probed here once, not by the first workers at once
    cgroup.find()  # so are the cgroups (its cache holds no lock: each would probe)
    cgroup.find("memory")
    drop, running, seccomp_filter = _drops(isolation), _Running(), _seccomp(config)
    found = _landlock(config)
    with ThreadPoolExecutor(max_workers=max(1, config.workers)) as pool:
        futures = [pool.submit(_run, source, config, isolation, running, drop,
                               seccomp_filter, found)
                   for source in sources]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            while not all(future.done() for future in futures):
                running.kill()  # again for a program a worker was starting meanwhile
                time.sleep(0.01)
            raise
