"""Specification of the denoising loop (dlm_lsp.sampler) with its schedules and strategies.

The loop is driven by a fake model whose logits are fixed, seeded-random or rigged, so
each behaviour is checked independently of what a trained model would predict.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from fakes import FakeModel

from dlm_lsp import schedules, strategies
from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN, Tokenizer
from dlm_lsp.sampler import Cancelled, Denoised, SamplerConfig, denoise, head_tokens
from dlm_lsp.span import SpanLayout, build_layout, head_chain, head_positions

STRATEGY_NAMES = list(strategies.STRATEGIES)


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Tokenizer:
    """The small byte-level BPE of the session's tiny model (built once by `small_tokenizer`)."""
    return Tokenizer.from_file(model_dir / "tokenizer.json")


def _fixed_logits(vocab: int, seed: int = 0, length: int = 256) -> Callable:
    """The same logits for every call (a model that ignores its input)."""
    table = torch.randn(length, vocab, generator=torch.Generator().manual_seed(seed))

    def make(ids: torch.Tensor) -> torch.Tensor:
        return table[: ids.shape[1]].expand(ids.shape[0], -1, -1).clone()
    return make


def _plain_layout(tok: Tokenizer, n: int) -> SpanLayout:
    """A layout with no head: prefix and suffix tokenized apart, `n` masked positions."""
    return SpanLayout(tok.encode("def add(a, b):\n    return "), n, tok.encode("\n"))


def _run(model: FakeModel, layout: SpanLayout, seed: int = 0, **cfg) -> Denoised:
    """Denoise, raising Cancelled (so the test fails instead of hanging) after 200 steps."""
    polls = itertools.count()
    return denoise(model, layout, SamplerConfig(**cfg), seed,
                   should_stop=lambda: next(polls) > 200)


def test_fake_model_satisfies_the_model_interface(tok: Tokenizer) -> None:
    assert isinstance(FakeModel(tok), DiffusionModel)


# --- schedules ----------------------------------------------------------------------------

PAIRS = [(s, n) for s in (1, 2, 3, 4, 7, 8, 16, 33) for n in (1, 2, 5, 8, 16, 17, 48, 128)]


def _simulate(schedule: schedules.Schedule, steps: int, total: int) -> list[int]:
    """Commit counts per step until nothing remains (checking each against what remains)."""
    remaining, counts = total, []
    for step in range(steps):
        if remaining == 0:
            break
        k = schedule(step, steps, remaining, total)
        assert 1 <= k <= remaining, (step, steps, remaining, total, k)
        counts.append(k)
        remaining -= k
    return counts


@pytest.mark.parametrize("name", list(schedules.SCHEDULES))
def test_schedule_commits_every_token_by_the_last_step(name: str) -> None:
    for steps, total in PAIRS:
        counts = _simulate(schedules.SCHEDULES[name], steps, total)
        assert sum(counts) == total, (steps, total, counts)
        assert len(counts) <= steps


@pytest.mark.parametrize("name", list(schedules.SCHEDULES))
def test_schedule_commits_at_least_one_and_at_most_what_remains(name: str) -> None:
    schedule = schedules.SCHEDULES[name]
    for steps, total in PAIRS:
        for step in range(steps):
            for remaining in range(1, total + 1):
                assert 1 <= schedule(step, steps, remaining, total) <= remaining


def test_linear_spreads_tokens_evenly() -> None:
    assert _simulate(schedules.linear, 4, 16) == [4, 4, 4, 4]
    assert _simulate(schedules.linear, 3, 10) == [4, 3, 3]


def test_linear_uses_every_step_when_there_are_enough_tokens() -> None:
    for steps, total in PAIRS:
        if total >= steps:
            assert len(_simulate(schedules.linear, steps, total)) == steps


