"""`dlm-lsp bench humaneval`: execution-based pass@1 on HumanEval-Infilling.

Each task's gap is filled once (greedy, fixed seed, so one sample is pass@1),
and the program prefix + fill + suffix + the task's tests + `check(entry_point)`
runs in the sandbox (`sandbox.py`); the task passes when the tests run to
the end.  Exact match is reported beside it: a fill can pass without being
the canonical line, and fail with a difference the tests notice.

Two harness checks need no model and bound every model's number:
`canonical` fills each gap with the canonical middle, so it must pass
(at least SELF_CHECK_BAR percent, else the command fails: the harness, not the
model, is broken); `empty` fills nothing, the floor a model has to beat
(some removed lines are not needed by the tests).

Fills and programs take turns, a chunk of tasks at a time (`run_benchmark`), so
progress on stderr can say how many passed, and a run stopped by Ctrl-C or
SIGTERM reports the tasks whose programs ran, marked partial (`progress.py`).

A stored report is a baseline: with `--baseline FILE --margin X` the command
exits non-zero when pass@1 fell by more than X percentage points.

The exit status: 1 when a bar fails (the self-check's, the baseline's), else 0;
128 + N when a signal stopped the run (`progress.py`), and then no bar is
checked on the part of the tasks that ran.  A signal that comes once every task
has run, while the report files are written, waits for them to be whole; the
report being complete, its bars are then checked as in a whole run, and a failed
one exits 1 rather than 128 + N: a CI job that reads 130 or 143 as "cancelled"
must not miss a regression that was measured in full.

`--baseline-model smollm2` also fills the same tasks with an autoregressive
model a user could pick instead (`autoregressive.py`: prefix only, healed
boundary, greedy), on the same machine, and reports it beside the model.  A
stop while it loads or fills keeps the model's finished report; the baseline
model's row is the partial one (`run_beside`).  The model's report being
complete, its bars are checked as in a whole run: one that fails exits 1 (the
stop does not hide a regression), else the stop's 128 + N.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace

from dlm_lsp.bench import autoregressive
from dlm_lsp.bench.autoregressive import BASELINES, load_baseline
from dlm_lsp.bench.filling import (
    FILL_FLAGS,
    Fill,
    FillSettings,
    bench_engine,
    fill_task,
    planned_options,
)
from dlm_lsp.bench.grids import LEFT_TO_RIGHT
from dlm_lsp.bench.humaneval import ALIASES, Task, load_tasks
from dlm_lsp.bench.machine import code_label, describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import StoppedAfterWriting, writing_reports
from dlm_lsp.bench.progress import Partial, Progress, Stoppable, Stopped
from dlm_lsp.bench.sandbox import (
    ISOLATION_LEVELS,
    NONE,
    REASONS,
    SANDBOX,
    Outcome,
    SandboxConfig,
    checked_config,
    fallback_reason,
    landlock_note,
    pids_cgroup_note,
    report_isolation_text,
    run_programs,
    seccomp_note,
)
from dlm_lsp.bench.scoring import edit_similarity, exact_match
from dlm_lsp.config import (
    SERVER_ONLY,
    InfillOptions,
    ServerConfig,
    SettingsRefused,
    camel,
    setting,
    settings_option,
    snake,
)
from dlm_lsp.held_signals import signal_name
from dlm_lsp.policy import BUDGET_SETTINGS

FILLS = ("model", "canonical", "empty", *BASELINES)  # a baseline: its autoregressive model
SELF_CHECK_BAR = 99.0  # percent of canonical fills that must pass for the harness to be trusted
FAILURES_LISTED = 10
# Fills and their programs take turns: a chunk's programs run once it has this many fills,
# or once its fills took this long (a slow model's progress shows up, and a stop loses
# at most that much filling), workers side by side.
CHUNK_TASKS = 32
CHUNK_FILL_S = 5.0


@dataclass
class BenchConfig:
    """One run of the benchmark."""

    split: str = "single-line"
    limit: int | None = None  # an evenly spaced fixed sample of this many tasks
    fill: str = "model"  # one of FILLS
    settings: FillSettings = field(default_factory=FillSettings)
    model: str = "default"
    device: str = "auto"
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    # more server settings for the engine, snake_case (e.g. precision, context_cache):
    # what a setting costs in quality is measured by running with and without it
    engine: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.split = ALIASES.get(self.split, self.split)  # reports name the split one way


@dataclass
class TaskResult:
    """One task: the fill, whether its tests passed, and what it cost."""

    task_id: str
    passed: bool
    reason: str  # passed | failed | timeout | error | blocked | sandbox (sandbox.REASONS)
    detail: str
    exact: bool
    similarity: float  # edit similarity to the canonical middle, 0..1
    steps: int
    fill_ms: float
    run_ms: float
    fill: str
    path: str  # what produced the fill: diffusion, repair, left-to-right (or the harness)


@dataclass
class Report:
    """Every number of a run, with the machine and the settings it ran with."""

    config: BenchConfig
    machine: dict
    revision: str | None  # the code that ran: git commit, +dirty with local changes
    model: str | None  # None for the harness checks, which load no model
    precision: str | None  # what "auto" (or the setting) resolved to on this machine
    tasks: int
    passed: int
    pass_at_1: float  # percent
    exact_match: float  # percent
    edit_similarity: float  # percent, mean over tasks (scoring.edit_similarity)
    mean_steps: float  # forward passes per task
    ms_per_task: float  # mean time to fill one task
    sandbox_ms_per_task: float  # mean time to run one program (workers run side by side)
    wall_s: float  # the whole run, model loading included
    reasons: dict[str, int]
    paths: dict[str, int]  # fills per path: diffusion, repair, left-to-right
    network_isolated: bool  # every program ran in an empty network namespace
    results: list[TaskResult]
    isolation: str = NONE  # the weakest sandbox isolation any program ran under (sandbox.py)
    isolation_fallback: str = ""  # why not a stronger one: the probe's reasons (sandbox.py)
    pids_cgroup: bool = False  # every program ran in a pids cgroup of its own (cgroup.py)
    pids_cgroup_note: str = ""  # where those were made, or why there were none
    seccomp: bool = False  # every program ran behind the seccomp filter (seccomp.py)
    seccomp_note: str = ""  # what it refuses, or why there was none
    landlock: bool = False  # every program ran behind the Landlock layer (landlock.py)
    landlock_note: str = ""  # what it holds, or why there was none
    partial: Partial | None = None  # a run stopped by a signal: what these numbers cover


def program_for(task: Task, fill: str) -> str:
    """The program the sandbox runs: the filled solution, its tests, and the call to them."""
    return f"{task.prefix}{fill}{task.suffix}\n\n{task.test}\n\ncheck({task.entry_point})\n"


FilledBy = tuple[str | None, str | None, str | None]  # model name, device, precision (or None)


def _filler(config: BenchConfig) -> tuple[Callable[[Task], Fill], Callable[[], FilledBy]]:
    """How each task is filled, and what filled them, asked once they are: a fill that
    runs out of GPU memory moves the engine's model to the CPU."""
    if config.fill == "canonical":
        return (lambda t: Fill(t.middle, None, 0, 0.0, "canonical")), lambda: (None, None, None)
    if config.fill == "empty":
        return (lambda t: Fill("", None, 0, 0.0, "empty")), lambda: (None, None, None)
    if config.fill in BASELINES:
        baseline = load_baseline(config.fill, config.device)
        return baseline.fill, lambda: (baseline.name, baseline.device,
                                       getattr(baseline, "precision", None))
    if config.fill != "model":
        raise ValueError(f"unknown fill {config.fill!r}; choose from {', '.join(FILLS)}")
    engine = bench_engine(config.model, config.device, **config.engine)
    return (lambda task: fill_task(engine, task, config.settings),
            lambda: (engine.model.name, str(engine.model.device),
                     getattr(engine.model, "precision", None)))


