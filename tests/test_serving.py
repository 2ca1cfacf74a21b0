"""Specification of dlm_lsp.serving: requests share forward passes without changing results."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dlm_lsp.costs import StepCost
from dlm_lsp.models import load_model
from dlm_lsp.sampler import Cancelled, Denoising, SamplerConfig, denoise, refine_start
from dlm_lsp.serving import BatchConfig, BatchStats, StepBatcher, Target
from dlm_lsp.slowdown import LoadFactor
from dlm_lsp.span import build_layout, head_positions


@pytest.fixture(scope="module")
def model(model_dir: Path):
    return load_model(str(model_dir), "cpu")


@pytest.fixture(scope="module")
def model32(model_dir: Path):
    """In float32 everywhere: a padded row sums its attention over more keys, in another
    order, and under bf16 (the default on a CPU that has it) a random model's flat
    logits flip on that (benchmarks/padded_fills.py counts it for the shipped model)."""
    return load_model(str(model_dir), "cpu", precision="fp32")


PREFIXES = ["def add(a, b):\n    return ", "x = [i * i for i in ", "import os\n\nprint(",
            "class A:\n    def f(self):\n        "]


def _layout(model, prefix: str, n: int = 8):
    return build_layout(model.tokenizer, prefix, "\n", n, 256, max_length=model.max_length)


def _alone(model, layout, cfg: SamplerConfig, seed: int) -> list[list[int]]:
    return denoise(model, layout, cfg, seed).span_ids.tolist()


def _together(batcher: StepBatcher, states: list[Denoising],
              target: Target | None = None) -> list[list[list[int]]]:
    """Run the states on the batcher from one thread each, all at once."""
    out: list = [None] * len(states)

    def one(i: int) -> None:
        out[i] = batcher.run(states[i], target=target).span_ids.tolist()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(states))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


CONFIGS = [SamplerConfig(steps=4), SamplerConfig(steps=8, strategy="margin"),
           SamplerConfig(steps=3, temperatures=(0.0, 0.9)),
           SamplerConfig(steps=6, strategy="random", block_size=4)]


def test_batched_requests_give_the_same_output_as_alone(model) -> None:
    jobs = [(_layout(model, p, n=8), cfg, seed)
            for seed, (p, cfg) in enumerate(zip(PREFIXES, CONFIGS, strict=True))]
    batcher = StepBatcher(model)
    try:
        got = _together(batcher, [Denoising(model, lay, cfg, seed) for lay, cfg, seed in jobs])
    finally:
        batcher.close()
    assert got == [_alone(model, lay, cfg, seed) for lay, cfg, seed in jobs]


def test_requests_of_one_length_share_forward_passes(model) -> None:
    prefix = PREFIXES[0]
    layouts = [_layout(model, prefix, n=8) for _ in range(4)]
    batcher = StepBatcher(model)
    gate = threading.Event()
    real = model.hidden  # every shared forward pass starts here

    def slow_first(ids: torch.Tensor) -> torch.Tensor:
        gate.wait(5)  # hold the first pass until every request has queued
        return real(ids)
    model.hidden = slow_first
    try:
        states = [Denoising(model, lay, SamplerConfig(steps=4), seed=i)
                  for i, lay in enumerate(layouts)]
        threading.Timer(0.3, gate.set).start()
        got = _together(batcher, states)
    finally:
        del model.hidden
        batcher.close()
    assert got == [_alone(model, lay, SamplerConfig(steps=4), i) for i, lay in enumerate(layouts)]
    assert batcher.stats.requests == 4
    assert batcher.stats.passes < 4 * 4, "some passes were shared"
    assert batcher.stats.occupancy > 1


def test_fills_of_mixed_controls_in_one_pass_give_what_each_gives_alone(model) -> None:
    """One sequence length, so every round is one shared pass, among fills whose loops
    differ in every way a step can: re-masking with an early stop and its check, the
    first line left to right, a threshold and a cap, a one-line fill that settles, a
    rewrite that starts from old code, two sampled rows."""
    base = _layout(model, "x = 1\n", n=8)
    ids = model.tokenizer.encode(base.head + "foo(bar)")
    head = head_positions(model.tokenizer, ids, base.head)
    old = replace(base, head_tokens=head,
                  init_ids=tuple(ids + [model.pad_id] * (base.n_masked - len(ids))))
    rewrite = replace(old, init_ids=tuple(refine_start(model, old, 0.5, "random", 0)))
    jobs = [(base, SamplerConfig(steps=6, remask=0.5, early_stop=True,
                                 early_stop_logprob=-9.0), lambda row: len(set(row)) > 2),
            (base, SamplerConfig(steps=5, ltr_first_line=True, temperatures=(0.0, 0.9)), None),
            (base, SamplerConfig(steps=7, threshold=0.2, max_per_step=2, spacing=1), None),
            (base, SamplerConfig(steps=8, strategy="left-to-right", single_line=True), None),
            (rewrite, SamplerConfig(steps=3, block_size=4, early_stop=True,
                                    early_stop_logprob=-9.0), None)]
    batcher = StepBatcher(model)
    gate, real = threading.Event(), model.hidden

    def slow_first(ids: torch.Tensor) -> torch.Tensor:
        gate.wait(5)  # hold the first pass until every fill has queued
        return real(ids)
    model.hidden = slow_first
    try:
        states = [Denoising(model, lay, cfg, seed, accept=accept)
                  for seed, (lay, cfg, accept) in enumerate(jobs)]
        threading.Timer(0.3, gate.set).start()
        got = _together(batcher, states)
    finally:
        del model.hidden
        batcher.close()
    alone = [denoise(model, lay, cfg, seed, accept=accept)
             for seed, (lay, cfg, accept) in enumerate(jobs)]
    assert got == [out.span_ids.tolist() for out in alone]
    assert batcher.stats.passes < sum(out.steps for out in alone)  # rounds were shared


def test_a_request_joins_a_running_batch_without_changing_either_result(model) -> None:
    long_layout, short_layout = _layout(model, PREFIXES[1], 8), _layout(model, PREFIXES[1], 8)
    long_cfg, short_cfg = SamplerConfig(steps=8), SamplerConfig(steps=2, strategy="entropy")
    batcher = StepBatcher(model)
    joined = threading.Event()
    results: dict = {}

    def on_step(step, steps, span):  # the second request arrives mid-way through the first
        if step == 3 and not joined.is_set():
            joined.set()
            threading.Thread(target=lambda: results.__setitem__("short", batcher.run(
                Denoising(model, short_layout, short_cfg, 7)).span_ids.tolist())).start()
    try:
        results["long"] = batcher.run(Denoising(model, long_layout, long_cfg, 3, on_step)
                                      ).span_ids.tolist()
        for _ in range(100):
            if "short" in results:
                break
            threading.Event().wait(0.05)
    finally:
        batcher.close()
    assert results["long"] == _alone(model, long_layout, long_cfg, 3)
    assert results["short"] == _alone(model, short_layout, short_cfg, 7)


SHARING_PAYS = StepCost(1000.0, 0.0)  # a pass's base outweighs any padding
PADDING_DOES_NOT_PAY = StepCost(0.0, 1.0)  # a pass costs its tokens, pad included

# the same span after contexts of different lengths
UNEVEN = ["x = ", "def add(a, b):\n    total = a + b\n    return ", "import os\n" * 12 + "print("]


def test_a_padded_row_s_states_do_not_depend_on_its_pad(model32) -> None:
    model = model32
    """The model is bidirectional: a pad key left unmasked would change every query."""
    ids = torch.randint(2, model.tokenizer.vocab_size, (1, 20))
    pad_a = torch.cat([ids, torch.full((1, 12), model.pad_id)], 1)
    pad_b = torch.cat([ids, torch.randint(2, model.tokenizer.vocab_size, (1, 12))], 1)
    lengths = torch.tensor([20])
    assert torch.equal(model.hidden(pad_a, lengths)[:, :20], model.hidden(pad_b, lengths)[:, :20])
    torch.testing.assert_close(model.hidden(pad_a, lengths)[:, :20], model.hidden(ids))


def test_requests_of_different_lengths_share_a_padded_pass_where_it_pays(model32) -> None:
    model = model32
    layouts = [_layout(model, p) for p in UNEVEN]
    assert len({lay.span_end + len(lay.suffix_ids) for lay in layouts}) == 3
    cfg = SamplerConfig(steps=4)
    batcher = StepBatcher(model, BatchConfig(pad=True), cost=lambda: SHARING_PAYS)
    try:
        got = _together(batcher, [Denoising(model, lay, cfg, i) for i, lay in enumerate(layouts)])
    finally:
        batcher.close()
    assert got == [_alone(model, lay, cfg, i) for i, lay in enumerate(layouts)]
    assert batcher.stats.padded > 0 and batcher.stats.passes < 3 * 4


def test_the_worker_counts_its_padded_passes_and_the_fills_that_ran_in_them(model) -> None:
    """`dlm/status` shows both (batchPadding at work); the fills that started together
    share every pass, padded, while a one-step request alone ahead of them is not counted."""
    batcher = StepBatcher(model, BatchConfig(pad=True), cost=lambda: SHARING_PAYS)
    far = 3600_000 / 8  # a step's ms: the target is an hour away, no step is cut
    try:
        _steps_with_target(batcher, [Denoising(model, _layout(model, p), SamplerConfig(
            steps=4, stop_when_settled=False), i) for i, p in enumerate(UNEVEN)], far)
    finally:
        batcher.close()
    assert batcher.stats.padded_fills == len(UNEVEN)
    assert batcher.stats.padded == 4 and batcher.stats.passes == 1 + 4


def _uneven_stats(model, config: BatchConfig | None, cost: StepCost) -> BatchStats:
    """The worker's counts after the UNEVEN requests ran together, 4 steps each."""
    batcher = StepBatcher(model, config, cost=lambda: cost)
    try:
        _together(batcher, [Denoising(model, _layout(model, p), SamplerConfig(steps=4), i)
                            for i, p in enumerate(UNEVEN)])
    finally:
        batcher.close()
    return batcher.stats


