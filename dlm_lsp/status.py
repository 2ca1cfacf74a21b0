"""`dlm-lsp status`: what a server (or this machine) would serve fills with, and how fast.

With `--server HOST:PORT` it asks a running server (`dlm-lsp --tcp ...`) for
`dlm/status` over a short JSON-RPC session of its own: the device, model, queue
depth, recent p50/p95 latency, tokens per second, batch occupancy and cache hit
rate.  Without it, it loads the configured model here and reports the device,
the model's size and the calibrated cost of a denoising step, with the step
budgets that default latency targets would buy: what to expect before starting
an editor.
"""

from __future__ import annotations

import socket
from typing import Any

from dlm_lsp.config import ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.framing import Client


def query_server(host: str, port: int, timeout: float = 30.0) -> dict[str, Any]:
    """`dlm/status` of the server at host:port."""
    sock = socket.create_connection((host, port), timeout=timeout)
    with Client.over_socket(sock) as client:
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}},
                       timeout=timeout)
        return client.request("dlm/status", {}, timeout=timeout)


def local_status(model: str = "default", device: str = "auto") -> dict[str, Any]:
    """Load the model here and measure what a step costs."""
    engine = Engine(ServerConfig(model=model, device=device))
    loaded = engine.model
    cost = engine.step_cost()
    params = getattr(getattr(loaded, "module", None), "num_parameters", None)
    config = engine.config
    return {
        "model": model, "name": loaded.name, "device": str(loaded.device),
        "parameters": params() if callable(params) else None,
        "maxLength": loaded.max_length,
        "stepMsAt256Tokens": round(cost.step_ms(1, 256), 2),
        "stepMsAt512Tokens": round(cost.step_ms(1, 512), 2),
        "defaultSteps": {"singleLine": config.steps_single_line,
                         "multiLine": config.steps_multi_line,
                         "rewrite": config.steps_rewrite},
        "stepsWithin": {f"{ms}ms": cost.steps_for(ms, 1, 256, 4096) for ms in (50, 100, 250)},
    }


def main(tcp: str | None, model: str, device: str) -> int:
    if tcp:
        host, _, port = tcp.rpartition(":")
        status = query_server(host or "127.0.0.1", int(port))
    else:
        status = local_status(model, device)
    width = max(len(k) for k in status)
    for key, value in status.items():
        print(f"{key:<{width}}  {value}")
    return 0
