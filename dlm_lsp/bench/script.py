"""How a script of benchmarks/ ends when it is stopped, or its reader goes away.

The `dlm-lsp bench` commands end a Ctrl-C or a SIGTERM with one line and the status
128 + the signal (`cli.main`).  The scripts under benchmarks/, which run for minutes
too, ended a Ctrl-C in a KeyboardInterrupt traceback a page long from whichever wait
the key hit, and a SIGTERM (`timeout 600 python benchmarks/soak.py`) killed them
without a word, their `finally` blocks (the servers they started, the files they
remove) not run; `... | head` ended them in a BrokenPipeError.  `run_script` gives
them the command line's ending.  What a script printed before the stop stays printed;
nothing is written after it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from dlm_lsp.held_signals import signal_name, terminate_as_interrupt

# (attribute, option) of the files a script writes once its run is done
REPORTS = (("json_out", "--json"), ("markdown_out", "--markdown"),
           ("fills_out", "--fills-out"), ("profile_out", "--profile"))


def parse_script_arguments(parser: argparse.ArgumentParser,
                           argv: list[str] | None = None) -> argparse.Namespace:
    """A script's arguments, the paths it writes after its run (`--json`, `--markdown`,
    `--fills-out`, `--profile`: the attributes REPORTS names) checked before it runs, as
    the `bench` commands check theirs (`check_writable`): a missing folder was a
    FileNotFoundError traceback after the whole run, its numbers printed and lost."""
    from dlm_lsp.bench.output import OutputError, check_report_paths

    args = parser.parse_args(argv)
    try:
        check_report_paths(args, REPORTS)
    except OutputError as exc:
        parser.error(str(exc))
    return args


def run_script(main: Callable[[], int | None]) -> NoReturn:
    """Run a script's `main` and exit with its status (None: 0), or with one line and
    128 + the signal where Ctrl-C or SIGTERM stopped it."""
    began = time.monotonic()
    try:
        with terminate_as_interrupt():
            status = main()
        sys.stdout.flush()  # a reader gone: raised here rather than at exit
    except KeyboardInterrupt as exc:
        name = signal_name(exc)
        print(f"{Path(sys.argv[0]).name}: stopped by {name} after "
              f"{time.monotonic() - began:.0f}s", file=sys.stderr)
        raise SystemExit(128 + signal.Signals[name]) from None
    except BrokenPipeError:  # `| head`: the rest goes nowhere, quietly, as for a command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(128 + signal.SIGPIPE) from None
    raise SystemExit(status or 0)
