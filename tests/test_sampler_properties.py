"""Properties of the denoising loop over combinations of its controls, step by step.

`test_sampler_controls.py` specifies each control alone, and checks there that any
combination ends in budget with every position written.  Here each step of a run
is watched under many combinations (one fixed seed, so every run sees the same
examples), for what the README's "Denoising controls" promise of a step: what it
may change, where it may commit, and how many; and a settled fill's early end is
checked against the whole budget's text.  The fake model's logits depend on
each position's left neighbour, so proposals change as positions commit, and
peaks of varied strength make some positions confident.  Spans start masked, or
partly masked as a repair leaves them (the old fill kept, some of it masked again,
the token that spelled the head among them or not).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import torch
from fakes import FakeModel
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from dlm_lsp import schedules
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.sampler import Denoising, SamplerConfig
from dlm_lsp.span import SpanLayout, build_layout

# One fixed seed for every test here: each draws the same examples, so each run is
# made once (`_run`'s cache) and checked by every test, in about 10 s in all.
EXAMPLES = settings(max_examples=400, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
SEED = 94


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Tokenizer:
    return Tokenizer.from_file(model_dir / "tokenizer.json")


@functools.cache
def _tables(vocab: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    peaks = torch.randn(128, vocab, generator=gen) * (torch.rand(128, 1, generator=gen) * 8)
    return (peaks, torch.randn(vocab, 16, generator=gen),
            torch.randn(16, vocab, generator=gen) * 0.5)


def reactive(vocab: int, seed: int):
    """Logits of a position: a seeded peak (strong or flat) plus a term of its left
    neighbour's token, so a commit changes the proposals beside it."""
    peaks, embed, project = _tables(vocab, seed)

    def make(ids: torch.Tensor) -> torch.Tensor:
        return peaks[:ids.shape[1]] + embed[torch.roll(ids, 1, dims=1)] @ project
    return make


CONTROLS = st.fixed_dictionaries({
    "steps": st.integers(1, 24),
    "strategy": st.sampled_from(["confidence", "margin", "entropy", "random"]),
    "schedule": st.sampled_from(list(schedules.SCHEDULES)),
    "threshold": st.none() | st.sampled_from([0.1, 0.5, 0.9]),
    "max_per_step": st.none() | st.integers(1, 4),
    "spacing": st.integers(0, 2),
    "remask": st.sampled_from([0.0, 0.0, 0.5]),
    "ltr_tokens": st.integers(0, 4),
    "block_size": st.none() | st.integers(1, 8),
    "early_stop": st.booleans(),
    "single_line": st.booleans(),
    "temperatures": st.sampled_from([(0.0,), (0.0, 1.0)]),
})
# heads of one character and of several (which a chain may spell in pieces)
PREFIXES = ["", "y = ret", "x = foo(", "def f():\n    ", "a = 1\n", "z = self.val", "    "]
OLD_FILL = "return x + 1\n    y = [a, b]"


@dataclass
class Step:
    """One step as the loop ran it: the span before and after, and what decided it."""

    before: list[list[int]]
    after: list[list[int]]
    block: tuple[int, int, int]  # (start, end, steps) of the block under way
    b_step: int  # the step's index in its block
    head: list[int]  # per row, positions the head takes (known after the first step)
    sure: list[list[float]]  # per row and position, the most likely token's probability
    ends: bool  # the run ended at this step (budget, early stop, settled fill)
    mask: int

    def forced(self, r: int, first: bool, cfg: SamplerConfig) -> set[int]:
        """Positions the step commits whatever the controls: the head's chain on the first
        step, the left-to-right region's next position."""
        chain = set(range(self.head[r])) if first else set()
        region = [i for i in range(self.head[r], min(len(self.before[r]),
                                                     self.head[r] + cfg.ltr_tokens))
                  if self.before[r][i] == self.mask]
        return chain | set(region[:1])

    def committed(self, r: int) -> list[int]:
        return [i for i, (a, b) in enumerate(zip(self.before[r], self.after[r], strict=True))
                if a == self.mask and b != self.mask]


