"""Context caching for published checkpoints: the same dual cache as our own model's.

`dlm_lsp/models/cache.py` explains the idea (Fast-dLLM's approximate dual cache): a
full pass stores every layer's keys and values; the next steps run only the span
and `window` context positions either side through the network, attending to the
stored keys and values of every other position, and every `refresh` steps a full
pass renews the store.  Here the network is a transformers Qwen2 or LLaMA model
(dlm_lsp/models/hf.py), run through its own forward with its own cache object: the
stored context goes in as a `DynamicCache` holding every position outside the
recomputed window, and the window's tokens come with their true position ids, so
their rotary embeddings are those of a full pass.  With bidirectional attention the
order of the positions in the cache does not matter (no mask: every query sees every
key).  A step on unchanged tokens therefore gives the full pass's outputs (a test
checks it), and `refresh=1` is exactly the uncached model.

At 7B and a 1024-token context most of a step is the context's layers; running 32
span positions plus a window instead is where the speed comes from.
"""

from __future__ import annotations

import inspect

import torch

from dlm_lsp.models.cache import CacheConfig
from dlm_lsp.models.hf import HFDiffusionModel


def _cache_keyword(network) -> str:
    """transformers renamed `past_key_values` to `cache` during 5.x."""
    return "cache" if "cache" in inspect.signature(network.forward).parameters \
        else "past_key_values"


class HFContextCache:
    """Span logits for one denoising run of a published checkpoint, context stored."""

    def __init__(self, model: HFDiffusionModel, lo: int, hi: int, config: CacheConfig):
        from transformers import DynamicCache

        self.model, self.lo, self.hi, self.config = model, lo, hi, config
        self._new_cache = DynamicCache
        self._network = model.module.model
        self._keyword = _cache_keyword(self._network)
        self.steps = 0
        self.full_passes = 0
        self._store: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._rows: list[int] = []
        self._window = (0, 0)

    def _plan(self, t: int) -> None:
        """Which framed positions give the span's rows, and which run every step: those
        rows, the span's own tokens, and the window either side."""
        lead = len(self.model.conventions.before)
        framed = t + lead + len(self.model.conventions.after)
        self._rows = self.model.rows(t)[self.lo:self.hi]
        first = min(self._rows[0], lead + self.lo)
        last = max(self._rows[-1] + 1, lead + self.hi)
        self._window = (max(0, first - self.config.window),
                        min(framed, last + self.config.window))

    @torch.no_grad()
    def full(self, ids: torch.Tensor) -> torch.Tensor:
        """A full pass that stores the keys and values outside the window; span logits."""
        framed = self.model.frame(ids.to(self.model.device))
        self._plan(ids.shape[1])
        out = self._network(input_ids=framed, use_cache=True)
        stored = out.cache if getattr(out, "cache", None) is not None else out.past_key_values
        start, end = self._window
        self._store = [(torch.cat([layer.keys[:, :, :start], layer.keys[:, :, end:]], 2),
                        torch.cat([layer.values[:, :, :start], layer.values[:, :, end:]], 2))
                       for layer in stored.layers]
        self.full_passes += 1
        return self.model.head(out.last_hidden_state[:, self._rows])

    @torch.no_grad()
    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits (B, N, V) of the span positions [lo, hi) for the sequence `ids`."""
        renew = not self._store or self.steps % max(1, self.config.refresh) == 0
        self.steps += 1
        if renew or self._store[0][0].shape[0] != ids.shape[0]:
            return self.full(ids)
        start, end = self._window
        framed = self.model.frame(ids.to(self.model.device))
        cache = self._new_cache()
        for layer, (keys, values) in enumerate(self._store):
            cache.update(keys, values, layer)
        positions = torch.arange(start, end, device=framed.device).expand(framed.shape[0], -1)
        out = self._network(input_ids=framed[:, start:end], position_ids=positions,
                            use_cache=True, **{self._keyword: cache})
        return self.model.head(out.last_hidden_state[:, [r - start for r in self._rows]])
