"""The sandbox's child process: runs one untrusted program behind an audit hook.

`sandbox.py` starts this file's source as `python -I -B -c SOURCE PROGRAM FD
TOKEN_FD STARTED_FD [ISOLATE] [NO_HOOK] [DROP]` in a fresh temporary
directory.  Everything here runs before the untrusted code: it reads the program,
installs an audit hook (`sys.addaudithook`; hooks cannot be removed once added) and
only then executes the program.

The hook refuses what a benchmark program never needs and an escaped one
would: sockets, starting or signalling processes (not by
`signal.pidfd_send_signal`, which raises no audit event: only a PID namespace
keeps the user's other processes out of its reach), `ctypes` (which could call
libc around every other check), raising resource limits, and writing or
deleting files outside the working directory.  A refusal ends the process at
once with exit code BLOCKED, so code under test cannot catch it and carry on.
Audit hooks are not a security boundary on their own (CPython documents
them as monitoring), which is why the parent adds resource limits and, where
the kernel allows, namespaces.

The outcome travels on a pipe (file descriptor FD), not on stdout, so that a
program printing anything cannot forge it; a pass carries a token the parent
writes on a second pipe (TOKEN_FD), read and closed before the program runs,
so a program that exits early (`sys.exit(0)`, `os._exit(0)`) never counts as
having passed its tests.  (The token was an environment variable, and
`/proc/PID/environ` kept it for any program to read, even another run's.)
That the program started (a child that ends before it failed in the harness, not
in the program) goes on a third pipe (STARTED_FD), closed before the program runs.
It went on FD, which the program holds (its outcome is written there after it) and
can find in its arguments or /proc/self/fd: a program could write a "sandbox"
outcome there, or reopen the pipe for reading, take the start's line out and then
write one, and the run blamed the machine for the program's doing.

With ISOLATE among the arguments after the descriptors (the parent started
this process in new user, network, PID and mount namespaces, as their root),
`isolate` first builds the program a root file system of its own, a tmpfs
holding read-only binds of only the system's programs and libraries, two
files of /etc, the interpreter's own directories, /proc, a /dev of null,
zero, full, random and urandom, and a fresh 64 MiB tmpfs as its working
directory (no set-user-ID, devices or programs run from it); it moves into
it with pivot_root, which leaves nothing of the old root to climb back to,
and then into a user namespace of its own (which owns none of these mounts)
with no-new-privileges, so that nothing the program does, hook or no hook,
can read the rest of the host (the user's home, other projects, sockets in
/tmp and /run), write outside its directory, or undo this.  The program then
runs in a child of this process, which stays the PID namespace's init
(`_wait_as_init`): signals end the program as they would outside the
namespaces.  NO_HOOK leaves the hook out, for the tests of the
kernel's part alone.

With DROP (the parent runs as root), the program runs as UNPRIVILEGED, not as root:
the kernel exempts root from the process limit.  With ISOLATE the parent made the
namespaces as root, without a user namespace, and `isolate` gives up root's ids where
it would move into a user namespace; without, `main` gives them up once the program's
source and token are read.

The token's line on TOKEN_FD is followed by a Landlock policy's line (`landlock.py`;
empty for none), then by a seccomp filter (`seccomp.py`; nothing for none).  The
program's process installs both after all of this, the layer first, before the hook:
from then on the kernel refuses the program, and every process it starts, the files,
signals and sockets the layer does not grant (`install_landlock`) and what the filter
names (EPERM, `install_seccomp`), with its own pid patched in (`own_pid_in`).  They
come on that pipe, not in the arguments, which /proc/PID/cmdline shows (and which a
test searches for anything like a token).
"""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
import types

PASSED, FAILED, ERROR, BLOCKED = 0, 1, 2, 3
ISOLATE = "isolate"  # an argument after the fds: set up the namespaces
NO_HOOK = "no-hook"  # an argument after the fds: no audit hook (to test the kernel's part alone)
# An argument after the fds, given where the sandbox runs as root: the program runs as
# UNPRIVILEGED (uid and gid), not as root, whom the kernel exempts from RLIMIT_NPROC.
DROP = "drop"
UNPRIVILEGED = 65534  # nobody and nogroup, by number: the kernel's overflow ids
DETAIL_CHARS = 300
STARTED = b'{"started": true}\n'  # on STARTED_FD, closed just before the program runs

