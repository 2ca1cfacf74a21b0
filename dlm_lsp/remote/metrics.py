"""The service's metrics: each replica's counters, gathered so any replica can answer.

Ray Serve routes `GET /v1/metrics` to one replica, which knows only itself; so every
replica publishes its counters each second to one named actor (`MetricsBoard`), and
the answer lists every replica heard from recently, in the Prometheus text format.
"""

from __future__ import annotations

import time
from typing import Any

import ray

NAMESPACE = "dlm-lsp"  # the Ray namespace of the boards
GONE_AFTER_S = 5.0  # a replica silent this long is left out of the metrics


def board_name(app: str) -> str:
    """The board of one Serve application: two services on one shared cluster (two
    `--name`s) keep their counters apart."""
    return f"dlm-lsp-metrics-{app}"


def create_board(app: str) -> Any:
    """Create the application's board; the driver does this before any replica starts.
    Replicas only look it up (`find_board`): two replicas that each got-or-created it at
    start raced, and the one that lost could keep a handle whose calls never returned
    (a CI run saw one replica's `/v1/metrics` time out for four minutes, and the other
    replica never heard of it)."""
    return MetricsBoard.options(name=board_name(app), namespace=NAMESPACE,
                                get_if_exists=True, lifetime="detached").remote()


def find_board(app: str) -> Any:
    """The application's board, created by the driver (raises ValueError if it is not)."""
    return ray.get_actor(board_name(app), namespace=NAMESPACE)


@ray.remote(num_cpus=0)
class MetricsBoard:
    """The latest counters of each replica, with the time they were published."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[float, dict[str, Any]]] = {}

    def publish(self, replica: str, stats: dict) -> None:
        self.entries[replica] = (time.time(), stats)

    def live(self) -> list[dict[str, Any]]:
        now = time.time()
        return [stats for at, stats in self.entries.values() if now - at < GONE_AFTER_S]


# name -> (Prometheus type, help): the counters each replica publishes
_METRICS = {
    "fills": ("counter", "Fills finished."),
    "cancelled": ("counter", "Fills stopped because their client went away or cancelled."),
    "failed": ("counter", "Fills that ended in an error."),
    "inFlight": ("gauge", "Fills the replica holds now."),
    "queueDepth": ("gauge", "Fills waiting or running in the replica's batching worker."),
    "forwardPasses": ("counter", "Forward passes run, batched or alone."),
    "paddedPasses": ("counter", "Forward passes that padded shorter rows (batchPadding)."),
    "paddedFills": ("counter", "Fills that ran in at least one padded pass."),
    "loadFactor": ("gauge", "Measured over predicted forward-pass time (1 on a quiet machine)."),
    "batchOccupancy": ("gauge", "Mean rows per forward pass over the batch limit."),
    "p50Ms": ("gauge", "Median fill time in milliseconds (recent fills)."),
    "p95Ms": ("gauge", "95th percentile fill time in milliseconds (recent fills)."),
    "tokensPerSecond": ("gauge", "Span tokens denoised per second (recent fills)."),
}


def prometheus(replicas: list[dict[str, Any]], whole: bool = True) -> str:
    """The replicas' counters in the Prometheus text exposition format, and their count
    where they are every live replica (`whole`; else one replica's own, the count
    unknown: left out)."""
    out = []
    for key, (kind, text) in _METRICS.items():
        name = "dlm_lsp_" + "".join("_" + c.lower() if c.isupper() else c for c in key)
        name += "_total" if kind == "counter" else ""
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for r in replicas:
            if r.get(key) is not None:
                out.append(f'{name}{{replica="{r["replica"]}",pid="{r["pid"]}"}} {r[key]}')
    if whole:
        out += ["# HELP dlm_lsp_replicas Live replicas.", "# TYPE dlm_lsp_replicas gauge",
                f"dlm_lsp_replicas {len(replicas)}"]
    return "\n".join(out) + "\n"
