"""The LSP base protocol, `Content-Length: N\\r\\n\\r\\n` then a JSON body, written once.

`frame` puts a message on the wire; `MessageReader` takes bytes as they arrive and
hands back complete bodies; `Client` is a small blocking JSON-RPC client over a
socket or a pair of pipes, for the tools that talk to a running server
(`dlm-lsp status --server`, benchmarks/lsp_latency.py).  The server reads header
lines with `HeaderReader`, which finds the next message again after bytes that are
not one (transport.py reads the bodies, bounded: see `BoundedReader` there).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import json
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

_CHUNK = 1 << 20
_END_OF_HEADER = b"\r\n\r\n"


class FramingError(ValueError):
    """A header without a valid Content-Length: the stream cannot be read on."""


class ResponseError(RuntimeError):
    """The server answered a request with a JSON-RPC error."""

    def __init__(self, error: dict):
        super().__init__(error.get("message") or f"error {error.get('code')}")
        self.error = error


def frame(message: dict | bytes) -> bytes:
    """A message (or an already encoded body, sent as it is) with its header."""
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _content_length(header: bytes) -> int:
    """The Content-Length of a header block; other headers (Content-Type) are ignored."""
    length = None
    for line in header.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() != b"content-length":  # header names ignore case
            continue
        value = value.strip()
        if not value.isdigit() or (length is not None and int(value) != length):
            raise FramingError(f"invalid header line {line[:100]!r}")
        length = int(value)
    if length is None:
        raise FramingError(f"no Content-Length in the header {header[:200]!r}")
    return length


# A header field's name (an HTTP token) and its colon, at the start of a line.
_FIELD = re.compile(rb"[A-Za-z0-9!#$%&'*+.^_`|~-]+[ \t]*:")
_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
# The bytes of a line over the reader's limit kept for the line after it: a Content-Length
# field the limit cuts in two is found whole when it starts in them (it takes ~20).
_CUT_TAIL = 64


class HeaderReader:
    """The server's header lines in, one at a time; each message's body length out.

    pygls's reader takes only `Content-Length: N\\r\\n` spelt exactly so, and after
    one message whose framing is off (a Content-Length that does not match its body,
    a lower-case header name, no header at all) it never reads another: the rest of
    the stream is taken for header lines that never hold a Content-Length, and every
    later request goes unanswered while the process runs on.  Here header names
    ignore case (as HTTP's, whose header format LSP takes), and what is not a header
    is skipped up to the next Content-Length field, which is found again even in the
    middle of a line: the tail of a body that was longer than announced runs into the
    next header with no line break between them (a JSON body holds none).  A line too
    long to be a header arrives in pieces (`feed_part`), skipped but for the last bytes,
    which may hold the start of a header the rest of the line ends.  What was skipped
    is told once, with its exact size, when the next message begins (`take_skipped`).
    """

    def __init__(self) -> None:
        self._block: list[bytes] = []  # the header lines of the message being read
        self._cut = b""  # the end of a line over the limit: the next line goes on from it
        self._skipped = 0  # bytes skipped since the last message that was read
        self._why = ""

    def feed(self, line: bytes) -> int | None:
        """The body length that `line` ends a header with, or None: more lines are due."""
        if self._cut:
            line, self._cut = self._cut + line, b""
        if not line.strip():
            if not self._block:  # a line break between messages
                return None
            block, self._block = self._block, []
            try:
                return _content_length(b"\r\n".join(x.rstrip(b"\r\n") for x in block))
            except FramingError as exc:
                self.skip(sum(map(len, block)) + len(line), str(exc))
                return None
        # the last one: a document's text may hold the words, JSON-escaped on this line
        found = next(reversed(list(_CONTENT_LENGTH.finditer(line))), None)
        if found is not None and found.start() > 0:
            # a header that begins after the tail of a body longer than announced (or
            # after a body sent with no header): what was read before it is no message
            self.skip(sum(map(len, self._block)) + found.start(),
                      f"{line[:min(found.start(), 60)]!r} where a header was due")
            self._block = [line[found.start():]]
        elif self._block or _FIELD.match(line):
            self._block.append(line)
        else:
            self.skip(len(line), f"{line[:60]!r} where a header was due")
        return None

    def feed_part(self, piece: bytes, why: str) -> None:
        """A piece of a line over the reader's limit: no header line is so long, so it is
        skipped, and the header being read with it.  Its last _CUT_TAIL bytes go on to
        the next line: junk and a header may share a line (see the class docstring),
        and the limit may cut that header's Content-Length in two."""
        data = self._cut + piece
        self._cut = data[-_CUT_TAIL:]
        self.skip(sum(map(len, self._block)) + len(data) - len(self._cut), why)
        self._block = []

    def skip(self, size: int, why: str) -> None:
        """Count `size` bytes read that belong to no message (the first reason is kept)."""
        self._why = self._why or why
        self._skipped += size

    def take_skipped(self) -> tuple[int, str] | None:
        """(bytes, why) skipped since this was last asked, or None if nothing was."""
        if not self._why:
            return None
        taken, self._skipped, self._why = (self._skipped, self._why), 0, ""
        return taken


class MessageReader:
    """Bytes in, as they arrive in any pieces; complete message bodies out."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._length: int | None = None  # of the body being read, once its header is in

    def feed(self, data: bytes) -> list[bytes]:
        """The bodies that `data` completes, in order (none while one is still partial)."""
        self._buffer += data
        bodies = []
        while True:
            if self._length is None:
                end = self._buffer.find(_END_OF_HEADER)
                if end < 0:
                    return bodies
                self._length = _content_length(bytes(self._buffer[:end]))
                del self._buffer[:end + len(_END_OF_HEADER)]
            if len(self._buffer) < self._length:
                return bodies
            bodies.append(bytes(self._buffer[:self._length]))
            del self._buffer[:self._length]
            self._length = None


def read_messages(read: Callable[[], bytes]) -> Iterator[bytes]:
    """The message bodies of a stream, until `read()` returns b"" at its end."""
    reader = MessageReader()
    while chunk := read():
        yield from reader.feed(chunk)


def own_reader(pipe: BinaryIO, size: int = _CHUNK) -> Callable[[], bytes]:
    """A `read()` for a reader thread, on its own duplicate of the pipe's descriptor,
    closed when the stream ends.

    A reader holding the pipe's own descriptor number may still be about to read when
    the pipe is closed; the number is then free, the next pipe opened gets it, and
    the reader takes that pipe's data (another process's answers).  A duplicate
    stays open, and its number taken, until this reader is done with it."""
    fd = os.dup(pipe.fileno())

    def read() -> bytes:
        chunk = os.read(fd, size)
        if not chunk:
            os.close(fd)
        return chunk
    return read


# What a client says of a peer whose answer is no JSON-RPC message, and of one gone
NOT_LSP = "what answers there does not speak the language server protocol"
CLOSED = "the server closed the connection"


class Client:
    """A blocking JSON-RPC client: `request`, from any thread, waits for the response
    with its id; every other message (notifications, the server's own requests) goes
    to `on_message`, called on the reader thread."""

    def __init__(self, write: Callable[[bytes], Any], read: Callable[[], bytes],
                 close: Callable[[], Any] = lambda: None,
                 on_message: Callable[[dict], Any] = lambda message: None):
        self._write, self._close, self.on_message = write, close, on_message
        self._ids = itertools.count(1)
        self._waiting: dict[int, concurrent.futures.Future] = {}
        self._lock = threading.Lock()  # guards _waiting and _gone
        self._send_lock = threading.Lock()
        self._gone: str | None = None  # why no more answers will come
        self.finished = threading.Event()  # set when the reader has seen the end
        threading.Thread(target=self._read_all, args=(read,), daemon=True).start()

    @classmethod
    def over_socket(cls, sock: socket.socket, **kwargs: Any) -> Client:
        """A client on a connected socket; each request has its own timeout instead."""
        sock.settimeout(None)

        def close() -> None:
            with contextlib.suppress(OSError):  # wakes the reader's recv, which
                sock.shutdown(socket.SHUT_RDWR)  # close() alone leaves waiting
            sock.close()

        return cls(sock.sendall, lambda: sock.recv(_CHUNK), close, **kwargs)

    @classmethod
    def over_pipes(cls, stdin: BinaryIO, stdout: BinaryIO, **kwargs: Any) -> Client:
        """A client on a server process's stdin and stdout."""

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        def close() -> None:
            with contextlib.suppress(OSError):
                stdin.close()

        return cls(write, own_reader(stdout), close, **kwargs)

    def send(self, message: dict | bytes) -> None:
        """Send one message (or an encoded body) whole, even among other threads' sends."""
        data = frame(message)
        with self._send_lock:
            self._write(data)

    def request(self, method: str, params: Any = None, timeout: float = 120.0) -> Any:
        """The result of a request; ResponseError when the server answers with an error."""
        answer: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._gone:
                raise ConnectionError(self._gone)
            msg_id = next(self._ids)
            self._waiting[msg_id] = answer
        try:
            self.send(_message(method, params, msg_id))
            reply = answer.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"no answer to {method} in {timeout} s") from None
        finally:
            with self._lock:
                self._waiting.pop(msg_id, None)
        if "error" in reply:
            raise ResponseError(reply["error"])
        return reply.get("result")

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        self.send(_message(method, params))

    def close(self) -> None:
        """End the connection (over pipes: the server's stdin); waiting requests then fail."""
        self._close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _read_all(self, read: Callable[[], bytes]) -> None:
        gone = CLOSED
        try:
            for body in read_messages(read):
                self._received(json.loads(body))
        except OSError as exc:
            gone = f"the connection broke: {exc}"
        except ValueError as exc:  # another server's answer (an HTTP service's): no JSON
            gone = f"{NOT_LSP} ({exc})"
        with self._lock:
            self._gone = gone
            waiting, self._waiting = list(self._waiting.values()), {}
        for answer in waiting:
            answer.set_exception(ConnectionError(gone))
        self.finished.set()

    def _received(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        if "method" not in message and isinstance(message.get("id"), int):
            with self._lock:
                answer = self._waiting.pop(message["id"], None)
            if answer is not None:
                answer.set_result(message)
                return
        self.on_message(message)


def _message(method: str, params: Any, msg_id: int | None = None) -> dict:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if msg_id is not None:
        message["id"] = msg_id
    if params is not None:
        message["params"] = params
    return message