# Refused outright: processes, signals to other processes, resource limits, raw memory.
REFUSED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "subprocess.Popen", "pty.spawn", "os.kill", "os.killpg", "signal.pthread_kill",
    "resource.setrlimit", "resource.prlimit", "sys.remote_exec",
    # Every object the process holds, the hook's closure and tables among them: a program
    # found the hook and swapped the function in its closure cell for one that allows all.
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",
})
REFUSED_PREFIXES = ("socket.", "ctypes.")
# Modules that start processes or interpreters without an audit event of their own
# (multiprocessing and subprocess import _posixsubprocess; a subinterpreter has no hook).
REFUSED_IMPORTS = frozenset({"_posixsubprocess", "_xxsubinterpreters", "_xxinterpchannels"})
# Events that change the file system: event -> (position of a path, of its dir_fd or None).
PATH_EVENTS = {
    "os.remove": ((0, 1),),
    "os.rename": ((0, 2), (1, 3)),
    "os.rmdir": ((0, 1),),
    "os.mkdir": ((0, 2),),
    "os.symlink": ((1, 2),),
    "os.link": ((0, 2), (1, 3)),
    "os.chmod": ((0, 2),),
    "os.chown": ((0, 3),),
    "os.truncate": ((0, None),),
    "os.utime": ((0, 3),),
    "os.setxattr": ((0, None),),
    "os.removexattr": ((0, None),),
    "shutil.rmtree": ((0, 1),),
}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

_write, _exit = os.write, os._exit  # bound now: the program may replace module attributes
_ASSERTION = AssertionError  # and builtins: a replaced AssertionError still fails


# The hook's functions, tables and the builtins they call are bound as default arguments
# when it is built, so a program that rebinds this module's globals or the builtins
# changes nothing; and they call no Python function of the standard library, whose own
# module globals a program can rebind (os.fsdecode's `fspath`, posixpath's helpers).
def _real_path(path: str, base: str | None = None, *, lstat=os.lstat, readlink=os.readlink,
               getcwd=os.getcwd, startswith=str.startswith, split=str.split,
               rpartition=str.rpartition, links=40) -> str | None:
    """The path the kernel reaches by `path` (an exact str) from the directory `base`
    (a real path: the working directory's when None), every link followed as far as it
    exists, as `os.path.realpath` walks it; None for a loop of links.  A relative path's
    base is not walked again: in a tree thousands of directories deep, each write
    walked them all (seconds a write)."""
    resolved = "" if startswith(path, "/") else (getcwd() if base is None else base)
    todo, resolved = split(path, "/")[::-1], ("" if resolved == "/" else resolved)
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = rpartition(resolved, "/")[0]
            continue
        candidate = resolved + "/" + part
        try:
            mode = lstat(candidate).st_mode
        except OSError:  # not there (yet): the rest is taken as written
            mode = 0
        if mode & 0o170000 != 0o120000:  # not a symbolic link
            resolved = candidate
            continue
        links -= 1
        if links < 0:
            return None
        target = readlink(candidate)
        if startswith(target, "/"):
            resolved = ""
        todo += split(target, "/")[::-1]
    return resolved or "/"


def _inside(root: str, path: object, dir_fd: object = None, *, fspath=os.fspath,
            decode=bytes.decode, as_str=str.__str__, startswith=str.startswith,
            readlink=os.readlink, real_path=_real_path, isinstance=isinstance,
            devnull="/dev/null") -> bool:
    """Whether a path argument names something under `root` (an open fd counts as inside)."""
    if isinstance(path, int):
        return True  # already open; opening it was checked
    text = fspath(path)
    # An exact str, whose methods a subclass cannot override
    text = decode(text, "utf-8", "surrogateescape") if isinstance(text, bytes) else as_str(text)
    base = None  # the working directory
    if isinstance(dir_fd, int) and dir_fd >= 0 and not startswith(text, "/"):
        base = readlink(f"/proc/self/fd/{dir_fd}")
    real = real_path(text, base)
    return real is not None and (real == root or startswith(real, root + "/")
                                 or real == devnull)


