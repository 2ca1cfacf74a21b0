"""A fill on a server, sent again when the server lost it and filled locally when it
cannot be had: what `backend: remote` (`client.py`) and `backend: sglang` (`sglang.py`)
share, whatever the server's API.

A fill is a pure function of its request and seed, so a fill that did not finish can
simply be sent again.  Failures fall in three kinds, and the requests made here sort
them: `Unreachable` (no connection: see `http.connect`) and `Lost` (the server took the
fill but failed it, restarted or went away mid-stream) are tried again, up to
`remoteRetries` times with a doubling pause that a stop cuts short and that is not
taken where it would end past the fill's `timeoutMs` (ten pauses add up to 256 s: the
fill could only time out, never saying why it failed nor falling back); any other
`BackendError` (a refused key, a rejected request, an answer it cannot read: `_reading`)
is not, as trying again cannot fix it.  Out of tries, `remoteFallback` fills on the
local engine instead and says so; without it the error names the setting to look at.

A subclass says how one try goes (`_once`) and how the server's HTTP status reads
(`_check`); it names the server for messages (`SERVER`) and for `dlm/status` (`BACKEND`).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from dlm_lsp.backends import BackendError
from dlm_lsp.config import ServerConfig
from dlm_lsp.policy import WITHOUT_TOKENIZER, rewrite_refusal
from dlm_lsp.quantiles import status_ms
from dlm_lsp.remote.http import (
    SETTINGS,
    WATCH_INTERVAL_S,
    Names,
    StopWatch,
    Unreachable,
    connect,
    token,
)
from dlm_lsp.remote.wire import TOKEN_VARIABLE
from dlm_lsp.results import InfillRequest, InfillResult
from dlm_lsp.sampler import Cancelled

RETRY_PAUSE_S = 0.25  # first pause before a retry; doubles each time
# While fills fall back because the server cannot be reached, one fill this often tries
# it first (once, no retries); the others go to the local engine at once.
RECHECK_S = 10.0
STATUS_TIMEOUT_S = 2.0  # `dlm/status` and the start-up check never wait longer
PAUSE_POLL_S = 0.02  # how often a pause checks whether the fill was stopped

T = TypeVar("T")


class Lost(BackendError):
    """The server took the fill but did not finish it (it failed, restarted or went away)."""


class Unanswered(Unreachable):
    """The server took the connection and the fill, and did not start answering within
    `remoteConnectMs`: hung (a stopped process, a proxy whose replicas are gone) or too
    busy to start it.  Looked for only with `remoteFallback`, where the fill goes local
    at once, not tried again: without it, the fill waits for its answer as long as
    `timeoutMs` allows, as one queued behind others on a busy service must."""


def stop_if_asked(req: InfillRequest) -> None:
    """Raise Cancelled when the request has been stopped."""
    if req.should_stop is not None and req.should_stop():
        raise Cancelled()


def pause(req: InfillRequest, seconds: float) -> bool:
    """Wait before a retry; False when the request was stopped meanwhile."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if req.should_stop is not None and req.should_stop():
            return False
        time.sleep(PAUSE_POLL_S)
    return True


class ConnectionPool:
    """Idle keep-alive connections to the server, each with its URL path prefix.

    A new connection costs a TCP handshake and, over https, a TLS one: round trips
    that a fill against a fast GPU service would otherwise pay every time."""

    def __init__(self, size: int = 8):
        self.size = size
        self._idle: deque[tuple[http.client.HTTPConnection, str]] = deque()
        self._lock = threading.Lock()
        self.reused = 0  # fills sent on a pooled connection

    def take(self) -> tuple[http.client.HTTPConnection, str] | None:
        with self._lock:
            if self._idle:
                self.reused += 1
                return self._idle.pop()
        return None

    def give(self, idle: tuple[http.client.HTTPConnection, str]) -> None:
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append(idle)
                return
        idle[0].close()

    def close(self) -> None:
        with self._lock:
            while self._idle:
                self._idle.pop()[0].close()


