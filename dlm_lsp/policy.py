"""The length policy: how many tokens to mask and how many steps to spend.

When the request does not fix a length, the span's surroundings decide the task
kind.  A cursor or hole with code after it on the same line is a single-line
fill (short span, cut at the first line break).  A cursor on an otherwise empty
line, or a hole alone on its line, is a multi-line fill.  A non-empty selection
is a block rewrite sized from the selected text.  Each kind has its own default
step budget; the left-to-right baseline always takes one step per token.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.models.tokenizer import Tokenizer

SINGLE_LINE, MULTI_LINE, REWRITE = "single-line", "multi-line", "rewrite"


@dataclass(frozen=True)
class SpanPlan:
    """What the engine will do for one span."""

    kind: str
    n_masked: int
    steps: int
    single_line: bool  # cut the fill at its first line break


def task_kind(text: str, start: int, end: int, is_hole: bool = False) -> str:
    """Classify a span by what surrounds it (see module docstring)."""
    if start != end and not is_hole:
        return REWRITE
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    before, after = text[line_start:start], text[end:line_end]
    return MULTI_LINE if not before.strip() and not after.strip() else SINGLE_LINE


def plan_span(text: str, start: int, end: int, config: ServerConfig, options: InfillOptions,
              tokenizer: Tokenizer, is_hole: bool = False) -> SpanPlan:
    """Choose the number of masked tokens and the step budget for a span."""
    kind = task_kind(text, start, end, is_hole)
    if options.length is not None:
        n = options.length
    elif kind == REWRITE:
        n = len(tokenizer.encode(text[start:end])) + 8  # room to grow a little
    else:
        n = config.single_line_tokens if kind == SINGLE_LINE else config.multi_line_tokens
    n = max(1, min(n, config.max_span_tokens))
    strategy = options.strategy or config.strategy
    if strategy == "left-to-right":
        steps = n
    else:
        default = {SINGLE_LINE: config.steps_single_line, MULTI_LINE: config.steps_multi_line,
                   REWRITE: config.steps_rewrite}[kind]
        steps = options.steps or config.steps or default
    return SpanPlan(kind, n, max(1, min(steps, n)), kind == SINGLE_LINE)
