"""`backend: remote`: the language server as a thin client of a shared dlm-lsp service.

Each fill is one `POST /v1/infill` (see `wire.py`).  A fill is a pure function of
the request and its seed, so a fill whose replica failed (HTTP 5xx) or was lost
mid-stream is simply sent again, up to `remoteRetries` times; the service routes it
to a live replica.  What cannot be served ends in a `BackendError` that says why and
which setting to look at; with `remoteFallback` an unreachable service is replaced
by the local engine for that fill, and the user is told (both in `retry.py`, which
`backend: sglang` shares).
"""

from __future__ import annotations

import http.client
import json
from typing import Any

from dlm_lsp.backends import BackendError
from dlm_lsp.policy import SpanTooLong
from dlm_lsp.remote import wire
from dlm_lsp.remote.retry import Lost, ServerBackend
from dlm_lsp.results import InfillRequest, InfillResult
from dlm_lsp.sampler import Cancelled


class RemoteEngine(ServerBackend):
    """A `Backend` that sends every fill to a dlm-lsp service."""

    BACKEND = "remote"
    SERVER = "the remote engine"
    LABEL = "remote engine"
    UNREADABLE = ("is {url} a dlm-lsp serve-remote service, of the same version as this "
                  "dlm-lsp?")

    # -- Backend -------------------------------------------------------------------------

    def infill(self, req: InfillRequest) -> InfillResult:
        """Fill the span on the service, as the local engine would fill it there."""
        body = wire.request_body(req, self.config)
        return self._with_retries(req, lambda: self._post(
            req, wire.INFILL_PATH, body, "application/x-ndjson",
            lambda response: self._read(req, response)))

    def preload(self) -> str:
        """Reach the service now and say what it serves, and where: asked at its metrics,
        which take the token (its health, which any balancer may ask, does not), so a
        wrong `remoteToken` is said now, not at the first fill after a start that read as
        a success (a service from before the metrics route is asked its health)."""
        try:
            health = self._get(wire.METRICS_PATH, wire.HEALTH_PATH)
        except BackendError as exc:
            if not self._falls_back(exc):
                raise
            return self._starting_down(exc)
        replicas = health.get("replicas")
        where = f" on {replicas} replica{'s' * (replicas != 1)}" if replicas else ""
        return (f"remote engine at {self.config.remote_url}: model {health.get('model')}"
                f"{where} ({health.get('device')})")

    def status(self) -> dict[str, Any]:
        """What `dlm/status` shows: this client's fills and the service's replicas."""
        return self._status(self.service_metrics, lambda service: {
            "model": service.get("model"), "device": service.get("device"),
            "replicas": service.get("replicas"), "queueDepth": service.get("queueDepth")})

    def service_metrics(self) -> dict[str, Any]:
        """The service's `GET /v1/metrics` as JSON: model, device, live replicas, queue
        depth, and each replica's counters (`replicaStats`)."""
        return self._get(wire.METRICS_PATH)

    # -- one try -------------------------------------------------------------------------

    def _check(self, response: http.client.HTTPResponse, path: str) -> None:
        """Raise for an answer that is not a stream of lines (HTTP status other than 200)."""
        if response.status == 200:
            return
        text = response.read(4096).decode("utf-8", "replace")
        try:
            detail = json.loads(text).get("detail", text)
        except (ValueError, AttributeError):
            detail = " ".join(text.split())  # one line: a page's text ran over many
        url = self.config.remote_url
        if response.status in (401, 403):
            # none sent: "refused the token" sent the user looking for a wrong one
            what = "refused the token" if self._token() else "wants a token and none was sent"
            raise BackendError(
                f"the remote engine at {url} {what} (HTTP {response.status}): set "
                f"{self._where_the_token_goes()} to the service's token")
        if "html" in (response.getheader("Content-Type") or "").lower():
            # neither the service nor Ray's proxy answers with a page: another server is
            # at the URL, whose 404 was its page's HTML in the message, and whose 501
            # (a POST it does not take) was tried again as a lost replica
            raise BackendError(
                f"{url} is no dlm-lsp serve-remote service: it answered {path} with a web "
                f"page (HTTP {response.status}); check {self.names.url}")
        if response.status >= 500 or response.status == 429:
            raise Lost(f"the remote engine at {url} failed (HTTP {response.status}: "
                       f"{str(detail)[:200]})")
        what = "the fill" if path.endswith(wire.INFILL_PATH) else f"GET {path}"
        # an answer without a body (a bare 404 of another server) ended the line at ": "
        said = str(detail)[:300] or (f"no text; is {self.names.url} a dlm-lsp serve-remote "
                                     "service?" if response.status == 404 else "no text")
        raise BackendError(f"the remote engine at {url} rejected {what} "
                           f"(HTTP {response.status}): {said}")

    def _read(self, req: InfillRequest, response: http.client.HTTPResponse) -> InfillResult:
        """Pass each draft line on until the result line (or an error line) comes.

        A line cut short is a replica lost mid-answer (tried again); a whole line that
        is not the protocol's is an answer no retry can mend, said as such: a server
        that is no dlm-lsp service, or one whose answers this version cannot read, made
        KeyErrors and TypeErrors the editor showed as internal errors, or undecodable
        lines tried again as broken connections."""
        lost = (f"the replica of {self.config.remote_url} serving this fill was lost "
                "before it finished")
        while True:
            raw = self._whole_line(response, lost)
            if not raw:
                raise Lost(lost)
            with self._reading(raw):
                message = json.loads(raw)
                draft, result, error = (message.get(kind) for kind in ("draft", "result",
                                                                        "error"))
                if draft is not None:
                    draft = (draft["step"], draft["steps"], draft["text"])
                elif result is not None:
                    notices = list(result.get("notices", ()))
                    result = wire.result_from_json(result)
            if draft is not None:
                if req.on_draft is not None:
                    req.on_draft(*draft)
            elif result is not None:
                self.notices.extend(notices)
                return result
            elif error is not None:
                raise self._error(error)

    def _error(self, error: dict[str, Any]) -> Exception:
        """The exception a local fill would have raised for a replica's `error` line."""
        from dlm_lsp.engine import OutOfMemory
        kind, text = error.get("kind"), error.get("message", "")
        if kind == wire.CANCELLED:
            return Cancelled()
        if kind == wire.OUT_OF_MEMORY:
            return OutOfMemory(f"remote engine: {text}")
        if kind == wire.SPAN_TOO_LONG:
            return SpanTooLong(text)
        return BackendError(f"the remote engine at {self.config.remote_url} could not fill: "
                            f"{text}")