def test_requests_of_different_lengths_keep_apart_unless_padding_is_asked_for(model) -> None:
    """batchPadding is off by default: padded, a row's logits differ from its logits
    alone in the last bits, and a fill's tokens could depend on what it shared a pass
    with (a replica's fills differed from a local server's in CI)."""
    stats = _uneven_stats(model, None, SHARING_PAYS)
    assert stats.padded == 0 and stats.passes == 3 * 4


def test_requests_of_different_lengths_keep_apart_where_padding_costs_more(model) -> None:
    stats = _uneven_stats(model, BatchConfig(pad=True), PADDING_DOES_NOT_PAY)
    assert stats.padded == 0 and stats.passes == 3 * 4


def test_a_model_that_cannot_pad_keeps_lengths_apart(model) -> None:
    """A published checkpoint run with its own code has no padded forward (`padded_rows`);
    the worker still times their rounds for their latency targets."""
    batcher = StepBatcher(model, BatchConfig(pad=True), cost=lambda: SHARING_PAYS)
    batcher.model_pads = False
    far = Target(time.perf_counter() + 3600, 1.0)
    try:
        _together(batcher, [Denoising(model, _layout(model, p), SamplerConfig(steps=4), i)
                            for i, p in enumerate(UNEVEN)], far)
    finally:
        batcher.close()
    assert batcher.stats.padded == 0 and batcher.stats.passes == 3 * 4


