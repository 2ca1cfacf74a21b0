"""The sandbox's Landlock layer in the kernel: what a program past the audit hook is
refused behind it (writes outside its directory, its parent's /proc files, signals to
its parent, abstract Unix sockets and TCP made outside), what still works, and what
the reports say where there is none.  The hook is off (`hook=False`) where a test
stands for a program that got around it, and the seccomp filter too where it would
refuse the same."""

from __future__ import annotations

import json
import os
import socket

import pytest

from dlm_lsp.bench import landlock, sandbox, sandbox_child
from dlm_lsp.bench.sandbox import SandboxConfig, run_program

FOUND = sandbox.probe_landlock()
KERNEL_ABI, KERNEL_WHY = landlock.abi() if os.name == "posix" else (0, "not Linux")
WITH_LANDLOCK = pytest.mark.skipif(not FOUND.version, reason=f"no Landlock here: {FOUND.note}")
WITH_SCOPES = pytest.mark.skipif(FOUND.version < landlock.SCOPE_ABI,
                                 reason="no Landlock scopes (ABI 6) here")
# Every level that works here, weakest first
LEVELS = list(sandbox.ISOLATION_LEVELS[:sandbox.ISOLATION_LEVELS.index(
    sandbox.isolation_available()) + 1])
# The layer alone: no hook (a program past it), no seccomp filter
LAYER_ONLY = SandboxConfig(timeout_s=10.0, hook=False, seccomp=False)
NEITHER = SandboxConfig(timeout_s=10.0, hook=False, seccomp=False, landlock=False)

# Each prints what became of its attempt: "refused" (the kernel said EACCES or EPERM, or
# a read-only file system), else "done" or the error's name.
ATTEMPT = ("import errno, os\n"
           "def attempt(what):\n"
           "    try:\n        what()\n"
           "    except OSError as exc:\n"
           "        return 'refused' if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS)"
           " else errno.errorcode[exc.errno]\n"
           "    return 'done'\n")


def attempted(monkeypatch, isolation: str, config: SandboxConfig, program: str) -> str:
    """What `program` (after ATTEMPT) printed last, run at `isolation` under `config`."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    outcome = run_program(ATTEMPT + program, config)
    assert outcome.passed, outcome.detail + outcome.output
    assert outcome.landlock == config.landlock
    return outcome.output.strip().splitlines()[-1]


def test_where_the_kernel_has_landlock_the_sandbox_uses_it():
    """The tests below skip where the probe finds no layer: a layer that failed here
    would skip them all, with the machine as the excuse."""
    if not KERNEL_ABI:
        pytest.skip(KERNEL_WHY)
    assert FOUND.version == KERNEL_ABI, FOUND.note
    assert FOUND.note == landlock.describe(KERNEL_ABI)


OOM_SCORE_ADJ = ("path = f'/proc/{os.getppid()}/oom_score_adj'\n"
                 "value = open(path).read()\n"  # written back as it was: harmless
                 "def write():\n"
                 "    with open(path, 'w') as handle:\n        handle.write(value)\n"
                 "print(attempt(write))\n")


@WITH_LANDLOCK
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_cannot_write_its_parents_oom_score_adj(monkeypatch, isolation):
    """Raised to 1000, the kernel kills the benchmark first when memory runs out: a file,
    which no filter of system calls sees."""
    assert attempted(monkeypatch, isolation, LAYER_ONLY, OOM_SCORE_ADJ) == "refused"


@WITH_LANDLOCK
def test_without_the_layer_it_wrote_the_parents_oom_score_adj(monkeypatch):
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, OOM_SCORE_ADJ) == "done"


PARENTS_MEMORY = ("memory = f'/proc/{os.getppid()}/mem'\n"
                  "print(attempt(lambda: os.close(os.open(memory, os.O_RDWR))))\n")


@WITH_LANDLOCK
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_cannot_open_its_parents_memory(monkeypatch, isolation):
    """Written, /proc/PID/mem ran code in the benchmark's process, behind no filter (a
    file, not the ptrace the filter refuses): the layer refuses the open, and Landlock
    refuses any process outside the domain to one inside it."""
    assert attempted(monkeypatch, isolation, LAYER_ONLY, PARENTS_MEMORY) == "refused"


@WITH_LANDLOCK
def test_without_the_layer_it_opened_its_parents_memory(monkeypatch):
    if os.geteuid() != 0 and _yama_scope() != 0:
        pytest.skip("Yama keeps a process out of its parent's memory here")
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, PARENTS_MEMORY) == "done"


def _yama_scope() -> int:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", encoding="ascii") as handle:
            return int(handle.read())
    except OSError:
        return 0


def outside(path) -> str:
    """A program that tries to write `path`, a file of its user's outside its directory."""
    return (f"def write():\n    with open({str(path)!r}, 'w') as handle:\n"
            f"        handle.write('written')\nprint(attempt(write))\n")


