"""Which masked positions to commit: scores per position, higher commits first.

Each strategy maps the model's distribution at the masked positions to a score.
`confidence` (the probability of the chosen token), `margin` (top-1 minus top-2
probability) and `entropy` (negative entropy) commit what the model is surest
of; `random` is the original masked-diffusion sampler (positions in random
order); `left-to-right` commits the leftmost position first, so with one token
per step it is the autoregressive baseline run by the same model.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# (probs (B, N, V), chosen (B, N), generator) -> score (B, N)
Strategy = Callable[[torch.Tensor, torch.Tensor, torch.Generator], torch.Tensor]


def confidence(probs: torch.Tensor, chosen: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Probability of the token that would be committed."""
    return probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)


def margin(probs: torch.Tensor, chosen: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Gap between the two most likely tokens: small when the model hesitates."""
    top2 = probs.topk(2, dim=-1).values
    return top2[..., 0] - top2[..., 1]


def entropy(probs: torch.Tensor, chosen: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Negative entropy of the position's distribution."""
    return (probs * probs.clamp_min(1e-12).log()).sum(-1)


def random(probs: torch.Tensor, chosen: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Uniform random order, drawn from the request's seeded generator."""
    return torch.rand(chosen.shape, generator=gen, device="cpu").to(probs.device)


def left_to_right(probs: torch.Tensor, chosen: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Leftmost first."""
    n = chosen.shape[-1]
    return -torch.arange(n, device=probs.device, dtype=probs.dtype).expand_as(chosen)


STRATEGIES: dict[str, Strategy] = {
    "confidence": confidence,
    "margin": margin,
    "entropy": entropy,
    "random": random,
    "left-to-right": left_to_right,
}
