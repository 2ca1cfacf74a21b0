"""Hold Ctrl-C and SIGTERM for a moment that must not be cut in two.

Python raises KeyboardInterrupt between any two bytecodes, and some code cannot take
it there: torch's C initialisation swallows the exception while it imports numpy (the
Ctrl-C is lost, or numpy is left half loaded), and a file overwritten in place, or a
report being written, is cut short.  Meanwhile a signal is only noted, and sent again
the moment the block ends, to the handlers that were there: it stops the command
there, as it would have a moment earlier.

The signals are held by Python's handlers, not by the thread's signal mask: a mask
holds them off the main thread only, and the kernel then hands a signal sent to the
process to any other thread (the engine's worker, torch's pool), whose arrival Python
still turns into a KeyboardInterrupt in the main thread.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import ModuleType

HELD = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (in the main thread, the only one
    where Python runs signal handlers; elsewhere the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, frame: object) -> None:
        arrived.append(signum)
    before = {sig: signal.signal(sig, note) for sig in HELD}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if arrived:  # the first one, as the handlers there would have taken it
            signal.raise_signal(arrived[0])


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (`timeout`, a CI job cancelled, `kill`) raises KeyboardInterrupt("SIGTERM")
    meanwhile, as Ctrl-C does: the default handler killed a benchmark at once, leaving
    the sandboxed programs it had under way running and their folders in /tmp (and a
    benchmark script's servers running, its `finally` blocks skipped)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def signal_name(interrupt: KeyboardInterrupt) -> str:
    """The signal behind an interruption: SIGTERM when the command line's handler raised
    it (`terminate_as_interrupt`), else SIGINT (Ctrl-C)."""
    return "SIGTERM" if str(interrupt) == "SIGTERM" else "SIGINT"


def import_torch() -> ModuleType:
    """torch, imported with the signals held: its C initialisation imports numpy and
    carries on without it on any exception there, so a Ctrl-C in that window was lost
    (the command ran on to the end, status 0), or left numpy half loaded for a later
    import's "cannot load module more than once per process" traceback.  Held, the
    signal stops the command once torch is in, a second later at most."""
    with held_signals():
        import torch
    return torch
