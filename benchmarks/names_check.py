"""The names check on real code: how often it rejects a line a person wrote, and its cost.

`dlm_lsp/python_names.py` rejects a Python fill that reads a name nothing in the
document defines, `dlm_lsp/python_order.py` one that reads a function's local before
anything binds it, `dlm_lsp/python_calls.py` one that calls a function with arguments it
cannot take.  A false alarm costs a user a good fill (repair rewrites it), so the
check is meant never to fire on code people wrote.  This script asks it of code people
wrote: each held-out line of `bench heldout` (standard-library files no model of ours
trained on; the line cleared after its indentation, as that benchmark asks) written back
as the fill, and each canonical middle of HumanEval-Infilling's single- and multi-line
tasks.  It counts the lines the syntax check passes and, of those, the ones the names
check rejects (each printed, with why), and times, per held-out line, the syntax check
(tree-sitter and CPython, whose compile of the statements around the span is new with
the names check: timed with and without it) and the names check (names, their order
and calls), min and median of `--repeats` fresh documents.  It also counts where a
binding hint (`bindingHints`, `PythonSyntax.wanted`) would be asked for: the lines whose
code below reads a name nothing binds before it once the line is cleared, and of those
the ones that still leave it so with the person's line written back (where the hint's
pass would run though the line was right); and where a return hint (`returnHints`,
`PythonSyntax.return_needed`) would be, were the model to write nothing: the lines
whose clearing leaves a function that must give a value falling off its end, and of
those the ones the person began with `return`; and where a tally hint (`tallyHints`,
`PythonSyntax.idle_tallies`) would be: the lines whose clearing leaves idle a local a
loop around them is there to update, and of those the ones the person began with its
name; and where a value hint (`valueHints`, `PythonSyntax.unread_values`) would be: the
lines that, written back, leave a value the function has (a local worked out above them,
a plain function's parameter) read nowhere and have a place for its name (where the
hint's pass would run though the line was right), and the lines whose clearing leaves
one so, and of those the ones that read it.
The names check counts the reach check's rejections (python_reach) too.

    OMP_NUM_THREADS=1 python benchmarks/names_check.py --lines 3000
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import Counter

from dlm_lsp import python_syntax
from dlm_lsp.arguments import positive
from dlm_lsp.bench.heldout import heldout_files
from dlm_lsp.bench.humaneval import load_tasks
from dlm_lsp.bench.lines import line_tasks
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import run_script
from dlm_lsp.binding_hints import begin_binding, hint_place
from dlm_lsp.python_values import value_hint
from dlm_lsp.validation import parsed_document


def _checked(prefix: str, middle: str, suffix: str) -> tuple[bool, tuple[str, ...], float,
                                                             float]:
    """(syntax valid, names rejected, ms of the syntax check, ms of the names check) of
    `middle` written back between `prefix` and `suffix`, on a fresh document."""
    document = parsed_document(prefix + suffix, "python")
    at = len(prefix)
    began = time.perf_counter()
    verdict = document.validate(at, at, middle)
    syntax_ms = (time.perf_counter() - began) * 1000
    began = time.perf_counter()
    named = document.names_checked(at, at, middle, verdict)
    names_ms = (time.perf_counter() - began) * 1000
    return verdict.valid, named.names, syntax_ms, names_ms


def _wanted(prefix: str, middle: str, suffix: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the names the code below wants with the line cleared, those it wants with
    `middle` written back) on a fresh document."""
    document = parsed_document(prefix + suffix, "python")
    at = len(prefix)
    return tuple(document.wanted(at, at)), tuple(document.wanted(at, at, middle))


def _hints(tasks, kind: str) -> str:
    """The binding hints' count over `tasks` (each one printed where the line itself
    leaves a name wanted)."""
    asked = left = 0
    for task in tasks:
        cleared, written = _wanted(task.prefix, task.middle, task.suffix)
        asked += bool(cleared)
        left += bool(written)
        if written:
            print(f"  still wanted: {task.task_id} {task.middle.strip()[:60]!r}: {written}")
    return (f"{kind}: a binding hint asked for by {asked} of {len(tasks)} with the line "
            f"cleared, by {left} with the line written back")


def _begun(prefix: str, middle: str, suffix: str) -> tuple[str, bool] | None:
    """(how a binding hint would begin the line, whether the line begins so) where the
    code below the cleared line wants a name, as `InfillRun.bind_hint` asks before any
    fill: a statement's hint, or a block's header where the code below is indented
    deeper than a statement could be (`binding_hints`); None where none is asked for."""
    document = parsed_document(prefix + suffix, "python")
    at = len(prefix)
    place = hint_place(prefix + suffix, at, at)
    if place is None:
        return None
    calls = place.slot is not None
    needed = document.wanted(at, at, place.empty, calls=calls)
    hint = begin_binding(needed, needed[0], place.below, place.slot) if needed else None
    if hint is None:
        return None
    kind = "header" if calls else "statement"
    return kind, middle.lstrip().startswith(hint.text)


