"""The infill engine: a span of a document in, ranked candidate fills out.

It owns the model and runs synchronously; the server calls it from one worker
thread so the event loop keeps answering the editor.  Cancellation and drafts
cross the thread boundary as plain callables (`should_stop`, `on_draft`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

import torch

from dlm_lsp.config import InfillOptions, SamplingControls, ServerConfig
from dlm_lsp.costs import StepCost, calibrate
from dlm_lsp.models import DiffusionModel, load_model
from dlm_lsp.policy import MULTI_LINE, REWRITE, SINGLE_LINE, SpanPlan, local_text, plan_span
from dlm_lsp.repair import (
    DIFFUSION,
    LEFT_TO_RIGHT,
    REPAIR,
    RepairConfig,
    positions_to_remask,
    raw_offset,
    token_offsets,
    unmatched_openers,
)
from dlm_lsp.sampler import Cancelled, Denoised, SamplerConfig, denoise, refine_start
from dlm_lsp.serving import BatchConfig, StepBatcher
from dlm_lsp.span import SpanLayout, borrowed_line_break, build_layout, head_chain
from dlm_lsp.syntax import reindent, truncate_to_units
from dlm_lsp.validation import ParsedDocument, Validation, language_for, parsed_document

MASK_PLACEHOLDER = "\u2591"  # how a still-masked token shows in a draft
CANDIDATE_TEMPERATURE = 0.8  # extra candidates sample at least this hot, or they would all agree

__all__ = ["Cancelled", "Candidate", "Engine", "InfillRequest", "InfillResult", "OutOfMemory"]


class OutOfMemory(RuntimeError):
    """The device ran out of memory during an infill."""


@dataclass
class InfillRequest:
    """One span of one document to fill; offsets are Python string indices."""

    text: str
    start: int
    end: int
    language_id: str | None = None
    uri: str | None = None
    options: InfillOptions = field(default_factory=InfillOptions)
    is_hole: bool = False
    should_stop: Callable[[], bool] | None = None
    on_draft: Callable[[int, int, str], None] | None = None  # (step, steps, draft text)


@dataclass
class Candidate:
    """One proposed fill."""

    text: str
    valid: bool | None  # None when the language has no grammar to check against
    score: float  # mean log-probability of the committed tokens
    used: int = 0  # span tokens used before the pad tail (the rest were trimmed)
    path: str = DIFFUSION  # what produced it: diffusion, repair or left-to-right
    ids: list[int] = field(default_factory=list, repr=False)  # the span as denoised
    check: Validation | None = field(default=None, repr=False)  # None when unchecked


@dataclass
class InfillResult:
    """Ranked candidates (best first) and what it cost."""

    candidates: list[Candidate]
    plan: SpanPlan
    steps: int  # forward passes
    tokens: int  # span length chosen (masked positions)
    ms: float
    early_stopped: bool = False
    path: str = DIFFUSION  # what produced the best candidate
    repair_rounds: int = 0  # syntax-guided repair rounds run
    predicted_ms: float | None = None  # with a latency target: the cost model's forecast
    syntax: str = ""  # the validation's verdict on the best fill, or why it was not checked


def _setting(opt: InfillOptions, cfg: ServerConfig, name: str):
    """The request's value of a control, else the server's."""
    value = getattr(opt, name)
    return getattr(cfg, name) if value is None else value


def sampler_config(cfg: ServerConfig, opt: InfillOptions, steps: int,
                   strategy: str) -> SamplerConfig:
    """Merge request options over server settings into the sampler's configuration."""
    n_cand = opt.candidates or cfg.candidates
    temp = _setting(opt, cfg, "temperature")
    temps = (temp,) + (max(temp, CANDIDATE_TEMPERATURE),) * (n_cand - 1)
    sampler_fields = {f.name for f in fields(SamplerConfig)}
    controls = {f.name: _setting(opt, cfg, f.name) for f in fields(SamplingControls)
                if f.name in sampler_fields}
    return SamplerConfig(steps=steps, strategy=strategy, schedule=_setting(opt, cfg, "schedule"),
                         temperatures=temps,
                         **{k: v for k, v in controls.items() if v is not None})


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