def passes_by_fill(tasks: list[Task], fill_sets: list[list[str]], sandbox: SandboxConfig,
                   known: dict[tuple[str, str], bool] | None = None
                   ) -> dict[tuple[str, str], bool]:
    """Whether each (task id, fill) passes its tests; each distinct program runs once
    (programs the sandbox could not run fail, with a warning on stderr).

    Benchmarks that fill the same tasks many ways (budgets, strategies, models)
    repeat fills, a weak model's empty one most of all: running each distinct
    program once turns a sweep's thousand fills into a few hundred programs.  The
    verdicts go into `known` (returned), whose programs are not run again: a sweep
    judges each point as it comes, so that a stop keeps the points finished.
    """
    known = {} if known is None else known
    distinct: dict[tuple[str, str], Task] = {}
    for fills in fill_sets:
        for task, text in zip(tasks, fills, strict=True):
            if (task.task_id, text) not in known:
                distinct.setdefault((task.task_id, text), task)
    keys = list(distinct)
    outcomes = run_programs([program_for(distinct[k], k[1]) for k in keys], sandbox)
    unrun = [o for o in outcomes if o.reason == SANDBOX]
    if unrun:  # the verdicts keep no reason: said here, or a broken sandbox read as a weak model
        print(f"warning: the sandbox could not run {len(unrun)} of {len(outcomes)} programs, "
              f"counted as failures ({unrun[0].detail})", file=sys.stderr)
    known.update((k, o.passed) for k, o in zip(keys, outcomes, strict=True))
    return known


