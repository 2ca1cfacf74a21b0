"""Specification of growing spans (DreamOn's expand token) in the denoising loop.

A model with an `expand_id` may commit the expand token; the loop then turns it
into two masked positions, so the span grows by one.  The fake model here
scores positions by a rule per step, so each case is exact.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fakes import FakeModel

from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.sampler import Denoising, SamplerConfig, denoise
from dlm_lsp.serving import StepBatcher
from dlm_lsp.span import SpanLayout


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(model_dir / "tokenizer.json")


class Expanding(FakeModel):
    """Proposes the expand token at the span's first masked position while `expands`
    says so, and a plain letter everywhere else."""

    def __init__(self, tok: Tokenizer, lo: int, expands=lambda call: call == 1):
        super().__init__(tok, self._score)
        self.expand_id = tok.token_id("<|pad|>") + 2  # any id that is not mask or pad
        self.letter = tok.encode("a")[0]
        self.lo, self.expands = lo, expands

    def _score(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(*ids.shape, self.vocab)
        out[..., self.letter] = 5.0
        masked = (ids[0, self.lo:] == self.mask_id).nonzero()
        if self.expands(self.calls) and len(masked):
            out[:, self.lo + int(masked[0]), self.expand_id] = 50.0  # surest of all
        return out


def _layout(tok: Tokenizer, n: int) -> SpanLayout:
    return SpanLayout(tok.encode("x = "), n, tok.encode("\nprint(x)\n"))


def test_an_expand_token_becomes_two_masks_and_the_span_grows_by_one(tok):
    layout = _layout(tok, 4)
    model = Expanding(tok, layout.span_start)
    out = denoise(model, layout, SamplerConfig(steps=4, max_tokens=16), seed=0)
    assert out.span_ids.shape == (1, 5) and out.steps == 4
    assert out.span_ids[0].tolist() == [model.letter] * 5  # no expand and no mask left


def test_a_span_grows_no_further_than_max_tokens(tok):
    layout = _layout(tok, 4)
    model = Expanding(tok, layout.span_start, expands=lambda call: True)
    out = denoise(model, layout, SamplerConfig(steps=6, max_tokens=7), seed=0)
    assert out.span_ids.shape == (1, 7)
    assert model.expand_id not in out.span_ids[0].tolist()


def test_without_max_tokens_or_on_the_last_step_the_span_keeps_its_length(tok):
    layout = _layout(tok, 4)
    for cfg in (SamplerConfig(steps=4), SamplerConfig(steps=1, max_tokens=16)):
        model = Expanding(tok, layout.span_start, expands=lambda call: True)
        out = denoise(model, layout, cfg, seed=0)
        assert out.span_ids.shape == (1, 4) and model.expand_id not in out.span_ids[0].tolist()


@pytest.mark.parametrize("cfg", [SamplerConfig(steps=4, max_tokens=16, temperatures=(0.0, 0.9)),
                                 SamplerConfig(steps=4, max_tokens=16, block_size=2)])
def test_several_rows_or_blocks_never_grow_and_never_propose_expand(tok, cfg):
    layout = _layout(tok, 4)
    model = Expanding(tok, layout.span_start, expands=lambda call: True)
    out = denoise(model, layout, cfg, seed=0)
    assert out.span_ids.shape[1] == 4 and model.expand_id not in out.span_ids.flatten().tolist()


def test_a_growing_span_gives_the_same_result_in_a_shared_batch(tok):
    layout = _layout(tok, 4)
    cfg = SamplerConfig(steps=4, max_tokens=16)
    alone = denoise(Expanding(tok, layout.span_start), layout, cfg, seed=3)
    model = Expanding(tok, layout.span_start)
    batcher = StepBatcher(model)
    try:
        shared = batcher.run(Denoising(model, layout, cfg, seed=3))
    finally:
        batcher.close()
    assert torch.equal(shared.span_ids, alone.span_ids) and shared.span_ids.shape == (1, 5)
