"""Waiting for a lock that a fill may be stopped during.

A fill stops at its next denoising step when it is cancelled, superseded, outdated by
an edit or closed (jobs.py).  A fill waiting for a lock has no step: on the CPU, where
a fill with a context cache runs alone, one that waited behind another document's long
rewrite was answered "superseded" or "the document changed" only once that rewrite
ended, 30 s later, and so was every ghost-text request queued behind it; a fill waiting
for a model load under way waited for the whole load.  Waiting here looks at the stop
flag between short waits, so a stopped fill is answered at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from dlm_lsp.sampler import Cancelled

# How often a waiting fill looks whether it was stopped (seconds): well under what a user
# notices, and a wake-up costs microseconds.
POLL_S = 0.05


@contextlib.contextmanager
def holding(lock: threading.Lock,
            should_stop: Callable[[], bool] | None = None) -> Iterator[None]:
    """Hold `lock` through the block; while waiting for it, raise `Cancelled` (as the
    sampler does between steps) once `should_stop` says so."""
    if should_stop is None:
        lock.acquire()
    else:
        while not lock.acquire(timeout=POLL_S):
            if should_stop():
                raise Cancelled()
    try:
        yield
    finally:
        lock.release()