@WITH_LANDLOCK
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_cannot_write_a_file_outside_its_directory(monkeypatch, isolation, tmp_path):
    """Below the namespaces the user's files were the program's to write, the hook
    got around; in them the file is out of sight (ENOENT) or read-only."""
    victim = tmp_path / "victim"
    victim.write_text("kept")
    assert attempted(monkeypatch, isolation, LAYER_ONLY, outside(victim)) in (
        "refused", "ENOENT")
    assert victim.read_text() == "kept"


@WITH_LANDLOCK
def test_without_the_layer_it_wrote_outside(monkeypatch, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("kept")
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, outside(victim)) == "done"
    assert victim.read_text() == "written"


# /dev/kmsg's numbers: the kernel's log, read through a node made in the directory
DEVICE_NODE = ("import stat\n"
               "print(attempt(lambda: os.mknod('kmsg', stat.S_IFCHR | 0o600, "
               "os.makedev(1, 11))))\n")
AS_ROOT = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                             reason="only root may make device nodes")


@WITH_LANDLOCK
@AS_ROOT
def test_a_program_run_as_root_cannot_make_a_device_node_in_its_directory(monkeypatch):
    """At 'none' a level chosen by the test runs as root, as the fallback does where
    nobody cannot reach the interpreter; the layer gave the directory every right."""
    assert attempted(monkeypatch, sandbox.NONE, LAYER_ONLY, DEVICE_NODE) == "refused"


@WITH_LANDLOCK
@AS_ROOT
def test_without_the_layer_root_made_a_device_node(monkeypatch):
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, DEVICE_NODE) == "done"


SIGNAL_PARENT = "print(attempt(lambda: os.kill(os.getppid(), 0)))\n"  # signal 0: none sent


@WITH_SCOPES
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_cannot_signal_its_parent_even_without_the_seccomp_filter(
        monkeypatch, isolation):
    assert attempted(monkeypatch, isolation, LAYER_ONLY, SIGNAL_PARENT) == "refused"


@WITH_SCOPES
def test_without_the_layer_or_the_filter_it_signalled_its_parent(monkeypatch):
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, SIGNAL_PARENT) == "done"


FORKED_CHILD = ("import signal\n"
                "pid = os.fork()\n"
                "if pid == 0:\n"
                "    signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
                "    raised = attempt(lambda: signal.raise_signal(signal.SIGUSR1))\n"
                "    program = attempt(lambda: os.kill(os.getppid(), 0))\n"
                "    print(raised, program, flush=True)\n"
                "    os._exit(0)\n"
                "os.waitpid(pid, 0)\n")


@WITH_SCOPES
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_forked_child_signals_itself_and_the_program_within_the_layer(
        monkeypatch, isolation):
    """The signal scope is the domain, not a pid: a child the program forks is inside
    it (the seccomp filter's pid rule, on by default, still refuses its raise())."""
    assert attempted(monkeypatch, isolation, LAYER_ONLY, FORKED_CHILD) == "done done"


@pytest.fixture
def abstract_listener():
    """An abstract Unix socket of the test's, outside every program's domain."""
    name = f"\0dlm-lsp-landlock-test-{os.getpid()}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(1)
    yield name
    server.close()


