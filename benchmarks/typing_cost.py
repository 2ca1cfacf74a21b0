"""What typing in a big file costs the server outside the model, edit by edit.

A user types into a file of 2,000 to 70,000 lines: each keystroke is a `didChange`
and, in an editor with ghost text, a `textDocument/inlineCompletion` right after it.
This runs the real server in-process (`build_server`, every message through pygls'
JSON-RPC protocol as the stdio transport hands it over: parsed, structured, handled,
answered as JSON) with the shipped model, and times each stage of each edit and
request in CPU time (`Stages`), which a busy machine disturbs less than wall time.
The model's forward passes are timed too and taken out: what is left is what the
server spends around them, which should not grow with the file.

Each document is the same typing site (a class between fixed neighbours) in the
middle of filler: standard-library modules joined for Python, and for JavaScript
generated data literals and the small functions that look them up (as bundles and
1 MB JSON-ish files read).  The model sees at most `maxContextTokens` around the
cursor, all of it from the site, so every size gets the same fills, and the sizes
differ only in what the server does with the rest of the file.

    OMP_NUM_THREADS=1 python benchmarks/typing_cost.py --lines 2000 10000 30000 70000

`--fills-out FILE` writes every request's suggestions and the engine's candidates
behind them (verdicts, scores, passes), to check that a change leaves them
identical; `--profile FILE` writes a cProfile of the edits and the engine's fills
(every size together); `--memory DOCS` measures instead what the server keeps of
each open document, and of each parse kept for validation.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import itertools
import json
import os
import random
import statistics
import sysconfig
import threading
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from forward_passes import time_forward_passes
from lsp_latency import server_settings

from dlm_lsp import engine, protocol, sampler, server
from dlm_lsp.arguments import positive
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.documents import find_document
from dlm_lsp.passes import InfillRun
from dlm_lsp.recent import RecentFills
from dlm_lsp.validation import ParsedDocument, parsed_document

# The class typed into, between fixed neighbours (`python_site`, `javascript_site`):
# `CURSOR` marks where.
CURSOR = "⟦⟧"
PY_LEDGER = '''

class Ledger:
    """Running totals of one owner's entries."""

    def __init__(self, owner):
        self.owner = owner
        self.entries = []
        self.balance = 0

    def add(self, amount, note=""):
        if amount == 0:
            raise ValueError("an entry moves money")
        self.entries.append((amount, note))
        self.balance += amount
        return self.balance

    def total(self, kind=None):
        ⟦⟧

    def undo(self):
        amount, _ = self.entries.pop()
        self.balance -= amount
        return amount


'''
PY_TYPED = "result = sum(amount for amount, note in self.entries if kind in note)"

JS_LEDGER = '''

export class Ledger {
  constructor(owner) {
    this.owner = owner;
    this.entries = [];
    this.balance = 0;
  }

  add(amount, note = "") {
    if (amount === 0) {
      throw new Error("an entry moves money");
    }
    this.entries.push([amount, note]);
    this.balance += amount;
    return this.balance;
  }

  total(kind) {
    ⟦⟧
  }

  undo() {
    const [amount] = this.entries.pop();
    this.balance -= amount;
    return amount;
  }
}

