"""The sandbox that runs model-written programs: what passes, and what is stopped."""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from dlm_lsp.bench import cgroup, humaneval, sandbox
from dlm_lsp.bench.sandbox import SandboxConfig, run_program, run_programs

QUICK = SandboxConfig(timeout_s=1.0)


def test_a_program_that_runs_to_the_end_passes():
    outcome = run_program("def f():\n    return 1\n\nassert f() == 1\n", QUICK)
    assert outcome.passed and outcome.reason == "passed"


def test_a_failed_assertion_fails_and_names_the_line():
    outcome = run_program("x = 1\nassert x == 2, 'x is not 2'\n", QUICK)
    assert not outcome.passed and outcome.reason == "failed"
    assert "x is not 2" in outcome.detail and "line 2" in outcome.detail


def test_an_exception_or_a_syntax_error_is_an_error():
    assert run_program("1 / 0\n", QUICK).reason == "error"
    broken = run_program("def f(:\n", QUICK)
    assert broken.reason == "error" and "SyntaxError" in broken.detail


@pytest.mark.parametrize("exit_call", ["import sys\nsys.exit(0)", "import os\nos._exit(0)"])
def test_a_program_that_exits_early_with_success_does_not_pass(exit_call):
    outcome = run_program(f"{exit_call}\nassert False\n", QUICK)
    assert not outcome.passed and outcome.reason == "error"


def test_an_infinite_loop_is_killed_at_the_timeout():
    began = time.perf_counter()
    outcome = run_program("while True:\n    pass\n", SandboxConfig(timeout_s=0.5))
    assert outcome.reason == "timeout" and not outcome.passed
    assert time.perf_counter() - began < 3


def test_a_memory_bomb_is_stopped_by_the_memory_limit():
    bomb = "chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))\n"
    outcome = run_program(bomb, SandboxConfig(timeout_s=5.0, memory_bytes=256 << 20))
    assert outcome.reason == "error" and "MemoryError" in outcome.detail


def test_opening_a_socket_is_blocked_even_if_the_program_catches_the_refusal():
    program = "import socket\ntry:\n    socket.socket()\nexcept BaseException:\n    pass\n"
    outcome = run_program(program, QUICK)
    assert outcome.reason == "blocked" and "socket" in outcome.detail


@pytest.mark.parametrize("spawn", [
    "import subprocess\nsubprocess.run(['true'])",
    "import os\nos.system('true')",
    "import os\nos.fork()",
    "import os\nos.execv('/bin/true', ['true'])",
    "import ctypes",  # ctypes could call fork() past the other checks
])
def test_starting_a_process_is_blocked(spawn):
    outcome = run_program(spawn + "\n", QUICK)
    assert outcome.reason == "blocked", outcome.detail


@pytest.mark.parametrize("write", [
    "open({path!r}, 'w').write('x')",
    "import os\nos.close(os.open({path!r}, os.O_WRONLY | os.O_CREAT))",
    "import os\nopen('here', 'w').close()\nos.rename('here', {path!r})",
    "import os\nos.symlink({path!r}, 'link')\nopen('link', 'w').write('x')",
])
def test_writing_outside_the_working_directory_is_blocked(tmp_path, write):
    target = tmp_path / "escaped.txt"
    outcome = run_program(write.format(path=str(target)) + "\n", QUICK)
    assert outcome.reason == "blocked" and not target.exists()