@pytest.mark.parametrize("block_size", [None, 4])
def test_a_shortened_fill_ends_within_its_new_budget_with_every_position_written(
        model, block_size) -> None:
    state = Denoising(model, _layout(model, PREFIXES[0], n=16),
                      SamplerConfig(steps=12, block_size=block_size, stop_when_settled=False), 0)
    forward = model.logits
    for _ in range(2):
        state.advance(forward(state.inputs))
    blocks_left = len(state.plan) - state.block
    assert state.steps_left > blocks_left
    state.shorten(1)  # at least a step for each block left, the one under way included
    left = state.steps_left
    assert left == blocks_left
    while not state.done:
        state.advance(forward(state.inputs))
    assert state.steps == 2 + left
    assert model.mask_id not in state.result().span_ids.flatten().tolist()


def test_a_left_to_right_fill_is_never_cut(model) -> None:
    """It writes a token a step: cut to fit a shared round's deadline, its last step
    committed every position it had left at once, no longer left to right."""
    state = Denoising(model, _layout(model, PREFIXES[0], n=16),
                      SamplerConfig(steps=16, strategy="left-to-right", schedule="linear",
                                    stop_when_settled=False), 0)
    forward = model.logits
    for _ in range(2):
        state.advance(forward(state.inputs))
    left = state.steps_left
    state.shorten(1)
    assert (state.steps_left, state.cut) == (left, False)
    commits = []
    while not state.done:
        before = int((state.inputs == model.mask_id).sum())
        state.advance(forward(state.inputs))
        commits.append(before - int((state.inputs == model.mask_id).sum()))
    assert set(commits) == {1}


