"""Typed configuration: server settings and per-request infill options.

Every setting has a default in Python, so a client that sends nothing gets a
working server.  Clients speak camelCase JSON; `from_json` converts it, checks
each value's type and range, keeps the default for anything wrong, and returns
the problems as sentences the server shows to the user (bad configuration must
never crash the server or silently change behaviour).
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints
from urllib.parse import urlsplit

STRATEGIES = ("confidence", "margin", "entropy", "random", "left-to-right")
SCHEDULES = ("linear", "cosine", "front", "back")
AUTO = "auto"  # a setting the server decides by device and model
CONTEXT_CACHES = (True, False, AUTO)
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = ("auto", "fp32", "bf16")
REFINE_ORDERS = ("confidence", "random")
KINDS = ("single-line", "multi-line", "rewrite")  # task kinds (dlm_lsp/policy.py)
BACKENDS = ("local", "remote", "sglang")  # where fills run (dlm_lsp/backends.py)
# The steps of a fill of each kind when no request or setting gives it a budget: a line's
# tail is short and settles in fewer steps than a block.
DEFAULT_STEPS = {"single-line": 8, "multi-line": 16, "rewrite": 16}

T = TypeVar("T")


@dataclass
class SamplingControls:
    """The denoising controls, settable in the configuration and per request.

    None means "not set here": a request falls back to the server's setting,
    and the server to the sampler's own default (`dlm_lsp.sampler.SamplerConfig`
    keeps every default, and says what each control does; `dlm_lsp.repair.RepairConfig`
    those of repair and the left-to-right fallback).
    """

    top_p: float | None = None  # nucleus for sampling (temperature > 0); default 1.0
    threshold: float | None = None  # confidence-threshold parallel commits; default off
    max_per_step: int | None = None  # cap on positions committed per step; default off
    spacing: int | None = None  # positions committed together are more than this apart; 0
    remask: float | None = None  # share of the span that may be re-masked per step; 0
    remask_below: float | None = None  # re-mask only tokens whose probability fell below; 0.5
    ltr_tokens: int | None = None  # hybrid: first K tokens left to right; 0
    ltr_first_line: bool | None = None  # hybrid: the first line left to right; off
    grow_for_head: bool | None = None  # a head's chain past its own tokens grows the span; off
    pads_from_end: bool | None = None  # a fill's end (pad) only after the pads at the span's end
    exact_length: bool | None = None  # a request's `length` is the fill's: no end (pad); off
    block_size: int | None = None  # semi-autoregressive blocks; off
    early_stop: bool | None = None  # stop when stable and the checks pass; server: on
    early_stop_logprob: float | None = None  # the quality bar of an early stop; -1.0
    stop_when_settled: bool | None = None  # end once no step can change the text; on
    strength: float | None = None  # rewrites: share of the old code to re-mask (None: all)
    repair_rounds: int | None = None  # repair rounds for invalid or broken-character fills; 2
    fallback: bool | None = None  # retry left to right when no fill is valid; on
    fallback_max_tokens: int | None = None  # ... but only spans this short (a pass a token); 16


@dataclass
class InfillOptions(SamplingControls):
    """Per-request options of `dlm/infill`; None means "use the server setting"."""

    length: int | None = None  # masked tokens; None lets the length policy choose
    steps: int | None = None
    strategy: str | None = None
    schedule: str | None = None
    candidates: int | None = None
    seed: int | None = None
    temperature: float | None = None
    latency_ms: int | None = None  # latency target: the step budget that fits it
    refine_order: str | None = None
    kind: str | None = None  # single-line, multi-line or rewrite; None: the policy decides


@dataclass
class ServerConfig(SamplingControls):
    """Settings from initializationOptions and workspace/didChangeConfiguration."""

    model: str = "default"  # "default" (shipped in the package) or a model directory
    device: str = "auto"  # auto picks cuda when available, else cpu
    precision: str = "auto"  # auto (bf16 on cuda and on cpus with native bf16), fp32, bf16
    cuda_graphs: bool = True  # on CUDA, our own models replay repeated steps as CUDA graphs
    # The step budget: for every kind (steps, latency_ms), or per task kind (below, which
    # win over those); a latency target (ms) chooses the steps that fit it.  None: not set,
    # and a kind with nothing set takes DEFAULT_STEPS (the rule: policy.step_budget).
    steps: int | None = None
    latency_ms: int | None = None
    steps_single_line: int | None = None
    steps_multi_line: int | None = None
    steps_rewrite: int | None = None
    latency_ms_single_line: int | None = None
    latency_ms_multi_line: int | None = None
    latency_ms_rewrite: int | None = None
    strategy: str = "confidence"
    schedule: str = "linear"
    temperature: float = 0.0  # 0 is greedy
    # On by default: it stops only on a result that passes the checks the finished fill
    # would face, and on 200 held-out lines and 200 HumanEval tasks it saved 6-13% of
    # the steps and scored no lower on any measure (README, Benchmarks: early stop).
    early_stop: bool | None = True
    stop_when_settled: bool | None = True  # lossless: no later step could change the text
    # On, a request that gives `length` gets a fill of that many tokens: the model may not
    # end it sooner with a pad.  Off by default, where a length is room, as the length
    # policy's; the benchmarks' oracle length is exact (bench.filling.fill_options): there
    # the shipped model's fills were empty or cut short a third of the time with pads
    # allowed, and HumanEval single-line pass@1 went 8.0 -> 12.0% without (README,
    # Denoising controls: Known length).
    exact_length: bool | None = False
    max_span_tokens: int = 128
    single_line_tokens: int = 16  # masked tokens for a fill inside a line
    multi_line_tokens: int = 48  # masked tokens for a fill on an empty line or a hole
    max_context_tokens: int = 448  # prefix + suffix tokens kept around the span
    candidates: int = 1
    seed: int = 0
    batch_rows: int = 16  # rows per shared forward pass across requests; 0: each request alone
    # requests of different lengths share a pass too, padded, where the step cost says it
    # pays; off: a padded row's logits differ in the last bits, so a fill's tokens could
    # depend on what it shared a pass with
    batch_padding: bool = False
    reuse_fills: bool = True  # answer repeated requests and typing-along from recent fills
    # reuse the context's keys/values between steps (approximate); "auto": for our own
    # models on the CPU, where fills took 1.6-1.9x less time at the same single-line
    # pass@1 (passes.caches_context)
    context_cache: bool | str = "auto"
    cache_refresh: int = 2  # with the cache: a full forward pass every this many steps
    cache_window: int = 8  # with the cache: context tokens either side recomputed each step
    timeout_ms: int = 60000
    hole_marker: str = "<FILL>"
    drafts: bool = False  # send dlm/draft notifications while denoising
    validate: bool = True  # check fills with tree-sitter
    # With `validate`: a Python fill that reads a name nothing in the document defines or
    # a function's local before anything binds it, calls a function with arguments it
    # cannot take, uses a name as its kind cannot be used (calls a list, iterates a
    # number), begins a local at a number its updates never move (`prod = 0` above `prod
    # *= x`), ends a block above code that then never runs (`return s` above the loop
    # that builds `s`; a loop's body, so that it never runs twice), or returns a bool
    # that fixes a function's answer (every `return` then gives `False`), is rejected as
    # a syntax error is, and repaired (dlm_lsp/python_names.py, python_order.py,
    # python_calls.py, python_kinds.py, python_tallies.py, python_reach.py,
    # python_predicates.py).  Off for
    # code whose names come from where no reading finds them (a framework's injected
    # globals).
    check_names: bool = True
    # Where the code below a Python span reads a name nothing binds before it (`res.append`
    # under the span, `res` bound nowhere) and the best fill leaves it so, one more pass
    # begins the fill with the binding (`res =`, or a block's header: `for c in`) and
    # offers it first where it passes the checks and binds the name
    # (passes.InfillRun.bind_hint, binding_hints.py).
    binding_hints: bool = True
    # Where the best fill writes no code on a blank Python line that the code says must
    # hold one, one more pass begins the fill with it and offers it first where it passes
    # the checks: `return` at the end of a function that must give a value (it returns one
    # elsewhere, its annotation or docstring says so), or a block's header (`if`; in a
    # class, `def`) above code indented deeper than a statement could be
    # (passes.InfillRun.blank_hint, python_returns.py, binding_hints.plain_header); and
    # where the best fill is a bare `return` in such a function, one begun with `return`
    # that goes on.
    blank_hints: bool = True
    # Where a loop around a Python span is there to update a local (`ans = 0` just before
    # it, `return ans` after) and the best fill leaves it as it began, one more pass begins
    # the fill with that local's name and offers it first where it passes the checks and
    # updates it (passes.InfillRun.tally_hint, python_tallies.py).
    tally_hints: bool = True
    # Where the function around a Python span works a value out above it (`balance += op`
    # in a loop) or is given one (a parameter of a plain function) and, with the best fill
    # in, reads it nowhere, one more pass begins the best fill's first line with it where
    # its expression starts (`if balance`, `ans.append(val`, `for c in paren_string`) and
    # offers it first where it passes the checks and reads the value
    # (passes.InfillRun.value_hint, python_values.py).
    value_hints: bool = True
    # ghost text and completion items also for fills the check rejected (dlm/infill always
    # returns them, marked valid: false); off: an editor never shows code known to break
    suggest_invalid: bool = False
    refine_order: str = "confidence"  # which old tokens a refinement re-masks first
    # memory bounds: documents kept, and fills running or waiting (a busy error past it)
    max_open_documents: int = 500
    max_queued_requests: int = 64
    # where fills run: this process (local), a dlm-lsp service (remote, `dlm-lsp
    # serve-remote`), or an SGLang server (sglang); see dlm_lsp/backends.py
    backend: str = "local"
    remote_url: str = ""  # http(s)://host:port of the service
    remote_token: str = ""  # bearer token; empty: the DLM_LSP_REMOTE_TOKEN variable, if set
    remote_ca_file: str = ""  # PEM file of the CA that signed an https service's certificate
    # how long to wait for the service to accept a connection (and, with remote_fallback,
    # to start answering a fill: `retry.Unanswered`)
    remote_connect_ms: int = 5000
    remote_retries: int = 2  # tries again of a fill whose replica failed or was lost
    remote_fallback: bool = False  # when the service is unreachable, fill on the local engine


# The settings that belong to this process, not to a fill: a remote engine applies the
# rest of a client's settings to that client's fills (see dlm_lsp/remote/wire.py).
PROCESS_SETTINGS = frozenset({
    "model", "device", "precision", "cuda_graphs", "batch_rows", "batch_padding", "timeout_ms",
    "drafts", "max_open_documents", "max_queued_requests", "backend", "remote_url",
    "remote_token", "remote_ca_file", "remote_connect_ms", "remote_retries", "remote_fallback"})

# The settings only the language server reads (server.py; backends.py and dlm_lsp/remote
# for where fills run), never the engine: a request's deadline, draft notifications, what
# an editor is shown, the documents and requests it holds, the backend.  (The hole marker
# is the engine's too: a fill that writes it is rejected, `passes.judged`.)  A
# benchmark fills on an engine of its own, so its `--settings` refuses them
# (`bench.pass_at_1.engine_settings`): they labelled its rows and changed no fill.
SERVER_ONLY = frozenset({
    "timeout_ms", "drafts", "suggest_invalid", "max_open_documents",
    "max_queued_requests", "backend", "remote_url", "remote_token", "remote_ca_file",
    "remote_connect_ms", "remote_retries", "remote_fallback"})

SECRETS = frozenset({"remote_token"})  # a problem with one is said without its value


@dataclass(frozen=True)
class Range:
    """A number's bounds, as data: the server checks values with it, and the VS Code
    extension's manifest states the same bounds (editors/vscode/scripts/sync_settings.py),
    so that its Settings UI refuses what the server would.  `above`: `low` itself is out."""

    low: float | None = None
    high: float | None = None
    above: bool = False

    def __call__(self, value: float | None) -> bool:
        if value is None:
            return True
        if self.low is not None and not (value > self.low if self.above else value >= self.low):
            return False
        return self.high is None or value <= self.high


MAX_SPAN_TOKENS = Range(1, 4096)  # the longest span a fill may write (maxSpanTokens)
STEPS = Range(1, 4096)  # a step budget (steps and its per-kind settings, fill --steps)
# Milliseconds, bounded so that every value is a time the clock can take: a latency target
# of 400 digits was accepted, and every fill then failed in float(); a connection timeout
# of 10**13 ms failed as an OverflowError, which the remote fallback did not catch.
HOUR_MS, DAY_MS = 3_600_000, 86_400_000
UP_TO_AN_HOUR_MS = (Range(0, HOUR_MS, above=True),
                    "a positive integer of milliseconds, at most 3600000 (an hour)")


def url_problem(url: str) -> str | None:
    """What makes `url` unusable as a service's address, or None.  A port that is no
    port reached the connection as a ValueError, and a fill failed with an internal
    error (or was tried again as a broken connection); a user and password in it were
    never sent (the service takes a bearer token)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or re.search(r"\s", url):
        return "is not an http:// or https:// URL"
    try:
        parts.port  # noqa: B018 -- reading it checks it
    except ValueError as exc:
        return f"has no port number 0-65535 ({exc})"
    if parts.username is not None or parts.password is not None:
        return ("carries a user name or password, which is never sent: give the service's "
                "token as remoteToken")
    return None


