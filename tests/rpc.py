"""A raw JSON-RPC client for the real server process: it can send what no LSP library
would (broken framing, junk JSON, wrong types), and it records every message in the
order it arrives, so tests can reason about what the server knew when it answered."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from dlm_lsp.framing import frame, own_reader, read_messages

SERVER = [sys.executable, "-m", "dlm_lsp"]


class Connection:
    """One client connection; answers the server's own requests (applyEdit: rejected)."""

    def __init__(self, write: Callable[[bytes], None], read: Callable[[], bytes]):
        self._write, self._read = write, read
        self.messages: list[dict] = []  # everything from the server, in arrival order
        self.closed = False
        self.apply_edit: Callable[[dict], bool] = lambda params: False
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        threading.Thread(target=self._reader, daemon=True).start()

    def send(self, message: Any) -> None:
        with self._send_lock:
            self._write(frame(message))

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        """Send a request; returns its id."""
        msg_id = next(self._ids) if msg_id is None else msg_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def notify(self, method: str, params: Any) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait(self, predicate: Callable[[list[dict]], Any], timeout: float = 30.0) -> Any:
        """Wait until predicate(messages) is truthy; return it."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not (found := predicate(self.messages)):
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    raise TimeoutError(f"no answer in {timeout} s; last: {self.messages[-3:]}")
                self._cond.wait(min(left, 0.5))
            return found

    def response(self, msg_id: Any, timeout: float = 30.0) -> dict:
        """The response to request `msg_id`."""
        return self.wait(lambda ms: next((m for m in ms if m.get("id") == msg_id
                                          and "method" not in m), None), timeout)

    def call(self, method: str, params: Any = None, timeout: float = 30.0) -> dict:
        return self.response(self.request(method, params), timeout)

    def initialize(self, options: dict | None = None) -> dict:
        reply = self.call("initialize", {"processId": None, "rootUri": None,
                                         "capabilities": {}, "initializationOptions": options})
        self.notify("initialized", {})
        return reply

    def open(self, uri: str, text: str, version: int = 1, language: str = "python") -> None:
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": version, "text": text}})

    def shown(self) -> list[str]:
        """The window/showMessage texts received so far."""
        return [m["params"]["message"] for m in self.messages
                if m.get("method") == "window/showMessage"]

    def _reader(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a broken or closed connection
            for body in read_messages(self._read):
                message = json.loads(body)
                self._answer(message)
                with self._cond:
                    self.messages.append(message)
                    self._cond.notify_all()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def _answer(self, message: dict) -> None:
        if "method" not in message or "id" not in message:
            return
        result = ({"applied": self.apply_edit(message["params"])}
                  if message["method"] == "workspace/applyEdit" else None)
        self.send({"jsonrpc": "2.0", "id": message["id"], "result": result})


class ServerProcess:
    """`python -m dlm_lsp` (or `command`) over stdio, its stderr kept in a temporary file."""

    def __init__(self, *args: str, env: dict | None = None, command: list[str] = SERVER):
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([*command, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr,
                                     env={**os.environ, **(env or {})})
        stdin, stdout = self.proc.stdin, self.proc.stdout

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        # the reader's own descriptor: after close() this pipe's number may go to the
        # next server's pipe, whose answers a reader still holding it would take
        self.client = Connection(write, own_reader(stdout, 1 << 20))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def memory_kib(self) -> tuple[int, int]:
        """(current, peak) resident memory of the server, in KiB."""
        with open(f"/proc/{self.pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def hang_up(self) -> None:
        """The client goes away: both pipes closed."""
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def log(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.hang_up()
        self.stderr.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_connection(port: int, timeout: float = 30.0) -> tuple[Connection, socket.socket]:
    """Connect to a `dlm-lsp --tcp` server, waiting for it to listen."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock.settimeout(None)
    return Connection(sock.sendall, lambda: sock.recv(1 << 20)), sock


def hang_up(sock: socket.socket) -> None:
    """Disconnect now: close() alone would wait for the reader thread's recv to return."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def error_code(reply: dict) -> int | None:
    return reply["error"]["code"] if "error" in reply else None
