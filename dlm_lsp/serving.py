"""Batching across requests: one worker owns the model and steps every running fill.

Diffusion fills are many small forward passes.  When several requests are in
flight (several editors on a team server, or candidates of one editor), running
them one after another leaves the device idle between tiny passes; running
them together costs little more than one.  The worker holds a set of running
`Denoising` states.  Before each forward pass it admits waiting requests and
drops cancelled ones (the slot is free before the next pass: cancellation costs
at most the step in flight), groups the states by sequence length so shapes
stay few and no padding can change a result, concatenates each group's rows
into one batch, and hands each state its own rows of the logits.  Requests
with different step budgets simply leave the batch when their own loop ends.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from dlm_lsp.models.interface import DiffusionModel
from dlm_lsp.sampler import Cancelled, Denoised, Denoising


class WorkerClosed(RuntimeError):
    """The worker had ended (stopped, or retired with nothing left to run) when a request
    came: it never took the request, whose state is as it was, so the caller may run it
    alone (a fill handed the worker just before it ended: see Engine.batcher)."""


@dataclass
class BatchConfig:
    """How the worker groups requests."""

    max_rows: int = 16  # rows (candidates of all requests) per forward pass


@dataclass
class _Job:
    state: Denoising
    should_stop: Callable[[], bool] | None
    done: threading.Event = field(default_factory=threading.Event)
    result: Denoised | None = None
    error: BaseException | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, sequence length): what it puts in a forward pass."""
        return self.state.rows, self.state.inputs.shape[1]


def passes_of(shapes: list[tuple[int, int]], max_rows: int) -> list[list[int]]:
    """How the worker packs requests of these (rows, sequence length) into forward passes:
    the indices of each pass's requests, one sequence length a pass (no padding), at
    most `max_rows` rows (a request larger than that alone), in their order.  The worker
    steps by it (`StepBatcher._groups`), and a latency target's budget is timed by it
    (`costs.shared_step_ms`)."""
    by_length: dict[int, list[int]] = defaultdict(list)
    for i, (_, length) in enumerate(shapes):
        by_length[length].append(i)
    passes = []
    for same in by_length.values():
        group: list[int] = []
        rows = 0
        for i in same:
            if group and rows + shapes[i][0] > max_rows:
                passes.append(group)
                group, rows = [], 0
            group.append(i)
            rows += shapes[i][0]
        passes.append(group)
    return passes


@dataclass
class BatchStats:
    """What the worker has done: passes, rows per pass, requests served."""

    passes: int = 0
    rows: int = 0
    requests: int = 0
    busy_s: float = 0.0

    @property
    def occupancy(self) -> float:
        """Mean rows per forward pass."""
        return self.rows / self.passes if self.passes else 0.0


_LIVE: weakref.WeakSet[StepBatcher] = weakref.WeakSet()


@atexit.register
def _close_live_batchers() -> None:
    """Let every worker finish its forward pass before the interpreter abandons daemon
    threads: a process leaving while one was inside torch (Ctrl-C during a benchmark's
    fill) was aborted by torch's C++ runtime, 'terminate called without an active
    exception', SIGABRT, instead of exiting with its status."""
    for batcher in list(_LIVE):
        batcher.close()


class StepBatcher:
    """The model's one worker thread; `run` may be called from any number of threads."""

    def __init__(self, model: DiffusionModel, config: BatchConfig | None = None):
        self.model, self.config = model, config or BatchConfig()
        self.stats = BatchStats()
        self._waiting: deque[_Job] = deque()
        self._wake = threading.Condition()
        self._closed = self._retiring = False
        self._running: list[tuple[int, int]] = []  # (rows, length) of each running job
        self._thread = threading.Thread(target=self._work, name="dlm-batcher", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    def run(self, state: Denoising, should_stop: Callable[[], bool] | None = None) -> Denoised:
        """Step `state` to the end among the other running requests; raise Cancelled
        if `should_stop` says so between two steps, WorkerClosed if the worker has ended."""
        job = _Job(state, should_stop)
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
            self._running = [job.shape for job in running]
            for group in self._groups(running):
                self._step(group)

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

    def _groups(self, jobs: list[_Job]) -> list[list[_Job]]:
        """Jobs of the same sequence length, in batches of at most max_rows rows."""
        return [[jobs[i] for i in group]
                for group in passes_of([job.shape for job in jobs], self.config.max_rows)]

    def _step(self, group: list[_Job]) -> None:
        """One forward pass for a group, each job advancing on its own rows."""
        began = time.perf_counter()
        hidden, head = getattr(self.model, "hidden", None), getattr(self.model, "head", None)
        spans_only = hidden is not None and head is not None
        try:
            inputs = torch.cat([job.state.inputs for job in group])
            out = hidden(inputs) if spans_only else self.model.logits(inputs)
        except BaseException as exc:  # noqa: BLE001 -- e.g. out of memory: fail this group
            for job in group:
                job.error = exc
                job.done.set()
            return
        self.stats.passes += 1
        self.stats.rows += out.shape[0]
        at = 0
        for job in group:
            rows, state = job.state.rows, job.state
            try:
                # hidden states: the output head runs on this job's span alone
                mine = head(out[at:at + rows, state.lo:state.hi]) if spans_only else (
                    out[at:at + rows])
                job.state.advance(mine)
            except BaseException as exc:  # noqa: BLE001
                job.error = exc
                job.done.set()
            at += rows
        self.stats.busy_s += time.perf_counter() - began