def _refusal(root: str, event: str, args: tuple, *, refused=REFUSED_EVENTS,
             prefixes=REFUSED_PREFIXES, imports=REFUSED_IMPORTS,
             paths=types.MappingProxyType(dict(PATH_EVENTS)), inside=_inside,
             write_flags=WRITE_FLAGS, isinstance=isinstance, any=any, bool=bool,
             len=len, as_str=str.__str__, split=str.rpartition) -> str | None:
    """Why an audited event is refused, or None when it may go ahead."""
    if event in refused or event.startswith(prefixes):
        return event
    # The name as an exact str: a subclass's own __hash__ and __eq__ matched no name.  Its
    # last part: an extension module is found by it (`PyInit__posixsubprocess`), and
    # `import x._posixsubprocess` under a package `x` whose path is lib-dynload (or
    # `_imp.create_dynamic` of a spec so named) loaded it past a check of the whole name.
    if event == "import" and args and split(as_str(args[0]), ".")[2] in imports:
        return f"import {as_str(args[0])}"
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")
                  or bool((flags or 0) & write_flags))
        if not writes or path is None:
            return None
        if mode is None and isinstance(path, (str, bytes)) and path[:1] not in ("/", b"/"):
            # os.open: the event does not say which dir_fd a relative path is under
            return f"os.open for writing of the relative path {path!r}"
        return None if inside(root, path) else f"open for writing {path!r}"
    for at, dir_at in paths.get(event, ()):
        path = args[at] if at < len(args) else None
        dir_fd = args[dir_at] if dir_at is not None and dir_at < len(args) else None
        if path is not None and not inside(root, path, dir_fd):
            return f"{event} {path!r}"
    return None


