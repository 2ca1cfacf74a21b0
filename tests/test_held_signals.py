"""Ctrl-C and SIGTERM held for a moment that must not be cut in two (`held_signals`)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from dlm_lsp.held_signals import held_signals


def test_a_signal_waits_for_the_block_even_while_other_threads_run():
    """Held by the main thread's signal mask, a signal sent to the process went to
    another thread (the engine's worker, torch's pool), and Python still raised
    KeyboardInterrupt in the main thread, inside the block."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    ran_to_the_end = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with held_signals():
                for _ in range(20):  # to whichever thread the kernel picks
                    os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)  # the other thread takes it meanwhile
                for _ in range(1000):  # bytecodes, where a handler would raise
                    pass
                ran_to_the_end = True
    finally:
        stop.set()
        other.join()
    assert ran_to_the_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "handler put back"


def test_a_benchmark_s_stop_holds_the_next_signal_until_its_report_then_lets_it_go():
    """`hold_until_reported` (a stopped benchmark's loop) to `let_held_go` (its report
    written): the second Ctrl-C takes effect there, not while the report is tallied."""
    from dlm_lsp.held_signals import hold_until_reported, let_held_go, terminate_as_interrupt

    with terminate_as_interrupt():  # a command
        hold_until_reported()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        tallied = True  # not interrupted meanwhile
        with pytest.raises(KeyboardInterrupt):
            let_held_go()
    assert tallied
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "handler put back"


def test_a_loop_stopped_outside_a_command_holds_nothing():
    """Outside a command nothing would end the hold: a benchmark's loop stopped in a test
    or a notebook left Ctrl-C and SIGTERM noted and ignored for good."""
    from dlm_lsp.bench.progress import Progress, Stoppable

    with Stoppable(Progress("bench", 5, "fills"), lambda: 1) as loop:
        raise KeyboardInterrupt
    assert loop.partial is not None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_hold_whose_report_never_came_ends_with_the_command_and_drops_its_signal():
    """A stopped run that failed before its report left SIGINT and SIGTERM noted and
    ignored for the rest of the process; the command's end (`terminate_as_interrupt`)
    puts the handlers back, the command already ending on the first signal."""
    from dlm_lsp.held_signals import hold_until_reported, terminate_as_interrupt

    with terminate_as_interrupt():
        hold_until_reported()
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_signal_while_the_row_under_way_is_kept_waits_for_the_report_too():
    """The hold began after `on_stop` (a strategy's row over the tasks it filled): a second
    signal there replaced the first, and the report was never made."""
    from dlm_lsp.bench.progress import Progress, Stoppable
    from dlm_lsp.held_signals import let_held_go, terminate_as_interrupt

    def keep_the_row() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
    with terminate_as_interrupt():
        with Stoppable(Progress("bench", 5, "fills"), lambda: 1, on_stop=keep_the_row) as loop:
            raise KeyboardInterrupt
        assert loop.partial is not None  # kept, the second signal held
        with pytest.raises(KeyboardInterrupt):
            let_held_go()  # the report written
