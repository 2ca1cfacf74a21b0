"""Batching across requests: one worker owns the model and steps every running fill.

Diffusion fills are many small forward passes.  When several requests are in
flight (several editors on a team server, or candidates of one editor), running
them one after another leaves the device idle between tiny passes; running
them together costs little more than one.  The worker holds a set of running
`Denoising` states.  Before each round of forward passes it admits waiting
requests and drops cancelled ones (the slot is free before the next pass:
cancellation costs at most the step in flight), packs the states into passes
(`costs.passes_of`: one sequence length a pass, and, for a model that masks a
padded row's pad (`padded_rows`), shorter rows padded into a longer row's pass
where the cost model says one pass is faster than two), concatenates each pass's
rows into one batch, and hands each state its own rows of the logits.  Requests
with different step budgets simply leave the batch when their own loop ends.

A fill with a latency target (`Target`) was given the steps that fit it beside
what the worker held as it started; fills that start together each saw the
others missing.  So the worker times every round it runs: a fill whose round
now lasts longer than its steps can afford is cut (`Denoising.shorten`) to the
steps that still fit, and given steps back (`Denoising.regain`) when its rounds
get cheaper again as the others end, never more than it was given.  A fill alone
from start to end is never touched.

The passes of a fill with a target are timed too (the time of the pass, its
samplers' time left out) against the cost model's prediction, into the engine's
`LoadFactor`: on a loaded machine passes run slower than calibrated, and both the
engine's budgets and this retiming scale the predicted passes by that factor.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import torch

from dlm_lsp.costs import StepCost, passes_of, round_ms, steps_within
from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.sampler import Cancelled, Denoised, Denoising
from dlm_lsp.slowdown import LoadFactor


class WorkerClosed(RuntimeError):
    """The worker had ended (stopped, or retired with nothing left to run) when a request
    came: it never took the request, whose state is as it was, so the caller may run it
    alone (a fill handed the worker just before it ended: see Engine.batcher)."""


@dataclass
class BatchConfig:
    """How the worker groups requests."""

    max_rows: int = 16  # rows (candidates of all requests) per forward pass
    # Rows of different lengths may share a pass, padded (setting batchPadding).  Off by
    # default: a padded row's logits differ from its logits alone in the last bits, so a
    # fill's tokens could depend on what it shared a pass with (a test of the remote
    # service, whose replicas' fills must equal a local server's, failed on it in CI).
    pad: bool = False


@dataclass
class Target:
    """A fill's latency target as the worker keeps it: the time its passes should end by
    and the predicted time of one of its steps, which the worker raises to the time of
    the rounds it shares (the fill's repairs are afforded by it: `InfillRun.affords`)."""

    deadline: float  # time.perf_counter() seconds
    step_ms: float
    # the cost model's own step, before the load factor: a fill run alone (without the
    # worker) times its passes against it (`InfillRun.denoise`)
    predicted_ms: float | None = None


@dataclass
class _Job:
    state: Denoising
    should_stop: Callable[[], bool] | None
    target: Target | None = None
    done: threading.Event = field(default_factory=threading.Event)
    padded: bool = False  # it has run in a padded pass (counted in `BatchStats.padded_fills`)
    passes_ms: float | None = None  # the predicted passes of the round it was last timed in
    sampler_ms: float | None = None  # its sampler's own time a step, as measured (see _step)
    result: Denoised | None = None
    error: BaseException | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, sequence length): what it puts in a forward pass."""
        return self.state.rows, self.state.inputs.shape[1]


@dataclass
class BatchStats:
    """What the worker has done: passes, rows per pass, requests served."""

    passes: int = 0
    rows: int = 0
    requests: int = 0
    padded: int = 0  # passes whose rows were of different lengths, padded to the longest
    padded_fills: int = 0  # requests that ran in at least one of those passes
    busy_s: float = 0.0

    @property
    def occupancy(self) -> float:
        """Mean rows per forward pass."""
        return self.rows / self.passes if self.passes else 0.0

    def count_passes(self, passes: int, rows_each: int) -> None:
        """Count `passes` forward passes of `rows_each` rows each."""
        self.passes += passes
        self.rows += passes * rows_each

    def __add__(self, other: BatchStats) -> BatchStats:
        """Both counts together: the passes of several workers, or those run alone too."""
        return BatchStats(*(getattr(self, f.name) + getattr(other, f.name)
                            for f in fields(BatchStats)))


_LIVE: weakref.WeakSet[StepBatcher] = weakref.WeakSet()


@atexit.register
def _close_live_batchers() -> None:
    """Let every worker finish its forward pass before the interpreter abandons daemon
    threads: a process leaving while one was inside torch (Ctrl-C during a benchmark's
    fill) was aborted by torch's C++ runtime, 'terminate called without an active
    exception', SIGABRT, instead of exiting with its status."""
    for batcher in list(_LIVE):
        batcher.close()