def _finish(fd: int, code: int, reason: str, detail: str = "", token: str = "", *,
            write=os.write, end=os._exit, dumps=json.dumps) -> None:
    """Flush the program's output, write the outcome line to the parent's pipe, exit.

    What it calls is bound here: with `_exit` looked up in this module, a program that
    rebound it to do nothing had the hook's refusal return, and the refused event
    went ahead."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:  # a full disk, a closed or replaced stream: the outcome matters more
            pass
    line = dumps({"reason": reason, "detail": detail[:DETAIL_CHARS], "token": token})
    try:
        write(fd, (line + "\n").encode("utf-8", "replace"))
    except OSError:
        pass
    end(code)


def _audit_hook(root: str, fd: int, *, refusal=_refusal, finish=_finish, any=any):
    """The hook: end the process on any refused event, before the event happens.

    Its functions' attributes are out of reach, read or written: a program reached
    `_refusal` through its frame's globals and emptied, in place, the dictionary of
    its keyword defaults, the tables it refuses by (`__kwdefaults__`, whose reading is
    audited, its change in place not)."""
    own: list = [refusal, finish, _inside, _real_path]

    def hook(event: str, args: tuple) -> None:
        if (event in ("object.__setattr__", "object.__getattr__") and args
                and any(args[0] is f for f in own)):
            reason = f"reaching the sandbox's {args[0].__name__}.{args[1]}"
        else:
            reason = refusal(root, event, args)
        if reason is not None:
            finish(fd, BLOCKED, "blocked", f"refused: {reason}")
    own.append(hook)
    return hook


# The program's root file system is built afresh, a tmpfs that holds only these, each a
# read-only bind of the host's (or its symbolic link, as on a merged /usr): the system's
# programs and libraries, the two files of /etc the dynamic loader and the C library's
# time functions read, the interpreter's own directories (`_interpreter_dirs`), /proc of
# the program's PID namespace, a /dev of harmless devices, and the working directory.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
# /dev holds only these devices (and its usual links): as the host's root, a program
# could otherwise open the disks' block devices for writing.
DEVICES = ("null", "zero", "full", "random", "urandom")
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
                "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC = 1, 2, 4, 8, 32, 4096, 16384
MNT_DETACH, CLONE_NEWUSER, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 2, 0x10000000, 4, 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
PR_SET_PDEATHSIG, PR_GET_PDEATHSIG = 1, 2
# Landlock's system calls, the same number on every architecture (`landlock.py`)
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_RULE_PATH_BENEATH = 1
# The seccomp filter's constants that stand for the program's own pid and minus it, each
# an instruction's k (struct sock_filter: code, jt, jf, k), replaced by `own_pid_in`:
# above the kernel's largest pid (2**22), so that a filter left unpatched matches no
# process, and its negative no process group.
PID_SLOT, NEGATIVE_PID_SLOT = 0x5EC00001, 0x5EC00002
# glibc has no pivot_root(): the system call's number, from the kernel's tables, by
# machine (`uname -m`) and the interpreter's word size.  A pair not here has no number
# (mips and sparc, whose numbers we have not checked; a 32-bit interpreter on a 64-bit
# kernel, whose ABI the machine's name does not tell: i386's or x32's on x86_64, say),
# and the parent leaves the namespaces out, saying why.
PIVOT_ROOT = {("x86_64", 64): 155, ("aarch64", 64): 41, ("arm64", 64): 41,
              ("riscv64", 64): 41, ("loongarch64", 64): 41, ("ppc64le", 64): 203,
              ("ppc64", 64): 203, ("s390x", 64): 217, ("i386", 32): 217, ("i686", 32): 217,
              ("armv7l", 32): 218}
# keyctl's system call number, as PIVOT_ROOT's: where none is known the program keeps
# the caller's session keyring (`_new_session_keyring`).
KEYCTL = {("x86_64", 64): 250, ("aarch64", 64): 219, ("arm64", 64): 219,
          ("riscv64", 64): 219, ("loongarch64", 64): 219, ("ppc64le", 64): 271,
          ("ppc64", 64): 271, ("s390x", 64): 280, ("i386", 32): 288, ("i686", 32): 288,
          ("armv7l", 32): 311}
KEYCTL_JOIN_SESSION_KEYRING = 1
NEW_ROOT_TMPFS = b"size=1m,nr_inodes=4096,mode=755"  # directories, links and mount points
WORK_TMPFS = b"size=64m,nr_inodes=8192,mode=700"  # the working directory, when isolated
# ... and owned by the program's user when it drops root's (DROP)
WORK_TMPFS_DROPPED = WORK_TMPFS + f",uid={UNPRIVILEGED},gid={UNPRIVILEGED}".encode()
# A mount's flags that a user namespace may not drop when it remounts it.
_KEPT = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC}


def _mount_points() -> list[tuple[str, int]]:
    """(mount point, flags to keep) of every mount; each is remounted on its own, so
    their order does not matter."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            target = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
            flags = sum(bit for name, bit in _KEPT.items() if name in fields[5].split(","))
            points.append((target, flags))
    return points


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _interpreter_dirs() -> list[str]:
    """The directories this interpreter reads its modules from, by their real paths: its
    prefixes (a virtual environment's and the installation's, which hold the standard
    library and site-packages, in a home directory too, as pyenv puts them) and the
    import path's entries inside them (a site-packages that is a link elsewhere).

    An entry outside every prefix is left out: it is what a `.pth` file added, such as an
    editable install's source tree, the user's own project, which a benchmark's program
    never imports.  A prefix of "/" would bring back everything and is left out too.
    """
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    wanted = prefixes | {p for p in sys.path if any(_under(p, q) for q in prefixes)}
    real = {os.path.realpath(p) for p in wanted if p and os.path.isdir(p)}
    return sorted(real - {os.sep})


def _allowed() -> tuple[dict[str, str], list[str], list[str]]:
    """What the new root holds of the host's: ({link: target}, directories, files), none
    of the directories inside another (a bind of the outer one brings it)."""
    links, directories = {}, []
    for path in (*SYSTEM_DIRS, *ETC_FILES):
        if os.path.islink(path):
            links[path] = os.readlink(path)
    for path in (*(p for p in SYSTEM_DIRS if p not in links), *_interpreter_dirs()):
        if os.path.isdir(path) and not any(_under(path, d) for d in directories):
            directories.append(path)
    files = [p for p in ETC_FILES if p not in links and os.path.isfile(p)]
    return links, directories, files


def interpreter_abi() -> tuple[str, int]:
    """(machine, word size in bits) of this interpreter: what picks a system call's number."""
    return os.uname().machine, 64 if sys.maxsize > 2**32 else 32


def pivot_root_number() -> int | None:
    """pivot_root's system call number here, None where `PIVOT_ROOT` knows none."""
    return PIVOT_ROOT.get(interpreter_abi())


