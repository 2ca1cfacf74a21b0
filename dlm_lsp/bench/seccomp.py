"""The seccomp filter the sandbox's programs run behind: system calls a benchmark program
never needs, refused by the kernel with EPERM.

The audit hook refuses these only where CPython raises an audit event, and a program
can get around it (it runs in the program's own interpreter); the namespaces bound what
they hold, not what the kernel is asked.  A filter installed in the program's process
before the program runs (`sandbox_child.install_seccomp`) holds whatever the program
does: filters cannot be removed, and every child inherits them (not another process
of its user, into whose memory a program past the hook may write with no isolation:
`/proc/PID/mem`, README's "What stays open").  It is a denylist, so
that CPython and the tests the benchmarks run work unchanged: debugging other processes
(ptrace, process_vm_*, process_madvise, pidfd_getfd), signalling them by pidfd (no audit
event: `os.kill` is refused by the hook, `signal.pidfd_send_signal` was not), mounts
(the old system call and the new mount API), chroot and pivot_root, new namespaces
(unshare, setns, and clone with a namespace flag), the kernel's keyrings, bpf,
perf_event_open, kexec, kernel modules, reboot, swap, userfaultfd, open_by_handle_at,
io_uring (whose operations open sockets past this filter), and sockets of every family
but AF_UNIX; an AF_INET socket is refused even where no network namespace exists (the
'none' isolation level), with or without the hook.

AF_UNIX sockets stay, for what a program makes and uses within itself (`socketpair`,
asyncio's wake-up pair), but every call that reaches a socket by its name is refused:
`connect`, `sendto` given an address, and `sendmsg` and `sendmmsg`, whose address lies
in memory a filter cannot read.  The mount namespace hides the host's socket files and
the network namespace the abstract ones, but below them a program past the hook
connected to any its user could open, path-named ones included, which no Landlock
right covers (ABI 7): a Docker daemon's socket, where its user is in that group, is
the host's root.  glibc asks nscd and systemd's user database through a named socket
for `pwd` and `grp` lookups, and reads /etc's files when the connect fails.

Each refused call fails with EPERM, as on a locked-down host, rather than killing the
process: a program that probes for something (an optional feature, a library that
falls back) runs on as it would there.  Two calls answer otherwise: clone3, whose
flags lie in memory a filter cannot read, answers ENOSYS, which makes glibc fall back
to clone (whose flags it can: threads start as before); and a system call of another
ABI (i386's through int 0x80, x32's with bit 0x40000000 on x86_64), whose numbers
this table does not name, is refused outright.

Signals and what else reaches a process by its number are let through to the program's
own process and process group only: kill to its pid, 0 or minus its pid (never -1,
every process of the user's); tkill, tgkill and the rt_*sigqueueinfo calls to its own
pid (tgkill's thread then has to be one of its own); prlimit64 on 0 or its pid (a CPU
limit set on another process kills it); fcntl's F_SETOWN, which has a descriptor's I/O
signal another process, to 0, its pid or group, and F_SETOWN_EX and the ioctls
FIOSETOWN and SIOCSPGRP, which pass theirs in memory, not at all.  Below a PID
namespace a program past the hook signalled any process of its user's with these
(`kill(-1, SIGKILL)`: the editor and the server too).  Priorities alike: the
scheduler's calls (sched_setaffinity, _setparam, _setscheduler, _setattr) on 0 or its
pid only, setpriority and ioprio_set on 0, its pid or group, never on every process of
a user: `os.setpriority(os.PRIO_USER, 0, 19)`, which raises no audit event, reniced
every process of the user's, for good where it may not lower a nice value again.

The pid is the program's process's, patched into the filter by that process as it
installs it (`sandbox_child.own_pid_in`): a process the program forks runs behind its
parent's filter, and reaches that process and the group (kill 0) but not itself by its
own pid (its `raise()` fails).  The kernel reads these arguments as C ints, the low
word of each register, and so does the filter.

The filter is classic BPF over `struct seccomp_data` (nr, arch, instruction pointer,
six arguments), built here, in the parent, for the interpreter's ABI; the child only
patches its own pid in and installs it.  Only x86_64 and aarch64 have tables: elsewhere
`program` says why none (and the sandbox's report says so, as it does for the pids
cgroup).
"""

from __future__ import annotations

import errno
import struct

from dlm_lsp.bench.sandbox_child import NEGATIVE_PID_SLOT, PID_SLOT

