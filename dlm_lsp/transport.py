"""How bytes reach the protocol: stdio and TCP, bounded messages, signals, exit.

pygls 2.1's own transport has six gaps that a hostile or unlucky client hits:

* one message framed wrong (a Content-Length that does not match its body, a
  header name in lower case, a body with no header) and it never reads another
  message: the server runs on and answers nothing.  Here `HeaderReader`
  (framing.py) finds the next message again, and what was skipped is answered;
* a message is allocated at its announced Content-Length before a byte of it
  arrives: `Content-Length: 1000000000000` raises MemoryError and ends the
  server.  `BoundedReader` skips a body over MAX_MESSAGE_BYTES in chunks and
  hands on a stand-in that the protocol answers with an error;
* over stdio a header line is read whole, however long: a run of bytes with no
  line break (junk on stdin, a client gone wrong) is all held in memory while it
  arrives.  `StdinLines` reads a line at most _LINE_LIMIT bytes at a time, as
  asyncio's stream reader does over TCP (`StreamLines`), and a longer one is
  skipped as junk, up to a header that may end it;
* its TCP server has one protocol object for all connections: a second client
  takes over the answers meant for the first, and any client that disconnects
  ends the server (so `dlm-lsp status --server` would stop the server it asked).
  Here each connection gets a language server of its own (`make_server`), all
  filling on one shared engine (`dlm_lsp/shared.py`); `exit` or a disconnect
  ends that connection only, and the server outlives its clients (it serves
  those that pass its gate: a token, a number of connections; admission.py);
* SIGTERM killed the process mid-fill with no answer; here SIGTERM or SIGINT
  stops the fills in flight, gives them up to 2 s to answer, and exits 0;
* the stdin reader thread may sit in a read that never returns, and a normal
  interpreter exit waits for it: the process ends with os._exit instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdinAsyncReader, StdoutWriter

from dlm_lsp.admission import TOKEN_ENV, Gate, host_port, reaches_beyond_this_machine
from dlm_lsp.framing import HeaderReader
from dlm_lsp.jobs import CLIENT_LEFT
from dlm_lsp.protocol import MAX_MESSAGE_BYTES, oversized_body

if TYPE_CHECKING:
    from dlm_lsp.server import DlmServer

log = logging.getLogger(__name__)

TERMINATING = "the server is terminating (signal)"
_CHUNK = 1 << 20
_LINE_LIMIT = 1 << 16  # asyncio's StreamReader reads no longer line (the TCP servers' default)
# A TCP connection's messages before its initialize is admitted (token, number of clients)
# are read as any other's, up to MAX_MESSAGE_BYTES, and parsed on the event loop: an 8 MiB
# `[[[...` from a stranger without the token cost the server 210 MiB and 1.2 s of every
# client's loop, and a message may be 64 MiB.  An editor's initialize is a few KiB.
FIRST_MESSAGE_BYTES = 256 << 10
GRACE_S = 2.0  # how long stopped fills may take to answer (signal, client gone)


class LineTooLong(ValueError):
    """A piece of a line longer than _LINE_LIMIT: junk, as no header line is so long,
    though the header of the next message may start at its end."""

    def __init__(self, piece: bytes):
        super().__init__(f"a line of over {_LINE_LIMIT} bytes")
        self.piece = piece


# A header line as it can only stand between messages: JSON holds no raw line break
# inside a string, nor `Content-Length` outside one, so in the bytes of a body this is
# the next message's header, and the body's announced length was wrong.
_HEADER = re.compile(rb"Content-Length:[ \t]*[0-9]+[ \t]*\r?\n", re.IGNORECASE)
_HEADER_TAIL = 64  # bytes of a piece kept to find a header the next piece ends


class BoundedReader:
    """An async message reader that never allocates more than MAX_MESSAGE_BYTES at once.

    A body announced over the limit is skipped as it arrives, piece by piece, as far as
    its length, or as far as the next message's header where one comes first: a
    `Content-Length: 99999999999999999999999` (or 70 MiB over a short body) had the
    server wait for good for bytes no client would send, every later message taken
    for that body, and nothing answered.  The bytes from that header on are read again
    as the start of the next message."""

    def __init__(self, reader: Any):
        self.reader = reader
        self._kept = b""  # bytes read past a skipped body, the next message's start

    async def readline(self) -> bytes:
        """The next header line; LineTooLong for a piece of a line over the limit; b""
        at the end, a connection reset by the client included (an editor killed, or one
        that closed with answers unread: the kernel sends a reset, not an end of file),
        which is a disconnect like any other, not an error to log with a traceback."""
        if self._kept:
            end = self._kept.find(b"\n") + 1
            if end:
                line, self._kept = self._kept[:end], self._kept[end:]
                return line
            kept, self._kept = self._kept, b""
            return kept + await self.readline()
        try:
            return await self.reader.readline()
        except ConnectionError as exc:
            log.info("the client reset the connection (%s): taken as its end", exc)
            return b""

    async def readexactly(self, n: int) -> bytes:
        """The body of `n` bytes, or a stand-in for one over the limit (b"" at the end);
        bytes kept from a skip come first, in either."""
        if n <= MAX_MESSAGE_BYTES:
            kept, self._kept = self._kept[:n], self._kept[n:]
            return kept + (await self._read(n - len(kept)) if n > len(kept) else b"")
        left, tail = n, b""
        while left > 0:
            if self._kept:
                piece, self._kept = self._kept[:min(left, _CHUNK)], self._kept[min(left, _CHUNK):]
            else:
                piece = await self._read_some(min(left, _CHUNK))
            if not piece:
                return b""
            found = _HEADER.search(tail + piece)
            if found is not None:  # the next message began: the length was wrong
                at = found.start() - len(tail)
                self._kept = ((tail + piece)[found.start():] if at < 0 else piece[at:]) \
                    + self._kept
                return oversized_body(n, n - left + at)
            left -= len(piece)
            tail = (tail + piece)[-_HEADER_TAIL:]
        return oversized_body(n)

    async def _read(self, n: int) -> bytes:
        try:
            return await self.reader.readexactly(n)
        except (asyncio.IncompleteReadError, ConnectionError):  # a TCP client left mid-message
            return b""

    async def _read_some(self, n: int) -> bytes:
        """What has come of up to `n` bytes (at least one; b"" at the end): the skip
        must see a header that arrives while it waits for bytes that never come."""
        try:
            return await self.reader.read_some(n)
        except ConnectionError:
            return b""


class StdinLines(StdinAsyncReader):
    """pygls' stdin reader with the line limit of asyncio's stream reader (TCP's): a
    line is read at most _LINE_LIMIT bytes at a time, and a piece of a longer one
    raises LineTooLong (asyncio's readline, a ValueError), so `_read` skips it.  No
    header line is so long; pygls read the line whole, and 50 MB without a line break held
    those 50 MB (and more, copied) before a byte was looked at.  Bodies are read by
    length (`readexactly`), never line by line."""

    def readline(self) -> Any:
        return self.loop.run_in_executor(self.executor, _bounded_line, self.stdin)

    def read_some(self, n: int) -> Any:
        """Up to `n` bytes, as many as have come (at least one; b"" at the end)."""
        read = getattr(self.stdin, "read1", self.stdin.read)
        return self.loop.run_in_executor(self.executor, read, n)


def _bounded_line(stdin: Any) -> bytes:
    """The next line of `stdin`, or LineTooLong with the next _LINE_LIMIT bytes of a line
    longer than that."""
    line = stdin.readline(_LINE_LIMIT)
    if len(line) == _LINE_LIMIT and not line.endswith(b"\n"):
        raise LineTooLong(line)
    return line


class StreamLines:
    """A TCP connection's asyncio stream reader, whose line over the limit comes as
    LineTooLong pieces with their bytes, as StdinLines' do.  asyncio's own readline
    drops such a line with a bare ValueError (a closed stream says ValueError too), and
    with it all its buffer holds, up to twice the limit and more: a header after the
    junk went with it, and how many bytes were dropped could not be said."""

    def __init__(self, stream: asyncio.StreamReader):
        self.stream = stream

    async def readline(self) -> bytes:
        try:
            return await self.stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the end, without a line break
            return exc.partial
        except asyncio.LimitOverrunError as exc:  # the bytes it found no line break in
            raise LineTooLong(await self.stream.readexactly(exc.consumed)) from None

    async def readexactly(self, n: int) -> bytes:
        return await self.stream.readexactly(n)

    async def read_some(self, n: int) -> bytes:
        return await self.stream.read(n)


def serve_stdio(server: DlmServer, stdin: Any = None, stdout: Any = None) -> None:
    """Serve one client over stdio until it leaves, sends `exit`, or a signal comes."""
    stdin = stdin or sys.stdin.buffer
    # a person typed `dlm-lsp`, not an editor: silence looked like a hang
    if getattr(stdin, "isatty", bool)():
        print("dlm-lsp: serving LSP over stdio, for an editor to start (editors/README.md); "
              "Ctrl-D ends it, `dlm-lsp --help` lists the commands (fill, status, bench, ...)",
              file=sys.stderr, flush=True)
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    reader = BoundedReader(StdinLines(stdin, server.thread_pool))
    _run(lambda: [server], _read(server, reader))


def serve_tcp(make_server: Callable[[], DlmServer], host: str, port: int,
              gate: Gate | None = None) -> None:
    """Serve TCP clients that pass `gate` (admission.py), each with a server of its own,
    until a signal comes."""
    gate = gate or Gate()
    if gate.token is None and reaches_beyond_this_machine(host):
        log.warning("listening on %s without a token: anyone who can reach this port can use "
                    "the server (set %s, see README: Security)", host, TOKEN_ENV)
    live: dict[DlmServer, None] = {}  # connections in the order they came (a set in order)
    _run(lambda: list(live), _serve_tcp(make_server, live, host, port, gate))


async def _read(server: DlmServer, reader: Any) -> None:
    """Hand each message of the stream to the protocol, until the stream ends.  Bytes
    that are no message are skipped (see HeaderReader), logged, and answered once the
    next message is found, with a parse error and a null id, as JSON-RPC answers a
    message it cannot read (which request they held, if any, cannot be known)."""
    headers = HeaderReader()
    while True:
        try:
            line = await reader.readline()
        except LineTooLong as exc:  # over the line limit (StdinLines, StreamLines)
            headers.feed_part(exc.piece, f"a line of {_LINE_LIMIT >> 10} KiB or more")
            continue
        except ValueError as exc:  # a stream closed under us: its end, as b"" is
            log.warning("the client's stream cannot be read (%s): taken as its end", exc)
            break
        if not line:
            break
        length = headers.feed(line)
        if length is None:
            continue
        if length > FIRST_MESSAGE_BYTES and server.protocol.awaiting_admission:
            text = (f"a first message of {length} bytes: before its initialize is admitted, "
                    f"a connection sends at most {FIRST_MESSAGE_BYTES >> 10} KiB")
            server.protocol.refuse(None, types.ErrorCodes.InvalidRequest, text)  # its id unread
            server.protocol.turn_away(None, types.ErrorCodes.InvalidRequest, text)
            break
        if (skipped := headers.take_skipped()) is not None:
            size, why = skipped
            text = (f"skipped {size} bytes that were no LSP message (first: {why}); "
                    "is a Content-Length wrong?")
            log.error("%s", text)
            server.protocol.refuse(None, types.ErrorCodes.ParseError, text)
        body = await reader.readexactly(length) if length else b""
        if length and not body:
            break
        _handle(server, body)
        # the handler a request started (a task) takes its first step now, where it reads
        # the document it names, before the next message: a TCP stream's reads do not
        # yield while bytes are buffered, so a request and the didChange after it in one
        # segment were both handled first, and a request without a version (dlm/infill,
        # `dlm.rewriteSelection [uri, range]`) was filled, and its edit sent, for the later
        # text (stdio's reads go through a thread and yield already)
        await asyncio.sleep(0)


def _handle(server: DlmServer, body: bytes) -> None:
    """One message body to the protocol.  JSON that cannot be read is said in one log
    line (pygls logged a traceback for each) and answered by report_server_error."""
    protocol = server.protocol
    try:
        message = json.loads(body, object_hook=protocol.structure_message)
    except (ValueError, RecursionError) as exc:
        log.warning("unreadable JSON: %s", exc)
        server.report_server_error(exc, JsonRpcException)
        return
    try:
        protocol.handle_message(message)
    except Exception as exc:  # noqa: BLE001 -- as pygls' loop: report and read on
        log.exception("unable to handle a message")
        server.report_server_error(exc, JsonRpcException)


async def _serve_tcp(make_server: Callable[[], DlmServer], live: dict[DlmServer, None],
                     host: str, port: int, gate: Gate) -> None:
    loop = asyncio.get_running_loop()

    def unadmitted_too_long(server: DlmServer, writer: asyncio.StreamWriter) -> None:
        if not server.protocol.admitted and not writer.is_closing():
            log.warning("closed a TCP connection that sent no initialize in %g s",
                        gate.admission_s)
            writer.close()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A connection costs a language server (~100 KB) and a file descriptor before it
        # says anything: idle or half-sent connections are timed out and bounded, or a port
        # scanner, a stuck client or an attacker would hold them until the server runs out
        # of descriptors and turns everyone away.  Past the bound the OLDEST waiting one
        # goes: an editor sends initialize as soon as it connects, so a flood of idle
        # connections cannot keep it out.
        waiting = [other for other in live
                   if not other.protocol.admitted and not other.protocol.writer.is_closing()]
        if len(waiting) >= gate.max_waiting:
            log.warning("closed the oldest of %d TCP connections that have not sent initialize",
                        len(waiting))
            waiting[0].protocol.writer.close()
        server = make_server()
        deadline = loop.call_later(gate.admission_s, unadmitted_too_long, server, writer)
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        server.protocol.leaves_on_exit = True  # `exit` ends this connection, not the process
        server.protocol.gate = gate
        server.protocol.admitted_elsewhere = lambda: sum(
            other.protocol.admitted for other in live if other is not server)
        live[server] = None
        try:
            await _read(server, BoundedReader(StreamLines(reader)))
        except asyncio.CancelledError:  # the process is ending (a signal); Python 3.11's
            pass  # stream callback would log a cancelled connection as an error
        finally:
            deadline.cancel()
            winding_down = server.client_left()
            if winding_down:  # let its last answers go out before the connection closes
                await asyncio.wait(winding_down, timeout=GRACE_S)
            writer.close()
            live.pop(server, None)
            server.release()

    try:
        tcp = await asyncio.start_server(connection, host, port)
    except OSError as exc:  # the port is taken, the host is not this machine's or unknown
        print(f"dlm-lsp: cannot listen on {host_port(host, port)}: {exc.strerror or exc}",
              file=sys.stderr, flush=True)
        raise SystemExit(2) from exc  # out of the event loop, to _run's exit code
    # as `--server` takes it: an IPv6 address in brackets (`[::1]:8765`)
    where = ", ".join(host_port(*s.getsockname()[:2]) for s in tcp.sockets)
    # whoever starts a team server sees where it listens, whatever the log level
    print(f"dlm-lsp: serving LSP over TCP on {where} ({gate.describe()})", file=sys.stderr,
          flush=True)
    async with tcp:
        await tcp.serve_forever()


def _answering(fills: int) -> str:
    """What a stopped server still does before it exits, for its one line."""
    if not fills:
        return ", exiting"
    return f"; answering the {fills} fill{'s' * (fills != 1)} in flight, then exiting"


def _run(servers: Callable[[], list[DlmServer]], serve: Coroutine[Any, Any, None]) -> None:
    """Run the event loop until `serve` ends, `exit` arrives, or a signal; then end the
    process with code 0, 1 after `exit` without `shutdown` (as LSP asks) or when the
    server could not run, or 2 when it could not listen where --tcp said (a port taken)."""
    code = 0
    try:
        asyncio.run(_until_signalled(servers, serve))
    except SystemExit as exc:  # the `exit` notification
        code = exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:
        log.error("the client's pipe is closed")
    except Exception:
        log.exception("dlm-lsp stopped")
        code = 1
    finally:
        for server in servers():
            server.jobs.stop_all(CLIENT_LEFT)
        logging.shutdown()
        os._exit(code)


async def _until_signalled(servers: Callable[[], list[DlmServer]],
                           serve: Coroutine[Any, Any, None]) -> None:
    loop = asyncio.get_running_loop()
    stopped = loop.create_future()
    signalled: list[signal.Signals] = []  # the signals that came, the first one heeded
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not POSIX
            loop.add_signal_handler(sig, lambda sig=sig: loop.create_task(
                _terminate(servers, stopped, sig, signalled)))
    serving = asyncio.ensure_future(serve)
    await asyncio.wait([serving, stopped], return_when=asyncio.FIRST_COMPLETED)
    if serving.done() and not serving.cancelled() and serving.exception() is not None:
        raise serving.exception()  # type: ignore[misc]


async def _terminate(servers: Callable[[], list[DlmServer]], stopped: asyncio.Future,
                     sig: signal.Signals, signalled: list[signal.Signals]) -> None:
    """On a signal: stop the fills in flight and give them GRACE_S to answer.

    Ctrl-C in a terminal, or an editor's SIGTERM, is a normal stop: it is said in one
    plain line, as every command says it (`dlm-lsp fill: stopped by SIGINT ...`), not as
    a warning in Python's logging format ("WARNING:dlm_lsp.transport:signal: ...").
    A second signal while the first winds down is the same stop, said once (`timeout
    -s INT` delivers its signal twice, and the line came twice)."""
    if signalled:
        return
    signalled.append(sig)
    serving = servers()
    print(f"dlm-lsp: stopped by {sig.name}{_answering(sum(s.jobs.in_flight() for s in serving))}",
          file=sys.stderr, flush=True)
    for server in serving:
        server.jobs.stop_all(TERMINATING)
    for _ in range(int(GRACE_S / 0.02)):
        if not any(s.jobs.in_flight() for s in serving):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)  # the answers' bytes leave the writer
    if not stopped.done():
        stopped.set_result(None)
