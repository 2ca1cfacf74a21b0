"""Where a fill's forward passes run, for the scripts that time them apart from the rest
of a fill (fill_stages, fill_overhead, typing_cost, edit_stream, pathological_documents).

The model's own `hidden` and `head` run a fill's passes only where the context cache is
off.  With it on (a CPU's default since 2026-12-05) each step runs in the cache
(`ContextCache.__call__`: a full pass every `cacheRefresh` steps, the span and its
window between), which calls the model's `head` (handed to it) but not `hidden`: timed
on `hidden` and `head` alone, 98% of a fill's CPU was counted as "outside the forward
passes" (2 ms a pass against 170).  A place is timed only where no other is under way
on the thread: the cache's steps ran the timed `head` inside the timed step, counted
twice, and the time "outside the forward passes" came out negative (-21.6 ms a fill).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from dlm_lsp.models.cache import ContextCache

# how each place is named in the scripts' tables
LABELS = {"hidden": "hidden", "head": "head", "__call__": "cached"}

_passes = threading.local()  # whether a timed place runs on this thread


def _outermost(timed: Callable, original: Callable) -> Callable:
    """`timed`, or `original` where a timed place is under way on this thread already."""
    def call(*args, **kwargs):
        if getattr(_passes, "inside", False):
            return original(*args, **kwargs)
        _passes.inside = True
        try:
            return timed(*args, **kwargs)
        finally:
            _passes.inside = False
    return call


def time_forward_passes(model: object, time_one: Callable[[object, str, str], None]) -> None:
    """Call `time_one(owner, name, label)` for each place `model`'s forward passes run:
    its `hidden` and `head`, and the context cache's steps.  The cache's class is timed
    once in a process (its instances come and go with each fill; a second wrapper over
    the first would count each step twice), the model's methods for each model."""
    for name in ("hidden", "head"):
        original = getattr(model, name)
        time_one(model, name, LABELS[name])
        setattr(model, name, _outermost(getattr(model, name), original))
    if not getattr(ContextCache.__call__, "forward_timed", False):
        original = ContextCache.__call__
        time_one(ContextCache, "__call__", LABELS["__call__"])
        ContextCache.__call__ = _outermost(ContextCache.__call__, original)
        ContextCache.__call__.forward_timed = True
