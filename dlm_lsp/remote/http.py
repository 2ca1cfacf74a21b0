"""HTTP plumbing shared by the backends that talk to a service: connections (TLS when
the URL says https, with an optional CA file for a private certificate authority),
the bearer token, and cancellation of a request in flight.

A streamed answer can sit silent for a long time (a fill queued behind others), so a
blocked read cannot poll for cancellation.  `StopWatch` watches the request's
`should_stop` from a small thread and shuts the socket down, which ends the read at
once; the service sees the disconnect and stops the fill on its side.
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from dlm_lsp.backends import BackendError
from dlm_lsp.config import url_problem, visible_ascii

WATCH_INTERVAL_S = 0.02  # how often a request in flight checks for cancellation


@dataclass(frozen=True)
class Names:
    """How messages name what reaches a service: the language server's settings, or
    the options of a command (`dlm-lsp status --remote URL` has no `remoteUrl`)."""

    url: str = "remoteUrl"
    token: str = "remoteToken"
    ca_file: str = "remoteCaFile"


SETTINGS = Names()  # the editor's settings


class Unreachable(BackendError):
    """No connection to the service (refused, no route, name unknown, connect timeout)."""


def endpoint(url: str, setting: str = SETTINGS.url) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of a service URL; BackendError when unusable."""
    if not url:
        raise BackendError(f"no service URL: set '{setting}' (e.g. http://gpu-box:8000)")
    problem = url_problem(url)
    if problem is not None:
        raise BackendError(f"'{setting}' {url!r} {problem}")
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def token(configured: str, variable: str, setting: str = SETTINGS.token) -> str:
    """The bearer token: the setting, else the environment variable (none: "" names
    none), else none.  An HTTP
    header carries visible ASCII only: the setting is checked as settings are, and a
    token holding anything else (the variable's, or a command's option, which no setting
    check saw) is said to, where the fill failed as a broken connection, tried again."""
    secret = configured or (os.environ.get(variable, "") if variable else "")
    if not visible_ascii(secret):
        raise BackendError(f"{setting if configured else variable} holds characters an HTTP "
                           "header cannot carry: a token is visible ASCII characters without "
                           "spaces")
    return secret


def connect(url: str, connect_s: float, ca_file: str = "",
            names: Names = SETTINGS) -> tuple[http.client.HTTPConnection, str]:
    """An open connection to the service and the URL's path prefix.

    The timeout covers the connection only: reads then wait as long as the fill takes
    (the language server's own timeout stops them through `should_stop`)."""
    scheme, host, port, prefix = endpoint(url, names.url)
    if scheme == "https":
        try:
            context = ssl.create_default_context(cafile=ca_file or None)
        except (OSError, ssl.SSLError) as exc:
            raise BackendError(f"cannot use the CA file {ca_file!r} ({names.ca_file}): "
                               f"{exc}") from exc
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            host, port, timeout=connect_s, context=context)
    else:
        conn = http.client.HTTPConnection(host, port, timeout=connect_s)
    try:
        conn.connect()
    except ssl.SSLError as exc:
        conn.close()
        raise BackendError(f"TLS with {url} failed: {tls_failure(exc, names)}") from exc
    except OSError as exc:  # refused, unreachable, unknown name, timed out
        conn.close()
        why = "timed out" if isinstance(exc, TimeoutError) else (
            exc.strerror or str(exc))
        raise Unreachable(f"cannot reach {url}: {why}") from exc
    assert conn.sock is not None
    conn.sock.settimeout(None)
    return conn, prefix


def tls_failure(exc: ssl.SSLError, names: Names) -> str:
    """Why a TLS handshake failed, and what to set: every failure said "(for a private CA,
    set remoteCaFile)" after OpenSSL's reason alone, so a host name the certificate does
    not name (`https://localhost` for a certificate of 127.0.0.1) read as a CA missing
    where one was set, and a plain-http service at an https URL too."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or exc.reason or str(exc)
        if "mismatch" in why:  # "Hostname mismatch", "IP address mismatch"
            return f"{why} (name the host as the certificate does, in {names.url})"
        return f"{why} (for a private CA, set {names.ca_file})"
    if exc.reason == "WRONG_VERSION_NUMBER":  # the other end answered without TLS
        return ("the service there does not speak TLS (WRONG_VERSION_NUMBER): is it an "
                f"http:// one? ({names.url})")
    return f"{exc.reason or exc} (for a private CA, set {names.ca_file})"


class StopWatch:
    """While active, shuts `conn` down as soon as `should_stop()` turns true."""

    def __init__(self, conn: http.client.HTTPConnection,
                 should_stop: Callable[[], bool] | None):
        self.conn, self.should_stop = conn, should_stop
        self.stopped = False
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StopWatch:
        if self.should_stop is not None:
            self._thread = threading.Thread(target=self._watch, name="dlm-remote-watch",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop watching, and wait for the watcher, which ends at once.  A plain join, as
        it runs on the fill's thread and never on the main one (the server fills on its
        worker threads; no command fills through a service), where alone a signal
        handler runs and can interrupt it (Python 3.11 then marks a thread still running
        as ended: see bench/throughput.py, Load.run); and the watcher only waits."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    def _watch(self) -> None:
        assert self.should_stop is not None
        while not self._done.wait(WATCH_INTERVAL_S):
            if self.should_stop():
                self.stopped = True
                sock = self.conn.sock
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
