"""The remote engine's protocol: an infill request and its streamed answer as JSON.

`POST /v1/infill` carries what a local fill gets: the document text, the span (Python
string offsets), the code the model is shown around the document (`before`, `after`:
a notebook cell's other cells, as much of them as the engine reads, `sent_context`; a
service older than them ignores them, and fills the cell alone), language, uri, the
request's options, and the client's settings (all but those that belong to a process:
model, device, timeouts, ...; see `PROCESS_SETTINGS`), so a fill through the service is
the fill the client would have made locally with the same seed.  The answer is
newline-delimited JSON: a `draft` line per denoising step when drafts were asked for,
then exactly one `result` or `error` line.  A stream that ends without one lost its
replica (the client tries again elsewhere); closing the connection cancels the fill on
the replica.

Standard library only: the language server imports this without the service's packages.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from dlm_lsp.config import PROCESS_SETTINGS, InfillOptions, ServerConfig, camel, from_json
from dlm_lsp.indentation import shown_indent
from dlm_lsp.line_endings import normalize
from dlm_lsp.policy import SpanPlan
from dlm_lsp.results import Candidate, InfillRequest, InfillResult
from dlm_lsp.span import HEAD_MAX_CHARS, context_reach
from dlm_lsp.validation import Validation, language_for

PROTOCOL = 1
INFILL_PATH, HEALTH_PATH, METRICS_PATH = "/v1/infill", "/v1/health", "/v1/metrics"
TOKEN_VARIABLE = "DLM_LSP_REMOTE_TOKEN"  # where the token is read from when not configured

# Error kinds of an `error` line (the HTTP status was already 200 when they happen).
CANCELLED, OUT_OF_MEMORY, MODEL_UNAVAILABLE, SPAN_TOO_LONG, FAILED = (
    "cancelled", "out-of-memory", "model-unavailable", "span-too-long", "failed")


class BadRequest(ValueError):
    """A request body the service cannot use; the message says what is wrong."""


def fill_settings(config: ServerConfig) -> dict[str, Any]:
    """The client's settings that shape a fill, as camelCase JSON."""
    return {camel(f.name): getattr(config, f.name) for f in dataclasses.fields(config)
            if f.name not in PROCESS_SETTINGS}


def _set_options(options: InfillOptions) -> dict[str, Any]:
    return {camel(f.name): getattr(options, f.name) for f in dataclasses.fields(options)
            if getattr(options, f.name) is not None}


def sent_context(req: InfillRequest, config: ServerConfig) -> tuple[str, str]:
    """What a request carries of the code shown around its document (`before`, `after`:
    a notebook cell's other cells): only what the service's engine reads of it.

    The whole notebook went with every fill, 52 KB for a cell of a 200-cell notebook
    (1,368 lines) at each pause in typing; the engine reads the last `context_reach`
    characters of the prefix before its head (at most HEAD_MAX_CHARS more) and the first
    `context_reach` of the suffix (`span._near`, 7,168 at the default 448 tokens), and
    the notebook's indentation from the whole (`passes.shown_style`).  So `before`
    keeps whole lines past that reach, its line breaks as the engine reads them (`\n`),
    and `after` likewise; where the indentation read from what is kept is not the
    whole's, both go whole.  What is kept depends on the other cells alone: a fill typed
    along in the cell meets the same text (`recent.typed_along`)."""
    kept = _kept_context(req.before, req.after, language_for(req.language_id, req.uri),
                         context_reach(config.max_context_tokens))
    return kept if kept is not None else (req.before, req.after)


@functools.lru_cache(maxsize=8)
def _kept_context(before: str, after: str, language: str | None,
                  reach: int) -> tuple[str, str] | None:
    """`sent_context`'s, or None to send them whole; kept for the fills of a cell typed
    in, whose other cells stay as they are (reading the indentation twice took 1-17 ms a
    fill in the 200-cell notebook, 2-core VM at load 10)."""
    # as the engine reads them: each with `\n` line breaks (`line_endings.for_the_model`)
    whole_before, whole_after = normalize(before, 0, 0).text, normalize(after, 0, 0).text
    keep = reach + HEAD_MAX_CHARS + 1  # more than the engine reads before the head
    before = whole_before[whole_before.rfind("\n", 0, len(whole_before) - keep) + 1:] \
        if len(whole_before) > keep else whole_before
    end = whole_after.find("\n", reach + 1) if len(whole_after) > reach + 1 else -1
    after = whole_after if end < 0 else whole_after[:end + 1]
    if len(before) + len(after) == len(whole_before) + len(whole_after):
        return None  # nothing left out
    if shown_indent(before + after, language) != shown_indent(whole_before + whole_after,
                                                              language):
        return None
    return before, after


