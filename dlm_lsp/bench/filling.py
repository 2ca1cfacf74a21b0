"""Fill benchmark tasks with the engine, the way every benchmark here does it.

One task becomes one `dlm/infill`-shaped request: the document is prefix +
suffix with the cursor between them, exactly what an editor would send.  The
span length is either the *oracle* (the canonical middle's token count, as
infilling papers report: it isolates the sampler from the length guess) or
left to the server's own length policy (what a user gets).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlm_lsp.bench.humaneval import Task
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest

LENGTHS = ("oracle", "policy")


@dataclass(frozen=True)
class FillSettings:
    """How each task is filled; None means the server's default."""

    strategy: str | None = None
    steps: int | None = None  # None: the server's per-kind budget
    seed: int = 0
    length: str = "oracle"  # one of LENGTHS
    temperature: float = 0.0  # greedy, so a run is reproducible
    repair: bool = True  # the server's syntax repair and left-to-right fallback; off: one pass


# The options of `bench humaneval` and `bench heldout` that set what a fill asks for, by
# the setting they replace (snake_case): what `--settings` is told to give instead
# (`pass_at_1.engine_settings`).  `--length policy` is what makes fills read the length
# settings; `--no-repair` only turns repair and the fallback off, so it sets no value a
# refused `repairRounds` or `fallback` could ask for.
FILL_FLAGS = {"steps": "--steps", "strategy": "--strategy", "seed": "--seed",
              "length": "--length policy"}


@dataclass(frozen=True)
class Fill:
    """The engine's best candidate for one task, and what it cost."""

    text: str
    valid: bool | None  # tree-sitter's verdict in place; None when unchecked
    steps: int  # forward passes, repairs and fallback included
    ms: float
    path: str = "diffusion"  # what produced it: diffusion, repair or left-to-right


def bench_engine(model: str = "default", device: str = "auto", **settings) -> Engine:
    """An engine for benchmarks: every request computed, spans up to 512 tokens.

    The server answers a repeated request from its recent fills; a benchmark
    that met one (the same task in two kinds, the same document twice) would
    time a cache, so reuse is off.  Oracle spans of multi-line tasks can be
    longer than the server's default cap.
    """
    settings = {"max_span_tokens": 512, "reuse_fills": False, **settings}
    return Engine(ServerConfig(model=model, device=device, **settings))


def oracle_length(engine: Engine, task: Task) -> int:
    """The canonical middle's token count: the span length papers report with."""
    return max(1, len(engine.model.tokenizer.encode(task.middle)))


def fill_options(settings: FillSettings, length: int | None = None,
                 kind: str | None = None) -> InfillOptions:
    """The request options of a fill made with `settings` (`length` and `kind`: the
    oracle's, None for the server's policy); also what a benchmark reads, before the
    model loads, to refuse `--settings` that these options would replace
    (`pass_at_1.set_by_requests`).  An oracle length is the fill's exact length
    (`exact_length`: no pad ends it sooner), as the papers that report the oracle
    length fill exactly that many tokens."""
    return InfillOptions(length=length, kind=kind, steps=settings.steps,
                         exact_length=None if length is None else True,
                         strategy=settings.strategy,
                         seed=settings.seed, temperature=settings.temperature,
                         repair_rounds=None if settings.repair else 0,
                         fallback=None if settings.repair else False)


def planned_options(settings: FillSettings) -> InfillOptions:
    """The options every fill made with `settings` is asked with, as far as they are known
    before the model loads: what a benchmark reads to refuse `--settings` that they
    replace or that none of its fills would read (`pass_at_1.engine_settings`).  With the
    oracle length each task has its own length, counted by the model's tokenizer, and
    its own kind (`oracle_kind`): 1 and single-line stand for them here, as any length
    replaces the length settings and no such kind is a rewrite."""
    if settings.length != "oracle":
        return fill_options(settings)
    return fill_options(settings, 1, "single-line")


def oracle_kind(task: Task) -> str:
    """The kind of the canonical middle: one line or several."""
    return "multi-line" if "\n" in task.middle.rstrip("\n") else "single-line"


def fill_task(engine: Engine, task: Task, settings: FillSettings) -> Fill:
    """Ask the engine to fill the gap between the task's prefix and suffix."""
    if settings.length not in LENGTHS:
        raise ValueError(f"unknown length {settings.length!r}; choose from {', '.join(LENGTHS)}")
    at = len(task.prefix)
    length = oracle_length(engine, task) if settings.length == "oracle" else None
    # with the oracle, the kind of the answer too (one line or several); else the policy's
    kind = oracle_kind(task) if settings.length == "oracle" else None
    result = engine.infill(InfillRequest(task.prefix + task.suffix, at, at, "python",
                                         options=fill_options(settings, length, kind)))
    best = result.candidates[0]
    return Fill(best.text, best.valid, result.steps, result.ms, result.path)


