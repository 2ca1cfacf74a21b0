"""How the server's read loop (dlm_lsp.transport) takes header lines: a line over the
limit is junk to skip, counted to the byte, up to a header at its end; a stream that
cannot be read any more is the end of it."""

from __future__ import annotations

import asyncio
import types

import pytest

from dlm_lsp import transport
from dlm_lsp.framing import frame


def test_an_over_long_line_over_tcp_comes_as_line_too_long_with_its_bytes_then_the_next_line():
    """asyncio's readline dropped the line and all its buffer held: the count of what was
    skipped was a guess, and a header at the line's end was lost."""
    junk = b"x" * (3 * transport._LINE_LIMIT) + b"\n"

    async def lines() -> list[object]:
        stream = asyncio.StreamReader(limit=transport._LINE_LIMIT)
        stream.feed_data(junk + frame({"id": 1}))
        stream.feed_eof()
        reader = transport.BoundedReader(transport.StreamLines(stream))
        got: list[object] = []
        for _ in range(3):
            try:
                got.append(await reader.readline())
            except transport.LineTooLong as exc:
                got.append(("too long", exc.piece))
        return got

    header = frame({"id": 1}).split(b"\r\n")[0] + b"\r\n"
    assert asyncio.run(lines()) == [("too long", junk[:-1]), b"\n", header]


class _Server:
    """What the read loop asks of a server: the messages it handles, the refusals it sends."""

    def __init__(self) -> None:
        self.handled: list[dict] = []
        self.refused: list[tuple] = []
        self.protocol = types.SimpleNamespace(
            structure_message=lambda message: message, handle_message=self.handled.append,
            refuse=lambda *refusal: self.refused.append(refusal))


@pytest.mark.parametrize("arrives", ["at once", "junk first"])
@pytest.mark.parametrize("junk", [3 * transport._LINE_LIMIT + 12345,  # a header after it
                                  3 * transport._LINE_LIMIT - 5])  # the limit cuts it
def test_over_tcp_junk_of_any_length_is_counted_exactly_and_the_next_message_read(
        arrives: str, junk: int) -> None:
    """The -32700 answer says how many bytes were no message: over TCP it said 64 KiB for
    each piece asyncio dropped, whatever the piece held (up to its whole buffer)."""
    message = {"jsonrpc": "2.0", "id": "after", "method": "dlm/status"}

    async def serve() -> _Server:
        server = _Server()
        stream = asyncio.StreamReader(limit=transport._LINE_LIMIT)
        reading = asyncio.ensure_future(
            transport._read(server, transport.BoundedReader(transport.StreamLines(stream))))
        stream.feed_data(b"x" * junk)
        if arrives == "junk first":  # read before the rest arrives: no line break in it
            await asyncio.sleep(0.05)
        stream.feed_data(frame(message))
        stream.feed_eof()
        await asyncio.wait_for(reading, 5)
        return server

    server = asyncio.run(serve())
    assert server.handled == [message]
    [(msg_id, code, text)] = server.refused
    assert msg_id is None and code == -32700 and f"skipped {junk} bytes" in text


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


async def _read_until_reset(fed: bytes) -> tuple[_Server, asyncio.Task]:
    """The read loop over a TCP stream that delivers `fed`, then is reset by the peer
    (an editor killed, a client that closes with unread answers: the kernel sends RST)."""
    server = _Server()
    stream = asyncio.StreamReader(limit=transport._LINE_LIMIT)
    reading = asyncio.ensure_future(
        transport._read(server, transport.BoundedReader(transport.StreamLines(stream))))
    stream.feed_data(fed)
    await asyncio.sleep(0.05)  # read what came before the reset
    stream.set_exception(ConnectionResetError(104, "Connection reset by peer"))
    await asyncio.wait_for(reading, 5)
    return server, reading


def test_a_connection_reset_between_messages_ends_the_read_loop_as_its_end_does():
    """The reset escaped the loop: asyncio logged "Unhandled exception in
    client_connected_cb" with a traceback at ERROR for an ordinary disconnect."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "dlm/status"}
    server, reading = asyncio.run(_read_until_reset(frame(message)))
    assert server.handled == [message] and reading.exception() is None


def test_a_connection_reset_mid_message_ends_the_read_loop_without_the_message():
    body = frame({"jsonrpc": "2.0", "id": 1, "method": "dlm/status"})
    server, reading = asyncio.run(_read_until_reset(body[:-5]))
    assert server.handled == [] and server.refused == [] and reading.exception() is None


def test_a_request_s_handler_reads_its_document_before_the_next_message_is_handled():
    """A TCP stream's reads do not yield while bytes are buffered: a request and the
    didChange after it, in one segment, were both handled before the request's handler
    (a task) first ran, and a request without a version was filled, and its edit sent,
    for the later text.  Here each handler's first step notes when it ran."""
    order: list[tuple[str, int]] = []

    def handle(message: dict) -> None:
        order.append(("handled", message["id"]))

        async def first_step() -> None:  # where a handler reads the document it names
            order.append(("ran", message["id"]))
        asyncio.ensure_future(first_step())

    async def serve() -> None:
        server = types.SimpleNamespace(protocol=types.SimpleNamespace(
            structure_message=lambda message: message, handle_message=handle))
        stream = asyncio.StreamReader(limit=transport._LINE_LIMIT)
        stream.feed_data(b"".join(frame({"jsonrpc": "2.0", "id": n, "method": "dlm/infill"})
                                  for n in (1, 2, 3)))  # in one segment
        stream.feed_eof()
        await asyncio.wait_for(transport._read(
            server, transport.BoundedReader(transport.StreamLines(stream))), 5)
        await asyncio.sleep(0)

    asyncio.run(serve())
    assert order == [("handled", 1), ("ran", 1), ("handled", 2), ("ran", 2),
                     ("handled", 3), ("ran", 3)]
