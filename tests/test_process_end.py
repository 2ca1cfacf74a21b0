"""A command's exit, after its output: prompt, and deaf to a late Ctrl-C (`process_end`).

Each test runs the command line as the script does (`main()`, the process's own argv) in
a child process with two atexit hooks: one registered after main returned, so that it
runs first, as torch's or Ray's exit handlers do, sends the signals; one registered
before main, so that it runs last, says how the teardown went on.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

PROBE = ("import atexit, gc, os, signal, sys\n"
         "names = [name for name in sys.argv[1].split(',') if name]\n"
         "def last_words():\n"
         "    ignored = all(signal.getsignal(sig) is signal.SIG_IGN\n"
         "                  for sig in (signal.SIGINT, signal.SIGTERM))\n"
         "    print('teardown went on; collections',\n"
         "          'skip' if gc.get_freeze_count() else 'scan', 'what was left; signals',\n"
         "          'ignored' if ignored else 'handled', file=sys.stderr)\n"
         "atexit.register(last_words)\n"
         "sys.argv = ['dlm-lsp', *sys.argv[2:]]\n"
         "from dlm_lsp.cli import main\n"
         "try:\n"
         "    status = main()\n"
         "except SystemExit as exc:\n"
         "    status = exc.code\n"
         "def at_teardown():\n"
         "    for name in names:\n"
         "        os.kill(os.getpid(), signal.Signals[name])\n"
         "        for _ in range(100000):  # bytecodes: where a handler runs\n"
         "            pass\n"
         "atexit.register(at_teardown)\n"
         "raise SystemExit(status)\n")


def run(signals: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, signals, *argv],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize(("argv", "status"), [(["models"], 0), (["fill"], 2)])
def test_a_signal_after_the_output_leaves_the_commands_status_and_no_traceback(sig, argv,
                                                                              status):
    """Ctrl-C was a KeyboardInterrupt traceback from a finalizer and status 0; SIGTERM
    killed the process with no word (the command's handler already put back)."""
    done = run(sig, *argv)
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr and "KeyboardInterrupt" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("teardown went on;")


def test_a_second_signal_during_teardown_ends_the_process_at_once():
    """For a teardown that hangs (a thread that never ends), Ctrl-C twice still stops it."""
    done = run("SIGINT,SIGINT", "models")
    assert done.returncode == 128 + signal.SIGINT, done.stderr
    assert "teardown went on" not in done.stderr and "Traceback" not in done.stderr


def test_the_collections_at_exit_skip_what_the_command_left():
    """Interpreter shutdown's full collections over torch's and the model's objects were
    most of the second a command took to exit after its output."""
    done = run("", "models")
    assert done.returncode == 0, done.stderr
    assert "collections skip what was left;" in done.stderr.splitlines()[-1]


def test_the_signals_are_ignored_for_the_end_of_the_exit():
    """After the atexit handlers Python puts back the default actions, and a signal in
    the module teardown that follows (a quarter of a second) killed the process."""
    done = run("", "models")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].endswith("signals ignored")


def test_main_called_with_arguments_leaves_the_process_as_it_was():
    """In-process callers (tests, scripts) keep their signal handlers and collector."""
    import gc

    from dlm_lsp.cli import main

    with pytest.raises(SystemExit):
        main(["--version"])
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert gc.get_freeze_count() == 0
