"""Where fills run: this process, a shared dlm-lsp service, or an SGLang server.

The language server talks to one `Backend`.  The local engine (`dlm_lsp.engine.Engine`)
is the default; a team that shares GPUs points `backend: remote` at a service started
with `dlm-lsp serve-remote` (`dlm_lsp.remote`), and block-diffusion checkpoints that
SGLang serves are reached with `backend: sglang`.  All take the same `InfillRequest`
and give the same `InfillResult`, so the handlers, the stale-version check, drafts and
cancellation do not know which one ran a fill.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from dlm_lsp.config import ServerConfig
from dlm_lsp.results import InfillRequest, InfillResult

LOCAL, REMOTE, SGLANG = "local", "remote", "sglang"

# The settings that pick a backend's endpoint: a change of any of them builds a new one.
ENDPOINT = ("backend", "remote_url", "remote_token", "remote_ca_file")


def endpoint(config: ServerConfig) -> tuple:
    """Where fills run, as far as the settings say: the backend, and for a service its
    address and key.  The local engine has no address: the remote settings mean nothing
    to it (a user may fill them in before switching), and a change of one must not
    replace it, which would drop its loaded model and its figures."""
    if config.backend == LOCAL:
        return (LOCAL,)
    return tuple(getattr(config, name) for name in ENDPOINT)


def take_notices(notices: deque[str]) -> list[str]:
    """Empty a backend's `notices` and return them, oldest first, for the client of the
    fill they came with: left in place, each went with every later fill and the editors
    showed it at each.  One at a time (`popleft`), as a fill on another thread may add one
    meanwhile: a copy and a `clear()` would lose a notice added between the two."""
    taken = []
    while notices:
        taken.append(notices.popleft())
    return taken


class BackendError(RuntimeError):
    """The service a backend talks to could not give a fill; the message says why and
    what to change (unreachable, refused the token, lost the replica, ...)."""


class Backend(Protocol):
    """What the language server needs of whatever runs its fills."""

    notices: deque[str]  # what the backend changed on its own, to tell the user
    # whether `status` asks a server over the network (and so can wait for it, up to
    # `remote.retry.STATUS_TIMEOUT_S` a try): the server then asks it off its event loop
    status_waits: bool

    def infill(self, req: InfillRequest) -> InfillResult:
        """Fill the request's span (blocking; stops when `req.should_stop()` turns true)."""

    def reconfigure(self, config: ServerConfig) -> bool:
        """Adopt new settings of the same backend and endpoint; whether that leaves
        something to get ready (`preload`): a model the new settings load anew."""

    def preload(self) -> str:
        """Get ready for the first fill (load a model, reach a service); say where fills run."""

    def status(self) -> dict[str, Any]:
        """What `dlm/status` shows."""

    def retry_load(self) -> None:
        """Let the next `preload` try a load that failed at once, without the wait that
        keeps a failing load from being tried at every request (`dlm/retryLoad`)."""

    def rewrite_refusal(self, selected: str) -> str | None:
        """Why a rewrite of `selected` would be refused as too long (`policy.SpanTooLong`),
        where that is plain now, without loading a model or asking a server, and cheap:
        code actions ask at every move of a selection.  None where it would not be, or
        cannot be told yet."""

    def forget(self, uri: str) -> None:
        """Drop what is kept of a closed document."""

    def close(self) -> None:
        """Release threads and connections; the backend is not used after this."""


def make_backend(config: ServerConfig) -> Backend:
    """The backend the settings ask for (nothing is loaded or contacted yet)."""
    if config.backend == REMOTE:
        from dlm_lsp.remote.client import RemoteEngine
        return RemoteEngine(config)
    if config.backend == SGLANG:
        from dlm_lsp.remote.sglang import SGLangEngine
        return SGLangEngine(config)
    from dlm_lsp.engine import Engine
    return Engine(config)


BackendFactory = Callable[[ServerConfig], Backend]


def switch_backend(current: Backend, old: ServerConfig, new: ServerConfig,
                   make: BackendFactory = make_backend) -> tuple[Backend, bool]:
    """`current` reconfigured, or a new backend (from `make`) when the settings moved to
    another endpoint; and whether it is to be got ready (`preload`): a new one always,
    `current` when its reconfigure says so."""
    if endpoint(old) == endpoint(new):
        return current, current.reconfigure(new)
    current.close()
    return make(new), True
