"""Each sandboxed program in a pids cgroup of its own, where the machine lets us make one:
its process count bounded whoever runs it, and nothing it started outliving the run."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time

import pytest

from dlm_lsp.bench import cgroup, sandbox
from dlm_lsp.bench.sandbox import SandboxConfig

CONTROLLER, WHY_NONE = cgroup.find()
WITH_CGROUP = pytest.mark.skipif(CONTROLLER is None,
                                 reason=f"no pids cgroup can be made here: {WHY_NONE}")
KERNEL_ONLY = SandboxConfig(timeout_s=5.0, hook=False)  # the hook off: it refuses os.fork
BELOW_PID_NAMESPACE = [sandbox.NONE] + (
    [sandbox.NETWORK] if sandbox.network_namespace_available() else [])


def _ours() -> list[str]:
    """The cgroups this process made that are still there."""
    return sorted(name for name in os.listdir(CONTROLLER.parent)
                  if name.startswith(f"{cgroup.PREFIX}{os.getpid()}-"))


def _running(argument: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            words = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            state = open(f"/proc/{pid}/stat", "rb").read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argument.encode() in words and state != b"Z":
            found.append(int(pid))
    return found


# Every process forks on while it can, then sleeps: without a bound, thousands of them.
FORK_BOMB = """
import os, time
for _ in range(100):
    try:
        os.fork()
    except OSError:
        break
time.sleep(60)
"""


@WITH_CGROUP
@pytest.mark.parametrize("isolation", BELOW_PID_NAMESPACE)
def test_a_process_that_leaves_the_group_below_the_pid_namespace_is_killed_at_the_end(
        isolation):
    """A `sleep` started in a session of its own escaped the process group's kill: with no
    PID namespace to die with, it ran on after the run.  The cgroup lists it."""
    argument = str(900000 + secrets.randbelow(99999))
    program = ("import subprocess\n"
               f"subprocess.Popen(['sleep', '{argument}'], start_new_session=True)\n")
    try:
        outcome = sandbox._run(program, KERNEL_ONLY, isolation)
        assert _running(argument) == []
        assert outcome.passed and outcome.pids_cgroup, outcome.detail
    finally:
        for pid in _running(argument):  # the old way's escapee: not left on the machine
            os.kill(pid, 9)


@WITH_CGROUP
@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_no_cgroup_is_left_behind_after_a_pass_a_failure_a_timeout_or_a_fork_bomb(
        monkeypatch, isolation):
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    programs = ["assert True\n", "assert False\n", "while True:\n    pass\n",
                FORK_BOMB,
                "import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(60)\n"]
    assert _ours() == []
    outcomes = sandbox.run_programs(programs, SandboxConfig(timeout_s=2.0, hook=False))
    assert [o.reason for o in outcomes] == ["passed", "failed"] + ["timeout"] * 3
    assert all(o.pids_cgroup for o in outcomes)
    assert _ours() == []


@WITH_CGROUP
def test_the_empty_cgroups_of_a_benchmark_killed_outright_are_removed_by_the_next():
    """Killed with SIGKILL, a benchmark ran no `close`: its cgroups stayed, empty once
    their programs ended.  Only those whose maker is gone are removed, and only empty."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    namespace = cgroup._pid_namespace()
    dead = os.path.join(CONTROLLER.parent, f"{cgroup.PREFIX}{gone}-{namespace}-0000dead")
    busy = os.path.join(CONTROLLER.parent, f"{cgroup.PREFIX}{gone}-{namespace}-0000busy")
    mine = cgroup.PidsCgroup(CONTROLLER, 4)  # this process's, in use
    os.mkdir(dead)
    os.mkdir(busy)
    sleeper = subprocess.Popen(["sleep", "30"], preexec_fn=lambda: cgroup._write(
        os.path.join(busy, cgroup.PROCS), "0"))
    try:
        removed = cgroup.sweep(CONTROLLER)  # and any other process gone left, machine-wide
        assert os.path.basename(dead) in removed
        assert os.path.basename(busy) not in removed and os.path.basename(mine.path) not in removed
        assert not os.path.exists(dead)
        assert os.path.isdir(busy) and os.path.isdir(mine.path)
    finally:
        sleeper.kill()
        sleeper.wait()
        if os.path.isdir(mine.path):
            mine.close()
        for path in (dead, busy):
            while os.path.exists(path):
                try:
                    os.rmdir(path)
                except OSError:
                    time.sleep(0.01)


