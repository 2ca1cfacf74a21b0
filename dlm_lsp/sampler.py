"""The denoising loop: one loop, with schedule and strategy passed in.

The span starts fully masked.  At each step the model scores every position;
each masked position proposes a token (greedy, or sampled at the row's
temperature), the strategy ranks the masked positions, and the schedule says
how many of the best to commit.  Committed tokens stay.  Latency therefore
grows with the number of steps, not with the length of the span.

The span's head (prefix characters moved into the span, see `span.py`) is
reproduced left to right before anything else near it commits: the first
uncommitted head position is restricted to tokens that continue the head and is
committed at once, and the positions the rest of the head could still occupy
wait, so the fill always starts with exactly the head's characters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.schedules import SCHEDULES
from dlm_lsp.span import HeadChain, SpanLayout
from dlm_lsp.strategies import STRATEGIES


class Cancelled(Exception):
    """The caller asked the loop to stop; raised between steps."""


@dataclass
class SamplerConfig:
    """How to denoise one span."""

    steps: int = 16
    strategy: str = "confidence"
    schedule: str = "linear"
    temperatures: tuple[float, ...] = (0.0,)  # one per candidate row; 0 is greedy


@dataclass
class Denoised:
    """Outcome of the loop for a batch of candidate rows."""

    span_ids: torch.Tensor  # (B, N) committed tokens of the span
    scores: torch.Tensor  # (B,) mean log-probability of the committed tokens
    steps: int  # forward passes actually run


StepCallback = Callable[[int, int, torch.Tensor], None]


class _Head:
    """Per-row progress through the head that the span must start with."""

    def __init__(self, chain: HeadChain | None, rows: int):
        self.chain = chain
        self.done = [0] * rows  # head characters reproduced so far
        self.position = [0] * rows  # span position of the next head token

    def active(self, row: int) -> bool:
        return self.chain is not None and self.done[row] < len(self.chain.head)

    def remaining(self, row: int) -> int:
        return len(self.chain.head) - self.done[row] if self.chain else 0

    def advance(self, row: int, text: str) -> None:
        self.done[row] = self.chain.advance(self.done[row], text)
        self.position[row] += 1


def _choose(logits: torch.Tensor, temps: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Greedy tokens for rows at temperature 0, Gumbel-max samples for the others."""
    greedy = logits.argmax(-1)  # (B, N)
    if not bool((temps > 0).any()):
        return greedy
    u = torch.rand(logits.shape, generator=gen, dtype=torch.float64).clamp_(1e-20, 1.0)
    gumbel = (-(-u.log()).log()).to(logits.device, logits.dtype)  # float64 keeps rare tokens fair
    sampled = (logits / temps.clamp_min(1e-6)[:, None, None] + gumbel).argmax(-1)
    return torch.where((temps > 0)[:, None], sampled, greedy)


def denoise(model: DiffusionModel, layout: SpanLayout, cfg: SamplerConfig, seed: int,
            on_step: StepCallback | None = None,
            should_stop: Callable[[], bool] | None = None) -> Denoised:
    """Fill the masked span of `layout` for len(cfg.temperatures) candidate rows."""
    schedule, strategy = SCHEDULES[cfg.schedule], STRATEGIES[cfg.strategy]
    gen = torch.Generator().manual_seed(seed)
    rows, mask_id = len(cfg.temperatures), model.mask_id
    temps = torch.tensor(cfg.temperatures, dtype=torch.float32, device=model.device)
    x = torch.tensor([layout.sequence(mask_id)] * rows, device=model.device)  # (B, T)
    lo, hi = layout.span_start, layout.span_end
    n = hi - lo
    tok = model.tokenizer
    texts = tok.token_texts if layout.head else []
    head = _Head(HeadChain(texts, layout.head, tok.sorted_texts) if layout.head else None, rows)
    if head.chain is not None and not head.chain.reproducible:
        raise ValueError(f"head {layout.head!r} cannot be reproduced by this vocabulary; "
                         "build the layout with move_head=False")
    logp_sum = torch.zeros(rows, device=model.device)
    steps = max(1, cfg.steps)
    step = 0
    while bool((x[:, lo:hi] == mask_id).any()):
        if should_stop is not None and should_stop():
            raise Cancelled()
        masked = x[:, lo:hi] == mask_id  # (B, N)
        logits = model.logits(x)[:, lo:hi].float()  # (B, N, V)
        logits[..., mask_id] = float("-inf")
        forced = torch.zeros_like(masked)
        blocked = torch.zeros_like(masked)
        for r in range(rows):  # the head constraint touches one position per row
            if head.active(r):
                p = head.position[r]
                allowed = torch.full_like(logits[r, p], float("-inf"))
                allowed[head.chain.allowed(head.done[r], n - p)] = 0.0
                logits[r, p] += allowed
                forced[r, p] = True
                blocked[r, p + 1:p + 1 + head.remaining(r)] = True
        chosen = _choose(logits, temps, gen)
        probs = logits.softmax(-1)
        score = strategy(probs, chosen, gen).float()
        score = score.masked_fill(~masked | blocked, float("-inf"))
        score = score.masked_fill(forced, float("inf"))
        remaining = int(masked.sum(1).max())
        k = schedule(min(step, steps - 1), steps, remaining, n)
        k = max(k, int(forced.sum(1).max()))
        top = score.topk(min(k, n), dim=-1).indices  # (B, k)
        commit = torch.zeros_like(masked).scatter_(1, top, True) & masked & ~blocked
        span = x[:, lo:hi]
        span[commit] = chosen[commit]
        logp = probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1).clamp_min(1e-12).log()
        logp_sum += (logp * commit).sum(1)
        for r in range(rows):
            if head.active(r) and bool(commit[r, head.position[r]]):
                head.advance(r, texts[int(span[r, head.position[r]])])
        step += 1
        if on_step is not None:
            on_step(step, max(steps, step), x[:, lo:hi])
    return Denoised(x[:, lo:hi].clone(), logp_sum / max(1, n), step)