def test_deleting_outside_the_working_directory_is_blocked(tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("keep")
    outcome = run_program(f"import os\nos.remove({str(victim)!r})\n", QUICK)
    assert outcome.reason == "blocked" and victim.exists()


def test_files_inside_the_working_directory_are_allowed_and_deleted_afterwards():
    program = ("import os, shutil, tempfile\nos.makedirs('a/b')\nopen('a/b/c', 'w').write('x')\n"
               "shutil.rmtree('a')\nwith tempfile.TemporaryDirectory() as d:\n"
               "    open(os.path.join(d, 'x'), 'w').write('y')\nprint(os.getcwd())\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail
    workdir = outcome.output.strip()
    assert workdir and not os.path.exists(workdir)


def test_the_environment_is_minimal_and_stdin_is_closed(monkeypatch):
    monkeypatch.setenv("DLM_SECRET_FOR_TEST", "1")
    program = ("import os, sys\nassert 'DLM_SECRET_FOR_TEST' not in os.environ\n"
               "assert sorted(os.environ) == ['HOME', 'LANG', 'PATH', 'TMPDIR'], list(os.environ)\n"
               "assert sys.stdin.read() == ''\nassert sys.flags.isolated\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail


def test_output_is_captured_and_capped():
    outcome = run_program("print('hello')\nprint('x' * 10000)\n",
                          SandboxConfig(timeout_s=1.0, output_chars=100))
    assert outcome.passed and outcome.output.startswith("hello\n") and len(outcome.output) == 100


def test_endless_output_is_stopped_by_the_file_size_limit():
    outcome = run_program("while True:\n    print('x' * 1000)\n",
                          SandboxConfig(timeout_s=5.0, file_bytes=1 << 20))
    assert outcome.reason == "error" and "File too large" in outcome.detail


@pytest.mark.skipif(not sandbox.network_namespace_available(),
                    reason="unprivileged network namespaces are not allowed here")
def test_the_network_namespace_has_only_a_loopback_device():
    program = ("names = [line.split(':')[0].strip() for line in open('/proc/net/dev')][2:]\n"
               "assert names == ['lo'], names\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed and outcome.network_isolated, outcome.detail


def test_requiring_a_network_namespace_where_none_works_is_an_error(monkeypatch):
    monkeypatch.setattr(sandbox, "isolation_available", lambda: sandbox.NONE)
    with pytest.raises(sandbox.IsolationRefused, match="'network' is required"):
        run_program("pass\n", SandboxConfig(required=sandbox.NETWORK))
    assert not run_program("pass\n", QUICK).network_isolated  # otherwise it runs without


def test_required_is_the_one_way_to_ask_for_isolation():
    """`network_namespace=True` said what `required='network'` says (two fields for one
    wish, which could disagree); it is gone, and a caller still passing it is told so."""
    with pytest.raises(TypeError, match="network_namespace"):
        SandboxConfig(network_namespace=True)  # type: ignore[call-arg]


def test_a_required_level_the_sandbox_does_not_know_is_refused_at_once():
    """A misspelt level failed only as the first program was to run, in tuple.index."""
    with pytest.raises(ValueError, match="'none', 'network', 'namespaces', got 'namespace'"):
        SandboxConfig(required="namespace")


@pytest.fixture
def unwarned(monkeypatch):
    """No isolation here (no `unshare`), probed afresh, and its warning not yet said in
    this process."""
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    monkeypatch.setattr(sandbox, "probe_isolation", sandbox.probe_isolation.__wrapped__)
    monkeypatch.setattr(sandbox, "_WARNED", sandbox._Once())


def test_a_library_caller_is_warned_in_its_own_terms_once(unwarned, capsys):
    """The warning named the command line's --require-isolation to a caller of
    `run_program`, who has no such flag."""
    run_program("pass\n", QUICK)
    run_programs(["pass\n", "pass\n"], QUICK)
    said = capsys.readouterr().err
    assert said.count("WARNING") == 1
    assert sandbox.isolation_warning(sandbox.NONE, "SandboxConfig(required='namespaces')") \
        in said
    assert "--require-isolation" not in said


def test_a_benchmark_command_is_warned_with_its_flag_before_any_program_runs(unwarned,
                                                                             capsys):
    config = sandbox.checked_config(1.0, 1, require_isolation=False)
    said = capsys.readouterr().err
    assert sandbox.isolation_warning(sandbox.NONE, "--require-isolation") in said
    run_program("pass\n", config)
    assert "WARNING" not in capsys.readouterr().err  # said once, in the command's terms


def test_run_programs_finds_the_isolation_once_before_its_workers_start(monkeypatch):
    """Each worker looked it up as its program started: the first workers, at once, each
    ran the probe (its cache is filled only when a probe ends) and printed its lines."""
    looked = []

    def probe():
        looked.append(threading.current_thread().name)
        return sandbox.Isolation(sandbox.NONE, "the reason")
    monkeypatch.setattr(sandbox, "probe_isolation", probe)
    monkeypatch.setattr(sandbox, "_WARNED", sandbox._Once())
    outcomes = run_programs(["pass\n"] * 4, SandboxConfig(timeout_s=5.0, workers=2))
    assert all(outcome.passed for outcome in outcomes)
    assert looked and set(looked) == {threading.current_thread().name}  # no worker's


def test_a_namespace_the_kernel_refuses_is_the_sandboxs_failure_not_the_programs(
        monkeypatch, tmp_path):
    """`unshare` exits 1 when the user namespaces are used up (max_user_namespaces): every
    program was an "error", a fail of the model's in pass@1 with no word of the harness."""
    refusing = tmp_path / "unshare"
    refusing.write_text("#!/bin/sh\necho 'unshare: unshare failed: No space left on device' "
                        ">&2\nexit 1\n")
    refusing.chmod(0o755)
    monkeypatch.setattr(sandbox, "isolation_available", lambda: sandbox.NETWORK)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(refusing))
    outcome = run_program("pass\n", QUICK)
    assert outcome.reason == "sandbox" and "No space left on device" in outcome.detail
    monkeypatch.setattr(sandbox, "isolation_available", lambda: sandbox.NONE)
    assert run_program("import os\nos._exit(1)\n", QUICK).reason == "error"  # the program's


# Every pipe the program holds: read it empty first through /proc (DRAIN), then write a
# forged "sandbox" verdict on it (neither is an event the audit hook sees).
FORGED_SANDBOX = (
    "import os\n"
    "line = b'{\"reason\": \"sandbox\", \"detail\": \"sandbox isolation failed: forged\"}\\n'\n"
    "for fd in map(int, os.listdir('/proc/self/fd')):\n"
    "    try:\n"
    "        if os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:'):\n"
    "            DRAIN\n"
    "            os.write(fd, line)\n"
    "    except OSError:\n"
    "        pass\n"
    "os._exit(2)\n")
DRAIN = "os.read(os.open(f'/proc/self/fd/{fd}', os.O_RDONLY | os.O_NONBLOCK), 65536)"


@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
@pytest.mark.parametrize("drain", [False, True])
@pytest.mark.parametrize("hook", [True, False])
def test_a_program_cannot_report_a_sandbox_failure_of_its_own(monkeypatch, isolation,
                                                              drain, hook):
    """A "sandbox" verdict is counted apart from pass@1 and fails the run as the machine's
    fault: a program that wrote one on the outcome pipe it holds (its number is in its
    arguments), after taking the start's line out of that pipe or not, was believed."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    program = FORGED_SANDBOX.replace("DRAIN", DRAIN if drain else "pass")
    outcome = run_program(program, SandboxConfig(timeout_s=5.0, hook=hook))
    assert outcome.reason == "error" and not outcome.passed, outcome
    assert "forged" not in outcome.detail


def test_where_the_kernel_allows_the_namespaces_the_sandbox_uses_them():
    """The namespace tests below skip where the sandbox's probe finds no namespaces: a
    sandbox that failed to set them up (the interpreter's directories out of sight, say)
    would skip them all, with this machine's kernel as the excuse."""
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run(
            [unshare, *sandbox.UNSHARE_ARGS[sandbox.NAMESPACES], "true"],
            capture_output=True, check=False).returncode != 0:
        pytest.skip("user, PID and mount namespaces are not allowed here")
    assert sandbox.isolation_available() == sandbox.NAMESPACES


@pytest.mark.skipif(not sandbox.network_namespace_available(),
                    reason="unprivileged network namespaces are not allowed here")
def test_where_the_namespaces_are_refused_programs_run_in_the_network_namespace_alone(
        monkeypatch, tmp_path):
    """The fallback: an `unshare` that refuses a PID namespace (as a kernel that allows
    only network namespaces does) leaves the network namespace, and the outcome says so."""
    real = shutil.which("unshare")
    refusing = tmp_path / "unshare"
    refusing.write_text(f'#!/bin/sh\ncase " $* " in *" --pid "*) exit 1;; esac\n'
                        f'exec {real} "$@"\n')
    refusing.chmod(0o755)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(refusing))
    probe = sandbox.probe_isolation.__wrapped__  # probed afresh, the cache left alone
    monkeypatch.setattr(sandbox, "probe_isolation", probe)
    assert probe().level == sandbox.NETWORK
    outcome = run_program("assert open('/proc/net/dev').read().count(':') == 1\n", QUICK)
    assert outcome.passed and outcome.isolation == sandbox.NETWORK, outcome.detail


def test_no_unshare_command_falls_back_to_no_isolation_and_says_so_loudly(
        monkeypatch, capsys):
    """A machine without `unshare` ran model-written code with the limits alone, and
    neither stderr nor the report said a word of it."""
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    monkeypatch.setattr(sandbox, "_WARNED", sandbox._Once())
    found = sandbox.probe_isolation.__wrapped__()  # probed afresh, the cache left alone
    monkeypatch.setattr(sandbox, "probe_isolation", lambda: found)
    run_program("pass\n", QUICK)  # the warning comes as programs are to run
    assert found.level == sandbox.NONE
    assert "no `unshare` command" in found.fallback
    said = capsys.readouterr().err
    assert "no `unshare` command" in said and "falling back to 'none'" in said
    assert sandbox.isolation_warning(sandbox.NONE) in said


@pytest.mark.skipif(not sandbox.network_namespace_available(),
                    reason="unprivileged network namespaces are not allowed here")
def test_a_machine_with_no_known_pivot_root_number_leaves_the_namespaces_out_and_says_why(
        monkeypatch, capsys):
    """Such a machine fell back to the network namespace alone with only a child's
    `[Errno 0]` on stderr; the probe now names the machine, and the report keeps it."""
    monkeypatch.setattr(sandbox, "pivot_root_number", lambda: None)
    monkeypatch.setattr(sandbox, "interpreter_abi", lambda: ("mips64", 64))
    monkeypatch.setattr(sandbox, "_WARNED", sandbox._Once())
    found = sandbox.probe_isolation.__wrapped__()
    monkeypatch.setattr(sandbox, "probe_isolation", lambda: found)
    run_program("pass\n", QUICK)  # the warning comes as programs are to run
    assert found.level == sandbox.NETWORK
    assert found.fallback.startswith("'namespaces': no pivot_root system call number known "
                                     "for mips64 (64-bit Python)")  # as root, more follows
    said = capsys.readouterr().err
    assert "mips64" in said and "falling back to 'network'" in said
    assert sandbox.isolation_warning(sandbox.NONE) not in said  # no network, still,
    assert sandbox.isolation_warning(sandbox.NETWORK) in said  # but the user's files in view


@pytest.mark.parametrize(("abi", "number"), [
    (("x86_64", 64), 155), (("aarch64", 64), 41), (("riscv64", 64), 41),
    (("ppc64le", 64), 203), (("s390x", 64), 217), (("i686", 32), 217),
    (("x86_64", 32), None),  # i386's or x32's ABI on a 64-bit kernel: the name cannot tell
    (("mips64", 64), None),
])
def test_pivot_roots_number_follows_the_interpreters_abi_not_the_kernels_name_alone(
        monkeypatch, abi, number):
    from dlm_lsp.bench import sandbox_child

    monkeypatch.setattr(sandbox_child, "interpreter_abi", lambda: abi)
    assert sandbox_child.pivot_root_number() == number


def test_required_isolation_where_only_a_weaker_level_works_runs_no_program(monkeypatch):
    """The fallback is refused, not taken: `--require-isolation` of the benchmarks."""
    monkeypatch.setattr(sandbox, "probe_isolation",
                        lambda: sandbox.Isolation(sandbox.NETWORK, "'namespaces': the reason"))
    with pytest.raises(sandbox.IsolationRefused, match="'namespaces': the reason"):
        run_program("pass\n", SandboxConfig(timeout_s=1.0, required=sandbox.NAMESPACES))
    with pytest.raises(sandbox.IsolationRefused, match="'namespaces' is required"):
        sandbox.checked_config(1.0, 1, require_isolation=True)
    assert sandbox.checked_config(1.0, 1, require_isolation=False).required == sandbox.NONE


def test_the_isolation_probe_imports_every_module_the_benchmarks_programs_import():
    """The probe passed on `assert True`, which needs no module the interpreter had not
    loaded before the namespaces' root hid the rest (below)."""
    imported = set()
    for split in humaneval.SPLITS:
        programs = {t.task_id.split("/")[2]: t.prefix + t.middle + t.suffix + t.test
                    for t in humaneval.load_tasks(split)}  # one whole program per problem
        for program in programs.values():
            for node in ast.walk(ast.parse(program)):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom):
                    imported.add((node.module or "").split(".")[0])
    assert imported and imported <= set(sandbox.PROBE_MODULES), imported


def test_a_harness_that_cannot_start_the_program_says_the_sandbox_failed(monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(sandbox.tempfile, "mkdtemp", full)
    outcome = run_program("pass\n", QUICK)
    assert outcome.reason == "sandbox" and outcome.detail.startswith("the sandbox failed")


def test_programs_run_side_by_side_and_outcomes_keep_their_order():
    """Each program sleeps 2 s: one after the other would take over 4 s.  (The margin is
    for starting the sandboxes on a loaded 2-core machine: 0.6 s programs under 1.15 s
    failed there at 1.21 s.)"""
    programs = ["import time\ntime.sleep(2.0)\nassert True\n",
                "import time\ntime.sleep(2.0)\nassert False\n"]
    began = time.perf_counter()
    outcomes = run_programs(programs, SandboxConfig(timeout_s=10.0, workers=2))
    assert [o.reason for o in outcomes] == ["passed", "failed"]
    assert time.perf_counter() - began < 3.6


# -- what the kernel enforces: it holds when a program gets around the audit hook ----------

NAMESPACES = pytest.mark.skipif(sandbox.isolation_available() != sandbox.NAMESPACES,
                                reason="user, PID and mount namespaces are not allowed here")
KERNEL_ONLY = SandboxConfig(timeout_s=5.0, hook=False)  # the hook off: the kernel's part alone
# the Landlock layer off too (tests/test_sandbox_landlock.py): what the mounts and ids do
NO_LANDLOCK = SandboxConfig(timeout_s=5.0, hook=False, landlock=False)


def _processes_running(argument: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if argument in command.split():
            found.append(f"{pid}: {command}")
    return found


@NAMESPACES
def test_a_process_that_leaves_the_group_does_not_outlive_the_run():
    """A session of its own escapes the process-group kill; the PID namespace dies whole."""
    argument = str(900000 + secrets.randbelow(99999))
    program = ("import subprocess\n"
               f"subprocess.Popen(['sleep', '{argument}'], start_new_session=True)\n")
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed and outcome.isolation == sandbox.NAMESPACES, outcome.detail
    deadline = time.monotonic() + 2
    while _processes_running(argument) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_running(argument) == []


@NAMESPACES
def test_the_program_sees_only_its_own_processes():
    """Its own, and the namespace's first process, which waits for it (below)."""
    program = ("import os\npids = sorted(p for p in os.listdir('/proc') if p.isdigit())\n"
               "assert os.getpid() == 2 and pids == ['1', '2'], pids\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail


@NAMESPACES
def test_the_program_cannot_open_the_descriptors_of_the_process_that_waits_for_it():
    """That process holds the outcome's pipe and, for a moment after the fork, the start's:
    through /proc/1/fd the program opened them (and its captured output) as its own."""
    program = ("import os\nopened = []\ntry:\n    names = os.listdir('/proc/1/fd')\n"
               "except PermissionError:\n    names = []  # root's, as the program is not\n"
               "for name in names:\n"
               "    try:\n        os.open(f'/proc/1/fd/{name}', os.O_RDONLY | os.O_NONBLOCK)\n"
               "        opened.append(name)\n    except PermissionError:\n        pass\n"
               "assert not opened, opened\n")
    outcome = run_program(program, SandboxConfig(timeout_s=5.0, hook=False))
    assert outcome.passed, outcome.detail


@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_a_signal_the_program_sends_itself_ends_it_in_every_isolation(monkeypatch, isolation):
    """Run as the first process of its PID namespace, the program was spared every signal
    it had no handler for (the kernel's rule for a namespace's init): its own alarm or
    raise_signal(SIGTERM) let it run on and pass, where without the namespaces it was
    killed, an error."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    program = "import signal\nsignal.raise_signal(signal.SIGTERM)\n"
    outcome = run_program(program, QUICK)
    assert (outcome.reason, outcome.detail) == ("error", "killed by SIGTERM")


@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_the_cpu_time_limit_is_a_timeout_in_every_isolation(monkeypatch, isolation):
    """SIGXCPU was ignored by the namespace's init: the program burnt on to the wall clock
    (or, with threads on many cores, to the hard limit's SIGKILL, "an error")."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    program = ("import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
               "resource.setrlimit(resource.RLIMIT_CPU, (1, hard))\nwhile True:\n    pass\n")
    outcome = run_program(program, KERNEL_ONLY)  # the hook refuses setrlimit
    assert (outcome.reason, outcome.detail) == ("timeout", "CPU time limit")


@pytest.fixture
def venv_reading_outside(tmp_path_factory):
    """A virtual environment whose interpreter imports a module from a directory outside
    the namespaces' root (through a `.pth` file, as a module or library of an interpreter
    laid out elsewhere, in a Nix store say, is out of its sight)."""
    path = tmp_path_factory.mktemp("venv-outside")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   capture_output=True)
    outside = tmp_path_factory.mktemp("outside")  # under the temporary directory: hidden
    (outside / "dlm_sandbox_outside.py").write_text("ANSWER = 42\n")
    site = next(path.glob("lib/python*/site-packages"))
    (site / "outside.pth").write_text(f"{outside}\n")
    return path


@NAMESPACES
def test_a_module_the_namespaces_hide_makes_the_probe_fall_back_and_say_why(
        venv_reading_outside, monkeypatch, capsys):
    """Such a machine ran every program in the namespaces, where each failed on import: the
    model's fills were all errors.  Now it runs them in the network namespace alone."""
    monkeypatch.setattr(sandbox.sys, "executable", str(venv_reading_outside / "bin" / "python"))
    monkeypatch.setattr(sandbox, "PROBE_MODULES",
                        (*sandbox.PROBE_MODULES, "dlm_sandbox_outside"))
    probe = sandbox.probe_isolation.__wrapped__  # probed afresh, the cache left alone
    assert probe().level == sandbox.NETWORK
    said = capsys.readouterr().err
    # as root, 'namespaces' as nobody and as root
    assert re.search(r"'namespaces'( as \w+)? fails", said) and "dlm_sandbox_outside" in said, \
        said


@pytest.fixture
def home_dir():
    """A directory in the user's home (the usual place of keys and tokens, outside the
    directories out of sight anyway: /tmp, /run, ...)."""
    path = Path(tempfile.mkdtemp(prefix=".dlm-sandbox-home-", dir=Path.home()))
    try:
        yield path
    finally:
        shutil.rmtree(path)


@NAMESPACES
def test_the_users_home_is_out_of_sight(home_dir):
    """A program read what the user could, keys and tokens in the home included (and a
    failed assertion carried up to 300 characters of them into the report)."""
    secret = home_dir / ".ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text("PRIVATE KEY")
    program = (f"import os\nassert not os.path.exists({str(secret)!r})\n"
               f"assert not os.path.exists({str(home_dir)!r})\n")
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed, outcome.detail


@NAMESPACES
def test_the_interpreter_in_the_home_stays_in_sight():
    """A Python under the home (pyenv, a virtual environment in a project) is bound back:
    a module not imported before the program runs still imports."""
    program = "import decimal, fractions, sqlite3, email.mime.text\n"
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A virtual environment of this interpreter, made here: the sandbox shows a program
    its interpreter's directories, and this user may write these outside it.  Its
    site-packages is a link to a directory elsewhere (as some installations lay them
    out), holding one module."""
    path = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   capture_output=True)
    site = next(path.glob("lib/python*/site-packages"))
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    for made in (path, elsewhere):  # 0700 as made: open to all, as a venv usually is, so
        made.chmod(0o755)  # that root's programs, run as nobody, may read it
    (elsewhere / "dlm_sandbox_probe.py").write_text("ANSWER = 42\n")
    site.rmdir()
    site.symlink_to(elsewhere)
    return path


@pytest.fixture
def in_venv(venv, monkeypatch):
    """Run the sandbox's programs with `venv`'s interpreter; a folder in it to write to."""
    monkeypatch.setattr(sandbox.sys, "executable", str(venv / "bin" / "python"))
    victim = venv / f"victim-{secrets.token_hex(4)}"
    victim.mkdir()
    (victim / "keep").write_text("keep")
    victim.chmod(0o777)  # open to every user: only the mount can refuse
    try:
        yield victim
    finally:
        shutil.rmtree(victim)


@NAMESPACES
def test_a_virtual_environments_interpreter_runs_with_its_packages(venv, in_venv):
    program = (f"import sys, json, sqlite3\nassert sys.prefix == {str(venv)!r}, sys.prefix\n"
               "assert sys.base_prefix != sys.prefix\n"
               "import dlm_sandbox_probe\nassert dlm_sandbox_probe.ANSWER == 42\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail + outcome.output


@NAMESPACES
def test_nothing_outside_the_working_directory_can_be_written(in_venv):
    """Every route the hook does not see (mkfifo, sqlite's own open, fchmod) ends at a
    read-only mount, in the interpreter's own directories (in sight, and the user's to
    write outside) and at the root; the working directory stays writable."""
    program = f"""
import os, sqlite3
assert os.statvfs('/').f_flag & os.ST_RDONLY
assert open(os.path.join({str(in_venv)!r}, 'keep')).read() == 'keep'  # in sight
refused = 0
for target in ({str(in_venv)!r}, '/'):
    attempts = [lambda: open(os.path.join(target, 'a'), 'w'),
                lambda: os.mkfifo(os.path.join(target, 'b')),
                lambda: sqlite3.connect(os.path.join(target, 'c')).execute('create table t (x)'),
                lambda: os.mkdir(os.path.join(target, 'd'))]
    for attempt in attempts:
        try:
            attempt()
        except (OSError, sqlite3.OperationalError):
            refused += 1
try:
    os.fchmod(os.open(os.path.join({str(in_venv)!r}, 'keep'), os.O_RDONLY), 0o777)
except OSError:
    refused += 1
assert refused == 9, refused
open('inside', 'w').write('fine')
"""
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed, outcome.detail + outcome.output
    assert sorted(p.name for p in in_venv.iterdir()) == ["keep"]
    assert (in_venv / "keep").stat().st_mode & 0o777 == 0o644


@NAMESPACES
def test_a_temporary_directory_inside_the_interpreters_prefix_still_works(
        venv, in_venv, monkeypatch):
    """TMPDIR inside a directory the new root binds (here the virtual environment): the
    bind brought the new root's own tmpfs in again at the working directory's path, and
    building the root failed on it ("File exists"), every program the sandbox's failure.
    The working directory is still a small tmpfs of its own, the rest read-only."""
    monkeypatch.setattr(tempfile, "tempdir", str(in_venv))  # where the sandbox makes folders
    program = (f"import os\nassert os.getcwd().startswith({str(in_venv)!r}), os.getcwd()\n"
               "assert os.statvfs('.').f_blocks * os.statvfs('.').f_frsize <= 64 << 20\n"
               "open('inside', 'w').write('fine')\n"
               f"try:\n    open(os.path.join({str(in_venv)!r}, 'a'), 'w')\n"
               "except OSError:\n    pass\nelse:\n    raise SystemExit('wrote beside')\n")
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed and outcome.isolation == sandbox.NAMESPACES, outcome.detail
    assert sorted(p.name for p in in_venv.iterdir()) == ["keep"]


@pytest.fixture
def outside_dir():
    """A fresh directory outside the user's home, /tmp and the sandbox's allow-list: beside
    the checkout where that is none of those, else in /srv or /opt where this user may
    write (the old sandbox hid only the home, /tmp and /run), else in /var/tmp."""
    checkout = Path(__file__).resolve().parents[1]
    # hidden by the old sandbox too, or in sight in this one
    unsuitable = [Path(p).resolve() for p in ("/tmp", Path.home(), "/usr", sys.prefix,
                                              sys.base_prefix)]
    places = [checkout.parent, Path("/srv"), Path("/opt"), Path("/var/tmp")]
    for place in places:
        if any(u == place or u in place.parents for u in unsuitable):
            continue
        try:
            path = Path(tempfile.mkdtemp(prefix=".dlm-sandbox-outside-", dir=place))
        except OSError:
            continue
        break
    else:
        pytest.skip("no directory outside /tmp and the home to write to")
    try:
        yield path
    finally:
        shutil.rmtree(path)


@NAMESPACES
def test_a_file_outside_the_allow_list_cannot_be_read(outside_dir):
    """Only the home, /tmp and /run were hidden: a program read the user's other projects,
    /srv, /work and the rest."""
    secret = outside_dir / "secret.txt"
    secret.write_text("not for the program")
    secret.chmod(0o644)
    program = (f"try:\n    text = open({str(secret)!r}).read()\nexcept OSError:\n    pass\n"
               "else:\n    raise SystemExit('read: ' + text)\n"
               f"import os\nassert not os.path.exists({str(outside_dir)!r})\n")
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed, outcome.detail + outcome.output


@NAMESPACES
def test_etc_holds_only_the_loaders_cache_and_the_local_time_zone():
    """/etc's files readable by the user (and, run as root, /etc/shadow) were in sight."""
    expected = sorted(n for n in ("ld.so.cache", "localtime") if os.path.lexists(f"/etc/{n}"))
    program = (f"import os, time\nassert sorted(os.listdir('/etc')) == {expected!r}, "
               "os.listdir('/etc')\ntime.localtime()\n")
    outcome = run_program(program, NO_LANDLOCK)
    assert outcome.passed, outcome.detail + outcome.output


@NAMESPACES
def test_only_harmless_devices_are_in_reach():
    """As the host's root a program could open the disks' block devices for writing."""
    program = ("import os\nassert sorted(os.listdir('/dev')) == ['fd', 'full', 'null', 'random',"
               " 'stderr', 'stdin', 'stdout', 'urandom', 'zero'], os.listdir('/dev')\n"
               "open('/dev/null', 'w').write('x')\n"
               "assert len(open('/dev/urandom', 'rb').read(4)) == 4\n"
               "assert os.listdir('/dev/fd')\n")
    outcome = run_program(program, NO_LANDLOCK)
    assert outcome.passed, outcome.detail


@NAMESPACES
def test_a_local_socket_on_the_host_cannot_be_reached(tmp_path):
    path = tmp_path / "host.sock"
    with socket.socket(socket.AF_UNIX) as host:
        host.bind(str(path))
        host.listen()
        host.setblocking(False)
        program = ("import socket\nclient = socket.socket(socket.AF_UNIX)\ntry:\n"
                   f"    client.connect({str(path)!r})\nexcept OSError:\n    pass\nelse:\n"
                   "    raise SystemExit('connected')\n")
        outcome = run_program(program, KERNEL_ONLY)
        assert outcome.passed, outcome.detail
        with pytest.raises(BlockingIOError):
            host.accept()


IPC_CREAT, IPC_RMID = 0o1000, 0


def _shmget(key: int, size: int, flags: int) -> int:
    import ctypes
    return ctypes.CDLL(None).shmget(key, size, flags)


@pytest.mark.skipif(not sandbox.network_namespace_available(),
                    reason="no user namespaces here")
@pytest.mark.parametrize("isolation", [sandbox.NETWORK, sandbox.isolation_available()])
def test_system_v_shared_memory_is_the_programs_own_and_gone_with_it(monkeypatch, isolation):
    """System V IPC objects outlive their processes: with the host's IPC namespace, a
    program saw the user's shared memory segments and left its own behind, memory held
    until someone removed them (the hook off, as a program that got around it)."""
    import ctypes
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    host_key, program_key = (0x6C6D0000 + secrets.randbelow(1 << 16) for _ in range(2))
    host = _shmget(host_key, 4096, IPC_CREAT | 0o600)
    assert host >= 0
    program = ("import ctypes\nlibc = ctypes.CDLL(None)\n"
               f"assert libc.shmget({host_key}, 0, 0) == -1, 'the host segment is in sight'\n"
               f"assert libc.shmget({program_key}, 4096, {IPC_CREAT | 0o600}) >= 0\n")
    try:
        outcome = run_program(program, KERNEL_ONLY)
        left = _shmget(program_key, 0, 0)
    finally:
        ctypes.CDLL(None).shmctl(host, IPC_RMID, None)
    if left >= 0:
        ctypes.CDLL(None).shmctl(left, IPC_RMID, None)
    assert outcome.passed, outcome.detail
    assert left == -1, "the program's segment outlived it"


# add_key's and keyctl's system call numbers
ADD_KEY = {("x86_64", 64): 248, ("aarch64", 64): 217}
KEYCTL = {("x86_64", 64): 250, ("aarch64", 64): 219}


@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_the_callers_session_keyring_is_out_of_reach(monkeypatch, isolation):
    """A child possesses the keys of the session keyring it inherits: a program read a
    secret kept there, whatever the namespaces (the hook off, as keyctl has no audit
    event)."""
    import ctypes

    from dlm_lsp.bench import sandbox_child
    abi = sandbox_child.interpreter_abi()
    if abi not in ADD_KEY:
        pytest.skip(f"no add_key or keyctl number known here for {abi}")
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    libc, keyctl = ctypes.CDLL(None, use_errno=True), KEYCTL[abi]
    secret, name = secrets.token_hex(8).encode(), f"dlm-sandbox-{secrets.token_hex(4)}"
    key = libc.syscall(ADD_KEY[abi], b"user", name.encode(), secret, len(secret),
                       ctypes.c_long(-3))  # the session keyring
    if key < 0:
        pytest.skip(f"no keys here (errno {ctypes.get_errno()})")
    program = ("import ctypes\nlibc = ctypes.CDLL(None)\nbuf = ctypes.create_string_buffer(64)\n"
               f"found = libc.syscall({keyctl}, 10, ctypes.c_long(-3), b'user', "
               f"{name.encode()!r}, 0)\nread = libc.syscall({keyctl}, 11, {key}, buf, 64)\n"
               "assert found < 0 and read < 0, (found, read, buf.raw)\n")
    try:
        outcome = run_program(program, KERNEL_ONLY)
    finally:
        libc.syscall(keyctl, 21, key)  # KEYCTL_INVALIDATE
    assert outcome.passed, outcome.detail


@NAMESPACES
def test_the_program_cannot_make_the_file_system_writable_again():
    """The child gave up the namespace's privileges: a remount is refused, and in a mount
    namespace of its own the mounts it inherits are locked (read-only, and /tmp's cover
    cannot be lifted)."""
    program = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
               "def locked():\n"
               "    assert libc.mount(None, b'/', None, 32 | 4096, None) == -1\n"  # remount rw
               "    assert libc.umount2(b'/tmp', 2) == -1\n"  # MNT_DETACH
               "    assert os.statvfs('/').f_flag & os.ST_RDONLY\n"
               "locked()\nlibc.unshare(0x00020000)\nlocked()\n")  # CLONE_NEWNS
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed, outcome.detail


def test_the_token_is_in_neither_the_environment_nor_the_arguments():
    """/proc/PID/environ keeps what a process started with, whatever os.environ says."""
    program = ("import re, sys\nstarted = open('/proc/self/environ', 'rb').read()\n"
               "assert not re.search(rb'[0-9a-f]{32}', started), started\n"
               "assert not any(re.search(r'[0-9a-f]{32}', a) for a in sys.argv), sys.argv\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail


def test_a_directory_tree_too_deep_for_rmtree_is_still_removed():
    program = ("import os\nprint(os.getcwd())\nfor _ in range(1500):\n"
               "    os.mkdir('d')\n    os.chdir('d')\n")
    outcome = run_program(program, SandboxConfig(timeout_s=10.0))
    assert outcome.passed, outcome.detail
    assert not os.path.exists(outcome.output.splitlines()[0])


def test_replacing_assertion_error_still_fails_the_tests():
    program = "import builtins\nclass Other(Exception):\n    pass\n" \
              "builtins.AssertionError = Other\nassert False\n"
    assert run_program(program, QUICK).reason == "failed"


@pytest.mark.parametrize("bypass", [
    "import multiprocessing\nmultiprocessing.get_context('spawn').Process(target=print).start()",
    "import _posixsubprocess",
    "import sys\nsys._getframe(1).f_globals['REFUSED_EVENTS'] = frozenset()\n"
    "sys._getframe(1).f_globals['_refusal'] = lambda *a: None\nimport socket\nsocket.socket()",
    "import os.path\nos.path.realpath = lambda p: os.getcwd()\nopen('/etc/passwd-copy', 'w')",
    # the refusal's tables, emptied in place through its keyword defaults
    "import sys\nkw = sys._getframe(1).f_globals['_refusal'].__kwdefaults__\n"
    "kw['refused'] = frozenset()\nkw['prefixes'] = ('none',)\nimport socket\nsocket.socket()",
    # the table of path events, emptied through the module's globals
    "import os, sys\nsys._getframe(1).f_globals['PATH_EVENTS'].clear()\n"
    "os.mkdir('/no-such-dir/escape')",
    # the exit after a refusal made a no-op: the refused event went ahead
    "import sys\nsys._getframe(1).f_globals['_exit'] = lambda code: None\n"
    "import socket\nsocket.socket()",
    # the hook found among every object, its refusal swapped in its closure
    "import gc\nhook = next(o for o in gc.get_objects() if getattr(o, '__name__', '') == 'hook')\n"
    "hook.__closure__[0].cell_contents = lambda *a: None\nimport socket\nsocket.socket()",
    # a builtin the refusal calls, replaced for the one call
    "import builtins, os\nlength = builtins.len\nbuiltins.len = lambda x: 0\n"
    "try:\n    os.mkdir('/no-such-dir/escape')\nfinally:\n    builtins.len = length",
    "import builtins, sys\nsys._getframe(1).f_globals['WRITE_FLAGS'] = 0\n"
    "builtins.any = lambda x: 0\nopen('/no-such-dir/escape', 'w')",
    # the standard library's path functions, which read their own modules' globals
    "import os\nos.fspath = lambda path: os.getcwd()\nopen('/no-such-dir/escape', 'w')",
    "import os, posixpath\nposixpath.abspath = lambda path: os.getcwd()\n"
    "open('/no-such-dir/escape', 'w')",
    # a refused module's name as a str that hashes and compares as no other
    "class Name(str):\n    __hash__ = lambda self: 1\n    __eq__ = lambda self, other: False\n"
    "__import__(Name('_posixsubprocess'))",
    # a refused module loaded under a dotted name: a package whose path is lib-dynload,
    # and the loader called directly (found by a red-team pass, 2026-12-06)
    "import os, sys, types\nx = types.ModuleType('x')\nx.__path__ = [os.path.dirname("
    "__import__('_json').__file__)]\nsys.modules['x'] = x\nimport x._posixsubprocess",
    "import _imp, glob, os, importlib.util\npath = glob.glob(os.path.dirname("
    "__import__('_json').__file__) + '/_posixsubprocess*')[0]\n_imp.create_dynamic("
    "importlib.util.spec_from_file_location('y._posixsubprocess', path))",
])
def test_the_hook_is_not_switched_off_from_inside(bypass):
    outcome = run_program(bypass + "\n", QUICK)
    assert outcome.reason == "blocked", outcome.detail


def test_replacing_the_captured_output_neither_hangs_nor_crashes_the_sandbox():
    """The parent reads the output through the descriptor the child wrote to: a FIFO or a
    directory put where a file of that name was (its own, or one level up) changes nothing."""
    program = ("import os\nfor name in ('output', '../output'):\n"
               "    for change in (os.remove, os.mkfifo, os.mkdir):\n"
               "        try:\n            change(name)\n        except OSError:\n            pass\n"
               "print('still captured')\n")
    done = []
    thread = threading.Thread(target=lambda: done.append(
        run_program(program, SandboxConfig(timeout_s=2.0, hook=False))), daemon=True)
    thread.start()
    thread.join(30)
    assert done, "the sandbox hung"
    assert done[0].passed and "still captured" in done[0].output, done[0]


def test_the_way_to_the_working_directory_is_closed_to_other_users(monkeypatch):
    """A program may open its own directory to everyone; the one holding it stays 0700, so
    no other user of the machine can run what it leaves there (a set-user-ID copy).  Root's
    programs, which run as nobody, may pass through it (0710, nobody's group), not list it
    or read the output it holds (0600, root's)."""
    seen = []
    real_remove = sandbox._remove

    def remove(outer):
        seen.append((os.stat(outer).st_mode & 0o777, os.stat(outer).st_gid,
                     sorted(os.listdir(outer)), os.stat(Path(outer, "output")).st_mode & 0o777))
        real_remove(outer)
    monkeypatch.setattr(sandbox, "_remove", remove)
    outcome = run_program("import os\nos.chmod('.', 0o777)\n", QUICK)
    assert outcome.passed, outcome.detail
    if sandbox._drops(outcome.isolation):
        assert seen == [(0o710, sandbox.UNPRIVILEGED, ["output", "work"], 0o600)]
    else:
        assert seen == [(0o700, os.getegid(), ["output", "work"], 0o600)]


def test_descriptors_are_limited():
    """Each memfd could hold file_bytes of memory that the address-space limit misses."""
    program = ("held = []\ntry:\n    for _ in range(1000):\n"
               "        held.append(open('/dev/null'))\n"
               "except OSError:\n    pass\nassert len(held) < 64, len(held)\n")
    outcome = run_program(program, QUICK)
    assert outcome.passed, outcome.detail


@NAMESPACES
def test_the_working_directory_is_a_small_file_system_of_its_own():
    """fallocate reserved gigabytes of the host's disk past the file-size limit; set-user-ID
    files, devices and programs run from it mean nothing there."""
    program = ("import os\nst = os.statvfs('.')\nassert st.f_blocks * st.f_frsize <= 64 << 20\n"
               "assert st.f_flag & os.ST_NOSUID and st.f_flag & os.ST_NODEV\n"
               "fd = os.open('big', os.O_WRONLY | os.O_CREAT)\ntry:\n"
               "    os.posix_fallocate(fd, 0, 1 << 30)\nexcept OSError:\n    pass\nelse:\n"
               "    raise SystemExit('a gigabyte reserved')\n")
    outcome = run_program(program, KERNEL_ONLY)
    assert outcome.passed, outcome.detail


def _our_programs() -> list[int]:
    """Processes of this test process that run a sandboxed program (alive or unreaped)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path("/proc", pid, "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = Path("/proc", pid, "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and b"program.py" in command:
            found.append(int(pid))
    return found


def test_an_interrupted_benchmark_ends_the_programs_under_way_at_once(monkeypatch, tmp_path):
    """Ctrl-C reaches the benchmark, not its programs (each has a session of its own): they
    ran on to their timeout while the interrupted benchmark waited for them, and a SIGTERM
    that killed the benchmark left them running and their folders behind."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the sandbox makes folders
    sleepers = ["import time\ntime.sleep(60)\n"] * 3

    def interrupt_once_running() -> None:
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("dlm-sandbox-*"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # both workers' programs are started
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=interrupt_once_running, daemon=True).start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_programs(sleepers, SandboxConfig(timeout_s=20.0, workers=2))
    assert time.monotonic() - began < 15, "waited for the programs' timeout"
    assert _our_programs() == []
    assert list(tmp_path.glob("dlm-sandbox-*")) == []


@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_a_benchmark_killed_outright_takes_its_programs_with_it(isolation, tmp_path):
    """The timeout is kept by the benchmark's process alone: killed by SIGKILL (or the OOM
    killer), it left its programs running under init with no time limit (one asleep in a
    loop ran a minute past its 30 s), and as root, a namespace's init outlived its
    `unshare` (dropping root's ids cleared its parent-death signal)."""
    argument = str(900000 + secrets.randbelow(99999))
    program = f"import os\nos.execv('/bin/sleep', ['sleep', '{argument}'])\n"
    runner = ("import sys\nfrom dlm_lsp.bench import sandbox\n"
              f"sandbox.isolation_available = lambda: {isolation!r}\n"
              "sandbox.run_program(sys.argv[1], sandbox.SandboxConfig(timeout_s=60, hook=False))\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    benchmark = subprocess.Popen([sys.executable, "-c", runner, program], env=env)
    try:
        deadline = time.monotonic() + 30
        while not _processes_running(argument) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_running(argument), "the program never started"
    finally:
        benchmark.kill()
        benchmark.wait()
    deadline = time.monotonic() + 5
    while _processes_running(argument) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert _processes_running(argument) == []
    finally:  # whatever the outcome, nothing is left running for the next test
        for line in _processes_running(argument):
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
    # and its cgroups, empty now, are the next run's to remove (`cgroup.sweep`)
    left = f"{cgroup.PREFIX}{benchmark.pid}-"
    for name in ("pids", "memory"):
        controller, _ = cgroup.find(name)
        if controller is None:
            continue
        deadline = time.monotonic() + 5
        while (any(n.startswith(left) for n in os.listdir(controller.parent))
               and time.monotonic() < deadline):
            cgroup.sweep(controller)
            time.sleep(0.05)
        assert not any(n.startswith(left) for n in os.listdir(controller.parent)), name


def test_the_folders_a_benchmark_killed_outright_left_are_removed_by_the_next(
        monkeypatch, tmp_path):
    """No `finally` runs on SIGKILL: each program under way left its folder (its source
    and output) in /tmp for good.  Only those whose maker is gone go."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    ours = cgroup.owned_name()
    stale = tmp_path / ours.replace(f"-{os.getpid()}-", f"-{gone.pid}-", 1) / "work"
    stale.mkdir(parents=True)
    (stale / "program.py").write_text("print('left')\n")
    namespace = ours.split("-")[3]
    kept = [tmp_path / f"{ours}live", tmp_path / "dlm-sandbox-notes", tmp_path / "other",
            # any user may name a folder so in /tmp: int() or kill() raised on these
            tmp_path / f"dlm-sandbox-\u00b2-{namespace}-x",
            tmp_path / f"dlm-sandbox-{10 ** 20}-{namespace}-x"]
    for folder in kept:
        folder.mkdir()
    [outcome] = run_programs(["assert 1 + 1 == 2\n"], QUICK)
    assert outcome.passed, outcome.detail
    assert sorted(tmp_path.iterdir()) == sorted(kept)


# Forks children that sleep, up to 200, and says how many it made: the hook is off (it
# refuses os.fork), so only the kernel's process limit stops it.
FORK_BOMB = """
import os, time
made = 0
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(2)
        os._exit(0)
    made += 1
assert 0 < made <= {limit}, made
"""


@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_a_fork_bomb_stops_at_the_process_limit_even_as_root(monkeypatch, isolation):
    """The kernel exempts root from RLIMIT_NPROC: run as root (as CI containers run), a
    program made all of its 200 forks, bounded only by the timeout and the machine's
    process table.  Root's programs now drop to nobody where that works (the probe)."""
    monkeypatch.setattr(sandbox, "isolation_available", lambda: isolation)
    if os.geteuid() == 0 and not sandbox._drops(isolation):
        pytest.skip(f"root's programs run as nobody at {sandbox.isolation_available()!r} "
                    f"only here")
    config = SandboxConfig(timeout_s=10.0, hook=False, extra_processes=16)
    outcome = run_program(FORK_BOMB.format(limit=16), config)
    assert outcome.passed, outcome.detail


@pytest.mark.skipif(sandbox.cgroup.find()[0] is None,
                    reason=f"no pids cgroup can be made here: {sandbox.cgroup.find()[1]}")
@pytest.mark.parametrize("isolation", [sandbox.NONE, sandbox.isolation_available()])
def test_a_fork_bomb_stops_at_pids_max_even_run_as_root(isolation):
    """Run as root without the drop to nobody (the interpreter out of nobody's reach, or a
    user namespace's root mapped to root), a program made all of its 200 forks: the kernel
    exempts root from RLIMIT_NPROC.  The program's pids cgroup binds every user: the
    program and 15 more of `extra_processes=16`."""
    config = SandboxConfig(timeout_s=10.0, hook=False, extra_processes=16)
    outcome = sandbox._run(FORK_BOMB.format(limit=15), config, isolation, drop=False)
    assert outcome.passed and outcome.pids_cgroup, outcome.detail + outcome.output


@pytest.fixture
def everyones_python(monkeypatch):
    """The sandbox run as root with an interpreter every user may run (this one may lie in
    root's home, out of nobody's reach): the system's of this version, where there is one."""
    if os.geteuid() != 0:
        pytest.skip("only root's programs change users")
    python = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not os.access(python, os.X_OK):
        pytest.skip(f"no {python} here")
    monkeypatch.setattr(sandbox.sys, "executable", str(python))


@pytest.fixture
def callers_dir():
    """A directory of the caller's that everyone may read and only root may write."""
    path = Path(tempfile.mkdtemp(prefix="dlm-sandbox-callers-"))
    (path / "keep").write_text("keep")
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.mark.parametrize("kernel", ["no unshare", "no PID namespace"])
def test_root_s_programs_run_as_nobody_and_cannot_write_the_caller_s_files(
        everyones_python, callers_dir, monkeypatch, tmp_path, kernel):
    """Below the namespaces, a program of root's ran as root: the hook off, it wrote
    wherever root could.  Now it runs as nobody: it reads what every user may, writes its
    own directory (its alone, 0700), and nothing of the caller's."""
    if kernel == "no unshare":
        monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
        expected = sandbox.NONE
    else:  # an `unshare` that refuses a PID namespace
        refusing = tmp_path / "unshare"
        refusing.write_text(f'#!/bin/sh\ncase " $* " in *" --pid "*) exit 1;; esac\n'
                            f'exec {shutil.which("unshare")} "$@"\n')
        refusing.chmod(0o755)
        monkeypatch.setattr(sandbox.shutil, "which", lambda name: str(refusing))
        expected = sandbox.NETWORK
    found = sandbox.probe_isolation.__wrapped__()  # probed afresh, the cache left alone
    monkeypatch.setattr(sandbox, "probe_isolation", lambda: found)
    assert (found.level, found.drop) == (expected, True), found
    keep = callers_dir / "keep"
    program = f"""
import os, stat
assert os.getuid() == os.geteuid() == os.getgid() == {sandbox.UNPRIVILEGED}
assert os.getgroups() == []
assert open({str(keep)!r}).read() == 'keep'
for attempt in (lambda: open({str(keep)!r}, 'a'),
                lambda: open({str(callers_dir / 'new')!r}, 'w'),
                lambda: os.remove({str(keep)!r})):
    try:
        attempt()
    except PermissionError:
        continue
    raise AssertionError('wrote the caller s files')
here = os.stat('.')
assert (here.st_uid, stat.S_IMODE(here.st_mode)) == ({sandbox.UNPRIVILEGED}, 0o700)
open('mine', 'w').write('fine')
"""
    outcome = run_program(program, NO_LANDLOCK)
    assert outcome.passed and outcome.isolation == expected, outcome.detail + outcome.output
    assert sorted(p.name for p in callers_dir.iterdir()) == ["keep"]
    assert keep.read_text() == "keep"
