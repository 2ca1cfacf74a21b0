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


@pytest.mark.parametrize("make, width", [
    (lambda tok, lo: Expanding(tok, lo), 5),
    (lambda tok, lo: Deleting(tok, lo, b_at=3, end_at=1), 2)], ids=["grows", "shrinks"])
def test_a_span_that_changes_length_gives_the_same_result_in_a_shared_batch(tok, make, width):
    layout = _layout(tok, 4)
    cfg = SamplerConfig(steps=4, max_tokens=16)
    alone = denoise(make(tok, layout.span_start), layout, cfg, seed=3)
    model = make(tok, layout.span_start)
    batcher = StepBatcher(model)
    try:
        shared = batcher.run(Denoising(model, layout, cfg, seed=3))
    finally:
        batcher.close()
    assert torch.equal(shared.span_ids, alone.span_ids) and shared.span_ids.shape == (1, width)


class Deleting(FakeModel):
    """DreamOn's shrinking: the delete token is the model's pad (its end-of-text).  Call
    `b_call` is surest of the letter `b` at span position `b_at`, call `end_call` of the
    delete token at span position `end_at` (each while that position is masked); the
    letter `a` everywhere else."""

    def __init__(self, tok: Tokenizer, lo: int, b_at: int | None, end_at: int,
                 b_call: int = 1, end_call: int = 2):
        super().__init__(tok, self._score)
        self.expand_id = tok.token_id("<|pad|>") + 2  # any id that is not mask or pad
        self.delete_id = self.pad_id
        self.a, self.b = tok.encode("a")[0], tok.encode("b")[0]
        self.lo, self.b_at, self.end_at = lo, b_at, end_at
        self.b_call, self.end_call = b_call, end_call

    def _score(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(*ids.shape, self.vocab)
        out[..., self.a] = 5.0
        for call, at, token in ((self.b_call, self.b_at, self.b),
                                (self.end_call, self.end_at, self.delete_id)):
            if self.calls == call and at is not None and ids[0, self.lo + at] == self.mask_id:
                out[:, self.lo + at, token] = 50.0  # surest of all
        return out


def test_a_committed_delete_token_goes_and_takes_the_masks_after_it_keeping_later_tokens(tok):
    """DreamOn's generator (pad_eos_to_right, delete_eos_token): once the delete token is
    committed, the masked positions after it become delete tokens too, and every delete
    token leaves the span, which shrinks; a token committed after it earlier stays.
    Here `b` is committed at position 3, then the delete token at 1: position 2 goes
    with it, and the one mask left (position 0) is filled; the fill is `a b`, not `a`
    cut at a pad in the middle."""
    layout = _layout(tok, 4)
    model = Deleting(tok, layout.span_start, b_at=3, end_at=1)
    out = denoise(model, layout, SamplerConfig(steps=4, max_tokens=16), seed=0)
    assert out.span_ids[0].tolist() == [model.a, model.b]
    assert out.steps == 3  # nothing was left to fill after the third step


def test_a_span_deleted_whole_keeps_one_pad_which_trims_to_nothing(tok):
    layout = _layout(tok, 4)
    model = Deleting(tok, layout.span_start, b_at=None, end_at=0, end_call=1)
    out = denoise(model, layout, SamplerConfig(steps=4, max_tokens=16), seed=0)
    assert out.span_ids[0].tolist() == [model.pad_id] and out.steps == 1


def test_rows_that_cannot_shrink_keep_the_delete_token_as_their_pad(tok):
    layout = _layout(tok, 4)
    model = Deleting(tok, layout.span_start, b_at=3, end_at=1)
    out = denoise(model, layout, SamplerConfig(steps=4, max_tokens=16, temperatures=(0.0, 0.0)),
                  seed=0)
    assert out.span_ids.shape == (2, 4) and out.span_ids[0, 1] == model.pad_id


def test_an_early_stop_never_writes_a_delete_token_that_the_steps_would_delete(tok):
    """Proposals stable from the second step would stop early with the delete token
    written at position 3, where no step committed it to be deleted: the run goes on,
    and the step that commits it deletes it."""
    layout = _layout(tok, 4)
    model = Deleting(tok, layout.span_start, b_at=None, end_at=3)

    def score(ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(*ids.shape, model.vocab)
        out[..., model.a] = 50.0
        out[:, layout.span_start + 3, model.a] = 0.0
        out[:, layout.span_start + 3, model.delete_id] = 10.0  # proposed, surest of none
        return out

    model._make = score
    out = denoise(model, layout, SamplerConfig(steps=4, max_tokens=16, early_stop=True), seed=0)
    assert out.span_ids[0].tolist() == [model.a] * 3 and not out.early_stopped
