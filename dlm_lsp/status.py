"""`dlm-lsp status`: what a server (or this machine) would serve fills with, and how fast.

With `--server HOST:PORT` it asks a running server (`dlm-lsp --tcp ...`) for
`dlm/status` over a short JSON-RPC session of its own: the device, model, queue
depth, recent p50/p95 latency, tokens per second, batch occupancy, the padded
passes (`batchPadding`) and the fills that ran in them, and cache hit rate.
Without it, it loads the configured model here and reports the device, the
model's size and the calibrated cost of a denoising step, with the step budgets
that default latency targets would buy: what to expect before starting an editor.
With `--remote URL` it shows a shared service (`dlm-lsp serve-remote`): its model,
device, queue and each live replica's counters (fills and latency, then forward and
padded passes and load factor).
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from dlm_lsp.admission import TOKEN_ENV, TOKEN_OPTION, host_port
from dlm_lsp.config import KINDS, InfillOptions, ServerConfig, camel
from dlm_lsp.engine import Engine
from dlm_lsp.errors import UNAUTHORIZED
from dlm_lsp.framing import CLOSED, NOT_LSP, Client, ResponseError
from dlm_lsp.policy import step_budget


def query_server(host: str, port: int, timeout: float = 30.0,
                 token: str = "") -> dict[str, Any]:
    """`dlm/status` of the server at host:port, sending `token` (default: the variable
    DLM_LSP_TCP_TOKEN) for a server that asks for one."""
    sock = socket.create_connection((host, port), timeout=timeout)
    token = token or os.environ.get(TOKEN_ENV, "")
    with Client.over_socket(sock) as client:
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                      "initializationOptions": {TOKEN_OPTION: token} if token
                                      else None}, timeout=timeout)
        return client.request("dlm/status", {}, timeout=timeout)


def local_status(model: str = "default", device: str = "auto") -> dict[str, Any]:
    """Load the model here and measure what a step costs: at 256 and 512 tokens, lengths
    the model takes (a model of 128 tokens reported a cost at 512 it can never run; it
    gets its own length instead), and the steps that default latency targets buy."""
    engine = Engine(ServerConfig(model=model, device=device))
    loaded = engine.model
    cost = engine.step_cost()
    params = getattr(getattr(loaded, "module", None), "num_parameters", None)
    config = engine.config
    return {
        "model": model, "name": loaded.name, "device": str(loaded.device),
        "parameters": params() if callable(params) else None,
        "maxLength": loaded.max_length,
        **{f"stepMsAt{n}Tokens": round(cost.step_ms(1, n), 2)
           for n in sorted({min(n, loaded.max_length) for n in (256, 512)})},
        "defaultSteps": {camel(kind.replace("-", "_")): step_budget(config, InfillOptions(),
                                                                     kind).steps
                         for kind in KINDS},
        "stepsWithin": {f"{ms}ms": cost.steps_for(ms, 1, min(256, loaded.max_length), 4096)
                        for ms in (50, 100, 250)},
    }


# Each live replica's counters under the names `dlm/status` gives them (as `status
# --server` prints them), in two tables keyed by replica so that each fits in 100
# columns: the fills it took and their latency, then its batching worker's passes
# (padded ones: `batchPadding`) and how much slower than calibrated they ran.
REPLICA_TABLES = (
    ("replica", "pid", "device", "inFlight", "queueDepth", "fills", "cancelled", "failed",
     "p50Ms", "p95Ms"),
    ("replica", "tokensPerSecond", "batchOccupancy", "forwardPasses", "paddedPasses",
     "paddedFills", "loadFactor"),
)


def remote_status(url: str, token: str = "", ca_file: str = "") -> list[str]:
    """Lines describing a `dlm-lsp serve-remote` service: its model and each replica."""
    from dlm_lsp.remote.client import RemoteEngine
    from dlm_lsp.remote.http import Names

    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=url, remote_token=token,
                                       remote_ca_file=ca_file),
                          Names(url="--remote", token="--token", ca_file="--ca-file"))
    service = engine.service_metrics()
    replicas = service.get("replicaStats", [])
    lines = [f"service     {url}", f"model       {service.get('model')}",
             f"device      {service.get('device')}", *_counts(service)]
    for columns in REPLICA_TABLES:
        lines += ["", *_table(columns, replicas)]
    return lines


def _table(columns: tuple[str, ...], replicas: list[dict[str, Any]]) -> list[str]:
    """A header line and one line per replica, each column as wide as its widest value;
    a value a replica has not yet (the latency of no fill) is `-`, not Python's None."""
    rows = [["-" if r.get(c) is None else str(r.get(c)) for c in columns] for r in replicas]
    widths = [max(len(c), *(len(row[i]) for row in rows)) if rows else len(c)
              for i, c in enumerate(columns)]
    return ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in [list(columns), *rows]]


