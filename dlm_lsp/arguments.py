"""Command lines read the same way by every command of the package.

Python 3.11's argparse drops a value that is exactly `--` (it takes every `--` it meets
for the separator) and gives the option an empty list, untouched by its `type`: then
`dlm-lsp serve-remote --port=--` ended in a TypeError traceback from the socket, and
`fill --steps=--`, `bench humaneval --limit=--`, `train --seconds=--` in one from a
comparison.  Such a value is refused here, before argparse reads the line, with the
usage error argparse gives `--port` without a value.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence


def whole(text: str) -> int:
    """An integer, or a usage error in the user's words: argparse names the type function
    of a ValueError ("invalid _positive value: 'x'"), a name from the code."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a whole number, got {text!r}") from None


def positive(text: str) -> int:
    """A count of 1 or more (the commands', and the benchmark scripts': `--repeats 0`
    loaded the model, then ended in a StatisticsError traceback; `--fills 0` in a
    ZeroDivisionError)."""
    value = whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def positive_amount(text: str) -> float:
    """A finite number above 0 (megabytes, seconds: `--mb 0` ended in "substring not
    found", a traceback from deep in the run)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"a number above 0, got {text!r}")
    return value


def parse_arguments(parser: argparse.ArgumentParser,
                    argv: Sequence[str] | None = None) -> argparse.Namespace:
    """`parser.parse_args(argv)` (argv None: the process's), an option given `--` as its
    value (`--port=--`) refused as one given no value (exit 2, the usage on stderr)."""
    args = list(sys.argv[1:] if argv is None else argv)
    for arg in args:
        if arg == "--":  # what follows the separator is positional
            break
        option, equals, value = arg.partition("=")
        if equals and value == "--" and option.startswith("-"):
            parser.error(f"argument {option}: expected one argument")
    parsed, extra = parser.parse_known_args(args)
    if extra:  # said by the command's own parser, with its usage (`fill a.py b.py` was
        # refused with the top level's usage, which lists no FILE)
        _chosen(parser, parsed).error(f"unrecognized arguments: {' '.join(extra)}")
    return parsed


def refuse(parser: argparse.ArgumentParser, parsed: argparse.Namespace, message: str) -> None:
    """A usage error (exit 2) said by the parser of the command `parsed` names, with its
    usage, for what argparse cannot check itself (options that do not go together)."""
    _chosen(parser, parsed).error(message)


def _chosen(parser: argparse.ArgumentParser,
            parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the (sub)command `parsed` names, the deepest: `bench humaneval`'s."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(parsed, action.dest, None) or "")
            if chosen is not None:
                return _chosen(chosen, parsed)
    return parser
