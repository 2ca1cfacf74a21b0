"""How often returned fills are syntactically valid, with and without validation + repair.

The same tasks are filled twice with the same seeds: once with validation off
(what the model writes, checked afterwards with the same tree-sitter check),
once with validation, syntax-guided repair and the left-to-right fallback on
(what the server returns).  Tasks are HumanEval-Infilling multi-line (Python)
and every `<FILL>` hole of the multi-language fixtures, each with the server's
own length policy, as an editor user would get them.  Each row is printed when it
is done, and progress goes to stderr; a run stopped by Ctrl-C or SIGTERM prints and
writes the rows it has, the one under way over the tasks it filled, marked partial
(`progress.py`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.machine import describe_machine, source_revision
from dlm_lsp.bench.output import say, writing_reports
from dlm_lsp.bench.pass_at_1 import UsageError, set_by_requests, settings_label
from dlm_lsp.bench.progress import Progress, Stoppable, Stopped
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.holes import find_holes
from dlm_lsp.passes import checked_span, checked_text
from dlm_lsp.validation import language_for, validate_fill

# Inside the package, so an installed `dlm-lsp bench syntax` has them: in a checkout this is
# a link to the repository's fixtures/ (the README's example files), and a built wheel or
# sdist holds copies of them here.
FIXTURES = Path(__file__).resolve().parent / "data" / "fixtures"


@dataclass(frozen=True)
class SyntaxTask:
    name: str
    text: str
    start: int
    end: int
    uri: str
    hole: bool = True  # a <FILL> marker to replace, else a cursor
    kind: str | None = None  # the task's kind when known, else the policy decides


@dataclass
class SyntaxRow:
    """One setting over one task set."""

    setting: str
    tasks: int = 0
    valid: int = 0
    ms: float = 0.0
    paths: dict[str, int] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.valid / self.tasks if self.tasks else 0.0


def humaneval_tasks(limit: int | None) -> list[SyntaxTask]:
    """HumanEval-Infilling multi-line tasks: the middle removed, the cursor where it was."""
    tasks = []
    for t in load_tasks("multi-line", limit):
        text = t.prefix + t.suffix
        tasks.append(SyntaxTask(t.task_id, text, len(t.prefix), len(t.prefix),
                                f"file:///{t.task_id.replace('/', '_')}.py", hole=False,
                                kind="multi-line"))
    return tasks


def fixtures_folder() -> Path:
    """FIXTURES; or, in a checkout made without symbolic links (git's `core.symlinks`
    false, Windows' default), where the link is a file that names its target, the
    repository's fixtures/ it names (`bench syntax` ended in a traceback there)."""
    if FIXTURES.is_dir():
        return FIXTURES
    named = FIXTURES.parent / FIXTURES.read_text(encoding="utf-8").strip() \
        if FIXTURES.is_file() and FIXTURES.stat().st_size < 256 else None
    if named is not None and named.is_dir():
        return named.resolve()
    raise UsageError(f"the example files `bench syntax` fills are not at {FIXTURES} (a "
                     "checkout made without symbolic links, and no fixtures/ beside it?)")


def fixture_tasks(directory: Path | None = None, marker: str = "<FILL>") -> list[SyntaxTask]:
    """Each hole of each fixture file (the other holes left as they are)."""
    tasks = []
    for path in sorted((directory or fixtures_folder()).iterdir()):
        if language_for(None, path.name) is None:
            continue
        text = path.read_text(encoding="utf-8")
        for i, (start, end) in enumerate(find_holes(text, marker)):
            tasks.append(SyntaxTask(f"{path.name}#{i}", text, start, end, path.as_uri()))
    return tasks


def _options(seed: int, kind: str | None) -> InfillOptions:
    """A fill's options: the seed, and the kind where the task says it (HumanEval's)."""
    return InfillOptions(seed=seed, kind=kind)


def set_itself() -> tuple[str, ...]:
    """The server settings the benchmark sets itself: validation, off in one row and on
    in the other, and every fill's seed.  `--settings` may not give them."""
    return ("validate", *set_by_requests(_options(0, None)))


def run(engine: Engine, tasks: list[SyntaxTask], setting: str, seed: int = 0,
        done: list[tuple[bool, float, str]] | None = None,
        on_fill: Callable[[], None] | None = None) -> SyntaxRow:
    """Fill every task; count fills that the tree-sitter check accepts.  Each fill's
    (valid, ms, path) goes into `done` as it comes, for a stopped run to `tally`."""
    done = [] if done is None else done
    for task in tasks:
        req = InfillRequest(task.text, task.start, task.end, None, task.uri,
                            _options(seed, task.kind), is_hole=task.hole)
        result = engine.infill(req)
        fill = result.candidates[0].text
        # a hole's marker is not code: the fill is checked where it stood, as the engine does
        verdict = validate_fill(checked_text(req.text, req), *checked_span(req), fill,
                                language_for(None, task.uri))
        done.append((verdict.valid, result.ms, result.path))
        if on_fill:
            on_fill()
    return tally(setting, done)


def tally(setting: str, done: list[tuple[bool, float, str]]) -> SyntaxRow:
    """The row of the fills in `done`: (valid, ms, path) each."""
    return SyntaxRow(setting, len(done), sum(int(valid) for valid, _, _ in done),
                     sum(ms for _, ms, _ in done) / max(1, len(done)),
                     dict(Counter(path for _, _, path in done)))


def _print_row(name: str, row: SyntaxRow, mark: str = "") -> None:
    say(f"{name:24} {row.setting:32} valid {row.valid}/{row.tasks} ({row.rate:.0%}), "
        f"{row.ms:.0f} ms/fill, paths "
        f"{', '.join(f'{path} {count}' for path, count in row.paths.items()) or 'none'}"
        f"{mark}")  # `diffusion 3`, not Python's {'diffusion': 3}; a reader gone: quiet


def main(model: str, device: str, limit: int | None, out: str | None,
         engine: dict | None = None) -> int:
    """Print a row per task set and setting, optionally writing them as JSON.  `engine`:
    more server settings (`--settings`, checked), named in each row's setting and kept
    in each JSON row, so a row measured in fp32 says so.  Each JSON row also names the
    machine and the code it ran on (`machine`, `revision`), as the other bench reports
    do: the fixtures row differed between an AVX2 VM in fp32 and an AVX-512 one in bf16,
    and nothing in the file said which had made it.  And the model (`model`: the files of
    the bootstrap and of the GPU-trained model could not be told apart), and the fills
    its set planned (`planned`: a stopped run's row cut short has fewer `tasks`)."""
    engine = dict(engine or {})
    base = ServerConfig(model=model, device=device, **engine)
    extra = settings_label(engine)
    settings = {"model only (validation off)" + extra: replace(base, validate=False),
                "validation + repair + fallback" + extra: base}
    table: list[dict] = []
    fixtures = fixture_tasks()
    languages = {language_for(None, task.uri) for task in fixtures}
    sets = (("HumanEval multi-line", humaneval_tasks(limit)),
            (f"fixtures ({len(languages)} languages)", fixtures))
    progress = Progress("syntax", len(settings) * sum(len(tasks) for _, tasks in sets),
                        "fills")
    done: list[tuple[bool, float, str]] = []
    ran_on, ran = device, model

    def filled() -> None:
        progress.update(sum(entry["tasks"] for entry in table) + len(done),
                        f"{name}, {setting}")

    def keep_the_row_under_way() -> None:  # over the tasks it filled
        if done and (name, setting) not in {(e["set"], e["setting"]) for e in table}:
            row = tally(setting, done)
            table.append({"set": name, **asdict(row), "planned": len(tasks), "rate": row.rate,
                          "engine": engine})
            _print_row(name, row, f" (partial: {row.tasks} of {len(tasks)} fills)")
    with Stoppable(progress, lambda: sum(entry["tasks"] for entry in table),
                   on_stop=keep_the_row_under_way) as loop:
        for name, tasks in sets:
            for setting, config in settings.items():
                done = []
                engine_run = Engine(config)
                ran_on = str(engine_run.model.device)  # "auto" resolved
                ran = engine_run.model.name
                row = run(engine_run, tasks, setting, done=done, on_fill=filled)
                table.append({"set": name, **asdict(row), "planned": len(tasks),
                              "rate": row.rate, "engine": engine})
                _print_row(name, row)
    partial = loop.partial
    if partial:
        print(f"{partial}; the rows above cover only these", flush=True)
    machine, revision = describe_machine(ran_on), source_revision()
    for entry in table:  # a stopped run's file says so in every row
        entry.update(model=ran, partial=asdict(partial) if partial else None,
                     machine=machine, revision=revision)
    with writing_reports(partial) as files:
        if out:
            files.json(out, table)
    if partial:
        raise Stopped(partial, files.said())
    return 0