def _counts(service: dict[str, Any]) -> list[str]:
    """The replica count and queue depth lines.  Without its metrics board the service
    answers with one replica's counters and a null count: the rows are then not the
    service's replicas (their count was shown as "1 live" of a service of many).  That
    replica has a row in each of the `REPLICA_TABLES`, so the words speak of both."""
    if service.get("replicas") is None:
        return ["replicas    unknown (the service's metrics board is gone: the tables below "
                "hold the answering replica's row alone)",
                f"queueDepth  {service.get('queueDepth')} on the answering replica"]
    return [f"replicas    {service.get('replicas')} live",
            f"queueDepth  {service.get('queueDepth')}"]


def main(tcp: tuple[str, int] | None, model: str, device: str, remote: str | None = None,
         token: str = "", ca_file: str = "") -> int:
    if remote:
        from dlm_lsp.backends import BackendError

        try:
            print("\n".join(remote_status(remote, token, ca_file)))
        except BackendError as exc:
            print(f"dlm-lsp status: {exc}", file=sys.stderr)
            return 1
        return 0
    if tcp:
        try:
            status = query_server(*tcp, token=token)
        except (OSError, ResponseError) as exc:  # not listening, refused (token, full), gone
            if (isinstance(exc, ResponseError) and exc.error.get("code") == UNAUTHORIZED
                    and not (token or os.environ.get(TOKEN_ENV))):  # the editor's words don't fit
                exc = f"the server asks for a token: pass --token or set {TOKEN_ENV}"
            elif str(exc).startswith(NOT_LSP) or str(exc) == CLOSED:  # an HTTP service's
                # answer: "Expecting value: line 1 column 1 (char 0)", or the page skipped
                exc = (f"{str(exc).split(' (')[0]}: --server asks a `dlm-lsp --tcp` server (a "
                       "serve-remote service is asked with --remote URL)")
            elif isinstance(exc, ConnectionRefusedError):  # "[Errno 111]" says nothing of --tcp
                exc = (f"no server listens there (connection refused); --server asks one "
                       f"started with `dlm-lsp --tcp {host_port(*tcp)}`")
            print(f"dlm-lsp status: {host_port(*tcp)}: {exc}", file=sys.stderr)
            return 1
    else:
        from dlm_lsp.models import ModelLoadError, command_line_message

        try:
            status = local_status(model, device)
        except ModelLoadError as exc:  # no such model, or CUDA asked for and absent
            print(f"dlm-lsp status: {command_line_message(exc)}", file=sys.stderr)
            return 2
    width = max(len(k) for k in status)
    for key, value in status.items():
        shown = (_loaded(status) if key == "loaded" else
                 f"{value:,}" if key == "parameters" and isinstance(value, int) else
                 _shown(value))  # 23,075,328: as every other count we print, not 23075328
        print(f"{key:<{width}}  {shown}")
    return 0


def _loaded(status: dict[str, Any]) -> str:
    """The `loaded` row: a server's model loads when an editor's client initializes it
    (`initialized`; the status query's own connection does not) or at the first fill, so
    a server no editor has used yet said a bare `loaded  False`, which read as a failure."""
    if status["loaded"] is not False:
        return _shown(status["loaded"])
    if status.get("loadError") and "backend" in status:  # a remote or SGLang server's
        return "False (the server cannot be reached: loadError says why)"
    if "backend" in status:  # a service's: its own words
        return _shown(status["loaded"])
    if status.get("loadError"):
        return "False (the last load failed: loadError says why)"
    if status.get("loading"):
        return "False (loading now)"
    # not "no editor has initialized the server": one on `backend: remote` may have, and
    # never loads this model
    return ("False (not loaded yet: it loads when an editor's client on the local backend "
            "initializes the server, or at its first fill)")


def _shown(value: Any) -> str:
    """A value as the table shows it: a mapping as `key value` pairs (`singleLine 8,
    multiLine 16, rewrite 16`), not Python's `{'singleLine': 8, ...}` that `defaultSteps`
    and `stepsWithin` printed, which reads as code, not as a machine's figures."""
    if isinstance(value, dict):
        return ", ".join(f"{key} {_shown(each)}" for key, each in value.items())
    return str(value)
