"""The sandbox's seccomp filter in the kernel: what a program behind it is refused, what
still works, and what the reports say where there is none (tests/test_seccomp.py reads
the filter instruction by instruction)."""

from __future__ import annotations

import ast
import errno
import os
import socket
from dataclasses import replace

import pytest

from dlm_lsp.bench import sandbox, seccomp
from dlm_lsp.bench.sandbox import SandboxConfig, run_program

FOUND = sandbox.probe_seccomp()
TABLE = seccomp.ABIS.get(sandbox.interpreter_abi())
WITH_SECCOMP = pytest.mark.skipif(FOUND.program is None,
                                  reason=f"no seccomp filter here: {FOUND.note}")
# Every level that works here, weakest first: below a PID namespace, signals reach the
# user's other processes
LEVELS = list(sandbox.ISOLATION_LEVELS[:sandbox.ISOLATION_LEVELS.index(
    sandbox.isolation_available()) + 1])
NO_HOOK = SandboxConfig(timeout_s=10.0, hook=False)

# Each refused call with arguments that make it harmless where it is let through: a
# process that does not exist, a descriptor that is not open, a path that is not there,
# flags the kernel rejects; what each returns then is the kernel's, not the filter's.
CALLS = {
    "ptrace": "(16, 999999, 0, 0)",  # PTRACE_ATTACH
    "process_vm_readv": "(os.getpid(), 0, 0, 0, 0, 0)",
    "process_vm_writev": "(os.getpid(), 0, 0, 0, 0, 0)",
    "process_madvise": "(-1, 0, 0, 0, 0)",
    "pidfd_getfd": "(-1, 0, 0)",
    "pidfd_open": "(os.getpid(), 0)",
    "pidfd_send_signal": "(-1, 0, 0, 0)",
    "mount": "(b'none', b'/no-such-dir', b'tmpfs', 0, 0)",
    "umount2": "(b'/no-such-dir', 0)",
    "pivot_root": "(b'/no-such-dir', b'/no-such-dir')",
    "chroot": "(b'/no-such-dir',)",
    "open_tree": "(-100, b'/no-such-dir', 0)",
    "move_mount": "(-1, b'', -1, b'', 0)",
    "fsopen": "(b'no-such-fs', 0)",
    "fsconfig": "(-1, 0, 0, 0, 0)",
    "fsmount": "(-1, 0, 0)",
    "fspick": "(-1, b'', 0)",
    "mount_setattr": "(-1, b'', 0, 0, 0)",
    "open_tree_attr": "(-100, b'/no-such-dir', 0, 0, 0)",
    "unshare": "(0,)",
    "setns": "(-1, 0)",
    "keyctl": "(0, -3, 0)",  # KEYCTL_GET_KEYRING_ID of the session keyring
    "add_key": "(0, 0, 0, 0, 0)",
    "request_key": "(0, 0, 0, 0)",
    "bpf": "(9999, 0, 0)",
    "perf_event_open": "(0, 0, -1, -1, 0)",
    "kexec_load": "(0, 0, 0, 0xFFFF0000)",  # an architecture that is none
    "kexec_file_load": "(-1, -1, 0, 0, 0xFFFFFF00)",
    "init_module": "(0, 0, 0)",
    "finit_module": "(-1, 0, 0xFFFFFF00)",
    "delete_module": "(b'no_such_module', 0)",
    "reboot": "(0, 0, 0, 0)",  # no magic numbers
    "swapon": "(b'/no-such-file', 0)",
    "swapoff": "(b'/no-such-file',)",
    "userfaultfd": "(1,)",  # UFFD_USER_MODE_ONLY
    "open_by_handle_at": "(-1, 0, 0)",
    "io_uring_setup": "(0, 0)",
    "io_uring_enter": "(-1, 0, 0, 0, 0, 0)",
    "io_uring_register": "(-1, 0, 0, 0)",
    "connect": "(-1, 0, 0)",
    "sendmsg": "(-1, 0, 0)",
    "sendmmsg": "(-1, 0, 0, 0)",
}