def _steps_with_target(batcher: StepBatcher, states: list[Denoising], step_ms: float) -> list:
    """Run the states at once, each with a target of 8 steps of `step_ms` from now, all
    admitted in one round (`_admitted_together`)."""
    return _admitted_together(batcher, states, [step_ms] * len(states), 8)


def _admitted_together(batcher: StepBatcher, states: list[Denoising],
                       step_ms: list[float | None], steps: int) -> list:
    """Run the states at once, each with a target of `steps` steps of its `step_ms` from
    now (none where None), all admitted in one round: a one-step request without a
    target holds the worker's first pass until they have queued.  The steps each took."""
    out: list = [None] * len(states)
    began = time.perf_counter()
    targets = [None if ms is None else Target(began + steps * ms / 1000, ms) for ms in step_ms]
    model, holding, queued = batcher.model, threading.Event(), threading.Event()
    real = model.hidden

    def held(ids: torch.Tensor, *lengths) -> torch.Tensor:
        holding.set()
        queued.wait(5)
        return real(ids, *lengths)
    model.hidden = held
    first = threading.Thread(target=batcher.run, args=(
        Denoising(model, states[0].layout, SamplerConfig(steps=1), 0),))
    first.start()
    holding.wait(5)

    def one(i: int) -> None:
        out[i] = batcher.run(states[i], target=targets[i]).steps
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(states))]
    try:
        for t in threads:
            t.start()
        while batcher.depth < 1 + len(states):
            time.sleep(0.01)
        queued.set()
        for t in [first, *threads]:
            t.join(timeout=60)
    finally:
        del model.hidden
    return out


def test_fills_with_a_target_are_cut_to_the_steps_the_rounds_they_share_afford(model) -> None:
    """Fills that started together were each timed against an empty worker: every one
    kept the steps of a fill alone and all overran their target."""
    layout = _layout(model, PREFIXES[0], n=16)
    length = layout.span_end + len(layout.suffix_ids)
    cost = StepCost(0.0, 100.0)  # a pass costs 100 ms a token: two rows, twice one
    batcher = StepBatcher(model, cost=lambda: cost)
    try:
        states = [Denoising(model, layout, SamplerConfig(steps=8), i) for i in range(2)]
        together = _steps_with_target(batcher, states, cost.step_ms(1, length))
        alone = _steps_with_target(batcher, [Denoising(model, layout, SamplerConfig(steps=8), 0)],
                                   cost.step_ms(1, length))
    finally:
        batcher.close()
    assert alone == [8]  # a fill alone is never touched
    assert together == [4, 4] or together == [3, 3], together  # a round lasts two steps


def test_a_round_s_time_counts_each_fill_s_sampler_beside_the_predicted_passes(model) -> None:
    """The cost model times forward passes only: fills whose sampler takes its own time
    each step (here 50 ms, the passes next to nothing) were never cut and ran 8 rounds
    of 100 ms for a 400 ms target.  Measured from their first step on, a round lasts
    100 ms, and each is cut to the 4 steps (fewer, as the clock ran) that fit."""
    layout = _layout(model, PREFIXES[0], n=16)
    batcher = StepBatcher(model, cost=lambda: StepCost(0.0, 0.0))
    states = [Denoising(model, layout, SamplerConfig(steps=8, stop_when_settled=False), i)
              for i in range(2)]
    for state in states:
        def slow(logits, advance=state.advance) -> None:
            time.sleep(0.05)
            advance(logits)
        state.advance = slow
    try:
        steps = _admitted_together(batcher, states, [50.0, 50.0], 8)
    finally:
        batcher.close()
    assert max(steps) <= 4, steps


class _Loaded(LoadFactor):
    """A load factor fixed at `value`, whatever the passes measure."""

    def __init__(self, value: float):
        super().__init__()
        self._value = value

    @property
    def value(self) -> float:
        return self._value

    def note(self, measured_ms: float, predicted_ms: float) -> None:
        pass


