"""Ctrl-C and SIGTERM in the middle of a benchmark, sent by a stand-in for one of its steps."""

from __future__ import annotations

import os
import pathlib
import signal
import time
from collections.abc import Callable

import pytest

SIGNALS = [("SIGINT", 130), ("SIGTERM", 143)]  # the signal, and the command's exit status


def signal_on_call(sig: str, call: int, then: Callable | None = None,
                   waits: bool = True) -> Callable:
    """A stand-in that sends `sig` to this process on its `call`-th call (as Ctrl-C or
    `kill` would, through the command's handler), and otherwise does what `then` does.
    With `waits`, that call must be interrupted; without, it goes on to `then` (a signal
    that must wait, held)."""
    calls = []

    def stand_in(*args, **kwargs):
        calls.append(args)
        if len(calls) == call:
            os.kill(os.getpid(), signal.Signals[sig])
            if waits:
                time.sleep(5)  # the handler raises first
                pytest.fail(f"{sig} was not taken as an interruption")
        return then(*args, **kwargs)
    return stand_in


def signal_while_writing(monkeypatch: pytest.MonkeyPatch, sig: str, path: pathlib.Path) -> None:
    """Send `sig` to this process as `path` is written (`Path.write_text`), just before
    the bytes go out: a signal that comes while a report file is written."""
    write = pathlib.Path.write_text

    def signalled_meanwhile(self, *args, **kwargs):
        if self == path:
            os.kill(os.getpid(), signal.Signals[sig])
        return write(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "write_text", signalled_meanwhile)
