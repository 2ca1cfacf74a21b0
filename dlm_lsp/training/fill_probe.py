"""Fill quality while a model trains: the curve of quality against training tokens.

The held-out loss shows a model learning; it does not say how many of its fills come
out right, which is what the model's targets are (issue 4: exact lines, pass@1), and
where a target stays out of reach the model card is to show how fill quality rose with
the tokens seen.  Interim saves cannot give that curve after a GPU run: what comes back
from the GPU machine is the final export (7 of its 8 files) and the log.  So the run
measures fills itself, at each held-out evaluation.

A probe fills fixed single-line tasks of two sets:
- `lines`: lines of the run's own held-out files, drawn by `bench heldout`'s rule
  (`bench.lines.line_tasks`, evenly spread);
- `humaneval`: HumanEval-Infilling single-line tasks, the evenly spaced sample that
  `bench humaneval --limit N` fills (`load_tasks`), N the probe's count.
Each is filled at its oracle length, greedy, with the sampler the server gives a
single line (`sampler_settings.sampler_config` over the default `ServerConfig`:
confidence order, 8 steps, early stop on its log-probability bar), from the context
the engine would build (`span.build_layout`, the head moved, the borrowed line break).
What it leaves out is the engine's tree-sitter (the GPU machine has none): no syntax
check, so an early stop needs no valid fill, no repair and no left-to-right retry.
Its numbers are those of the engine with the setting `validate` off, no repair and no
context cache (as on the GPU, where `contextCache: "auto"` keeps none),
`bench humaneval --split single --limit N --no-repair --settings '{"validate": false,
"contextCache": false}'`
(31 of 32 fills the same with the shipped model on a CPU, 2026-12-04; the other is a
bf16 rounding of a padded pass): the model and the sampler alone, not the server's
numbers, which the benchmarks stay the measure of; the probe is the curve.

All tasks step together: one forward pass a step for up to `rows` of them, shorter
rows padded (`TinyModel.hidden` with lengths, as `serving.StepBatcher` pads), so a
probe of a few hundred tasks is the passes of one fill plus the sampler's own work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from dlm_lsp.bench.humaneval import Task, load_tasks
from dlm_lsp.bench.lines import line_tasks
from dlm_lsp.bench.scoring import edit_similarity, exact_match
from dlm_lsp.config import DEFAULT_STEPS, InfillOptions, ServerConfig
from dlm_lsp.models.tiny import TinyDenoiser, TinyModel
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.sampler import Denoising, SamplerConfig
from dlm_lsp.sampler_settings import sampler_config
from dlm_lsp.serving import padded_rows
from dlm_lsp.span import SpanLayout, borrowed_line_break, past_head, reproducible_layout
from dlm_lsp.training.data import SourceFile

SINGLE_LINE = "single-line"


@dataclass(frozen=True)
class ProbeConfig:
    """How many tasks of each set a probe fills (0: none of that set), and its passes."""

    lines: int = 0
    humaneval: int = 0
    rows: int = 64  # tasks sharing one forward pass
    seed: int = 0

    @property
    def enabled(self) -> bool:
        return self.lines > 0 or self.humaneval > 0


def probe_tasks(cfg: ProbeConfig, heldout: Sequence[SourceFile]) -> dict[str, list[Task]]:
    """The probe's tasks by set, fixed for the run: the same tasks at every evaluation."""
    sets = {}
    if cfg.lines > 0:
        sets["lines"] = line_tasks([(f.path, f.text) for f in heldout], cfg.lines)
    if cfg.humaneval > 0:
        sets["humaneval"] = load_tasks(SINGLE_LINE, cfg.humaneval)
    return {name: tasks for name, tasks in sets.items() if tasks}


def task_layout(tokenizer: Tokenizer, task: Task, config: ServerConfig,
                max_length: int) -> SpanLayout:
    """The context and masked span the engine would denoise for this task at its oracle
    length (the canonical middle's token count), the cursor at the end of its prefix."""
    n = max(1, len(tokenizer.encode(task.middle)))
    tail = borrowed_line_break(task.prefix, task.suffix)
    return reproducible_layout(tokenizer, task.prefix, tail + task.suffix, n,
                               config.max_context_tokens, max_length=max_length)


def single_line_sampler(config: ServerConfig, n_masked: int) -> SamplerConfig:
    """The server's sampler for a single line of exactly `n_masked` tokens, as the
    benchmarks ask the oracle length (`bench.filling.fill_options`; its steps at most
    one a token, as `policy.plan_span` caps them)."""
    steps = max(1, min(DEFAULT_STEPS[SINGLE_LINE], n_masked))
    return sampler_config(config, InfillOptions(length=n_masked, exact_length=True), steps,
                          config.strategy, single_line=True)


