"""A pids cgroup of its own for each sandboxed program, where the machine lets us make one.

The sandbox's process limit (RLIMIT_NPROC) counts a user's processes, and the kernel
exempts root from it: a program that runs as root (where nobody cannot reach the
interpreter) forked on to the timeout.  And below the PID namespace a child that left
the process group (`setsid`) outlived the run: the group's kill missed it (a `sleep`
started so by a program at the 'none' and 'network' levels, the hook off, was still
running after the run, 2026-12-03).  A cgroup counts every task in it, whoever runs it,
and every child is born in it: its `pids.max` bounds a fork bomb of root's, and its
member list names every process the program left, in whatever group or session.

Where a pids controller is writable (cgroup v1's pids hierarchy, or v2 where our own
cgroup's `cgroup.subtree_control` already enables `pids` for the cgroups below it), each
program gets a cgroup below ours (`dlm-sandbox-PID-PIDNS-RANDOM`) with
`pids.max` set; the child joins it before the program's interpreter starts (`join`, in
the preexec function), and `close` kills what is left in it and removes it.  Where none
is writable (no cgroups mounted, not root and nothing delegated, not Linux), `find`
says why and the sandbox runs as it did without.  A benchmark killed outright leaves its
cgroups behind, emptied as their programs end: the next one removes them (`sweep`),
where they were made in its own PID namespace (a number names a process there alone).
Only the cgroups made here are ever changed or removed.  On v2 nothing else is changed
either: a `cgroup.subtree_control` that lacks `pids` is left so (writing `+pids` there
would change a cgroup the benchmark does not own), and no cgroup is made at the root when
ours is not it (there a program would leave the unit the benchmark runs in, with its
memory and CPU limits and its service manager's account of it).
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

MOUNTINFO = "/proc/self/mountinfo"
OWN_CGROUPS = "/proc/self/cgroup"
PROCS = "cgroup.procs"
PREFIX = "dlm-sandbox-"


@dataclass(frozen=True)
class Controller:
    """Where each program's cgroup is made: below `parent`, of cgroup `version` 1 or 2."""

    parent: str
    version: int

    def describe(self) -> str:
        return f"cgroup v{self.version} below {self.parent}"


def _unescape(field: str) -> str:
    """A mountinfo path, its octal escapes (a space is \\040) undone."""
    out, at = "", 0
    while at < len(field):
        if field[at] == "\\" and field[at + 1:at + 4].isdigit():
            out, at = out + chr(int(field[at + 1:at + 4], 8)), at + 4
        else:
            out, at = out + field[at], at + 1
    return out


