"""`dlm-lsp bench heldout`: single lines of library code no model of ours trained on.

HumanEval-Infilling asks for a correct line of a small puzzle function; most of
an editor's fills are lines of ordinary code in the middle of a long file.  This
benchmark measures that job on standard-library files that `dlm-lsp train` holds
out by its own rule (the hash of the file's path, `training.data.heldout_rank`, below
`SourceConfig.heldout_fraction`): the same files for every model trained on the
standard library, on every machine with this Python version, less the lines of
those whose text, or a near-copy of it (`training.nearcopy`), the model's config.json
records it trained on under another path (`trained_record`).

A task is one line of code: the cursor sits after the line's indentation and the
middle is the rest of the line, as when a user clears a line and asks for it
again.  Lines of 8 to 100 characters that are neither comments nor inside a
multi-line string (docstrings are prose) are candidates, in files that tokenize
as Python 3; the
tasks are `--limit` of them evenly spread over all candidates of all held-out
files, in path order, so the sample is fixed.  Each fill runs through the engine
as a request would (the whole file as context, validation and repair on unless
`--no-repair`), with the middle's token count as the length (`--length policy`
leaves it to the server).  Reported: exact match (whitespace around the line
ignored), the share of fills that add no syntax error to the file (tree-sitter,
the server's own check, so an empty fill counts as valid: hence the share of
empty fills beside it), steps and time.  No code runs.  Progress goes to stderr; a
run stopped by Ctrl-C or SIGTERM reports the lines it filled, marked partial
(`progress.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlm_lsp.bench.filling import (
    FILL_FLAGS,
    FillSettings,
    bench_engine,
    fill_task,
    planned_options,
)
from dlm_lsp.bench.lines import line_tasks
from dlm_lsp.bench.machine import code_label, describe_machine, machine_line, source_revision
from dlm_lsp.bench.output import writing_reports
from dlm_lsp.bench.pass_at_1 import engine_settings, settings_label
from dlm_lsp.bench.progress import Partial, Progress, Stoppable, Stopped
from dlm_lsp.bench.scoring import edit_similarity, exact_match
from dlm_lsp.models import local_directory, resolve_spec
from dlm_lsp.training.data import (
    SourceConfig,
    heldout_rank,
    python_files,
    read_source,
    text_digest,
)
from dlm_lsp.training.lineage import SplitRecord
from dlm_lsp.training.nearcopy import SketchIndex, sketch


def stdlib_root(stdlib: Path | None = None) -> Path:
    """`stdlib`, or this Python's standard library where none is given."""
    import sysconfig

    return stdlib or Path(sysconfig.get_paths()["stdlib"])


def heldout_files(stdlib: Path | None = None) -> list[tuple[str, str]]:
    """(path relative to the standard library, text) of every held-out file, in path
    order: the files `collect_sources` holds out whatever its byte cap."""
    cfg = SourceConfig()
    root = stdlib_root(stdlib)
    found = []
    for path in python_files(root, cfg.skip_dirs):
        rel = path.relative_to(root).as_posix()
        if heldout_rank(rel) >= cfg.heldout_fraction:
            continue
        text = read_source(path)
        if text is not None and text.strip():
            found.append((rel, text))
    return found


# Parts of the standard library that hold held-out files (17 of 3.11's 34 are tests;
# ensurepip, distutils and lib2to3 hold one or two) and that a distribution's Python may
# ship in packages of their own (Debian's and Ubuntu's: libpython3.X-testsuite,
# idle-python3.X, python3-tk, python3.X-venv, python3-distutils, python3-lib2to3): how
# each is found.
SHIPPED_APART = {"test/": "test/test_grammar.py", "idlelib/": "idlelib/__init__.py",
                 "tkinter/": "tkinter/__init__.py", "turtledemo/": "turtledemo/__init__.py",
                 "ensurepip/": "ensurepip/_uninstall.py",
                 "distutils/": "distutils/version.py", "lib2to3/": "lib2to3/__init__.py"}