# Each refused call's number: (x86_64, aarch64's, the kernel's generic table); calls
# numbered from 424 on have the same number on every architecture.
REFUSED = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "process_madvise": (440, 440), "pidfd_getfd": (438, 438), "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_tree_attr": (467, 467),
    "unshare": (272, 97), "setns": (308, 268),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "reboot": (169, 142), "swapon": (167, 224), "swapoff": (168, 225),
    "userfaultfd": (323, 282), "open_by_handle_at": (304, 265),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "connect": (42, 203), "sendmsg": (46, 211), "sendmmsg": (307, 269),
}
# Refused for some arguments only, or otherwise: socket and socketpair (AF_UNIX
# allowed), sendto (with an address), clone (a namespace flag refused), clone3 (ENOSYS).
SOCKET, CLONE, CLONE3 = {"x86_64": 41, "aarch64": 198}, {"x86_64": 56, "aarch64": 220}, 435
SOCKETPAIR, SENDTO = {"x86_64": 53, "aarch64": 199}, {"x86_64": 44, "aarch64": 206}
# Calls that name a process, allowed for the program's own only (the module's docstring)
KILL = {"x86_64": 62, "aarch64": 129}  # to its pid, its group (0, minus its pid)
OWN_PROCESS = {  # to its own pid only
    "tkill": (200, 130), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
}
ON_ITSELF = {  # on 0 (itself) or its pid only
    "prlimit64": (302, 261), "sched_setaffinity": (203, 122), "sched_setparam": (142, 118),
    "sched_setscheduler": (144, 119), "sched_setattr": (314, 274),
}
# Priorities by (which, who): never a user's every process; else 0 or its pid or group
SETPRIORITY, IOPRIO_SET = {"x86_64": 141, "aarch64": 140}, {"x86_64": 251, "aarch64": 30}
PRIO_USER, IOPRIO_WHO_USER = 2, 3
FCNTL, IOCTL = {"x86_64": 72, "aarch64": 25}, {"x86_64": 16, "aarch64": 29}
F_SETOWN, F_SETOWN_EX = 8, 15  # fcntl's: F_SETOWN to itself or its group only
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902  # ioctl's, refused: the pid lies in memory
COLUMN = {"x86_64": 0, "aarch64": 1}
# AUDIT_ARCH_* (linux/audit.h): the ABI a call came in by, in seccomp_data.arch.
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# (machine, interpreter's word size) -> table; a 32-bit interpreter on these has none.
ABIS = {("x86_64", 64): "x86_64", ("aarch64", 64): "aarch64", ("arm64", 64): "aarch64"}
X32_BIT = 0x40000000  # x86_64: a call of the x32 ABI, same arch field, other numbers
AF_UNIX = 1
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (CLONE_NEWTIME, 0x80,
# lies in clone's exit-signal byte and is taken by unshare and clone3 alone)
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 \
    | 0x20000000 | 0x40000000

# Classic BPF (linux/filter.h, linux/seccomp.h)
LD_ABS_W, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
NR, ARCH, ARG0 = 0, 4, 16  # offsets in struct seccomp_data; ARG0's low word (little-endian)
ARG1, ARG2, ARG5 = ARG0 + 8, ARG0 + 16, ARG0 + 40  # later arguments' low words
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
NOSYS = RET_ERRNO | errno.ENOSYS
INSTRUCTION = struct.Struct("=HBBI")  # struct sock_filter: code, jt, jf, k


def _assemble(lines: list[tuple]) -> bytes:
    """Instructions to bytes: ("label", name) marks a place; a jump's targets are labels
    (or 0: the next instruction), made the relative offsets the kernel reads."""
    places, at = {}, 0
    for line in lines:
        if line[0] == "label":
            places[line[1]] = at
        else:
            at += 1
    out, at = [], 0
    for line in lines:
        if line[0] == "label":
            continue
        code, k, jt, jf = (*line, 0, 0)[:4]
        jt, jf = ((places[j] - at - 1 if isinstance(j, str) else j) for j in (jt, jf))
        if not (0 <= jt <= 255 and 0 <= jf <= 255):  # a jump is one byte, forward only
            raise ValueError(f"a jump of {jt} or {jf} instructions at {at}")
        out.append(INSTRUCTION.pack(code, jt, jf, k))
        at += 1
    return b"".join(out)


def build(abi: str, refusal: int = errno.EPERM) -> bytes:
    """The filter for table `abi` ('x86_64' or 'aarch64'), as the kernel's sock_filter
    array; what it refuses fails with errno `refusal` (another than EPERM tells, in the
    tests, the filter's refusal from the kernel's own)."""
    column = COLUMN[abi]
    lines: list[tuple] = [(LD_ABS_W, ARCH), (JEQ, AUDIT_ARCH[abi], 0, "deny"), (LD_ABS_W, NR)]
    if abi == "x86_64":
        lines.append((JGE, X32_BIT, "deny", 0))
    lines += [(JEQ, numbers[column], "deny", 0) for numbers in REFUSED.values()]
    lines += [(JEQ, numbers[column], "own process", 0) for numbers in OWN_PROCESS.values()]
    lines += [(JEQ, numbers[column], "itself", 0) for numbers in ON_ITSELF.values()]
    lines += [(JEQ, SOCKET[abi], "unix", 0), (JEQ, SOCKETPAIR[abi], "unix", 0),
              (JEQ, SENDTO[abi], "sendto", 0),
              (JEQ, CLONE[abi], "clone", 0), (JEQ, CLONE3, "nosys", 0),
              (JEQ, KILL[abi], "kill", 0), (JEQ, SETPRIORITY[abi], "setpriority", 0),
              (JEQ, IOPRIO_SET[abi], "ioprio_set", 0),
              (JEQ, FCNTL[abi], "fcntl", 0), (JEQ, IOCTL[abi], "ioctl", 0),
              (RET, RET_ALLOW),
              ("label", "unix"), (LD_ABS_W, ARG0), (JEQ, AF_UNIX, "allow", "deny"),
              # the kernel reads the address only where its length (an int) is not 0
              ("label", "sendto"), (LD_ABS_W, ARG5), (JEQ, 0, "allow", "deny"),
              ("label", "clone"), (LD_ABS_W, ARG0), (JSET, CLONE_NAMESPACES, "deny", "allow"),
              ("label", "own process"), (LD_ABS_W, ARG0), (JEQ, PID_SLOT, "allow", "deny"),
              ("label", "kill"), (LD_ABS_W, ARG0), *_own_group(),
              ("label", "itself"), (LD_ABS_W, ARG0), (JEQ, 0, "allow", 0),
              (JEQ, PID_SLOT, "allow", "deny"),
              ("label", "setpriority"), *_not_a_user(PRIO_USER),
              ("label", "ioprio_set"), *_not_a_user(IOPRIO_WHO_USER),
              ("label", "fcntl"), (LD_ABS_W, ARG1), (JEQ, F_SETOWN, "setown", 0),
              (JEQ, F_SETOWN_EX, "deny", "allow"),
              ("label", "setown"), (LD_ABS_W, ARG2), *_own_group(),
              ("label", "ioctl"), (LD_ABS_W, ARG1), (JEQ, FIOSETOWN, "deny", 0),
              (JEQ, SIOCSPGRP, "deny", "allow"),
              ("label", "allow"), (RET, RET_ALLOW),
              ("label", "deny"), (RET, RET_ERRNO | refusal),
              ("label", "nosys"), (RET, NOSYS)]
    return _assemble(lines)


def _own_group() -> list[tuple]:
    """The loaded pid allowed where it is the program's own process (PID_SLOT) or
    group: 0, or minus its pid (NEGATIVE_PID_SLOT); -1, every process, and every other
    number refused."""
    return [(JEQ, 0, "allow", 0), (JEQ, PID_SLOT, "allow", 0),
            (JEQ, NEGATIVE_PID_SLOT, "allow", "deny")]


def _not_a_user(user: int) -> list[tuple]:
    """(which, who) refused where `which` is `user` (every process of one), and allowed
    where `who` is 0 or the program's pid (its process, or its group)."""
    return [(LD_ABS_W, ARG0), (JEQ, user, "deny", 0), (LD_ABS_W, ARG1),
            (JEQ, 0, "allow", 0), (JEQ, PID_SLOT, "allow", "deny")]


def program(abi: tuple[str, int]) -> tuple[bytes | None, str]:
    """(the filter for this interpreter's (machine, word size), what it refuses) or
    (None, why there is none)."""
    table = ABIS.get(abi)
    if table is None:
        machine, bits = abi
        return None, f"no system call table for {machine} ({bits}-bit Python)"
    return build(table), describe(table)


def describe(abi: str) -> str:
    """The filter in a few words, for the reports."""
    return (f"{abi}: {len(REFUSED)} system calls, clone into new namespaces, sockets "
            f"other than AF_UNIX, sends to a socket's address, and signals, limits and "
            f"priorities aimed at processes other than its own refused with EPERM")