def request_json(req: InfillRequest, config: ServerConfig) -> dict[str, Any]:
    """The body of `POST /v1/infill` for one request under the client's settings."""
    before, after = sent_context(req, config)
    return {"protocol": PROTOCOL, "text": req.text, "start": req.start, "end": req.end,
            "languageId": req.language_id, "uri": req.uri, "isHole": req.is_hole,
            "before": before, "after": after,
            "options": _set_options(req.options), "settings": fill_settings(config),
            "drafts": req.on_draft is not None}


def request_body(req: InfillRequest, config: ServerConfig) -> bytes:
    """`request_json` as UTF-8.  A document may hold a lone surrogate (JSON spells one,
    `"\\ud800"`, and Python reads it as a character), which UTF-8 cannot write: such a
    body is sent with JSON's escapes instead, so the service reads the editor's text,
    offsets and all (its engine reads the surrogate as U+FFFD, as a local one does)."""
    data = request_json(req, config)
    try:
        return json.dumps(data, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(data).encode()


def request_from_json(data: Any, base: ServerConfig) -> tuple[InfillRequest, bool, list[str]]:
    """The request, whether drafts were asked for, and the settings it had that this
    service does not know (a newer client); raises BadRequest when it cannot be used."""
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    if data.get("protocol") != PROTOCOL:
        raise BadRequest(f"protocol {data.get('protocol')!r} is not supported (this service "
                         f"speaks {PROTOCOL}): update dlm-lsp on one side")
    text, start, end = data.get("text"), data.get("start"), data.get("end")
    if not isinstance(text, str):
        raise BadRequest("'text' must be a string")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= len(text)):
        raise BadRequest("'start' and 'end' must be offsets into 'text' with start <= end")
    for key in ("languageId", "uri"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise BadRequest(f"'{key}' must be a string or null")
    before, after = data.get("before", ""), data.get("after", "")  # a notebook's other cells
    if not (isinstance(before, str) and isinstance(after, str)):
        raise BadRequest("'before' and 'after' must be strings")
    options, problems = from_json(InfillOptions, data.get("options"), where="options")
    settings = data.get("settings") or {}
    fixed = {camel(name) for name in PROCESS_SETTINGS}
    # the service's own model, device and limits always win over a client's
    config, more = from_json(ServerConfig, {k: v for k, v in settings.items() if k not in fixed}
                             if isinstance(settings, dict) else settings, base, "settings")
    req = InfillRequest(text, start, end, data.get("languageId"), data.get("uri"), options,
                        bool(data.get("isHole")), config=config, before=before, after=after)
    return req, bool(data.get("drafts")), problems + more


def _candidate_json(c: Candidate) -> dict[str, Any]:
    check = c.check
    return {"text": c.text, "valid": c.valid, "score": c.score, "used": c.used, "path": c.path,
            "ended": c.ended,
            "check": None if check is None else {
                "checked": check.checked, "valid": check.valid, "language": check.language,
                "errors": [list(at) for at in check.new_errors], "reason": check.reason,
                "ranges": [list(r) for r in check.new_ranges]}}


def _candidate(data: dict[str, Any]) -> Candidate:
    check = data.get("check")
    return Candidate(data["text"], data["valid"], float(data["score"]), data["used"],
                     data["path"], [], None if check is None else Validation(
                         check["checked"], check["valid"], check["language"],
                         tuple(tuple(at) for at in check["errors"]), check["reason"],
                         tuple(tuple(r) for r in check["ranges"])), ended=data.get("ended"))


def result_json(result: InfillResult, notices: list[str] = ()) -> dict[str, Any]:
    """A finished fill as the `result` line (scores at full precision)."""
    plan = result.plan
    return {"candidates": [_candidate_json(c) for c in result.candidates],
            "plan": {"kind": plan.kind, "nMasked": plan.n_masked, "steps": plan.steps,
                     "singleLine": plan.single_line},
            "steps": result.steps, "tokens": result.tokens, "ms": result.ms,
            "earlyStopped": result.early_stopped, "path": result.path,
            "repairRounds": result.repair_rounds, "repairSteps": result.repair_steps,
            "hintSteps": result.hint_steps, "predictedMs": result.predicted_ms,
            "syntax": result.syntax, "reused": result.reused, "notices": list(notices)}


def result_from_json(data: dict[str, Any]) -> InfillResult:
    """The `result` line back as the engine's result type; `repairSteps` and `hintSteps`,
    which an older service does not send, are None (not known) then, as a candidate's
    `ended` is."""
    plan = data["plan"]
    return InfillResult([_candidate(c) for c in data["candidates"]],
                        SpanPlan(plan["kind"], plan["nMasked"], plan["steps"], plan["singleLine"]),
                        data["steps"], data["tokens"], float(data["ms"]), data["earlyStopped"],
                        data["path"], data["repairRounds"], data["predictedMs"], data["syntax"],
                        data["reused"], data.get("repairSteps"), data.get("hintSteps"))


def line(kind: str, payload: Any) -> bytes:
    """One line of the answer stream."""
    return (json.dumps({kind: payload}, ensure_ascii=False) + "\n").encode()