def stdlib_lacks(stdlib: Path | None = None) -> list[str]:
    """The parts of `SHIPPED_APART` the standard library at `stdlib` (this Python's) lacks:
    run on Debian's own Python the bench drew its lines from 10 held-out files, not 34,
    and said so only in the files column, beside numbers that read as the model card's."""
    root = stdlib_root(stdlib)
    return [part for part, marker in SHIPPED_APART.items() if not (root / marker).is_file()]


def trained_record(model: str) -> SplitRecord:
    """What model `model` (a spec) was trained on, as its config.json records it
    (`lineage.SplitRecord`; empty for a model without the record, or not ours).

    The held-out rule goes by path, and a model trained on another Python's standard
    library trained on some of this one's held-out files under other paths: of 3.11's 34,
    a run on 3.12's trains on `ctypes/test/test_stringptr.py` and
    `ctypes/test/test_unaligned_structures.py` byte for byte (3.12 moved them to
    test/test_ctypes/), on two files whose text another file repeats, and on near-copies
    (`nearcopy`) of three more: 3.12's `test/test_ttk/test_widgets.py` is 3.11's
    `tkinter/test/test_ttk/test_widgets.py` edited.  Their lines are left out of the
    bench for that model (`trained_on`); the sample is drawn from every held-out file
    as before, so the other lines stay those of any model.  The model's folder is found
    as the loader finds it (`local_directory`: `~` expanded, a hub id's cached snapshot)."""
    folder = local_directory(resolve_spec(model)[2])
    if folder is None:
        return SplitRecord()
    try:
        training = json.loads((folder / "config.json").read_text(encoding="utf-8")).get(
            "training")
    except (OSError, ValueError, AttributeError):
        return SplitRecord()
    return SplitRecord.of(training) if isinstance(training, dict) else SplitRecord()


def trained_on(files: list[tuple[str, str]], record: SplitRecord) -> set[str]:
    """The paths of the files whose text, or a near-copy of it, the record trained on."""
    near = SketchIndex(record.near_trained)
    return {rel for rel, text in files
            if text_digest(text) in record.trained or near.near(sketch(text))}


@dataclass
class HeldoutReport:
    model: str
    device: str
    precision: str | None  # what "auto" (or the setting) resolved to on this machine
    files: int
    tasks: int
    exact_match: float  # percent
    edit_similarity: float  # percent, mean over fills (scoring.edit_similarity)
    syntax_valid: float  # percent of fills valid in place (tree-sitter)
    empty: float  # percent of fills that are empty
    mean_steps: float
    ms_per_fill: float
    settings: FillSettings
    engine: dict
    machine: dict
    revision: str | None
    trained_skipped: int = 0  # of `files`, those whose text the model trained on: no tasks
    stdlib_lacks: list[str] = field(default_factory=list)  # `stdlib_lacks`: fewer files
    results: list[dict] = field(default_factory=list)
    partial: Partial | None = None  # a run stopped by a signal: what these numbers cover


def run(model: str = "default", device: str = "auto", limit: int | None = 200,
        settings: FillSettings | None = None, engine_settings: dict | None = None,
        stdlib: Path | None = None) -> HeldoutReport:
    """Fill every task once and count; stopped by a signal, count the lines filled so far
    (none: the interruption goes on)."""
    settings = settings or FillSettings()
    files = heldout_files(stdlib)
    trained = trained_on(files, trained_record(model))
    # Drawn from every held-out file, so that the other tasks stay those of any model.
    tasks = [task for task in line_tasks(files, limit)
             if task.task_id.rpartition(":")[0] not in trained]
    engine = bench_engine(model, device, **(engine_settings or {}))
    results: list[dict] = []
    progress = Progress("heldout", len(tasks), "lines")
    with Stoppable(progress, lambda: len(results),
                   lambda: f"{sum(r['exact'] for r in results)} exact") as loop:
        for task in tasks:
            began = time.perf_counter()
            fill = fill_task(engine, task, settings)
            results.append({"task_id": task.task_id, "middle": task.middle, "fill": fill.text,
                            "exact": exact_match(fill.text, task.middle),
                            "similarity": round(edit_similarity(fill.text, task.middle), 4),
                            "valid": fill.valid,
                            "steps": fill.steps,
                            "ms": round((time.perf_counter() - began) * 1000, 1),
                            "path": fill.path})
            loop.update()
    n = max(len(results), 1)
    machine = describe_machine(str(engine.model.device))
    return HeldoutReport(
        model=engine.model.name, device=str(engine.model.device),
        precision=getattr(engine.model, "precision", None), files=len(files),
        tasks=len(results),
        exact_match=round(100 * sum(r["exact"] for r in results) / n, 1),
        edit_similarity=round(100 * sum(r["similarity"] for r in results) / n, 1),
        syntax_valid=round(100 * sum(r["valid"] is True for r in results) / n, 1),
        empty=round(100 * sum(not r["fill"].strip() for r in results) / n, 1),
        mean_steps=round(sum(r["steps"] for r in results) / n, 2),
        ms_per_fill=round(sum(r["ms"] for r in results) / n, 1),
        settings=settings, engine=dict(engine_settings or {}), machine=machine,
        revision=source_revision(),
        trained_skipped=len(trained), stdlib_lacks=stdlib_lacks(stdlib),
        results=results, partial=loop.partial)


