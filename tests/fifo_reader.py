"""A reader of a named pipe, for tests of what is written to one."""

from __future__ import annotations

import threading
from pathlib import Path


def read_fifo(path: Path) -> tuple[list[bytes], threading.Thread]:
    """A reader of the named pipe `path` on a thread of its own; what it read, once the
    thread is joined."""
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as pipe:
            got.append(pipe.read())
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return got, reader
