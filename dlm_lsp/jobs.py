"""In-flight infills per document: newest wins, edits cancel, stale results drop.

A job records the document version it was computed against and a stop flag
that the denoising loop polls between steps.  The flag is raised when the
client cancels, when a newer request arrives for the same document, when the
document changes, closes or is opened again, or when the job runs out of time;
the reason is kept so the client is told which of these happened.

Only fills the editor asks for are superseded: suggestions (inline completion,
completion), which it asks for on its own at every pause, so the newest is the
one the user waits for, and `dlm/infill`, by a newer `dlm/infill` or command.  A
suggestion supersedes only suggestions: an explicit fill (`dlm/infill`, which
VS Code's Fill selection and Neovim's `:DlmFill` send) given within the debounce
after a keystroke was stopped by the ghost text the keystroke asked for, with
nothing to show.  A command the user ran (fill holes, rewrite) is never
superseded, or the ghost text asked for meanwhile would throw its work away.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum

from dlm_lsp.documents import document_key

SUPERSEDED = "superseded by a newer request for the same document"
DOCUMENT_CHANGED = "the document changed while the fill was computed"
DOCUMENT_CLOSED = "the document was closed"
CLIENT_CANCELLED = "cancelled by the client"
TIMED_OUT = "timed out"
CLIENT_LEFT = "the client disconnected"
SHUTTING_DOWN = "the server is shutting down"


class Kind(Enum):
    """Who asked for a fill, which decides what a newer fill of the document stops."""

    SUGGESTION = "suggestion"  # the editor, on its own: ghost text, completion items
    FILL = "fill"  # the user: `dlm/infill` (Fill selection, :DlmFill)
    COMMAND = "command"  # the user: fill holes, rewrite; stopped only on purpose

    def supersedes(self, older: Kind) -> bool:
        """Whether a fill of this kind stops an `older` one of the same document."""
        if older is Kind.COMMAND:
            return False
        return older is Kind.SUGGESTION or self is not Kind.SUGGESTION


@dataclass(eq=False)
class Job:
    """One infill (or one batch of hole fills) against one document version."""

    uri: str
    version: int | None
    kind: Kind = Kind.FILL
    _stop: threading.Event = field(default_factory=threading.Event)
    reason: str = ""
    changed: str = ""  # the first change or close of its document, whatever stopped it first

    def stop(self, reason: str) -> None:
        """Ask the loop to stop at its next step; the first reason given is kept, and
        the first change or close of the document besides (`stale`)."""
        if reason in (DOCUMENT_CHANGED, DOCUMENT_CLOSED) and not self.changed:
            self.changed = reason
        if not self._stop.is_set():
            self.reason = reason
            self._stop.set()

    @property
    def stale(self) -> bool:
        """Whether its document changed or closed since it started: its result is for
        text the editor no longer has.  Also where something else stopped it first: a
        fill superseded, whose result came back all the same (its last step was taken,
        or it was answered from recent fills), was returned for a document closed and
        opened again at the same version with other text (`check_fresh`)."""
        return bool(self.changed)

    def stopped(self) -> bool:
        """Whether the loop should stop (polled from the engine thread)."""
        return self._stop.is_set()


class Jobs:
    """The registry of jobs in flight, by document (the URI as pygls' workspace keys it:
    percent-decoded, so `a%20b.py` and `a b.py` are one document)."""

    def __init__(self) -> None:
        self._by_uri: dict[str, set[Job]] = {}
        self._lock = threading.Lock()

    def start(self, uri: str, version: int | None, kind: Kind = Kind.FILL) -> Job:
        """Register a new job, stopping the older ones it supersedes for the same document
        (see the module's docstring)."""
        job = Job(uri, version, kind)
        with self._lock:
            for old in self._by_uri.get(document_key(uri), ()):
                if kind.supersedes(old.kind):
                    old.stop(SUPERSEDED)
            self._by_uri.setdefault(document_key(uri), set()).add(job)
        return job

    def finish(self, job: Job) -> None:
        """Forget a job that has returned."""
        with self._lock:
            jobs = self._by_uri.get(document_key(job.uri))
            if jobs is not None:
                jobs.discard(job)
                if not jobs:
                    del self._by_uri[document_key(job.uri)]

    def stop_document(self, uri: str, reason: str) -> None:
        """Stop every job on a document (it changed or closed)."""
        with self._lock:
            for job in self._by_uri.get(document_key(uri), ()):
                job.stop(reason)

    def stop_all(self, reason: str) -> None:
        """Stop every job (the client left, the server shuts down or is terminated)."""
        with self._lock:
            for jobs in self._by_uri.values():
                for job in jobs:
                    job.stop(reason)

    def in_flight(self) -> int:
        """How many jobs are running or queued."""
        with self._lock:
            return sum(len(jobs) for jobs in self._by_uri.values())