def run_benchmark(config: BenchConfig) -> Report:
    """Fill the tasks and run their programs in the sandbox, a chunk at a time; tally.

    A chunk's fills, then its programs: the two never overlap, so a fill's time is the
    model's alone, while progress (stderr) counts the tasks that passed.  Stopped by a
    signal, the report covers the tasks whose programs ran, marked `partial`; stopped
    before any had, the interruption goes on and no report is made.
    """
    began = time.perf_counter()
    tasks = load_tasks(config.split, config.limit)
    fill, about = _filler(config)
    what = {"model": "", "canonical": " (self-check)"}.get(config.fill, f" ({config.fill})")
    progress = Progress(f"humaneval{what}",
                        len(tasks), "tasks")
    done: list[tuple[Task, Fill, Outcome]] = []
    with Stoppable(progress, lambda: len(done),
                   lambda: f"{sum(o.passed for *_, o in done)} passed") as loop:
        while len(done) < len(tasks):
            chunk: list[tuple[Task, Fill]] = []
            started = time.perf_counter()
            for task in tasks[len(done):len(done) + CHUNK_TASKS]:
                chunk.append((task, fill(task)))
                if time.perf_counter() - started >= CHUNK_FILL_S:
                    break
            outcomes = run_programs([program_for(t, f.text) for t, f in chunk], config.sandbox)
            done += [(t, f, o) for (t, f), o in zip(chunk, outcomes, strict=True)]
            loop.update()
    return tally(config, done, about(), began, loop.partial)


def run_beside(config: BenchConfig, planned: int) -> Report:
    """A run beside the model's (a baseline model on its `planned` tasks).  Stopped
    before it finished a task (while its model loads, say), it is a report of none,
    marked partial: the interruption no longer takes the model's finished report with it.
    """
    began = time.perf_counter()
    try:
        return run_benchmark(config)
    except KeyboardInterrupt as exc:
        return tally(config, [], (None, None, None), began,
                     Partial(0, planned, "tasks", signal_name(exc)))


def tally(config: BenchConfig, done: list[tuple[Task, Fill, Outcome]], filled_by: FilledBy,
          began: float, partial: Partial | None) -> Report:
    """The report of the tasks `done`, filled by (model, device, precision) `filled_by`."""
    model, device, precision = filled_by
    outcomes = [o for *_, o in done]
    results = [TaskResult(t.task_id, o.passed, o.reason, o.detail, exact_match(f.text, t.middle),
                          round(edit_similarity(f.text, t.middle), 4), f.steps, round(f.ms, 1),
                          round(1000 * o.seconds, 1), f.text, f.path)
               for t, f, o in done]
    n = max(1, len(results))
    passed = sum(r.passed for r in results)
    reasons = Counter(r.reason for r in results)
    # the weakest isolation any program ran under
    isolation = min((o.isolation for o in outcomes), key=ISOLATION_LEVELS.index, default=NONE)
    pids_cgroup = bool(outcomes) and all(o.pids_cgroup for o in outcomes)
    seccomp = bool(outcomes) and all(o.seccomp for o in outcomes)
    landlock = bool(outcomes) and all(o.landlock for o in outcomes)
    return Report(
        config=config, machine=describe_machine(device), revision=source_revision(),
        model=model, precision=precision, tasks=len(results),
        passed=passed, pass_at_1=round(100 * passed / n, 1),
        exact_match=round(100 * sum(r.exact for r in results) / n, 1),
        edit_similarity=round(100 * sum(r.similarity for r in results) / n, 1),
        mean_steps=round(sum(r.steps for r in results) / n, 2),
        ms_per_task=round(sum(r.fill_ms for r in results) / n, 1),
        sandbox_ms_per_task=round(sum(r.run_ms for r in results) / n, 1),
        wall_s=round(time.perf_counter() - began, 1),
        reasons={reason: reasons[reason] for reason in REASONS if reasons[reason]},
        paths=dict(Counter(r.path for r in results)),
        network_isolated=isolation != NONE,
        results=results,
        isolation=isolation,
        isolation_fallback=fallback_reason(config.sandbox) if outcomes else "",
        pids_cgroup=pids_cgroup,
        pids_cgroup_note=pids_cgroup_note(pids_cgroup) if outcomes else "",
        seccomp=seccomp,
        seccomp_note=seccomp_note(seccomp, config.sandbox) if outcomes else "",
        landlock=landlock,
        landlock_note=landlock_note(landlock, config.sandbox) if outcomes else "",
        partial=partial)