def test_fills_sharing_rounds_on_a_loaded_machine_are_cut_to_what_the_slower_rounds_afford(
        model) -> None:
    """Passes running twice as long as calibrated: the rounds the worker predicted fit the
    target took twice that (four fills with a 300 ms target took a median 135 ms a round
    against 65 ms predicted).  Two fills given 8 steps share rounds of two steps' time,
    twice that under the load: each keeps 2 of its 8 (4 on a quiet machine)."""
    layout = _layout(model, PREFIXES[0], n=16)
    cost = StepCost(0.0, 100.0)  # a pass costs 100 ms a token: two rows, twice one
    batcher = StepBatcher(model, cost=lambda: cost, load_factor=_Loaded(2.0))
    try:
        states = [Denoising(model, layout, SamplerConfig(steps=8), i) for i in range(2)]
        together = _steps_with_target(batcher, states,
                                      cost.step_ms(1, layout.span_end + len(layout.suffix_ids)))
    finally:
        batcher.close()
    assert together == [2, 2] or together == [1, 1], together


def _factor_after(model, cost: StepCost, target: bool, pass_s: float = 0.0,
                  sampler_s: float = 0.0) -> float:
    """The worker's load factor after one fill of 4 steps whose passes take `pass_s` more
    than they do and whose sampler takes `sampler_s` a step, with a target or without."""
    batcher = StepBatcher(model, cost=lambda: cost)
    real = model.hidden

    def slow(ids: torch.Tensor, *lengths) -> torch.Tensor:
        time.sleep(pass_s)
        return real(ids, *lengths)
    model.hidden = slow
    state = Denoising(model, _layout(model, PREFIXES[0]),
                      SamplerConfig(steps=4, stop_when_settled=False), 0)

    def slow_advance(logits, advance=state.advance) -> None:
        time.sleep(sampler_s)
        advance(logits)
    state.advance = slow_advance
    far = Target(time.perf_counter() + 3600, 1.0) if target else None
    try:
        assert batcher.run(state, target=far).steps == 4
    finally:
        del model.hidden
        batcher.close()
    return batcher.load_factor.value


def test_the_worker_times_a_target_s_passes_against_the_cost_model(model) -> None:
    """Passes of 40 ms and more where the cost model says 20 ms: a factor of 2 or more."""
    assert _factor_after(model, StepCost(20.0, 0.0), True, pass_s=0.04) >= 2.0


def test_passes_as_fast_as_predicted_leave_the_factor_at_one(model) -> None:
    assert _factor_after(model, StepCost(1000.0, 0.0), True) == 1.0


def test_the_sampler_s_time_is_not_counted_as_the_pass_s(model) -> None:
    """The cost model predicts passes; the sampler's own time is added to a round apart
    (`_note_sampler`): counted twice, a slow sampler would have read as a loaded machine."""
    assert _factor_after(model, StepCost(20.0, 0.0), True, sampler_s=0.05) == 1.0


def test_the_passes_of_fills_without_a_target_are_not_timed(model) -> None:
    """On a GPU timing a pass means waiting for it: fills without a target need not."""
    assert _factor_after(model, StepCost(20.0, 0.0), False, pass_s=0.04) == 1.0


def _cut_then_alone(model, steps_afforded: int) -> int:
    """The steps of a fill given 8 whose target affords `steps_afforded` of its steps
    alone, which shares its first round (the time of two steps) with a one-step fill.
    The cost model's steps last seconds, the real ones milliseconds: the deadline is
    as far at the second round as at the first, less a hair."""
    layout = _layout(model, PREFIXES[0], n=16)
    cost = StepCost(0.0, 100.0)  # a pass costs 100 ms a token: two rows, twice one
    batcher = StepBatcher(model, cost=lambda: cost)
    step_ms = cost.step_ms(1, layout.span_end + len(layout.suffix_ids))
    try:
        targeted, brief = _admitted_together(
            batcher, [Denoising(model, layout, SamplerConfig(steps=8), 0),
                      Denoising(model, layout, SamplerConfig(steps=1), 1)],
            [step_ms, None], steps_afforded)
    finally:
        batcher.close()
    assert brief == 1
    return targeted


def test_a_cut_fill_alone_again_regains_its_steps_but_never_more_than_it_was_given(
        model) -> None:
    """Cut to 4 for the round it shared, it used to end with those 4: alone again after
    one step, it could afford 9 in all, and takes the 8 it was given."""
    assert _cut_then_alone(model, 10) == 8


