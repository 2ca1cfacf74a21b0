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
as for any interrupted benchmark (unless a bar checked on a complete part of the
run failed: then 1, as a complete run that failed it).  A run stopped before it
finished anything writes no report.  Every benchmark's loop runs under
`Stoppable`, which makes that choice in one place.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

from dlm_lsp.held_signals import hold_until_reported, let_held_go, signal_name

T = TypeVar("T")

EVERY_S = 5.0  # seconds at least between two progress lines


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

    @property
    def heading(self) -> str:
        """The first line of a stopped run's report, above the numbers it covers."""
        return f"{self}; the numbers below cover only these"

    @property
    def report(self) -> str:
        """What a stopped run's last line calls its report: "partial report of 37 of 200
        tasks"."""
        return f"partial report of {self.finished} of {self.planned} {self.unit}"

    def mark(self, finished: int | None = None) -> str:
        """The few words a table row of this run carries: "(partial: 37 of 200)"."""
        return f" (partial: {self.finished if finished is None else finished} of {self.planned})"


class Stopped(KeyboardInterrupt):
    """Raised by a benchmark stopped by a signal once it has printed (and written) the
    report of what it finished: still an interruption, so the command exits 128 + N.

    `status` is the exit status of the checks a complete part of the run passed or
    failed (`bench humaneval`'s bars on the model's report, when the stop came while
    `--baseline-model` ran): a failed check (1) is the status, as in a complete run,
    so that a stop does not turn a regression into a mere interruption."""

    def __init__(self, partial: Partial, report: str | None = None, status: int = 0) -> None:
        super().__init__(partial.signal)
        self.partial, self.status = partial, status
        # what was printed and written, for the command line's last line
        self.report = report or partial.report


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
        """Print the line now, unless the last one already said the same count (its
        details may differ: `strategies` said "10/10 fills, left-to-right" and then
        "10/10 fills", one line twice)."""
        if self.said is None or self.said[0] != done:
            self._print(done, detail)

    def _print(self, done: int, detail: str) -> None:
        self.last = now = self.clock()
        self.said = (done, detail)
        print(f"{self.label}: {done}/{self.total} {self.unit}{', ' + detail if detail else ''}, "
              f"{now - self.began:.0f} s", file=sys.stderr, flush=True)


def latest(measured: list[T], say: Callable[[T], str]) -> Callable[[], str]:
    """A progress line's details: the last of `measured` (a curve's point) as `say` puts
    it, nothing before the first."""
    return lambda: say(measured[-1]) if measured else ""


class Stoppable:
    """The loop of a benchmark, which a signal stops without losing what it finished.

    `with Stoppable(progress, finished) as loop:` around it.  Ended normally, it
    prints the last progress line.  Interrupted, it first lets `on_stop` keep the unit
    under way (a strategy's row over the tasks it filled), then, if `finished()` counts
    any of `progress`'s units, holds the interruption back as `loop.partial` for the
    report to say, and holds any further signal until the report is written
    (`hold_until_reported`); if none, the interruption goes on and no report is made.
    """

    def __init__(self, progress: Progress, finished: Callable[[], int],
                 detail: Callable[[], str] = lambda: "",
                 on_stop: Callable[[], None] | None = None) -> None:
        self.progress, self.finished, self.detail, self.on_stop = (progress, finished, detail,
                                                                   on_stop)
        self.partial: Partial | None = None

    def update(self) -> None:
        """A progress line, if it is time for one: `finished()` units and `detail()`."""
        self.progress.update(self.finished(), self.detail())

    def __enter__(self) -> Stoppable:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if error is None:
            self.progress.finish(self.finished(), self.detail())
            return False
        if not isinstance(error, KeyboardInterrupt):
            return False
        hold_until_reported()  # a second signal waits until the report is written
        if self.on_stop is not None:
            self.on_stop()
        finished = self.finished()
        if not finished:  # the first signal goes on; one since, with it
            let_held_go(raise_held=False)
            return False
        self.partial = Partial(finished, self.progress.total, self.progress.unit,
                               signal_name(error))
        return True
