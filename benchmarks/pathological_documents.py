"""Documents whose content is pathological, driven through the real server as an editor.

Users open such files every day: a minified bundle (one line of megabytes), a
generated module with one 500,000-character line among normal code, a data file of a
million short lines, brackets nested tens of thousands deep, text holding NUL bytes,
form feeds, a byte order mark, U+2028/U+2029 or a lone surrogate (`\\ud800` in the
JSON), a megabyte selected to rewrite, 10,000 `<FILL>` holes, a cursor at the
document's first and last offset, an empty document.  An editor expects an answer (a
fill, or a quick refusal or empty list) in about the time a normal file takes, a
server still alive and answering afterwards, and its document never corrupted.

This runs the real server in-process (`build_server`, every message through pygls'
JSON-RPC protocol as the stdio transport hands it over; typing_cost.Editor) with the
shipped model and default settings, one server for every case as an editor keeps
one.  Each case: didOpen, four didChange at its cursor (two characters typed, then
deleted), ghost text and completion at each of its cursors, the code actions there
and on its selection, `dlm.rewriteSelection` and `dlm.fillHoles` where it has a
selection or holes (the edit the server asks for applied as an editor does, and sent
back as a didChange), `dlm/status`, and last a ghost-text request in a small normal
file (`fixtures/hello.py`) to see that the server still answers as fast as before.
Printed per step: wall time, the model's forward passes within it, the peak resident
memory of the process while it ran, and what came back; at the end of each case,
whether the server's copy of the document is the editor's.

    OMP_NUM_THREADS=1 python benchmarks/pathological_documents.py
    OMP_NUM_THREADS=1 python benchmarks/pathological_documents.py --cases nested-brackets

`--request-timeout S` gives up waiting on one request (and cancels it) after S seconds;
`--holes-seconds S` lets "fill holes" run S seconds before its progress is cancelled,
as a user would; `--json FILE` writes every step, and `--table FILE...` prints the
summary of such files.  To compare commits, run each case in a process of its own
(`--cases NAME --json NAME.json`, one after another): work a case leaves running on
the server's threads (a fill past its timeout) slows the cases after it, and a process
may then take minutes to exit.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import re
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from forward_passes import time_forward_passes
from lsp_latency import server_settings
from typing_cost import Editor, rss

from dlm_lsp.arguments import positive_amount
from dlm_lsp.bench.machine import describe_machine, machine_line
from dlm_lsp.bench.script import parse_script_arguments, run_script
from dlm_lsp.documents import find_document

ROOT = Path(__file__).resolve().parents[1]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
HELLO = (ROOT / "fixtures" / "hello.py").read_text().replace("<FILL>", "")
HELLO_URI = "file:///p/hello.py"


@dataclass
class Case:
    """One document and where the editor asks in it."""

    name: str
    uri: str
    language: str
    text: str
    cursors: list[tuple[str, int]]  # (label, offset): ghost text and completion there
    selection: tuple[int, int] | None = None  # a selection to offer and rewrite
    holes: bool = False  # run "fill holes"
    about: str = ""


def line_of(text: str, offset: int) -> tuple[int, int]:
    """The LSP position (UTF-16) of `offset` in `text` (lines end at \\n only here)."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    piece = text[start:offset]
    return line, len(piece.encode("utf-16-le", "surrogatepass")) // 2


def minified(size: int) -> str:
    """A bundle as minifiers write it: one line, one IIFE around small functions."""
    parts, k = ['!function(){"use strict";var e={};'], 0
    while sum(map(len, parts)) < size:
        parts.append(f'function a{k}(t,n){{if(!t)return n;var r=t.k{k % 97}||[],o=0;'
                     f'for(;o<r.length;o++)n+=r[o]*{k % 13 + 1};return n}}'
                     f'e.f{k}=a{k};var s{k}={{id:{k},name:"n{k}",tags:["x","y{k % 7}"]}};')
        k += 1
    parts.append("module.exports=e}();")
    return "".join(parts)


def stdlib(*names: str) -> str:
    return "".join((STDLIB / name).read_text() for name in names)