TABLE_HEAD = ("| fill | files | tasks | exact match % | edit similarity % | syntax valid % "
              "| empty % | mean steps | ms per fill |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def table_row(report: HeldoutReport) -> str:
    s = report.settings
    label = f"{s.strategy or 'server default strategy'}, {s.length} length"
    label += "" if s.steps is None else f", {s.steps} steps"
    label += "" if s.repair else ", no repair"
    label += settings_label(report.engine)
    label += report.partial.mark() if report.partial else ""
    return (f"| {label} | {report.files} | {report.tasks} | {report.exact_match} | "
            f"{report.edit_similarity} | {report.syntax_valid} | {report.empty} | "
            f"{report.mean_steps} | {report.ms_per_fill} |")


def to_markdown(report: HeldoutReport) -> str:
    stopped = f"{report.partial.heading}\n" if report.partial else ""
    return (f"{stopped}Held-out standard-library lines, model {report.model} ({report.precision}); "
            f"{machine_line(report.machine)}; {report.machine['date']}, code "
            f"{code_label(report.revision)}"
            # of the files counted in the table's `files` (which read as all sampled)
            + (f"; the lines of {report.trained_skipped} of these {report.files} held-out "
               "file(s) left out, the model trained on their text or a near-copy of it"
               if report.trained_skipped
               else "")
            + (f"; {lacking(report.stdlib_lacks)}" if report.stdlib_lacks else "")
            + f"\n\n{TABLE_HEAD}\n{table_row(report)}\n")


def lacking(parts: list[str]) -> str:
    """What a standard library without `parts` does to the sample, in a sentence."""
    return (f"this Python's standard library lacks {', '.join(parts)} (a distribution's "
            "Python ships them in packages of their own, e.g. Debian's "
            "libpython3.X-testsuite and python3.X-venv), so fewer held-out files and other "
            "lines than a full one's (pyenv's, python.org's, a venv made from one): not "
            "comparable to the README's or the model card's numbers")


def command(args: argparse.Namespace) -> int:
    """`dlm-lsp bench heldout`: run, print the row, write files."""
    settings = FillSettings(strategy=args.strategy, steps=args.steps, seed=args.seed,
                            length=args.length, repair=not args.no_repair)
    lacks = stdlib_lacks()
    if lacks:  # said first: the run takes minutes
        print(f"dlm-lsp bench heldout: {lacking(lacks)}", file=sys.stderr)
    # refused before the model loads: so are the settings its fills set
    report = run(args.model, args.device, args.limit or None, settings,
                 engine_settings(args.settings, requests=(planned_options(settings),),
                                 flags=FILL_FLAGS))
    if report.tasks == 0:
        print("no held-out files with candidate lines in this standard library",
              file=sys.stderr)
        return 1
    summary = to_markdown(report)
    print(summary, end="")
    with writing_reports(report.partial) as files:
        if args.json_out:
            files.json(args.json_out, asdict(report))
        if args.markdown_out:
            files.text(args.markdown_out, summary)
    if report.partial:
        raise Stopped(report.partial, files.said())
    return 0
