"""The infill engine: a span of a document in, ranked candidate fills out.

It owns the model and runs synchronously; the server calls it from one worker
thread so the event loop keeps answering the editor.  Cancellation and drafts
cross the thread boundary as plain callables (`should_stop`, `on_draft`).
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from dlm_lsp.config import SERVER_ONLY, ServerConfig, setting
from dlm_lsp.costs import StepCost, calibrate, shared_step_ms, steps_within
from dlm_lsp.line_endings import for_the_model, restored
from dlm_lsp.models import (
    DiffusionModel,
    ModelLoadError,
    device_name,
    load_model,
    precision_name,
    uses_graphs,
)
from dlm_lsp.passes import (
    MASK_PLACEHOLDER,
    InfillRun,
    caches_context,
    document_for,
    judged,
    rank,
    repair_config,
)
from dlm_lsp.policy import (
    BUDGET_SETTINGS,
    REWRITE,
    WITHOUT_TOKENIZER,
    SpanPlan,
    local_text,
    plan_span,
    rewrite_refusal,
    span_reach,
    step_budget,
)
from dlm_lsp.python_indents import with_line_start_bars
from dlm_lsp.quantiles import status_ms
from dlm_lsp.recent import RecentFills, Remembered
from dlm_lsp.repair import DIFFUSION, LEFT_TO_RIGHT, REUSED
from dlm_lsp.results import Candidate, InfillRequest, InfillResult
from dlm_lsp.sampler import Cancelled, refine_start
from dlm_lsp.sampler_settings import sampler_config, strictly_left_to_right
from dlm_lsp.serving import BatchConfig, BatchStats, StepBatcher, Target
from dlm_lsp.slowdown import LoadFactor
from dlm_lsp.span import (
    SpanLayout,
    borrowed_line_break,
    head_positions,
    reproducible_layout,
)
from dlm_lsp.validation import ParsedDocument, language_for
from dlm_lsp.waiting import holding

__all__ = ["Cancelled", "Candidate", "Engine", "InfillRequest", "InfillResult",
           "MASK_PLACEHOLDER", "OutOfMemory"]


class OutOfMemory(RuntimeError):
    """The device ran out of memory during an infill."""


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError | torch.OutOfMemoryError) or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


SMALLER_BATCH, ON_CPU = "a smaller batch", "the CPU"  # the ways out of memory, in order


# After a failed load, requests with the same settings fail at once with its error for
# this long before the model is loaded again, twice as long after each further failure up
# to the cap, and at least as long as the failed load took.  Without it every request
# (each typing pause's ghost text) loaded again: for a checkpoint whose load runs out of
# memory, gigabytes read and refused at every pause, the server busy loading, the editor
# stuttering.  New settings that load another model (the user's fix) load it at once.
LOAD_RETRY_S, LOAD_RETRY_CAP_S = 2.0, 60.0
_clock = time.monotonic  # what the waits are timed by (a test moves it)


# The settings a loaded model depends on, as the user writes them (what they load: see
# `_placement`).
LOADED_WITH = ("model", "device", "precision", "cuda_graphs")


def _loaded_with(cfg: ServerConfig) -> tuple:
    return tuple(getattr(cfg, name) for name in LOADED_WITH)


def _placement(cfg: ServerConfig, fallback: str | None = None) -> tuple:
    """The model that settings `cfg` load, told apart as far as a load tells them apart:
    the checkpoint, the device ("auto" resolved as the loader resolves it), the precision
    on that device ("auto" resolved likewise: bf16 on CUDA and on a CPU with native bf16,
    else fp32), and the CUDA graphs switch only on CUDA, the one device that replays
    them, and only for a model that replays them (our own, `uses_graphs`: a published
    checkpoint runs eagerly whatever the switch says).  Settings that say the same in
    other words ("cpu" where "auto" is the CPU, "fp32" where "auto" is fp32, `cudaGraphs`
    on a CPU or for a published checkpoint) place the model alike, and reloading it for
    them cost seconds to minutes for a big checkpoint, and its timed step cost.

    `fallback` is the device the engine moved the model to on its own, out of memory
    (see `Engine._after_oom`).  No settings asked for that move, so the model is placed
    apart from any that do not name its device: the settings' next change ends the
    fallback with a load of what they ask, the device that ran out of memory tried
    again, also where "auto" now resolves to the CPU it runs on (a rule that holds
    whatever the devices are called: the tests' GPU, DLM_LSP_FAULTS=oom-gpu, is the CPU
    itself).  Settings that name that device ("cpu") ask for the model where it runs:
    `Engine.reconfigure` places them with the fallback, and it stays."""
    device = fallback or device_name(cfg.device)
    graphs = device == "cuda" and uses_graphs(cfg.model)
    return (cfg.model, device, precision_name(cfg.precision, device),
            cfg.cuda_graphs if graphs else None, fallback is not None)


def loads_apart(current: ServerConfig, asked: ServerConfig) -> list[str]:
    """The settings of LOADED_WITH in which `asked` loads another model than `current`
    (see `_placement`), not those that only reword `current`'s ("cpu" where its "auto" is
    the CPU): for a client sharing an engine of `current`, what it asks for in vain.  Each
    is taken on its own, on `current`'s others; together they place the model elsewhere
    exactly when one of them does, since the device each resolves on is `current`'s
    unless the device itself is among them."""
    placed = _placement(current)
    return [name for name in LOADED_WITH
            if _placement(replace(current, **{name: getattr(asked, name)})) != placed]


def _graph_status(model: DiffusionModel | None) -> dict[str, Any] | None:
    """What the CUDA graphs of a model have done (None where steps run eagerly)."""
    graphs = getattr(model, "graphs", None)
    if graphs is None:
        return None
    stats = graphs.stats
    return {"shapes": len(graphs.shapes()), "captured": stats.captured,
            "replays": stats.replays, "eager": stats.eager, "failed": stats.failed}


class Engine:
    """Loads the configured model once and serves infill requests."""

    status_waits = False  # `status` reads this process's figures (`Backend.status_waits`)

    def __init__(self, config: ServerConfig):
        self.config = config
        self._model: DiffusionModel | None = None
        self._cost: StepCost | None = None
        self._batcher: StepBatcher | None = None
        self._lock = threading.Lock()
        # Held through a model load, which takes seconds to minutes, so that `_lock` is not:
        # status() and reconfigure(), called on the server's event loop, never wait for a
        # load (that stood the whole server, every request and TCP client, still until the
        # load ended).  One load at a time: a load whose settings changed meanwhile is
        # thrown away and done again (see `model`).
        self._loading = threading.Lock()
        self._calibrating = threading.Lock()  # see step_cost
        # passes measured against the cost model: how much slower they run under load
        self.load_factor = LoadFactor()
        self._alone = threading.Lock()
        # the passes that ran alone, outside the batching worker (with a context cache, or
        # `batchRows` 0, or a worker that ended first): status counts them with its own
        self.alone_stats = BatchStats()
        # the passes of workers that new settings retired, so that status's counts never go
        # back (the remote service exports them as counters): those still finishing their
        # fills are read as they run, and folded into `_ended_stats` once ended
        self._retired: list[StepBatcher] = []
        self._ended_stats = BatchStats()
        self._closed = False  # see close
        self.recent = RecentFills()
        # (ms, span tokens denoised) of recent fills, for status
        self.recent_fills: deque[tuple[float, int]] = deque(maxlen=512)
        # After running out of memory: fewer rows per shared pass, then the CPU (see infill);
        # what the engine changed on its own is said in `notices`, for the user.
        self._row_cap: int | None = None
        self._fallback_device: str | None = None
        self.notices: deque[str] = deque(maxlen=16)
        # The model's last failed load, until a load succeeds or the settings change (its
        # text is `dlm/status`'s loadError: without it, status said "not loaded" and an
        # editor showed "loading" forever), and when it is tried again (by `_clock`), after
        # how many failures in a row of the settings `_failed_key` load (see
        # LOAD_RETRY_S); until then `_failure` is raised again, itself, so that its kind
        # (DeviceUnavailable) goes with it
        self._failure: ModelLoadError | None = None
        self._retry_at = 0.0
        self._load_failures = 0
        self._failed_key: tuple | None = None
        # Fault injection for tests of error handling: "oom" fails every infill with an
        # out-of-memory error, "oom-once" only the first (retries included), "oom-first-try"
        # only the first try (its retry succeeds), "oom-gpu" every try until the engine has
        # fallen back to the CPU (as if the model sat on a GPU that is too small).
        self._faults = set(filter(None, os.environ.get("DLM_LSP_FAULTS", "").split(",")))

    @property
    def model(self) -> DiffusionModel:
        """The model, loaded on first use (raises ModelLoadError with a clear message).

        The settings may change during the load (reconfigure does not wait for it): then
        the model just loaded, or its error, is of settings no longer in effect, so it is
        dropped and the load done again with the new ones.  The model returned is always
        the one the settings in effect ask for.

        A load that failed is not tried again until its wait is over (LOAD_RETRY_S): until
        then the same settings raise its error at once, also for the requests that
        waited for the failing load."""
        return self.loaded()

    def loaded(self, should_stop: Callable[[], bool] | None = None) -> DiffusionModel:
        """The model (`model`), waiting for a load under way unless `should_stop` says so
        (then `Cancelled`): a fill stopped meanwhile was answered once the load ended."""
        with holding(self._loading, should_stop):
            while True:
                with self._lock:
                    if self._model is not None:
                        return self._model
                    config, wanted = self.config, self._load_key()
                    device = self._fallback_device or config.device
                    if (self._failure is not None and self._failed_key == wanted
                            and _clock() < self._retry_at):
                        # a copy: the requests raising it meanwhile run on several
                        # threads, and each one's traceback is its own
                        raise copy.copy(self._failure).with_traceback(None)
                began = _clock()
                try:
                    model = load_model(config.model, device, config.precision,
                                       config.cuda_graphs)
                except ModelLoadError as exc:
                    with self._lock:
                        if self._load_key() == wanted:
                            self._failed(wanted, exc, began)
                            raise
                    continue
                with self._lock:
                    if self._load_key() == wanted:
                        self._model = model
                        self._failure, self._load_failures, self._failed_key = None, 0, None
                        return model
                del model  # outdated: let it go before the next load

    def _failed(self, key: tuple, error: ModelLoadError, began: float) -> None:
        """Record a failed load of `key` that began at `began` (call with `_lock` held)."""
        failures = self._load_failures + 1 if self._failed_key == key else 1
        wait = max(min(LOAD_RETRY_S * 2 ** (failures - 1), LOAD_RETRY_CAP_S),
                   _clock() - began)
        self._failure, self._load_failures, self._failed_key = error, failures, key
        self._retry_at = _clock() + wait

    def retry_load(self) -> None:
        """End the wait before a failed load is tried again (`dlm/retryLoad`): the user
        who mended a checkpoint on disk, or freed the memory its load ran out of, says so
        and wants the model now, not after up to LOAD_RETRY_CAP_S.  The count of
        failures is kept, so a load that fails again waits longer than the last wait."""
        with self._lock:
            self._retry_at = 0.0

    def _load_key(self) -> tuple:
        """The placement of the model loaded, or to load, now (call with `_lock` held): a
        load whose key is no longer this one is of settings no longer in effect."""
        return _placement(self.config, self._fallback_device)

    def reconfigure(self, config: ServerConfig) -> bool:
        """Adopt new settings; returns whether they place the model elsewhere (see
        `_placement`), in which case it is loaded again at its next use, and what was
        learnt of the old one (its step cost, the rows that fit in a pass, a load error)
        goes with it.  A fallback to the CPU lasts until one of LOADED_WITH changes as
        written: a device setting of "cuda" where "auto" was is a request to try the GPU
        again.  One of "cpu", the device the model fell back to, asks for the model where
        it runs: it is kept, not loaded there again (the fallback goes on, now as asked),
        unless the model or precision changes with it.  Never waits for a load in
        progress (see `model`): the server calls it on its event loop, which must go on
        answering meanwhile.  A reload, or `batch_rows` 0, retires the batching worker
        (its fills end on it): left alone, it waited for good for fills that now run
        alone, or kept the old model in memory while the next fill loaded the new one."""
        retired = None
        with self._lock:
            fallback = self._fallback_device
            if _loaded_with(config) != _loaded_with(self.config) and config.device != fallback:
                fallback = None
            reload = _placement(config, fallback) != self._load_key()
            if reload:
                self._model = None
                self._cost = None
                self._row_cap = self._fallback_device = None
                self._failure = self._failed_key = None  # new settings load at once
            if reload or config.batch_rows == 0:
                retired, self._batcher = self._batcher, None
                self._keep_counts(retired)
            self.config = config
        if retired is not None:
            retired.retire()
        return reload

    def config_for(self, req: InfillRequest) -> ServerConfig:
        """The settings a request's fill runs with: its own (a remote client's), else ours."""
        return req.config if req.config is not None else self.config

    def preload(self) -> str:
        """Load the model now (raises ModelLoadError) and say where it runs; where a
        latency target is set, time its steps now too (`step_cost`): the first fill with
        one took the timing's seconds into its own (3.5 s against a 200 ms target)."""
        model = self.model
        if latency_targeted(self.config):
            self.step_cost(model)
            return f"model {model.name} ready on {model.device}, its steps timed"
        return f"model {model.name} ready on {model.device}"

    def rewrite_refusal(self, selected: str, config: ServerConfig | None = None) -> str | None:
        """Why a rewrite of `selected` would be refused as too long, told by the loaded
        model's tokenizer and length, under `config` (a client's own, whose fills carry
        it: `config_for`), else ours.  Until a model is loaded (a code action does not
        wait for a load) only `maxSpanTokens` is known, and a selection is counted at
        CHARS_PER_TOKEN characters a token (`WITHOUT_TOKENIZER`), as a remote server's is:
        code tokenizes at 3-4 characters a token, so what is told disabled now the command
        refuses, and a shorter selection may still be told once the model is loaded.  (It
        was offered enabled, and refused when chosen, while the model loaded.)  Only a selection
        mostly of long runs of one character, which tokenizers hold as single tokens (the
        shipped one has 64 `#` and a line break with 47 spaces), can be fewer tokens than
        that count: 34 lines of 60 spaces and `x` are 105 tokens, counted 132."""
        cfg, model = config or self.config, self._model
        if model is None:
            return rewrite_refusal(selected, cfg, WITHOUT_TOKENIZER)
        return rewrite_refusal(selected, cfg, model.tokenizer, span_reach(model.max_length))

    def forget(self, uri: str) -> None:
        """Drop what is kept of a closed document (its recent fills)."""
        self.recent.forget(uri)

    def close(self) -> None:
        """Retire the batching worker; the engine is not used for new fills after this, and a
        fill of it still under way ends on its model: the worker finishes the passes it has
        taken (cancelling them told the client "fill stopped" with no reason), and the
        fill's later passes, or one the worker ended before taking, run alone (a new worker
        would keep the model for as long as the process runs).  The server calls this on
        its event loop (the backend switched away from local), so the worker is not waited
        for: its forward pass in progress takes seconds for a big model on a CPU, and
        joining it there held `_lock` (status(), reconfigure()) and the server that long."""
        with self._lock:
            self._closed = True
            batcher, self._batcher = self._batcher, None
            self._keep_counts(batcher)
        if batcher is not None:
            batcher.retire()

    def batcher(self, model: DiffusionModel | None = None) -> StepBatcher | None:
        """The model's batching worker (None when `batch_rows` is 0: each request alone).
        A fill of `model` after the settings replaced it gets None too: it ends alone on
        the model it began with, not in a batch of the new one.  The worker handed out may
        end before the fill gives it a pass (close() or new settings retired it): its
        `run` then raises WorkerClosed, and the fill runs that pass alone (InfillRun)."""
        model = self.model if model is None else model
        with self._lock:
            if self._closed or self.config.batch_rows == 0 or model is not self._model:
                return None
            if self._batcher is None or self._batcher.model is not model:
                if self._batcher is not None:  # its fills end on their model (see retire);
                    self._batcher.retire()  # not waited for with `_lock` held (see close)
                    self._keep_counts(self._batcher)
                self._batcher = StepBatcher(model, BatchConfig(self.config.batch_rows),
                                            lambda: self.step_cost(model), self.load_factor)
            self._batcher.config.max_rows = min(self.config.batch_rows,
                                                self._row_cap or self.config.batch_rows)
            self._batcher.config.pad = self.config.batch_padding
            return self._batcher

    def _keep_counts(self, retired: StepBatcher | None) -> None:
        """Keep the passes of a worker being retired in status's counts (with `_lock`)."""
        if retired is not None:
            self._retired.append(retired)

    def _worker_stats(self, current: StepBatcher | None) -> BatchStats:
        """The passes of every batching worker this engine has had (with `_lock`)."""
        for ended in [w for w in self._retired if w.ended]:
            self._ended_stats += ended.stats
            self._retired.remove(ended)
        stats = self._ended_stats
        for worker in self._retired:
            stats = stats + worker.stats
        return stats if current is None else stats + current.stats

    def status(self) -> dict[str, Any]:
        """What the engine is doing, for `dlm/status`: the model and device (without
        loading them) or why the model failed to load, queue depth, recent latency,
        throughput and cache hit rate.  Before the model is loaded, the device is the one
        it loads on ("auto" resolved: editors show it as where the model runs)."""
        with self._lock:
            model, batcher, cost = self._model, self._batcher, self._cost
            shared = self._worker_stats(batcher)
            error = str(self._failure) if self._failure is not None else None
            planned = self._fallback_device or self.config.device
            retry = (max(self._retry_at - _clock(), 0.0)
                     if error is not None and self._failed_key == self._load_key() else None)
        fills = list(self.recent_fills)
        ms = [m for m, _ in fills]
        every = shared + self.alone_stats
        return {
            "model": self.config.model, "loaded": model is not None, "loadError": error,
            # seconds until a failed load is tried again (0: at the next request)
            "loadRetryS": round(retry, 1) if retry is not None else None,
            # a load under way (`_loading` is held through one; only briefly once loaded)
            "loading": model is None and self._loading.locked(),
            "device": str(model.device) if model is not None else device_name(planned),
            "queueDepth": batcher.depth if batcher is not None else 0,
            "fills": len(ms), "p50Ms": status_ms(ms, 0.5), "p95Ms": status_ms(ms, 0.95),
            "tokensPerSecond": round(sum(t for _, t in fills) / max(sum(ms) / 1000, 1e-9), 1)
            if ms else None,
            # rows a pass, over every pass: the worker's shared ones and those run alone
            "batchOccupancy": round(every.occupancy, 2) if every.passes else None,
            "forwardPasses": every.passes,
            # batchPadding at work: passes that padded shorter rows, and the fills they held
            "paddedPasses": shared.padded,
            "paddedFills": shared.padded_fills,
            "cacheHitRate": round(self.recent.hit_rate, 3),
            "stepMs": round(cost.step_ms(1, 256), 2) if cost is not None else None,
            # measured / predicted passes (1 on a quiet machine): what scales step budgets
            "loadFactor": round(self.load_factor.value, 2),
            "cudaGraphs": _graph_status(model),
        }

    def step_cost(self, model: DiffusionModel | None = None) -> StepCost:
        """The per-step cost of `model` (by default the current one) on its device,
        calibrated on first use.  Calibrating times 16 forward passes (seconds, minutes
        for a 7B model on a CPU), so it does not hold `_lock`, which status() and
        reconfigure() take on the server's event loop; `_calibrating` keeps it to one at a
        time (two at once would time each other).  The cost is kept only for the model
        in use: one that new settings replaced meanwhile is timed for its own fill only."""
        model = self.model if model is None else model
        with self._calibrating:
            with self._lock:
                if self._cost is not None and model is self._model:
                    return self._cost
            cost = calibrate(model)
            with self._lock:
                if model is self._model:
                    self._cost = cost
                    self.load_factor.clear()  # its ratios were to the cost replaced
            return cost

    def infill(self, req: InfillRequest) -> InfillResult:
        """Denoise the span and return validated, ranked candidates.

        Out of memory, the fill is tried again with fewer rows per shared forward
        pass, then (from an accelerator) on the CPU; only when nothing is left to
        try is OutOfMemory raised.  The CPU lasts until one of LOADED_WITH changes (a
        device setting of "cpu" keeps it), the smaller batch until settings load another
        model (see `reconfigure`); both are said in `notices`.
        """
        began = time.perf_counter()
        tried: list[str] = []
        req, lines = for_the_model(req)  # \r\n or \r line breaks: the model sees \n
        while True:
            with self._lock:
                ran_under = (self._row_cap or self.config.batch_rows, self._fallback_device)
            try:
                return restored(self._infill(req, began), lines)
            except (RuntimeError, MemoryError) as exc:
                if not _is_oom(exc):
                    raise
                way_out = self._after_oom(tried, *ran_under)
                if way_out is None:
                    self._faults.discard("oom-once")
                    also = f" (tried again with {' and on '.join(tried)})" if tried else ""
                    raise OutOfMemory(
                        f"out of memory while denoising on {self.config.device}{also}: try "
                        "fewer candidates, a shorter span, or device 'cpu'") from exc
                tried.append(way_out)

    def _after_oom(self, tried: list[str], rows: int, fallback: str | None) -> str | None:
        """Make the next try fit in memory: halve the rows per shared forward pass (once per
        fill), then move the model to the CPU; None when neither is left.  `rows` and
        `fallback` are what the failed try ran under.  Fills that shared the pass that ran
        out of memory all come here: the rows are halved from what they ran under, not
        once per fill (four fills in one pass took 16 rows to 1, for good), and a fill
        whose try ran on the accelerator before another moved the model to the CPU is
        tried again there (it was told it ran out of memory, with the CPU ready)."""
        with self._loading, self._lock:
            model = self._model
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            if SMALLER_BATCH not in tried and rows > 1:
                now = self._row_cap or self.config.batch_rows
                if rows // 2 < now:
                    self._row_cap = rows // 2
                    self.notices.append(f"out of memory: now at most {self._row_cap} rows "
                                        "per forward pass (setting batchRows)")
                return SMALLER_BATCH
            if ON_CPU in tried:
                return None
            if fallback is None and self._fallback_device is not None:
                return ON_CPU  # another fill moved the model meanwhile
            on_accelerator = (model is not None and model.device.type != "cpu") or (
                "oom-gpu" in self._faults)
            if self._fallback_device is None and on_accelerator:
                self._fallback_device = "cpu"
                self._model = self._cost = None
                self.notices.append(f"out of memory on {self.config.device}: the model now "
                                    "runs on the CPU, slower, until the device or model "
                                    "setting changes")
                return ON_CPU
        return None

    def _infill(self, req: InfillRequest, began: float) -> InfillResult:
        if self._faults & {"oom", "oom-once", "oom-first-try"} or (
                "oom-gpu" in self._faults and self._fallback_device is None):
            self._faults.discard("oom-first-try")
            raise torch.OutOfMemoryError("injected fault (DLM_LSP_FAULTS)")
        model, cfg, opt = self.loaded(req.should_stop), self.config_for(req), req.options
        tok = model.tokenizer
        language = language_for(req.language_id, req.uri)
        # what a fill is planned, checked and repaired as (`passes.document_for` reads the
        # same): part of what a remembered fill is reused for.  Without it, a cell filled
        # as Python and opened again as another language got the Python fill back
        written_as = language or req.language_id
        plan = plan_span(req.text, req.start, req.end, cfg, opt, tok, req.is_hole, language,
                         span_reach(model.max_length))
        # the context the model is shown: a notebook cell's other cells around the cell
        prefix, suffix = req.shown_prefix(), req.shown_suffix()
        # what remembered fills are keyed by besides the text: worked out once a fill
        settings = fill_settings(cfg) if cfg.reuse_fills else ""
        if req.start == req.end and req.uri and cfg.reuse_fills:
            rest = self.recent.typed_along(req.uri, prefix, suffix, (opt, settings),
                                           written_as)
            if rest is not None:
                return self._reused(req, plan, Remembered((rest,), (0.0,), (0,), (REUSED,),
                                                          0, 0), "typed", began)
        tail = borrowed_line_break(req.text[:req.end], req.text[req.end:])
        layout = reproducible_layout(tok, prefix, tail + suffix, plan.n_masked,
                                     cfg.max_context_tokens, max_length=model.max_length)
        if language == "python" and cfg.validate:  # a line the span starts stands where
            layout = with_line_start_bars(layout, tok, req.text, req.start)  # Python allows

        strategy = opt.strategy or cfg.strategy
        # the baseline spends one step per token, the moved head's tokens included
        steps = layout.n_masked if strategy == "left-to-right" else plan.steps
        rows = opt.candidates or cfg.candidates
        length = len(layout.prefix_ids) + layout.n_masked + len(layout.suffix_ids)
        target = step_budget(cfg, opt, plan.kind).latency_ms
        timing = time.perf_counter()
        # predicted passes scaled by the load factor: on a loaded machine passes run slower
        # than calibrated (the factor is 1 on a quiet one: budgets are the cost model's own)
        cost_ms = None if target is None else self._step_ms(
            model, cfg, layout, rows, length, bool(setting(opt, cfg, "grow_for_head")))
        step_ms = None if cost_ms is None else cost_ms * self.load_factor.value
        # The first fill with a target times the model's step (16 passes, once per model):
        # counted against this fill's target, that left it one step, a poor fill that was
        # late anyway.  The target is the denoising's; the reported time still says all.
        budget_from = began + (time.perf_counter() - timing)
        if step_ms is not None and strategy != "left-to-right":
            steps = steps_within(target, step_ms, plan.n_masked,
                                 (time.perf_counter() - budget_from) * 1000)
        sampler = sampler_config(cfg, opt, steps, strategy, plan.single_line)
        seed = opt.seed if opt.seed is not None else cfg.seed
        # the lines a multi-line fill is shaped against (re-indented, cut to units)
        local = None if plan.single_line else local_text(req.text, req.start, req.end)
        key = None
        if cfg.reuse_fills:
            key = (id(model), tuple(layout.prefix_ids), tuple(layout.suffix_ids), layout.n_masked,
                   layout.head, tail, repr(sampler), seed, repr(plan), repr(opt),
                   hash(local), settings, written_as)
            found = self.recent.get(key)
            if found is not None:
                return self._reused(req, plan, found, "exact", began)
        extra_passes = 0
        strength = setting(opt, cfg, "strength")
        if plan.kind == REWRITE and strength is not None:
            old = req.text[req.start:req.end]
            old = old[:len(old) - len(tail)] if tail else old  # the suffix shows the break
            layout = self._refine_layout(model, layout, old, strength,
                                         setting(opt, cfg, "refine_order"), seed)
            extra_passes = int(layout.init_ids is not None and strength > 0
                               and setting(opt, cfg, "refine_order") == "confidence")
        run = InfillRun(self, model, req, plan, layout, tail, self._document(req), language,
                        local)
        if step_ms is not None:
            run.target = Target(budget_from + target / 1000, step_ms, cost_ms)
        out = run.denoise(layout, sampler, seed, with_drafts=True)
        candidates = run.candidates(out, LEFT_TO_RIGHT if strategy == "left-to-right"
                                    else DIFFUSION)
        repair = repair_config(cfg, opt)
        # an error that no fill here can mend is not worth repair and the retry
        hopeless = (run.checked and not any(c.valid for c in candidates)
                    and run.beyond_reach(candidates))
        # syntax repair when nothing is valid; with or without a grammar, what a fill leaves
        # out (broken bytes, stray controls) is written again unless one is whole (and valid)
        syntax = run.checked and not hopeless and not any(c.valid for c in candidates)
        if syntax or not any(c.valid is not False and not c.broken for c in candidates):
            candidates = run.repair(candidates, repair, sampler, seed, syntax)
        if (run.checked and not hopeless and repair.fallback and strategy != "left-to-right"
                and plan.n_masked <= repair.fallback_max_tokens
                and not any(c.valid for c in candidates) and run.affords(layout.n_masked)):
            retry = replace(strictly_left_to_right(sampler, layout.n_masked),
                            temperatures=sampler.temperatures[:1])
            candidates += run.candidates(run.denoise(layout, retry, seed), LEFT_TO_RIGHT)
        # of two fills as valid, one that lost characters (broken bytes, controls) is the worse
        candidates.sort(key=rank)
        # one more pass, as repair and the retry are: not where a fill asks for one pass
        # alone (`repairRounds` 0 and no fallback: a step budget's benchmarks)
        # the code below reads a name the best fill leaves unbound: begin one with it; the
        # best fill is blank where the code says a line is missing: begin one with that
        # and a loop around the span leaves idle the local it is there to update: begin one
        # with that local; and the function has a value (a local worked out above, a
        # parameter) that nothing reads: begin the line's expression with it
        repaired_at = run.passes  # the passes of the first run, repair and the retry
        for on, hint in ((cfg.binding_hints, run.bind_hint), (cfg.blank_hints, run.blank_hint),
                         (cfg.tally_hints, run.tally_hint), (cfg.value_hints, run.value_hint)):
            if (on and run.checked and not hopeless and (repair.rounds > 0 or repair.fallback)
                    and run.affords(sampler.steps)):
                hinted = hint(candidates[0], replace(
                    sampler, temperatures=sampler.temperatures[:1]), seed, repair)
                if hinted is not None:
                    candidates.insert(0, hinted)
        candidates = candidates[:len(sampler.temperatures)]  # as many as were asked for
        ms = (time.perf_counter() - began) * 1000
        # a step's time as the batching worker last timed it (the rounds it shared)
        predicted = None if run.target is None else round(
            run.target.step_ms * (out.steps + extra_passes), 1)
        best = candidates[0]
        syntax = best.check.reason if best.check is not None else f"not checked: {run.unchecked}"
        # the span as the first pass denoised it: the positions a head's chain grew it by
        # are the head's as much as those it was planned with (`growForHead`)
        result = InfillResult(candidates, plan, run.passes + extra_passes,
                              layout.n_masked + out.grown, ms,
                              out.early_stopped, best.path, run.repair_rounds, predicted, syntax,
                              repair_steps=repaired_at - out.steps,
                              hint_steps=run.passes - repaired_at)
        self._remember(req, key, result, settings, written_as)
        return result

    def _step_ms(self, model: DiffusionModel, cfg: ServerConfig, layout: SpanLayout, rows: int,
                 length: int, grows: bool = False) -> float:
        """The predicted time of one of this fill's steps on `model`, the one it runs on: a
        full pass, shared with the requests the batching worker holds as the fill starts
        (`shared_step_ms`; those that come later still slow it), or with the context cache
        the mean over a refresh cycle, whose other steps run only the span and the context
        beside it."""
        cost = self.step_cost(model)
        if not caches_context(model, cfg, grows):
            batcher = self.batcher(model)
            others = batcher.load() if batcher is not None else []
            if not others:
                return cost.step_ms(rows, length)
            return shared_step_ms(cost, rows, length, others, batcher.config.max_rows,
                                  batcher.pads)
        return cost.cycle_ms(rows, length, layout.n_masked + 2 * cfg.cache_window,
                             cfg.cache_refresh)

    def _remember(self, req: InfillRequest, key: Any, result: InfillResult, settings: str,
                  language: str | None = None) -> None:
        """Keep a finished fill, written as `language` under `settings` (`fill_settings`),
        for repeated requests and for typing along (see recent.py)."""
        self.recent_fills.append((result.ms, result.tokens))
        if key is None:
            return
        cands = result.candidates
        self.recent.put(key, Remembered(tuple(c.text for c in cands),
                                        tuple(c.score for c in cands),
                                        tuple(c.used for c in cands),
                                        tuple(c.path for c in cands), result.steps,
                                        result.tokens, tuple(c.ended for c in cands)))
        if req.start == req.end and req.uri and cands[0].text:
            self.recent.remember_typed(req.uri, req.shown_prefix(), req.shown_suffix(),
                                       cands[0].text, (req.options, settings), language)

    def _reused(self, req: InfillRequest, plan: SpanPlan, found: Remembered, how: str,
                began: float) -> InfillResult:
        """A result from remembered fills, validated again against this document."""
        document = self._document(req)
        candidates = []
        ended = found.ended or (None,) * len(found.texts)  # the rest typed along: not known
        for text, score, used, path, end in zip(found.texts, found.scores, found.used,
                                                found.paths, ended, strict=True):
            check = (judged(document, req, text, self.config_for(req))
                     if isinstance(document, ParsedDocument) else None)
            candidates.append(Candidate(text, check.valid if check else None, score, used,
                                        path, [], check, ended=end))
        candidates.sort(key=rank)
        best = candidates[0]
        syntax = best.check.reason if best.check is not None else f"not checked: {document}"
        ms = (time.perf_counter() - began) * 1000
        self.recent_fills.append((ms, 0))
        return InfillResult(candidates, plan, 0, found.tokens, ms, False, best.path, 0, None,
                            syntax, how)

    def _document(self, req: InfillRequest) -> ParsedDocument | str:
        """The request's document parsed for validation, or why its fills go unchecked."""
        return document_for(req, self.config_for(req))

    @staticmethod
    def _refine_layout(model: DiffusionModel, layout: SpanLayout, old: str, strength: float,
                       by: str, seed: int) -> SpanLayout:
        """Start a rewrite from the old code, with `strength` of its tokens masked.  At
        strength 1 nothing of it is kept, not even a token that holds the head and the old
        code's start (` foo` after `x =`): the span starts masked, and the head is spelled
        anew."""
        tok = model.tokenizer
        ids = tok.encode(layout.head + old)
        if len(ids) > layout.n_masked or strength >= 1:
            return layout  # too long for its span, or all of it masked: regenerate it whole
        head = head_positions(tok, ids, layout.head)  # never masked: the head stays whole
        start = replace(layout, head_tokens=head, init_ids=tuple(
            ids + [model.pad_id] * (layout.n_masked - len(ids))))
        return replace(start, init_ids=tuple(refine_start(model, start, strength, by, seed)))


_DEFAULTS = ServerConfig()


def fill_settings(cfg: ServerConfig) -> str:
    """The settings a fill depends on, as remembered fills are keyed by them: all but those
    only the language server reads (`SERVER_ONLY`: a deadline, drafts, what an editor is
    shown), which change no fill.  The keys held the sampler's settings and `validate`
    alone, and the fill typed along none: a fill remembered under other settings (another
    model, repair or a hint switched on, another `strength`) came back as it was."""
    return repr(replace(cfg, **{name: getattr(_DEFAULTS, name) for name in SERVER_ONLY}))


def latency_targeted(config: ServerConfig) -> bool:
    """Whether a latency target is set, for any kind of fill (its budget then needs the
    model's step cost)."""
    return any(getattr(config, name) is not None for name in BUDGET_SETTINGS
               if name.startswith("latency_ms"))