def connect_abstract(name: str) -> str:
    return ("import _socket\n"
            "def connect():\n"
            "    client = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)\n"
            f"    client.connect({name!r})\n"
            "print(attempt(connect))\n")


@WITH_SCOPES
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_cannot_reach_an_abstract_unix_socket_made_outside(
        monkeypatch, isolation, abstract_listener):
    """Below the network namespace, the user's D-Bus or X11 listen on such sockets; in
    it, the host's are out of sight (ECONNREFUSED)."""
    assert attempted(monkeypatch, isolation, LAYER_ONLY, connect_abstract(abstract_listener)
                     ) in ("refused", "ECONNREFUSED")


@WITH_SCOPES
def test_without_the_layer_it_reached_the_abstract_socket(monkeypatch, abstract_listener):
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, connect_abstract(abstract_listener)
                     ) == "done"


@pytest.fixture
def tcp_listener():
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


def connect_tcp(port: int) -> str:
    return ("import _socket\n"
            "def connect():\n"
            "    client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
            f"    client.connect(('127.0.0.1', {port}))\n"
            "print(attempt(connect))\n")


@pytest.mark.skipif(FOUND.version < landlock.NET_ABI, reason="no Landlock TCP rules here")
def test_without_the_seccomp_filter_tcp_connect_is_refused_by_the_layer(
        monkeypatch, tcp_listener):
    """At 'none' no network namespace hides the host's loopback."""
    assert attempted(monkeypatch, sandbox.NONE, LAYER_ONLY, connect_tcp(tcp_listener)
                     ) == "refused"
    assert attempted(monkeypatch, sandbox.NONE, NEITHER, connect_tcp(tcp_listener)) == "done"


# What a benchmark program does with files and threads: each step raises where refused.
LEGITIMATE = ("import importlib, os, tempfile, threading, time, hashlib\n"
              f"for name in {sandbox.PROBE_MODULES!r}:\n"
              "    importlib.import_module(name)\n"
              "hashlib.md5(b'', usedforsecurity=False).hexdigest()\n"
              "with tempfile.NamedTemporaryFile('w', delete=False) as handle:\n"
              "    handle.write('x')\n"
              "os.makedirs('a/b')\n"
              "os.rename(handle.name, 'a/b/moved')\n"
              "os.truncate('a/b/moved', 0)\n"
              "os.symlink('moved', 'a/b/link')\n"
              "os.remove('a/b/link'); os.remove('a/b/moved'); os.removedirs('a/b')\n"
              "with tempfile.TemporaryDirectory() as scratch:\n"
              "    open(os.path.join(scratch, 'f'), 'w').write('y')\n"
              "open(os.devnull, 'w').write('z')\n"
              "assert len(os.urandom(8)) == 8 and time.localtime()\n"
              "seen = []\n"
              "threads = [threading.Thread(target=seen.append, args=(i,)) for i in range(4)]\n"
              "for t in threads: t.start()\n"
              "for t in threads: t.join()\n"
              "assert sorted(seen) == [0, 1, 2, 3]\n")


