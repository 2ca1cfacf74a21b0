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


class DeviceUnavailable(ModelLoadError):
    """CUDA was asked for where there is none.  Its message names the server's `device`
    setting, where most loads come from; a command's `--device` flag is said by
    `on_command_line`, since "set device to 'auto'" is no option `dlm-lsp fill` has."""

    def __init__(self, device: str):
        super().__init__(f"device '{device}' was requested but CUDA is not available here; "
                         "set device to 'auto' or 'cpu'")
        self.device = device

    def __reduce__(self):
        # made again from its device, not its message: copied (`Engine.model` raises a
        # copy of a failed load's error) or pickled, it read "device 'device '...''"
        return type(self), (self.device,)

    def on_command_line(self) -> str:
        return (f"--device {self.device} was given but CUDA is not available here; "
                "use --device auto or --device cpu")


def command_line_message(exc: Exception) -> str:
    """`exc` as a command (fill, bench, models check) says it: naming its flags."""
    return exc.on_command_line() if isinstance(exc, DeviceUnavailable) else str(exc)


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
