"""How bytes reach the protocol: stdio and TCP, bounded messages, signals, exit.

pygls 2.1's own transport has four gaps that a hostile or unlucky client hits:

* a message is allocated at its announced Content-Length before a byte of it
  arrives: `Content-Length: 1000000000000` raises MemoryError and ends the
  server.  `BoundedReader` skips a body over MAX_MESSAGE_BYTES in chunks and
  hands on a stand-in that the protocol answers with an error;
* its TCP server has one protocol object for all connections: a second client
  takes over the answers meant for the first, and any client that disconnects
  ends the server (so `dlm-lsp status --server` would stop the server it asked).
  Here one client is served at a time; while it is connected, another waits
  HANDOVER_S for it to leave (a client reconnecting at once) and is then answered
  by `BusyProtocol`: `initialize`, `shutdown` and `dlm/status` work (so `dlm-lsp
  status --server` can look at a server an editor is using), anything else gets
  an error that says why; the server outlives its clients;
* SIGTERM killed the process mid-fill with no answer; here SIGTERM or SIGINT
  stops the fills in flight, gives them up to 2 s to answer, and exits 0;
* the stdin reader thread may sit in a read that never returns, and a normal
  interpreter exit waits for it: the process ends with os._exit instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async

from dlm_lsp.framing import frame
from dlm_lsp.jobs import CLIENT_LEFT
from dlm_lsp.protocol import MAX_MESSAGE_BYTES, STATUS, is_id, oversized_body

if TYPE_CHECKING:
    from dlm_lsp.server import DlmServer

log = logging.getLogger(__name__)

TERMINATING = "the server is terminating (signal)"
_CHUNK = 1 << 20
GRACE_S = 2.0  # how long stopped fills may take to answer (signal, client gone)
HANDOVER_S = 1.0  # how long a new TCP client waits for the previous one to be gone


class BoundedReader:
    """An async message reader that never allocates more than MAX_MESSAGE_BYTES at once."""

    def __init__(self, reader: Any):
        self.reader = reader

    def readline(self) -> Any:
        return self.reader.readline()

    async def readexactly(self, n: int) -> bytes:
        """The body of `n` bytes, or a stand-in for one over the limit (b"" at the end)."""
        if n <= MAX_MESSAGE_BYTES:
            return await self._read(n)
        left = n
        while left > 0:
            chunk = await self._read(min(left, _CHUNK))
            if not chunk:
                return b""
            left -= len(chunk)
        return oversized_body(n)

    async def _read(self, n: int) -> bytes:
        try:
            return await self.reader.readexactly(n)
        except asyncio.IncompleteReadError:  # a TCP client left mid-message
            return b""


BUSY = "dlm-lsp serves one TCP client at a time and another one is connected"


class BusyProtocol:
    """What a TCP client meets while another is served: it may look, not fill.

    `initialize` is answered with no capabilities (the client gets no features
    to call), `dlm/status` with the server's status, `shutdown` with null; any
    other request gets an InvalidRequest error naming the reason.
    """

    def __init__(self, write: Callable[[bytes], Any], status: Callable[[], dict]):
        self.write, self.status = write, status

    def structure_message(self, data: dict) -> dict:
        return data

    def handle_message(self, message: Any) -> None:
        if not (isinstance(message, dict) and "method" in message and is_id(message.get("id"))):
            return
        method = message["method"]
        if method == "initialize":
            answer: dict = {"result": {"capabilities": {}, "serverInfo": {"name": "dlm-lsp"}}}
        elif method == "shutdown":
            answer = {"result": None}
        elif method == STATUS:
            answer = {"result": {**self.status(), "otherClientConnected": True}}
        else:
            answer = {"error": {"code": types.ErrorCodes.InvalidRequest, "message": BUSY}}
        self.write(frame({"jsonrpc": "2.0", "id": message["id"], **answer}))


def serve_stdio(server: DlmServer, stdin: Any = None, stdout: Any = None) -> None:
    """Serve one client over stdio until it leaves, sends `exit`, or a signal comes."""
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    reader = BoundedReader(StdinAsyncReader(stdin or sys.stdin.buffer, server.thread_pool))
    _run(server, _read(server, reader))


def serve_tcp(server: DlmServer, host: str, port: int) -> None:
    """Serve TCP clients one at a time until `exit` or a signal comes."""
    _run(server, _serve_tcp(server, host, port))


async def _read(server: DlmServer, reader: Any) -> None:
    await run_async(stop_event=threading.Event(), reader=reader, protocol=server.protocol,
                    logger=log, error_handler=server.report_server_error)


async def _serve_tcp(server: DlmServer, host: str, port: int) -> None:
    idle = asyncio.Event()  # no client is served, and the last one's handlers have finished
    idle.set()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.TimeoutError):  # a client reconnecting at once
            await asyncio.wait_for(idle.wait(), HANDOVER_S)  # meets its old connection
        if not idle.is_set():
            busy = BusyProtocol(writer.write, server.status_report)
            await run_async(stop_event=threading.Event(), reader=BoundedReader(reader),
                            protocol=busy)  # type: ignore[arg-type]
            writer.close()
            return
        idle.clear()
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        try:
            await _read(server, BoundedReader(reader))
        finally:
            winding_down = server.client_left()
            if winding_down:  # their last answers go to this connection, not to the next
                await asyncio.wait(winding_down, timeout=GRACE_S)
            writer.close()
            idle.set()

    tcp = await asyncio.start_server(connection, host, port)
    log.info("serving on %s", ", ".join(str(s.getsockname()) for s in tcp.sockets))
    async with tcp:
        await tcp.serve_forever()


def _run(server: DlmServer, serve: Coroutine[Any, Any, None]) -> None:
    """Run the event loop until `serve` ends, `exit` arrives, or a signal; then end the
    process with code 0, or 1 after `exit` without `shutdown` (as LSP asks) or when the
    server could not run (a TCP port taken)."""
    code = 0
    try:
        asyncio.run(_until_signalled(server, serve))
    except SystemExit as exc:  # the `exit` notification
        code = exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:
        log.error("the client's pipe is closed")
    except Exception:  # e.g. the TCP port is taken
        log.exception("dlm-lsp stopped")
        code = 1
    finally:
        server.jobs.stop_all(CLIENT_LEFT)
        logging.shutdown()
        os._exit(code)


async def _until_signalled(server: DlmServer, serve: Coroutine[Any, Any, None]) -> None:
    loop = asyncio.get_running_loop()
    stopped = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not POSIX
            loop.add_signal_handler(sig, lambda: loop.create_task(_terminate(server, stopped)))
    serving = asyncio.ensure_future(serve)
    await asyncio.wait([serving, stopped], return_when=asyncio.FIRST_COMPLETED)
    if serving.done() and not serving.cancelled() and serving.exception() is not None:
        raise serving.exception()  # type: ignore[misc]


async def _terminate(server: DlmServer, stopped: asyncio.Future) -> None:
    """On a signal: stop the fills in flight and give them GRACE_S to answer."""
    log.warning("signal: stopping %d fills and exiting", server.jobs.in_flight())
    server.jobs.stop_all(TERMINATING)
    for _ in range(int(GRACE_S / 0.02)):
        if not server.jobs.in_flight():
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)  # the answers' bytes leave the writer
    if not stopped.done():
        stopped.set_result(None)
