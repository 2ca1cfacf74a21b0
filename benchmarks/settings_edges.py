"""Every setting at and past its bounds, and in odd combinations, through the real server.

Each value is checked alone by `dlm_lsp.config`, but what a value at the edge of its
range does to a fill (one step, a span of one token, 4,096 steps, a seed of 2**63 - 1,
a one-character hole marker that occurs in the code) is only seen by running one.
This starts the real server as an editor does (`python -m dlm_lsp` over stdio,
tests/rpc.py's client), with a tiny random model (tests/tiny_model.py) or `--model`,
and for every case sends its values (`workspace/didChangeConfiguration`, or at
`initialize` for the cases that load a model), opens a small Python document holding
the hole marker, and asks every kind of request: ghost text, completion, `dlm/infill`
at a cursor, over a hole and over a selection, `dlm.fillHoles`, `dlm.rewriteSelection`,
`dlm/status`; then the settings go back and an ordinary fill must work.  The same
values are sent as `dlm/infill`'s per-request `options`.

A case passes when: no request answers -32603 (an internal error); the server's log
holds no Python traceback; every request answers within timeoutMs and a margin; a
value the checks refuse is said in a warning naming the setting (a refused option:
-32602 naming it) and any other is not warned about; every edit lies in the range it
was asked for (a hole's edit over the hole) and names the document's version; the
server is alive and the next ordinary fill works.

    OMP_NUM_THREADS=1 python benchmarks/settings_edges.py
    OMP_NUM_THREADS=1 python benchmarks/settings_edges.py --only maxSpanTokens holeMarker

`--tcp` asks on a TCP server that another client shares (its engine keeps its own
settings, and applies the client's fill settings to its fills alone); `--sets` picks
sets of cases, `--only NAME...` the cases that set one of these; `--json FILE` writes
every case's outcome.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from rpc import ServerProcess, free_port, hang_up, tcp_connection  # noqa: E402

from dlm_lsp.bench.output import write_json  # noqa: E402
from dlm_lsp.bench.script import parse_script_arguments, run_script  # noqa: E402
from dlm_lsp.config import (  # noqa: E402
    _CHECKS,
    BACKENDS,
    CONTEXT_CACHES,
    DEVICES,
    PRECISIONS,
    REFINE_ORDERS,
    SCHEDULES,
    SETTING_NAMES,
    STRATEGIES,
    InfillOptions,
    Range,
    ServerConfig,
    camel,
    from_json,
)

INTERNAL = -32603
MARGIN_S = 15.0  # past timeoutMs: the tiny model's passes are milliseconds
# the sweep's own settings, under each case's: short fills keep 700 requests cheap
BASE = {"timeoutMs": 20000, "repairRounds": 0, "fallback": False,
        "singleLineTokens": 4, "multiLineTokens": 8, "reuseFills": False}
# settings that load a model or start a backend: sent at initialize, a server each
LOADS = {"model", "device", "precision", "backend", "remoteUrl", "cudaGraphs"}


@dataclass
class Case:
    """Values to send together, as settings or as `dlm/infill` options."""

    values: dict[str, Any]
    as_options: bool = False
    marker: str = "<FILL>"  # the hole marker the document holds
    crlf: bool = False  # the document's lines end in \r\n

    @property
    def label(self) -> str:
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                          for k, v in self.values.items())
        return ("options " if self.as_options else "") + shown


@dataclass
class Outcome:
    case: Case
    problems: list[str] = field(default_factory=list)
    warned: list[str] = field(default_factory=list)
    slowest_s: float = 0.0
    answers: dict[str, str] = field(default_factory=dict)


def edge_values(name: str, check: Any, hint: Any) -> list[Any]:
    """A setting's minimum, maximum, just outside both, and a middle value."""
    if not isinstance(check, Range):
        return []
    is_int = int in getattr(hint, "__args__", (hint,)) and float not in getattr(
        hint, "__args__", (hint,))
    step = 1 if is_int else 1e-9
    values = []
    if check.low is not None:
        low = check.low + step if check.above else check.low
        values += [low, check.low - step if not check.above else check.low]
    if check.high is not None:
        values += [check.high, check.high + step]
    if check.high is None:
        values.append(1 << 31 if is_int else 1e9)
    if is_int:
        values = [int(v) for v in values]
    return list(dict.fromkeys(values))


