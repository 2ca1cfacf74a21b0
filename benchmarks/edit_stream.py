"""A stream of keystrokes into a large file, then fills at places across it.

`typing_cost.py` asks for ghost text after every keystroke; an editor whose requests
are debounced, or a user who types and then asks, sends many didChange notifications
and then a request.  This opens the same documents (`typing_cost.build`: standard-library
modules joined for Python, generated data and functions for JavaScript) in the real
server in-process, waits for the parse made when a large file is opened, types `--edits`
characters at the typing site one didChange each, and then asks for ghost text there and
at 10%, 50% and 90% of the file, and for `dlm/infill` after a `return ` at 30% and 70%.
It reports each didChange's time (wall and CPU, on the event loop) and, for each request,
its wall time, the CPU time of every thread outside the model's forward passes, and the
parse of the new version and the fills' validation within it (`typing_cost.STAGES`).

`--other-file` measures instead what a large file being parsed costs ghost text in a
small file: the small file's request alone, and 50 ms after the large file's didOpen
(the server parses a large file when it is opened, on a thread of its own).

    OMP_NUM_THREADS=1 python benchmarks/edit_stream.py --lines 5000 20000 50000
    OMP_NUM_THREADS=1 python benchmarks/edit_stream.py --other-file --lines 50000 120000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from forward_passes import time_forward_passes
from typing_cost import FORWARD, LANGUAGES, STAGES, Editor, Stages, build, record_results

from dlm_lsp.arguments import positive
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.documents import find_document

PARSED = "document parsed (validation.parsed_document)"
VALIDATED = "validation (tree-sitter, CPython)"
SMALL = "def total(a, b):\n    \n\nprint(total(1, 2))\n"


async def started(stages: Stages) -> Editor:
    """A server in-process, initialized, its model loaded and its passes timed."""
    editor = Editor()
    await editor.request("initialize", {"processId": None, "rootUri": None,
                                        "capabilities": {}, "initializationOptions": {}})
    editor.send("initialized", {})
    model = await asyncio.get_running_loop().run_in_executor(None, lambda: editor.ls.engine.model)
    time_forward_passes(model, lambda owner, name, label: stages.time(owner, name, FORWARD))
    return editor


def position(text: str, at: int) -> dict:
    """The LSP position of offset `at` (the lines asked at are ASCII: UTF-16 too)."""
    return {"line": text.count("\n", 0, at), "character": at - (text.rfind("\n", 0, at) + 1)}


async def timed(editor: Editor, stages: Stages, method: str, params: dict) -> dict:
    stages.take()
    began, cpu = time.perf_counter(), time.process_time()
    await editor.request(method, params)
    took = {"wall": (time.perf_counter() - began) * 1000,
            "cpu": (time.process_time() - cpu) * 1000, **stages.take()}
    return {"method": method, "wall": took["wall"],
            "outside": took["cpu"] - took.get(FORWARD, 0.0),
            "parsed": took.get(PARSED, 0.0), "validated": took.get(VALIDATED, 0.0)}


async def stream(language: str, lines: int, edits: int, stages: Stages) -> dict:
    """Open, type `edits` characters, then ask at the places the module docstring names."""
    site, typed, filler = LANGUAGES[language]
    text, at = build(site(), filler(), lines)
    editor = await started(stages)
    uri = f"file:///bench/big.{'py' if language == 'python' else 'js'}"
    editor.send("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": language, "version": 1, "text": text}})
    await asyncio.get_running_loop().run_in_executor(
        None, lambda: editor.ls.parser.submit(lambda: None).result())  # the open's parse done
    where, changes = position(text, at), []
    for version, char in enumerate((typed * (edits // len(typed) + 1))[:edits], 2):
        began, cpu = time.perf_counter(), time.thread_time()
        editor.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": where, "end": where}, "text": char}]})
        changes.append(((time.perf_counter() - began) * 1000,
                        (time.thread_time() - cpu) * 1000))
        where = ({"line": where["line"] + 1, "character": 0} if char == "\n"
                 else {"line": where["line"], "character": where["character"] + 1})
    now = find_document(editor.ls.workspace, uri).source
    ghosts = [where] + [position(now, now.find(" = ", int(len(now) * f)) + 3)
                        for f in (0.1, 0.5, 0.9)]
    infills = [position(now, now.find("return ", int(len(now) * f)) + 7) for f in (0.3, 0.7)]
    requests = [await timed(editor, stages, "textDocument/inlineCompletion", {
        "textDocument": {"uri": uri}, "position": p, "context": {"triggerKind": 2}})
        for p in ghosts]
    requests += [await timed(editor, stages, "dlm/infill", {
        "textDocument": {"uri": uri}, "range": {"start": p, "end": p}}) for p in infills]
    editor.send("textDocument/didClose", {"textDocument": {"uri": uri}})
    editor.ls.worker.shutdown(wait=True)
    editor.ls.engine.close()
    return {"language": language, "lines": text.count("\n") + 1, "chars": len(text),
            "changes": changes, "requests": requests}


async def other_file(lines: int, rounds: int, stages: Stages) -> dict:
    """Ghost text in a small file alone, and 50 ms after a large file's didOpen."""
    site, _, filler = LANGUAGES["python"]
    text, _ = build(site(), filler(), lines)
    editor, names = await started(stages), iter(range(10 ** 6))

    async def small() -> float:
        uri = f"file:///bench/small{next(names)}.py"  # a new text each: no fill remembered
        editor.send("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1,
            "text": SMALL.replace("total", f"total{uri[-6:-3]}")}})
        asked = await timed(editor, stages, "textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": 1, "character": 4},
            "context": {"triggerKind": 2}})
        return asked["wall"]

    await small()  # the first fill of a server warms what it builds once
    alone, beside = [], []
    for k in range(rounds):
        alone.append(await small())
        uri = f"file:///bench/large{k}.py"
        editor.send("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": text}})
        await asyncio.sleep(0.05)
        beside.append(await small())
        editor.send("textDocument/didClose", {"textDocument": {"uri": uri}})
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: editor.ls.parser.submit(lambda: None).result())
    editor.ls.worker.shutdown(wait=True)
    editor.ls.engine.close()
    return {"chars": len(text), "alone": alone, "beside": beside}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=positive, nargs="+", default=[5000, 20_000, 50_000])
    parser.add_argument("--languages", nargs="+", choices=list(LANGUAGES),
                        default=list(LANGUAGES))
    parser.add_argument("--edits", type=positive, default=200,
                        help="keystrokes before the requests")
    parser.add_argument("--other-file", action="store_true",
                        help="instead: ghost text in a small file while a large one is parsed")
    parser.add_argument("--rounds", type=positive, default=5, help="with --other-file")
    parser.add_argument("--json", dest="json_out", help="write the numbers (JSON)")
    args = parse_script_arguments(parser)
    stages, results = Stages(), []
    for owner, name, stage in STAGES:
        stages.time(owner, name, stage)
    record_results([])
    print(f"machine: {machine_line(describe_machine('cpu'))}", flush=True)
    for lines in args.lines:
        if args.other_file:
            got = asyncio.run(other_file(lines, args.rounds, stages))
            print(f"{got['chars'] / 1e6:.1f} M characters: small-file ghost text, ms wall: "
                  f"alone {statistics.median(got['alone']):.0f} (median of {args.rounds}), "
                  f"50 ms after the large file's didOpen "
                  f"{statistics.median(got['beside']):.0f} {[round(x) for x in got['beside']]}",
                  flush=True)
            results.append(got)
            continue
        for language in args.languages:
            got = asyncio.run(stream(language, lines, args.edits, stages))
            results.append(got)
            wall = sorted(w for w, _ in got["changes"])
            print(f"{language}, {got['lines']:,} lines ({got['chars'] / 1e6:.2f} M characters): "
                  f"didChange p50 {wall[len(wall) // 2]:.2f} ms wall, "
                  f"{statistics.median(c for _, c in got['changes']):.2f} ms CPU, "
                  f"p95 {wall[int(len(wall) * 0.95)]:.2f} ms wall", flush=True)
            for asked in got["requests"]:
                print(f"  {asked['method']}: {asked['wall']:.0f} ms wall, "
                      f"{asked['outside']:.0f} ms CPU outside the model (parse "
                      f"{asked['parsed']:.1f}, validation {asked['validated']:.1f})", flush=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"machine": describe_machine("cpu"), "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