def test_cosine_commits_fewer_early_than_late() -> None:
    for steps, total in [(8, 64), (16, 48), (4, 32), (16, 128)]:
        counts = _simulate(schedules.cosine, steps, total)
        assert counts[0] < counts[-1], counts
        assert sum(counts[: steps // 2]) < sum(counts[steps // 2:]), counts


def test_cosine_follows_the_maskgit_masking_level() -> None:
    steps, total = 8, 64
    remaining = total
    for step in range(steps - 1):
        remaining -= schedules.cosine(step, steps, remaining, total)
        assert remaining == math.floor(total * math.cos(math.pi / 2 * (step + 1) / steps))


# --- strategies ---------------------------------------------------------------------------


def _peaked_and_flat(vocab: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    peaked = torch.full((vocab,), 0.02)
    peaked[3] = 1 - 0.02 * (vocab - 1)
    flat = torch.full((vocab,), 1 / vocab)
    probs = torch.stack([flat, peaked])[None]  # (1, 2, V): position 0 flat, 1 peaked
    return probs, probs.argmax(-1)


@pytest.mark.parametrize("name", ["confidence", "margin", "entropy"])
def test_certainty_strategies_rank_a_peaked_distribution_above_a_flat_one(name: str) -> None:
    probs, chosen = _peaked_and_flat()
    score = strategies.STRATEGIES[name](probs, chosen, torch.Generator().manual_seed(0))
    assert score.shape == (1, 2)
    assert score[0, 1] > score[0, 0]


def test_confidence_is_the_probability_of_the_chosen_token() -> None:
    probs = torch.tensor([[[0.1, 0.6, 0.3]]])
    score = strategies.confidence(probs, torch.tensor([[2]]), torch.Generator())
    assert score.flatten().tolist() == pytest.approx([0.3])


def test_margin_is_the_gap_between_the_two_most_likely_tokens() -> None:
    probs = torch.tensor([[[0.1, 0.6, 0.3]]])
    score = strategies.margin(probs, torch.tensor([[1]]), torch.Generator())
    assert score.flatten().tolist() == pytest.approx([0.3])


def test_left_to_right_ranks_the_leftmost_position_first() -> None:
    probs, _ = _peaked_and_flat()
    probs = probs.repeat(2, 3, 1)  # (2, 6, V)
    score = strategies.left_to_right(probs, probs.argmax(-1), torch.Generator())
    for row in score:
        assert row.argsort(descending=True).tolist() == list(range(6))


def test_random_is_reproducible_with_the_same_seeded_generator() -> None:
    probs = torch.softmax(torch.randn(2, 20, 7), -1)
    chosen = probs.argmax(-1)
    a = strategies.random(probs, chosen, torch.Generator().manual_seed(5))
    b = strategies.random(probs, chosen, torch.Generator().manual_seed(5))
    c = strategies.random(probs, chosen, torch.Generator().manual_seed(6))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


# --- the loop -----------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("schedule", list(schedules.SCHEDULES))
def test_every_span_position_is_committed_and_none_is_a_mask(
        tok: Tokenizer, strategy: str, schedule: str) -> None:
    model = FakeModel(tok)
    out = _run(model, _plain_layout(tok, 12), steps=4, strategy=strategy, schedule=schedule,
               temperatures=(0.0, 1.0))
    assert out.span_ids.shape == (2, 12)
    assert not bool((out.span_ids == model.mask_id).any())


def test_the_mask_token_is_never_committed_even_when_the_model_prefers_it(tok: Tokenizer) -> None:
    def make(ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[..., tok.token_id(MASK_TOKEN)] = 100.0
        return logits
    model = FakeModel(tok, make)
    out = _run(model, _plain_layout(tok, 6), steps=3)
    assert not bool((out.span_ids == model.mask_id).any())


def test_linear_schedule_runs_exactly_steps_forward_passes(tok: Tokenizer) -> None:
    for steps, n in [(1, 5), (4, 16), (8, 8), (5, 13)]:
        model = FakeModel(tok)
        out = _run(model, _plain_layout(tok, n), steps=steps)
        assert (model.calls, out.steps) == (steps, steps)


def test_cosine_schedule_finishes_within_steps_forward_passes(tok: Tokenizer) -> None:
    model = FakeModel(tok)
    out = _run(model, _plain_layout(tok, 20), steps=6, schedule="cosine")
    assert model.calls == out.steps <= 6


def test_committed_tokens_stay_committed(tok: Tokenizer) -> None:
    model = FakeModel(tok)
    snapshots: list[torch.Tensor] = []
    denoise(model, _plain_layout(tok, 10), SamplerConfig(steps=5), 0,
            on_step=lambda step, steps, span: snapshots.append(span.clone()))
    for before, after in itertools.pairwise(snapshots):
        kept = before != model.mask_id
        assert torch.equal(before[kept], after[kept])


def test_on_step_reports_step_and_budget_each_pass(tok: Tokenizer) -> None:
    calls: list[tuple[int, int]] = []
    denoise(FakeModel(tok), _plain_layout(tok, 8), SamplerConfig(steps=4), 0,
            on_step=lambda step, steps, span: calls.append((step, steps)))
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_left_to_right_commits_positions_strictly_in_order(tok: Tokenizer) -> None:
    model = FakeModel(tok)
    n = 9
    committed: list[int] = []

    def on_step(step: int, steps: int, span: torch.Tensor) -> None:
        done = (span[0] != model.mask_id).tolist()
        count = sum(done)
        assert done == [True] * count + [False] * (n - count)  # a prefix of the span
        committed.append(count)

    denoise(model, _plain_layout(tok, n), SamplerConfig(steps=n, strategy="left-to-right"), 0,
            on_step=on_step)
    assert committed == list(range(1, n + 1))


def test_confidence_commits_the_surest_position_first(tok: Tokenizer) -> None:
    sure = 4

    def make(ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[:, :, 100] = 1.0
        logits[:, layout.span_start + sure, 100] = 50.0
        return logits
    layout = _plain_layout(tok, 6)
    first: list[torch.Tensor] = []
    model = FakeModel(tok, make)
    denoise(model, layout, SamplerConfig(steps=6), 0,
            on_step=lambda step, steps, span: first.append(span.clone()) if step == 1 else None)
    assert (first[0][0] != model.mask_id).nonzero().flatten().tolist() == [sure]


def test_greedy_rows_take_the_most_likely_token(tok: Tokenizer) -> None:
    make = _fixed_logits(tok.vocab_size)
    layout = _plain_layout(tok, 6)
    out = _run(FakeModel(tok, make), layout, steps=3)
    expected = make(torch.zeros(1, len(layout.sequence(0)), dtype=torch.long))[0]
    expected[:, tok.token_id(MASK_TOKEN)] = float("-inf")
    best = expected[layout.span_start:layout.span_end].argmax(-1)
    assert out.span_ids[0].tolist() == best.tolist()


def test_scores_are_mean_log_probabilities(tok: Tokenizer) -> None:
    def make(ids: torch.Tensor) -> torch.Tensor:  # every position certain of token 100
        logits = torch.full((*ids.shape, tok.vocab_size), -1e4)
        logits[..., 100] = 0.0
        return logits
    out = _run(FakeModel(tok, make), _plain_layout(tok, 5), steps=2)
    assert out.scores.tolist() == pytest.approx([0.0], abs=1e-5)
    assert out.span_ids.tolist() == [[100] * 5]


def test_should_stop_raises_cancelled_between_steps(tok: Tokenizer) -> None:
    model = FakeModel(tok)
    polls = itertools.count()
    with pytest.raises(Cancelled):
        denoise(model, _plain_layout(tok, 16), SamplerConfig(steps=8), 0,
                should_stop=lambda: next(polls) >= 3)
    assert model.calls == 3 < 8


def test_should_stop_before_the_first_step_runs_no_forward_pass(tok: Tokenizer) -> None:
    model = FakeModel(tok)
    with pytest.raises(Cancelled):
        denoise(model, _plain_layout(tok, 4), SamplerConfig(steps=4), 0, should_stop=lambda: True)
    assert model.calls == 0


def test_same_seed_gives_the_same_sampled_fill(tok: Tokenizer) -> None:
    make = _fixed_logits(tok.vocab_size)
    layout = _plain_layout(tok, 12)
    cfg = dict(steps=4, strategy="random", temperatures=(1.0, 1.0))
    a = _run(FakeModel(tok, make), layout, seed=11, **cfg)
    b = _run(FakeModel(tok, make), layout, seed=11, **cfg)
    assert torch.equal(a.span_ids, b.span_ids)
    assert torch.equal(a.scores, b.scores)


def test_different_seeds_give_different_sampled_fills(tok: Tokenizer) -> None:
    make = _fixed_logits(tok.vocab_size)
    layout = _plain_layout(tok, 12)
    a = _run(FakeModel(tok, make), layout, seed=1, steps=4, temperatures=(1.0,))
    b = _run(FakeModel(tok, make), layout, seed=2, steps=4, temperatures=(1.0,))
    assert not torch.equal(a.span_ids, b.span_ids)


def test_greedy_row_ignores_the_seed(tok: Tokenizer) -> None:
    make = _fixed_logits(tok.vocab_size)
    layout = _plain_layout(tok, 12)
    a = _run(FakeModel(tok, make), layout, seed=1, steps=4, temperatures=(0.0, 1.0))
    b = _run(FakeModel(tok, make), layout, seed=2, steps=4, temperatures=(0.0, 1.0))
    assert torch.equal(a.span_ids[0], b.span_ids[0])


def test_one_row_per_temperature(tok: Tokenizer) -> None:
    out = _run(FakeModel(tok), _plain_layout(tok, 5), steps=2, temperatures=(0.0, 0.8, 0.8))
    assert out.span_ids.shape == (3, 5) and out.scores.shape == (3,)


# --- the head constraint ------------------------------------------------------------------

EDGES = {
    "mid-word": ("y = ret", "\n"),
    "end-of-line": ("x = foo(", "\n"),
    "indented-line-start": ("def f():\n    ", "\n"),
    "after-line-break": ("a = 1\n", "b = 2\n"),
    "end-of-file": ("a = 1\n", ""),
    "trailing-spaces": ("x  ", ""),
}


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("edge", list(EDGES))
def test_span_always_starts_with_the_head(tok: Tokenizer, edge: str, strategy: str) -> None:
    prefix, suffix = EDGES[edge]
    for seed, n in itertools.product(range(4), (6, 12)):
        layout = build_layout(tok, prefix, suffix, n, 100)
        assert layout.head
        out = _run(FakeModel(tok, seed=seed), layout, seed=seed, steps=4, strategy=strategy,
                   temperatures=(0.0, 1.0))
        for row in out.span_ids.tolist():
            assert tok.decode(row).startswith(layout.head), (seed, n, tok.decode(row))


def test_head_positions_are_committed_first_left_to_right(tok: Tokenizer) -> None:
    layout = build_layout(tok, "def f():\n    ", "\n", 6, 100)
    model = FakeModel(tok, seed=3)
    texts = tok.token_texts
    drafts: list[str] = []

    def on_step(step: int, steps: int, span: torch.Tensor) -> None:
        ids = span[0].tolist()
        first_masked = ids.index(model.mask_id) if model.mask_id in ids else len(ids)
        drafts.append("".join(texts[i] for i in ids[:first_masked]))

    denoise(model, layout, SamplerConfig(steps=4, strategy="random"), 0, on_step=on_step)
    for before, after in itertools.pairwise(drafts):
        assert after.startswith(before)
    assert drafts[-1].startswith(layout.head)


def _prefers(token_ids: list[int], vocab: int) -> Callable:
    """A model that always prefers the given tokens (first most), e.g. one-character ones."""
    def make(ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, vocab)
        for rank, t in enumerate(token_ids):
            logits[..., t] = 10.0 - rank
        return logits
    return make


@pytest.mark.parametrize("n", [0, 1, 2])
def test_head_is_reproduced_when_the_model_prefers_one_character_tokens(
        tok: Tokenizer, n: int) -> None:
    layout = build_layout(tok, "def f():\n    ", "\n", n, 100)
    make = _prefers([tok.token_id("Ġ"), tok.token_id("Ċ")], tok.vocab_size)
    out = _run(FakeModel(tok, make), layout, steps=4)
    assert tok.decode(out.span_ids[0].tolist()).startswith(layout.head)


def test_head_tokens_are_the_likeliest_allowed_chain_and_its_ids_are_gathered_once(
        tok: Tokenizer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain's allowed ids become an index once per (chain, place, room): a head of
    spaces allows thousands of tokens, and listing them every step cost a millisecond."""
    chain = head_chain(tok, "    ")
    logits = torch.randn(6, tok.vocab_size, generator=torch.Generator().manual_seed(1))
    done, expected = 0, []
    while done < len(chain.head):  # the specification: the best allowed token, in turn
        ids = chain.allowed(done, 6 - len(expected))
        expected.append(max(ids, key=lambda i: float(logits[len(expected), i])))
        done = chain.advance(done, chain.texts[expected[-1]])
    asked: list[tuple[int, int]] = []
    listed = chain.allowed
    monkeypatch.setattr(chain, "allowed",
                        lambda done, left: asked.append((done, left)) or listed(done, left))
    assert head_tokens(chain, logits) == expected
    first = len(asked)
    assert head_tokens(chain, logits) == expected
    assert len(asked) == first, "the same head at the same place: its ids are not listed again"


def test_a_head_no_token_chain_can_spell_is_refused_clearly(tok: Tokenizer) -> None:
    layout = build_layout(tok, "x = café", "\n", 4, 100)
    assert layout.head == " café"
    with pytest.raises(ValueError, match="cannot be reproduced"):
        denoise(FakeModel(tok), layout, SamplerConfig(steps=4), 0)


def test_a_repair_that_writes_the_head_again_keeps_the_fill_tokens_after_it(
        tok: Tokenizer) -> None:
    """A repair reopens the one token that spelled the head (8 spaces); a model that now
    prefers the 4-space piece must not spell the head over the fill's committed tokens."""
    head, piece = "        ", tok.token_texts.index("    ")
    model = FakeModel(tok)
    fill = tok.encode("return x")
    lay = SpanLayout(tok.encode("def f():\n"), 1 + len(fill) + 1, tok.encode("\n"), head=head,
                     init_ids=(model.mask_id, *fill, model.mask_id))
    model = FakeModel(tok, _prefers([piece], tok.vocab_size))
    out = _run(model, lay, steps=2)
    assert out.span_ids[0, 1:1 + len(fill)].tolist() == fill
    assert tok.decode(out.span_ids[0].tolist()).startswith(head + "return x")


# --- a head's chain that grows the span (grow_for_head) -------------------------------------

SPACES_HEAD = ("def f():\n    if x:\n        ", "\n")  # the head: a line break, 8 spaces


def _one_character_model(tok: Tokenizer) -> FakeModel:
    """A model that spells everything in one-character tokens: its head's chain is long."""
    return FakeModel(tok, _prefers([tok.token_id("Ġ"), tok.token_id("Ċ")], tok.vocab_size))


@pytest.mark.parametrize("grow", [False, True])
def test_a_chain_longer_than_the_head_s_own_tokens_grows_the_span_by_the_difference(
        tok: Tokenizer, grow: bool) -> None:
    """The span is sized for the head's own tokens plus the fill's; a chain of one-space
    tokens took the fill's positions (a 4-position fill kept none).  Grown, the fill keeps
    all it was given, after a chain of as many positions as before."""
    layout = build_layout(tok, *SPACES_HEAD, 4, 100)
    assert layout.head == "\n        " and layout.head_tokens < 9
    out = _run(_one_character_model(tok), layout, steps=4, grow_for_head=grow)
    row = out.span_ids[0].tolist()
    chain = head_positions(tok, row, layout.head)
    assert tok.decode(row).startswith(layout.head)
    assert chain > layout.head_tokens  # the case in question: the chain took more
    if grow:
        assert len(row) == layout.n_masked + chain - layout.head_tokens
        assert len(row) - chain == layout.n_masked - layout.head_tokens == 4
    else:
        assert len(row) == layout.n_masked
        assert len(row) - chain < 4


@pytest.mark.parametrize("strategy", STRATEGY_NAMES)
@pytest.mark.parametrize("steps", [1, 2, 3, 8])
def test_the_chain_s_step_commits_the_chain_alone_and_the_budget_still_fills_the_span(
        tok: Tokenizer, strategy: str, steps: int) -> None:
    """The step that spells the chain made its other proposals for a span that ended too
    soon: it commits the chain alone, and counts.  Every position is committed within the
    budget, in every row (rows share one tensor, and each grows by its own chain: rows
    hold the same tokens when it is spelled, so at any temperature they spell the same
    one), and a budget of one step, which must commit everything at once, does not grow."""
    layout = build_layout(tok, *SPACES_HEAD, 40, 100)  # its schedule commits more than the chain
    model = _one_character_model(tok)
    drafts: list[list[int]] = []
    out = denoise(model, layout, SamplerConfig(steps=steps, strategy=strategy,
                                               temperatures=(0.0, 1.0), grow_for_head=True,
                                               stop_when_settled=False),
                  0, on_step=lambda step, budget, span: drafts.append(span[0].tolist()))
    assert out.steps <= steps and len(drafts) == out.steps
    assert model.mask_id not in out.span_ids.flatten().tolist()
    if steps == 1:
        assert out.span_ids.shape[1] == layout.n_masked
        return
    first = drafts[0]
    chain = head_positions(tok, out.span_ids[0].tolist(), layout.head)
    assert head_positions(tok, out.span_ids[1].tolist(), layout.head) == chain
    assert len(first) == layout.n_masked + chain - layout.head_tokens
    assert all(t != model.mask_id for t in first[:chain])
    assert all(t == model.mask_id for t in first[chain:])


def test_a_span_grows_no_further_than_the_model_reads_nor_max_tokens(tok: Tokenizer) -> None:
    layout = build_layout(tok, *SPACES_HEAD, 4, 100)
    model = _one_character_model(tok)
    model.max_length = len(layout.sequence(model.mask_id)) + 1
    out = _run(model, layout, steps=4, grow_for_head=True)
    assert out.span_ids.shape[1] == layout.n_masked + 1
    model.max_length = 1024
    out = _run(model, layout, steps=4, grow_for_head=True, max_tokens=layout.n_masked + 2)
    assert out.span_ids.shape[1] == layout.n_masked + 2


def test_a_repair_that_spells_the_head_again_does_not_grow_its_span(tok: Tokenizer) -> None:
    """A repair rewrites a span of its own length, the fill's tokens after the head kept.
    Where it writes the head's token again, it counts no position as the head's
    (`head_tokens` 0, as `InfillRun.repair` builds it): grown, it would have taken one."""
    head, fill = "        ", tok.encode("return x")
    model = _one_character_model(tok)
    lay = SpanLayout(tok.encode("def f():\n"), 1 + len(fill) + 1, tok.encode("\n"), head=head,
                     head_tokens=0, init_ids=(model.mask_id, *fill, model.mask_id))
    out = _run(model, lay, steps=2, grow_for_head=True)
    assert out.span_ids.shape[1] == lay.n_masked
    assert out.span_ids[0, 1:1 + len(fill)].tolist() == fill


# --- where a fill may end -----------------------------------------------------------------

def _pad_first_then(tok: Tokenizer, word: str) -> Callable:
    """A model sure of a pad at the span's first position and of `word` elsewhere: what
    makes confidence order end a fill before it starts."""
    pad, other = tok.token_id(PAD_TOKEN), tok.encode(word)[0]

    def make(ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[..., other] = 5.0
        logits[..., pad] = 4.0
        logits[:, -5, pad] = 12.0  # the span's first position (a 4-token span, then "\n")
        return logits
    return make


def test_a_confident_pad_early_in_the_span_ends_the_fill_there_by_default(tok) -> None:
    layout = _plain_layout(tok, 4)
    out = _run(FakeModel(tok, _pad_first_then(tok, "x")), layout, steps=4)
    assert out.span_ids[0, 0].item() == tok.token_id(PAD_TOKEN)  # the fill is empty


def test_with_pads_from_end_a_pad_is_proposed_only_after_the_pads_at_the_span_s_end(
        tok) -> None:
    layout = _plain_layout(tok, 4)
    out = _run(FakeModel(tok, _pad_first_then(tok, "x")), layout, steps=4,
               pads_from_end=True)
    ids = out.span_ids[0].tolist()
    pad = tok.token_id(PAD_TOKEN)
    assert ids[0] != pad
    # wherever the pads are, they close the span: no pad is followed by anything else
    assert all(b == pad for a, b in itertools.pairwise(ids) if a == pad)


def test_pads_only_at_the_end_leaves_a_pad_where_every_later_position_is_a_pad() -> None:
    from dlm_lsp.sampler import pads_only_at_the_end

    pad, mask = 0, 9
    span = torch.tensor([[mask, mask, pad, mask, pad, pad], [mask, 5, mask, mask, mask, mask]])
    logits = torch.zeros(2, 6, 10)
    pads_only_at_the_end(logits, span, pad)
    allowed = logits[..., pad] > float("-inf")
    assert allowed.tolist() == [[False, False, False, True, True, True],
                                [False, False, False, False, False, True]]
    assert (logits[..., 1:] == 0).all()  # other tokens untouched


def test_at_a_length_the_client_gave_no_pad_ends_the_fill(tok) -> None:
    """`end_early=False` (a request's own `length`, `exactLength`): the model that ends
    the fill before it starts by default writes every position instead."""
    layout = _plain_layout(tok, 4)
    out = _run(FakeModel(tok, _pad_first_then(tok, "x")), layout, steps=4, end_early=False)
    ids = out.span_ids[0].tolist()
    assert tok.token_id(PAD_TOKEN) not in ids
    assert ids == tok.encode("x") * 4


@pytest.mark.parametrize(("length", "settings", "ends_early"), [
    (None, {}, True),  # the length policy's span is room: the fill ends at its first pad
    (5, {}, True),  # a client's length is room too by default (exactLength off)
    (5, {"exact_length": True}, False),  # ... and the fill's own length with exactLength
    (None, {"exact_length": True}, True),  # the policy's room stays room
])
def test_a_fill_may_end_early_unless_the_request_gave_its_length(length, settings,
                                                                  ends_early) -> None:
    from dlm_lsp.config import InfillOptions, ServerConfig
    from dlm_lsp.sampler_settings import sampler_config

    sampler = sampler_config(ServerConfig(**settings), InfillOptions(length=length), 8,
                             "confidence")
    assert sampler.end_early is ends_early
    per_request = sampler_config(ServerConfig(), InfillOptions(length=length,
                                                               exact_length=True), 8,
                                 "confidence")
    assert per_request.end_early is (length is None)


def test_the_benchmarks_oracle_length_is_exact_and_the_policy_s_room() -> None:
    from dlm_lsp.bench.filling import FillSettings, fill_options

    assert fill_options(FillSettings(), 12, "single-line").exact_length is True
    assert fill_options(FillSettings()).exact_length is None
