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
