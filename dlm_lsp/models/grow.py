"""Deepen a trained denoiser without changing what it computes.

The shipped model is continued on every GPU session (warm restart), so a larger
model would throw away every token it has seen if it had to start anew.  A block
of the pre-norm transformer adds its attention and MLP outputs to the residual
stream through two projections (`proj`, `down`); with both at zero the block is
the identity, whatever its other weights.  So new blocks with those two zeroed,
placed between the trained ones, give a deeper model that fills exactly as the
trained one did, and training goes on from there: the gradient reaches the zeroed
projections at the first step (their inputs are not zero), and through them the
rest of the new block (Gong et al. 2019 grow BERT by stacking; Shen et al. 2022,
"Staged Training for Transformer Language Models", by function-preserving growth).

The new blocks go between the old ones (old, new, old, new, ...) rather than on
top, so that each trained block keeps its neighbours' depth in proportion.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from dlm_lsp.models.tiny import TinyDenoiser


def deeper_positions(old: int, new: int) -> list[int]:
    """Where the `old` trained blocks go among `new` blocks, spread evenly from the
    first: 6 among 12 at 0, 2, 4, ..., 10; 2 among 3 at 0 and 1."""
    if not 0 < old <= new:
        raise ValueError(f"cannot grow a model of {old} layers to {new}")
    return [i * new // old for i in range(old)]


@torch.no_grad()
def deepen(module: TinyDenoiser, n_layers: int, seed: int = 0) -> TinyDenoiser:
    """A copy of `module` with `n_layers` blocks: its own at `deeper_positions`, new ones
    (freshly initialised, output projections zeroed) between them.  The copy computes
    the same function as `module`; `seed` draws the new blocks' other weights."""
    trained = dict(zip(deeper_positions(module.cfg.n_layers, n_layers), module.blocks,
                       strict=True))
    with torch.random.fork_rng(devices=[]):  # built on the CPU: the caller's RNG untouched
        torch.manual_seed(seed)
        grown = TinyDenoiser(replace(module.cfg, n_layers=n_layers))
    weight = module.embed.weight
    grown.to(device=weight.device, dtype=weight.dtype)
    grown.embed.load_state_dict(module.embed.state_dict())
    grown.ln_f.load_state_dict(module.ln_f.state_dict())
    for i, block in enumerate(grown.blocks):
        if i in trained:
            block.load_state_dict(trained[i].state_dict())
        else:
            block.proj.weight.zero_()
            block.down.weight.zero_()
    return grown