def setting_cases(cls: type) -> list[Case]:
    """Every checked number of `cls` at its edges; every choice at each value and one
    that is none; every flag both ways."""
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    cases = []
    choices = {"strategy": STRATEGIES, "schedule": SCHEDULES, "refine_order": REFINE_ORDERS,
               "device": DEVICES, "precision": PRECISIONS, "backend": BACKENDS,
               "context_cache": CONTEXT_CACHES,
               "kind": ("single-line", "multi-line", "rewrite")}
    for name in sorted(names):
        hint = hints[name]
        check = _CHECKS.get(name, (None, ""))[0]
        values = edge_values(name, check, hint)
        if name in choices:
            values = [*choices[name], "bogus"]
        elif bool in getattr(hint, "__args__", (hint,)):
            values = [True, False]
        for value in values:
            cases.append(Case({camel(name): value}, as_options=cls is InfillOptions))
    return cases


def odd_cases() -> list[Case]:
    """Values inside their ranges that interact, and edges the sweep above has no words for."""
    c = Case
    return [
        c({"steps": 1}), c({"steps": 4096}), c({"maxSpanTokens": 1}),
        c({"singleLineTokens": 4096, "maxSpanTokens": 1}),
        c({"multiLineTokens": 4096, "maxSpanTokens": 4096}),
        c({"candidates": 16, "batchRows": 1}), c({"candidates": 16, "batchRows": 0}),
        c({"threshold": 1e-9}), c({"threshold": 1e-9, "maxPerStep": 1}),
        c({"spacing": 64}), c({"spacing": 64, "steps": 1}), c({"blockSize": 1}),
        c({"blockSize": 4096}), c({"ltrTokens": 4096}), c({"ltrTokens": 4096, "steps": 1}),
        c({"remask": 1, "remaskBelow": 1}), c({"remask": 1, "remaskBelow": 1, "steps": 64}),
        c({"repairRounds": 16, "fallback": True}), c({"timeoutMs": 1}),
        c({"latencyMsSingleLine": 1, "latencyMsMultiLine": 1, "latencyMsRewrite": 1}),
        c({"contextCache": True, "cacheWindow": 0, "cacheRefresh": 1}),
        c({"contextCache": True, "cacheWindow": 4096, "cacheRefresh": 1024}),
        c({"contextCache": True, "cacheWindow": 0, "cacheRefresh": 1024, "steps": 64}),
        c({"maxContextTokens": 0}), c({"maxContextTokens": 1 << 20}),
        c({"seed": (1 << 63) - 1, "temperature": 5}), c({"seed": -(1 << 63), "temperature": 5}),
        c({"seed": (1 << 63) - 1, "temperature": 5, "repairRounds": 16}),
        c({"temperature": 5, "topP": 1e-9}), c({"temperature": 0, "topP": 1e-9}),
        *[c({"earlyStop": True, "strategy": s, "earlyStopLogprob": 0}) for s in STRATEGIES],
        *[c({"schedule": s, "steps": 1}) for s in SCHEDULES],
        c({"strategy": "left-to-right", "steps": 1, "maxSpanTokens": 4096,
           "multiLineTokens": 4096}),
        c({"holeMarker": "#"}, marker="#"), c({"holeMarker": "x"}, marker="x"),
        c({"holeMarker": ".*"}, marker=".*"), c({"holeMarker": "(?P<a>"}, marker="(?P<a>"),
        c({"holeMarker": "\\"}, marker="\\"), c({"holeMarker": "€"}, marker="€"),
        c({"holeMarker": "😀"}, marker="😀"), c({"holeMarker": " "}, marker=" "),
        c({"holeMarker": "\t"}, marker="\t"),
        c({"holeMarker": "\r"}, marker="<FILL>", crlf=True),
        c({"holeMarker": "<FILL>"}, crlf=True), c({"holeMarker": "\n"}, crlf=True),
        c({"holeMarker": "\u2028"}, marker="<FILL>"), c({"holeMarker": "def"}, marker="def"),
        c({"holeMarker": "<FILL>" * 100}, marker="<FILL>" * 100),
        c({"remoteToken": "€"}), c({"remoteToken": "a b"}), c({"remoteToken": "x" * 10000}),
        c({"maxQueuedRequests": 1}), c({"maxOpenDocuments": 1}),
        c({"strength": 0}), c({"strength": 0, "steps": 1}),
        c({"fallbackMaxTokens": 4096, "fallback": True, "strategy": "random"}),
        c({"suggestInvalid": True, "validate": False}), c({"drafts": True}),
        c({"latencyMs": 1}, as_options=True), c({"length": 4096}, as_options=True),
        c({"length": 4096, "kind": "single-line"}, as_options=True),
        c({"length": 1, "kind": "rewrite", "strength": 0}, as_options=True),
        c({"candidates": 16, "temperature": 5, "seed": (1 << 63) - 1}, as_options=True),
        c({"steps": 4096, "latencyMs": 1}, as_options=True),
    ]


