"""The C allocator, set for a long-running server: on glibc, few malloc arenas.

glibc's malloc gives each thread that allocates an arena of its own, up to 8 per
core (16 on a 2-core machine; past that, threads share them), and memory freed in an
arena stays there for that arena's next allocations: the operating system gets back
only what is free at the top of each heap.  The server fills on worker threads (the
engine's batching worker, the executor that prepares and validates requests), so
each of them ends up holding the freed remains of fills in an arena of its own.
Soaked on a 2-core VM with 8 editors filling at once (benchmarks/soak.py,
benchmarks/results/soak-cpu.md), the stdio server held 146 MiB in 14 heaps of thread arenas
and its RSS levelled at 475 MiB; with at most 2 arenas, 115-126 MiB in the one they share, and
435-447 MiB, for the same CPU time a fill.  An earlier 20-minute soak saw the RSS
double (345 -> 690 MiB), and level at ~395 MiB with 2 arenas.

`cap_arenas` sets that limit at server start, before the worker threads make
arenas (glibc settles its limit once it has made 8).  A user who set
`MALLOC_ARENA_MAX` (or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`) keeps their
choice; other C libraries (macOS, musl) have their own allocators, and nothing is
done there.

A `serve-remote` replica is a long-lived server too, with more threads that fill (a
pool of up to `max_ongoing_requests`), but Ray starts its process: by the time the
replica's code runs, Ray's own threads have made all 16 arenas of a 2-core machine
and glibc has settled its limit, so `cap_arenas` there changes nothing.  The
replica gets `arena_environment()` instead, as variables of its process from its
start (Ray's runtime_env), where glibc reads them before any arena is made.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

ARENA_MAX = 2  # the main thread's and one the worker threads share: the soaked value
M_ARENA_MAX = -8  # glibc's <malloc.h>

log = logging.getLogger(__name__)


def glibc() -> Any | None:
    """The running glibc, to call its malloc functions; None under any other C library."""
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")  # unknown to others: ValueError
    except (AttributeError, ValueError, OSError):  # AttributeError: no confstr (Windows)
        return None
    if not version or not version.startswith("glibc"):
        return None
    return ctypes.CDLL(None)


def user_chose(environ: Mapping[str, str]) -> bool:
    """Whether the user set the number of arenas (MALLOC_ARENA_MAX, or the tunable)."""
    return "MALLOC_ARENA_MAX" in environ \
        or "glibc.malloc.arena_max" in environ.get("GLIBC_TUNABLES", "")


def arena_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The variables that cap the arenas of a process started for us (a Ray replica),
    none when the user chose a number in `environ`: a replica Ray starts on this machine
    then inherits it, and one on another node keeps that node's.  Harmless under other
    C libraries, which do not read it."""
    return {} if user_chose(environ) else {"MALLOC_ARENA_MAX": str(ARENA_MAX)}


def cap_arenas(environ: Mapping[str, str] = os.environ,
               find_glibc: Callable[[], Any | None] | None = None) -> bool:
    """At most ARENA_MAX malloc arenas, unless the user chose a number; True when set.
    `find_glibc` (default: `glibc`) gives the C library to set, None where it is not
    glibc."""
    if user_chose(environ):
        return False
    libc = (find_glibc or glibc)()
    if libc is None:
        return False
    done = bool(libc.mallopt(M_ARENA_MAX, ARENA_MAX))  # 1 on success, 0 on error
    log.debug("malloc arenas capped at %d: %s", ARENA_MAX, done)
    return done
