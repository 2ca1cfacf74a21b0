"""The second after a command's work: Python's own teardown, made short and quiet.

Once torch is loaded, `dlm-lsp fill` took 0.5-0.85 s (median 0.67, 2-core VM) to exit
after writing its last line, 0.04 s of it when it ended with `os._exit`.  Nearly all of
it is the garbage collector: interpreter shutdown runs full collections over the
million or so objects that torch, transformers and the model leave behind, only to
free memory the kernel frees at exit anyway.  Now 0.14-0.24 s (median 0.23).

A signal in that time was no better: in the atexit handlers a Ctrl-C raised
KeyboardInterrupt in whatever ran (a traceback, and status 0) and SIGTERM, the
command's handler put back, killed the process with no word; after them Python puts
back the default actions before it tears the modules down (most of the time), and
either signal killed the process where it stood, with no word.  Neither is how a
command that has done its work and said so should end: now the first signal during
teardown is ignored and the process exits with the command's own status.  After the
atexit handlers the two are ignored outright (`ignore_signals_at_last`): no Python
code may run then, and an ignored signal stays ignored.

`end_quietly` keeps the normal teardown (atexit handlers: Ray's shutdown of an
instance the command started, temporary folders' cleanup, multiprocessing's children,
logging's flush; non-daemon threads joined; module teardown) and drops only the
collections' scan of what exists by then (`gc.freeze`): the objects then alive are
freed by reference counting or by the process's end, as before, but the finalizers of
those caught in reference cycles no longer run.  Ending with `os._exit` (0.04 s) would
skip the atexit handlers too, a Ray instance's shutdown and a buffered file's flush
among them, and is left to the LSP server (`transport._run`), which closes what it
opened itself.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import sys
import threading

from dlm_lsp.held_signals import HELD


def end_quietly() -> None:
    """Call once the command's work is done, its output written, and the process is
    about to exit: output is flushed now; a first Ctrl-C or SIGTERM during teardown is
    ignored (the process ends as it was ending, with the command's own status); a
    second one ends it at once, with 128 + its number, should teardown hang (a thread
    that never ends)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe, a closed stream
            stream.flush()
    if threading.current_thread() is threading.main_thread():
        exit_now = os._exit  # bound now: module teardown empties the module's names
        arrived: list[int] = []

        def during_teardown(signum: int, frame: object) -> None:
            if arrived:
                exit_now(128 + signum)
            arrived.append(signum)
        for sig in HELD:
            signal.signal(sig, during_teardown)
    gc.freeze()


def ignore_signals_at_last() -> None:
    """Call before any library registers an atexit handler (before torch's or Ray's
    import): the handler registered here runs after theirs, atexit running the last
    registered first, and makes SIGINT and SIGTERM ignored for the rest of the exit.
    Python restores only handlers of its own to the default action; an ignored signal
    stays ignored."""
    atexit.register(_ignore_held_signals)


def _ignore_held_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for sig in HELD:
            signal.signal(sig, signal.SIG_IGN)