def padded_rows(inputs: list[torch.Tensor], pad_id: int
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The rows of several (rows, T) inputs as one pass, and, where their lengths differ,
    each row's length (None where they do not): shorter rows are padded on the right, so
    each keeps its positions (`hidden` with lengths masks the pad)."""
    lengths = [x.shape[1] for x in inputs]
    longest = max(lengths)
    if min(lengths) == longest:
        return torch.cat(inputs), None
    rows = [torch.nn.functional.pad(x, (0, longest - n), value=pad_id)
            for x, n in zip(inputs, lengths, strict=True)]
    per_row = [n for x, n in zip(inputs, lengths, strict=True) for _ in range(x.shape[0])]
    return torch.cat(rows), torch.tensor(per_row)


class StepBatcher:
    """The model's one worker thread; `run` may be called from any number of threads."""

    def __init__(self, model: DiffusionModel, config: BatchConfig | None = None,
                 cost: Callable[[], StepCost] | None = None,
                 load_factor: LoadFactor | None = None):
        """`cost` gives the model's step cost (calibrated on first call): the worker asks
        for it only to pack rows of different lengths together or to time a round for a
        fill's latency target.  Without it neither happens.  The first round that needs
        it waits for the calibration (16 passes of at most 256 tokens, once per model:
        well under a second for the shipped model on a CPU, about a fill's worth for a
        large model on a CPU).  `load_factor` is where the passes of fills with a target
        are timed against the cost (and what scales the rounds' predicted time); without
        it, the worker keeps its own, which starts at 1."""
        self.model, self.config, self._cost = model, config or BatchConfig(), cost
        self.load_factor = load_factor or LoadFactor()
        self._known_cost: StepCost | None = None  # `_cost`'s answer, asked once
        # the model can mask a padded row's pad (see `pads`)
        self.model_pads = bool(getattr(model, "padded_rows", False))
        self.stats = BatchStats()
        self._waiting: deque[_Job] = deque()
        self._wake = threading.Condition()
        self._closed = self._retiring = False
        self._running: list[tuple[int, int]] = []  # (rows, length) of each running job
        self._sampler_ms = 0.0  # a sampler step's time, the worker's latest (see _note_sampler)
        self._thread = threading.Thread(target=self._work, name="dlm-batcher", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    @property
    def pads(self) -> bool:
        """Whether rows of different lengths may share a pass: the settings allow it
        (`BatchConfig.pad`, read at each round) and the model masks a padded row's pad."""
        return self.config.pad and self.model_pads

    def run(self, state: Denoising, should_stop: Callable[[], bool] | None = None,
            target: Target | None = None) -> Denoised:
        """Step `state` to the end among the other running requests; raise Cancelled
        if `should_stop` says so between two steps, WorkerClosed if the worker has ended.
        With a `target`, its steps are cut where the rounds it shares would overrun it."""
        job = _Job(state, should_stop, target)
        with self._wake:
            if self._closed:
                raise WorkerClosed("the batching worker is closed")
            self._waiting.append(job)
            self._wake.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        assert job.result is not None
        return job.result

    def retire(self) -> None:
        """Take no more requests once those waiting or running are done, then end: the
        worker of a model that new settings replaced, whose fills end on it (each began
        on that model; cancelling them told their clients "fill stopped" with no reason)."""
        with self._wake:
            self._retiring = True
            self._wake.notify()

    def stop(self) -> None:
        """Tell the worker to stop: it cancels its requests and ends once the forward pass
        in progress is done, without anyone waiting for that (a pass can take seconds)."""
        with self._wake:
            self._closed = True
            self._wake.notify()

    def close(self) -> None:
        """Stop the worker and wait (at most 5 s) for it to end."""
        self.stop()
        self._thread.join(timeout=5)

    @property
    def ended(self) -> bool:
        """Whether its thread has ended: its counts (`stats`) will not change again."""
        return not self._thread.is_alive()

    @property
    def depth(self) -> int:
        """Requests waiting or running."""
        return len(self._waiting) + len(self._running)

    def load(self) -> list[tuple[int, int]]:
        """(rows, sequence length) of each request waiting or running: what the coming
        passes hold besides a request that joins now (see `costs.shared_step_ms`)."""
        with self._wake:
            waiting = [job.shape for job in self._waiting]
        return waiting + self._running

    def _work(self) -> None:
        running: list[_Job] = []
        while True:
            with self._wake:
                while (not self._waiting and not running and not self._closed
                       and not self._retiring):
                    self._wake.wait()
                if self._retiring and not self._waiting and not running:
                    self._closed = True  # retired: its last request is answered
                if self._closed:
                    for job in running + list(self._waiting):
                        job.error = Cancelled()
                        job.done.set()
                    return
                running.extend(self._waiting)
                self._waiting.clear()
            # finished jobs are answered, cancelled ones dropped, before the next pass
            running = [job for job in running if self._keep(job)]
            # counted from here, so that a request is in `depth` from its first pass on
            self._running = shapes = [job.shape for job in running]
            cost = self._round_cost(running)
            self._retime(running, shapes, cost)
            for group in self._groups(running, cost):
                self._step(group, cost)

    def _round_cost(self, running: list[_Job]) -> StepCost | None:
        """The model's step cost where this round needs it: to pack rows of different
        lengths (a model that pads them), or for fills with a target (their passes are
        timed against it, and beside others, or cut and alone again, retimed).  Asked of
        `_cost` once: the engine's calibrates a model it no longer serves at each call."""
        if self._cost is None or not running:
            return None
        mixed = len(running) > 1 and self.pads and len({job.shape[1] for job in running}) > 1
        if not mixed and not any(job.target is not None for job in running):
            return None
        if self._known_cost is None:
            try:
                self._known_cost = self._cost()
            except Exception:  # noqa: BLE001 -- timing failed: pack by length, keep budgets
                self._cost = None
                return None
        return self._known_cost

    def _retime(self, running: list[_Job], shapes: list[tuple[int, int]],
                cost: StepCost | None) -> None:
        """Fit the steps of each fill with a target to its deadline at this round's
        predicted time (every request takes one step a round): cut where the round is
        shared, and where the round got cheaper than the one the fill was last timed in
        (fills it shared with ended), give a fill cut before the steps it can afford
        again, up to those it was given.  Only a change of company gives steps back:
        a round that merely ran faster than predicted does not (each round would then
        add a step).  A fill alone from start to end is never touched.

        The predicted passes are scaled by the load factor (passes measured slower than
        calibrated); whether the round got cheaper compares them unscaled: a lighter load
        is not a change of company (and the engine's budget already had the factor)."""
        shared = len(running) > 1
        if cost is None or not (shared or any(job.state.cut for job in running)):
            return
        passes = round_ms(cost, shapes, self.config.max_rows, self.pads)
        # the cost model times forward passes; each fill's step also runs its sampler
        round_time = passes * self.load_factor.value + sum(
            self._sampler_ms if job.sampler_ms is None else job.sampler_ms for job in running)
        now = time.perf_counter()
        for job in running:
            if job.target is None:
                continue
            job.target.step_ms = max(job.target.step_ms, round_time)
            left = (job.target.deadline - now) * 1000
            fits = steps_within(left, round_time, job.state.asked)
            if shared:
                job.state.shorten(fits)
            if job.passes_ms is not None and passes < job.passes_ms:
                job.state.regain(fits)
            job.passes_ms = passes

    def _keep(self, job: _Job) -> bool:
        """Whether a job stays in the batch; finished and cancelled ones are answered."""
        if job.done.is_set():
            return False
        try:
            if job.state.done:
                job.result = job.state.result()
                self.stats.requests += 1
            elif job.should_stop is not None and job.should_stop():
                job.error = Cancelled()
            else:
                return True
        except BaseException as exc:  # noqa: BLE001 -- a failing check fails its request only
            job.error = exc
        job.done.set()
        return False

    def _groups(self, jobs: list[_Job], cost: StepCost | None = None) -> list[list[_Job]]:
        """The jobs of each forward pass, at most max_rows rows: those of one sequence
        length, and with a `cost` (a model that pads) shorter ones where that pays."""
        return [[jobs[i] for i in group]
                for group in passes_of([job.shape for job in jobs], self.config.max_rows,
                                       cost if self.pads else None)]

    def _inputs(self, group: list[_Job]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The pass's rows, and, where their lengths differ, each row's length."""
        return padded_rows([job.state.inputs for job in group], self.model.pad_id)

    def _note_sampler(self, job: _Job, ms: float) -> None:
        """Keep a running mean of the time a fill's sampler takes for one step (choosing,
        committing, its checks: a few ms on a CPU), which `_retime` adds to the cost
        model's passes: without it, four fills with a 300 ms target sharing their rounds
        ended at about 323 ms.  A fill not measured yet (or without a target, whose steps
        are not timed: on a GPU timing means waiting for the pass) counts the worker's
        latest."""
        job.sampler_ms = ms if job.sampler_ms is None else (job.sampler_ms + ms) / 2
        self._sampler_ms = job.sampler_ms

    def _count_padded(self, group: list[_Job]) -> None:
        """Count a padded pass and the requests in it not counted before (`dlm/status`
        shows both: how often batchPadding shared a pass, and how many fills it reached)."""
        self.stats.padded += 1
        for job in group:
            if not job.padded:
                job.padded = True
                self.stats.padded_fills += 1

    def _step(self, group: list[_Job], cost: StepCost | None = None) -> None:
        """One forward pass for a group, each job advancing on its own rows.  With a `cost`
        and a fill with a target among them, the pass (without the samplers' own steps) is
        timed against the cost's prediction, into `load_factor`."""
        # the pass as the cost model predicts it: all its rows, at its longest length
        predicted = None if cost is None or all(job.target is None for job in group) else (
            cost.step_ms(sum(job.state.rows for job in group), max(job.shape[1] for job in group)))
        sampling = 0.0  # seconds of the samplers' own steps, not the pass's
        began = time.perf_counter()
        hidden, head = getattr(self.model, "hidden", None), getattr(self.model, "head", None)
        spans_only = hidden is not None and head is not None
        try:
            inputs, lengths = self._inputs(group)
            if lengths is not None:
                out = hidden(inputs, lengths)
                self._count_padded(group)
            else:
                out = hidden(inputs) if spans_only else self.model.logits(inputs)
        except BaseException as exc:  # noqa: BLE001 -- e.g. out of memory: fail this group
            for job in group:
                job.error = exc
                job.done.set()
            return
        self.stats.count_passes(1, out.shape[0])
        at = 0
        for job in group:
            rows, state = job.state.rows, job.state
            try:
                # hidden states: the output head runs on this job's span alone
                mine = head(out[at:at + rows, state.lo:state.hi]) if spans_only else (
                    out[at:at + rows])
                # only a target's rounds are timed: where the pass is, its kernels end here,
                # not in the sampler's
                if predicted is not None and mine.is_cuda:
                    torch.cuda.synchronize(mine.device)
                advancing = time.perf_counter()
                job.state.advance(mine)
                if predicted is not None:
                    sampled = time.perf_counter() - advancing
                    sampling += sampled
                    if job.target is not None:
                        self._note_sampler(job, sampled * 1000)
            except BaseException as exc:  # noqa: BLE001
                job.error = exc
                job.done.set()
            at += rows
        took = time.perf_counter() - began
        self.stats.busy_s += took
        if predicted is not None:
            self.load_factor.note((took - sampling) * 1000, predicted)
