"""Where a benchmark's numbers go: a JSON of every number, a markdown summary, plots.

Every report here is a dataclass; JSON is its `asdict`, so nothing measured is
left out of the file and the file reads back with the same names.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TypeVar

from dlm_lsp.atomic_write import target_of, write_atomically
from dlm_lsp.bench.progress import Partial, Stopped
from dlm_lsp.held_signals import held_signals, let_held_go
from dlm_lsp.quantiles import quantile as nearest_rank

R = TypeVar("R")


class OutputError(Exception):
    """A report file that could not be written: found before the run, not after it."""


def say(line: str) -> None:
    """Print a line of a report as the run goes: where the reader has gone (`| head -1`),
    the rest of the output goes nowhere, quietly, and the run goes on to write its report
    files.  The second row of `bench syntax --json F | head -1` hit the closed pipe and
    ended the run (status 141) before it wrote F."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def is_stream(path: Path) -> bool:
    """Whether a report path names no file to replace but a stream to write to: a device,
    a pipe or a socket (`/dev/null`, `>(wc -c)`'s /dev/fd/63), or anything under /dev or
    /proc (`/dev/stdout`, whatever it is).  As root, a report written over `/dev/null`
    replaced the device with a regular file (the temporary file renamed over it); a pipe
    failed after the whole run ("No such file or directory": its resolved path is
    `pipe:[N]`); and `/dev/stdout` redirected to a file replaced that file, the table
    printed to it lost."""
    if os.path.abspath(path).startswith(("/dev/", "/proc/")):
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode) and not path.is_dir()
    except OSError:  # not there: a file to make
        return False


