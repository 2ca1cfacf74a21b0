"""The engine's request and result types, shared by the engine and its denoising passes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.policy import SpanPlan
from dlm_lsp.repair import DIFFUSION
from dlm_lsp.validation import Validation


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
    # A remote client's settings for this fill, in place of the engine's own; the model,
    # device and precision stay the engine's (see dlm_lsp/remote/service.py).
    config: ServerConfig | None = None
    # Code the model is shown around `text` that the fill does not change: a notebook
    # cell's other code cells (dlm_lsp/notebooks.py).  Only the model sees it; the span,
    # the syntax check, the span's plan and the fill's shape are the document's alone.
    before: str = ""
    after: str = ""

    def shown_prefix(self) -> str:
        """What the model is shown before the span."""
        return self.before + self.text[:self.start]

    def shown_suffix(self) -> str:
        """What the model is shown after the span."""
        return self.text[self.end:] + self.after


@dataclass
class Candidate:
    """One proposed fill."""

    text: str
    valid: bool | None  # None when the language has no grammar to check against
    score: float  # mean log-probability of the committed tokens
    # span tokens before the pad tail (the rest were trimmed), less those that hold the
    # head's characters, however many the model spelled it in
    used: int = 0
    path: str = DIFFUSION  # what produced it: diffusion, repair or left-to-right
    ids: list[int] = field(default_factory=list, repr=False)  # the span as denoised
    check: Validation | None = field(default=None, repr=False)  # None when unchecked
    # span positions whose bytes made no whole character, or a control character the model
    # was not shown, where `text` would show them: left out of it (a fill never writes
    # U+FFFD of broken bytes nor a stray control), and written again by repair while its
    # rounds last
    broken: tuple[int, ...] = ()
    # the model ended it with a pad before its span ended (None where not known: an
    # older remote service, SGLang); `used` cannot tell, as it leaves out the head's tokens
    # that the span's length (`InfillResult.tokens`) counts
    ended: bool | None = None


@dataclass
class InfillResult:
    """Ranked candidates (best first) and what it cost."""

    candidates: list[Candidate]
    plan: SpanPlan
    steps: int  # forward passes
    tokens: int  # span length (masked positions): chosen, and any a head's chain grew it by
    ms: float
    early_stopped: bool = False
    path: str = DIFFUSION  # what produced the best candidate
    repair_rounds: int = 0  # syntax-guided repair rounds run
    predicted_ms: float | None = None  # with a latency target: the cost model's forecast
    syntax: str = ""  # the validation's verdict on the best fill, or why it was not checked
    reused: str = ""  # "exact" or "typed" when answered from recent fills, without the model
    # of `steps`, those of repair rounds and the left-to-right retry after the first run:
    # `fill --steps 1` said "3 steps" and no more (None where not known: an older remote
    # service)
    repair_steps: int | None = 0
    # of `steps`, those of the hint passes (a fill begun with a binding, a line, a local, a
    # value) and their repair: counted as repair, `repairRounds 0` read beside
    # `repairSteps 4` (None where not known: an older remote service)
    hint_steps: int | None = 0
