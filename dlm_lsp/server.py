"""The language server: thin LSP handlers over the infill engine.

Each handler turns LSP params into an engine request, awaits the engine on a
worker thread (concurrent requests share forward passes in the engine's batching
worker), and turns the result into an LSP answer.  The shared work
(document and range checks, job bookkeeping, cancellation, timeouts, progress,
drafts and the stale-version check) lives in `DlmServer.fill`, so every entry
point behaves the same way.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcContentModified,
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcRequestCancelled,
)
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from dlm_lsp import __version__
from dlm_lsp.admission import Gate
from dlm_lsp.backends import (
    LOCAL,
    REMOTE,
    Backend,
    BackendError,
    BackendFactory,
    make_backend,
    switch_backend,
    take_notices,
)
from dlm_lsp.config import (
    SETTING_NAMES,
    InfillOptions,
    ServerConfig,
    from_json,
    json_text,
    same_value,
)
from dlm_lsp.documents import (
    Refused,
    document_key,
    document_name,
    find_document,
    offset_range,
    open_document,
    position_offset,
    range_offsets,
    word_before,
)
from dlm_lsp.engine import Cancelled, InfillRequest, InfillResult, OutOfMemory
from dlm_lsp.errors import (
    BACKEND_FAILED,
    MODEL_UNAVAILABLE,
    OUT_OF_MEMORY,
    SERVER_BUSY,
    TIMEOUT,
)
from dlm_lsp.holes import HoleFilling, find_holes
from dlm_lsp.jobs import (
    CLIENT_CANCELLED,
    CLIENT_LEFT,
    DOCUMENT_CHANGED,
    DOCUMENT_CLOSED,
    SHUTTING_DOWN,
    TIMED_OUT,
    Job,
    Jobs,
    Kind,
)
from dlm_lsp.models import ModelLoadError
from dlm_lsp.notebooks import NOTEBOOK_SYNC, cell_context, cells_of, changed_cells
from dlm_lsp.offers import Offers
from dlm_lsp.passes import parse_ahead
from dlm_lsp.pinned import pinned
from dlm_lsp.policy import SpanTooLong, local_text
from dlm_lsp.protocol import (
    DRAFT,
    FILL_HOLES,
    INFILL,
    NOTHING_WRITTEN,
    RETRY_LOAD,
    REWRITE_SELECTION,
    STATUS,
    UNREADABLE_RESPONSE,
    DlmProtocol,
    command_flag,
    command_target,
    command_version,
    completion_items,
    deletes_code,
    infill_result,
    inline_items,
    parse_infill_params,
    to_plain,
    writing_first,
)
from dlm_lsp.shared import EnginePool
from dlm_lsp.syntax import enclosing_node_range
from dlm_lsp.transport import serve_stdio, serve_tcp
from dlm_lsp.validation import forget_document, language_for, parsed_behind

log = logging.getLogger(__name__)
NOT_SENT = object()  # a client's "dlm" section before it sent one (null is a section sent)
# how long the server waits for a client's answer it cannot do without (editors answer in
# milliseconds): a client that never answers holds up no work past it
CLIENT_ANSWER_S = 2.0
# How long a command waits for the editor to answer its edit: eglot asks the user first
# ("Proceed?"), and its prompt goes, unanswered, with its own 10 s timeout; the command
# then waited for good, a job in flight (and a slot of maxQueuedRequests) for as long as
# the server ran.
EDIT_ANSWER_S = 120.0
REPORT = "report"  # a command's option: say what it did not apply (`told`)
FAILED = "failed (see the error message)"  # how a progress ends where its work failed


class ProgressCancelled(Exception):
    """The user cancelled a command's progress while the editor held its edit, and the
    editor did not answer the edit within CLIENT_ANSWER_S of that."""


# how often a wait for the editor's answer to an edit looks for a cancelled progress
CANCEL_POLL_S = 0.05


async def _answer_unless_cancelled(asked: asyncio.Future, job: Job) -> Any:
    """The editor's answer to an applyEdit; TimeoutError after EDIT_ANSWER_S.  Where the
    user cancels the command's progress meanwhile (its job stopped by the client), the
    answer is still taken if it comes within CLIENT_ANSWER_S, as for a `$/cancelRequest`,
    and ProgressCancelled is raised if it does not: the progress's cancel stopped the job
    only, which nothing looked at while the edit was out, and a command whose editor never
    answered the edit hung, its progress shown, for good."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EDIT_ANSWER_S
    cancelled_at: float | None = None
    while True:
        now = loop.time()
        if cancelled_at is None and job.reason == CLIENT_CANCELLED:
            cancelled_at = now
        limit = deadline if cancelled_at is None else min(deadline,
                                                          cancelled_at + CLIENT_ANSWER_S)
        if now >= limit:
            if cancelled_at is not None:
                raise ProgressCancelled
            raise asyncio.TimeoutError
        done, _ = await asyncio.wait([asked], timeout=min(CANCEL_POLL_S, limit - now))
        if done:
            return asked.result()


