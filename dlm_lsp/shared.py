"""One engine for every client of a TCP server: one model, shared forward passes.

Several editors (a team on one GPU box, or one user's editor and `dlm-lsp
status`) can connect to one `dlm-lsp --tcp` server at once.  Each connection
has its own language-server state (documents, settings, jobs, cancellation),
and all of them fill on one local `Engine`: the model is loaded once, and the
engine's batching worker puts fills of different clients into the same forward
passes.

Settings split as they do for the remote service: a client's fill settings
(steps, strategy, lengths, validation, ...) travel with each of its requests
(`InfillRequest.config`), so clients never change each other's fills.  The
engine's own settings (`ENGINE_SETTINGS`: which model, where, in what precision,
how many rows a pass) belong to the process: a client that is alone applies
them, as over stdio (also when the others leave); while others are connected, a
client that asks for different ones is told that they stay as they are.  Different
in what they load (`engine.loads_apart`): a client's "cpu" where the engine's "auto"
is the CPU asks for the model it already gets, and is told nothing.  Only
admitted clients count (`join`'s `counted`): a connection that has not sent its `initialize`
yet (a port scan, a slow client; closed after admission.py's time) is no one's
company, or it would keep the first real client's model setting from applying.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dlm_lsp.backends import take_notices
from dlm_lsp.config import ServerConfig, camel
from dlm_lsp.engine import LOADED_WITH, Engine, loads_apart
from dlm_lsp.results import InfillRequest, InfillResult

ENGINE_SETTINGS = (*LOADED_WITH, "batch_rows", "batch_padding")


class EnginePool:
    """The process's engine and the clients using it."""

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.members: list[SharedEngine] = []
        # every connection, on whatever backend: (counted, holds), as `join` takes them.
        # A client that moved to `backend: remote` left the members, and `status --server`
        # then counted neither it nor its documents (`clients 1` beside an editor).
        self.connections: list[tuple[Callable[[], bool], Callable[[], dict[str, int]]]] = []
        self.lock = threading.Lock()

    def connect(self, counted: Callable[[], bool],
                holds: Callable[[], dict[str, int]]) -> Callable[[], None]:
        """Count a connection among the server's clients, whatever its backend, until the
        function returned is called (its end)."""
        entry = (counted, holds)
        with self.lock:
            self.connections.append(entry)

        def gone() -> None:
            with self.lock:
                if entry in self.connections:
                    self.connections.remove(entry)
        return gone

    def census(self) -> tuple[int, dict[str, int]]:
        """The clients admitted, on any backend, and what they hold together: over TCP
        every connection's; a pool used without connections (the tests') its members'."""
        with self.lock:
            counted = ([holds for admitted, holds in self.connections if admitted()]
                       if self.connections else [view.holds for view in self.clients()])
        total: dict[str, int] = {}
        for holds in counted:
            for name, count in holds().items():
                total[name] = total.get(name, 0) + count
        return len(counted), total

    def join(self, config: ServerConfig, counted: Callable[[], bool] = lambda: True,
             holds: Callable[[], dict[str, int]] = dict) -> SharedEngine:
        """A new client's view of the engine (created by the first client's settings);
        `counted` says whether it counts among the clients yet (over TCP: once its
        connection is admitted); `holds`, what its connection holds (`DlmServer.holds`),
        summed over the clients in the status (`allClients`)."""
        with self.lock:
            if self.engine is None:
                self.engine = Engine(config)
            view = SharedEngine(self, self.engine, config, counted, holds)
            self.members.append(view)
        view.reconfigure(config)
        return view

    def clients(self) -> list[SharedEngine]:
        """The members that count: those admitted (call with the lock held)."""
        return [view for view in self.members if view.counted()]

    def leave(self, view: SharedEngine) -> None:
        """A client is gone; the engine (and its loaded model) stays for the next.  A
        client left alone gets the engine settings it asked for."""
        with self.lock:
            if view not in self.members:
                return
            self.members.remove(view)
            clients = self.clients()
            alone = clients[0] if len(clients) == 1 else None
        if alone is not None:
            alone.reconfigure(alone.config)


class SharedEngine:
    """One client's backend: the shared engine, with this client's fill settings."""

    status_waits = False  # the shared engine is a local one (`Backend.status_waits`)

    def __init__(self, pool: EnginePool, engine: Engine, config: ServerConfig,
                 counted: Callable[[], bool], holds: Callable[[], dict[str, int]] = dict):
        self.pool, self.engine, self.config, self.counted = pool, engine, config, counted
        self.holds = holds
        self.notices: deque[str] = deque(maxlen=16)
        self.setting_problems: list[str] = []  # settings this client asked for in vain

    def infill(self, req: InfillRequest) -> InfillResult:
        try:
            return self.engine.infill(replace(req, config=self.config))
        finally:
            # e.g. an out-of-memory fallback: tell this client
            self.notices.extend(take_notices(self.engine.notices))

    def reconfigure(self, config: ServerConfig) -> bool:
        """Adopt a client's settings: all of them when it is the only client, else only
        its fill settings (and a notice naming the engine settings that stay: those that
        would load another model, see `loads_apart`, or set other rows a pass).  Whether
        the engine has a model to load again: never while shared, as it keeps its own."""
        self.config = config
        self.setting_problems = []
        with self.pool.lock:
            others = sum(1 for view in self.pool.clients() if view is not self)
            if others == 0:
                return self.engine.reconfigure(config)
            current = self.engine.config
            apart = set(loads_apart(current, config)) | {
                name for name in ENGINE_SETTINGS
                if name not in LOADED_WITH and getattr(config, name) != getattr(current, name)}
            kept = {camel(name): getattr(current, name) for name in ENGINE_SETTINGS
                    if name in apart}
        if kept:
            kept_text = ", ".join(f"{name} {value!r}" for name, value in kept.items())
            self.setting_problems.append(
                f"this server is shared with {others} other client(s), so its engine keeps "
                f"its settings: {kept_text}")
        return False

    def preload(self) -> str:
        return self.engine.preload()

    def retry_load(self) -> None:
        self.engine.retry_load()  # the wait is the engine's, whichever client asks

    def status(self) -> dict[str, Any]:
        """The engine's status, the clients it serves (the asking one among them), and what
        all their connections hold together (`allClients`): a client's own `jobsInFlight`
        and `openDocuments` are its connection's, and `dlm-lsp status --server`, a client of
        its own that holds nothing, read 0 of both beside two editors' four fills."""
        clients, total = self.pool.census()
        return {**self.engine.status(), "clients": clients, "allClients": total}

    def rewrite_refusal(self, selected: str) -> str | None:
        """Told by this client's `maxSpanTokens`, which its rewrites are refused by."""
        return self.engine.rewrite_refusal(selected, self.config)

    def forget(self, uri: str) -> None:
        self.engine.forget(uri)

    def close(self) -> None:
        self.pool.leave(self)