class Engine:
    """Loads the configured model once and serves infill requests."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self._model: DiffusionModel | None = None
        self._cost: StepCost | None = None
        self._batcher: StepBatcher | None = None
        self._lock = threading.Lock()
        self._alone = threading.Lock()
        # Fault injection for tests of error handling: "oom" fails every infill with an
        # out-of-memory error, "oom-once" only the first.
        self._faults = set(filter(None, os.environ.get("DLM_LSP_FAULTS", "").split(",")))

    @property
    def model(self) -> DiffusionModel:
        """The model, loaded on first use (raises ModelLoadError with a clear message)."""
        with self._lock:
            if self._model is None:
                self._model = load_model(self.config.model, self.config.device)
            return self._model

    def reconfigure(self, config: ServerConfig) -> None:
        """Adopt new settings; the model is reloaded only if model or device changed."""
        with self._lock:
            if (config.model, config.device) != (self.config.model, self.config.device):
                self._model = None
                self._cost = None
            self.config = config

    def batcher(self) -> StepBatcher | None:
        """The model's batching worker (None when `batch_rows` is 0: each request alone)."""
        model = self.model
        with self._lock:
            if self.config.batch_rows == 0:
                return None
            if self._batcher is None or self._batcher.model is not model:
                if self._batcher is not None:
                    self._batcher.close()
                self._batcher = StepBatcher(model, BatchConfig(self.config.batch_rows))
            self._batcher.config.max_rows = self.config.batch_rows
            return self._batcher

    def step_cost(self) -> StepCost:
        """The model's per-step cost on its device, calibrated on first use."""
        model = self.model
        with self._lock:
            if self._cost is None:
                self._cost = calibrate(model)
            return self._cost

    def infill(self, req: InfillRequest) -> InfillResult:
        """Denoise the span and return validated, ranked candidates."""
        began = time.perf_counter()
        try:
            return self._infill(req, began)
        except Cancelled:
            raise
        except (RuntimeError, MemoryError) as exc:
            if isinstance(exc, MemoryError) or _is_oom(exc):
                raise OutOfMemory(
                    f"out of memory while denoising on {self.config.device}: try fewer "
                    "candidates, a shorter span, or device 'cpu'") from exc
            raise

    def _infill(self, req: InfillRequest, began: float) -> InfillResult:
        if "oom" in self._faults or "oom-once" in self._faults:
            self._faults.discard("oom-once")
            raise torch.OutOfMemoryError("injected fault (DLM_LSP_FAULTS)")
        model, cfg, opt = self.model, self.config, req.options
        tok = model.tokenizer
        language = language_for(req.language_id, req.uri)
        plan = plan_span(req.text, req.start, req.end, cfg, opt, tok, req.is_hole, language)
        prefix, suffix = req.text[:req.start], req.text[req.end:]
        tail = borrowed_line_break(req.text[:req.end], suffix)
        layout = build_layout(tok, prefix, tail + suffix, plan.n_masked,
                              cfg.max_context_tokens, max_length=model.max_length)
        if layout.head and not head_chain(tok, layout.head).reproducible:
            layout = build_layout(tok, prefix, tail + suffix, plan.n_masked,
                                  cfg.max_context_tokens, move_head=False,
                                  max_length=model.max_length)

        strategy = opt.strategy or cfg.strategy
        # the baseline spends one step per token, the moved head's tokens included
        steps = layout.n_masked if strategy == "left-to-right" else plan.steps
        rows = opt.candidates or cfg.candidates
        length = len(layout.prefix_ids) + layout.n_masked + len(layout.suffix_ids)
        target = opt.latency_ms or {SINGLE_LINE: cfg.latency_ms_single_line,
                                    MULTI_LINE: cfg.latency_ms_multi_line,
                                    REWRITE: cfg.latency_ms_rewrite}[plan.kind]
        if target is not None and strategy != "left-to-right":
            steps = self.step_cost().steps_for(target, rows, length, plan.n_masked,
                                               (time.perf_counter() - began) * 1000)
        sampler = sampler_config(cfg, opt, steps, strategy)
        seed = opt.seed if opt.seed is not None else cfg.seed
        extra_passes = 0
        strength = _setting(opt, cfg, "strength")
        if plan.kind == REWRITE and strength is not None:
            old = req.text[req.start:req.end]
            old = old[:len(old) - len(tail)] if tail else old  # the suffix shows the break
            layout = self._refine_layout(layout, old, strength,
                                         _setting(opt, cfg, "refine_order"), seed)
            extra_passes = int(layout.init_ids is not None and strength > 0
                               and _setting(opt, cfg, "refine_order") == "confidence")
        run = _Run(self, req, plan, layout, tail, self._document(req), language)
        if target is not None:
            run.deadline = began + target / 1000
            run.step_ms = self.step_cost().step_ms(rows, length)
        out = run.denoise(layout, sampler, seed, with_drafts=True)
        candidates = run.candidates(out, DIFFUSION)
        repair = repair_config(cfg, opt)
        if run.checked and not any(c.valid for c in candidates):
            candidates = run.repair(candidates, repair, sampler, seed)
        if (run.checked and repair.fallback and strategy != "left-to-right"
                and not any(c.valid for c in candidates) and run.affords(layout.n_masked)):
            retry = replace(sampler, strategy="left-to-right", steps=layout.n_masked,
                            temperatures=sampler.temperatures[:1])
            candidates += run.candidates(run.denoise(layout, retry, seed), LEFT_TO_RIGHT)
        candidates.sort(key=lambda c: (c.valid is False, -c.score))
        candidates = candidates[:len(sampler.temperatures)]  # as many as were asked for
        ms = (time.perf_counter() - began) * 1000
        predicted = None if target is None else round(
            self.step_cost().step_ms(rows, length) * (out.steps + extra_passes), 1)
        best = candidates[0]
        syntax = best.check.reason if best.check is not None else f"not checked: {run.unchecked}"
        return InfillResult(candidates, plan, run.passes + extra_passes, layout.n_masked, ms,
                            out.early_stopped, best.path, run.repair_rounds, predicted, syntax)

    def _document(self, req: InfillRequest) -> ParsedDocument | str:
        """The request's document parsed for validation (from its last version's tree),
        or why its fills go unchecked (validation off, no grammar for the language)."""
        if not self.config.validate:
            return "validation is off (setting 'validate')"
        language = language_for(req.language_id, req.uri)
        document = parsed_document(req.text, language or req.language_id, req.uri)
        return document if isinstance(document, ParsedDocument) else document.reason

    def _refine_layout(self, layout: SpanLayout, old: str, strength: float, by: str,
                       seed: int) -> SpanLayout:
        """Start a rewrite from the old code, with `strength` of its tokens masked."""
        tok = self.model.tokenizer
        ids = tok.encode(layout.head + old)
        if len(ids) > layout.n_masked:
            return layout  # the old code does not fit its span: regenerate it whole
        head = len(tok.encode(layout.head)) if layout.head else 0
        start = replace(layout, head_tokens=head, init_ids=tuple(
            ids + [self.model.pad_id] * (layout.n_masked - len(ids))))
        return replace(start, init_ids=tuple(
            refine_start(self.model, start, strength, by, seed)))

    def _content_length(self, ids: list[int]) -> int:
        """Span positions before the first pad."""
        pad = self.model.pad_id
        return ids.index(pad) if pad in ids else len(ids)

    def _used(self, ids: list[int], head_tokens: int) -> int:
        """Span positions the fill really used: up to the first pad, beyond the head."""
        return max(0, self._content_length(ids) - head_tokens)

    def _fill_text(self, ids: list[int], head: str, single_line: bool, tail: str = "") -> str:
        """Decode a span up to its first pad, drop the head, keep one line if asked.

        A non-empty fill gets back the line break borrowed by the suffix (`tail`).
        """
        pad = self.model.pad_id
        ids = ids[:ids.index(pad)] if pad in ids else ids
        text = self.model.tokenizer.decode(ids)
        if not text.startswith(head):
            return ""  # cannot happen by construction; never duplicate the prefix's edge
        text = text[len(head):]
        if single_line:
            text = text.split("\n", 1)[0]
        if tail and text.strip() and not text.endswith(tail):
            text += tail
        return text

    def _draft(self, ids: list[int], head: str) -> str:
        """The span as it stands: committed tokens as text, masked ones as placeholders."""
        model = self.model
        texts = model.tokenizer.token_texts
        pieces = []
        for i in ids:
            if i == model.pad_id:
                break
            pieces.append(MASK_PLACEHOLDER if i == model.mask_id else texts[i])
        draft = "".join(pieces)
        return draft[len(head):] if draft.startswith(head) else draft