def load_cases(model: str, tmp: Path) -> list[Case]:
    """Cases that load a model or pick a backend: each is a server of its own."""
    broken = tmp / "broken"
    broken.mkdir(exist_ok=True)
    (broken / "config.json").write_text("{not json")
    empty = tmp / "empty"
    empty.mkdir(exist_ok=True)
    c = Case
    return [
        c({"model": model, "precision": "bf16"}), c({"model": model, "precision": "fp32"}),
        c({"model": model, "device": "cuda"}), c({"model": model, "device": "cuda",
                                                  "precision": "bf16"}),
        c({"model": model, "cudaGraphs": False}),
        c({"model": str(tmp / "missing")}), c({"model": str(broken)}), c({"model": str(empty)}),
        c({"model": str(tmp / "broken" / "config.json")}),
        c({"model": model, "backend": "remote"}),
        c({"model": model, "backend": "remote", "remoteUrl": "https://127.0.0.1:1",
           "remoteCaFile": str(tmp / "missing.pem"), "remoteRetries": 0}),
        c({"model": model, "backend": "remote", "remoteUrl": "https://127.0.0.1:1",
           "remoteCaFile": str(broken / "config.json"), "remoteRetries": 0}),
        c({"model": model, "backend": "remote", "remoteUrl": "http://127.0.0.1:99999"}),
        c({"model": model, "backend": "remote", "remoteUrl": "http://u:p@127.0.0.1:1"}),
        c({"model": model, "backend": "remote", "remoteUrl": "http://127.0.0.1:1",
           "remoteRetries": 10, "remoteFallback": True, "timeoutMs": 3000}),
        c({"model": model, "backend": "remote", "remoteUrl": "http://127.0.0.1:1",
           "remoteConnectMs": 1, "remoteRetries": 0}),
        c({"model": model, "backend": "remote", "remoteUrl": "http://127.0.0.1:1",
           "remoteConnectMs": 1, "remoteFallback": True}),
        c({"model": model, "backend": "sglang", "remoteUrl": "http://127.0.0.1:1",
           "remoteConnectMs": 1, "remoteRetries": 10}),
    ]


def refused(case: Case) -> list[str]:
    """The keys of `case` the configuration checks refuse (strict for options)."""
    cls = InfillOptions if case.as_options else ServerConfig
    bad = []
    for key, value in case.values.items():
        _, problems = from_json(cls, {key: value}, strict=case.as_options)
        if problems:
            bad.append(key)
    return bad