# Calls the filter refuses for these arguments only, made with such arguments, signal 0
# (none is sent) and nothing in memory: another process (the parent, as each level shows
# it), every process (-1, and -1 in a register whose upper word is set: the kernel reads
# an int), a group not its own, a tgid of 0 (the kernel's EINVAL, were it let through),
# the calls that pass their pid in memory, priorities (below), and socket pairs of
# families but AF_UNIX.
ARGUMENT_CALLS = {
    "kill another process": ("kill", "(ppid, 0)"),
    "kill -1": ("kill", "(-1, 0)"),
    "kill -1 with an upper word": ("kill", "(0x1FFFFFFFF, 0)"),
    "kill a group not its own": ("kill", "(-(os.getpid() + 1), 0)"),
    "tkill": ("tkill", "(ppid, 0)"),
    "tgkill": ("tgkill", "(ppid, ppid, 0)"),
    "tgkill of tgid 0": ("tgkill", "(0, ppid, 0)"),
    "rt_sigqueueinfo": ("rt_sigqueueinfo", "(ppid, 0, None)"),
    "rt_tgsigqueueinfo": ("rt_tgsigqueueinfo", "(ppid, ppid, 0, None)"),
    "prlimit64": ("prlimit64", "(ppid, 0, None, None)"),  # RLIMIT_CPU, read nor set
    "fcntl F_SETOWN": ("fcntl", "(pipe, 8, ppid)"),  # no O_ASYNC: no signal either way
    "fcntl F_SETOWN_EX": ("fcntl", "(pipe, 15, None)"),
    "ioctl FIOSETOWN": ("ioctl", "(pipe, 0x8901, None)"),
    "ioctl SIOCSPGRP": ("ioctl", "(pipe, 0x8902, None)"),
    # on no process (a pid above the kernel's largest) and no user's (a uid with none):
    # the kernel would change these, were there one
    "setpriority of another process": ("setpriority", "(0, 1 << 22 | 1, 19)"),
    "setpriority of a user's every process": ("setpriority", "(2, 4000000, 19)"),
    "ioprio_set of a user's every process": ("ioprio_set", "(3, 4000000, 0)"),
    "sched_setaffinity": ("sched_setaffinity", "(1 << 22 | 1, 0, None)"),
    "sched_setparam": ("sched_setparam", "(1 << 22 | 1, None)"),
    "sched_setscheduler": ("sched_setscheduler", "(1 << 22 | 1, 0, None)"),
    "sched_setattr": ("sched_setattr", "(1 << 22 | 1, None, 0)"),
    # to an address (of 16 bytes) from a descriptor that is not open: the kernel's EBADF
    "sendto an address": ("sendto", "(-1, 0, 0, 0, 0, 16)"),
    # the kernel's EOPNOTSUPP: only AF_UNIX makes pairs
    "socketpair AF_INET": ("socketpair", "(2, 1, 0, pair)"),
    "socketpair AF_NETLINK": ("socketpair", "(16, 2, 0, pair)"),
}


def number(call: str) -> int:
    """A call's number in this machine's table."""
    tables = {"kill": seccomp.KILL, "fcntl": seccomp.FCNTL, "ioctl": seccomp.IOCTL,
              "socketpair": seccomp.SOCKETPAIR, "sendto": seccomp.SENDTO,
              "setpriority": seccomp.SETPRIORITY,
              "ioprio_set": seccomp.IOPRIO_SET}
    if call in tables:
        return tables[call][TABLE]
    return {**seccomp.OWN_PROCESS, **seccomp.ON_ITSELF}[call][seccomp.COLUMN[TABLE]]


def test_the_calls_made_are_every_call_the_filter_refuses():
    """A call added to the filter's table and not here would go untested in the kernel."""
    assert set(CALLS) == set(seccomp.REFUSED)


def calls_program() -> str:
    """A program that makes every call in CALLS and ARGUMENT_CALLS, and clone into a new
    user namespace (with CLONE_FS, which the kernel rejects: no child either way) and the
    AF_INET and AF_NETLINK sockets, and prints {name: errno, or None where it
    succeeded}."""
    column = seccomp.COLUMN[TABLE]
    lines = ["import ctypes, os, _socket", "libc = ctypes.CDLL(None, use_errno=True)",
             "out = {}", "def call(name, nr, *args):",
             "    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]",
             "    ctypes.set_errno(0)",
             "    out[name] = ctypes.get_errno() if libc.syscall(nr, *args) == -1 else None"]
    for name, args in CALLS.items():
        lines.append(f"call({name!r}, {seccomp.REFUSED[name][column]}, *{args})")
    lines += ["ppid, pipe, pair = os.getppid(), os.pipe()[0], (ctypes.c_int * 2)()"]
    for name, (call, args) in ARGUMENT_CALLS.items():
        lines.append(f"call({name!r}, {number(call)}, *{args})")
    lines += [f"call('clone', {seccomp.CLONE[TABLE]}, 0x10000000 | 0x200 | 17, 0, 0, 0, 0)",
              "for name, family in (('socket AF_INET', 2), ('socket AF_NETLINK', 16)):",
              "    try:",
              "        _socket.socket(family, _socket.SOCK_DGRAM).close()",
              "        out[name] = None",
              "    except OSError as exc:",
              "        out[name] = exc.errno",
              "print(out)"]
    return "\n".join(lines) + "\n"


