"""Hold Ctrl-C and SIGTERM for a moment that must not be cut in two.

Python raises KeyboardInterrupt between any two bytecodes, and some code cannot take
it there: torch's C initialisation swallows the exception while it imports numpy (the
Ctrl-C is lost, or numpy is left half loaded), and a file overwritten in place is
part new text, part old between the write and the cut to length.  Blocked (the
kernel keeps the signal pending), a signal arrives the moment the operation ends and
stops the command there, as it would have a moment earlier.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

HELD = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block ends (where the platform can block them:
    not on Windows, whose Python has no pthread_sigmask)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
