"""The masked-diffusion loss and its held-out evaluation.

The loss is the MDLM / LLaDA bound: cross-entropy on masked positions only,
each weighted 1/t where t is the row's masking rate, divided by the number of
positions the row could have masked (the whole row for plain rows, middle + pads
for infilling rows) and averaged over rows.  Dividing per row keeps a short
infilling row from counting for less than a full-length plain row.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
import torch.nn.functional as F

from dlm_lsp.models.tiny import TinyDenoiser
from dlm_lsp.training.rows import Batch


def row_losses(module: TinyDenoiser, batch: Batch) -> torch.Tensor:
    """Loss of each row (B,) of a batch already on the module's device.

    The output head runs only at the masked positions, which the batch lists
    (`positions`), so the device is never asked which positions are masked: a
    boolean index would make the CPU wait for the GPU at every step.
    """
    hidden = module.hidden(batch.inputs, segments=batch.segments)  # (B, L, C), within files
    rows, length, width = hidden.shape
    at = batch.positions  # (N,) flat indices of masked positions
    logits = hidden.reshape(-1, width).index_select(0, at) @ module.embed.weight.T  # (N, V)
    targets = batch.targets.reshape(-1).index_select(0, at)
    ce = F.cross_entropy(logits.float(), targets, reduction="none")
    weighted = ce * batch.weights.reshape(-1).index_select(0, at)
    per_row = torch.zeros(rows, device=ce.device, dtype=torch.float32)
    per_row = per_row.index_add(0, at // length, weighted)
    return per_row / batch.denominators.clamp(min=1)


def masked_diffusion_loss(module: TinyDenoiser, batch: Batch) -> torch.Tensor:
    """Scalar loss of `module` on a batch already on the module's device."""
    return row_losses(module, batch).mean()


def autocast_for(device: torch.device, dtype: torch.dtype | None) -> AbstractContextManager:
    """bf16 autocast on CUDA (faster, and as accurate as training needs); none elsewhere."""
    if dtype is None:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


@torch.no_grad()
def evaluate(module: TinyDenoiser, batches: Sequence[Batch], device: torch.device,
             autocast_dtype: torch.dtype | None = None) -> float:
    """Mean loss over fixed batches (built once from a fixed seed, so comparable), each
    batch weighed by its rows: a last batch shorter than the others counted as much."""
    was_training = module.training
    module.eval()
    total, rows = 0.0, 0
    try:
        for batch in batches:
            with autocast_for(device, autocast_dtype):
                total += float(masked_diffusion_loss(module, batch.to(device))) * len(batch.inputs)
            rows += len(batch.inputs)
    finally:
        module.train(was_training)
    return total / max(rows, 1)