def run_calls(monkeypatch, isolation: str, config: SandboxConfig) -> dict:
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    outcome = run_program(calls_program(), config)
    assert outcome.passed, outcome.detail + outcome.output
    return ast.literal_eval(outcome.output.strip().splitlines()[-1])


def passes_behind_the_filter(monkeypatch, isolation: str, program: str) -> None:
    """`program` runs to its end behind the filter at `isolation`, the hook off."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    outcome = run_program(program, NO_HOOK)
    assert outcome.passed and outcome.seccomp, outcome.detail + outcome.output


def test_where_the_kernel_filters_system_calls_the_sandbox_does():
    """The tests below skip where the probe finds no filter: a filter that failed to
    install here would skip them all, with the machine as the excuse."""
    with open("/proc/self/status", encoding="utf-8") as status:
        if "Seccomp:" not in status.read() or TABLE is None:
            pytest.skip("no seccomp in this kernel, or no system call table for this ABI")
    assert FOUND.program is not None, FOUND.note
    assert FOUND.note == seccomp.describe(TABLE)


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_each_refused_call_fails_with_eperm_behind_the_filter(monkeypatch, isolation):
    errors = run_calls(monkeypatch, isolation, NO_HOOK)
    assert errors == dict.fromkeys(errors, errno.EPERM)
    assert set(errors) == {*CALLS, *ARGUMENT_CALLS, "clone", "socket AF_INET",
                           "socket AF_NETLINK"}


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_without_the_filter_the_kernel_answers_those_calls_otherwise(monkeypatch, isolation):
    """What the test above sees is the filter's doing: the kernel, asked the same (the
    harmless arguments), answers most of them otherwise, in every isolation."""
    errors = run_calls(monkeypatch, isolation, SandboxConfig(
        timeout_s=10.0, hook=False, seccomp=False, landlock=False))  # its signal scope too
    otherwise = {name for name, number in errors.items() if number != errno.EPERM}
    assert {"ptrace", "process_vm_readv", "pidfd_open", "clone", "socket AF_INET"} <= otherwise
    assert errors["clone"] == errno.EINVAL  # CLONE_NEWUSER with CLONE_FS
    # the parent, signalled (0), its limits read and its descriptor's owner made: at
    # every level, with no filter, another process is in reach
    for name in ("kill another process", "tkill", "tgkill", "prlimit64", "fcntl F_SETOWN"):
        assert errors[name] is None, name
    assert errors["socketpair AF_INET"] == errno.EOPNOTSUPP


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_every_refusal_is_the_filters_not_the_kernels(monkeypatch, isolation):
    """Some of these the kernel refuses with EPERM itself (mounts as nobody): a filter
    that answers another errno shows that none of them reached it."""
    marked = seccomp.build(TABLE, errno.ENOTRECOVERABLE)
    monkeypatch.setattr(sandbox, "probe_seccomp", lambda: sandbox.Seccomp(marked, "marked"))
    errors = run_calls(monkeypatch, isolation, NO_HOOK)
    assert errors == dict.fromkeys(errors, errno.ENOTRECOVERABLE)


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_what_the_hook_lets_through_the_filter_refuses(monkeypatch, isolation):
    """os.chroot and the pidfd calls raise no audit event: with the hook on, a program
    reached them (and signalled processes of its user below the PID namespace)."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    program = ("import os, signal\n"
               "for attempt in (lambda: os.chroot('/no-such-dir'),\n"
               "                lambda: os.pidfd_open(os.getpid()),\n"
               "                lambda: signal.pidfd_send_signal(-1, 0)):\n"
               "    try:\n        attempt()\n    except PermissionError:\n        pass\n"
               "    else:\n        raise AssertionError('let through')\n")
    outcome = run_program(program, SandboxConfig(timeout_s=10.0))
    assert outcome.passed and outcome.seccomp, outcome.detail + outcome.output
    without = run_program(program, SandboxConfig(timeout_s=10.0, seccomp=False))
    assert without.reason != "passed" and not without.seccomp


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_threads_processes_and_unix_sockets_still_work_behind_it(monkeypatch, isolation):
    """clone3 answers ENOSYS, and glibc starts threads with clone instead."""
    program = ("import os, threading, _socket, ctypes\n"
               "seen = []\n"
               "threads = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]\n"
               "for t in threads: t.start()\n"
               "for t in threads: t.join()\n"
               "assert sorted(seen) == [0, 1, 2, 3]\n"
               "pid = os.fork()\n"
               "if pid == 0:\n    os._exit(7)\n"
               "assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7\n"
               "a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)\n"
               "a.send(b'x'); assert b.recv(1) == b'x'\n"
               "_socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM).close()\n"
               "status = open('/proc/self/status').read()\n"
               "assert 'Seccomp:\\t2' in status and 'NoNewPrivs:\\t1' in status, status\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "assert libc.syscall(435, None, 0) == -1 and ctypes.get_errno() == 38\n")
    passes_behind_the_filter(monkeypatch, isolation, program)


@pytest.fixture
def named_sockets(tmp_path):
    """Sockets of the test's that a program at `none` could name: a path-named stream and
    datagram socket (a Docker daemon's or syslog's, say) and an abstract stream one."""
    made = {"stream": (socket.AF_UNIX, socket.SOCK_STREAM, str(tmp_path / "stream.sock")),
            "datagram": (socket.AF_UNIX, socket.SOCK_DGRAM, str(tmp_path / "datagram.sock")),
            "abstract": (socket.AF_UNIX, socket.SOCK_STREAM,
                         f"\0dlm-lsp-seccomp-test-{os.getpid()}")}
    opened = {}
    for name, (family, kind, address) in made.items():
        opened[name] = socket.socket(family, kind)
        opened[name].bind(address)
        if kind == socket.SOCK_STREAM:
            opened[name].listen(4)
        opened[name].setblocking(False)
    yield {name: address for name, (_, _, address) in made.items()}, opened
    for server in opened.values():
        server.close()


def reach_by_name(addresses: dict) -> str:
    """A program that tries each way to a named socket and prints {way: errno or None}."""
    return ("import _socket, errno\nout = {}\n"
            "def attempt(name, what):\n"
            "    try:\n        what()\n        out[name] = None\n"
            "    except OSError as exc:\n        out[name] = exc.errno\n"
            "def connect(address):\n"
            "    _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM).connect(address)\n"
            "def dgram():\n    return _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)\n"
            f"attempt('connect', lambda: connect({addresses['stream']!r}))\n"
            f"attempt('abstract', lambda: connect({addresses['abstract']!r}))\n"
            f"attempt('sendto', lambda: dgram().sendto(b'to', {addresses['datagram']!r}))\n"
            f"attempt('sendmsg', lambda: dgram().sendmsg([b'msg'], [], 0, "
            f"{addresses['datagram']!r}))\n"
            "a, b = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_DGRAM)\n"
            "a.send(b'pair'); assert b.recv(4) == b'pair'\n"  # sendto with no address
            "print(out)\n")


@WITH_SECCOMP
def test_no_named_unix_socket_is_reached_behind_it_and_a_pair_still_talks(
        monkeypatch, named_sockets):
    """Below the namespaces a program past the hook reached any socket its user could
    open; no Landlock right covers path-named ones."""
    addresses, servers = named_sockets
    monkeypatch.setattr(sandbox, "isolation_available", lambda: sandbox.NONE)
    config = SandboxConfig(timeout_s=10.0, hook=False, landlock=False)
    behind = run_program(reach_by_name(addresses), config)
    assert behind.passed and behind.seccomp, behind.detail + behind.output
    errors = ast.literal_eval(behind.output.strip().splitlines()[-1])
    assert errors == dict.fromkeys(("connect", "abstract", "sendto", "sendmsg"), errno.EPERM)
    for server in servers.values():
        with pytest.raises(BlockingIOError):
            server.accept() if server.type == socket.SOCK_STREAM else server.recv(8)

    without = run_program(reach_by_name(addresses), replace(config, seccomp=False))
    assert without.passed and not without.seccomp, without.detail + without.output
    assert ast.literal_eval(without.output.strip().splitlines()[-1]) == dict.fromkeys(
        ("connect", "abstract", "sendto", "sendmsg"))
    assert servers["stream"].accept() and servers["abstract"].accept()
    assert sorted(servers["datagram"].recv(8) for _ in range(2)) == [b"msg", b"to"]


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", [level for level in LEVELS if level != sandbox.NAMESPACES])
def test_users_and_groups_are_still_looked_up_behind_it(monkeypatch, isolation):
    """glibc's `pwd` and `grp` lookups first connect to nscd's socket; refused that, they
    read /etc's files, where those are in sight: below the namespaces, without the
    Landlock layer (which, like the namespaces, leaves no /etc/passwd to read)."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    program = ("import grp, os, pwd\n"
               "assert pwd.getpwuid(os.getuid()).pw_uid == os.getuid()\n"
               "assert grp.getgrgid(os.getgid()).gr_gid == os.getgid()\n"
               "assert pwd.getpwnam('root').pw_uid == 0\n")
    outcome = run_program(program, SandboxConfig(timeout_s=10.0, hook=False, landlock=False))
    assert outcome.passed and outcome.seccomp, outcome.detail + outcome.output


@pytest.mark.skipif(TABLE != "x86_64" or FOUND.program is None, reason="x86_64 only")
def test_an_x32_call_is_refused(monkeypatch):
    """The x32 ABI shares x86_64's arch field; its numbers (bit 30 set) are others."""
    program = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "assert libc.syscall(0x40000000 | 39) == -1\n"  # x32's getpid
               "assert ctypes.get_errno() == 1, ctypes.get_errno()\n")
    outcome = run_program(program, NO_HOOK)
    assert outcome.passed, outcome.detail + outcome.output


