"""Context caching for our own denoiser: recompute only the span (plus a window) per step.

Between two denoising steps only the span changes; the prefix and suffix
tokens stay.  Their keys and values still change a little in a bidirectional
model (they attend to the span), but slowly, so the approximate dual cache of
Fast-dLLM works: a full forward pass stores every layer's keys and values; the
next steps run only the positions of the span and `window` tokens either side
through the layers, their queries attending to the stored keys and values of
every other position (and their own fresh ones), and every `refresh` steps a
full pass renews the store.  With `refresh=1` every step is a full pass and the
output is exactly the uncached one.

Each layer runs through `Block.run` (dlm_lsp/models/tiny.py), the same code as
the model's own forward pass; a test checks that the full pass here gives the
module's own logits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from dlm_lsp.models.tiny import TinyDenoiser


@dataclass(frozen=True)
class CacheConfig:
    """How often to renew the store, and how much context to recompute with the span."""

    refresh: int = 2  # a full pass every this many steps (1: no caching at all), as
    # the server's `cacheRefresh` by default
    window: int = 8  # context positions either side of the span recomputed each step


class ContextCache:
    """Span logits for one denoising run, with the context's keys and values stored."""

    def __init__(self, module: TinyDenoiser, lo: int, hi: int, config: CacheConfig,
                 bf16: bool = False,
                 head: Callable[[torch.Tensor], torch.Tensor] | None = None):
        self.module, self.lo, self.hi, self.config = module, lo, hi, config
        self.bf16 = bf16  # run under bf16 autocast, as the model's own passes do
        # the model's output head (`TinyModel.head`), which multiplies as the model's own
        # passes do: in bf16 on a CPU by a weight cast once, where autocast cast it on
        # every step (~0.5-1 ms of a ~6.5 ms windowed step of the shipped model, the same
        # bits); without one, the tied product itself
        self.head = head
        self.steps = 0
        self.full_passes = 0
        self._store: list[tuple[torch.Tensor, torch.Tensor]] = []

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        normed = self.module.ln_f(x)
        return normed @ self.module.embed.weight.T if self.head is None else self.head(normed)

    @torch.no_grad()
    def full(self, ids: torch.Tensor) -> torch.Tensor:
        """A full pass storing every layer's keys and values; logits (B, T, V)."""
        return self._head(self._full_pass(ids))

    def _full_pass(self, ids: torch.Tensor) -> torch.Tensor:
        """The last hidden states (B, T, C) of a full pass, every layer's keys and
        values stored."""
        x = self.module.embed(ids)
        self._store = []
        for block in self.module.blocks:
            x, k, v = block.run(x)
            self._store.append((k, v))
        self.full_passes += 1
        return x

    @torch.no_grad()
    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, N, V) of the span positions [lo, hi) for the sequence `ids`."""
        if self.bf16:
            with torch.autocast(ids.device.type, dtype=torch.bfloat16):
                return self._span_logits(ids)
        return self._span_logits(ids)

    def _span_logits(self, ids: torch.Tensor) -> torch.Tensor:
        renew = not self._store or self.steps % max(1, self.config.refresh) == 0
        self.steps += 1
        if renew or self._store[0][0].shape[0] != ids.shape[0]:  # the head on the span only
            return self._head(self._full_pass(ids)[:, self.lo:self.hi]).float()
        start = max(0, self.lo - self.config.window)
        end = min(ids.shape[1], self.hi + self.config.window)
        x = self.module.embed(ids[:, start:end])
        for block, (keys, values) in zip(self.module.blocks, self._store, strict=True):
            x, _, _ = block.run(x, start, keys, values)
        return self._head(x[:, self.lo - start:self.hi - start]).float()