def _layout(tok: Tokenizer, prefix: str, n: int, reopened: tuple[bool, ...] | None,
            head_again: bool, mask: int) -> SpanLayout:
    """A fresh span, or a repair's: an old fill (head first) with some positions masked
    again, and the tokens that spell the head too where `head_again`."""
    lay = build_layout(tok, prefix, "\n", n, 100) if prefix else SpanLayout(
        tok.encode("x = "), n, tok.encode("\n"))
    if reopened is None:
        return lay
    old = (tok.encode(lay.head + OLD_FILL) + [FakeModel(tok).pad_id] * lay.n_masked)
    old = old[:lay.n_masked]
    protected = next((i for i in range(len(old) + 1)
                      if len(tok.decode(old[:i])) >= len(lay.head)), len(old))
    head_again = head_again and protected > 0
    ids = [mask if (i < protected and head_again) or (i >= protected and reopened[i])
           else t for i, t in enumerate(old)]
    if mask not in ids:
        ids[-1] = mask
    return replace(lay, init_ids=tuple(ids), head_tokens=0 if head_again else protected)


@functools.lru_cache(maxsize=512)  # above max_examples
def _run(tok: Tokenizer, prefix: str, n: int, controls: tuple, seed: int,
         reopened: tuple[bool, ...] | None, head_again: bool
         ) -> tuple[SpanLayout, SamplerConfig, list[Step], torch.Tensor]:
    """The layout, config, every step and the result of one run (shared by the tests:
    each example runs once)."""
    model = FakeModel(tok, reactive(tok.vocab_size, seed))
    lay = _layout(tok, prefix, n, reopened, head_again, model.mask_id)
    cfg = SamplerConfig(**dict(controls))
    run = Denoising(model, lay, cfg, seed)
    steps: list[Step] = []
    while not run.done:
        before = run.x[:, run.lo:run.hi].tolist()
        block, b_step = run.plan[run.block], run.b_step
        logits = model.logits(run.inputs)[:, run.lo:run.hi]
        run.advance(logits.clone())
        logits[..., model.mask_id] = float("-inf")  # never proposed
        sure = logits.softmax(-1).max(-1).values.tolist()
        steps.append(Step(before, run.x[:, run.lo:run.hi].tolist(), block, b_step,
                          list(run.order.head), sure, run.done, model.mask_id))
    return lay, cfg, steps, run.result().span_ids


EXAMPLE = st.fixed_dictionaries({
    "prefix": st.sampled_from(PREFIXES), "n": st.integers(1, 24),
    "controls": CONTROLS.map(lambda c: tuple(sorted(c.items()))), "seed": st.integers(0, 2),
    # two in three a repair's span: the head's token reopened there is the rarer case
    "reopened": st.sampled_from([None, "repair", "repair"]).flatmap(
        lambda kind: st.just(None) if kind is None
        else st.lists(st.booleans(), min_size=32, max_size=32).map(tuple)),
    "head_again": st.booleans()})


def examples(test):
    """Run `test(tok, example)` on the shared examples."""
    return EXAMPLES(seed(SEED)(given(example=EXAMPLE)(test)))


def _mid_run(steps: list[Step]):
    """(index, step, row) of every step that is not its block's last nor the run's end:
    those end whatever is left at once."""
    for s, step in enumerate(steps):
        if step.ends or step.b_step == step.block[2] - 1:
            continue
        for r in range(len(step.before)):
            yield s, step, r


@examples
def test_every_position_is_written_from_any_start(tok, example):
    """Masked, or partly as a repair leaves it (the head's token among the reopened)."""
    lay, cfg, steps, out = _run(tok, **example)
    assert steps[0].mask not in out.flatten().tolist()


