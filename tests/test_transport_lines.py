"""How the server's read loop (dlm_lsp.transport) takes header lines: a line over the
limit is junk to skip, a stream that cannot be read any more is the end of it."""

from __future__ import annotations

import asyncio
import types

import pytest

from dlm_lsp import transport
from dlm_lsp.framing import frame


def test_an_over_long_line_over_tcp_is_said_as_line_too_long_and_the_next_line_is_read():
    async def lines() -> list[object]:
        stream = asyncio.StreamReader(limit=transport._LINE_LIMIT)
        stream.feed_data(b"x" * (3 * transport._LINE_LIMIT) + b"\n" + frame({"id": 1}))
        stream.feed_eof()
        reader = transport.BoundedReader(stream)
        got: list[object] = []
        for _ in range(2):
            try:
                got.append(await reader.readline())
            except transport.LineTooLong:
                got.append("too long")
        return got

    header = frame({"id": 1}).split(b"\r\n")[0] + b"\r\n"
    assert asyncio.run(lines()) == ["too long", header]


class _Closed:
    """A stream closed under the reader: every readline is a ValueError, for ever."""

    def __init__(self) -> None:
        self.calls = 0

    async def readline(self) -> bytes:
        self.calls += 1
        if self.calls > 1000:
            pytest.fail("the read loop spins on a closed stream")
        raise ValueError("I/O operation on closed file.")


def test_a_stream_closed_under_the_read_loop_ends_it_instead_of_being_skipped_for_ever():
    closed = _Closed()
    server = types.SimpleNamespace(protocol=None)
    asyncio.run(asyncio.wait_for(transport._read(server, transport.BoundedReader(closed)), 5))
    assert closed.calls == 1