@pytest.fixture
def fresh_probe():
    sandbox.probe_seccomp.cache_clear()
    yield
    sandbox.probe_seccomp.cache_clear()


def test_with_no_table_for_this_abi_programs_run_without_and_the_report_says_why(
        monkeypatch, fresh_probe):
    monkeypatch.setattr(sandbox, "interpreter_abi", lambda: ("mips", 32))
    outcome = run_program("assert True\n", SandboxConfig(timeout_s=10.0))
    assert outcome.passed and not outcome.seccomp
    used, note = sandbox.isolation_used(SandboxConfig())[4:6]
    assert (used, note) == (False, "no system call table for mips (32-bit Python)")
    assert sandbox.isolation_text(sandbox.NONE, "", False, "", used, note) == (
        "sandbox isolation: none (the audit hook and the limits only); no seccomp filter "
        "(no system call table for mips (32-bit Python))")


@pytest.mark.skipif(TABLE is None, reason="no system call table for this ABI")
def test_a_filter_the_kernel_will_not_install_leaves_programs_running_without_it(
        monkeypatch, fresh_probe, capsys):
    """A kernel without seccomp filters, or a container's filter that refuses prctl: the
    probe says why once, and programs run as they did before."""
    monkeypatch.setattr(seccomp, "program", lambda abi: (b"\0" * 8, "broken"))  # no return
    found = sandbox.probe_seccomp()
    assert found.program is None
    assert "could not install its seccomp filter" in found.note and "Invalid argument" in (
        found.note)
    assert "sandbox: no seccomp filter (it did not work here: sandbox:" in capsys.readouterr().err
    outcome = run_program("assert True\n", SandboxConfig(timeout_s=10.0))
    assert outcome.passed and not outcome.seccomp