def test_a_cut_fill_alone_again_regains_only_the_steps_its_target_still_affords(
        model) -> None:
    """Cut to 2 for the round it shared (a hair less than 6 steps' time, rounds of two),
    it used to end with those 2: alone again after one step, it can afford 5 more."""
    assert _cut_then_alone(model, 6) == 6


def test_cancellation_frees_the_slot_within_one_step(model) -> None:
    batcher = StepBatcher(model, BatchConfig(max_rows=4))
    steps_after_cancel = []
    cancelled = threading.Event()

    def on_step(step, steps, span):
        if cancelled.is_set():
            steps_after_cancel.append(step)
        if step == 2:
            cancelled.set()
    state = Denoising(model, _layout(model, PREFIXES[2], 16), SamplerConfig(steps=16), 0,
                      on_step)
    try:
        with pytest.raises(Cancelled):
            batcher.run(state, should_stop=cancelled.is_set)
        assert steps_after_cancel == []  # stopped before the next pass
        other = batcher.run(Denoising(model, _layout(model, PREFIXES[0]), SamplerConfig(steps=2),
                                      0))
        assert other.steps == 2  # the worker goes on serving
    finally:
        batcher.close()


def test_a_request_counts_in_the_queue_depth_from_its_first_pass(model) -> None:
    """`dlm/status` and the service's metrics read `depth`: a request in its first pass
    was counted nowhere (it had left the waiting list and was counted as running only
    from its second pass), so one fill of one pass always showed a depth of 0."""
    batcher = StepBatcher(model)
    real, depths = model.hidden, []

    def counted(ids: torch.Tensor) -> torch.Tensor:
        depths.append(batcher.depth)
        return real(ids)
    model.hidden = counted
    try:
        batcher.run(Denoising(model, _layout(model, PREFIXES[0]), SamplerConfig(steps=2), 0))
    finally:
        del model.hidden
        batcher.close()
    assert depths == [1, 1]


def test_the_load_is_the_rows_and_length_of_each_request_held(model) -> None:
    """What a latency target's step budget is timed against (costs.shared_step_ms)."""
    batcher = StepBatcher(model)
    real, loads = model.hidden, []

    def seen(ids: torch.Tensor) -> torch.Tensor:
        loads.append(batcher.load())
        return real(ids)
    model.hidden = seen
    state = Denoising(model, _layout(model, PREFIXES[0]), SamplerConfig(
        steps=1, temperatures=(0.0, 0.5)), 0)
    try:
        batcher.run(state)
    finally:
        del model.hidden
        batcher.close()
    assert loads == [[(2, state.inputs.shape[1])]]


def test_a_failing_request_fails_alone(model) -> None:
    batcher = StepBatcher(model)

    def broken(ids):
        raise RuntimeError("boom")
    try:
        bad = Denoising(model, _layout(model, PREFIXES[0]), SamplerConfig(steps=2), 0,
                        on_step=lambda *a: broken(None))
        with pytest.raises(RuntimeError, match="boom"):
            batcher.run(bad)
        good = batcher.run(Denoising(model, _layout(model, PREFIXES[0]), SamplerConfig(steps=2),
                                     0))
        assert good.steps == 2
    finally:
        batcher.close()


INTERRUPTED_MID_FILL = """
import os, signal, sys, threading
from dlm_lsp.models import load_model
from dlm_lsp.sampler import Denoising, SamplerConfig
from dlm_lsp.serving import StepBatcher
from dlm_lsp.span import build_layout, head_positions
model = load_model(sys.argv[1], "cpu")
layout = build_layout(model.tokenizer, "def f(x):\\n" * 40, "\\n", 600, 400,
                      max_length=model.max_length)
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
StepBatcher(model).run(Denoising(model, layout, SamplerConfig(steps=600), 0))
"""


def test_a_process_interrupted_mid_fill_exits_instead_of_aborting(model_dir):
    """Ctrl-C during a benchmark's fill left the worker inside torch as the interpreter
    shut down: torch's C++ runtime aborted the process (SIGABRT, 'terminate called
    without an active exception') rather than letting it exit with its status."""
    repo = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", INTERRUPTED_MID_FILL, str(model_dir)],
                          cwd=repo, env={**os.environ, "PYTHONPATH": str(repo)},
                          capture_output=True, text=True, timeout=120)
    assert "KeyboardInterrupt" in done.stderr, done.stderr
    assert "terminate called" not in done.stderr
    assert done.returncode in (1, -signal.SIGINT), done.returncode
