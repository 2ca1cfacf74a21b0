"""Starting `dlm-lsp serve-remote`: a start that Ctrl-C stops, that says it is still going,
and that ends only once the service answers where the command says it serves.

Ray's start (`ray.init`, `serve.run`) ran on the main thread, where Ctrl-C went unheard:
a SIGINT while Ray added the replicas was lost and the service came up 30 s later
anyway; while Ray waited for replicas it could never place (`--replicas 3` on 2 CPUs)
or for a cluster that was not there (`--address` of nothing), Ctrl-C did nothing for
minutes, and SIGTERM killed the process with Ray's native stack dump.  The start now
runs on a thread of its own (`watched`), which then lives as long as the process (Ray's
processes die with the thread that started them), and the main thread waits, where
Python's handlers run: a signal stops the wait, takes down what Ray started (`let_go`,
bounded in time) and ends the command in one line, 130 (143), as any other command's.

Once Ray said the replicas run, the command said "service at URL" though nothing might
answer there: a certificate that does not load (the HTTP proxy fails in Ray's log
alone), or a second `serve-remote --address auto --port P` on a cluster whose Serve
already listens elsewhere (Ray keeps the first host, port and TLS and says so in one
INFO line).  `not_answering` asks the URL's open health route first.
"""

from __future__ import annotations

import http.client
import ssl
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

from dlm_lsp.remote import wire

T = TypeVar("T")

NOTE_EVERY_S = 30.0  # a line this often while the start goes on
LET_GO_S = 20.0  # the most a stop during the start waits for Ray to let go
ANSWER_WAIT_S = 20.0  # how long a service Ray says is up has to answer its health route


class NotAnswering(RuntimeError):
    """Ray deployed the replicas, but the URL does not answer (the message says why)."""


def watched(start: Callable[[], T], note: Callable[[float], None],
            let_go: Callable[[], None], every_s: float | None = None) -> T:
    """`start()`'s result, run on a thread while this one waits; `note(seconds)` each
    `every_s` (NOTE_EVERY_S) it goes on.  Ctrl-C or SIGTERM (the CLI's KeyboardInterrupt)
    during the wait calls `let_go` on a thread, for LET_GO_S at most (Ray may be stuck
    where the start stands), and goes on up.  What `start` raised is raised here."""
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, start()))
        except BaseException as exc:  # handed to the waiting thread, which raises it
            outcome.append((False, exc))
        done.set()
        # The thread lives as long as the process: the processes Ray starts here (its GCS,
        # its raylet) die with the thread that started them (Linux's parent-death signal
        # goes by thread), and ended, it took the service down a minute later
        threading.Event().wait()

    worker = threading.Thread(target=run, name="dlm-lsp-serve-remote-start", daemon=True)
    began = time.monotonic()
    worker.start()
    try:
        while not done.wait(NOTE_EVERY_S if every_s is None else every_s):  # a signal ends it
            note(time.monotonic() - began)
    except KeyboardInterrupt:
        ending = threading.Thread(target=_quietly, args=(let_go,), daemon=True)
        ending.start()
        ending.join(LET_GO_S)
        raise
    finished, value = outcome[0]
    if not finished:
        raise value
    return value


def _quietly(work: Callable[[], None]) -> None:
    try:
        work()
    except Exception as exc:  # the start it interrupts may leave Ray in any state
        print(f"dlm-lsp serve-remote: while stopping: {exc}", file=sys.stderr, flush=True)


def still_starting(seconds: float) -> None:
    """The line `watched` says while Ray starts the replicas."""
    print(f"dlm-lsp serve-remote: still starting after {seconds:.0f}s (Ray's lines above say "
          "what it waits for; Ctrl-C stops it)", file=sys.stderr, flush=True)


def not_answering(url: str, wait_s: float = ANSWER_WAIT_S) -> str | None:
    """None once `GET {url}/v1/health` answers 200 (within `wait_s`), else why not.  The
    service's own certificate is not checked (a private CA's is usual): only that https
    is spoken there.  A host of all addresses (0.0.0.0, ::) is asked on loopback."""
    parts = urlsplit(url)
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(parts.hostname or "", parts.hostname)
    deadline = time.monotonic() + wait_s
    why = "no answer"
    while True:
        left = max(0.1, deadline - time.monotonic())
        if parts.scheme == "https":
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, parts.port, timeout=min(left, 5.0), context=context)
        else:
            conn = http.client.HTTPConnection(host, parts.port, timeout=min(left, 5.0))
        try:
            conn.request("GET", wire.HEALTH_PATH)
            status = conn.getresponse().status
            if status == 200:
                return None
            why = f"HTTP {status} from {wire.HEALTH_PATH}"
        except (OSError, http.client.HTTPException) as exc:
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        finally:
            conn.close()
        if time.monotonic() >= deadline:
            return why
        time.sleep(0.5)