class DlmServer(LanguageServer):
    """pygls server holding the configuration, the engine and the jobs in flight."""

    protocol: DlmProtocol

    def __init__(self, backend_factory: BackendFactory = make_backend,
                 pins: dict[str, Any] | None = None) -> None:
        super().__init__("dlm-lsp", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC, protocol_cls=DlmProtocol)
        # the model settings the command line fixed (`dlm-lsp --model M`, pinned.py)
        self.pins = dict(pins or {})
        self.config = replace(ServerConfig(), **self.pins)
        self.make_backend = backend_factory
        self.engine: Backend = backend_factory(self.config)
        # Requests are prepared and validated on these threads; their forward passes
        # all go through the engine's one batching worker, which owns the model.
        self.worker = ThreadPoolExecutor(max_workers=8, thread_name_prefix="dlm-engine")
        # Large documents just opened are parsed on this thread, one after another
        # (`parse_ahead`): on the fills' threads, a workspace of large files opened at
        # once would keep every one of them busy, and the next fill waiting.
        self.parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dlm-parse")
        self.jobs = Jobs()
        self.pending_problems: list[str] = []
        # the settings the client has sent (each change overlaid, as on the config): a
        # problem with a value it sends again unchanged was told already
        self.sent_settings: Any = None
        # the "dlm" section it last sent, whatever it was: one that is not an object is
        # told once, as a wrong value is
        self.sent_section: Any = NOT_SENT
        self.sent_beside: dict[str, Any] = {}  # our settings it sent beside that section
        # what a shared engine last said it keeps of this client's settings (told once)
        self.engine_told: list[str] = []
        self._progress_count = 0  # server-initiated progress tokens made so far
        self._progress_shown: set[Any] = set()  # tokens a fill's progress is shown on now
        self.refused = Refused()  # documents not kept past maxOpenDocuments
        self.not_kept_told_at = -math.inf  # when the user was last told of one (a message)
        # notebooks not kept past it, each with what its cells say: a cell added to one
        # later is refused as the cells it was opened with are (`did_change_notebook`)
        self.refused_notebooks = Refused()
        self.offers = Offers()  # the suggestions last offered, to tell one accepted
        # the load shown now (`preload`), and the model setting (or service) it is of
        self._preloading: tuple[str, asyncio.Task] | None = None
        # over TCP: takes the connection out of the server's count of clients (`release`)
        self.left: Callable[[], None] = lambda: None

    def apply_settings(self, data: Any, initial: bool = False) -> tuple[list[str], bool]:
        """Overlay client settings (camelCase, optionally under "dlm") onto the config, or
        with `initial` (initializationOptions) onto the defaults: a wrong value there is
        said to keep the default, as there is no value of the user's to keep.  A wrong
        value is said once, not again while the client sends it unchanged (nor is a "dlm"
        section that is not an object): VS Code and Neovim send the whole section at
        every change, and a value the user had not touched was warned about whenever any
        other setting changed.  Returns the problems, and whether the backend is to be got
        ready (`preload`): a new one, or a model the settings load anew (see
        switch_backend)."""
        section: list[str] = []
        if isinstance(data, dict) and "dlm" in data:
            before = self.sent_section
            sent = self.sent_section = data["dlm"]
            if isinstance(sent, dict):
                # beside it, our settings are not read (other servers' sections are not
                # ours to name: eglot sends every server the whole of its configuration)
                beside = {key: value for key, value in data.items()
                          if key != "dlm" and key in SETTING_NAMES}
                if beside and not same_value(beside, self.sent_beside):
                    listed = ", ".join(f"'{key}'" for key in beside)
                    section = [f"settings {listed} beside the 'dlm' section ignored: the "
                               "section's settings are used"]
                self.sent_beside = beside
                data = sent
            else:  # e.g. null: not an unknown setting, a section that is not an object
                if not same_value(sent, before):
                    section = [f"settings 'dlm' should be an object, got "
                               f"{json_text(sent)}; ignored"]
                data = {key: value for key, value in data.items() if key != "dlm"}
        config, problems = from_json(ServerConfig, data, None if initial else self.config,
                                     said=self.sent_settings)
        config, set_aside = pinned(config, self.pins)
        problems = section + problems
        if isinstance(self.sent_settings, dict) and isinstance(data, dict):
            self.sent_settings = {**self.sent_settings, **data}
        elif data is not None:  # null changes no setting
            self.sent_settings = data
        self.engine, to_load = switch_backend(self.engine, self.config, config,
                                              self.make_backend)
        self.config = config
        # the command line's pins, and a shared engine (TCP, several clients), may set
        # aside settings this client asked for; said again only when that changes, for
        # the same reason as wrong values above
        kept = set_aside + getattr(self.engine, "setting_problems", [])
        told, self.engine_told = self.engine_told, kept
        return problems + [note for note in kept if note not in told], to_load

    async def preload(self) -> None:
        """Load the model off the event loop, so that the first fill is fast, and show it:
        as work-done progress where the client supports it (a 0.5B checkpoint took 3 s
        on a 2-core VM, a 7B one is 15 times bigger; a fill asked for meanwhile waits),
        then a log line, or an error message that says what failed.  Asked again while a
        load of the same model is shown (`dlm/retryLoad` during the first load, a setting
        that places it otherwise), it waits for that one: a second progress bar, and a
        second "ready" line, were shown for the one load.  The load goes on, and ends its
        progress, where the request that waits for it is cancelled."""
        label = _model_label(self.config)
        shown = self._preloading
        if shown is None or shown[0] != label:
            shown = self._preloading = (label, asyncio.ensure_future(self._show_load(label)))
            shown[1].add_done_callback(self._load_shown)
        await asyncio.shield(shown[1])

    def _load_shown(self, task: asyncio.Task) -> None:
        if self._preloading is not None and self._preloading[1] is task:
            self._preloading = None

    @property
    def preloading(self) -> bool:
        """Whether a load is under way and shown (`preload`)."""
        return self._preloading is not None

    async def _show_load(self, label: str) -> None:
        """One load, shown as `preload` says."""
        loop = asyncio.get_running_loop()
        began = time.perf_counter()
        loading = loop.run_in_executor(self.worker, self.engine.preload)
        token = await self.progress_token("load")
        if token is not None:
            self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="dlm-lsp: loading the model", message=label))
        try:
            ready = await loading
        except (ModelLoadError, BackendError) as exc:
            if token is not None:
                self.finish_progress(token, FAILED)
            self.window_show_message(types.ShowMessageParams(
                types.MessageType.Error, f"dlm-lsp: {exc}"))
            return
        took = f"{ready} ({time.perf_counter() - began:.1f} s)"
        if token is not None:
            self.finish_progress(token, took)
        self.window_log_message(types.LogMessageParams(types.MessageType.Info, f"dlm-lsp: {took}"))

    async def progress_token(self, kind: str) -> str | None:
        """A new server-initiated progress token, or None where the client has no
        progress (its capabilities say so) or does not accept the token within 2 s (no
        progress is sent for a token the client has not accepted).  Editors answer in
        milliseconds; the bound only keeps a client that never answers from holding up
        the work (the commands wait for the token before they start)."""
        window = self.client_capabilities.window
        if window is None or not window.work_done_progress:
            return None
        self._progress_count += 1
        token = f"dlm-lsp/{kind}/{self._progress_count}"
        # Asked here, not with pygls' create_async, so that a request not answered in time
        # is given up (`forget_request`): create_async registered a token the client
        # accepted however late, kept for good as nothing used it, and where the client
        # never answered, pygls kept the request's future for good (one for each load or
        # command).  pygls registers the token when its progress begins.
        created, msg_id = self.protocol.ask(types.WINDOW_WORK_DONE_PROGRESS_CREATE,
                                            types.WorkDoneProgressCreateParams(token))
        # retrieved: a refusal is no error of ours to log
        created.add_done_callback(lambda answer: answer.cancelled() or answer.exception())
        try:
            done, _ = await asyncio.wait([created], timeout=CLIENT_ANSWER_S)
        except asyncio.CancelledError:  # $/cancelRequest of the request that asked
            self.protocol.forget_request(msg_id)
            raise
        if not done:
            self.protocol.forget_request(msg_id)
            return None
        return token if created.exception() is None else None

    def warn(self, problems: list[str]) -> None:
        """Tell the user about configuration problems (defaults were kept)."""
        if problems:
            self.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning, "dlm-lsp settings: " + "; ".join(problems)))

    async def fill(self, job: Job, text: str, start: int, end: int, *, language_id: str | None,
                   options: InfillOptions, token: Any = None, is_hole: bool = False,
                   draft_range: types.Range | None = None) -> InfillResult:
        """Run one infill on the worker thread, honouring cancel, timeout and progress.
        A notebook cell's fill is shown the notebook's other code cells around `text`
        (notebooks.py), as they are when it starts."""
        loop = asyncio.get_running_loop()
        if token is not None:
            token = self.begin_progress(token, job, "dlm-lsp: denoising")

        def on_step(step: int, steps: int, draft: str) -> None:
            loop.call_soon_threadsafe(self._report_step, job, token, draft_range, step, steps,
                                      draft)

        wants_steps = token is not None or (self.config.drafts and draft_range is not None)
        before, after = cell_context(self.workspace, job.uri, text)
        # the caches a fill leaves (parse tree, recent fills) are keyed as didClose forgets
        request = InfillRequest(text, start, end, language_id, document_key(job.uri), options,
                                is_hole,
                                should_stop=job.stopped, on_draft=on_step if wants_steps else None,
                                before=before, after=after)
        future = loop.run_in_executor(self.worker, self._infill, request, job.uri)
        done = False
        try:
            result = await asyncio.wait_for(future, self.config.timeout_ms / 1000)
            done = True
            return result
        except asyncio.CancelledError:
            job.stop(CLIENT_CANCELLED)
            raise
        except asyncio.TimeoutError as exc:
            job.stop(TIMED_OUT)
            # the setting named: a command's timeout was said without the way out; and
            # where fills go to a service, that service (a hung one said nothing of it)
            where = (f"; backend {self.config.backend}, {self.config.remote_url}"
                     if self.config.backend != "local" else "")
            raise JsonRpcException(f"infill timed out after {self.config.timeout_ms} ms "
                                   f"(setting timeoutMs{where})", code=TIMEOUT) from exc
        except Cancelled as exc:
            if job.stale and job.reason == job.changed:  # stopped by the change or close
                raise JsonRpcContentModified(f"fill dropped: {job.reason}") from exc
            raise JsonRpcRequestCancelled(f"fill stopped: {job.reason}") from exc
        except ModelLoadError as exc:
            raise JsonRpcException(f"model unavailable: {exc}", code=MODEL_UNAVAILABLE) from exc
        except OutOfMemory as exc:
            raise JsonRpcException(str(exc), code=OUT_OF_MEMORY) from exc
        except SpanTooLong as exc:
            raise JsonRpcInvalidParams(str(exc)) from exc
        except BackendError as exc:
            raise JsonRpcException(str(exc), code=BACKEND_FAILED) from exc
        finally:
            self._show_notices()
            if token is not None:
                self.end_progress(token, job, done)

    def _infill(self, request: InfillRequest, uri: str) -> InfillResult:
        """The engine's fill, on a worker thread.  A document closed while its fill ran
        was forgotten by didClose, but the fill may have parsed it or remembered its result
        after that, which put them back until evicted (a soak session ended with 4 parsed
        documents kept, 1 open); so a fill that ends on a document no longer open forgets
        it again.  Forgetting only drops caches: a document opened again meanwhile is
        parsed anew.  `uri` is the document's as the client spelled it (the request's is
        its `document_key`)."""
        try:
            return self.engine.infill(request)
        finally:
            if find_document(self.workspace, uri) is None:
                self.forget(uri)

    def close_document(self, uri: str) -> None:
        """Nothing can be applied to a closed document (its fills stop), and nothing of it
        is kept: a text document's didClose, and a notebook's cells as they close."""
        self.jobs.stop_document(uri, DOCUMENT_CLOSED)
        self.forget(uri)
        self.refused.discard(uri)

    def document(self, uri: str) -> TextDocument:
        """The open document at `uri`, or an error that says why it is not
        (`open_document`)."""
        return open_document(self.workspace, uri, self.refused)

    def at_version(self, uri: str, version: int | None) -> TextDocument:
        """The open document at `uri`, if it is at `version` (any, where None): a range
        taken in another version may cover other text now."""
        doc = self.document(uri)
        if version is not None and version != doc.version:
            raise JsonRpcContentModified(
                f"request is for version {version} but the document is at {doc.version}")
        return doc

    def refuse(self, uris: list[str], what: str) -> str:
        """Remember that `uris` were not kept past `maxOpenDocuments`, so that a request
        for one says so (and what to do), not that the editor never opened it; `what`
        says what happened to them.  Returns what a request for one is told."""
        told = (f"{what}: dlm-lsp keeps at most "
                f"{self.config.max_open_documents} open documents (setting "
                "maxOpenDocuments); close other documents, then close it and open it again")
        for uri in uris:
            self.refused.add(uri, told)
        return told

    def parse_ahead(self, uri: str) -> None:
        """Parse a large document just opened on the parsing thread, off its first fill's
        path (passes.parse_ahead); a remote backend parses its fills' documents itself."""
        if self.config.backend != REMOTE:
            doc = self.document(uri)
            self.parser.submit(self._parse_ahead, uri, doc.source, doc.language_id)

    def _parse_ahead(self, uri: str, text: str, language_id: str | None) -> None:
        """`parse_ahead`'s work, on the parsing thread, behind the fills in flight
        (validation.parsed_behind): they go first, unless one waits for this parse.  A
        document closed meanwhile is forgotten again, as after a fill (`_infill`)."""
        try:
            with parsed_behind(lambda: self.jobs.in_flight() > 0, document_key(uri)):
                parse_ahead(text, language_id, document_key(uri), self.config)
        except Exception:  # its first fill parses it, and says what fails there
            log.exception("parsing %s ahead of its fills failed", uri)
        finally:
            if find_document(self.workspace, uri) is None:
                forget_document(document_key(uri))

    def forget(self, uri: str) -> None:
        """Drop what is kept of a closed document: its recent fills, its parse tree and
        the suggestions it was offered, all kept under its `document_key` (`uri` as the
        client spelled it)."""
        key = document_key(uri)
        self.engine.forget(key)
        self.offers.forget(key)
        forget_document(key)

    def edited(self, uri: str) -> None:
        """The document `uri` changed: its last offer stands only where the edit accepted
        it (offers.py)."""
        doc = find_document(self.workspace, uri)
        key = document_key(uri)
        if doc is None:
            self.offers.forget(key)
        else:
            self.offers.edited(key, doc.source)

    def begin_progress(self, token: Any, job: Job, title: str,
                       message: str | None = None) -> Any:
        """Begin work-done progress for `job` on `token` (the client's, or one from
        `progress_token`) and return it; cancelling it in the editor stops the job at its
        next step.  A token another request's progress is on now (a client that sent one
        `workDoneToken` with two requests) is not shared: this job shows no progress, and
        None is returned.  Shared, the client saw "begin" twice, and once the first job
        ended its token, the other's reports and a second "end" on a token already ended;
        cancelling it stopped both jobs, or, after the first ended, neither."""
        if token in self._progress_shown:
            log.warning("work-done token %r is in use by another request's progress: "
                        "this request shows none", token)
            return None
        self._progress_shown.add(token)
        self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title=title, message=message, cancellable=True, percentage=0))
        self.work_done_progress.tokens[token].add_done_callback(
            lambda _: job.stop(CLIENT_CANCELLED))
        return token

    def end_progress(self, token: Any, job: Job, done: bool = True) -> None:
        """End `job`'s progress with why it stopped, or "done" where it was not stopped and
        is `done`: a fill that failed (a rewrite refused as too long, the model unavailable)
        ended its progress "done" beside the error it was answered with."""
        self.finish_progress(token, job.reason or ("done" if done else FAILED))

    def finish_progress(self, token: Any, message: str) -> None:
        """End the progress on `token` and let go of it: pygls keeps a future for each
        token until it is removed (a model load's progress ended without that, and each
        load left one behind for as long as the server ran)."""
        self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
        self.work_done_progress.tokens.pop(token, None)
        self._progress_shown.discard(token)

    def _show_notices(self) -> None:
        """Tell the user what the engine changed on its own (e.g. after running out of memory)."""
        for notice in take_notices(self.engine.notices):
            self.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning, f"dlm-lsp: {notice}"))

    def _report_step(self, job: Job, token: Any, rng: types.Range | None, step: int, steps: int,
                     draft: str) -> None:
        """Progress report and optional draft notification for one denoising step."""
        if job.stopped():
            return
        if token is not None:
            self.work_done_progress.report(token, types.WorkDoneProgressReport(
                message=f"step {step} of {steps}", percentage=min(100, 100 * step // steps)))
        if self.config.drafts and rng is not None:
            self.protocol.notify(DRAFT, {
                "textDocument": {"uri": job.uri, "version": job.version},
                "range": self.protocol._converter.unstructure(rng),
                "text": draft, "step": step, "steps": steps})

    def start_job(self, uri: str, version: int | None, kind: Kind = Kind.FILL) -> Job:
        """Register a fill, unless `maxQueuedRequests` fills are running or waiting already."""
        limit = self.config.max_queued_requests
        if self.jobs.in_flight() >= limit:
            raise JsonRpcException(
                f"server busy: {limit} fills are running or waiting (setting "
                "maxQueuedRequests); try again when some have finished", code=SERVER_BUSY)
        return self.jobs.start(uri, version, kind)

    def check_fresh(self, job: Job) -> None:
        """Refuse a result computed for a document version that is no longer current, or
        for a job the user cancelled (its progress's cancel button): the cancel stops the
        fill at its next step, and one that came after the last step (during validation, a
        reused fill, a hole filled from recent fills) was applied all the same, its
        progress ending "cancelled by the client" (for Fill holes, "done")."""
        if job.reason == CLIENT_CANCELLED:
            raise JsonRpcRequestCancelled(f"fill stopped: {job.reason}")
        doc = find_document(self.workspace, job.uri)
        if doc is None:
            raise JsonRpcContentModified(f"fill dropped: {DOCUMENT_CLOSED}")
        if doc.version != job.version:
            raise JsonRpcContentModified(
                f"fill dropped: the document changed (version {job.version} -> {doc.version})")
        if job.stale:  # e.g. opened anew at the same version
            raise JsonRpcContentModified(f"fill dropped: {job.changed}")

    async def fill_range(self, uri: str, rng: types.Range, options: InfillOptions,
                         version: int | None = None, token: Any = None,
                         accepted: types.SelectedCompletionInfo | None = None,
                         kind: Kind = Kind.FILL,
                         progress: str | None = None) -> tuple[Job, InfillResult]:
        """Fill one range of an open document, returning only a result that is still fresh.

        `accepted` is a completion item the editor shows selected while it asks for ghost
        text (inline completion's `selectedCompletionInfo`): the fill is made for the text
        as if that item were applied, right after it, so that the ghost text can extend
        the item instead of contradicting it (an editor hides one that does).

        `progress` asks the client for a progress token of that kind (`progress_token`)
        once the request is checked and its job registered: a request refused before
        leaves no token the client waits on, and an edit or a close while the client
        answers (up to 2 s) stops the job, which then says so as any fill's does.
        """
        doc = self.at_version(uri, version)
        text, start, end = spliced(doc, rng, accepted)
        # the drafts' place is not in the editor's text yet after an item not applied
        draft_range = rng if accepted is None else None
        # a selection of a hole marker (VS Code's Fill selection on a `<FILL>` line sends
        # the marker's range) is a hole, as dlm.fillHoles fills it: planned as a rewrite of
        # the marker's text it got a rewrite's budget, and with `strength` kept its `<`
        is_hole = start != end and text[start:end] == self.config.hole_marker
        job = self.start_job(uri, doc.version, kind)
        try:
            if progress is not None:
                token = await self.progress_token(progress)
            result = await self.fill(job, text, start, end, language_id=doc.language_id,
                                     options=options, token=token, is_hole=is_hole,
                                     draft_range=draft_range)
            self.check_fresh(job)
            return job, result
        finally:
            self.jobs.finish(job)

    async def suggest(self, uri: str, rng: types.Range, token: Any = None,
                      selected: types.SelectedCompletionInfo | None = None,
                      invoked: bool = False) -> list[str]:
        """The fills to offer at the cursor `rng` as ghost text or completion items, best
        first (`_suggestions`), with a completion item `selected` after its text
        (`fill_range`).  None, and no fill, where the editor asks at the end of a fill it
        was just offered and the user accepted (or selected), which the model had ended
        itself: the model has said what goes there (offers.py); unless the user
        `invoked` the request (Alt+\\), who asks for a fill there on purpose."""
        text, at, _ = spliced(self.document(uri), rng, selected)
        if not invoked and self.offers.accepted(document_key(uri), text, at):
            log.debug("suggestion at %d:%d: the end of an accepted fill, no fill made",
                      rng.start.line, rng.start.character)
            return []
        _, result = await self.fill_range(uri, rng, InfillOptions(), token=token,
                                          accepted=selected, kind=Kind.SUGGESTION)
        texts = _suggestions(self, result)
        self.offers.offered(document_key(uri), text, at, result, texts)
        return texts

    async def apply_edits(self, job: Job, edits: list[types.TextEdit],
                          label: str) -> tuple[bool, str | None]:
        """Ask the client to apply edits to exactly the version they were computed for;
        whether it did, and its `failureReason` where it did not and gave one (the
        command's result and warning say it: "the editor did not apply the edit" alone left
        the user to guess, and a client's own guess, "the buffer changed meanwhile", was
        wrong where the editor could not tell which buffer the edit was for).
        Once asked, the editor has the edit, and a `$/cancelRequest` of the command that
        comes while it answers cannot take it back: the command waits for the answer and
        says what the editor did.  It was answered "fill stopped: cancelled by the client"
        while the editor applied the edit, so an integration showed nothing applied (and no
        syntax warning) over a file just rewritten.  A shutdown, or a client gone, still
        ends it at once: nobody reads its answer then; and a client that has not answered
        within CLIENT_ANSWER_S of its cancel gets the cancel, as before (its command's job
        would wait for good otherwise), and its applyEdit is given up (`forget_request`):
        pygls kept the request's future for good where no answer ever came, one for each
        such command."""
        self.check_fresh(job)
        edit = types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(
            types.OptionalVersionedTextDocumentIdentifier(job.uri, job.version), edits)])
        asked, msg_id = self.protocol.ask(types.WORKSPACE_APPLY_EDIT,
                                          types.ApplyWorkspaceEditParams(edit, label=label))
        try:
            try:
                answer = await _answer_unless_cancelled(asked, job)
            except asyncio.TimeoutError:
                self.protocol.forget_request(msg_id)
                return False, (f"the editor did not answer the edit in {EDIT_ANSWER_S:.0f} s "
                               "(a prompt left open, or one the editor closed when it "
                               "stopped waiting for the command, as eglot does at its 10 s); "
                               "no longer waited for")
            except asyncio.CancelledError:
                if not self.protocol.cancelled_by_client(asyncio.current_task()):
                    raise
                job.stop(CLIENT_CANCELLED)  # its progress ends saying so, not "failed"
                done, _ = await asyncio.wait([asked], timeout=CLIENT_ANSWER_S)
                if not done:
                    self.protocol.forget_request(msg_id)
                    raise
                answer = asked.result()
        except ProgressCancelled:  # its answer did not come within CLIENT_ANSWER_S
            self.protocol.forget_request(msg_id)
            raise JsonRpcRequestCancelled(f"fill stopped: {job.reason}") from None
        except JsonRpcException as exc:
            # An error answer, or one that is no ApplyWorkspaceEditResult (`null`): the
            # command failed with it as its own error, -32602 "unreadable response", as if
            # its arguments were wrong.  An error is a request that failed, not applied
            # (eglot's "Edits on 'a.py' require version 1, you have 2"; it was said to be
            # "not known"); of an answer that cannot be read, nothing is known.
            if not exc.message.startswith(UNREADABLE_RESPONSE):  # the request failed
                return False, f"the editor refused the edit ({exc.message})"
            return False, (f"the editor's answer to the edit was unreadable "
                           f"({exc.message.removeprefix(UNREADABLE_RESPONSE + ': ')}); "
                           "whether it applied it is not known")
        if answer and answer.applied:
            return True, None
        return False, (answer and answer.failure_reason) or None

    def holds(self) -> dict[str, int]:
        """What this server holds for its client: its fills in flight and open documents
        (over TCP, one connection's; `SharedEngine.status` sums them over the clients)."""
        return {"jobsInFlight": self.jobs.in_flight(),
                "openDocuments": len(self.workspace.text_documents)}

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A body that is not JSON gets a -32700 answer with a null id, as JSON-RPC asks
        (pygls only logs it); other errors are reported as pygls does."""
        if source is JsonRpcException and isinstance(error, (ValueError, RecursionError)):
            self.protocol.refuse(None, types.ErrorCodes.ParseError, f"unreadable JSON: {error}")
            return
        super().report_server_error(error, source)

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve one client over stdio (see transport.py); ends the process."""
        serve_stdio(self, stdin, stdout)

    def start_tcp(self, host: str, port: int, gate: Gate | None = None) -> None:
        """Serve TCP clients that pass `gate` (token, number of connections: admission.py),
        each with a server of its own and all on one local engine (see transport.py and
        shared.py); ends the process."""
        pool = EnginePool()

        def connection() -> DlmServer:
            server: DlmServer | None = None

            def admitted() -> bool:  # a client once its initialize passed the gate
                return server is not None and server.protocol.admitted

            def holds() -> dict[str, int]:
                return server.holds() if server is not None else {}

            def backend(config: ServerConfig) -> Backend:
                if config.backend == LOCAL:
                    return pool.join(config, admitted, holds)
                service = make_backend(config)
                # a client's remoteUrl is its own choice: the process's token is not sent
                # there (see ServerBackend.environment_token)
                service.environment_token = False  # type: ignore[attr-defined]
                return service
            server = build_server(backend, self.pins)
            server.left = pool.connect(admitted, holds)
            return server
        serve_tcp(connection, host, port, gate)

    def release(self) -> None:
        """A TCP connection ended: let go of its backend and threads, without waiting for
        a handler thread still finishing (the other clients' event loop must not stall)."""
        self.left()
        self.engine.close()
        self.worker.shutdown(wait=False)
        self.parser.shutdown(wait=False)
        if self._thread_pool is not None:
            self._thread_pool.shutdown(wait=False)

    def client_left(self) -> list[asyncio.Future]:
        """Stop the fills of a client that went away and forget what it was waiting for;
        returns the handler tasks still winding down."""
        self.jobs.stop_all(CLIENT_LEFT)
        return self.protocol.drop_connection()


def _model_label(config: ServerConfig) -> str:
    """What `preload` gets ready: the model setting, or the service a backend reaches."""
    return config.model if config.backend == LOCAL else f"{config.backend} at {config.remote_url}"


# Handlers are collected here and registered on each server `build_server` makes: over
# TCP every connection gets a server of its own (see transport.py and shared.py).
_FEATURES: list[tuple[str, Any, Callable]] = []
_COMMANDS: list[tuple[str, Callable]] = []


def feature(name: str, options: Any = None) -> Callable[[Callable], Callable]:
    def add(fn: Callable) -> Callable:
        _FEATURES.append((name, options, fn))
        return fn
    return add


def command(name: str) -> Callable[[Callable], Callable]:
    def add(fn: Callable) -> Callable:
        _COMMANDS.append((name, fn))
        return fn
    return add


@feature(types.INITIALIZE)
def initialize(ls: DlmServer, params: types.InitializeParams) -> None:
    """Read initializationOptions; problems are shown once the client is ready."""
    ls.pending_problems, _ = ls.apply_settings(params.initialization_options, initial=True)


@feature(types.INITIALIZED)
async def initialized(ls: DlmServer, params: types.InitializedParams) -> None:
    """Report settings problems and start loading the model in the background."""
    ls.warn(ls.pending_problems)
    ls.pending_problems = []
    await ls.preload()


@feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def did_change_configuration(ls: DlmServer,
                                   params: types.DidChangeConfigurationParams) -> None:
    """Apply changed settings on top of the current ones; a new model (or service) is
    got ready at once, so a wrong path is reported now and not at the next fill.  Settings
    that load the model already loaded ("cpu" where "auto" is the CPU) are no new model:
    the engine keeps it (Engine.reconfigure), and no load is shown."""
    problems, to_load = ls.apply_settings(params.settings)
    ls.warn(problems)
    if to_load:
        await ls.preload()


@feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: DlmServer, params: types.DidChangeTextDocumentParams) -> None:
    """An edit makes every fill in flight for the document stale: stop them now; one
    that did not accept the ghost text last offered makes its place a new one."""
    ls.jobs.stop_document(params.text_document.uri, DOCUMENT_CHANGED)
    ls.edited(params.text_document.uri)


@feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: DlmServer, params: types.DidOpenTextDocumentParams) -> None:
    """Keep at most `maxOpenDocuments` documents: past that, drop the new one and say so.
    A document opened again (its text may be new whatever its version says) makes the
    fills in flight for it stale, as an edit does.  A large one is parsed now, on a thread
    of its own, not in its first fill (`DlmServer.parse_ahead`)."""
    uri = params.text_document.uri
    ls.jobs.stop_document(uri, DOCUMENT_CHANGED)
    ls.refused.discard(uri)
    limit = ls.config.max_open_documents
    if len(ls.workspace.text_documents) > limit:
        ls.workspace.remove_text_document(uri)
        ls.refuse([uri], f"{uri} was not opened")
        _say_not_kept(ls, f"{uri} was not opened; close other documents first")
    else:
        ls.parse_ahead(uri)


@feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: DlmServer, params: types.DidCloseTextDocumentParams) -> None:
    """Nothing can be applied to a closed document, and nothing of it is kept."""
    ls.close_document(params.text_document.uri)


@feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def did_open_notebook(ls: DlmServer, params: types.DidOpenNotebookDocumentParams) -> None:
    """A notebook's cells are documents, kept as `did_open` keeps one: past
    `maxOpenDocuments`, the notebook is dropped whole (a cell of it alone would be filled
    without the others) and the user told; cells opened again make their fills stale."""
    for uri in cells_of(params):
        ls.jobs.stop_document(uri, DOCUMENT_CHANGED)
        ls.refused.discard(uri)
    uri = params.notebook_document.uri
    ls.refused_notebooks.discard(uri)
    if _drop_notebook_past_limit(ls, uri, cells_of(params), (
            f"notebook {uri} and its {len(params.cell_text_documents)} cells were not opened; "
            "close other documents first")):
        _refuse_notebook(ls, uri, cells_of(params), f"this cell's notebook {uri} was not opened")


@feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def did_change_notebook(ls: DlmServer, params: types.DidChangeNotebookDocumentParams) -> None:
    """A cell's edit makes the fills in flight for it stale, as a document's does; a cell
    taken out is closed.  An edit of another cell leaves a cell's fills be: their edits
    are the cell's, still of its version (their context was the notebook as it was).
    Cells added are documents too: past `maxOpenDocuments` the notebook is dropped whole,
    as at its opening, and its cells closed.  A cell added to a notebook not kept is
    refused as its other cells are: it was answered "not open, send didOpen", and its
    ghost text with that error at every keystroke, where the cells beside it got none."""
    opened, edited, closed = changed_cells(params)
    for uri in opened + edited:
        ls.jobs.stop_document(uri, DOCUMENT_CHANGED)
    for uri in edited:
        ls.edited(uri)
    for uri in closed:
        ls.close_document(uri)
    uri = params.notebook_document.uri
    notebook = ls.workspace.get_notebook_document(notebook_uri=uri)
    if notebook is None:  # not kept (opened past the limit): its change was dropped
        told = ls.refused_notebooks.get(uri)
        if told is not None:
            for cell in opened:
                ls.refused.add(cell, told)
        return
    cells = [cell.document for cell in notebook.cells]
    if _drop_notebook_past_limit(ls, uri, cells, (
            f"notebook {uri} and its {len(cells)} cells were closed: the cells added to it "
            "passed the limit; close other documents and open it again")):
        for cell in cells:
            ls.close_document(cell)
        _refuse_notebook(ls, uri, cells, f"this cell's notebook {uri} was closed when cells "
                                         "added to it passed the limit")