@examples
def test_no_step_writes_over_a_committed_token(tok, example):
    """Without re-masking a committed token stays; with it, a step may only mask it
    again, but for the step that ends the run, where an early stop fills what that step
    masked again.  A repair's kept tokens are committed ones: the head spelled again
    may not take their places."""
    lay, cfg, steps, out = _run(tok, **example)
    for s, step in enumerate(steps):
        for r, (before, after) in enumerate(zip(step.before, step.after, strict=True)):
            for i, (a, b) in enumerate(zip(before, after, strict=True)):
                if a != step.mask:
                    assert b == a or (cfg.remask > 0 and (b == step.mask or step.ends)), (
                        s, r, i, a, b)


@examples
def test_a_step_commits_in_its_block_and_the_left_to_right_region_one_at_a_time(tok, example):
    lay, cfg, steps, out = _run(tok, **example)
    for s, step, r in _mid_run(steps):
        start, end, _ = step.block
        new = set(step.committed(r)) - step.forced(r, s == 0, cfg)
        assert all(start <= i < end for i in new), (s, r, sorted(new), step.block)
        region = range(step.head[r], step.head[r] + cfg.ltr_tokens)
        assert not new & set(region), (s, r, sorted(new), region)


def _floor(step: Step, r: int) -> int:
    """The least a step commits to keep pace with its block's budget."""
    start, end, block_steps = step.block
    masked = sum(t == step.mask for t in step.before[r][start:end])
    return math.ceil(masked / (block_steps - step.b_step))


@examples
def test_a_step_keeps_to_the_cap_and_the_spacing_unless_the_budget_needs_more(tok, example):
    lay, cfg, steps, out = _run(tok, **example)
    for s, step, r in _mid_run(steps):
        new, forced, floor = step.committed(r), step.forced(r, s == 0, cfg), _floor(step, r)
        if cfg.max_per_step is not None:
            assert len(new) <= max(cfg.max_per_step, floor, len(forced)), (s, r, new, floor)
        close = any(0 < j - i <= cfg.spacing for i in new for j in new
                    if not {i, j} <= forced)
        assert not close or len(new) <= floor, (s, r, new, floor)


@examples
def test_a_threshold_commits_every_position_at_least_that_confident(tok, example):
    """Where no cap or spacing holds them back, and the region left to right aside."""
    lay, cfg, steps, out = _run(tok, **example)
    if cfg.threshold is None or cfg.max_per_step is not None or cfg.spacing:
        return
    for s, step, r in _mid_run(steps):
        if cfg.temperatures[r] > 0:
            continue
        start, end, _ = step.block
        free = max(start, step.head[r] + cfg.ltr_tokens)
        confident = {i for i in range(free, end)
                     if step.before[r][i] == step.mask and step.sure[r][i] >= cfg.threshold}
        assert confident <= set(step.committed(r)), (s, r, sorted(confident), step.committed(r))


def _text(tok: Tokenizer, lay: SpanLayout, ids: list[int], single_line: bool) -> str:
    """A row's fill as the engine reads it: up to its first pad, after the head, to its
    first line break where it is one line."""
    pad = FakeModel(tok).pad_id
    text = tok.decode(ids[:ids.index(pad)] if pad in ids else ids)[len(lay.head):]
    return text.split("\n", 1)[0] if single_line else text


@examples
def test_a_settled_fill_ends_early_with_the_text_the_whole_budget_gives(tok, example):
    """Without re-masking (with it, settling is off): the loop stops once no step can
    change the text, and the text is the same."""
    lay, cfg, steps, out = _run(tok, **example)
    if cfg.remask > 0:
        return
    whole = replace(cfg, stop_when_settled=False)
    spent = Denoising(FakeModel(tok, reactive(tok.vocab_size, example["seed"])), lay, whole,
                      example["seed"])
    while not spent.done:
        spent.advance(spent.model.logits(spent.inputs))
    assert len(steps) <= spent.steps
    for settled, full in zip(out.tolist(), spent.result().span_ids.tolist(), strict=True):
        assert _text(tok, lay, settled, cfg.single_line) == _text(tok, lay, full,
                                                                  cfg.single_line)