'''
JS_TYPED = "const sum = this.entries.reduce((all, [amount]) => all + amount, 0);"
STDLIB = Path(sysconfig.get_paths()["stdlib"])


def python_filler() -> Iterator[str]:
    """Standard-library modules, each valid on its own, in a fixed order."""
    for path in sorted(STDLIB.glob("*.py")):
        yield path.read_text(encoding="utf-8", errors="replace").rstrip("\n") + "\n"


def python_site() -> str:
    """The class between two whole modules: every size shows the model the same
    context (at most `maxContextTokens`, a few thousand characters) around the cursor."""
    return ((STDLIB / "textwrap.py").read_text() + PY_LEDGER
            + (STDLIB / "shlex.py").read_text())


def javascript_filler(seed: int = 0) -> Iterator[str]:
    """Generated JavaScript as bundles and data files read: object literals of data
    (JSON-ish, some of it not ASCII, as translations are) and the small functions that
    look them up, from a fixed seed."""
    rng = random.Random(seed)
    words = sorted({w for w in (STDLIB / "this.py").read_text().split() if w.isalpha()})
    words += ["naïve", "Zürich", "→ next", "日本語"]
    for k in itertools.count():
        table = {rng.choice(words): {"id": rng.randrange(10 ** 6), "tags": rng.sample(words, 3),
                                     "weight": round(rng.random(), 4), "on": rng.random() < 0.5}
                 for _ in range(rng.randrange(3, 12))}
        yield (f"export const TABLE_{seed}_{k} = {json.dumps(table, indent=2, ensure_ascii=False)};"
               f"\n\nfunction lookup{seed}_{k}(key, fallback) {{\n"
               f"  const row = TABLE_{seed}_{k}[key];\n"
               f"  if (row === undefined || !row.on) {{\n"
               f"    return fallback;\n"
               f"  }}\n"
               f"  return {{ ...row, weight: row.weight * {k % 7 + 1} }};\n"
               f"}}\n")


def javascript_site() -> str:
    """The class between generated code of its own (another seed): as `python_site`."""
    near = javascript_filler(seed=1)
    return ("\n".join(itertools.islice(near, 8)) + JS_LEDGER
            + "\n".join(itertools.islice(near, 8)))


def build(site: str, filler: Iterator[str], lines: int) -> tuple[str, int]:
    """The site (its cursor marked) in the middle of filler, about `lines` lines in all;
    the text and the cursor's offset."""
    assert site.count(CURSOR) == 1
    at = site.index(CURSOR)
    before, after = [], []
    counts = [site[:at].count("\n"), site[at:].count("\n")]
    while sum(counts) < lines:  # each module to the side with fewer lines
        side = counts.index(min(counts))
        (before, after)[side].append(next(filler))
        counts[side] += (before, after)[side][-1].count("\n") + 1
    head = "\n".join(before) + "\n"
    return head + site.replace(CURSOR, "") + "\n".join(after), len(head) + at


class Stages:
    """CPU time of named stages, summed per edit or request: each stage runs on one
    thread, and its thread's CPU time (`time.thread_time`) changes less than wall time
    when other processes share the machine.  The server's threads run one fill at a
    time here, so the stages of one request never overlap another's."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()

    def time(self, owner: object, name: str, stage: str) -> None:
        """Replace owner.name by a wrapper that adds its thread's CPU time to `stage`."""
        original: Callable = getattr(owner, name)

        def wrapper(*args, **kwargs):
            began = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    self.ms[stage] += (time.thread_time() - began) * 1000
        setattr(owner, name, wrapper)

    def take(self) -> dict[str, float]:
        with self._lock:
            taken, self.ms = dict(self.ms), defaultdict(float)
        return taken


FORWARD = "model: forward passes"
# (owner, attribute, stage): what is timed.  Stages may nest: the sampler's steps hold the
# early stop's validation.
STAGES = [
    (protocol, "apply_changes", "didChange: the edit applied (documents.apply_changes)"),
    (server, "range_offsets", "positions to offsets (documents.range_offsets)"),
    (engine, "for_the_model", "line endings (line_endings.for_the_model)"),
    (engine, "plan_span", "span plan (policy.plan_span: span_kind parses local lines)"),
    (engine, "reproducible_layout", "context tokenized (span.reproducible_layout)"),
    (RecentFills, "typed_along", "recent fills: typed along"),
    (RecentFills, "get", "recent fills: exact"),
    (RecentFills, "remember_typed", "recent fills: remembered"),
    (engine, "document_for", "document parsed (validation.parsed_document)"),
    (sampler.Denoising, "advance", "sampler steps (bookkeeping around the logits)"),
    (ParsedDocument, "validate", "validation (tree-sitter, CPython)"),
    (InfillRun, "fill_text", "fills shaped (indentation, units)"),
]


class Wire:
    """The client's end of the connection: the answers the server writes, by id."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future] = {}

    def write(self, data: bytes) -> None:
        message = json.loads(data.split(b"\r\n\r\n", 1)[1])
        if "method" not in message and message.get("id") in self.waiting:
            self.waiting.pop(message["id"]).set_result(message)

    def close(self) -> None:
        pass


class Editor:
    """Messages into an in-process server, each handled as the stdio transport hands
    one over (transport._handle): JSON parsed and structured by pygls' protocol."""

    def __init__(self) -> None:
        self.ls = server.build_server()
        self.wire = Wire()
        self.ls.protocol.set_writer(self.wire)
        self.ids = iter(range(1, 10 ** 9))

    def send(self, method: str, params: dict, msg_id: int | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if msg_id is not None:
            message["id"] = msg_id
        body = json.dumps(message).encode()
        self.ls.protocol.handle_message(
            json.loads(body, object_hook=self.ls.protocol.structure_message))

    async def request(self, method: str, params: dict) -> dict:
        msg_id = next(self.ids)
        answer = self.wire.waiting[msg_id] = asyncio.get_running_loop().create_future()
        self.send(method, params, msg_id)
        message = await answer
        if "error" in message:
            raise RuntimeError(f"{method}: {message['error']}")
        return message["result"]


def record_results(into: list[dict]) -> None:
    """Keep what each fill of the engine returned: every candidate (the syntax check's
    verdict and the score too), its passes and the path of the best."""
    original = engine.Engine.infill

    def recorded(self, req):
        result = original(self, req)
        into.append({"candidates": [[c.text, c.valid, round(c.score, 6)]
                                    for c in result.candidates],
                     "passes": result.steps, "path": result.path, "reused": result.reused})
        return result
    engine.Engine.infill = recorded


async def session(language: str, text: str, at: int, typed: str, settings: dict,
                  stages: Stages, engine_results: list[dict]) -> dict:
    """Open `text`, ask for ghost text at `at`, then type `typed` there a character at
    a time, each keystroke a didChange and an inlineCompletion request; the ms of each,
    and what each request suggested and the engine's fills behind it."""
    editor = Editor()
    await editor.request("initialize", {"processId": None, "rootUri": None, "capabilities": {},
                                        "initializationOptions": settings})
    editor.send("initialized", {})
    model = await asyncio.get_running_loop().run_in_executor(None, lambda: editor.ls.engine.model)
    time_forward_passes(model, lambda owner, name, label: stages.time(owner, name, FORWARD))
    stages.take()
    uri = f"file:///bench/big.{'py' if language == 'python' else 'js'}"
    began = time.perf_counter()
    editor.send("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": language, "version": 1, "text": text}})
    opened = (time.perf_counter() - began) * 1000
    line = text.count("\n", 0, at)
    column = at - (text.rfind("\n", 0, at) + 1)  # the site's lines are ASCII: UTF-16 too

    async def ghost() -> tuple[dict, dict[str, float]]:
        began, cpu = time.perf_counter(), time.process_time()
        answer = await editor.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": column},
            "context": {"triggerKind": 2}})
        took = {"total": (time.perf_counter() - began) * 1000,
                "cpu": (time.process_time() - cpu) * 1000, **stages.take()}
        fills = {"suggested": [item["insertText"] for item in answer["items"]],
                 "engine": engine_results[:]}
        engine_results.clear()
        return fills, took

    texts, first = await ghost()
    edits, requests, fills = [], [], [texts]
    for version, char in enumerate(typed, 2):
        began, cpu = time.perf_counter(), time.thread_time()  # handled on this thread
        editor.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": line, "character": column},
                                          "end": {"line": line, "character": column}},
                                "text": char}]})
        edits.append({"total": (time.perf_counter() - began) * 1000,
                      "cpu": (time.thread_time() - cpu) * 1000, **stages.take()})
        column += 1
        texts, took = await ghost()
        fills.append(texts)
        requests.append(took)
    # closed, so that what validation keeps of it (process-wide) goes: the next round's
    # first request parses it whole again, as this one's did
    editor.send("textDocument/didClose", {"textDocument": {"uri": uri}})
    editor.ls.worker.shutdown(wait=True)
    editor.ls.engine.close()
    return {"open": opened, "first": first, "edits": edits, "requests": requests,
            "fills": fills}


def rss() -> int:
    """The process's resident memory in bytes."""
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def kept(language: str, text: str, at: int, docs: int) -> dict:
    """Memory per open document: `docs` copies of `text` opened and each edited once (as
    the server keeps them, up to maxOpenDocuments), then each parsed as validation
    keeps a document (the last 16 validated)."""
    editor = Editor()
    await editor.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    line = text.count("\n", 0, at)
    uris = [f"file:///bench/kept{k}.{'py' if language == 'python' else 'js'}"
            for k in range(docs)]
    gc.collect()
    tracemalloc.start()  # Python's own memory, exactly (the texts, their line tables)
    for uri in uris:  # each text its own string, parsed from its own message
        editor.send("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": 1, "text": text}})
        editor.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{
                "range": {"start": {"line": line, "character": 0},
                          "end": {"line": line, "character": 0}}, "text": "x"}]})
    gc.collect()
    opened, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    before = rss()  # tree-sitter's trees are C memory, which tracemalloc does not see
    for uri in uris:
        doc = find_document(editor.ls.workspace, uri)
        parsed_document(doc.source, language, uri)
    gc.collect()
    parsed = rss()
    for uri in uris:
        editor.ls.close_document(uri)
    return {"open": opened / docs, "parsed": (parsed - before) / docs}


LANGUAGES = {"python": (python_site, PY_TYPED, python_filler),
             "javascript": (javascript_site, JS_TYPED, javascript_filler)}


def median(rows: list[dict], key: str) -> float:
    return statistics.median(row.get(key, 0.0) for row in rows)


def outside(rows: list[dict]) -> float:
    """The median CPU a request took outside the model's forward passes (all threads)."""
    return statistics.median(row["cpu"] - row.get(FORWARD, 0.0) for row in rows)


def report(results: list[dict]) -> str:
    """The stage x size table: median ms per keystroke's edit and request (wall time
    where it says so, else CPU time)."""
    out = []
    for language in dict.fromkeys(r["language"] for r in results):
        runs = [r for r in results if r["language"] == language]
        head = " | ".join(f"{r['lines']:,} lines ({r['chars'] / 1e6:.2f} M chars)" for r in runs)
        keys = len(runs[0]["requests"]) // runs[0]["rounds"]
        out += [f"{language}: median ms per keystroke, {keys} keystrokes x {runs[0]['rounds']} "
                "rounds", "", f"| stage | {head} |", "| --- |" + " ---: |" * len(runs)]

        def row(name: str, values: list[float], out: list[str] = out) -> None:
            out.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values) + " |")
        row("didChange, wall (JSON in to the edit applied)",
            [median(r["edits"], "total") for r in runs])
        row("didChange, CPU", [median(r["edits"], "cpu") for r in runs])
        row(STAGES[0][2], [median(r["edits"], STAGES[0][2]) for r in runs])
        row("inlineCompletion, wall (JSON in to the answer)",
            [median(r["requests"], "total") for r in runs])
        row(FORWARD, [median(r["requests"], FORWARD) for r in runs])
        row("CPU outside the model (every thread)", [outside(r["requests"]) for r in runs])
        for _, _, stage in STAGES[1:]:
            row(stage, [median(r["requests"], stage) for r in runs])
        row("first request after didOpen, wall (parses the whole document)",
            [median(r["first"], "total") for r in runs])
        row("  CPU outside the model", [outside(r["first"]) for r in runs])
        row("didOpen, wall", [statistics.median(r["open"]) for r in runs])
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=positive, nargs="+", default=[2000, 10_000, 30_000, 70_000])
    parser.add_argument("--languages", nargs="+", choices=list(LANGUAGES),
                        default=list(LANGUAGES))
    parser.add_argument("--keys", type=positive, default=30, help="keystrokes typed per document")
    parser.add_argument("--rounds", type=positive, default=3, help="each size typed this often, "
                        "each time in a new server")
    parser.add_argument("--settings", default="{}", help="initializationOptions (JSON)")
    parser.add_argument("--fills-out", help="write each request's suggestions and the "
                        "engine's candidates (JSON)")
    parser.add_argument("--json", dest="json_out", help="write the numbers (JSON)")
    parser.add_argument("--profile", dest="profile_out",
                        help="write a cProfile of the engine and the edits")
    parser.add_argument("--memory", type=int, metavar="DOCS",
                        help="instead: the memory kept per document, over DOCS of each size")
    args = parse_script_arguments(parser)
    if args.memory:
        for language in args.languages:
            site, _, filler = LANGUAGES[language]
            for lines in args.lines:
                text, at = build(site(), filler(), lines)
                took = asyncio.run(kept(language, text, at, args.memory))
                print(f"{language}, {text.count(chr(10)) + 1:,} lines, {len(text) / 1e6:.2f} M "
                      f"characters: {took['open'] / 1e6:.2f} MB an open document, "
                      f"{took['parsed'] / 1e6:.2f} MB its parse kept for validation", flush=True)
        return
    settings = server_settings(args.settings)
    stages = Stages()
    for owner, name, stage in STAGES:
        stages.time(owner, name, stage)
    engine_results: list[dict] = []
    record_results(engine_results)
    profile = cProfile.Profile() if args.profile_out else None
    if profile is not None:  # the engine's worker thread and the event loop's edits alike
        for owner, name in ((engine.Engine, "infill"), (protocol, "apply_changes")):
            original = getattr(owner, name)

            def profiled(*a, original=original, **k):
                profile.enable()
                try:
                    return original(*a, **k)
                finally:
                    profile.disable()
            setattr(owner, name, profiled)
    results, fills = [], {}
    for language in args.languages:
        site, typed, filler = LANGUAGES[language]
        for lines in args.lines:
            text, at = build(site(), filler(), lines)
            runs = [asyncio.run(session(language, text, at, typed[:args.keys], settings,
                                        stages, engine_results)) for _ in range(args.rounds)]
            result = {"language": language, "lines": text.count("\n") + 1, "chars": len(text),
                      "rounds": args.rounds, "open": [r["open"] for r in runs],
                      "first": [r["first"] for r in runs],
                      "edits": [e for r in runs for e in r["edits"]],
                      "requests": [q for r in runs for q in r["requests"]]}
            results.append(result)
            fills[f"{language} {lines}"] = [r["fills"] for r in runs]
            print(f"{language} {result['lines']} lines: request p50 "
                  f"{median(result['requests'], 'total'):.1f} ms", flush=True)
    print(f"machine: {machine_line(describe_machine('cpu'))}")
    print(report(results))
    if args.fills_out:
        Path(args.fills_out).write_text(json.dumps(fills, indent=1) + "\n")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"machine": describe_machine("cpu"), "results": results}, indent=1) + "\n")
    if profile is not None:
        profile.dump_stats(args.profile_out)


if __name__ == "__main__":
    run_script(main)