def _drop_notebook_past_limit(ls: DlmServer, uri: str, cells: list[str], told: str) -> bool:
    """Drop notebook `uri` and its `cells` if the documents kept pass `maxOpenDocuments`,
    telling the user `told`; whether it was dropped."""
    limit = ls.config.max_open_documents
    if len(ls.workspace.text_documents) <= limit:
        return False
    ls.workspace.remove_notebook_document(types.DidCloseNotebookDocumentParams(
        types.NotebookDocumentIdentifier(uri), [types.TextDocumentIdentifier(c) for c in cells]))
    _say_not_kept(ls, told)
    return True


# How long after a "not kept" message the next ones go to the log, not a message of their own
NOT_KEPT_QUIET_S = 30.0


def _say_not_kept(ls: DlmServer, told: str) -> None:
    """Tell the user that a document (or notebook) past `maxOpenDocuments` was not kept:
    one message, and those that follow within NOT_KEPT_QUIET_S in the log, said so in
    the message.  An editor that opens a whole workspace got a message a document (10
    of them for documents 500 to 509 of 510)."""
    text = (f"dlm-lsp keeps at most {ls.config.max_open_documents} open documents (setting "
            f"maxOpenDocuments): {told}")
    now = time.monotonic()
    if now - ls.not_kept_told_at < NOT_KEPT_QUIET_S:
        ls.window_log_message(types.LogMessageParams(types.MessageType.Error, text))
        return
    ls.not_kept_told_at = now
    ls.window_show_message(types.ShowMessageParams(types.MessageType.Error, (
        f"{text} (others not kept in the next {NOT_KEPT_QUIET_S:.0f} s are in the log)")))


