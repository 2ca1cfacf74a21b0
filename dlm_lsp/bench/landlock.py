"""The Landlock layer the sandbox's programs run behind: which files they may write and
read, and whom they may signal, enforced by the kernel on the program and every
process it starts.

The seccomp filter (`seccomp.py`) sees system calls and their numbers, never a path:
below a PID namespace a program past the audit hook (ctypes) still wrote its user's
files, and through files reached its user's other processes, which no filter of calls
sees: `/proc/PID/mem` of its parent at the 'none' level, `/proc/PID/oom_score_adj`, a
cgroup's `cgroup.kill`.  Landlock (Linux 5.13 on) lets an unprivileged process restrict
itself for good, and it is the program's own process that does, after the sandbox's
setup (`sandbox_child.install_landlock`).  By the kernel's Landlock ABI:

- 1 on: files and directories are written, made and removed only in the program's
  working directory, and written in /dev/null, /dev/zero and /dev/full; they are read,
  and run, only in what the namespaces' root file system shows (the system's /usr and
  /lib, two files of /etc, the interpreter's own directories: `sandbox_child._allowed`),
  the working directory, /proc and the five devices of the namespaces' /dev: at every
  level, the same allow-list, so that a program that runs in the namespaces runs below
  them too;
- 2 and 3: linking and renaming across directories (REFER) and truncating, in the
  working directory only;
- 4: no TCP bind or connect (the seccomp filter refuses AF_INET sockets already; this
  holds with it off);
- 5: device ioctls on the five devices only;
- 6: signals only to processes of the program's own Landlock domain (the program and
  what it forks: its parent, the benchmark, is out of reach whatever its pid, and a
  forked child signals itself), and no connecting to an abstract Unix socket made
  outside it (the network namespace hides the host's; below it, the user's D-Bus or
  X11 were in reach).

What the kernel's ABI lacks is left out and `describe` names it; a kernel without
Landlock (or one that turned it off) leaves the programs as before, the reports saying
why, as for the seccomp filter.  /proc stays readable (the program's own files are
there, and its pid's directory is made anew as the kernel likes: a rule on it would
not hold), and so do other processes' /proc files where the PID namespace does not
hide them.

The parent builds the policy (`policy`): the access rights each kind of path is given,
in the kernel's bits, sent to the child as one JSON line on the token's pipe; the child
finds the paths (`sandbox_child.landlock_rules`).
"""

from __future__ import annotations

import json
import os

from dlm_lsp.bench.sandbox_child import DEVICES, LANDLOCK_CREATE_RULESET

CREATE_RULESET_VERSION = 1  # landlock_create_ruleset(NULL, 0, this): the ABI version

# Filesystem access rights (linux/landlock.h), with the ABI that brought each.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
# Network rights (ABI 4) and scopes (ABI 6)
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
NET_ABI, SCOPE_ABI = 4, 6

READ = EXECUTE | READ_FILE | READ_DIR
# What a file, not a directory, may be given (the kernel refuses a rule with more)
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# Reading /proc: no program runs from it.
READ_ONLY = READ_FILE | READ_DIR
DEVICE_WRITES = ("null", "zero", "full")  # devices a program may write (to no effect)


def abi() -> tuple[int, str]:
    """(the kernel's Landlock ABI version, 0 where it has none, and why none)."""
    import ctypes  # here: the parent loads it only to ask

    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(ctypes.c_long(LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                           ctypes.c_uint32(CREATE_RULESET_VERSION))
    if version > 0:
        return version, ""
    number = ctypes.get_errno()
    return 0, f"the kernel has no Landlock ({os.strerror(number)})"


def handled(version: int) -> tuple[int, int, int]:
    """(filesystem rights, network rights, scopes) the kernel's ABI `version` knows,
    each refused where no rule grants it."""
    fs = FS_BY_ABI[max(v for v in FS_BY_ABI if v <= version)]
    return (fs, BIND_TCP | CONNECT_TCP if version >= NET_ABI else 0,
            SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= SCOPE_ABI else 0)


def policy(version: int) -> str:
    """The policy every program runs behind, as the child reads it
    (`sandbox_child.install_landlock`): one JSON line of the ABI, the rights handled, the
    rights of each kind of path, and those a file may have, every right masked to what
    `version` handles.  The
    child finds the paths: the allow-list is its interpreter's (`_allowed`), which need
    not be the benchmark's, and the working directory is its own."""
    fs, net, scoped = handled(version)
    devices = {name: (READ_FILE | (WRITE_FILE | TRUNCATE if name in DEVICE_WRITES else 0)
                      | IOCTL_DEV) & fs for name in DEVICES}
    # The working directory takes every right but making device nodes: a program run as
    # root (the 'none' level's fallback) made one for /dev/kmsg there and read the
    # kernel's log through it, and one for a disk would be the disk's bytes (a red-team
    # pass, 2026-12-06); no audit event tells the hook of `os.mknod`.
    work = fs & ~(MAKE_CHAR | MAKE_BLOCK)
    return json.dumps({"abi": version, "fs": fs, "net": net, "scoped": scoped,
                       "read": READ, "proc": READ_ONLY, "devices": devices, "work": work,
                       "file": FILE_RIGHTS & fs},
                      separators=(",", ":"))


def describe(version: int) -> str:
    """The layer in a few words, for the reports, with what this ABI lacks."""
    text = (f"Landlock ABI {version}: files written only in its working directory, read "
            f"only in the system's and Python's own")
    if version >= NET_ABI:
        text += ", no TCP bind or connect"
    if version >= SCOPE_ABI:
        return text + ", signals and abstract Unix sockets within its own processes only"
    lacking = ["signal and abstract socket scopes (ABI 6)"]
    if version < NET_ABI:
        lacking.insert(0, "TCP rules (ABI 4)")
    return text + f"; not {' nor '.join(lacking)}"