@WITH_CGROUP
def test_a_program_that_cannot_start_leaves_no_cgroup(monkeypatch):
    def refused(*args, **kwargs):
        raise OSError(24, "Too many open files")
    monkeypatch.setattr(sandbox.subprocess, "Popen", refused)
    outcome = sandbox.run_program("assert True\n")
    assert outcome.reason == sandbox.SANDBOX, outcome.detail
    assert _ours() == []


def test_where_no_cgroup_can_be_made_programs_run_as_before_and_the_report_says_why(
        monkeypatch):
    monkeypatch.setattr(cgroup, "find", lambda name="pids": (None, f"no {name} controller "
                                                                  "mounted"))
    outcome = sandbox.run_program("assert True\n", SandboxConfig(timeout_s=5.0))
    assert outcome.passed and not outcome.pids_cgroup and not outcome.memory_cgroup
    level, fallback, used, note, *_ = sandbox.isolation_used(SandboxConfig())
    assert (used, note) == (False, "no pids controller mounted; no memory cgroup (no memory "
                                   "controller mounted)")
    assert sandbox.isolation_text(level, fallback, used, note).endswith(
        "; no pids cgroup (no pids controller mounted; no memory cgroup (no memory "
        "controller mounted))")


def test_the_report_names_where_the_cgroups_were_made(monkeypatch):
    found = {"pids": cgroup.Controller("/sys/fs/cgroup/pids", 1),
             "memory": cgroup.Controller("/sys/fs/cgroup/memory", 1)}
    monkeypatch.setattr(cgroup, "find", lambda name="pids": (found[name], ""))
    capped = ("the memory of each program's processes capped at 1280 MiB together (cgroup "
              "v1 below /sys/fs/cgroup/memory)")
    assert sandbox.isolation_text(sandbox.NONE, "", True, sandbox.pids_cgroup_note(True)) == (
        "sandbox isolation: none (the audit hook and the limits only); each program in a "
        f"pids cgroup of its own (cgroup v1 below /sys/fs/cgroup/pids; {capped})")
    # a run some of whose programs ran without one (made before the probe, say) says so
    assert sandbox.pids_cgroup_note(False) == f"not every program ran in one; {capped}"


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A machine's /proc/self/mountinfo and /proc/self/cgroup, written by the test."""
    def write(mounts: list[str], own: list[str]) -> None:
        (tmp_path / "mountinfo").write_text("".join(line + "\n" for line in mounts))
        (tmp_path / "cgroup").write_text("".join(line + "\n" for line in own))
    monkeypatch.setattr(cgroup, "MOUNTINFO", str(tmp_path / "mountinfo"))
    monkeypatch.setattr(cgroup, "OWN_CGROUPS", str(tmp_path / "cgroup"))
    return write


def test_cgroup_v1s_pids_hierarchy_is_used_below_our_own_cgroup(machine):
    machine(["35 26 0:30 / /sys/fs/cgroup/pids rw,relatime shared:16 - cgroup cgroup "
             "rw,pids",
             "36 26 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory",
             "37 26 0:32 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw"],
            ["8:pids:/user.slice/session 1", "4:memory:/x", "0::/user.slice"])
    assert cgroup._candidates() == [
        cgroup.Controller("/sys/fs/cgroup/pids/user.slice/session 1", 1),
        cgroup.Controller("/sys/fs/cgroup/unified/user.slice", 2)]


def test_cgroup_v2_alone_is_tried_at_our_own_cgroup_never_above_it(machine):
    """A container's own part of the hierarchy, mounted at /sys/fs/cgroup (with a space in
    a name, escaped in mountinfo).  The hierarchy's root there is above our cgroup: a
    program moved there would leave the unit (and its memory and CPU limits) the
    benchmark runs in."""
    machine(["30 25 0:27 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate",
             "31 25 0:27 /docker/abc /mnt/my\\040cg rw - cgroup2 cgroup2 rw"],
            ["0::/docker/abc/init"])
    assert cgroup._candidates() == [cgroup.Controller("/sys/fs/cgroup/init", 2),
                                    cgroup.Controller("/mnt/my cg/init", 2)]


