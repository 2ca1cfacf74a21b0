"""Who a TCP server serves: clients that know its token, up to a number of connections.

`dlm-lsp --tcp 0.0.0.0:PORT` on a team's GPU box is reachable by anyone on
the network.  With a token set (environment variable DLM_LSP_TCP_TOKEN where
the server starts; an environment variable, not an argument, so `ps` does not
show it), a connection is served only after an `initialize` request whose
`initializationOptions.token` matches; anything before that, or a wrong or
missing token, is refused and the connection closed.  Without a token the
server serves everyone who can connect, as before, and says so in its log when
it listens beyond this machine.  The token is compared in constant time and is
taken out of the options before they are read as settings.

`--max-clients` bounds the connections served at once: each has its own
documents, jobs and threads, and a team server should turn the next one away
with a clear answer rather than slow everyone down.  Connections that have
not sent `initialize` yet are bounded too, and closed after `admission_s`
(transport.py), so idle or half-sent connections cannot pile up.

The token keeps out whoever does not know it; it is no encryption.  Documents
and the token cross the network in the clear, so this fits a trusted network;
across others, use the Ray Serve service (README: Scale out) with TLS.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from dataclasses import dataclass
from typing import Any

from dlm_lsp.errors import SERVER_BUSY, UNAUTHORIZED

TOKEN_ENV = "DLM_LSP_TCP_TOKEN"
TOKEN_OPTION = "token"  # initializationOptions.token

# A message before `initialize` gets LSP's own "not initialized" (lsprotocol's
# ErrorCodes.ServerNotInitialized, written out: importing lsprotocol.types, 0.35-0.9 s, here
# put every command's first second in the window where a Ctrl-C is a traceback, as the
# command line imports this module); a full server or a missing token, the codes of
# errors.py.
NOT_INITIALIZED = -32002


def _clients(n: int) -> str:
    return f"{n} client" if n == 1 else f"{n} clients"


@dataclass
class Gate:
    """What a TCP connection must pass before it is served."""

    token: str | None = None  # None: no token asked for
    max_clients: int = 64  # connections served at once
    # A connection that has not sent its `initialize` within admission_s is closed, and
    # at most max_waiting such connections are held at once (past it, the oldest goes).
    admission_s: float = 10.0
    max_waiting: int = 64

    @classmethod
    def from_environment(cls, max_clients: int = 64, admission_s: float = 10.0) -> Gate:
        """The gate of `dlm-lsp --tcp`: the token from DLM_LSP_TCP_TOKEN, if set; as many
        connections may wait for admission as may be served."""
        return cls(os.environ.get(TOKEN_ENV) or None, max_clients, admission_s, max_clients)

    def describe(self) -> str:
        """What the server's start line says of its gate, for whoever starts a team server."""
        asks = "clients must send its token" if self.token else "no token asked"
        return f"{asks}; at most {_clients(self.max_clients)} at once"

    def refusal(self, options: Any, clients: int) -> tuple[int, str] | None:
        """Why an `initialize` with these initializationOptions is refused while `clients`
        other connections are served (code and message), or None to serve it."""
        if clients >= self.max_clients:
            return SERVER_BUSY, (f"this dlm-lsp server is serving {_clients(clients)}, its most "
                                 "(--max-clients); try again later")
        if self.token is None:
            return None
        given = options.get(TOKEN_OPTION) if isinstance(options, dict) else None
        if not isinstance(given, str) or not given:
            return UNAUTHORIZED, ("this dlm-lsp server asks for a token: set it in the editor "
                                 "(initializationOptions.token)")
        # either may hold a lone surrogate: JSON spells one, and os.environ reads bytes
        # that are not UTF-8 as such (surrogateescape); compared as they are, not refused
        # by a UnicodeEncodeError
        if not hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                                   self.token.encode("utf-8", "surrogatepass")):
            return UNAUTHORIZED, "wrong token for this dlm-lsp server"
        return None


def take_token(options: Any) -> None:
    """Remove the token from initializationOptions, so settings never see (or echo) it."""
    if isinstance(options, dict):
        options.pop(TOKEN_OPTION, None)


def reaches_beyond_this_machine(host: str) -> bool:
    """Whether listening on `host` accepts connections from other machines."""
    if not host:  # every interface
        return True
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may be any interface
        return True


def host_port(host: str, port: int) -> str:
    """HOST:PORT as a user writes it back to `--tcp`, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