class ServerBackend:
    """The part of a `Backend` on a server that does not depend on the server's API."""

    BACKEND = ""  # the `backend` setting, as `dlm/status` shows it
    status_waits = True  # `status` asks the server (`Backend.status_waits`)
    SERVER = ""  # how messages name the server: "<SERVER> at <remoteUrl>"
    LABEL = ""  # how `dlm/status` names an unreachable server: "<LABEL> at <remoteUrl>"
    # the served model's tokenizer is on the server: a rewrite is judged too long here only
    # on a count of tokens real code is far above (`WITHOUT_TOKENIZER`)
    LENGTH: Any = WITHOUT_TOKENIZER
    # what to check when a whole line of the server's answer is not of its protocol; {url}:
    # how the user gave the server's URL (`names.url`)
    UNREADABLE = ""

    def __init__(self, config: ServerConfig, names: Names = SETTINGS):
        self.config = config
        self.names = names  # how messages name the URL, token and CA file the user gave
        # Whether an empty token setting is this process's TOKEN_VARIABLE: not for a
        # client of a `--tcp` server (start_tcp), whose settings are a stranger's to the
        # process: a client that set `remoteUrl` to a listener of its own was sent the
        # token of whoever started the server.
        self.environment_token = True
        self.notices: deque[str] = deque(maxlen=16)
        self._local: Any = None  # the local engine, made on the first fallback
        # Whether the user was told that fills run locally: once an outage, not at every
        # fill (ghost text asks at each pause in typing), again after the server answered.
        self._told_fallback = False
        # The server unreachable at the last try, with fallback on, and when to try again
        # (`RECHECK_S`): each fill paid the retries' pauses first, 1.0-1.2 s against a
        # local fill's 0.25 s, at every pause in typing for as long as the server was down.
        self._down: Unreachable | None = None
        self._recheck_at = 0.0
        # who tries the server while it is down, and who makes the local engine: fills run
        # on several threads, and those that came while a recheck connected each tried
        # too (5 s each, the connect timeout, against a host that drops packets)
        self._turn = threading.Lock()
        self.fills = self.retries = self.fallbacks = 0
        self.recent_fills: deque[float] = deque(maxlen=512)  # ms, as this client saw them
        self._pool = ConnectionPool()

    # -- what a subclass provides ---------------------------------------------------------

    def _check(self, response: http.client.HTTPResponse, path: str) -> None:
        """Raise for an answer other than HTTP 200: `Lost` where a retry may help."""
        raise NotImplementedError

    # -- the Backend methods both share ---------------------------------------------------

    def retry_load(self) -> None:
        """The service is asked anew at each `preload`, without a wait; only the local
        engine fills fall back to (`remoteFallback`) waits after a failed load."""
        if self._local is not None:
            self._local.retry_load()

    def reconfigure(self, config: ServerConfig) -> bool:
        """Adopt new fill settings (the server and key stay: see `switch_backend`).  The
        server keeps its own model whatever ours say, so there is nothing to get ready:
        the local fallback's model, if any, is loaded when a fill falls back."""
        self.config = config
        if self._local is not None:
            self._local.reconfigure(config)
        return False

    def rewrite_refusal(self, selected: str) -> str | None:
        """Why a rewrite of `selected` would be refused as too long, counted by `LENGTH`
        (the server may still refuse one that passes here)."""
        return rewrite_refusal(selected, self.config, self.LENGTH)

    def forget(self, uri: str) -> None:
        """Nothing of a document is kept here (the local fallback may keep some)."""
        if self._local is not None:
            self._local.forget(uri)

    def close(self) -> None:
        """Close the idle connections and the local fallback, if any."""
        self._pool.close()
        if self._local is not None:
            self._local.close()

    # -- retries and the fallback ---------------------------------------------------------

    def _with_retries(self, req: InfillRequest, once: Callable[[], InfillResult]) -> InfillResult:
        """`once()`, tried again while the server is unreachable or loses the fill and
        the pause before the next try ends within `timeoutMs`, then the local engine's
        fill (with `remoteFallback`) or the last error."""
        began = time.perf_counter()
        deadline = began + self.config.timeout_ms / 1000
        down_at = self._down if self.config.remote_fallback else None
        if down_at is not None:
            with self._turn:  # one fill a while is the recheck, the others go local at once
                rechecking = time.monotonic() >= self._recheck_at
                if rechecking:
                    self._recheck_at = turn = time.monotonic() + RECHECK_S
            if not rechecking:
                return self._fall_back(req, down_at, 0)  # not tried: down a moment ago
            try:
                return self._tried(req, once, began, deadline, 1)
            except Cancelled:  # stopped before the server answered or was found down
                with self._turn:  # (superseded, typed on): the next fill rechecks
                    if self._recheck_at == turn:
                        self._recheck_at = 0.0
                raise
        return self._tried(req, once, began, deadline, 1 + self.config.remote_retries)

    def _tried(self, req: InfillRequest, once: Callable[[], InfillResult], began: float,
               deadline: float, tries: int) -> InfillResult:
        """`once()`, up to `tries` times, then the fallback's fill or the error."""
        for attempt in range(tries):
            try:
                result = once()
            except (Unreachable, Lost) as exc:
                wait = RETRY_PAUSE_S * 2 ** attempt
                if (attempt + 1 < tries and not isinstance(exc, Unanswered)
                        and time.perf_counter() + wait < deadline and pause(req, wait)):
                    self.retries += 1
                    continue
                if req.should_stop is not None and req.should_stop():
                    raise Cancelled() from exc
                self._found_down(exc)
                return self._fall_back(req, exc, attempt + 1)
            self.fills += 1
            self.recent_fills.append((time.perf_counter() - began) * 1000)
            self._told_fallback = False
            self._down = None
            return result
        raise AssertionError("unreachable: the loop returns or raises")

    def _found_down(self, exc: BackendError) -> None:
        """With `remoteFallback`, a server found unreachable is taken as down: the fills
        of the next `RECHECK_S` go local at once (`_with_retries`)."""
        if isinstance(exc, Unreachable) and self.config.remote_fallback:
            self._down, self._recheck_at = exc, time.monotonic() + RECHECK_S

    def _fall_back(self, req: InfillRequest, exc: BackendError, tries: int) -> InfillResult:
        """The local engine's fill when the server cannot serve it and fallback is on."""
        setting = "remoteRetries" if isinstance(exc, Lost) else "remoteUrl"
        if not self.config.remote_fallback:
            raise BackendError(f"{exc} (tried {tries} time{'s' * (tries != 1)}; see setting "
                               f"{setting}, or remoteFallback to fill locally)") from exc
        from dlm_lsp.engine import Engine
        with self._turn:  # one local engine, whatever fills fall back at once
            if self._local is None:
                self._local = Engine(self.config)
        self.fallbacks += 1
        if not self._told_fallback:
            self._told_fallback = True
            self.notices.append(f"{exc}: fills run on the local engine until it answers "
                                "(setting remoteFallback; dlm/status counts them)")
        return self._local.infill(req)

    def _falls_back(self, exc: BackendError) -> bool:
        """Whether fills fall back to the local engine on `exc`, as `_with_retries` does: a
        server unreachable or losing fills, with `remoteFallback`.  Its other errors (a
        token refused, another web server's page, a TLS failure) fail the fills; start-up
        and `dlm/status` said of them that fills would run locally."""
        return self.config.remote_fallback and isinstance(exc, (Unreachable, Lost))

    @staticmethod
    def _falling_back(exc: BackendError) -> str:
        """What `preload` and `dlm/status` say when the server did not answer and fills
        may fall back."""
        return f"{exc}; fills will run on the local engine until it answers " + (
            "(setting remoteFallback)")

    def _starting_down(self, exc: BackendError) -> str:
        """What `preload` says when the server did not answer and fills fall back, the
        server then taken as down (`_found_down`): the start said fills run locally, and
        the first ones still tried it, each held for a hung server's whole `timeoutMs`."""
        self._found_down(exc)
        return self._falling_back(exc)

    def _status(self, ask: Callable[[], dict[str, Any]],
                describe: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """`dlm/status`: this client's figures, and what `describe` makes of the server's
        answer to `ask`; unreachable, `loaded` is false and `model` names the server
        (editors' health checks read both).  `loadError` and `loading` say what a local
        engine's say, why no model fills and whether one is on its way: the server's
        model is loaded before it answers, so a server that answers has it and one that
        does not is the reason (also in `problem`).  Without them a status of the server
        unreachable read as a load under way: VS Code's status bar showed "loading" and
        asked again for as long as the server was down, and Neovim said "loading"."""
        mine = {**self._figures(), "loading": False}
        try:
            answer = ask()
        except BackendError as exc:
            why = self._falling_back(exc) if self._falls_back(exc) else str(exc)
            return {**mine, "reachable": False, "loaded": False, "loadError": why,
                    "model": f"{self.LABEL} at {self.config.remote_url}", "problem": str(exc)}
        return {**mine, "reachable": True, "loaded": True, "loadError": None, **describe(answer)}

    def _figures(self) -> dict[str, Any]:
        """This client's part of `dlm/status`: its fills, retries, fallbacks and latency."""
        ms = list(self.recent_fills)
        return {"backend": self.BACKEND, "url": self.config.remote_url, "fills": self.fills,
                "retries": self.retries, "fallbacks": self.fallbacks,
                "p50Ms": status_ms(ms, 0.5), "p95Ms": status_ms(ms, 0.95)}

    # -- requests -------------------------------------------------------------------------

    def _tls_hint(self, exc: Exception) -> str:
        """What to check where a plain-http request got no answer at all: an https service
        closes such a connection so, and the fill was said lost, to be tried again
        (`remoteRetries`), where the URL's scheme was the mistake."""
        if (isinstance(exc, (http.client.RemoteDisconnected, ConnectionResetError))
                and self.config.remote_url.lower().startswith("http://")):
            return (f"; if the service was started with --ssl-certfile, {self.names.url} "
                    "takes https:// (it closes a plain-http connection so)")
        return ""

    def _at(self) -> str:
        return f"{self.SERVER} at {self.config.remote_url}"

    def _headers(self, accept: str) -> dict[str, str]:
        """A JSON request's headers, with the key as `Authorization: Bearer` when set."""
        headers = {"Content-Type": "application/json", "Accept": accept}
        secret = self._token()
        if secret:
            headers["Authorization"] = f"Bearer {secret}"
        return headers

    def _token(self) -> str:
        """The token sent: the setting, or where it is empty and `environment_token`
        allows, the environment's."""
        return token(self.config.remote_token,
                     TOKEN_VARIABLE if self.environment_token else "", self.names.token)

    def _where_the_token_goes(self) -> str:
        """Where a refused token is set, for the message that says so."""
        if self.environment_token:
            return f"{self.names.token} or {TOKEN_VARIABLE}"
        return (f"{self.names.token} (this server's {TOKEN_VARIABLE} is not lent to the "
                "clients of a --tcp server)")

    def _connect(self, connect_s: float | None = None) -> tuple[http.client.HTTPConnection, str]:
        return connect(self.config.remote_url, connect_s or self.config.remote_connect_ms / 1000,
                       self.config.remote_ca_file, self.names)

    def _connect_for(self, req: InfillRequest) -> tuple[http.client.HTTPConnection, str]:
        """`_connect()`, given up (Cancelled) as soon as the fill is stopped.  A connect
        that hangs (a host that drops packets) held the fill's thread, one of the server's
        few, for up to `remoteConnectMs` (5 s) after the fill was superseded or timed out.
        The attempt goes on on a thread of its own, which closes what it gets."""
        if req.should_stop is None:
            return self._connect()
        lock, done = threading.Lock(), threading.Event()
        outcome: list[Any] = []  # the connection, or what connecting raised
        abandoned = False

        def attempt() -> None:
            try:
                got: Any = self._connect()
            except BaseException as exc:  # noqa: BLE001 -- handed to the fill's thread
                got = exc
            with lock:
                if abandoned:
                    if not isinstance(got, BaseException):
                        got[0].close()
                    return
                outcome.append(got)
                done.set()
        threading.Thread(target=attempt, name="dlm-remote-connect", daemon=True).start()
        while not done.wait(WATCH_INTERVAL_S):
            if req.should_stop():
                with lock:
                    if not done.is_set():
                        abandoned = True
                        raise Cancelled()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    def _post(self, req: InfillRequest, path: str, body: bytes, accept: str,
              read: Callable[[http.client.HTTPResponse], T]) -> T:
        """POST a fill and `read` the streamed answer; the connection is cut as soon as
        the request is stopped (Cancelled), and a broken one is `Lost`.

        A connection whose answer was read to its end goes back to the pool for the next
        fill (no new TCP and TLS handshake).  The server may have closed a pooled
        connection while it sat idle: when such a connection fails before any answer,
        the fill is sent once more on a new one, which is not a retry."""
        pooled = self._pool.take()
        conn, prefix = pooled if pooled is not None else self._connect_for(req)
        keep = False
        # with a fallback to go to, the wait for the answer's start is bounded (`Unanswered`)
        start_s = self.config.remote_connect_ms / 1000 if self.config.remote_fallback else None
        answering = False  # the answer's start came (a timeout after it is no `Unanswered`)

        def send() -> http.client.HTTPResponse:
            nonlocal answering
            sock = conn.sock  # the response's, also where the connection lets it go (close)
            sock.settimeout(start_s)
            conn.request("POST", prefix + path, body, self._headers(accept))
            response = conn.getresponse()
            answering = True
            sock.settimeout(None)  # the answer's lines come as the fill's steps do
            return response
        try:
            with StopWatch(conn, req.should_stop) as watch:
                try:
                    try:
                        response = send()
                    # a pooled connection a NAT or balancer dropped while idle, without a
                    # word, is silent until `start_s`: not the service found down
                    except (http.client.RemoteDisconnected, ConnectionError, TimeoutError):
                        if pooled is None or watch.stopped:
                            raise
                        conn.close()  # gone while idle: a fresh connection, same watch
                        conn, prefix = self._connect_for(req)
                        watch.conn = conn
                        response = send()
                    self._check(response, path)
                    result = read(response)
                    response.read()  # the end of the stream, so the connection can be reused
                    keep = not response.will_close and not watch.stopped
                    return result
                except (OSError, http.client.HTTPException, ValueError, BackendError) as exc:
                    if watch.stopped:  # the watch cut the connection: the fill was stopped
                        raise Cancelled() from exc
                    if isinstance(exc, BackendError):
                        raise
                    if isinstance(exc, TimeoutError) and start_s is not None \
                            and not answering:  # (TCP's own ETIMEDOUT is one too: `Lost`)
                        raise Unanswered(
                            f"{self._at()} took the fill and did not start answering within "
                            f"{self.config.remote_connect_ms} ms (remoteConnectMs): hung, or "
                            "too busy to start it") from exc
                    raise Lost(f"the connection to {self._at()} broke during the fill "
                               f"({exc or type(exc).__name__}){self._tls_hint(exc)}") from exc
        finally:
            if keep:
                self._pool.give((conn, prefix))
            else:
                conn.close()

    @staticmethod
    def _whole_line(response: http.client.HTTPResponse, lost: str) -> bytes:
        """The next line of a streamed answer, b"" at its end; `Lost` (tried again) for
        a line cut short: the server or the connection went away within it."""
        raw = response.readline()
        if raw and not raw.endswith(b"\n"):
            raise Lost(lost)
        return raw

    @contextmanager
    def _reading(self, raw: bytes) -> Iterator[None]:
        """Around the reading of one whole line of an answer: a line not of the server's
        protocol (another server's page, an answer of another version) is a `BackendError`
        that shows it and says what to check (`UNREADABLE`), not retried.  Left alone, a
        parse error read as a broken connection (`_post`), tried again to no end, and a
        KeyError or TypeError reached the editor as an internal error."""
        try:
            yield
        except (ValueError, LookupError, TypeError, AttributeError) as exc:
            raise BackendError(f"{self._at()} answered what this client cannot read "
                               f"({raw[:80]!r}: {type(exc).__name__} {exc}): "
                               f"{self.UNREADABLE.format(url=self.names.url)}") from exc

    def _get(self, *paths: str) -> dict[str, Any]:
        """A small JSON GET with a short timeout; the next path when one is not found.
        An answer that is not a JSON object is said as such (`_reading`): it was taken
        for no answer at all (Unreachable, tried again), or raised AttributeError where
        it was read."""
        for i, path in enumerate(paths):
            conn, prefix = self._connect(min(STATUS_TIMEOUT_S,
                                             self.config.remote_connect_ms / 1000))
            try:
                conn.sock.settimeout(STATUS_TIMEOUT_S)
                conn.request("GET", prefix + path, headers=self._headers("application/json"))
                response = conn.getresponse()
                if response.status == 404 and i + 1 < len(paths):
                    continue
                self._check(response, path)
                raw = response.read()
            except (OSError, http.client.HTTPException, ValueError) as exc:
                raise Unreachable(f"{self._at()} did not answer {path}: "
                                  f"{exc or type(exc).__name__}{self._tls_hint(exc)}") from exc
            finally:
                conn.close()
            with self._reading(raw):
                answer = json.loads(raw)
                if not isinstance(answer, dict):
                    raise TypeError(f"an answer to {path} that is a {type(answer).__name__}, "
                                    "not an object")
            return answer
        raise AssertionError("unreachable: the last path returns or raises")