def cases() -> dict[str, Case]:
    """Every case, built on demand (some are tens of megabytes)."""
    built: dict[str, Callable[[], Case]] = {}

    def case(fn: Callable[[], Case]) -> Callable[[], Case]:
        built[fn.__name__.replace("_", "-")] = fn
        return fn

    def bundle(name: str, megabytes: int, file: str) -> Case:
        """A minified bundle of one line, asked in its middle and at its end."""
        text = minified(megabytes * 1_000_000)
        mid = text.index("return n}", len(text) // 2) + len("return")
        return Case(name, f"file:///p/{file}", "javascript", text,
                    [("mid-line", mid), ("end", len(text))], (mid - 40, mid + 40),
                    about=f"one line of {megabytes} MB")

    @case
    def minified_1mb() -> Case:
        return bundle("minified-1mb", 1, "bundle.min.js")

    @case
    def minified_3mb() -> Case:
        return bundle("minified-3mb", 3, "vendor.min.js")

    @case
    def long_line() -> Case:
        table = "TABLE = {" + ", ".join(f'"key{k}": {k * 7919 % 100003}'
                                        for k in range(30_000)) + "}\n"
        head = stdlib("textwrap.py")
        site = "\n\ndef lookup(key, default=None):\n    \n"
        text = head + table + site + stdlib("shlex.py")
        at = len(head) + len(table) + site.index("    \n") + 4
        line_start = len(head) + len(table) + site.index("def")
        return Case("long-line", "file:///p/generated.py", "python", text,
                    [("blank line below it", at), ("inside it", len(head) + 250_000)],
                    (line_start, at), about=f"a {len(table):,}-character line in code")

    @case
    def million_lines() -> Case:
        rows = "".join(f"{k},{k * 7919 % 100003},w{k % 977}\n" for k in range(1_000_000))
        text = "id,value,word\n" + rows
        mid = text.index("\n", len(text) // 2)
        return Case("million-lines", "file:///p/data.csv", "plaintext", text,
                    [("end of a middle line", mid), ("end", len(text))],
                    (mid - 200, mid), about="1,000,000 short lines, no grammar")

    @case
    def million_lines_python() -> Case:
        text = ("VALUES = [\n" + "".join(f"    {k * 7919 % 100003},\n" for k in range(1_000_000))
                + "]\n\n\ndef total():\n    \n")
        return Case("million-lines-python", "file:///p/values.py", "python", text,
                    [("below the list", len(text) - 1),
                     ("in the list", text.index("\n", len(text) // 2))],
                    about="a list of 1,000,000 lines, then a function")

    for depth in (5_000, 20_000, 50_000):
        def nested(depth: int = depth) -> Case:
            text = "x = " + "[" * depth + "]" * depth + "\n\n\ndef f():\n    \n"
            return Case(f"nested-brackets-{depth}", f"file:///p/nested{depth}.py", "python",
                        text, [("below", len(text) - 1), ("innermost", 4 + depth)],
                        (0, 4 + 2 * depth), about=f"`[` {depth:,} deep in Python")
        built[f"nested-brackets-{depth}"] = nested

    @case
    def nested_calls() -> Case:
        depth = 20_000
        text = "const v = " + "f(" * depth + "1" + ")" * depth + ";\n\nfunction g() {\n  \n}\n"
        return Case("nested-calls", "file:///p/calls.js", "javascript", text,
                    [("in g", text.index("  \n") + 2), ("innermost", 10 + 2 * depth)],
                    about="`f(` 20,000 deep in JavaScript")

    @case
    def nested_dicts() -> Case:
        depth = 10_000
        text = ("CONFIG = " + '{"a": ' * depth + "1" + "}" * depth
                + "\n\n\ndef get(path):\n    \n")
        return Case("nested-dicts", "file:///p/config.py", "python", text,
                    [("below", len(text) - 1), ("innermost", text.index("1"))],
                    about="a dict 10,000 deep in Python")

    @case
    def special_characters() -> Case:
        body = stdlib("textwrap.py")
        text = ("\ufeff# -*- coding: utf-8 -*-\n"
                'SEP = "\u2028"  # a line separator\u2029 and a paragraph one\n'
                'NUL = "\x00\x00"\n\x0c\n'
                + body.replace("\n\n\n", "\n\x0c\n\n", 5)
                + "\n\x0c\n\ndef joined(parts):\n    \n")
        at = len(text) - 1
        return Case("special-characters", "file:///p/specials.py", "python", text,
                    [("below them", at), ("after the BOM", 1)], (1, text.index("NUL")),
                    about="BOM, NUL, form feeds, U+2028, U+2029")

    @case
    def lone_surrogate() -> Case:
        text = ('const S = "\ud800";  // a lone surrogate, as JSON may carry one\n'
                "function f(x) {\n  \n}\n")
        return Case("lone-surrogate", "file:///p/surrogate.js", "javascript", text,
                    [("in f", text.index("  \n") + 2), ("after it", text.index('";'))],
                    (0, text.index("\n")), about='"\\ud800" in the didOpen JSON')

    @case
    def rewrite_1mb() -> Case:
        modules = sorted(STDLIB.glob("*.py"))
        text = ""
        while len(text) < 1_100_000:
            text += modules.pop(0).read_text(encoding="utf-8", errors="replace")
        start = text.index("\n", 20_000) + 1
        end = text.index("\n", start + 1_000_000) + 1
        return Case("rewrite-1mb", "file:///p/big.py", "python", text,
                    [("selection's start", start)], (start, end),
                    about=f"{end - start:,} characters selected")

    @case
    def holes_10000() -> Case:
        text = "".join(f"def f{k}(x):\n    return <FILL>\n\n\n" for k in range(10_000))
        return Case("holes-10000", "file:///p/holes.py", "python", text,
                    [("first hole", text.index("<FILL>"))], holes=True,
                    about="10,000 <FILL> holes")

    @case
    def holes_200() -> Case:
        """A normal file with holes to fill: 200 right-hand sides of `return` and `=`
        lines of difflib.py (2,056 lines), evenly spread, written as markers."""
        lines = stdlib("difflib.py").split("\n")
        statement = re.compile(r"^(\s+(?:return |[\w.]+ [-+]?= ))(\S.*)$")
        whole = [k for k, line in enumerate(lines) if (found := statement.match(line))
                 and all(found[2].count(a) == found[2].count(b) for a, b in ("()", "[]", "{}"))
                 and not found[2].endswith(("\\", ",", ":")) and '"""' not in found[2]]
        for k in (whole[n * len(whole) // 200] for n in range(200)):
            lines[k] = statement.sub(r"\1<FILL>", lines[k])
        text = "\n".join(lines)
        return Case("holes-200", "file:///p/difflib_holes.py", "python", text,
                    [("first hole", text.index("<FILL>"))], holes=True,
                    about="200 <FILL> holes in a 2,056-line module")

    @case
    def edges() -> Case:
        text = HELLO
        return Case("edges", "file:///p/edges.py", "python", text,
                    [("offset 0", 0), ("the very end", len(text))], (0, len(text)),
                    about="cursor at offset 0 and at the end")

    @case
    def empty() -> Case:
        return Case("empty", "file:///p/empty.py", "python", "", [("offset 0", 0)],
                    holes=True, about="an empty document")

    return built


class PeakMemory:
    """The process's peak resident memory while a step ran (sampled every 10 ms)."""

    def __init__(self) -> None:
        self.peak = rss()
        self._stop = False
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while not self._stop:
            self.peak = max(self.peak, rss())
            time.sleep(0.01)

    def reset(self) -> None:
        self.peak = rss()

    def close(self) -> None:
        self._stop = True


class ForwardTime:
    """Wall time inside the model's forward passes (hidden states and head), summed; or
    with `clock` time.thread_time, the CPU time of the thread that runs them."""

    def __init__(self, model: object, clock: Callable[[], float] = time.perf_counter) -> None:
        self.ms = 0.0
        self._lock = threading.Lock()
        def time_one(owner: object, name: str, label: str) -> None:
            original = getattr(owner, name)

            def timed(*args, _original=original, **kwargs):
                began = clock()
                try:
                    return _original(*args, **kwargs)
                finally:
                    with self._lock:
                        self.ms += (clock() - began) * 1000
            setattr(owner, name, timed)
        time_forward_passes(model, time_one)

    def take(self) -> float:
        with self._lock:
            taken, self.ms = self.ms, 0.0
        return taken


class Client(Editor):
    """The editor: its copy of each document, edits sent as didChange, and answers to the
    server's own requests (workspace/applyEdit applied to its copy and sent back as a
    didChange, as an editor does; progress tokens accepted, their reports kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.progress: list[tuple[float, dict]] = []
        self.ls.protocol.set_writer(self)

    def write(self, data: bytes) -> None:
        message = json.loads(data.split(b"\r\n\r\n", 1)[1])
        if "method" in message and "id" in message:
            asyncio.get_running_loop().call_soon(self._answer, message)
        elif message.get("method") == "$/progress":
            self.progress.append((time.perf_counter(), message["params"]["value"]))
        self.wire.write(data)

    def close(self) -> None:
        pass

    def _answer(self, message: dict) -> None:
        result: object = None
        if message["method"] == "workspace/applyEdit":
            result = {"applied": self.apply(message["params"]["edit"])}
        self.ls.protocol.handle_message(json.loads(json.dumps(
            {"jsonrpc": "2.0", "id": message["id"], "result": result}),
            object_hook=self.ls.protocol.structure_message))

    def open(self, uri: str, language: str, text: str) -> None:
        self.texts[uri], self.versions[uri] = text, 1
        self.send("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": language, "version": 1, "text": text}})

    def change(self, uri: str, start: int, end: int, new: str) -> float:
        """Replace [start, end) of our copy and tell the server; the ms the server took
        to handle the didChange (the message in to the edit applied)."""
        text = self.texts[uri]
        (sl, sc), (el, ec) = line_of(text, start), line_of(text, end)
        self.texts[uri] = text[:start] + new + text[end:]
        self.versions[uri] += 1
        began = time.perf_counter()
        self.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": self.versions[uri]},
            "contentChanges": [{"range": {"start": {"line": sl, "character": sc},
                                          "end": {"line": el, "character": ec}},
                                "text": new}]})
        return (time.perf_counter() - began) * 1000

    def apply(self, edit: dict) -> bool:
        """A workspace edit, each document's at its version: its edits applied last first."""
        for change in edit.get("documentChanges", []):
            uri = change["textDocument"]["uri"]
            if change["textDocument"].get("version") != self.versions.get(uri):
                return False
            spans = [(self.offset(uri, e["range"]["start"]), self.offset(uri, e["range"]["end"]),
                      e["newText"]) for e in change["edits"]]
            for start, end, new in sorted(spans, reverse=True):
                self.change(uri, start, end, new)
        return True

    def offset(self, uri: str, position: dict) -> int:
        text, at = self.texts[uri], 0
        for _ in range(position["line"]):
            at = text.index("\n", at) + 1
        end = text.find("\n", at)
        line = text[at:len(text) if end == -1 else end]
        units = line.encode("utf-16-le", "surrogatepass")[:2 * position["character"]]
        return at + len(units.decode("utf-16-le", "surrogatepass"))


def short(value: object, width: int = 70) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, ensure_ascii=True)
    return text if len(text) <= width else text[:width - 3] + "..."


def items(result: object) -> str:
    found = result.get("items", []) if isinstance(result, dict) else result or []
    texts = [item.get("insertText") or item.get("textEdit", {}).get("newText")
             for item in found]
    return f"{len(texts)} item(s)" + (f": {short(texts[0], 50)}" if texts else "")


def titles(result: object) -> str:
    return short([action["title"] for action in result or []])


class Run:
    """One server session's steps, each timed and summed up as a row."""

    def __init__(self, client: Client, timeout: float, holes_seconds: float) -> None:
        self.client, self.timeout, self.holes_seconds = client, timeout, holes_seconds
        self.forward = ForwardTime(client.ls.engine.model)
        self.memory = PeakMemory()
        self.rows: list[dict] = []
        self.probes = 0

    def begin(self) -> float:
        self.forward.take()
        self.memory.reset()
        return time.perf_counter()

    def record(self, case: str, kind: str, step: str, began: float, answer: str,
               failed: str = "") -> dict:
        """A step's row: `kind` groups it for the summary, `failed` says how it failed."""
        row = {"case": case, "kind": kind, "step": step,
               "ms": (time.perf_counter() - began) * 1000, "model_ms": self.forward.take(),
               "peak_rss_mb": self.memory.peak / 2**20, "answer": answer, "failed": failed}
        self.rows.append(row)
        print(f"  {step:<38} {row['ms']:>9.0f} ms  model {row['model_ms']:>7.0f} ms  "
              f"peak {row['peak_rss_mb']:>6.0f} MB  {answer}", flush=True)
        return row

    async def request(self, case: str, kind: str, step: str, method: str, params: dict,
                      summary: Callable[[object], str]) -> object:
        """Send a request and wait for its answer (at most `timeout`, then cancel it)."""
        client = self.client
        msg_id = next(client.ids)
        answer = client.wire.waiting[msg_id] = asyncio.get_running_loop().create_future()
        began = self.begin()
        client.send(method, params, msg_id)
        try:
            message = await asyncio.wait_for(asyncio.shield(answer), self.timeout)
        except asyncio.TimeoutError:
            client.send("$/cancelRequest", {"id": msg_id})
            self.record(case, kind, step, began, f"no answer in {self.timeout:.0f} s, "
                        "cancelled", "no answer")
            return None
        if "error" in message:
            error = message["error"]
            self.record(case, kind, step, began, f"error {error['code']}: "
                        f"{short(error['message'])}", f"error {error['code']}")
            return None
        self.record(case, kind, step, began, summary(message["result"]))
        return message["result"]


async def run_case(run: Run, case: Case) -> None:
    """didOpen, four didChange, then every request of the case (see the module doc)."""
    client, uri, name = run.client, case.uri, case.name
    print(f"{name}: {case.about} ({len(case.text):,} characters, "
          f"{case.text.count(chr(10)) + 1:,} lines)", flush=True)
    began = run.begin()
    client.open(uri, case.language, case.text)
    run.record(name, "open", "didOpen", began, "")
    at = case.cursors[0][1]
    run.begin()
    edits = [client.change(uri, start, end, new) for start, end, new in (
        (at, at, "q"), (at + 1, at + 1, "z"), (at + 1, at + 2, ""), (at, at + 1, ""))]
    row = run.record(name, "change", "4 x didChange", time.perf_counter() - sum(edits) / 1000,
                     "each " + ", ".join(f"{ms:.1f}" for ms in edits) + " ms")
    row["slowest_ms"] = max(edits)
    doc = {"uri": uri}
    for label, offset in case.cursors:
        line, character = line_of(client.texts[uri], offset)
        position = {"line": line, "character": character}
        await run.request(name, "ghost", f"ghost text, {label}", "textDocument/inlineCompletion",
                          {"textDocument": doc, "position": position,
                           "context": {"triggerKind": 1}}, items)
        await run.request(name, "completion", f"completion, {label}", "textDocument/completion",
                          {"textDocument": doc, "position": position}, items)
    line, character = line_of(client.texts[uri], at)
    cursor = {"start": {"line": line, "character": character},
              "end": {"line": line, "character": character}}
    await run.request(name, "actions", "code actions at the cursor", "textDocument/codeAction",
                      {"textDocument": doc, "range": cursor, "context": {"diagnostics": []}},
                      titles)
    if case.selection is not None:
        await rewrite(run, case)
    if case.holes:
        await fill_holes(run, case)
    await run.request(name, "status", "dlm/status", "dlm/status", {},
                      lambda r: f"openDocuments={r['openDocuments']}")
    same = find_document(client.ls.workspace, uri).source == client.texts[uri]
    run.record(name, "copy", "  the server's copy", time.perf_counter(),
               "the editor's" if same else "DIFFERS FROM THE EDITOR'S",
               "" if same else "copy differs")
    client.send("textDocument/didClose", {"textDocument": doc})
    await probe(run, name)


async def rewrite(run: Run, case: Case) -> None:
    """The code actions on the case's selection, and dlm.rewriteSelection of it: the edit
    must replace the selection and nothing else."""
    client, uri, name = run.client, case.uri, case.name
    low, high = case.selection
    (sl, sc), (el, ec) = line_of(client.texts[uri], low), line_of(client.texts[uri], high)
    rng = {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}
    await run.request(name, "actions", "code actions on the selection",
                      "textDocument/codeAction",
                      {"textDocument": {"uri": uri}, "range": rng,
                       "context": {"diagnostics": []}}, titles)
    before = client.texts[uri]
    result = await run.request(
        name, "rewrite", f"rewrite selection ({high - low:,} chars)", "workspace/executeCommand",
        {"command": "dlm.rewriteSelection", "arguments": [uri, rng]},
        lambda r: f"applied={r['applied']} valid={r['valid']} text={short(r['text'], 40)}")
    if result and result["applied"]:
        after = client.texts[uri]
        kept = after.startswith(before[:low]) and after.endswith(before[high:])
        run.record(name, "place", "  the edit's place", time.perf_counter(),
                   "only the selection replaced" if kept else "TEXT OUTSIDE THE SELECTION "
                   "CHANGED", "" if kept else "edit misplaced")


async def fill_holes(run: Run, case: Case) -> None:
    """dlm.fillHoles, as a user runs it: its progress cancelled after `holes_seconds`."""
    client, name = run.client, case.name
    client.progress.clear()
    msg_id = next(client.ids)
    answer = client.wire.waiting[msg_id] = asyncio.get_running_loop().create_future()
    began = run.begin()
    client.send("workspace/executeCommand",
                {"command": "dlm.fillHoles", "arguments": [case.uri]}, msg_id)
    done, _ = await asyncio.wait([answer], timeout=run.holes_seconds)
    if done:
        message = answer.result()
        run.record(name, "holes", "fill holes", began,
                   f"answered {short(message.get('result') or message.get('error'), 60)}")
        return
    reports = [(t, v) for t, v in client.progress if v.get("kind") == "report"]
    for token in list(client.ls.work_done_progress.tokens):
        client.send("window/workDoneProgress/cancel", {"token": token})
    cancelled = time.perf_counter()
    await asyncio.wait([answer], timeout=run.timeout)
    after_ms = (time.perf_counter() - cancelled) * 1000
    message = answer.result() if answer.done() else {"error": {"message": "no answer"}}
    per = ""
    if len(reports) > 1:
        per = f", {(reports[-1][0] - reports[0][0]) * 1000 / (len(reports) - 1):.0f} ms a hole"
    done_holes = reports[-1][1].get("message") if reports else "none"
    row = run.record(name, "holes", "fill holes", began,
                     f"cancelled after {done_holes}{per}; answered {after_ms:.0f} ms after "
                     f"the cancel: {short(message.get('error', message.get('result')), 50)}")
    row["holes_done"] = f"{done_holes} in {run.holes_seconds:.0f} s{per}"


async def probe(run: Run, case: str, when: str = "after") -> None:
    """Ghost text in fixtures/hello.py below `fibonacci`, under a comment line of its own
    each time (a request repeated would be answered from the recent fills)."""
    client = run.client
    if HELLO_URI not in client.texts:
        client.open(HELLO_URI, "python", HELLO)
    run.probes += 1
    client.change(HELLO_URI, 0, 0, f"# probe {run.probes}\n")
    text = client.texts[HELLO_URI]
    line, character = line_of(text, text.index("\n\n\ndef main"))
    await run.request(case, "probe", f"{when}: ghost text in hello.py",
                      "textDocument/inlineCompletion",
                      {"textDocument": {"uri": HELLO_URI},
                       "position": {"line": line, "character": character},
                       "context": {"triggerKind": 1}}, items)


async def session(names: list[str], settings: dict, timeout: float,
                  holes_seconds: float) -> list[dict]:
    """One server, the cases in turn."""
    client = Client()
    await client.request("initialize", {"processId": None, "rootUri": None,
                                        "capabilities": {"window": {"workDoneProgress": True}},
                                        "initializationOptions": settings})
    client.send("initialized", {})
    await asyncio.get_running_loop().run_in_executor(None, lambda: client.ls.engine.model)
    run = Run(client, timeout, holes_seconds)
    for _ in range(2):  # the second with the step cost calibrated
        await probe(run, "-", "before")
    builders = cases()
    for name in names:
        built = time.perf_counter()
        case = builders[name]()
        print(f"(built in {time.perf_counter() - built:.1f} s)", flush=True)
        # a server that no longer answers at all ends the run with every thread's stack
        faulthandler.dump_traceback_later(timeout * 6 + holes_seconds, exit=True)
        await run_case(run, case)
        faulthandler.cancel_dump_traceback_later()
        del case
    run.memory.close()
    return run.rows


def cell(row: dict | None) -> str:
    """A step as `ms (model ms)`, or how it failed."""
    if row is None:
        return ""
    took = f"{row['ms']:,.0f} ({row['model_ms']:,.0f})"
    return f"{row['failed']} after {row['ms']:,.0f}" if row["failed"] else took


def summary(rows: list[dict]) -> str:
    """A line a case: ms of wall time, the model's forward passes in brackets."""
    out = ["| case | didChange, slowest | ghost text at its cursors | completion, slowest | "
           "rewrite | fill holes | peak RSS | hello.py after |",
           "| --- | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    for case in dict.fromkeys(r["case"] for r in rows if r["case"] != "-"):
        mine = [r for r in rows if r["case"] == case]

        def first(kind: str, mine: list[dict] = mine) -> dict | None:
            return next((r for r in mine if r["kind"] == kind), None)
        change, holes = first("change"), first("holes")
        ghosts = " / ".join(cell(r) for r in mine if r["kind"] == "ghost")
        completions = [r for r in mine if r["kind"] == "completion"]
        slowest = max(completions, key=lambda r: r["ms"]) if completions else None
        problems = [r["failed"] for r in mine if r["failed"] and r["kind"] in ("copy", "place")]
        out.append(f"| {case}{' (' + ', '.join(problems) + ')' if problems else ''} | "
                   f"{change['slowest_ms']:,.1f} | {ghosts} | {cell(slowest)} | "
                   f"{cell(first('rewrite'))} | "
                   f"{holes['holes_done'] if holes and 'holes_done' in holes else cell(holes)} | "
                   f"{max(r['peak_rss_mb'] for r in mine):,.0f} MB | {cell(first('probe'))} |")
    return "\n".join(out)



def _rows(parser: argparse.ArgumentParser, path: str) -> list[dict]:
    """The rows of a run written with --json, or a usage error naming the file (a file
    missing, or not such a run, was a traceback)."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))["rows"]
    except OSError as exc:
        parser.error(f"--table {path}: {exc.strerror or exc}")
    except (ValueError, LookupError, TypeError):
        parser.error(f"--table {path}: not a run this script wrote with --json")
    if not isinstance(rows, list):
        parser.error(f"--table {path}: not a run this script wrote with --json")
    return rows

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = list(cases())
    parser.add_argument("--cases", nargs="+", default=names, metavar="CASE",
                        help=f"cases to run, by name or the start of names ({', '.join(names)})")
    parser.add_argument("--settings", default="{}", help="initializationOptions (JSON)")
    parser.add_argument("--request-timeout", type=positive_amount, default=120.0)
    parser.add_argument("--holes-seconds", type=positive_amount, default=30.0)
    parser.add_argument("--json", dest="json_out", help="write every step (JSON)")
    parser.add_argument("--table", nargs="+", metavar="JSON",
                        help="instead: the summary of runs written with --json")
    args = parse_script_arguments(parser)
    if args.table:
        print(summary([row for path in args.table for row in _rows(parser, path)]))
        return
    chosen = [n for n in names
              if any(n == c or (c not in names and n.startswith(c)) for c in args.cases)]
    if not chosen:
        sys.exit(f"no case matches {args.cases}")
    rows = asyncio.run(session(chosen, server_settings(args.settings), args.request_timeout,
                               args.holes_seconds))
    print(f"machine: {machine_line(describe_machine('cpu'))}")
    print(summary(rows))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(
            {"machine": describe_machine("cpu"), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    run_script(main)
