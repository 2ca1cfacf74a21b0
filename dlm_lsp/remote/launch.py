"""A `dlm-lsp serve-remote` process on this machine, for benchmarks and tests.

It runs in its own session: Ray starts its workers (controller, proxy, replicas) as
children that each lead their own process group, so `stop` ends every process of the
session and nothing of Ray outlives it, even when the service itself hangs.
"""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

from dlm_lsp.remote import wire


class LocalService:
    """Start the service with `args` (serve-remote options) and talk to it over HTTP."""

    def __init__(self, args: list[str], port: int, log: IO[bytes], token: str = "",
                 ca_file: str | None = None):
        scheme = "https" if "--ssl-certfile" in args else "http"
        self.url, self.token = f"{scheme}://127.0.0.1:{port}", token
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self.log = log
        extra = ["--token", token] if token else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dlm_lsp", "serve-remote", "--port", str(port), *extra,
             *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "RAY_DEDUP_LOGS": "0"})

    def get(self, path: str, token: str | None = None, timeout: float = 5) -> Any:
        """A JSON GET; `token` None sends the service's own token, "" none."""
        token = self.token if token is None else token
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.url + path, headers=headers)
        with urllib.request.urlopen(request, timeout=timeout, context=self.context) as reply:
            return json.loads(reply.read())

    def replicas(self) -> list[dict[str, Any]]:
        """Each live replica's counters (see metrics.py)."""
        return self.get(wire.METRICS_PATH)["replicaStats"]

    def wait_for(self, count: int, timeout: float = 240,
                 exclude: frozenset[int] | set[int] = frozenset()) -> list[dict[str, Any]]:
        """Wait until `count` live replicas answer, none with an excluded pid."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the service exited:\n{self.output()}")
            try:
                live = self.replicas()
                if len(live) == count and not {r["pid"] for r in live} & set(exclude):
                    return live
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"{count} replicas not up in {timeout} s:\n{self.output()}")

    def output(self) -> str:
        """The end of the service's log."""
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        """SIGTERM (the service shuts Ray down), then SIGKILL whatever of it is left."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        for pid in session_members(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def session_members(sid: int) -> list[int]:
    """The processes of session `sid` (Linux /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[4]) == sid:  # field 6: the session id
                pids.append(int(entry))
    return pids