def test_the_report_says_what_the_filter_refuses_or_that_it_was_off():
    assert sandbox.isolation_text(sandbox.NAMESPACES, "", False, "", True, "x86_64: 38 ...") \
        .endswith("; each behind a seccomp filter (x86_64: 38 ...)")
    assert sandbox.seccomp_note(False, SandboxConfig(seccomp=False)) == (
        "turned off (SandboxConfig(seccomp=False))")


# What a program does with signals, limits and priorities of its own: each step raises
# where it is refused.
OWN_SIGNALS = ("import os, signal, threading, resource, fcntl, ctypes, time\n"
               "seen = []\n"
               "signal.signal(signal.SIGUSR1, lambda *_: seen.append('usr1'))\n"
               "signal.signal(signal.SIGALRM, lambda *_: seen.append('alarm'))\n"
               "os.kill(os.getpid(), signal.SIGUSR1)\n"
               "signal.raise_signal(signal.SIGUSR1)\n"
               "os.kill(0, 0)\n"  # its group
               "os.killpg(os.getpgrp(), 0)\n"
               "def poke():\n"
               "    signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)\n"
               "thread = threading.Thread(target=poke); thread.start(); thread.join()\n"
               "signal.setitimer(signal.ITIMER_REAL, 0.01)\n"
               "while 'alarm' not in seen:\n    time.sleep(0.001)\n"
               "assert seen == ['usr1'] * 3 + ['alarm'], seen\n"
               "limit = resource.getrlimit(resource.RLIMIT_CPU)\n"
               "resource.setrlimit(resource.RLIMIT_CPU, limit)\n"
               "os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0))\n"
               "os.setpriority(os.PRIO_PROCESS, os.getpid(), os.nice(0))\n"
               "os.sched_setaffinity(os.getpid(), os.sched_getaffinity(0))\n"
               "os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))\n"
               "reader, _ = os.pipe()\n"
               "fcntl.fcntl(reader, fcntl.F_SETOWN, os.getpid())\n"
               "assert fcntl.fcntl(reader, fcntl.F_GETOWN) == os.getpid()\n"
               "libc = ctypes.CDLL(None, use_errno=True)\n"
               "own = ctypes.c_long(os.getpid() | 0x7FFF << 48)\n"  # the kernel reads an int
               f"assert libc.syscall({seccomp.KILL.get(TABLE)}, own, 0) == 0, ctypes.get_errno()\n")


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_signals_limits_and_schedules_itself_its_threads_and_its_group(
        monkeypatch, isolation):
    """os.kill, os.killpg and pthread_kill are the hook's refusals: off here."""
    passes_behind_the_filter(monkeypatch, isolation, OWN_SIGNALS)


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_what_the_hook_lets_a_program_signal_or_schedule_still_works_behind_the_filter(
        monkeypatch, isolation):
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    program = ("import os, signal, threading, time\nseen = []\n"
               "os.nice(1)\n"
               "os.sched_setaffinity(0, os.sched_getaffinity(0))\n"
               "signal.signal(signal.SIGUSR1, lambda *_: seen.append('usr1'))\n"
               "signal.signal(signal.SIGALRM, lambda *_: seen.append('alarm'))\n"
               "signal.raise_signal(signal.SIGUSR1)\n"
               "thread = threading.Thread(target=signal.raise_signal, args=(signal.SIGUSR1,))\n"
               "thread.start(); thread.join()\n"
               "signal.setitimer(signal.ITIMER_REAL, 0.01)\n"
               "while 'alarm' not in seen:\n    time.sleep(0.001)\n"
               "assert seen == ['usr1', 'usr1', 'alarm'], seen\n"
               "signal.raise_signal(signal.SIGTERM)\n")  # and ends it, as outside
    outcome = run_program(program, SandboxConfig(timeout_s=10.0))
    assert outcome.seccomp and (outcome.reason, outcome.detail) == (
        "error", "killed by SIGTERM"), outcome.detail + outcome.output


@WITH_SECCOMP
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_forked_child_signals_the_programs_process_and_group_but_not_itself_by_pid(
        monkeypatch, isolation):
    """The filter holds its installer's pid, the program's: a child behind it signals
    that process and the group (kill 0), not its own pid (raise() fails), which the
    program does not reach either (`seccomp.py`).  The hook refuses os.fork: only a
    program past it forks."""
    program = ("import os, signal\n"
               "def refused(pid):\n"
               "    try:\n        os.kill(pid, 0)\n"
               "    except PermissionError:\n        return True\n"
               "    return False\n"
               "pid = os.fork()\n"
               "if pid == 0:\n"
               "    os.kill(0, 0)\n"
               "    signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
               "    try:\n        signal.raise_signal(signal.SIGUSR1)\n"
               "    except PermissionError:\n        raised = False\n"
               "    else:\n        raised = True\n"
               "    mine = refused(os.getpid()) and not raised\n"
               "    os._exit(0 if mine and not refused(os.getppid()) else 5)\n"
               "assert refused(pid)\n"
               "assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0\n")
    passes_behind_the_filter(monkeypatch, isolation, program)
