"""The one narrow interface between the engine and any diffusion model.

The sampler needs only: a tokenizer, the id that marks a masked position, the id
that ends a span of unknown length, the longest sequence the model accepts, and
logits for a batch.  Each model family (our own tiny denoiser, Dream, LLaDA ...)
implements this in an adapter, so the server and sampler never change when a new
family is added.  `logits` is already aligned: row i predicts token i, whatever
shift the family uses internally.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from dlm_lsp.models.tokenizer import Tokenizer

if TYPE_CHECKING:  # annotations only: `dlm-lsp models` lists families without torch
    import torch


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what to do about it."""


@runtime_checkable
class DiffusionModel(Protocol):
    """What the engine needs from a masked-diffusion language model."""

    name: str
    tokenizer: Tokenizer
    mask_id: int
    pad_id: int
    max_length: int
    device: torch.device

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Float logits (B, T, V) where position i scores token i of `input_ids` (B, T)."""
        ...