def document(marker: str, crlf: bool = False) -> tuple[str, dict[str, dict]]:
    """A small Python file with one hole, and where each request asks."""
    text = ("import math\n\n\ndef area(radius):\n    \n\n\n"
            f"def volume(r):\n    return {marker}\n\n\n"
            "def main():\n    print(area(2), volume(3))\n")
    if crlf:
        text = text.replace("\n", "\r\n")
    line_of_hole = 8
    col = len("    return ")
    marker_units = len(marker.encode("utf-16-le")) // 2
    pos = {
        "cursor": {"start": {"line": 4, "character": 4}, "end": {"line": 4, "character": 4}},
        "hole": {"start": {"line": line_of_hole, "character": col},
                 "end": {"line": line_of_hole, "character": col + marker_units}},
        "selection": {"start": {"line": 12, "character": 0},
                      "end": {"line": 12, "character": 29}},
    }
    return text, pos


class Sweep:
    """One server at a time; cases run on it until it dies or a case needs its own."""

    def __init__(self, model: str, timeout_s: float) -> None:
        self.model, self.timeout_s = model, timeout_s
        self.server: ServerProcess | None = None
        self.docs = 0
        self.log_seen = 0
        self.applied: list[dict] = []

    def start(self, init: dict) -> list[str]:
        if self.server is not None:
            self.server.close()
        self.server = ServerProcess()
        self.log_seen = 0
        self.applied = []
        client = self.server.client
        client.apply_edit = lambda params: self.applied.append(params) or False
        before = len(client.shown())
        reply = client.initialize({"model": self.model, **BASE, **init})
        if "error" in reply:
            return [f"initialize: {reply['error']}"]
        time.sleep(0.3)  # warnings come after initialized
        return client.shown()[before:]

    def new_log(self) -> str:
        log = self.server.log()
        new, self.log_seen = log[self.log_seen:], len(log)
        return new

    def configure(self, values: dict, warned: bool = False) -> list[str]:
        """Send `values`; the messages that came of them.  The notification's handler is a
        task, which a request read with it (a sync one, as dlm/status) may be answered
        before: the warning that `warned` expects is waited for (5 s at most)."""
        client = self.server.client
        before = len(client.shown())
        client.notify("workspace/didChangeConfiguration", {"settings": {"dlm": values}})
        client.call("dlm/status", {}, timeout=60)
        client.call("dlm/status", {}, timeout=60)  # read after the handler's task has run
        if warned:
            with contextlib.suppress(TimeoutError):
                client.wait(lambda _: len(client.shown()) > before, timeout=5)
        return client.shown()[before:]

    def requests(self, case: Case, outcome: Outcome, timeout_ms: int) -> None:
        client = self.server.client
        self.docs += 1
        uri = f"file:///sweep/doc{self.docs}.py"
        text, pos = document(case.marker, case.crlf)
        self.marker = case.marker
        client.open(uri, text)
        options = case.values if case.as_options else {}
        limit = timeout_ms / 1000 + MARGIN_S
        td = {"uri": uri}
        cursor = pos["cursor"]["start"]
        asks = {
            "ghost": ("textDocument/inlineCompletion",
                      {"textDocument": td, "position": cursor,
                       "context": {"triggerKind": 2}}),
            "completion": ("textDocument/completion", {"textDocument": td, "position": cursor}),
            "infill-cursor": ("dlm/infill", {"textDocument": {**td, "version": 1},
                                             "range": pos["cursor"], "options": options}),
            "infill-hole": ("dlm/infill", {"textDocument": {**td, "version": 1},
                                           "range": pos["hole"], "options": options}),
            "infill-selection": ("dlm/infill", {"textDocument": {**td, "version": 1},
                                                "range": pos["selection"], "options": options}),
            "fillHoles": ("workspace/executeCommand",
                          {"command": "dlm.fillHoles", "arguments": [uri]}),
            "rewrite": ("workspace/executeCommand",
                        {"command": "dlm.rewriteSelection",
                         "arguments": [uri, pos["selection"]]}),
            "status": ("dlm/status", {}),
        }
        if case.as_options:  # the options go to dlm/infill alone
            asks = {k: v for k, v in asks.items() if k.startswith("infill")}
        bad = refused(case)
        for kind, (method, params) in asks.items():
            self.applied = []
            began = time.monotonic()
            try:
                reply = client.call(method, params, timeout=limit)
            except TimeoutError:
                outcome.problems.append(f"{kind}: no answer in {limit:.0f} s")
                client.notify("$/cancelRequest", {"id": client.messages and 0})
                continue
            took = time.monotonic() - began
            outcome.slowest_s = max(outcome.slowest_s, took)
            if "error" in reply:
                code, message = reply["error"]["code"], reply["error"]["message"]
                outcome.answers[kind] = f"error {code}"
                if code == INTERNAL:
                    outcome.problems.append(f"{kind}: internal error: {message[:200]}")
                elif case.as_options and bad:
                    if not any(k in message for k in bad):
                        outcome.problems.append(f"{kind}: refusal does not name {bad}: "
                                                f"{message[:200]}")
                elif code == -32602 and case.as_options:
                    outcome.problems.append(f"{kind}: valid options refused: {message[:200]}")
                continue
            if case.as_options and bad:
                outcome.problems.append(f"{kind}: refused options {bad} were accepted")
            result = reply["result"]
            outcome.answers[kind] = "ok"
            self._check_edits(kind, result, pos, text, outcome)
        client.notify("textDocument/didClose", {"textDocument": td})

    def _check_edits(self, kind: str, result: Any, pos: dict, text: str,
                     outcome: Outcome) -> None:
        if kind.startswith("infill"):
            want = pos[kind.split("-")[1]]
            if result.get("version") != 1:
                outcome.problems.append(f"{kind}: version {result.get('version')}, not 1")
            for edit in result.get("edits", []):
                if edit["range"] != want:
                    outcome.problems.append(f"{kind}: edit at {edit['range']}, not {want}")
        elif kind in ("fillHoles", "rewrite"):
            want = pos["hole" if kind == "fillHoles" else "selection"]
            if kind == "fillHoles" and result.get("holes") == 0:
                outcome.answers[kind] = "no holes"
                return
            if not self.applied:
                outcome.problems.append(f"{kind}: no edit was asked for: {result}")
                return
            if kind == "fillHoles":  # every occurrence of the marker is a hole
                want = None
            for params in self.applied:
                for change in params["edit"].get("documentChanges", []):
                    if change["textDocument"].get("version") != 1:
                        outcome.problems.append(f"{kind}: edit for version "
                                                f"{change['textDocument'].get('version')}")
                    for edit in change["edits"]:
                        if not self._over(edit["range"], want, text):
                            outcome.problems.append(f"{kind}: edit at {edit['range']}, "
                                                    f"not {want}")
                for edits in (params["edit"].get("changes") or {}).values():
                    for edit in edits:
                        if not self._over(edit["range"], want, text):
                            outcome.problems.append(f"{kind}: edit at {edit['range']}, "
                                                    f"not {want}")
        elif kind == "ghost":
            items = result.get("items", []) if isinstance(result, dict) else result or []
            for item in items:
                rng = item.get("range")
                if rng is not None and rng["start"] != pos["cursor"]["start"]:
                    outcome.problems.append(f"ghost: item at {rng}")

    def _over(self, rng: dict, want: dict | None, text: str) -> bool:
        """Whether an edit lies over `want`, or (None) over an occurrence of the marker
        within one line, as LSP breaks lines (at \\r\\n, \\r and \\n)."""
        if want is not None:
            return rng == want
        lines = re.split(r"\r\n|\r|\n", text)
        start, end = rng["start"], rng["end"]
        if start["line"] != end["line"]:
            return False
        line = lines[start["line"]].encode("utf-16-le")
        if 2 * end["character"] > len(line):  # past its line's end
            return False
        piece = line[2 * start["character"]:2 * end["character"]].decode("utf-16-le")
        return piece == self.marker

    def check_warnings(self, case: Case, shown: list[str], outcome: Outcome) -> None:
        outcome.warned = shown
        if case.as_options:
            return
        bad = refused(case)
        # a shared engine's note of the settings it keeps (SharedSweep) is no warning
        shown = [s for s in shown if "is shared with" not in s]
        said = " ".join(shown)
        for key in bad:
            if f"'{key}'" not in said:
                outcome.problems.append(f"refused {key} was not warned about: {shown}")
        if not bad and any(s.startswith("dlm-lsp settings:") for s in shown):
            outcome.problems.append(f"a valid value was warned about: {shown}")

    def alive(self, outcome: Outcome) -> None:
        """The server answers and an ordinary fill works, with the sweep's base settings."""
        client = self.server.client
        if self.server.proc.poll() is not None:
            outcome.problems.append(f"server exited ({self.server.proc.returncode})")
            return
        self.docs += 1
        uri = f"file:///sweep/after{self.docs}.py"
        text, pos = document("<FILL>")
        client.open(uri, text)
        try:
            reply = client.call("dlm/infill", {"textDocument": {"uri": uri},
                                               "range": pos["cursor"]}, timeout=60)
        except TimeoutError:
            outcome.problems.append("the next ordinary fill had no answer in 60 s")
            return
        if "error" in reply:
            outcome.problems.append(f"the next ordinary fill failed: {reply['error']}")
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def check_log(self, outcome: Outcome) -> None:
        log = self.new_log()
        if "Traceback" in log:
            at = log.index("Traceback")
            outcome.problems.append("traceback in the log: "
                                    + log[at:at + 1200].replace("\n", " | "))

    def run(self, case: Case) -> Outcome:
        outcome = Outcome(case)
        loads = bool(LOADS & case.values.keys()) and not case.as_options
        timeout_ms = BASE["timeoutMs"]
        if not case.as_options and isinstance(case.values.get("timeoutMs"), int) and \
                not refused(Case({"timeoutMs": case.values["timeoutMs"]})):
            timeout_ms = case.values["timeoutMs"]
        if loads or self.server is None or self.server.proc.poll() is not None:
            shown = self.start(case.values if loads else {})
            if loads:
                self.check_warnings(case, shown, outcome)
        if not loads and not case.as_options:
            shown = self.configure(case.values, warned=bool(refused(case)))
            self.check_warnings(case, shown, outcome)
        try:
            self.requests(case, outcome, timeout_ms)
        finally:
            if not case.as_options and self.server.proc.poll() is None:
                # back to the sweep's settings (null: the default), its model included
                self.configure({**{key: BASE.get(key) for key in case.values},
                                "model": self.model})
            self.alive(outcome)
            self.check_log(outcome)
        if loads:  # the next case gets an ordinary server
            self.server.close()
            self.server = None
        return outcome