def describe_run(config: BenchConfig) -> str:
    """What was filled, in a few words: the row label of the summary table."""
    if config.fill == "canonical":
        return "canonical middle (self-check)"
    if config.fill == "empty":
        return "empty fill (floor)"
    if config.fill in BASELINES:
        return f"{BASELINES[config.fill].name}, prefix only, healed boundary, greedy"
    s = config.settings
    steps = "" if s.steps is None else f", {s.steps} steps"
    repair = "" if s.repair else ", no repair"
    extra = settings_label(config.engine)
    return f"{s.strategy or 'server default strategy'}, {s.length} length{steps}{repair}{extra}"


TABLE_HEAD = ("| fill | tasks | pass@1 % | exact match % | edit similarity % | mean steps | "
              "ms per task | sandbox ms per task | wall s |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def table_row(report: Report) -> str:
    """The report as one row under TABLE_HEAD."""
    label = describe_run(report.config) + (report.partial.mark() if report.partial else "")
    numbers = [report.pass_at_1, report.exact_match, report.edit_similarity,
               report.mean_steps, report.ms_per_task, report.sandbox_ms_per_task]
    cells = [label, report.tasks, *(numbers if report.tasks else ["-"] * len(numbers)),
             report.wall_s]  # a run stopped before its first task measured nothing
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def to_markdown(report: Report, beside: tuple[Report, ...] = ()) -> str:
    """A short summary: settings, machine, the table row (and the rows of runs `beside` it,
    e.g. a baseline model on the same tasks), outcomes, harness failures."""
    cfg = report.config
    lines = [f"HumanEval-Infilling {cfg.split}, {report.tasks} tasks, seed {cfg.settings.seed}, "
             f"model {report.model or 'none'}"
             + (f" ({report.precision})" if report.precision else "")
             + f"; {machine_line(report.machine)}; "
             f"{report.machine['date']}, code {code_label(report.revision)}",
             "", TABLE_HEAD, table_row(report), *(table_row(r) for r in beside), ""]
    for run in (r for r in (report, *beside) if r.tasks):
        label = f" ({describe_run(run.config)})" if beside else ""
        lines.append(f"Outcomes{label}: " + ", ".join(f"{k} {v}" for k, v in run.reasons.items())
                     + "; fills by path: " + ", ".join(f"{k} {v}" for k, v in run.paths.items())
                     + f"; {report_isolation_text(run)}.")
    if cfg.fill == "canonical":
        failures = [r for r in report.results if not r.passed][:FAILURES_LISTED]
        lines += [f"- {r.task_id}: {r.reason} {r.detail}" for r in failures]
    stopped = [run.partial.heading
               + (f" (row {describe_run(run.config)})" if beside else "")
               for run in (report, *beside) if run.partial]
    return "\n".join([*stopped, *lines]) + "\n"


def check_baseline(report: Report, baseline: dict, margin: float) -> tuple[bool, str]:
    """Whether pass@1 stayed within `margin` points of a stored report, and a sentence why."""
    if not isinstance(baseline, dict) or "pass_at_1" not in baseline:
        raise ValueError("the baseline is not a report written by `bench humaneval --json`")
    before = float(baseline["pass_at_1"])
    drop = round(before - report.pass_at_1, 1)
    ours = asdict(report.config)
    differs = [k for k in ("split", "limit", "fill", "settings")
               if k in baseline.get("config", {}) and baseline["config"][k] != ours[k]]
    note = f" (the baseline ran with other {', '.join(differs)})" if differs else ""
    if drop > margin:
        return False, (f"regression: pass@1 {report.pass_at_1}% against {before}% in the "
                       f"baseline, a drop of {drop} points, more than {margin}{note}")
    return True, (f"pass@1 {report.pass_at_1}% against {before}% in the baseline "
                  f"(margin {margin} points){note}")


class UsageError(Exception):
    """An option the command cannot use (--settings it does not know, a --baseline it
    cannot read): refused before any task is filled, with argparse's status (2)."""


def refuse_repeats(option: str, names: tuple[str, ...], note: str = "") -> None:
    """A name given twice to a list option (`bench sweep --kinds single single-line`,
    `bench throughput --modes batched batched`) is refused.

    Run twice, its points were told apart by nothing: a sweep's kind had one floor and
    its curves each held both runs' points (budgets 1, 2, 1, 2), marked as one curve; a
    throughput mode's engine was one and its fills counted twice in the progress line.
    A greedy run's fills repeat anyway, at twice the time.  Dropping the repeat would
    hide a slip (`single single` for `single multi`), so it is a usage error, before the
    model loads.  A number on an axis (a budget, a length, a concurrency) is not a name:
    repeats of it are merged (`distinct`).
    """
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise UsageError(f"{option} names {', '.join(repeated)} more than once{note}; "
                         "each is run once, so name it once")


def distinct(values: tuple[int, ...]) -> tuple[int, ...]:
    """`values` with repeats merged, in their order: a point on an axis is measured once."""
    return tuple(dict.fromkeys(values))


def engine_settings(text: str | None, varied: tuple[str, ...] = (),
                    requests: tuple[InfillOptions, ...] = (),
                    flags: Mapping[str, str] | None = None) -> dict:
    """`--settings` JSON (camelCase server settings) as checked snake_case keywords.

    Strict, unlike the server's settings: a misspelt one would be a run measured
    without it, so nothing is ignored.  Nor are `model` and `device`, which are options of
    their own, nor a setting the benchmark sets itself on each row or fill (`varied`,
    snake_case: `bench syntax`'s validate; and what the options of its fills, `requests`,
    set, read by `set_by_requests`): every row would have been labelled with a value that
    only some of them, or none, ran with.  So is a budget setting (`latencyMs`,
    `stepsSingleLine` ...) where the fills give their own `steps` or `latencyMs`, which
    wins over every one of them (`policy.step_budget`): `bench throughput --settings
    '{"latencyMs": 300}'` was labelled with the target and ran its fills at 8 steps.  And
    so is a setting that none of the fills reads, as one of their options set under
    another name replaces it, or that another setting leaves off (`UNREAD`:
    `singleLineTokens` where every fill has the oracle length, `cacheRefresh` with
    `contextCache` false).  And so is a setting only the language server reads, never the
    engine a benchmark fills on (`config.SERVER_ONLY`: `timeoutMs`, `drafts`, `backend`
    ...), naming the script that measures fills through a server instead.

    `flags` names the command's option that sets a setting (or, for a setting no fill
    reads, the option that would make fills read it), by its snake_case name: a refusal
    says which option to give instead, where the command has one."""
    if text is None:
        return {}
    try:
        data, config = settings_option(text)
    except SettingsRefused as exc:
        raise UsageError(str(exc)) from exc
    settings = {snake(key): value for key, value in data.items()}
    flags = flags or {}
    options = [f"--{name}" for name in ("model", "device") if name in settings]
    if options:  # it was a TypeError's traceback, after the tasks were read
        raise UsageError(f"--settings names {', '.join(o[2:] for o in options)}: give "
                         f"{' and '.join(options)} instead")
    server = [name for name in settings if name in SERVER_ONLY]
    if server:
        raise UsageError(f"--settings names {', '.join(map(camel, server))}, which only the "
                         "language server reads, not the engine this benchmark fills on: "
                         f"{_through_a_server(server)}")
    varied = (*varied, *set_by_requests(*requests))
    taken = [name for name in varied if name in settings]
    if taken:
        raise UsageError(f"--settings names {', '.join(map(camel, taken))}, which this "
                         "benchmark sets itself on each row"
                         f"{_instead([(camel(n), flags.get(n)) for n in taken])}")
    own = [name for name in ("steps", "latency_ms") if name in varied]
    replaced = [camel(name) for name in BUDGET_SETTINGS if name in settings]
    if own and replaced:
        budget = " or ".join(flags[name] for name in ("steps", "latency_ms") if name in flags)
        raise UsageError(f"--settings names {', '.join(replaced)}, which the "
                         f"{' and '.join(map(camel, own))} this benchmark gives each fill "
                         "replace (a fill's own budget wins over every budget setting)"
                         f"{_instead([('', budget or None)])}")
    # a benchmark that does not say what its fills ask for is taken to ask for nothing
    asked = requests or (InfillOptions(),)
    for unread in UNREAD:
        moot = [camel(name) for name in unread.settings if name in settings]
        if moot and not any(unread.reads(options, config) for options in asked):
            raise UsageError(f"--settings names {', '.join(moot)}, which no fill of this "
                             f"benchmark reads ({unread.why})"
                             f"{_instead([('', flags.get(unread.option))])}")
    return settings


def _instead(named: list[tuple[str, str | None]]) -> str:
    """The end of a refusal that names the options to give instead of settings: ": give
    --seed instead" for one, ": give --seed for seed and --strategy for strategy instead"
    for several; "" where the command has none."""
    given = [(name, flag) for name, flag in named if flag]
    if not given:
        return ""
    if len(named) == 1:
        return f": give {given[0][1]} instead"
    return f": give {' and '.join(f'{flag} for {name}' for name, flag in given)} instead"


def _through_a_server(names: list[str]) -> str:
    """Where settings only the language server reads (`SERVER_ONLY`) are measured: the
    scripts that fill through a server, each with a --settings of its own."""
    remote = [name for name in names if name == "backend" or name.startswith("remote_")]
    told = []
    if remote:
        told.append("benchmarks/remote_throughput.py fills through a serve-remote service")
    if len(remote) < len(names):
        told.append("benchmarks/lsp_latency.py fills through the language server")
    return f"{' and '.join(told)}, {'each ' if len(told) > 1 else ''}with its own --settings"


@dataclass(frozen=True)
class Unread:
    """Server settings that a fill does not read once one of its options is set, under
    another name, or where another setting leaves what they tune off (`cacheRefresh`
    with `contextCache` false): refused in `--settings` where no fill of a benchmark reads
    them, as they would have labelled every row and changed none."""

    settings: tuple[str, ...]  # snake_case
    option: str  # the request option (an InfillOptions field) or setting that decides
    # whether a fill asked with these options, on an engine with these settings, reads them
    reads: Callable[[InfillOptions, ServerConfig], bool]
    why: str


def _stops_early(options: InfillOptions, config: ServerConfig) -> bool:
    """Whether a fill may stop early (`engine.sampler_config`: a left-to-right fill does
    only where its request asks)."""
    if options.early_stop is not None:
        return options.early_stop
    return bool(config.early_stop) and setting(options, config, "strategy") != LEFT_TO_RIGHT


UNREAD = (
    # `policy.plan_span`: a request's length is the span's, whatever its kind
    Unread(("single_line_tokens", "multi_line_tokens"), "length",
           lambda options, config: options.length is None,
           "each fill has its own length, which replaces the length settings"),
    # `sampler.choose`: greedy rows take the most likely token, with no nucleus; a
    # fill's candidates after the first sample (`engine.sampler_config`)
    Unread(("top_p",), "temperature",
           lambda options, config: setting(options, config, "temperature") != 0
           or setting(options, config, "candidates") > 1,
           "its fills are greedy, at temperature 0 with one candidate, and only sampling "
           "keeps a nucleus"),
    # `engine`: the retry runs only where the fallback is on and the fill was not
    # already left to right
    Unread(("fallback_max_tokens",), "fallback",
           lambda options, config: setting(options, config, "fallback") is not False
           and setting(options, config, "strategy") != LEFT_TO_RIGHT,
           "it bounds the left-to-right fallback, which its fills turn off"),
    # `policy.step_budget` and the engine's `strength`: read for a rewrite alone, which a
    # fill of a kind of its own is not
    Unread(("steps_rewrite", "latency_ms_rewrite", "strength"), "kind",
           lambda options, config: options.kind in (None, "rewrite"),
           "each fill is one line or several, never a rewrite, and only rewrites read them"),
    # `passes`: the cache's refresh and window, read only with the cache on ("auto", the
    # default, keeps one for our own models on the CPU: counted as on)
    Unread(("cache_refresh", "cache_window"), "context_cache",
           lambda options, config: config.context_cache is not False,
           "they tune the context cache, which contextCache false turns off"),
    # `engine.strictly_left_to_right`: a left-to-right fill commits one token a step, in
    # order, whatever the parallel strategies' schedule, threshold and re-masking say
    Unread(("schedule", "threshold", "remask"), "strategy",
           lambda options, config: setting(options, config, "strategy") != LEFT_TO_RIGHT,
           "every fill runs left to right, one token a step, which the parallel "
           "strategies' controls do not change"),
    # `sampler`: which committed tokens re-masking may take back, where it re-masks
    Unread(("remask_below",), "remask",
           lambda options, config: (setting(options, config, "remask") or 0) > 0
           and setting(options, config, "strategy") != LEFT_TO_RIGHT,
           "it bounds re-masking, which only remask above 0 turns on, and not left to "
           "right"),
    # `sampler`: the quality bar of an early stop
    Unread(("early_stop_logprob",), "early_stop", _stops_early,
           "it is the early stop's bar, and no fill stops early, with earlyStop false or "
           "left to right"),
    # `serving`: a padded row shares a pass, which batchRows 0 never does
    Unread(("batch_padding",), "batch_rows", lambda options, config: config.batch_rows > 0,
           "it lets fills of different lengths share a pass, and batchRows 0 shares none"),
)


def set_by_requests(*requests: InfillOptions) -> tuple[str, ...]:
    """The server settings that these per-request options set (snake_case, in field
    order): refused by `engine_settings`.

    A request's option replaces the server's setting of the same name, so such a
    setting given in `--settings` would have been labelled on every row and used by
    none (`bench sweep` names the steps and the strategy of each fill, `bench latency`
    and `bench throughput` the seed, repair and fallback too).  Read off the options
    the benchmark's fills are asked with, the list cannot miss one they set."""
    server = {f.name for f in fields(ServerConfig)}
    return tuple(f.name for f in fields(InfillOptions) if f.name in server
                 and any(getattr(options, f.name) is not None for options in requests))


def settings_label(engine: dict) -> str:
    """`engine_settings`' keywords as a row label's tail (", contextCache True, precision
    fp32"), named as `--settings` spells them, in a fixed order; "" for none.  Every
    benchmark that takes `--settings` labels its rows with it, so a table of runs with
    and without a setting says which row had it."""
    return "".join(f", {camel(k)} {v}" for k, v in sorted(engine.items()))


def read_stored_report(path: str) -> dict:
    """The `--baseline` report, read before any task runs: found unreadable only after
    the run, it cost the whole run and exited 1, which reads as a regression."""
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
    except ValueError as exc:  # not JSON (a JSONDecodeError, or bytes no UTF-8)
        raise UsageError(f"--baseline {path} is not a report written by `bench humaneval "
                         f"--json`: not JSON ({exc})") from exc
    except OSError as exc:
        raise UsageError(f"cannot read --baseline {path}: {exc.strerror or exc}") from exc
    pass_at_1 = stored.get("pass_at_1") if isinstance(stored, dict) else None
    if not isinstance(pass_at_1, (int, float)) or isinstance(pass_at_1, bool):
        raise UsageError(f"--baseline {path} is not a report written by "
                         "`bench humaneval --json`")
    if stored.get("partial"):
        raise UsageError(f"--baseline {path} is the partial report of a stopped run; "
                         "compare to a complete one")
    return stored


def model_options_given(args: argparse.Namespace) -> list[str]:
    """The options of a model's fills given on the command line (away from their
    defaults), which a fill with no model does not read."""
    given = {"--model": args.model != "default", "--device": args.device != "auto",
             "--strategy": args.strategy is not None, "--steps": args.steps is not None,
             "--length": args.length != "oracle", "--no-repair": args.no_repair,
             "--settings": args.settings is not None}
    return [option for option, on in given.items() if on]


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench humaneval`: run, print the summary, write files, check the bars."""
    fill = "canonical" if args.self_check else "empty" if args.empty else "model"
    if fill != "model":
        unread = model_options_given(args)
        if unread:  # taken and never read: the report looked like one made with them
            raise UsageError(f"{'--self-check' if args.self_check else '--empty'} fills "
                             f"with {'the canonical middle' if args.self_check else 'nothing'}, "
                             f"no model: {', '.join(unread)} would not be read")
    settings = FillSettings(strategy=args.strategy, steps=args.steps, seed=args.seed,
                            length=args.length, repair=not args.no_repair)
    config = BenchConfig(split=args.split, limit=args.limit, fill=fill, settings=settings,
                         model=args.model, device=args.device,
                         sandbox=checked_config(args.timeout, args.workers,
                                                args.require_isolation),
                         # refused before any task: so are the settings its fills set
                         engine=engine_settings(args.settings,
                                                requests=(planned_options(settings),),
                                                flags=FILL_FLAGS))
    if args.margin is not None and not args.baseline:  # it was taken, and compared nothing
        raise UsageError("--margin is the drop allowed against --baseline FILE; give one")
    margin = args.margin or 0.0
    stored = read_stored_report(args.baseline) if args.baseline else None
    if args.baseline_model:  # told before the model's tasks (minutes of them), not after
        problem = autoregressive.missing(args.baseline_model)
        if problem:
            raise autoregressive.MissingBaseline(problem)
    report = run_benchmark(config)
    beside = ()
    if args.baseline_model and not report.partial:  # the same tasks, machine and sandbox,
        beside = (run_beside(replace(config, fill=args.baseline_model), report.tasks),)
    summary = to_markdown(report, beside)
    print(summary, end="")
    stopped = next((run.partial for run in beside if run.partial), None)
    what = None if not stopped else ("the model's complete report and the baseline model's "
                                     f"partial one ({stopped.finished} of {stopped.planned} "
                                     f"{stopped.unit})")
    try:
        with writing_reports(report.partial, what) as files:
            if args.json_out:
                files.json(args.json_out,
                           {**asdict(report), "beside": [asdict(r) for r in beside]})
            if args.markdown_out:
                files.text(args.markdown_out, summary)
    except StoppedAfterWriting as stop:  # the files are whole, and so is a complete report:
        if not report.partial:  # its bars are checked, and a failed one is the status
            stop.status = check_bars(report, stored, margin)
        raise
    if report.partial:  # no bar is checked on a part of the tasks
        raise Stopped(report.partial, files.said())
    status = check_bars(report, stored, margin)
    if stopped:  # the model's report is complete: its bars were checked as in a whole run
        raise Stopped(stopped, files.said(), status)
    return status


def check_bars(report: Report, stored: dict | None, margin: float) -> int:
    """The exit status a complete model report earns: 1 when the sandbox failed to run
    a program, when the self-check's canonical fills pass below SELF_CHECK_BAR or pass@1
    fell more than `margin` points below the `stored` report, else 0; each verdict goes
    to stderr."""
    status = 0
    unrun = [r for r in report.results if r.reason == SANDBOX]
    if unrun:  # a verdict on this machine's sandbox, not on the fills: not a result to keep
        print(f"sandbox failed: {len(unrun)} of {report.tasks} programs never ran, counted "
              f"as failures in pass@1 ({unrun[0].task_id}: {unrun[0].detail})",
              file=sys.stderr)
        status = 1
    if report.config.fill == "canonical" and report.pass_at_1 < SELF_CHECK_BAR:
        print(f"self-check failed: canonical fills pass {report.pass_at_1}%, below "
              f"{SELF_CHECK_BAR}%: the harness is broken", file=sys.stderr)
        status = 1
    if stored is not None:
        ok, message = check_baseline(report, stored, margin)
        print(message, file=sys.stderr)
        status = status or (0 if ok else 1)
    return status