def _begins(tasks, kind: str) -> str:
    """How often the hints asked for before any fill begin the line as it was written."""
    counts = Counter(_begun(t.prefix, t.middle, t.suffix) for t in tasks)
    return (f"{kind}: a statement's hint asked for by "
            f"{counts['statement', True] + counts['statement', False]}, beginning the line "
            f"in {counts['statement', True]}; a header's by "
            f"{counts['header', True] + counts['header', False]}, beginning it in "
            f"{counts['header', True]}")


def _returns(tasks, kind: str) -> str:
    """How often a return hint would be asked for with the line cleared, and how often
    the line as written begins with `return` there (each other one printed)."""
    asked = begun = 0
    for task in tasks:
        at = len(task.prefix)
        need = parsed_document(task.prefix + task.suffix, "python").return_needed(at, at, "")
        if need is None:
            continue
        asked += 1
        if task.middle.lstrip().startswith("return"):
            begun += 1
        else:
            print(f"  return asked for: {task.task_id} {task.middle.strip()[:60]!r}")
    return (f"{kind}: a return hint asked for by {asked} of {len(tasks)} with the line "
            f"cleared, the line written beginning with `return` in {begun}")


def _tallies(tasks, kind: str) -> str:
    """How often a tally hint would be asked for with the line cleared (a local a loop
    around it is there to update left as it began), and how often the line as written
    begins with that local's name (each other one printed)."""
    asked = begun = 0
    for task in tasks:
        at = len(task.prefix)
        idle = parsed_document(task.prefix + task.suffix, "python").idle_tallies(at, at, "")
        if not idle:
            continue
        asked += 1
        if task.middle.lstrip().startswith(idle[0]):
            begun += 1
        else:
            print(f"  tally asked for: {task.task_id} {idle[0]!r}: {task.middle.strip()[:60]!r}")
    return (f"{kind}: a tally hint asked for by {asked} of {len(tasks)} with the line "
            f"cleared, the line written beginning with its local's name in {begun}")


def _values(tasks, kind: str) -> str:
    """How often a value hint would be asked for with the line as written (each printed)
    and with the line cleared, and how often the line as written then reads the value."""
    written = cleared = reads = 0
    for task in tasks:
        at = len(task.prefix)
        document = parsed_document(task.prefix + task.suffix, "python")
        if value_hint(task.middle, document.unread_values(at, at, task.middle)) is not None:
            written += 1
            print(f"  value asked for as written: {task.task_id} {task.middle.strip()[:60]!r}")
        unread = document.unread_values(at, at, "")
        if unread:
            cleared += 1
            reads += re.search(rf"\b{re.escape(unread[0])}\b", task.middle) is not None
    return (f"{kind}: a value hint asked for by {written} of {len(tasks)} with the line "
            f"written; a value left unread by {cleared} with the line cleared, the line "
            f"written reading it in {reads}")


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} ms" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=positive, default=3000,
                        help="held-out lines (default 3000)")
    parser.add_argument("--repeats", type=positive, default=3,
                        help="timed runs of each held-out line (default 3)")
    args = parser.parse_args()
    print(machine_line(describe_machine("cpu")))
    valid = flagged = 0
    syntax_ms: list[float] = []
    names_ms: list[float] = []
    tasks = line_tasks(heldout_files(), args.lines)
    for task in tasks:
        runs = [_checked(task.prefix, task.middle, task.suffix) for _ in range(args.repeats)]
        ok, names, _, _ = runs[0]
        valid += ok
        flagged += bool(names)
        if names:
            print(f"  rejected: {task.task_id} {task.middle.strip()!r}: {names}")
        syntax_ms.append(min(r[2] for r in runs))
        names_ms.append(min(r[3] for r in runs))
    python_syntax.compile = lambda *args, **kwargs: None  # the syntax check as it was
    try:
        parse_only = [min(_checked(t.prefix, t.middle, t.suffix)[2] for _ in range(args.repeats))
                      for t in tasks]
    finally:
        del python_syntax.compile  # the builtin again
    print(f"held-out lines: {len(tasks)}, syntax valid {valid}, rejected by the names "
          f"check {flagged}")
    print(f"  per line, min / median: syntax check {_spread(syntax_ms)} (without the "
          f"compile: {_spread(parse_only)}); names check {_spread(names_ms)}")
    print(_hints(tasks, "held-out lines"))
    print(_begins(tasks, "held-out lines"))
    print(_returns(tasks, "held-out lines"))
    print(_tallies(tasks, "held-out lines"))
    print(_values(tasks, "held-out lines"))
    for split in ("single-line", "multi-line"):
        valid = flagged = 0
        for task in load_tasks(split):
            ok, names, _, _ = _checked(task.prefix, task.middle, task.suffix)
            valid += ok
            flagged += bool(names)
            if names:
                print(f"  rejected: {task.task_id}: {names}")
        print(f"HumanEval-Infilling {split} canonical middles: {len(load_tasks(split))}, "
              f"syntax valid {valid}, rejected by the names check {flagged}")
        print(_hints(load_tasks(split), f"HumanEval-Infilling {split}"))
        print(_begins(load_tasks(split), f"HumanEval-Infilling {split}"))
        print(_returns(load_tasks(split), f"HumanEval-Infilling {split}"))
        print(_tallies(load_tasks(split), f"HumanEval-Infilling {split}"))
        print(_values(load_tasks(split), f"HumanEval-Infilling {split}"))


if __name__ == "__main__":
    run_script(main)
