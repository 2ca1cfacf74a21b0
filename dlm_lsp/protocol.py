"""The wire shapes of dlm-lsp's own requests: parsing params, building results.

pygls hands custom-method params over as nested namedtuples; we turn them back
into plain JSON, check them, and structure the standard parts (ranges) with
lsprotocol's converter, so a malformed request gets a precise -32602 error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsprotocol import converters, types
from pygls.exceptions import JsonRpcInvalidParams

from dlm_lsp.config import InfillOptions, from_json
from dlm_lsp.engine import InfillResult

INFILL = "dlm/infill"
DRAFT = "dlm/draft"
STATUS = "dlm/status"
FILL_HOLES = "dlm.fillHoles"
REWRITE_SELECTION = "dlm.rewriteSelection"

_converter = converters.get_converter()


def to_plain(obj: Any) -> Any:
    """Namedtuples (pygls' custom params) back to dicts and lists, recursively."""
    if hasattr(obj, "_asdict"):
        return {k: to_plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    return obj


def parse_range(data: Any, what: str = "range") -> types.Range:
    """A Range from JSON, or -32602 naming what is wrong."""
    try:
        return _converter.structure(data, types.Range)
    except Exception as exc:  # cattrs raises several unrelated error classes
        raise JsonRpcInvalidParams(f"'{what}' is not a valid Range: {data!r}") from exc


@dataclass
class InfillParams:
    """Parsed `dlm/infill` params."""

    uri: str
    version: int | None
    range: types.Range
    options: InfillOptions
    work_done_token: str | int | None = None


def parse_infill_params(raw: Any) -> InfillParams:
    """Check and convert `{textDocument: {uri, version?}, range, options?, workDoneToken?}`."""
    data = to_plain(raw)
    if not isinstance(data, dict):
        raise JsonRpcInvalidParams("dlm/infill params must be an object")
    doc = data.get("textDocument")
    if not isinstance(doc, dict) or not isinstance(doc.get("uri"), str):
        raise JsonRpcInvalidParams("dlm/infill needs textDocument.uri (a string)")
    version = doc.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise JsonRpcInvalidParams("textDocument.version must be an integer")
    if "range" not in data:
        raise JsonRpcInvalidParams("dlm/infill needs a range")
    options, problems = from_json(InfillOptions, data.get("options"), where="options")
    if problems:
        raise JsonRpcInvalidParams("; ".join(problems))
    token = data.get("workDoneToken")
    return InfillParams(doc["uri"], version, parse_range(data["range"]), options, token)


def command_target(args: tuple[Any, ...], command: str,
                   needs_range: bool) -> tuple[str, types.Range | None]:
    """(uri, range) from a command's arguments: [uri, range?] or [{uri, range?}]."""
    plain = to_plain(list(args))
    first = plain[0] if plain else None
    if isinstance(first, dict):
        uri, rng = first.get("uri"), first.get("range")
    else:
        uri, rng = first, plain[1] if len(plain) > 1 else None
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"{command} needs a document uri as its first argument")
    if needs_range and rng is None:
        raise JsonRpcInvalidParams(f"{command} needs a range as its second argument")
    return uri, parse_range(rng) if rng is not None else None


def command_flag(args: tuple[Any, ...], name: str, position: int) -> bool:
    """A boolean option of a command: `name` in its object form, else argument `position`."""
    plain = to_plain(list(args))
    if plain and isinstance(plain[0], dict):
        value = plain[0].get(name, False)
    else:
        value = plain[position] if len(plain) > position else False
    if not isinstance(value, bool):
        raise JsonRpcInvalidParams(f"'{name}' should be true or false, got {value!r}")
    return value


def infill_result(version: int | None, rng: types.Range, result: InfillResult) -> dict:
    """The JSON result of `dlm/infill`: the best fill as an edit, all candidates, stats."""
    best = result.candidates[0]
    return {
        "version": version,
        "edits": [_converter.unstructure(types.TextEdit(rng, best.text))],
        "candidates": [{"text": c.text, "valid": c.valid, "score": round(c.score, 4),
                        "used": c.used, "path": c.path,
                        "errors": [list(at) for at in c.check.new_errors] if c.check else []}
                       for c in result.candidates],
        "stats": {"steps": result.steps, "tokens": result.tokens, "used": best.used,
                  "ms": round(result.ms, 1), "kind": result.plan.kind,
                  "earlyStopped": result.early_stopped, "path": result.path,
                  "repairRounds": result.repair_rounds, "predictedMs": result.predicted_ms,
                  "syntax": result.syntax, "reused": result.reused},
    }