def _pivot_root(call) -> None:
    """Make the current directory the root and let go of the old one entirely (the
    man page's `pivot_root(".", ".")`): unlike chroot, nothing is left to climb back to
    for a program that holds the capabilities of its own user namespace."""
    number = pivot_root_number()
    if number is None:  # the parent's probe (`sandbox.probe_isolation`) left them out
        machine, bits = interpreter_abi()
        raise OSError(0, f"pivot_root: no system call number for {machine} ({bits}-bit)")
    call("syscall", number, b".", b".")
    call("umount2", b".", MNT_DETACH)


def _build_root(new: str, root: str, call, work_options: bytes = WORK_TMPFS) -> None:
    """Mount the program's root file system at `new`: a tmpfs holding `_allowed`'s
    links, and its directories and files bound (with the mounts under them; `isolate`
    makes every one read-only after the pivot), /proc, a /dev of `DEVICES`, and the
    working directory `root` at its own path inside, a tmpfs mounted with
    `work_options`.  The directories it makes on the way are open to every user (0755,
    whatever the caller's umask): a program that drops root's ids (DROP) reaches the
    interpreter's directories through them."""
    umask = os.umask(0o022)
    links, directories, files = _allowed()
    call("mount", b"tmpfs", new, b"tmpfs", MS_NOSUID | MS_NODEV, NEW_ROOT_TMPFS)
    for link, target in links.items():
        os.makedirs(new + os.path.dirname(link), exist_ok=True)
        os.symlink(target, new + link)
    for directory in (*directories, "/proc"):
        os.makedirs(new + directory)
        call("mount", directory, new + directory, None, MS_BIND | MS_REC, None)
    for path in files:
        os.makedirs(new + os.path.dirname(path), exist_ok=True)
        open(new + path, "w").close()
        call("mount", path, new + path, None, MS_BIND, None)
    os.mkdir(new + "/dev")
    call("mount", b"tmpfs", new + "/dev", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            open(f"{new}/dev/{name}", "w").close()
            call("mount", f"/dev/{name}", f"{new}/dev/{name}", None, MS_BIND, None)
    for name, target in DEVICE_LINKS.items():
        os.symlink(target, f"{new}/dev/{name}")
    # The working directory becomes a small tmpfs of its own: the disk under it stays
    # untouched (fallocate could reserve gigabytes past the file-size limit), nothing in
    # it can be set-user-ID or a device, and it is gone with the namespace.
    if any(_under(root, d) for d in directories):
        # The working directory lies in a directory bound above (TMPDIR inside the
        # interpreter's prefix, say): that recursive bind brought in the new root's own
        # tmpfs, mounted there, again; without it, the host's directory is the mount point.
        call("umount2", new + root, MNT_DETACH)
    os.makedirs(new + root, exist_ok=True)
    call("mount", b"tmpfs", new + root, b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
         work_options)
    os.umask(umask)


def _forget_ctypes() -> None:
    """Unload ctypes, loaded here before the hook: the program's `import ctypes` loads
    it anew, past the hook."""
    for name in [name for name in sys.modules if name.split(".")[0] in ("ctypes", "_ctypes")]:
        del sys.modules[name]


def _new_session_keyring(forget: bool = True) -> None:
    """Join a new, empty session keyring.

    A process inherits its parent's session keyring and possesses the keys in it, so a
    program (one that got around the hook: the kernel's keyctl has no audit event) read
    the secrets kept there, whatever the namespaces.  A kernel without keys (ENOSYS), or
    a keyctl forbidden here (a container's seccomp), leaves the program none to read,
    and is not an error.  `forget`: unload ctypes after (`isolate`, which needs it
    too, unloads it when done).
    """
    import ctypes

    number = KEYCTL.get(interpreter_abi())
    if number is not None:
        ctypes.CDLL(None).syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None)
    if forget:
        _forget_ctypes()