def _mounts() -> list[tuple[str, str, str, list[str]]]:
    """(root inside the hierarchy, mount point, file system type, super options) of each
    cgroup mount."""
    found = []
    with open(MOUNTINFO, encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            tail = fields[fields.index("-") + 1:]
            if tail[0] in ("cgroup", "cgroup2"):
                found.append((_unescape(fields[3]), _unescape(fields[4]), tail[0],
                              tail[2].split(",") if len(tail) > 2 else []))
    return found


def _own_paths() -> dict[str, str]:
    """Our cgroup in each hierarchy: {"pids": path} for v1's, {"": path} for v2's."""
    paths = {}
    with open(OWN_CGROUPS, encoding="utf-8") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for name in controllers.split(","):
                paths[name] = path
    return paths


def _below(mount_root: str, mount_point: str, path: str) -> str | None:
    """The directory of cgroup `path` under a mount of the hierarchy's `mount_root`
    (None where the mount does not show it: a container's mount of its own part)."""
    if mount_root == "/":
        return mount_point.rstrip("/") + (path if path != "/" else "")
    if path == mount_root or path.startswith(mount_root + "/"):
        return mount_point.rstrip("/") + path[len(mount_root):]
    return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def _candidates(name: str = "pids") -> list[Controller]:
    """Where a cgroup of controller `name` (pids, memory) might be made: below our own v1
    cgroup of that hierarchy; below our own v2 cgroup (where `name` is enabled for the
    cgroups below it: `_enabled`)."""
    own = _own_paths()
    found = []
    for mount_root, point, kind, options in _mounts():
        if kind == "cgroup" and name in options and name in own:
            parent = _below(mount_root, point, own[name])
            if parent:
                found.append(Controller(parent, 1))
    for mount_root, point, kind, _ in _mounts():
        if kind == "cgroup2" and "" in own:
            parent = _below(mount_root, point, own[""])
            if parent and parent not in (c.parent for c in found):
                found.append(Controller(parent, 2))
    return found


def _enabled(controller: Controller, name: str = "pids") -> None:
    """v2: OSError unless controller `name` is on for the cgroups below
    `controller.parent`.  It is not turned on here: that writes a cgroup the benchmark
    does not own (and a cgroup with processes of its own, as ours has, refuses it), so
    it is for whoever delegates the cgroup (systemd's `Delegate=pids`, say)."""
    if controller.version != 2:
        return
    available = _read(os.path.join(controller.parent, "cgroup.controllers")).split()
    if name not in available:
        raise OSError(0, f"no {name} controller in {controller.parent}/cgroup.controllers")
    if name not in _read(os.path.join(controller.parent, "cgroup.subtree_control")).split():
        raise OSError(0, f"{name} is not enabled for the cgroups below {controller.parent} "
                         "(its cgroup.subtree_control); dlm-lsp does not change it")


def _pid_namespace() -> str:
    """Our PID namespace's inode number ("" where it cannot be read): the process numbers
    in our cgroups' names mean something in it alone."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def memory_limit_file(version: int) -> str:
    """The file of a cgroup that caps the memory of all its processes together."""
    return "memory.limit_in_bytes" if version == 1 else "memory.max"


class PidsCgroup:
    """One program's cgroup: made with its `pids.max` (and the other `limits`, file ->
    value, such as a memory cgroup's cap, with `limit` None), joined by the child
    (`join`), emptied and removed by `close`, whatever the program left in it."""

    def __init__(self, controller: Controller, limit: int | None,
                 limits: dict[str, int] | None = None) -> None:
        self.path = os.path.join(controller.parent, owned_name() + secrets.token_hex(4))
        self.version = controller.version
        written = {**({"pids.max": limit} if limit is not None else {}), **(limits or {})}
        os.mkdir(self.path)
        try:
            for name, value in written.items():
                _write(os.path.join(self.path, name), str(value))
        except BaseException:
            os.rmdir(self.path)
            raise
        self._procs = os.path.join(self.path, PROCS)
        # v1: the writer's one thread ("0") by `tasks`, which skips the kernel's lock on
        # every thread group (`cgroup.procs` takes it, and waits out an RCU grace period:
        # a program started 14 ms later, idle CPU, 2-core VM at load 3-6, 2026-12-03;
        # `tasks`, 2-3 ms).  The child after fork has that one thread alone.  v2 has no
        # `tasks`; its `cgroup.threads` is for threaded cgroups only.
        self._join = os.path.join(self.path, "tasks" if self.version == 1 else PROCS)

    def join(self) -> None:
        """Move the calling process, single-threaded (a child between fork and exec), into
        the cgroup: only system calls ("0" names the writer)."""
        fd = os.open(self._join, os.O_WRONLY)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)

    def members(self) -> list[int]:
        return [int(pid) for pid in _read(self._procs).split()]

    def close(self, timeout_s: float = 5.0) -> None:
        """Kill every process left in the cgroup, until none is, and remove it; OSError
        when that does not happen within `timeout_s` (the cgroup is left, and named)."""
        deadline = time.monotonic() + timeout_s
        kill = os.path.join(self.path, "cgroup.kill")
        if self.version == 2 and os.path.exists(kill):
            try:
                _write(kill, "1")
            except OSError:
                pass
        while True:
            pids = self.members()
            if pids:
                _kill_members(pids, self.members)
            else:
                try:
                    os.rmdir(self.path)
                    return
                except OSError as exc:  # EBUSY: a task still on its way out
                    if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                        raise
            if time.monotonic() >= deadline:
                raise OSError(0, f"processes {pids} still run in {self.path}")
            time.sleep(0.001)


def _kill_members(pids: list[int], members) -> None:
    """SIGKILL these processes of the cgroup.  Each is pinned by a pidfd first and killed
    only if the cgroup still lists it: a process that ended since the list was read may
    have handed its number to one of someone else's, which would not be in the list."""
    pinned = {}
    for pid in pids:
        try:
            pinned[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        except OSError:  # no pidfds (a kernel before 5.3): the plain kill, as the group's
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        still = set(members()) if pinned else set()
        for pid, fd in pinned.items():
            if pid in still:
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    finally:
        for fd in pinned.values():
            os.close(fd)


# What a trial cgroup of each controller is made with (`_try`): room for the process
# the trial starts.
_TRIAL_LIMITS = {"pids": lambda version: {"pids.max": 4},
                 "memory": lambda version: {memory_limit_file(version): 256 << 20}}


def _try(controller: Controller, name: str = "pids") -> None:
    """Make a cgroup of controller `name` at `controller`, start a process in it and
    close it: OSError (or SubprocessError) where any step is refused."""
    _enabled(controller, name)
    cgroup = PidsCgroup(controller, None, _TRIAL_LIMITS[name](controller.version))
    try:
        subprocess.run([sys.executable, "-I", "-S", "-c", ""], preexec_fn=cgroup.join,
                       stdin=subprocess.DEVNULL, capture_output=True, check=True, timeout=30)
    finally:
        cgroup.close()


def owned_name() -> str:
    """The start of the name of what a sandbox makes for a program and removes after it
    (a cgroup, a folder): `dlm-sandbox-PID-NAMESPACE-`, the maker's process and PID
    namespace, so that what a process killed outright left behind is told
    (`left_by_a_process_gone`)."""
    return f"{PREFIX}{os.getpid()}-{_pid_namespace() or 'unknown'}-"


def left_by_a_process_gone(name: str) -> bool:
    """Whether `name` is one of `owned_name`'s, made in our PID namespace by a process
    that is gone.  One whose number a live process now has, or made in another PID
    namespace (a container's sharing the hierarchy or /tmp: its maker's number names no
    process of ours, or another one, though the maker may be running still), is not."""
    owner, _, rest = name[len(PREFIX):].partition("-")
    namespace = _pid_namespace()
    # ASCII digits of a process number Linux can give (2**22 at most): any user can make
    # a folder in /tmp, and `²` or a number past a C long raised from int() or kill()
    if not (name.startswith(PREFIX) and owner.isascii() and owner.isdigit()
            and len(owner) <= 7 and int(owner) <= 1 << 22 and namespace
            and rest.partition("-")[0] == namespace):
        return False
    try:
        os.kill(int(owner), 0)
        return False  # its maker, or a process that has its number now
    except ProcessLookupError:
        return True
    except PermissionError:
        return False


def sweep(controller: Controller) -> list[str]:
    """Remove the empty cgroups a sandbox left at `controller` when its process was killed
    outright (SIGKILL: no `close` ran), their process gone (`left_by_a_process_gone`).
    One still holding processes is left alone.  Returns the names removed."""
    removed = []
    for name in os.listdir(controller.parent):
        if not left_by_a_process_gone(name):
            continue
        try:
            os.rmdir(os.path.join(controller.parent, name))
            removed.append(name)
        except OSError:  # processes in it, or not ours to remove
            pass
    return removed


@functools.lru_cache(maxsize=2)
def find(name: str = "pids") -> tuple[Controller | None, str]:
    """(the controller `name`'s cgroups of programs are made at, "") where one works
    here, else (None, why not): checked once, by starting a process in a cgroup made
    there."""
    if not sys.platform.startswith("linux"):
        return None, "no cgroups (not Linux)"
    try:
        candidates = _candidates(name)
    except (OSError, ValueError, IndexError) as exc:
        return None, f"cgroups unreadable ({exc})"
    if not candidates:
        return None, f"no {name} controller mounted"
    reasons = []
    for controller in candidates:
        try:
            _try(controller, name)
            sweep(controller)
            return controller, ""
        except (OSError, subprocess.SubprocessError) as exc:
            reasons.append(f"{controller.describe()}: {exc}")
    return None, f"no {name} controller writable (" + "; ".join(reasons) + ")"
