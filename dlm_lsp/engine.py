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
from dlm_lsp.models import DiffusionModel, load_model
from dlm_lsp.policy import REWRITE, SpanPlan, plan_span
from dlm_lsp.sampler import Cancelled, SamplerConfig, denoise, refine_start
from dlm_lsp.span import SpanLayout, borrowed_line_break, build_layout, head_chain
from dlm_lsp.validation import language_for, validate_fill

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


@dataclass
class InfillResult:
    """Ranked candidates (best first) and what it cost."""

    candidates: list[Candidate]
    plan: SpanPlan
    steps: int  # forward passes
    tokens: int  # span length chosen (masked positions)
    ms: float
    early_stopped: bool = False


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
        self._lock = threading.Lock()
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
            self.config = config

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
        plan = plan_span(req.text, req.start, req.end, cfg, opt, tok, req.is_hole)
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
        on_step = None
        if req.on_draft is not None:
            def on_step(step: int, steps: int, span: torch.Tensor) -> None:
                req.on_draft(step, steps, self._draft(span[0].tolist(), layout.head))

        language = language_for(req.language_id, req.uri) if cfg.validate else None

        def syntax_ok(ids: list[int]) -> bool:  # the early stop's independent check
            fill = self._fill_text(ids, layout.head, plan.single_line, tail)
            return validate_fill(req.text, req.start, req.end, fill, language).valid

        out = denoise(model, layout, sampler, seed, on_step, req.should_stop, syntax_ok)
        candidates = []
        for ids, score in zip(out.span_ids.tolist(), out.scores.tolist(), strict=True):
            text = self._fill_text(ids, layout.head, plan.single_line, tail)
            check = validate_fill(req.text, req.start, req.end, text, language)
            candidates.append(Candidate(text, check.valid if check.checked else None, score,
                                        self._used(ids, layout.head_tokens)))
        candidates.sort(key=lambda c: (c.valid is False, -c.score))
        ms = (time.perf_counter() - began) * 1000
        return InfillResult(candidates, plan, out.steps + extra_passes, layout.n_masked, ms,
                            out.early_stopped)

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

    def _used(self, ids: list[int], head_tokens: int) -> int:
        """Span positions the fill really used: up to the first pad, beyond the head."""
        pad = self.model.pad_id
        return max(0, (ids.index(pad) if pad in ids else len(ids)) - head_tokens)

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