def drop_root() -> None:
    """Become UNPRIVILEGED, for good (real, effective and saved ids, no supplementary
    groups), with no capability left.

    The kernel exempts root from RLIMIT_NPROC: run as root, a program forked on until
    the wall-clock timeout or the machine's process table stopped it (200 forks in a
    row went through, 2026-12-03).  Everything a program needs of root's (its source,
    the token, the namespaces) is had before this.

    The kernel clears the parent-death signal as the ids change, and it is set again
    here: it is what ends this process when its parent dies (the harness asked for it,
    or `unshare --kill-child`), and without it a namespace's init outlived an
    `unshare` killed outright, and the program under it ran on with no time limit.
    ctypes stays loaded: the callers unload it (`isolate`, `dumpable`)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    death, parent = ctypes.c_int(0), os.getppid()
    if libc.prctl(PR_GET_PDEATHSIG, ctypes.byref(death), 0, 0, 0) != 0:
        death.value = 0
    os.setgroups([])
    os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
    os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
    if death.value and libc.prctl(PR_SET_PDEATHSIG, death.value, 0, 0, 0) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"prctl(PR_SET_PDEATHSIG): {os.strerror(number)}")
    if death.value and os.getppid() != parent:  # the parent died between: no signal came
        os._exit(1)


def dumpable() -> None:
    """Make this process dumpable again, as any process of an unprivileged user is.

    The kernel made it not dumpable as its ids changed (`drop_root`), which hands its
    /proc files to root: the program, with no capability left, could not read its own
    /proc/self/environ or /proc/self/fd.  The namespaces' init stays not dumpable (it
    holds the outcome's pipe: `isolate`); only the program's process is made so."""
    import ctypes

    if ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
        raise OSError(0, "prctl(PR_SET_DUMPABLE, 1) failed")
    _forget_ctypes()


def own_pid_in(program: bytes, pid: int) -> bytes:
    """The filter `program` with `pid` for its PID_SLOT and minus `pid` for its
    NEGATIVE_PID_SLOT (32 bits, as the kernel reads a pid), so that its signals reach
    that process and its group only (`seccomp.py`).  A pid of 1, a PID namespace's init,
    gets 0, its own group, for minus itself: -1 would be every process."""
    negative = -pid & 0xFFFFFFFF if pid > 1 else 0
    out = bytearray(program)
    for at in range(4, len(out), 8):  # each instruction's k
        k = int.from_bytes(out[at:at + 4], sys.byteorder)
        if k in (PID_SLOT, NEGATIVE_PID_SLOT):
            out[at:at + 4] = (pid if k == PID_SLOT else negative).to_bytes(4, sys.byteorder)
    return bytes(out)


def install_seccomp(program: bytes) -> None:
    """Run the rest of this process, and every process it starts, behind the seccomp
    filter `program` (a sock_filter array, built by the parent: `seccomp.build`).

    Installed last, in the program's own process: what the sandbox does before (the
    namespaces' mounts, pivot_root and unshare, the keyring it joins, root's ids given
    up) needs calls the filter refuses; what follows (compiling the program, adding
    the audit hook, writing the start's line) needs none of them.  No-new-privileges
    first, which the kernel requires of a process without CAP_SYS_ADMIN (`isolate` sets
    it already; the other levels did not, and nothing run after this may gain
    privileges through a set-user-ID file either).  The filter names this process's pid
    (`own_pid_in`), whose signals it lets through."""
    import ctypes

    class Fprog(ctypes.Structure):  # struct sock_fprog
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    program = own_pid_in(program, os.getpid())
    instructions = ctypes.create_string_buffer(program, len(program))
    fprog = Fprog(len(program) // 8, ctypes.addressof(instructions))
    ulong = ctypes.c_ulong
    for what, args in (("PR_SET_NO_NEW_PRIVS", (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)),
                       ("PR_SET_SECCOMP", (PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                                           ctypes.addressof(fprog), 0, 0))):
        if libc.prctl(*map(ulong, args)) != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"prctl({what}): {os.strerror(number)}")
    _forget_ctypes()


def landlock_rules(wanted: dict, root: str) -> list[tuple[str, int]]:
    """(path, rights) of the Landlock policy `wanted` (`landlock.policy`) for a program
    whose working directory is `root`: what the namespaces' root file system shows (its
    links by their targets, unless under a directory it shows) read, /proc read, the
    devices of its /dev, and `root` written."""
    links, directories, files = _allowed()
    targets = [os.path.realpath(link) for link in links]  # /bin's /usr/bin, under /usr
    targets = [t for t in targets if not any(_under(t, d) for d in directories)]
    rules = [(path, wanted["read"]) for path in dict.fromkeys([*directories, *files, *targets])]
    rules.append(("/proc", wanted["proc"]))
    rules += [(f"/dev/{name}", rights) for name, rights in wanted["devices"].items()]
    return [*rules, (root, wanted["work"])]


def install_landlock(policy: str, root: str) -> None:
    """Run the rest of this process, and every process it starts, in a Landlock domain
    of its own: the rights `policy` (`landlock.policy`, a JSON line) names, and only
    those, on the paths `landlock_rules` finds for the working directory `root`, and
    its scopes.

    Installed in the program's own process, after the sandbox's setup (which writes
    outside the working directory: the namespaces' mounts) and before the seccomp
    filter; what follows (compiling the program, the hook, the start's line and the
    outcome on pipes opened before) opens no file.  A path this process cannot reach
    (/lib32 on most machines) is left out, refused like the rest; a file is given the
    rights a file can have.  No-new-privileges first, which the kernel requires of a
    process without CAP_SYS_ADMIN."""
    import ctypes
    import stat

    class RulesetAttr(ctypes.Structure):  # struct landlock_ruleset_attr
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):  # struct landlock_path_beneath_attr, packed
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    wanted = json.loads(policy)
    libc = ctypes.CDLL(None, use_errno=True)

    def call(what: str, function, *args) -> int:
        result = function(*(ctypes.c_long(a) if isinstance(a, int) else a for a in args))
        if result < 0:
            number = ctypes.get_errno()
            raise OSError(number, f"{what}: {os.strerror(number)}")
        return result

    attr = RulesetAttr(wanted["fs"], wanted["net"], wanted["scoped"])
    # The struct as long as the kernel's ABI knows it: an older kernel refuses more
    size = 8 if wanted["abi"] < 4 else 16 if wanted["abi"] < 6 else 24
    ruleset = call("landlock_create_ruleset", libc.syscall, LANDLOCK_CREATE_RULESET,
                   ctypes.byref(attr), size, 0)
    try:
        for path, rights in landlock_rules(wanted, root):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    rights &= wanted["file"]
                rule = PathBeneath(rights, fd)
                call(f"landlock_add_rule {path}", libc.syscall, LANDLOCK_ADD_RULE, ruleset,
                     LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            finally:
                os.close(fd)
        call("prctl(PR_SET_NO_NEW_PRIVS)", libc.prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        call("landlock_restrict_self", libc.syscall, LANDLOCK_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)
    _forget_ctypes()


def isolate(root: str, drop: bool = False) -> None:
    """A root file system of only what the program needs, read-only but `root`, and
    privileges dropped.

    Runs as the root of fresh user and mount namespaces, before the audit hook
    (it needs ctypes); with `drop`, as the real root in fresh mount (and network, IPC,
    PID) namespaces but no user namespace, which gives root's ids up (`drop_root`)
    where the others give up the user namespace.  Raises OSError at the first step the
    kernel refuses; the parent probes this once and falls back to the network and IPC
    namespaces alone.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    _new_session_keyring(forget=False)

    def call(name: str, *args) -> None:
        encoded = [a.encode() if isinstance(a, str) else a for a in args]
        if getattr(libc, name)(*encoded) != 0:
            number = ctypes.get_errno()
            raise OSError(number, f"{name}{tuple(args)}: {os.strerror(number)}")

    # The new root is a tmpfs laid over the working directory for now (any directory
    # would do: it becomes "/", and the working directory gets its own tmpfs inside).
    new = root
    _build_root(new, root, call, WORK_TMPFS_DROPPED if drop else WORK_TMPFS)
    os.chdir(new)
    _pivot_root(call)
    for target, flags in _mount_points():
        if target != root:
            call("mount", None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None)
    os.chdir(root)
    # A user namespace of its own owns none of these mounts: the program cannot remount
    # them, and no set-user-ID program can give it back what it gave up.  Root's own
    # namespaces belong to the host's user namespace: giving up root's ids gives up
    # every capability over them (and puts the program under the process limit).
    if drop:
        drop_root()
    else:
        call("unshare", CLONE_NEWUSER)
    call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # Not dumpable: the program, in a user namespace below this process's, may not reach
    # into the PID namespace's init (`_wait_as_init`) through /proc/1/fd or ptrace, where
    # the start's pipe stays open for a moment after the fork and the outcome's for good.
    call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)
    _forget_ctypes()