def repair_config(cfg: ServerConfig, opt: InfillOptions) -> RepairConfig:
    """The request's repair settings over the server's, over RepairConfig's defaults."""
    chosen = {name: _setting(opt, cfg, key) for name, key in
              (("rounds", "repair_rounds"), ("fallback", "fallback"))}
    return RepairConfig(**{k: v for k, v in chosen.items() if v is not None})


class _Run:
    """One infill's denoising passes: the first, repairs, the fallback; all share a layout."""

    def __init__(self, engine: Engine, req: InfillRequest, plan: SpanPlan, layout: SpanLayout,
                 tail: str, document: ParsedDocument | str, language: str | None):
        self.engine, self.req, self.plan, self.layout, self.tail = engine, req, plan, layout, tail
        self.document = document if isinstance(document, ParsedDocument) else None
        self.unchecked = document if isinstance(document, str) else ""
        self.shape = language is not None and not plan.single_line  # reindent, truncate
        self.language = language
        if self.shape:
            self.local, self.low = local_text(req.text, req.start, req.end)
        self.checked = self.document is not None
        self.passes = 0  # forward passes, all denoising runs together
        self.repair_rounds = 0
        self.deadline: float | None = None  # perf_counter time a latency target ends at
        self.step_ms = 0.0  # predicted time of one pass, with a deadline

    def affords(self, steps: int) -> bool:
        """Whether `steps` more passes fit before the latency target (always, without one)."""
        if self.deadline is None:
            return True
        return time.perf_counter() + steps * self.step_ms / 1000 <= self.deadline

    def raw_text(self, ids: list[int], layout: SpanLayout | None = None) -> str:
        """The fill as the model wrote it (the head dropped, cut to one line if asked)."""
        layout = layout or self.layout
        return self.engine._fill_text(ids, layout.head, self.plan.single_line)

    def fill_text(self, ids: list[int], layout: SpanLayout | None = None) -> str:
        """The fill as it will be offered: on the document's indentation, cut to whole
        syntactic units (multi-line fills, where there is a grammar), with the borrowed
        line break back."""
        text = self.raw_text(ids, layout)
        if self.shape and "\n" in text:
            start, end = self.req.start - self.low, self.req.end - self.low
            text = reindent(text, self.local, start, end, self.language)
            if self.plan.kind == MULTI_LINE:
                text = truncate_to_units(self.local, start, end, text, self.language)
        if self.tail and text.strip() and not text.endswith(self.tail):
            text += self.tail
        return text

    def validate(self, fill: str) -> Validation | None:
        if self.document is None:
            return None
        return self.document.validate(self.req.start, self.req.end, fill)

    def denoise(self, layout: SpanLayout, sampler: SamplerConfig, seed: int,
                with_drafts: bool = False) -> Denoised:
        req, engine = self.req, self.engine
        on_step = None
        if with_drafts and req.on_draft is not None:
            def on_step(step: int, steps: int, span: torch.Tensor) -> None:
                req.on_draft(step, steps, engine._draft(span[0].tolist(), layout.head))

        def syntax_ok(ids: list[int]) -> bool:  # the early stop's independent check
            verdict = self.validate(self.fill_text(ids, layout))
            return verdict is None or verdict.valid

        batcher = engine.batcher()
        if batcher is None:
            with engine._alone:  # without batching, one request at a time has the model
                out = denoise(engine.model, layout, sampler, seed, on_step, req.should_stop,
                              syntax_ok)
        else:
            out = denoise(engine.model, layout, sampler, seed, on_step, req.should_stop,
                          syntax_ok, batcher.run)
        self.passes += out.steps
        return out

    def candidates(self, out: Denoised, path: str) -> list[Candidate]:
        """Decode and validate each row of a denoising run."""
        found = []
        for ids, score in zip(out.span_ids.tolist(), out.scores.tolist(), strict=True):
            text = self.fill_text(ids)
            verdict = self.validate(text)
            found.append(Candidate(text, verdict.valid if verdict else None, score,
                                   self.engine._used(ids, self.layout.head_tokens), path,
                                   ids, verdict))
        return found

    def repair(self, candidates: list[Candidate], cfg: RepairConfig, sampler: SamplerConfig,
               seed: int) -> list[Candidate]:
        """Re-mask what the new syntax errors point at and denoise it again, best candidate
        first, until one is valid or `cfg.rounds` rounds are spent."""
        candidates = sorted(candidates, key=lambda c: -c.score)
        for index, candidate in enumerate(candidates):
            while (self.repair_rounds < cfg.rounds and not candidate.valid
                   and self.affords(min(sampler.steps, 2 * cfg.margin + 1))):
                fixed = self._repair_once(candidate, cfg, sampler, seed + self.repair_rounds)
                self.repair_rounds += 1
                if fixed is None:
                    break
                candidate = candidates[index] = fixed
            if candidate.valid or self.repair_rounds >= cfg.rounds:
                break
        return candidates

    def _repair_once(self, candidate: Candidate, cfg: RepairConfig, sampler: SamplerConfig,
                     seed: int) -> Candidate | None:
        model, layout = self.engine.model, self.layout
        ids = list(candidate.ids)
        offsets = token_offsets(model.tokenizer, ids[:self.engine._content_length(ids)])
        used = len(offsets) - 1
        head = len(layout.head)
        protected = next((i for i, at in enumerate(offsets) if at >= head), used) if head else 0
        start = self.req.start
        # error ranges of the filled document, moved into the decoded span's coordinates
        raw = self.raw_text(ids)
        errors = [(raw_offset(raw, candidate.text, a - start) + head,
                   raw_offset(raw, candidate.text, b - start) + head)
                  for a, b in candidate.check.new_ranges]
        if any(b >= head + len(raw) - 1 for _, b in errors):  # broken where the fill ends:
            errors += [(head + i, head + i + 1) for i in unmatched_openers(raw)]  # the cause?
        chosen = positions_to_remask(offsets, used, protected, errors, len(ids), cfg.margin)
        if not chosen:
            return None
        for i in chosen:
            ids[i] = model.mask_id
        again = replace(layout, init_ids=tuple(ids), head_tokens=protected)
        # a second round explores: the same context would give the same greedy tokens
        temperature = sampler.temperatures[0] if self.repair_rounds == 0 else max(
            sampler.temperatures[0], CANDIDATE_TEMPERATURE)
        steps = max(1, min(sampler.steps, len(chosen)))
        out = self.denoise(again, replace(sampler, steps=steps, temperatures=(temperature,)),
                           seed)
        [fixed] = self.candidates(out, REPAIR)
        return fixed