def fill_text(tokenizer: Tokenizer, pad_id: int, layout: SpanLayout, ids: list[int]) -> str:
    """A single-line fill as the engine offers it before shaping: the span decoded up to
    its first pad, the head (the prefix's edge, written again) dropped, the first line."""
    if pad_id in ids:
        ids = ids[:ids.index(pad_id)]
    return past_head(tokenizer.decode(ids), layout.head, single_line=True)


def step_together(model: TinyModel, runs: list[Denoising], rows: int) -> None:
    """Run every denoising to its end, one forward pass a step for up to `rows` runs of
    similar length (sorted by length, the shorter padded), each advancing on its span."""
    live = sorted(runs, key=lambda run: run.inputs.shape[1])
    while live:
        for at in range(0, len(live), rows):
            group = live[at:at + rows]
            hidden = model.hidden(*padded_rows([run.inputs for run in group], model.pad_id))
            for i, run in enumerate(group):
                run.advance(model.head(hidden[i:i + 1, run.lo:run.hi]))
        live = [run for run in live if not run.done]


def score(tasks: Sequence[Task], fills: Sequence[str]) -> dict[str, float]:
    """Exact match, edit similarity and empty fills, in percent of the tasks."""
    n = max(len(tasks), 1)
    return {"exact": round(100 * sum(exact_match(f, t.middle)
                                     for f, t in zip(fills, tasks, strict=True)) / n, 1),
            "similarity": round(100 * sum(edit_similarity(f, t.middle)
                                          for f, t in zip(fills, tasks, strict=True)) / n, 1),
            "empty": round(100 * sum(not f.strip() for f in fills) / n, 1)}


class FillProbe:
    """Fixed single-line tasks, filled by the model under training and scored."""

    def __init__(self, cfg: ProbeConfig, tasks: dict[str, list[Task]], tokenizer: Tokenizer,
                 max_length: int, config: ServerConfig | None = None):
        self.cfg, self.tasks, self.tokenizer = cfg, tasks, tokenizer
        self.config = config or ServerConfig()
        self.layouts = {name: [task_layout(tokenizer, t, self.config, max_length)
                               for t in group] for name, group in tasks.items()}

    @property
    def size(self) -> int:
        return sum(len(group) for group in self.tasks.values())

    def fills(self, module: TinyDenoiser, device: torch.device) -> dict[str, list[str]]:
        """Every task's fill by the model as it stands (left in the mode it was in)."""
        was_training = module.training
        try:
            with torch.no_grad():  # the passes build no graph of the weights under training
                model = TinyModel(module, self.tokenizer, "probe", device)
                runs = {name: [Denoising(model, layout, self.sampler(layout), self.cfg.seed)
                               for layout in layouts]
                        for name, layouts in self.layouts.items()}
                step_together(model, [run for group in runs.values() for run in group],
                              self.cfg.rows)
        finally:
            module.train(was_training)
        return {name: [fill_text(self.tokenizer, model.pad_id, layout,
                                 run.result().span_ids[0].tolist())
                       for layout, run in zip(self.layouts[name], group, strict=True)]
                for name, group in runs.items()}

    def sampler(self, layout: SpanLayout) -> SamplerConfig:
        """The server's sampler for this task's line (its oracle length: the span less
        the head's positions)."""
        return single_line_sampler(self.config, layout.n_masked - layout.head_tokens)

    def __call__(self, module: TinyDenoiser, device: torch.device) -> dict[str, float]:
        """The probe's numbers as flat curve-point keys: `probe_lines_exact`, ..."""
        found = self.fills(module, device)
        return {f"probe_{name}_{key}": value
                for name, fills in found.items()
                for key, value in score(self.tasks[name], fills).items()}


def probe_summary(numbers: dict) -> str:
    """The probe's numbers for a progress line: "fills exact/similar lines 4.5/24.7%,
    humaneval 3.0/19.0%" ("" when the point has none)."""
    sets = [key[len("probe_"):-len("_exact")] for key in numbers
            if key.startswith("probe_") and key.endswith("_exact")]
    if not sets:
        return ""
    return "fills exact/similar " + ", ".join(
        f"{name} {numbers[f'probe_{name}_exact']}/{numbers[f'probe_{name}_similarity']}%"
        for name in sets)


def curve_point(tokens: int, numbers: dict) -> dict:
    """A point of the fill curve: the tokens the model had seen (all runs) and the
    probe's numbers."""
    return {"tokens": tokens, **{k: v for k, v in numbers.items() if k.startswith("probe_")}}
