"""A fake DiffusionModel for testing the sampler and engine without a trained model."""

from __future__ import annotations

from collections.abc import Callable

import torch

from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN, Tokenizer


class FakeModel:
    """A DiffusionModel whose logits come from `make(input_ids)`; counts its forward passes."""

    name = "fake"

    def __init__(self, tokenizer: Tokenizer,
                 make: Callable[[torch.Tensor], torch.Tensor] | None = None, seed: int = 0):
        self.tokenizer = tokenizer
        self.mask_id = tokenizer.token_id(MASK_TOKEN)
        self.pad_id = tokenizer.token_id(PAD_TOKEN)
        self.max_length = 1024
        self.device = torch.device("cpu")
        self.vocab = tokenizer.vocab_size
        self.calls = 0
        self._gen = torch.Generator().manual_seed(seed)
        self._make = make or self._random

    def _random(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.randn(*ids.shape, self.vocab, generator=self._gen) * 3

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self._make(input_ids)