class Connected:
    """One client's connection to a TCP server, as Sweep uses a ServerProcess."""

    def __init__(self, process: ServerProcess, port: int) -> None:
        self.process, self.proc = process, process.proc
        self.client, self.sock = tcp_connection(port)

    def log(self) -> str:
        return self.process.log()

    def close(self) -> None:
        hang_up(self.sock)


class SharedSweep(Sweep):
    """The sweep's client on a TCP server (`--tcp`) shared with another client that sits
    idle: the engine then keeps its own settings, tells the client which, and applies
    the client's fill settings to its fills alone (dlm_lsp/shared.py).  Each server
    start of the stdio sweep is a new connection here; cases that load a model are left
    out (the engine keeps its model while shared)."""

    def __init__(self, model: str, timeout_s: float) -> None:
        super().__init__(model, timeout_s)
        self.process: ServerProcess | None = None

    def start(self, init: dict) -> list[str]:
        if self.process is None or self.process.proc.poll() is not None:
            self.port = free_port()
            self.process = ServerProcess("--tcp", f"127.0.0.1:{self.port}")
            self.other = Connected(self.process, self.port)
            self.other.client.initialize({"model": self.model, **BASE})
        if self.server is not None:
            self.server.close()
        self.server = Connected(self.process, self.port)
        self.log_seen = len(self.process.log())
        self.applied = []
        client = self.server.client
        client.apply_edit = lambda params: self.applied.append(params) or False
        client.initialize({"model": self.model, **BASE, **init})
        time.sleep(0.3)
        return client.shown()

    def finish(self) -> None:
        if self.process is not None:
            self.process.close()