def _wait_as_init(fd: int, started_fd: int, drop: bool = False) -> None:
    """Fork: the program runs in the child; this process, the first of the PID
    namespace (its init), waits for it and says how it ended when a signal ended it.

    The kernel spares a namespace's init every signal it has no handler for, unless
    sent from an ancestor namespace.  Run as init, a program ran on through its own
    alarm or raise_signal(SIGTERM), and passed where without the namespaces it was
    killed, an error; and the CPU limit's SIGXCPU was ignored, so the program burnt on
    to the wall clock or, with threads on many cores, to the hard limit's SIGKILL (an
    error, not a timeout).  The child is an ordinary process: signals end it as they
    end a program outside.  Orphans it leaves are reaped here; this process ends when
    the program does, and the namespace with it.  The start's pipe is the program's
    to write to (`main`), not this process's: it closes its copy at once.
    """
    import signal

    program = os.fork()
    if program == 0:
        if drop:
            dumpable()
        return
    os.close(started_fd)
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == program:
            break
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        if number == signal.SIGXCPU:
            _finish(fd, ERROR, "timeout", "CPU time limit")
        _finish(fd, ERROR, "error", f"killed by {signal.Signals(number).name}")
    _exit(os.waitstatus_to_exitcode(status))


def _describe(exc: BaseException, path: str) -> str:
    """`Type: message (line N: code)`, the line being the program's last in the traceback."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
    if frames:
        text += f" (line {frames[-1].lineno}: {(frames[-1].line or '').strip()})"
    return text


def main() -> None:
    """Run the program named on the command line; exit with its outcome."""
    path, fd, token_fd, started_fd = sys.argv[1], *map(int, sys.argv[2:5])
    root = os.path.realpath(os.getcwd())
    with os.fdopen(token_fd, "rb") as handle:
        token, _, rest = handle.read().partition(b"\n")
    landlock_policy, _, seccomp_filter = rest.partition(b"\n")
    token = token.decode("ascii", "replace")
    with open(path, encoding="utf-8") as handle:
        source = handle.read()  # before `isolate` lays a fresh directory over it
    drop = DROP in sys.argv[5:]
    if ISOLATE in sys.argv[5:]:
        try:
            isolate(root, drop)
        except OSError as exc:  # the harness's failure, not the program's
            _finish(fd, ERROR, "sandbox", f"sandbox isolation failed: {exc}")
        _wait_as_init(fd, started_fd, drop)
    else:
        _new_session_keyring()
        if drop:
            try:
                drop_root()
                dumpable()
            except OSError as exc:
                _finish(fd, ERROR, "sandbox", f"sandbox could not drop root's ids: {exc}")
    if landlock_policy:
        try:
            install_landlock(landlock_policy.decode("utf-8"), root)
        except (OSError, ValueError) as exc:
            _finish(fd, ERROR, "sandbox", f"sandbox could not install its Landlock layer: {exc}")
    if seccomp_filter:
        try:
            install_seccomp(seccomp_filter)
        except OSError as exc:
            _finish(fd, ERROR, "sandbox", f"sandbox could not install its seccomp filter: {exc}")
    try:
        code = compile(source, path, "exec")
    except (SyntaxError, ValueError) as exc:
        _finish(fd, ERROR, "error", _describe(exc, path))
    sys.dont_write_bytecode = True
    if NO_HOOK not in sys.argv[5:]:
        sys.addaudithook(_audit_hook(root, fd))
    # From here on what goes wrong is the program's: the parent counts a child that ends
    # without this line (`unshare` refused, the interpreter could not start) as the
    # sandbox's.  Closed before the program runs, the pipe is out of its reach.
    _write(started_fd, STARTED)
    os.close(started_fd)
    runner = sys.modules["__main__"]  # noqa: F841 - keeps this module alive while it runs
    program = types.ModuleType("__main__")  # `import __main__` finds the program, not us
    sys.modules["__main__"] = program
    try:
        exec(code, program.__dict__)
    except _ASSERTION as exc:
        _finish(fd, FAILED, "failed", _describe(exc, path))
    except BaseException as exc:  # SystemExit too: a program that exits skipped its tests
        _finish(fd, ERROR, "error", _describe(exc, path))
    _finish(fd, PASSED, "passed", "", token)


if __name__ == "__main__":
    main()