@WITH_LANDLOCK
@pytest.mark.parametrize("isolation", LEVELS)
def test_legitimate_programs_still_work_behind_the_layer(monkeypatch, isolation):
    """Imports, temporary files in its directory, links, renames, /dev/null, threads:
    with the hook and the filter on, as the benchmarks run them."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    outcome = run_program(LEGITIMATE, SandboxConfig(timeout_s=20.0))
    assert outcome.passed and outcome.landlock, outcome.detail + outcome.output


@WITH_LANDLOCK
@pytest.mark.parametrize("isolation", LEVELS)
def test_a_program_past_the_hook_still_forks_and_runs_python(monkeypatch, isolation):
    """The hook refuses processes; past it, the system's programs still run (what a
    program could do before), only not from its directory."""
    program = ("import os, sys\n"
               "pid = os.fork()\n"
               "if pid == 0:\n"
               "    os.execv(sys.executable, [sys.executable, '-c', 'import math'])\n"
               "assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0\n")
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    outcome = run_program(program, SandboxConfig(timeout_s=20.0, hook=False))
    assert outcome.passed and outcome.landlock, outcome.detail + outcome.output


@pytest.fixture
def fresh_probe():
    sandbox.probe_landlock.cache_clear()
    yield
    sandbox.probe_landlock.cache_clear()


def test_with_no_landlock_in_the_kernel_programs_run_without_and_the_report_says_why(
        monkeypatch, fresh_probe):
    monkeypatch.setattr(landlock, "abi", lambda: (0, "the kernel has no Landlock (why)"))
    outcome = run_program("assert True\n", SandboxConfig(timeout_s=10.0))
    assert outcome.passed and not outcome.landlock
    used, note = sandbox.isolation_used(SandboxConfig())[6:]
    assert (used, note) == (False, "the kernel has no Landlock (why)")
    assert sandbox.isolation_text(sandbox.NONE, "", False, "", False, "", used, note) == (
        "sandbox isolation: none (the audit hook and the limits only); no Landlock layer "
        "(the kernel has no Landlock (why))")


@WITH_LANDLOCK
def test_a_layer_the_kernel_will_not_make_leaves_programs_running_without_it(
        monkeypatch, fresh_probe, capsys):
    """A ruleset the kernel refuses (a right it does not know): the probe says why once,
    and programs run as they did before."""
    monkeypatch.setattr(landlock, "handled", lambda version: (1 << 60, 0, 0))
    found = sandbox.probe_landlock()
    assert not found.version
    assert "could not install its Landlock layer" in found.note and "Invalid argument" in (
        found.note)
    assert "sandbox: no Landlock layer (it did not work here: sandbox:" in (
        capsys.readouterr().err)
    outcome = run_program("assert True\n", SandboxConfig(timeout_s=10.0))
    assert outcome.passed and not outcome.landlock


def test_the_report_says_what_the_layer_holds_or_that_it_was_off():
    assert sandbox.isolation_text(sandbox.NAMESPACES, "", False, "", True, "x86_64: ...",
                                  True, "Landlock ABI 7: ...").endswith(
        "; each behind a seccomp filter (x86_64: ...); each behind a Landlock layer "
        "(Landlock ABI 7: ...)")
    assert sandbox.landlock_note(False, SandboxConfig(landlock=False)) == (
        "turned off (SandboxConfig(landlock=False))")


@pytest.mark.parametrize(("version", "fs", "net", "scoped"), [
    (1, (1 << 13) - 1, 0, 0), (2, (1 << 14) - 1, 0, 0), (3, (1 << 15) - 1, 0, 0),
    (4, (1 << 15) - 1, 3, 0), (5, (1 << 16) - 1, 3, 0), (6, (1 << 16) - 1, 3, 3),
    (7, (1 << 16) - 1, 3, 3)])
def test_each_abi_handles_the_rights_it_knows(version, fs, net, scoped):
    """A right the kernel does not know makes it refuse the whole ruleset (EINVAL)."""
    assert landlock.handled(version) == (fs, net, scoped)


def test_a_policy_asks_only_for_rights_its_abi_handles():
    wanted = json.loads(landlock.policy(1))
    assert (wanted["work"], wanted["devices"]["null"]) == (
        (1 << 13) - 1 - landlock.MAKE_CHAR - landlock.MAKE_BLOCK,
        landlock.READ_FILE | landlock.WRITE_FILE)


def test_the_note_names_what_an_older_kernel_lacks():
    assert landlock.describe(3).endswith(
        "; not TCP rules (ABI 4) nor signal and abstract socket scopes (ABI 6)")
    assert landlock.describe(5).endswith(
        ", no TCP bind or connect; not signal and abstract socket scopes (ABI 6)")


def test_the_programs_directory_and_three_devices_are_the_only_places_written():
    rules = sandbox_child.landlock_rules(json.loads(landlock.policy(7)), "/work")
    writable = {path for path, rights in rules
                if rights & ~(landlock.READ | landlock.IOCTL_DEV)}
    assert writable == {"/work", "/dev/null", "/dev/zero", "/dev/full"}
    assert ("/proc", landlock.READ_FILE | landlock.READ_DIR) in rules