def _refuse_notebook(ls: DlmServer, uri: str, cells: list[str], what: str) -> None:
    """Remember notebook `uri` and its `cells` as not kept (`DlmServer.refuse`), `what`
    saying what happened to them."""
    ls.refused_notebooks.add(uri, ls.refuse(cells, what))


@feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def did_close_notebook(ls: DlmServer, params: types.DidCloseNotebookDocumentParams) -> None:
    """A closed notebook's cells are closed documents."""
    ls.refused_notebooks.discard(params.notebook_document.uri)
    for uri in cells_of(params):
        ls.close_document(uri)


@feature(INFILL)
async def infill(ls: DlmServer, params: Any) -> dict:
    """`dlm/infill`: fill (or replace) a range and return the edit and candidates."""
    p = parse_infill_params(params)
    job, result = await ls.fill_range(p.uri, p.range, p.options, p.version, p.work_done_token)
    return infill_result(job.version, p.range, result, _replaced(ls, p.uri, p.range))


def _replaced(ls: DlmServer, uri: str, rng: types.Range) -> str:
    """The code a fill of `rng` replaces, read right after the fill: `fill_range` has
    just checked that the document is still at the fill's version.  A hole marker is
    none: nothing may be what goes there (`f(<FILL>)`), as `dlm.fillHoles` fills it."""
    doc = ls.document(uri)
    start, end = range_offsets(doc, rng)
    replaced = doc.source[start:end]
    return "" if replaced == ls.config.hole_marker else replaced


@feature(STATUS)
async def status(ls: DlmServer, params: Any) -> dict:
    """`dlm/status`: the engine's device, model, queue, latency, throughput and caches, and
    what this server holds: its jobs, open documents and progress tokens (each let go of
    when done; a count that only grows is a leak).  A remote backend's status asks its
    service, which takes up to 2 s a try where the service is down or hung: asked on the
    event loop, that held every other message (edits, cancels, ghost text) meanwhile, at
    each poll of an editor's status bar; it is asked on a thread instead (`_engine_status`)."""
    return await _full_status(ls)


async def _full_status(ls: DlmServer) -> dict:
    """What `dlm/status` answers (and `dlm/retryLoad`, which answered the engine's part
    alone: no `version`, `jobsInFlight`, `openDocuments` or `progressTokens`)."""
    engine_status = await _engine_status(ls)
    return {"version": __version__, **engine_status, **ls.holds(),
            "progressTokens": len(ls.work_done_progress.tokens)}


@feature(RETRY_LOAD)
async def retry_load(ls: DlmServer, params: Any) -> dict:
    """`dlm/retryLoad`: load the model now, shown as a load at `initialized` is (progress,
    then a log line or an error message), and answer with `dlm/status` once it is done.
    After a failed load, requests with the same settings fail at once until a wait is
    over (up to a minute: `Engine.retry_load`); a user who has just mended the checkpoint
    or freed memory asks for the load instead of waiting for it or restarting the
    server.  With the model loaded it changes nothing, and shows no load (it showed a
    load's progress and "ready" line for none); asked during a load, it answers once that
    load ends, shown once (`preload`)."""
    ls.engine.retry_load()
    if ls.preloading or not (await _engine_status(ls))["loaded"]:
        await ls.preload()
    return await _full_status(ls)


async def _engine_status(ls: DlmServer) -> dict:
    """The status of the backend serving when it is answered.  New settings may replace
    the backend while a status waits on its service's thread (`switch_backend`): the
    answer was then the old one's ("unreachable", say, of a service the user had just
    switched away from), shown by the editor until its next poll.  The new backend is
    asked instead; a status asked on the event loop cannot be overtaken."""
    engine = ls.engine
    while engine.status_waits:
        answer = await asyncio.to_thread(engine.status)
        if ls.engine is engine:
            return answer
        engine = ls.engine
    return engine.status()


@feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: DlmServer,
                            params: types.InlineCompletionParams) -> types.InlineCompletionList:
    """Ghost text at the cursor: the fill, inserted at the cursor; with `candidates` > 1
    one item per distinct candidate, best first (an editor cycles through them).  A
    fill of whitespace only (the model ended the span at once, or wrote blank lines)
    is no suggestion: ghost text of empty lines would only push the code down; nor is
    one the syntax check rejected (`_suggestions`).  With a
    completion item selected in the editor, each suggestion is that item's text and
    then a fill made after it, over the item's range.  A document not kept past
    `maxOpenDocuments` gets none, not an error at every keystroke (the user was told
    when it was opened).  A position not in the document is refused as the position it
    is (-32602), before the fill's range is made of it."""
    rng = types.Range(params.position, params.position)
    if ls.refused.get(params.text_document.uri) is not None:
        return types.InlineCompletionList(items=[])
    position_offset(ls.document(params.text_document.uri), params.position)
    selected = _selected_item(ls, params)
    invoked = (params.context is not None
               and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked)
    texts = await ls.suggest(params.text_document.uri, rng, params.work_done_token, selected,
                             invoked)
    return types.InlineCompletionList(items=inline_items(texts, rng, selected))