# What a string setting must match whole, as a regular expression both Python and
# JavaScript read alike: the server checks it, and the VS Code extension's manifest
# states it (editors/vscode/scripts/sync_settings.py), so that its Settings UI refuses
# what the server would (a holeMarker of "\r" was typed in and then refused).
PATTERNS = {
    # a line break LSP counts would make line ends holes; spaces or tabs alone, every
    # indentation (`\t`: each tab of a tab-indented file a hole)
    "hole_marker": r"[^\S\r\n]*\S[^\r\n]*",
    "remote_token": r"[!-~]*",  # visible ASCII: an HTTP header carries it
}


def matches(name: str, text: str) -> bool:
    """Whether `text` is a value the string setting `name` takes (its PATTERNS entry)."""
    return re.fullmatch(PATTERNS[name], text) is not None


def visible_ascii(text: str) -> bool:
    """Whether `text` can travel in an HTTP header as it is, as a token does."""
    return matches("remote_token", text)


# Value checks beyond the type: name -> (predicate, what a good value looks like); a
# number's predicate is its Range.
_CHECKS: dict[str, tuple[Any, str]] = {
    "steps": (STEPS, "an integer from 1 to 4096"),
    "steps_single_line": (STEPS, "an integer from 1 to 4096"),
    "steps_multi_line": (STEPS, "an integer from 1 to 4096"),
    "steps_rewrite": (STEPS, "an integer from 1 to 4096"),
    "top_p": (Range(0, 1, above=True), "a number above 0, at most 1"),
    "threshold": (Range(0, 1, above=True), "a probability above 0, at most 1"),
    "max_per_step": (Range(1, 4096), "an integer from 1 to 4096"),
    "spacing": (Range(0, 64), "an integer from 0 to 64"),
    "remask": (Range(0, 1), "a number from 0 to 1"),
    "remask_below": (Range(0, 1), "a probability from 0 to 1"),
    "ltr_tokens": (Range(0, 4096), "an integer from 0 to 4096"),
    "block_size": (Range(1, 4096), "an integer from 1 to 4096"),
    "early_stop_logprob": (Range(high=0), "a log-probability (<= 0)"),
    "strength": (Range(0, 1), "a number from 0 to 1"),
    "repair_rounds": (Range(0, 16), "an integer from 0 to 16"),
    "fallback_max_tokens": (Range(1, 4096), "an integer from 1 to 4096"),
    "refine_order": (lambda v: v is None or v in REFINE_ORDERS,
                     f"one of {', '.join(REFINE_ORDERS)}"),
    "length": (Range(1, 4096), "an integer from 1 to 4096"),
    "kind": (lambda v: v is None or v in KINDS, f"one of {', '.join(KINDS)}"),
    "strategy": (lambda v: v is None or v in STRATEGIES, f"one of {', '.join(STRATEGIES)}"),
    "schedule": (lambda v: v is None or v in SCHEDULES, f"one of {', '.join(SCHEDULES)}"),
    "device": (lambda v: v in DEVICES, f"one of {', '.join(DEVICES)}"),
    "precision": (lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
    "candidates": (Range(1, 16), "an integer from 1 to 16"),
    # torch's generators take 64 bits; repair rounds seed with seed + round
    "seed": (Range(-(1 << 63), (1 << 63) - 1),
             "an integer from -2**63 to 2**63 - 1"),
    "temperature": (Range(0, 5), "a number from 0 to 5"),
    "max_span_tokens": (MAX_SPAN_TOKENS, "an integer from 1 to 4096"),
    "single_line_tokens": (Range(1, 4096), "an integer from 1 to 4096"),
    "multi_line_tokens": (Range(1, 4096), "an integer from 1 to 4096"),
    "max_context_tokens": (Range(0, 1 << 20), "an integer from 0 to 1048576"),
    "timeout_ms": (Range(0, DAY_MS, above=True),
                   "a positive integer of milliseconds, at most 86400000 (a day)"),
    "batch_rows": (Range(0, 256), "an integer from 0 to 256"),
    "context_cache": (lambda v: isinstance(v, bool) or v == AUTO, 'true, false or "auto"'),
    "cache_refresh": (Range(1, 1024), "an integer from 1 to 1024"),
    "cache_window": (Range(0, 4096), "an integer from 0 to 4096"),
    "latency_ms": UP_TO_AN_HOUR_MS,
    "latency_ms_single_line": UP_TO_AN_HOUR_MS,
    "latency_ms_multi_line": UP_TO_AN_HOUR_MS,
    "latency_ms_rewrite": UP_TO_AN_HOUR_MS,
    # LSP breaks lines at "\r" too: a marker "\r" made every line end of a CRLF file a hole
    "hole_marker": (lambda v: matches("hole_marker", v),
                    "a string without a line break, not empty nor whitespace alone"),
    "model": (lambda v: len(v) > 0, "a model name or directory"),
    "max_open_documents": (Range(1), "a positive integer"),
    "max_queued_requests": (Range(1), "a positive integer"),
    "backend": (lambda v: v in BACKENDS, f"one of {', '.join(BACKENDS)}"),
    "remote_url": (lambda v: v == "" or url_problem(v) is None,
                   "an http:// or https:// URL with a valid port and no user or password"),
    # it travels in an HTTP header, which holds visible ASCII: a "€" in it made every
    # fill fail as a broken connection, tried again
    "remote_token": (visible_ascii, "a string of visible ASCII characters without spaces"),
    "remote_connect_ms": UP_TO_AN_HOUR_MS,
    "remote_retries": (Range(0, 10), "an integer from 0 to 10"),
}


def value_range(name: str) -> Range | None:
    """The bounds of a number setting or option (None where it has none)."""
    check = _CHECKS.get(name)
    return check[0] if check is not None and isinstance(check[0], Range) else None


def setting(options: InfillOptions, config: ServerConfig, name: str) -> Any:
    """The request's value of a control, else the server's."""
    value = getattr(options, name)
    return getattr(config, name) if value is None else value


def camel(name: str) -> str:
    """snake_case -> camelCase, the wire form of a field name."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def snake(name: str) -> str:
    """camelCase -> snake_case."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def json_text(value: Any) -> str:
    """A JSON value as the user wrote it (`true`, `"8"`, `null`), for a message: Python's
    spelling (`True`, `'8'`, `None`) is not what was typed."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words: "got list" named our Python, not the value
    the user sent."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    for kind, word in ((dict, "an object"), (list, "an array"), (str, "a string"),
                       ((int, float), "a number")):
        if isinstance(value, kind):
            return word
    return type(value).__name__


class SettingsRefused(ValueError):
    """`--settings` JSON that a command cannot use, its message what to tell the user."""


def settings_option(text: str, base: ServerConfig | None = None
                    ) -> tuple[dict[str, Any], ServerConfig]:
    """A command's `--settings` (camelCase server settings as a JSON object): the object
    and the settings it makes over `base`, or `SettingsRefused` naming every problem.

    Strict, unlike an editor's settings: a misspelt setting would be a fill or a run
    measured without it, so nothing is ignored.  `fill`, `bench` and the benchmark
    scripts each read the JSON themselves, and their messages drifted apart (one said
    what an object looks like and what was sent, one neither); each adds here only what
    it refuses of its own."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SettingsRefused(f"--settings is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SettingsRefused(f"--settings should be a JSON object of settings "
                              f"('{{\"steps\": 8}}'), got {json_kind(data)}")
    # named as keys of --settings ("setting 'steps'"), not as a path from it
    # ("'--settings.steps'", no name a user types)
    config, problems = from_json(ServerConfig, data, base=base, strict=True)
    if problems:
        raise SettingsRefused("--settings: " + "; ".join(problems))
    return data, config


def _type_ok(value: Any, hint: Any) -> bool:
    """Whether a JSON value fits a field type (int for float is fine, bool for int is not)."""
    allowed = getattr(hint, "__args__", (hint,))
    for t in allowed:
        if t is type(None) and value is None:
            return True
        if t is bool and isinstance(value, bool):
            return True
        if t is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        if t is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if t is str and isinstance(value, str):
            return True
    return False


# What a value of each JSON type is called in a message (a field without a check beyond
# its type accepts any value of it).
_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def accepted(name: str, hint: Any) -> str:
    """What a good value of field `name` looks like, for a message: its check's words, else
    its type's (a value of the wrong type should say what would have been right)."""
    if name in _CHECKS:
        return _CHECKS[name][1]
    words = [_TYPE_WORDS[t] for t in getattr(hint, "__args__", (hint,)) if t in _TYPE_WORDS]
    return " or ".join(words)


def _close_name(key: str, names: Any) -> str:
    """" (did you mean 'steps'?)" for a setting misspelt past its case: `step`, `temprature`
    and `stepsSingleLin` were "unknown" and no more, which sent the user to the table to
    find the one letter."""
    near = difflib.get_close_matches(key, [camel(name) for name in names], n=1, cutoff=0.8)
    return f" (did you mean '{near[0]}'?)" if near else ""


def from_json(cls: type[T], data: Any, base: T | None = None, where: str = "",
              strict: bool = False, said: Any = None) -> tuple[T, list[str]]:
    """Overlay camelCase `data` onto `base` (or defaults); return the result and problems.

    Each problem says what became of the value (ignored, or the previous value kept), since
    settings go on without it; `strict` leaves that out, for a caller that refuses
    the whole request instead.  `said` is what the client sent before, whose problems
    it was told then: a value the same as there is applied (or not) as ever but not
    told again (editors send the whole section at every change, so a wrong value the
    user left alone was told again whenever any other setting changed)."""
    result = dataclasses.replace(base) if base is not None else cls()
    problems: list[str] = []
    if data is None:
        return result, problems
    if not isinstance(data, dict):  # named as the user knows it, not by our class name
        if same_value(data, said):
            return result, problems
        told = f"{where or 'settings'} should be an object, got {json_kind(data)}"
        return result, [told if strict else f"{told}; ignored"]
    hints = get_type_hints(cls)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    kept = "" if strict else "; default kept" if base is None else "; previous value kept"
    ignored = "" if strict else " ignored"
    for key, value in data.items():
        name = snake(key)
        label = f"{where}.{key}" if where else key
        shown = "(hidden)" if name in SECRETS else json_text(value)  # never echo a secret
        problem = None
        if name not in defaults and cls is not ServerConfig and key in SETTING_NAMES:
            # `timeoutMs` in a request's options was "unknown", though the user knows it
            problem = (f"'{label}' is a server setting, not an option of a request: set it "
                       f"in the settings{';' * bool(ignored)}{ignored}")
        elif name not in defaults:
            problem = f"unknown setting '{label}'{_close_name(key, defaults)}{ignored}"
        elif camel(name) != key:  # `Steps`, `early_stop`: read as a setting, the last of
            # two spellings (`steps` and `Steps`) won without a word
            problem = f"unknown setting '{label}' (did you mean '{camel(name)}'?){ignored}"
        elif value is None:  # null is "the default", also where None is a value of its own
            setattr(result, name, defaults[name])
        elif not _type_ok(value, hints[name]):
            problem = (f"setting '{label}' = {shown} has the wrong type: it should be "
                       f"{accepted(name, hints[name])}{kept}")
        else:
            if isinstance(value, int) and float in getattr(hints[name], "__args__", (hints[name],)):
                value = float(value)
            check = _CHECKS.get(name)
            if check and not check[0](value):
                problem = f"setting '{label}' = {shown} should be {check[1]}{kept}"
            else:
                setattr(result, name, value)
        if problem is not None and not (isinstance(said, dict) and key in said
                                        and same_value(said[key], data[key])):
            problems.append(problem)
    return result, problems


def same_value(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same value, as a message names it: 1, 1.0 and
    true are equal in Python but three different values of a setting."""
    return type(a) is type(b) and repr(a) == repr(b)


def to_json(obj: Any) -> dict[str, Any]:
    """A dataclass as camelCase JSON (the reverse of `from_json`)."""
    return {camel(f.name): getattr(obj, f.name) for f in dataclasses.fields(obj)}


# The settings' names as a client sends them (camelCase).
SETTING_NAMES = frozenset(camel(field.name) for field in dataclasses.fields(ServerConfig))