def write_outcomes(path: str, outcomes: list[Outcome]) -> None:
    """Every case's outcome as JSON, written as the bench commands write theirs
    (`output.write_json`: indent 1, ASCII, a final line break): written by hand, with
    non-ASCII characters as they are and no final line break, it read as wholly changed
    in the diff of its next run."""
    write_json(path, [{"case": o.case.label, "problems": o.problems, "warned": o.warned,
                       "slowest_s": round(o.slowest_s, 2), "answers": o.answers}
                      for o in outcomes])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="model directory (default: a tiny random one)")
    parser.add_argument("--only", nargs="*", help="cases that set one of these (camelCase)")
    parser.add_argument("--sets", nargs="*", default=["edges", "odd", "options", "loads"],
                        choices=["edges", "odd", "options", "loads"],
                        help="which cases: edges (each setting's bounds), odd (values that "
                             "interact), options (dlm/infill's), loads (a server each)")
    parser.add_argument("--tcp", action="store_true",
                        help="ask on a TCP server shared with another client (no loads)")
    parser.add_argument("--json", dest="json_out", help="write every case's outcome here")
    args = parse_script_arguments(parser)
    unknown = sorted(set(args.only or ()) - SETTING_NAMES - set(
        camel(f.name) for f in dataclasses.fields(InfillOptions)))
    if unknown:  # `contextcache` ran 0 cases, and "0 failed" read as a pass
        parser.error(f"--only names no setting: {', '.join(unknown)} (camelCase, as the "
                     "README's table spells them)")
    if args.sets == []:  # `--sets` alone: no set, 0 cases, exit 0
        parser.error("--sets names no set: edges, odd, options or loads")
    tmp = Path(tempfile.mkdtemp(prefix="settings-edges-"))
    try:
        sys.exit(_sweep(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the tiny model and the loads' folders


def _sweep(args: argparse.Namespace, tmp: Path) -> int:
    if args.model is None:
        from tiny_model import write_random_model
        model = str(write_random_model(tmp / "tiny", d_model=96))
    else:
        model = args.model
    sets = {"edges": lambda: setting_cases(ServerConfig), "odd": odd_cases,
            "options": lambda: setting_cases(InfillOptions),
            "loads": lambda: load_cases(model, tmp)}
    cases = [case for name in args.sets for case in sets[name]()]
    if args.only:
        cases = [c for c in cases if c.values.keys() & set(args.only)]
    if args.tcp:
        cases = [c for c in cases if c.as_options or not LOADS & c.values.keys()]
    if not cases:  # `--sets loads --tcp`: "0 cases, 0 failed" read as a pass
        print(f"settings_edges.py: no case to run: --sets {' '.join(args.sets)}"
              + (f" --only {' '.join(args.only)}" if args.only else "")
              + (" --tcp (a load needs a server of its own)" if args.tcp else ""),
              file=sys.stderr)
        return 2
    sweep = SharedSweep(model, 60) if args.tcp else Sweep(model, 60)
    outcomes = []
    began = time.monotonic()
    for k, case in enumerate(cases, 1):
        outcome = sweep.run(case)
        outcomes.append(outcome)
        mark = "FAIL" if outcome.problems else "ok  "
        errors = sorted({f"{kind} {answer}" for kind, answer in outcome.answers.items()
                         if answer != "ok"})
        print(f"{k:4}/{len(cases)} {mark} {outcome.slowest_s:6.2f} s  {case.label}"[:150]
              + (f"  [{'; '.join(errors)}]" if errors else ""), flush=True)
        for problem in outcome.problems:
            print(f"           {problem}"[:1600], flush=True)
    if sweep.server is not None:
        sweep.server.close()
    if isinstance(sweep, SharedSweep):
        sweep.finish()
    failed = [o for o in outcomes if o.problems]
    print(f"\n{len(outcomes)} cases, {len(failed)} failed, "
          f"{time.monotonic() - began:.0f} s")
    if args.json_out:
        write_outcomes(args.json_out, outcomes)
    return 1 if failed else 0


if __name__ == "__main__":
    run_script(main)