def _selected_item(ls: DlmServer, params: types.InlineCompletionParams
                   ) -> types.SelectedCompletionInfo | None:
    """The completion item the editor shows selected (`selectedCompletionInfo`), if its
    range is one it could replace: a range of the document that holds the cursor, as
    the item's word does (`os.path.jo|`).  Another is a client's mistake, and taken as
    given it would splice the item's text somewhere else than the ghost text goes, or
    refuse the request (a range past the text): the item is left out, as if none were
    selected, and the mistake logged.  The cursor was checked by `inline_completion`,
    the document is by `fill_range` as for any fill."""
    selected = params.context.selected_completion_info if params.context else None
    doc = find_document(ls.workspace, params.text_document.uri)
    if selected is None or doc is None:
        return selected
    at = position_offset(doc, params.position)  # checked by `inline_completion`
    item = selected.range
    try:
        low, high = range_offsets(doc, item)
    except JsonRpcInvalidParams as exc:
        why = str(exc)
    else:
        if low <= at <= high:
            return selected
        why = "it does not hold the cursor"
    log.warning("inline completion at %d:%d: the selected completion item's range "
                "%d:%d-%d:%d is left out (%s)", params.position.line, params.position.character,
                item.start.line, item.start.character, item.end.line, item.end.character, why)
    return None


@feature(types.TEXT_DOCUMENT_COMPLETION)
async def completion(ls: DlmServer, params: types.CompletionParams) -> types.CompletionList:
    """The same fills as completion items (one per distinct candidate, best first), for
    clients without inline completion; each takes in the word typed before the cursor,
    which clients filter items by (`completion_items`).  A document not kept past
    `maxOpenDocuments` gets none, as for ghost text."""
    uri = params.text_document.uri
    if ls.refused.get(uri) is not None:
        return types.CompletionList(is_incomplete=False, items=[])
    typed, word = word_before(ls.document(uri), params.position)
    rng = types.Range(params.position, params.position)
    texts = await ls.suggest(uri, rng, params.work_done_token)
    return types.CompletionList(is_incomplete=True, items=completion_items(texts, typed, word))


def spliced(doc: TextDocument, rng: types.Range,
            accepted: types.SelectedCompletionInfo | None = None) -> tuple[str, int, int]:
    """The text a fill of `rng` in `doc` is made in, and the span's offsets there: the
    document's own, or with a completion item `accepted` as if it were applied, the
    span right after its text (`DlmServer.fill_range`)."""
    text = doc.source
    start, end = range_offsets(doc, rng)
    if accepted is not None:
        low, high = range_offsets(doc, accepted.range)
        text = text[:low] + accepted.text + text[high:]
        start = end = low + len(accepted.text)
    return text, start, end


def _suggestions(ls: DlmServer, result: InfillResult) -> list[str]:
    """The distinct fills worth offering, best first.  A fill of whitespace only (the
    model ended the span at once, or wrote blank lines) is none, nor is one the syntax
    check rejected, unless `suggestInvalid` asks for it: ghost text and completion items
    carry no verdict, so an editor would show code the server knows breaks the file
    (`dlm/infill` returns those fills, marked, for a client to decide)."""
    show_invalid = ls.config.suggest_invalid
    return list(dict.fromkeys(c.text for c in result.candidates
                              if c.text.strip() and (show_invalid or c.valid is not False)))


@feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.RefactorRewrite]))
def code_action(ls: DlmServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    """Offer "Fill holes" when the document has markers, "Rewrite selection" on a
    selection; nothing in a document not kept past `maxOpenDocuments` (editors ask at
    every move of the cursor, and the user was told when it was opened)."""
    uri = params.text_document.uri
    if ls.refused.get(uri) is not None or not _asked_for(params, ACTION_KIND):
        return []
    doc = ls.document(uri)
    actions = []
    holes = find_holes(doc.source, ls.config.hole_marker)
    if holes:
        title = f"Fill {len(holes)} hole{'s' * (len(holes) > 1)} with dlm-lsp"
        actions.append(types.CodeAction(title, kind=ACTION_KIND,
                                        command=types.Command(title, FILL_HOLES, arguments=[
                                            {"uri": uri, REPORT: True}])))
    if params.range.start != params.range.end and _holds(doc, params.range):
        title = "Rewrite selection with dlm-lsp"
        # the version the range is of: chosen after an edit, from a menu still shown, the
        # rewrite is refused, not made of whatever text the range now covers
        target = {"uri": uri, "range": ls.protocol._converter.unstructure(params.range),
                  "version": doc.version, REPORT: True}
        action = types.CodeAction(title, kind=ACTION_KIND,
                                  command=types.Command(title, REWRITE_SELECTION,
                                                        arguments=[target]))
        why = _too_long_to_rewrite(ls, doc, params.range)
        if why is None:
            actions.append(action)
        elif _shows_disabled(ls):
            action.disabled = types.CodeActionDisabled(why)
            actions.append(action)
    return actions


# The kind of both code actions: each rewrites code in place.
ACTION_KIND = types.CodeActionKind.RefactorRewrite


def _asked_for(params: types.CodeActionParams, kind: str) -> bool:
    """Whether a code action of `kind` is among those the client asks for: all where it
    names none, else those of a kind it names or one under it (`refactor` takes
    `refactor.rewrite`).  An editor asking for quick fixes only (`only: ["quickfix"]`, as
    on a diagnostic) was given ours, and the document scanned for holes, for nothing."""
    only = params.context.only if params.context is not None else None
    return not only or any(kind == asked or kind.startswith(f"{asked}.") for asked in only)


def _holds(doc: TextDocument, rng: types.Range) -> bool:
    """Whether `rng` is a range of the document's text.  One past a line's end (a client
    counting in another encoding) was offered "Rewrite selection", which then failed
    with -32602, and chosen from a menu, with no word to the user."""
    try:
        range_offsets(doc, rng)
    except JsonRpcInvalidParams:
        return False
    return True


def _too_long_to_rewrite(ls: DlmServer, doc: TextDocument, rng: types.Range) -> str | None:
    """Why a rewrite of `rng` (a range the document holds) would be refused as too long,
    where the backend can tell now (`rewrite_refusal`): offered anyway, the command would
    only say so after the user chose it."""
    start, end = range_offsets(doc, rng)
    return ls.engine.rewrite_refusal(doc.source[start:end])


def _shows_disabled(ls: DlmServer) -> bool:
    """Whether the client shows a code action it cannot run, with the reason
    (`codeAction.disabledSupport`); one that does not gets none."""
    caps = ls.client_capabilities.text_document
    action = caps.code_action if caps is not None else None
    return bool(action is not None and action.disabled_support)


async def told(ls: DlmServer, args: tuple[Any, ...], what: str,
               work: Callable[..., Awaitable[dict]]) -> dict:
    """`work`, a command's, and, where its arguments ask (`report`, which the server's
    code actions set), what it did not apply said with window/showMessage.  An editor
    runs a code action's command and shows nothing of its result (VS Code's lightbulb,
    Neovim's `vim.lsp.buf.code_action`, Helix, eglot), nor of a -32801, which it drops
    as a request an edit made moot: a rewrite chosen from the menu that wrote only
    whitespace, or that came after an edit, did nothing without a word.  The editor
    integrations' own commands show the result themselves, and do not ask."""
    if not command_flag(args, REPORT):
        return await work(ls, *args)
    try:
        result = await work(ls, *args)
    except JsonRpcContentModified as exc:
        ls.window_show_message(types.ShowMessageParams(
            types.MessageType.Warning, f"dlm-lsp: {what}: {exc.message}"))
        raise
    if result.get("applied") is False:
        ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, (
            f"dlm-lsp: {what}: "
            f"{result.get('message') or 'the editor did not apply the edit'}")))
    elif result.get("applied"):
        rejected = _rejected_fills(result.get("valid"))
        if rejected:  # applied all the same (the best fill is a draft worth editing)
            ls.window_show_message(types.ShowMessageParams(types.MessageType.Warning, (
                f"dlm-lsp: {what}: applied, but the check rejected {rejected} (it does "
                "not parse, or would fail when run); undo restores the code")))
    return result