def test_no_cgroup_mounted_is_said(machine):
    machine(["22 1 8:1 / / rw - ext4 /dev/sda1 rw"], ["0::/"])
    assert cgroup.find.__wrapped__() == (None, "no pids controller mounted")


def test_a_v2_hierarchy_without_the_pids_controller_is_refused_and_says_why(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    with pytest.raises(OSError, match="no pids controller"):
        cgroup._enabled(cgroup.Controller(str(tmp_path), 2))


def test_a_v2_cgroup_that_does_not_enable_pids_below_it_is_refused_and_left_as_it_was(
        tmp_path):
    """Turning `pids` on writes a cgroup the benchmark does not own: that is for whoever
    delegates it, and the report says why no pids cgroup was made."""
    (tmp_path / "cgroup.controllers").write_text("cpu pids memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("cpu\n")
    with pytest.raises(OSError, match="pids is not enabled for the cgroups below"):
        cgroup._enabled(cgroup.Controller(str(tmp_path), 2))
    assert (tmp_path / "cgroup.subtree_control").read_text() == "cpu\n"
    (tmp_path / "cgroup.subtree_control").write_text("cpu pids\n")  # delegated: used
    cgroup._enabled(cgroup.Controller(str(tmp_path), 2))
    assert (tmp_path / "cgroup.subtree_control").read_text() == "cpu pids\n"


def test_a_process_not_in_the_cgroup_is_never_killed():
    """A member that ended may have handed its number to someone else's process before
    the kill: each is pinned first and killed only if the cgroup still lists it."""
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        cgroup._kill_members([stranger.pid], lambda: [])
        time.sleep(0.1)
        assert stranger.poll() is None
        cgroup._kill_members([stranger.pid], lambda: [stranger.pid])
        assert stranger.wait(timeout=5) == -9
    finally:
        stranger.kill()
        stranger.wait()


@pytest.fixture
def unprobed():
    """`cgroup.find` with nothing cached, as in a fresh benchmark process; the real
    answer is looked up again by whoever asks next."""
    cgroup.find.cache_clear()
    yield
    cgroup.find.cache_clear()


def test_parallel_workers_probe_for_a_cgroup_once(monkeypatch, unprobed):
    """`bench humaneval` first asks for a cgroup in its worker threads: each worker that
    asked before the first probe ended probed again, making and closing a cgroup and
    starting a process of its own, and sweeping the same folder at the same time."""
    probes = []

    def slow_refusal(controller, name="pids"):
        probes.append(name)
        time.sleep(0.3)  # a probe starts an interpreter: the other workers arrive meanwhile
        raise OSError(30, "Read-only file system")
    monkeypatch.setattr(cgroup, "_candidates",
                        lambda name="pids": [cgroup.Controller("/nowhere", 1)])
    monkeypatch.setattr(cgroup, "_try", slow_refusal)
    outcomes = sandbox.run_programs(["assert True\n"] * 4,
                                    SandboxConfig(timeout_s=5.0, workers=4))
    assert [o.reason for o in outcomes] == ["passed"] * 4
    assert not any(o.pids_cgroup or o.memory_cgroup for o in outcomes)
    assert sorted(probes) == ["memory", "pids"]  # once each


# A benchmark in a PID namespace of its own (a container's) that shares our cgroup
# hierarchy: it makes its cgroup under the number it has there, then waits, the cgroup
# empty (as between its making and the program's joining it, or after the program ended).
OTHER_NAMESPACE = """
import os, sys
from dlm_lsp.bench import cgroup
parent, target = sys.argv[1], int(sys.argv[2])
while True:
    child = os.fork()
    if child == 0:
        if os.getpid() != target:
            os._exit(0)
        group = cgroup.PidsCgroup(cgroup.Controller(parent, 1), 4)
        print(group.path, flush=True)
        sys.stdin.readline()
        try:
            group.close()
            print("closed", flush=True)
        except OSError as exc:
            print(f"{type(exc).__name__}: {exc}", flush=True)
        os._exit(0)
    os.waitpid(child, 0)
    if child == target:
        break
"""


@WITH_CGROUP
@pytest.mark.skipif(os.geteuid() != 0 or CONTROLLER is None or CONTROLLER.version != 1,
                    reason="needs root, and cgroup v1's pids hierarchy, to make one")
def test_the_sweep_leaves_alone_a_cgroup_made_in_another_pid_namespace():
    """A number is a process's in its own PID namespace: one that no process has here may
    be a live benchmark's in a container beside us, whose empty cgroup was removed."""
    if subprocess.run(["unshare", "--pid", "--fork", "true"]).returncode != 0:
        pytest.skip("no PID namespace can be made here")
    free = next(pid for pid in range(2, 100000) if not os.path.exists(f"/proc/{pid}"))
    other = subprocess.Popen(["unshare", "--pid", "--fork", sys.executable, "-c",
                              OTHER_NAMESPACE, CONTROLLER.parent, str(free)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})
    path = ""
    try:
        path = other.stdout.readline().strip()
        assert os.path.basename(path).startswith(f"{cgroup.PREFIX}{free}-")
        assert cgroup.sweep(CONTROLLER) == []
        assert os.path.isdir(path)
        other.stdin.write("\n")
        other.stdin.flush()
        assert other.stdout.readline().strip() == "closed"
    finally:
        other.kill()
        other.wait()
        if path and os.path.isdir(path):
            os.rmdir(path)


HOLDS_ITS_PROCESSES = """
import os, time
for _ in range(100):
    try:
        if os.fork() == 0:
            time.sleep(6)
            os._exit(0)
    except OSError:
        break
time.sleep(6)
"""

FORKS_LATER = """
import os, time
time.sleep(2)
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
"""


@WITH_CGROUP
def test_a_fork_bomb_takes_no_room_from_the_program_beside_it():
    """The process limit counts the user's tasks, every program's together: a fork bomb
    filled it, and the program run beside it could not fork (in CI its setup could not,
    and the harness counted it a failure of the sandbox).  Each program's pids cgroup
    holds the bomb to its own cap; the user's limit leaves room for the others."""
    config = SandboxConfig(timeout_s=10.0, hook=False, workers=2)
    bomb, beside = sandbox.run_programs([HOLDS_ITS_PROCESSES, FORKS_LATER], config)
    assert bomb.reason == "passed" and bomb.pids_cgroup, bomb.detail + bomb.output
    assert beside.reason == "passed", beside.detail + beside.output


MEMORY, WHY_NO_MEMORY = cgroup.find("memory")
WITH_MEMORY_CGROUP = pytest.mark.skipif(
    MEMORY is None, reason=f"no memory cgroup can be made here: {WHY_NO_MEMORY}")


@WITH_MEMORY_CGROUP
def test_a_program_s_processes_are_held_to_one_memory_cap_together():
    """RLIMIT_AS caps each process alone: four children of a program past the hook held
    3.6 GiB, and the ~32 its pids cgroup allows could have held ~30 GiB (a red-team
    pass, 2026-12-06).  Here four children each take 180 MiB, within their own limit
    (256 MiB), past the 512 MiB the program has in all: the kernel kills some."""
    program = ("import os, time\nkids = []\nfor _ in range(4):\n    pid = os.fork()\n"
               "    if pid == 0:\n        block = bytearray(180 << 20)\n"
               "        block[::4096] = b'x' * len(block[::4096])\n"
               "        time.sleep(2)\n        os._exit(0)\n    kids.append(pid)\n"
               "print('killed', sum(os.waitpid(k, 0)[1] & 0x7f == 9 for k in kids))\n")
    config = SandboxConfig(timeout_s=20.0, hook=False, memory_bytes=256 << 20)
    assert sandbox._memory_cap(config) == 512 << 20
    outcome = sandbox.run_program(program, config)
    assert outcome.memory_cgroup and outcome.passed, outcome.detail + outcome.output
    assert int(outcome.output.split("killed")[1]) >= 1, outcome.output
    assert "memory of each program's processes capped at 1280 MiB" in \
        sandbox.pids_cgroup_note(True)
