"""A long benchmark's signs of life on stderr, and the report of a run stopped early.

`bench humaneval --split multi --limit 200` runs for many minutes on a CPU and
printed nothing until its report: `Progress` prints a line on stderr at most every
`EVERY_S` seconds and once at the end, so stdout still carries the report alone
(and `--json` files are unchanged).

Ctrl-C (or SIGTERM, which the command line turns into the same KeyboardInterrupt)
used to throw away every task already measured.  A benchmark's loop now keeps
what it finished, and the report it builds from that says so: `Partial` goes into
the JSON (`"partial"`, null in a complete run) and onto the first line and the
table rows of the text, so the numbers of 37 tasks are not read as those of 200.
The benchmark then raises `Stopped`, and the command line exits 128 + the signal
as for any interrupted benchmark.  A run stopped before it finished anything
writes no report.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

EVERY_S = 5.0  # seconds at least between two progress lines


def signal_name(interrupt: KeyboardInterrupt) -> str:
    """The signal behind an interruption: SIGTERM when the command line's handler raised
    it (`cli._terminate_as_interrupt`), else SIGINT (Ctrl-C)."""
    return "SIGTERM" if str(interrupt) == "SIGTERM" else "SIGINT"


@dataclass(frozen=True)
class Partial:
    """What a stopped run's report covers: `finished` of the `planned` units (tasks,
    lines, fills), and the signal that stopped it."""

    finished: int
    planned: int
    unit: str
    signal: str

    def __str__(self) -> str:
        return (f"partial: {self.finished} of {self.planned} {self.unit}, stopped by "
                f"{self.signal}")

    def mark(self, finished: int | None = None) -> str:
        """The few words a table row of this run carries: "(partial: 37 of 200)"."""
        return f" (partial: {self.finished if finished is None else finished} of {self.planned})"


class Stopped(KeyboardInterrupt):
    """Raised by a benchmark stopped by a signal once it has printed (and written) the
    report of what it finished: still an interruption, so the command exits 128 + N."""

    def __init__(self, partial: Partial) -> None:
        super().__init__(partial.signal)
        self.partial = partial


class Progress:
    """`label: done/total unit, details, N s` on stderr, at most every `every_s` seconds
    (`update`) and at the end (`finish`)."""

    def __init__(self, label: str, total: int, unit: str, every_s: float = EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.unit, self.every_s, self.clock = (label, total, unit,
                                                                       every_s, clock)
        self.began = self.last = clock()
        self.said: tuple[int, str] | None = None  # the count and details last printed

    def update(self, done: int, detail: str = "") -> None:
        """Print the line if `every_s` seconds have passed since the last one (or the start)."""
        if self.clock() - self.last >= self.every_s:
            self._print(done, detail)

    def finish(self, done: int, detail: str = "") -> None:
        """Print the line now, unless the last one already said the same count."""
        if self.said != (done, detail):
            self._print(done, detail)

    def _print(self, done: int, detail: str) -> None:
        self.last = now = self.clock()
        self.said = (done, detail)
        print(f"{self.label}: {done}/{self.total} {self.unit}{', ' + detail if detail else ''}, "
              f"{now - self.began:.0f} s", file=sys.stderr, flush=True)