def _a_pipe(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def check_writable(option: str, path: str | Path) -> None:
    """Refuse a report path that cannot be written before the benchmark runs: a missing
    folder (or a file where one should be) raised its traceback only when the report
    was written, after every task had run."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise OutputError(f"{option} {path} is a folder; name a file")
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: no folder {folder}")
    if _a_pipe(target):  # opened when the report is written: its reader may come later,
        if not os.access(target, os.W_OK):  # and opening it now would wait for one
            raise OutputError(f"{option} {path}: cannot write there")
        return
    if not target.exists() and not os.access(folder, os.W_OK):
        raise OutputError(f"{option} {path}: cannot write there")
    # Opened for real, not asked of access(), which says yes to root in /proc: a file
    # that exists is opened to append (its text untouched) and written over in place
    # later (`write_text`), so its folder may be read-only; a new one is made and taken
    # away.
    existed = target.exists()
    try:
        with open(target, "a" if existed else "x", encoding="utf-8"):
            pass
        if not existed:
            target.unlink()
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot write there "
                          f"({exc.strerror or exc})") from None


def check_report_paths(args: object, options: tuple[tuple[str, str], ...]) -> None:
    """Refuse a run's report paths that cannot all be written, before it runs: each as
    `check_writable` does; one given empty (`--json "$OUT"` with OUT unset: ignored, no
    report and no word); and two options naming one file (`--json r --markdown r`: the
    markdown written over the JSON).  `options` pairs an attribute of `args` with its
    option's name."""
    named: dict[str, str] = {}
    for attribute, option in options:
        value = getattr(args, attribute, None)
        if value is None:
            continue
        if not str(value).strip():
            raise OutputError(f"{option} is empty: name a file")
        check_writable(option, value)
        where = os.path.realpath(value)
        if where in named and not is_stream(Path(value)):
            raise OutputError(f"{named[where]} and {option} name the same file, {value}: the "
                              "second would be written over the first; give each its own")
        named[where] = option


class ReportUnwritten(Exception):
    """Report files that could not be written after the run (a full disk, a folder gone
    meanwhile): said in one line once the others are written, the numbers printed above
    (it was a traceback, and the files after the failed one were never written)."""


def write_json(path: str | Path, report: object) -> None:
    """Write a report (a dataclass or plain data) as indented JSON."""
    data = asdict(report) if is_dataclass(report) and not isinstance(report, type) else report
    write_text(path, json.dumps(data, indent=1) + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write a markdown summary (or any text) as UTF-8 (in `writing_reports`, which
    keeps it whole).  A write that fails (a full disk) leaves no file where there was
    none (it left an empty one), and an earlier report whole where its folder takes a
    new file beside it (`write_atomically`; written in place, a full disk emptied it, a
    `--baseline` named as the `--json` too); in a folder that is read-only, a report
    there is written over in place, as `check_writable` allowed."""
    target = Path(path)
    if is_stream(target):  # appended: `--json /dev/stdout > out.txt` keeps the table
        with open(target, "a", encoding="utf-8") as out:
            out.write(text)
        return
    if target.exists():
        if os.access(target_of(target).parent, os.W_OK | os.X_OK):
            write_atomically(target, text)
        else:
            target.write_text(text, encoding="utf-8")
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError:
        with contextlib.suppress(OSError):
            target.unlink()
        raise


class StoppedAfterWriting(KeyboardInterrupt):
    """A signal held while the report files were written, raised once they were whole:
    the command line's last line said "no report written" of files that were there.

    `report` is that line's end (`ReportFiles.said`); `status` is the exit status of
    checks made on a complete report after it was written (`bench humaneval`'s bars),
    which a stop must not hide, as `progress.Stopped.status`."""

    def __init__(self, interrupt: KeyboardInterrupt, report: str, status: int = 0) -> None:
        super().__init__(*interrupt.args)  # the signal's name stays readable (signal_name)
        self.report, self.status = report, status


class ReportFiles:
    """The files one run's report goes to (--json, --markdown, plots), as they are
    written, and what the report is: complete, or partial (`Partial.report`)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.written: list[str] = []
        self.failed: list[str] = []  # "PATH (why)" of each file that could not be written

    def json(self, path: str | Path, report: object) -> None:
        self._write(path, lambda: write_json(path, report))

    def text(self, path: str | Path, text: str) -> None:
        self._write(path, lambda: write_text(path, text))

    def _write(self, path: str | Path, write: Callable[[], None]) -> None:
        try:
            write()
        except OSError as exc:  # the next file is still written
            self.failed.append(f"{path} ({exc.strerror or exc})")
        else:
            self.written.append(str(path))

    def plot(self, plot: str, report: object, to: str) -> None:
        """Draw with `plot`, a function of `plots.py`, into `to` (a file, or a folder of them)."""
        from dlm_lsp.bench import plots

        drawn = getattr(plots, plot)(report, to)
        for path in drawn if isinstance(drawn, list) else [drawn]:
            print(f"wrote {path}", file=sys.stderr)
            self.written.append(str(path))

    def said(self) -> str:
        """The report and every file it went to, for the last line of a stopped run:
        "partial report of 37 of 200 tasks written to run.json and run.md"."""
        if not self.written:
            return self.what
        *first, last = self.written
        return f"{self.what} written to {', '.join(first)}{' and ' if first else ''}{last}"


@contextlib.contextmanager
def writing_reports(partial: Partial | None = None,
                    what: str | None = None) -> Iterator[ReportFiles]:
    """Write a run's report files with Ctrl-C and SIGTERM held across all of them
    (`held_signals`).  A signal in the middle of one left it cut short (JSON that no
    longer parsed), and one held a file at a time stopped the run between its JSON and
    its markdown, which were then never written.  The signal now stops the command once
    every file is whole, as `StoppedAfterWriting`, whose line names them all and says
    whether the report is `partial` (`what` words it otherwise; "report" by default)."""
    files = ReportFiles(what or (partial.report if partial else "report"))
    try:
        with held_signals():
            yield files
        let_held_go()  # a signal since the run stopped (`hold_until_reported`) goes on now
    except KeyboardInterrupt as exc:  # only as the block ends: every file is whole
        raise StoppedAfterWriting(exc, files.said()) from None
    if files.failed:
        went = f"; the {files.said()}" if files.written else ""
        raise ReportUnwritten(f"could not write {', '.join(files.failed)}{went}; its numbers "
                              "are printed above")


def percent(count: int | float, total: int) -> float:
    """`count` of `total` in percent, one decimal (0 for an empty total)."""
    return round(100 * count / total, 1) if total else 0.0


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of the values (dlm_lsp.quantiles), 0 for no values."""
    found = nearest_rank(values, q)
    return 0.0 if found is None else found


def median(values: list[float]) -> float:
    """The median, 0 for no values."""
    return statistics.median(values) if values else 0.0


def publish(run: Callable[[], R], summarise: Callable[[R], str], json_out: str | None = None,
            markdown_out: str | None = None, plot: str | None = None,
            plot_to: str | None = None) -> R:
    """Run a benchmark, print its summary and write what was asked: JSON, markdown, plots
    (`writing_reports`); a report the run's `partial` marks then raises `Stopped`.

    `plot` names the function of `plots.py` that draws the report into `plot_to`;
    matplotlib is checked before the run, so a missing extra costs no wasted run.
    """
    if plot_to:
        from dlm_lsp.bench.plots import require_matplotlib

        require_matplotlib()
    report = run()
    summary = summarise(report)
    print(summary, end="")
    partial = getattr(report, "partial", None)
    with writing_reports(partial) as files:
        if json_out:
            files.json(json_out, report)
        if markdown_out:
            files.text(markdown_out, summary)
        if plot and plot_to:
            files.plot(plot, report, plot_to)
    if partial:
        raise Stopped(partial, files.said())
    return report