def _rejected_fills(valid: Any) -> str:
    """"the fill", "2 of 3 fills" or "": those of a command's verdicts (one, or a list of
    them, None for unchecked) the check rejected.  A rewrite chosen from the code-action
    menu was applied as `def h(x)` over a working function without a word."""
    verdicts = valid if isinstance(valid, list) else [valid]
    bad = sum(verdict is False for verdict in verdicts)
    if not bad:
        return ""
    return "the fill" if len(verdicts) == 1 else f"{bad} of {len(verdicts)} fills"


@command(FILL_HOLES)
async def fill_holes(ls: DlmServer, *args: Any) -> dict:
    """Replace every hole marker, each conditioned on the text around it, in one edit."""
    return await told(ls, args, "fill holes", _fill_holes)


async def _fill_holes(ls: DlmServer, *args: Any) -> dict:
    uri, _ = command_target(args, FILL_HOLES, needs_range=False)
    doc = ls.document(uri)
    original = doc.source
    holes = find_holes(original, ls.config.hole_marker)
    if not holes:
        return {"applied": False, "holes": 0, "version": doc.version,
                "message": f"no {ls.config.hole_marker} holes in {document_name(uri)}"}
    job = ls.start_job(uri, doc.version, kind=Kind.COMMAND)
    token = None
    filled = False  # every hole, and the edit asked for
    try:
        # server-initiated progress, hole by hole, that the user can cancel (the command's
        # params carry no workDoneToken that pygls would hand to this handler); a cancel
        # while the client answers ends the job as any other does
        token = await ls.progress_token("holes")
        count = f"{len(holes)} hole{'s' * (len(holes) > 1)}"
        if token is not None:  # None where another request's progress is on it
            token = ls.begin_progress(token, job, "dlm-lsp: filling holes", f"0 of {count}")
        state = HoleFilling(original)
        valid = []  # each fill's syntax verdict (None: unchecked), for the editor to warn
        for done, hole in enumerate(holes, 1):
            start, end = state.current(hole)
            # drafts at the marker as the editor has it: its text is the original until the
            # one edit of every fill (the command sent none, where a rewrite sends them)
            result = await ls.fill(job, state.text, start, end, language_id=doc.language_id,
                                   options=InfillOptions(), is_hole=True,
                                   draft_range=offset_range(doc, *hole))
            state.accept(hole, result.candidates[0].text)
            valid.append(result.candidates[0].valid)
            if token is not None:
                ls.work_done_progress.report(token, types.WorkDoneProgressReport(
                    message=f"{done} of {count}", percentage=100 * done // len(holes)))
        edits = [types.TextEdit(offset_range(doc, s, e), fill) for s, e, fill in state.fills]
        applied, why = await ls.apply_edits(job, edits, "dlm-lsp: fill holes")
        filled = True
        fills = [fill for _, _, fill in state.fills]
        # a blank fill is applied (nothing may be what goes in a hole), but the editors
        # said "filled 1 hole" of a model that wrote nothing: they say how many were blank
        return {"applied": applied, "holes": len(holes), "version": job.version,
                "fills": fills, "valid": valid, "blank": sum(not f.strip() for f in fills),
                **({"message": why} if why else {})}
    finally:
        ls.jobs.finish(job)
        if token is not None and filled:  # a cancel once the edit was sent stopped none of it
            ls.finish_progress(token, "done")
        elif token is not None:
            ls.end_progress(token, job, done=False)


@command(REWRITE_SELECTION)
async def rewrite_selection(ls: DlmServer, *args: Any) -> dict:
    """Re-generate the selected block and apply it through workspace/applyEdit."""
    return await told(ls, args, "rewrite selection", _rewrite_selection)


async def _rewrite_selection(ls: DlmServer, *args: Any) -> dict:
    uri, rng = command_target(args, REWRITE_SELECTION, needs_range=True)
    version = command_version(args, REWRITE_SELECTION)
    doc = ls.at_version(uri, version)
    if command_flag(args, "expand", 2):  # to the smallest enclosing statement or definition
        start, end = range_offsets(doc, rng)
        language = language_for(doc.language_id, uri)
        local = local_text(doc.source, start, end)  # None in a line of megabytes: kept
        found = None if local is None else enclosing_node_range(
            local[0], start - local[1], end - local[1], language)
        if found is not None:
            rng = offset_range(doc, found[0] + local[1], found[1] + local[1])
    if rng.start == rng.end:
        raise JsonRpcInvalidParams("dlm.rewriteSelection needs a non-empty selection")
    # server-initiated progress, step by step, that the user can cancel; the fill is of the
    # version the range is of, also where the command names none
    job, result = await ls.fill_range(uri, rng, InfillOptions(), doc.version,
                                      kind=Kind.COMMAND, progress="rewrite")
    selected = _replaced(ls, uri, rng)
    best = writing_first(result.candidates, selected)[0]
    answer = {"version": job.version, "text": best.text, "range": to_plain(rng),
              "valid": best.valid}
    if deletes_code(best, selected):
        return {**answer, "applied": False, "message": NOTHING_WRITTEN}
    applied, why = await ls.apply_edits(job, [types.TextEdit(rng, best.text)],
                                        "dlm-lsp: rewrite selection")
    return {**answer, "applied": applied, **({"message": why} if why else {})}


@feature(types.SHUTDOWN)
def shutdown(ls: DlmServer, params: Any) -> None:
    """Stop the jobs in flight at their next step (the worker stays: over TCP, another
    client may come after this one)."""
    ls.jobs.stop_all(SHUTTING_DOWN)


def build_server(backend_factory: BackendFactory = make_backend,
                 pins: dict[str, Any] | None = None) -> DlmServer:
    """A language server with every handler registered, its fills on `backend_factory`'s
    backend (by default one of its own: over stdio the process serves one client), and
    the model settings `pins` fixed whatever its client's say (pinned.py)."""
    ls = DlmServer(backend_factory, pins)
    for name, options, fn in _FEATURES:
        ls.feature(name, options)(fn)
    for name, fn in _COMMANDS:
        ls.command(name)(fn)
    return ls


server = build_server()
