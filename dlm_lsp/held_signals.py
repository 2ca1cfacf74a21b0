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


class _Hold:
    """SIGINT and SIGTERM noted, not acted on, from its making until `end`."""

    def __init__(self) -> None:
        self.arrived: list[int] = []
        self.before = {sig: signal.signal(sig, self._note) for sig in HELD}

    def _note(self, signum: int, frame: object) -> None:
        self.arrived.append(signum)

    def end(self, raise_held: bool = True) -> None:
        """The handlers that were there again, and the first signal noted sent to them (as
        they would have taken it), unless `raise_held` is false."""
        for sig, handler in self.before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        if self.arrived and raise_held:
            signal.raise_signal(self.arrived[0])


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (in the main thread, the only one
    where Python runs signal handlers; elsewhere the block runs as it is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    hold = _Hold()
    try:
        yield
    finally:
        hold.end()


# The hold a benchmark's stop began (`hold_until_reported`), until its report is written.
_report_hold: _Hold | None = None
# How many commands are under way (`terminate_as_interrupt`): only theirs hold, as only
# they end the hold of a report that never came
_commands = 0


def hold_until_reported() -> None:
    """From a first signal that stopped a benchmark's loop (`bench.progress.Stoppable`)
    until its report is written (`bench.output.writing_reports`, which lets the held ones
    go, `let_held_go`, once every file is whole), a second signal waits.  The files alone
    were held: a second Ctrl-C a few milliseconds after the first came while the report
    was tallied (the machine described, the source's revision read), and every finished
    task was thrown away, "no report written".  Only within a command
    (`terminate_as_interrupt`), which ends a hold left open: a loop run on its own (a
    test, a notebook calling a benchmark's function) left Ctrl-C and SIGTERM noted and
    ignored for good."""
    global _report_hold
    if _report_hold is None and _commands \
            and threading.current_thread() is threading.main_thread():
        _report_hold = _Hold()


def let_held_go(raise_held: bool = True) -> None:
    """End `hold_until_reported`'s hold: a signal that came meanwhile then takes effect,
    or with `raise_held` false (the command ends on the first one anyway) is dropped."""
    global _report_hold
    hold, _report_hold = _report_hold, None
    if hold is not None:
        hold.end(raise_held)


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (`timeout`, a CI job cancelled, `kill`) raises KeyboardInterrupt("SIGTERM")
    meanwhile, as Ctrl-C does: the default handler killed a benchmark at once, leaving
    the sandboxed programs it had under way running and their folders in /tmp (and a
    benchmark script's servers running, its `finally` blocks skipped)."""
    global _commands
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _commands += 1
    terminating = signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    if terminating:
        signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        _commands -= 1
        # a stopped benchmark's hold whose report never came (an error while tallying
        # it): the command ends on the first signal, the handlers as they were
        if not _commands:
            let_held_go(raise_held=False)
        if terminating:
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
