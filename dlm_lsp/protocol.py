"""The wire: every message answered, and the shapes of dlm-lsp's own requests.

`DlmProtocol` is pygls' LSP protocol with the gaps of stock pygls 2.1 closed:
it drops a request whose params fail lsprotocol's parsing (it logs and never
answers, so the client waits forever), ignores messages that are not JSON-RPC
2.0 objects and requests that arrive after `shutdown`, and logs a warning for
every `$/cancelRequest` that comes after its request finished (a flood of them
is normal), and keeps the future of every notification it runs as a coroutine
or a generator (didChange among them) for as long as the server runs. JSON-RPC
requires an answer to every request: here each one gets its result or a
well-formed error (-32600 invalid request, -32602 invalid params), and the
connection goes on. Over TCP a connection is first admitted (`admission.py`:
the server's token, its number of clients); until then only `initialize` is
read.

pygls hands custom-method params over as nested namedtuples; we turn them back
into plain JSON, check them, and structure the standard parts (ranges) with
lsprotocol's converter, so a malformed request gets a precise -32602 error.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import converters, types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams, JsonRpcRequestCancelled
from pygls.protocol import LanguageServerProtocol, lsp_method
from pygls.protocol.language_server import _prepare_command_arguments

from dlm_lsp.admission import NOT_INITIALIZED, Gate, take_token
from dlm_lsp.config import InfillOptions, from_json
from dlm_lsp.documents import apply_changes
from dlm_lsp.engine import InfillResult
from dlm_lsp.jobs import CLIENT_CANCELLED, SHUTTING_DOWN
from dlm_lsp.notebooks import apply_notebook_change, left_out_on_reopening, with_all_cells
from dlm_lsp.results import Candidate

log = logging.getLogger(__name__)

INFILL = "dlm/infill"
DRAFT = "dlm/draft"
STATUS = "dlm/status"
RETRY_LOAD = "dlm/retryLoad"
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
    """A Range from JSON, or -32602 naming what is wrong.  Its lines and characters must
    be integers: cattrs took `"1"`, `1.9` and `true` for 1 (a fill made at a place the
    client never named), where a `version` of `"3"` was refused."""
    ends = (data.get("start"), data.get("end")) if isinstance(data, dict) else ()
    for end in ends:
        for value in ((end.get("line"), end.get("character")) if isinstance(end, dict) else ()):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise JsonRpcInvalidParams(f"'{what}' is not a valid Range: its lines and "
                                           f"characters must be integers, got {value!r}")
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
    options, problems = from_json(InfillOptions, data.get("options"), where="options",
                                  strict=True)
    if problems:
        raise JsonRpcInvalidParams("; ".join(problems))
    token = data.get("workDoneToken")
    if token is not None and not is_id(token):
        raise JsonRpcInvalidParams("workDoneToken must be an integer or a string")
    return InfillParams(doc["uri"], version, parse_range(data["range"]), options, token)


def command_target(args: tuple[Any, ...], command: str,
                   needs_range: bool) -> tuple[str, types.Range | None]:
    """(uri, range) from a command's arguments: [uri, range] or [{uri, range}] where it
    `needs_range`, else [uri] or [{uri}] and the range None (what follows the uri is not
    read as one: `[uri, "extra"]` to dlm.fillHoles was refused as "'range' is not a valid
    Range", of a command that takes none)."""
    plain = to_plain(list(args))
    first = plain[0] if plain else None
    if isinstance(first, dict):
        uri, rng = first.get("uri"), first.get("range")
    else:
        uri, rng = first, plain[1] if len(plain) > 1 else None
    if not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"{command} needs a document uri as its first argument")
    if not needs_range:
        return uri, None
    if rng is None:
        raise JsonRpcInvalidParams(f"{command} needs a range as its second argument")
    return uri, parse_range(rng)


def command_version(args: tuple[Any, ...], command: str) -> int | None:
    """The document version a command's range was taken in (`version` in its object form),
    or None where it names none: the command then acts on the document as it is when
    the command comes (an edit after that moves the text under the range)."""
    plain = to_plain(list(args))
    version = plain[0].get("version") if plain and isinstance(plain[0], dict) else None
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise JsonRpcInvalidParams(f"{command}'s 'version' should be an integer, got {version!r}")
    return version


def command_flag(args: tuple[Any, ...], name: str, position: int | None = None) -> bool:
    """A boolean option of a command: `name` in its object form, else argument `position`
    (None: the option has no place in the list form)."""
    plain = to_plain(list(args))
    if plain and isinstance(plain[0], dict):
        value = plain[0].get(name, False)
    else:
        value = plain[position] if position is not None and len(plain) > position else False
    if not isinstance(value, bool):
        raise JsonRpcInvalidParams(f"'{name}' should be true or false, got {value!r}")
    return value


NOTHING_WRITTEN = ("the model wrote only whitespace in place of the selected code, which "
                   "would delete it; nothing applied")
ONLY_BLANKS = "the model wrote only whitespace at the cursor; nothing applied"


def writing_first(candidates: Sequence[Candidate], replaced: str,
                  cursor: bool = False) -> list[Candidate]:
    """`candidates` (best first) with those of only whitespace after the rest where they
    would replace code (`replaced`): such a fill deletes the code, which no one asks a
    rewrite for (the model ended the span at once; the shipped model rewrote `break` as
    a space), where a fill the syntax check rejected is still a draft worth editing.  So
    too at a `cursor`, where blanks are no fill (ghost text offers none)."""
    if not replaced.strip() and not cursor:
        return list(candidates)
    return sorted(candidates, key=lambda c: not c.text.strip())


def deletes_code(best: Candidate, replaced: str) -> bool:
    """Whether applying `best` (the first of `writing_first`) would only delete code: every
    candidate was whitespace."""
    return bool(replaced.strip()) and not best.text.strip()


def infill_result(version: int | None, rng: types.Range, result: InfillResult,
                  replaced: str = "") -> dict:
    """The JSON result of `dlm/infill`: the best fill as an edit, the distinct candidates
    (the first of each text kept, in rank order), stats.
    The edit is the first candidate's, candidates of only whitespace put last where the
    range held code (`replaced`); where every one is that, no edit, and a `message`
    says why (`writing_first`), as where the best fill at a cursor is only whitespace."""
    cursor = rng.start == rng.end
    # one of each text: greedy rows and sampled ones often agree, and a client that lets
    # the user step through them showed the same fill four times
    first_of: dict[str, Candidate] = {}
    for candidate in result.candidates:
        first_of.setdefault(candidate.text, candidate)
    distinct = list(first_of.values())
    candidates = writing_first(distinct, replaced, cursor)
    best = candidates[0]
    # At a cursor fills of only whitespace are no edit either: one left blanks at the end
    # of the line (`       `) and the editor said "filled" (ghost text offers none there)
    blanks = cursor and not best.text.strip()
    nothing = NOTHING_WRITTEN if deletes_code(best, replaced) else ONLY_BLANKS if blanks else None
    return {
        "version": version,
        "edits": [] if nothing else [_converter.unstructure(types.TextEdit(rng, best.text))],
        **({"message": nothing} if nothing else {}),
        "candidates": [{"text": c.text, "valid": c.valid, "score": round(c.score, 4),
                        "used": c.used, "path": c.path,
                        "errors": [list(at) for at in c.check.new_errors] if c.check else []}
                       for c in candidates],
        "stats": {"steps": result.steps, "tokens": result.tokens, "used": best.used,
                  "ms": round(result.ms, 1), "kind": result.plan.kind,
                  "earlyStopped": result.early_stopped,
                  "path": result.path if best is result.candidates[0] else best.path,
                  "repairRounds": result.repair_rounds, "repairSteps": result.repair_steps,
                  "hintSteps": result.hint_steps, "predictedMs": result.predicted_ms,
                  "syntax": result.syntax, "reused": result.reused},
    }


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def completion_items(texts: list[str], typed: types.Range, word: str
                     ) -> list[types.CompletionItem]:
    """The fills `texts` (best first) as completion items at a cursor after `word`, typed
    over the range `typed`: each replaces the word with the word and the fill.  Clients
    filter the items they are given by the word before the cursor, and not all of them as
    VS Code does (against the text from the edit's start): Emacs' eglot matches it against
    the label's start, Helix fuzzily against the label, so an item inserted at the cursor
    after `ret` read `urn x` and was never shown.  Its label is its first line, then:
    `return x`, and with no word typed the fill's first line with text.  A multi-line item
    shows whole in its documentation.  Its later lines already stand at their columns in
    the document (the fill was re-indented there), so it is inserted as is: VS Code would
    add the cursor line's indentation to each of them."""
    items = []
    for rank, text in enumerate(texts):
        new_text = word + text
        # the fill's line breaks are the document's: a `\r` file's multi-line item was
        # labelled with all of it and given no documentation
        lines = _LINE_BREAK.split(new_text if word else text.strip())
        items.append(types.CompletionItem(
            label=lines[0].rstrip()[:80], kind=types.CompletionItemKind.Snippet,
            detail="dlm-lsp fill", sort_text=f"{rank:02d}",
            documentation=new_text if _LINE_BREAK.search(new_text.strip()) else None,
            insert_text_format=types.InsertTextFormat.PlainText,
            insert_text_mode=types.InsertTextMode.AsIs,
            text_edit=types.TextEdit(typed, new_text)))
    return items


def inline_items(texts: list[str], cursor: types.Range,
                 selected: types.SelectedCompletionInfo | None = None
                 ) -> list[types.InlineCompletionItem]:
    """The fills `texts` (best first) as ghost text at the empty range `cursor`: each
    inserted there.  With a completion item `selected` in the editor (the fills were made
    after its text, as if it were applied), each is the item's text and the fill, over
    the item's range: ghost text that extends the item, which an editor shows, instead
    of contradicting it."""
    if selected is not None:
        texts, cursor = [selected.text + text for text in texts], selected.range
    return [types.InlineCompletionItem(insert_text=text, range=cursor) for text in texts]


# How an answer of the client's that is no result of the kind asked for fails the
# request that awaited it (`structure_message`), read back by the command that sent it.
UNREADABLE_RESPONSE = "unreadable response"
# What the transport puts in place of a message body too large to read (see transport.py).
OVERSIZED = "dlm-lsp/oversized"
MAX_MESSAGE_BYTES = 64 << 20  # a 10 MB document, JSON-escaped, fits many times over
# given-up ids remembered for their late answers: one per unanswered applyEdit or progress
# token, so a bound keeps an editor that never answers from growing the set for good
GIVEN_UP_KEPT = 256


def oversized_body(size: int, cut: int | None = None) -> bytes:
    """The body that stands for a skipped message announced as `size` bytes; `cut`: the
    bytes it held up to the next message's header, where one came before its end."""
    if cut is None:
        return b'{"jsonrpc": "2.0", "%s": %d}' % (OVERSIZED.encode(), size)
    return b'{"jsonrpc": "2.0", "%s": %d, "cut": %d}' % (OVERSIZED.encode(), size, cut)


def is_id(value: Any) -> bool:
    """A valid JSON-RPC id or progress token: an integer or a string."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


@dataclass(frozen=True)
class Unreadable:
    """A message that could not be read: answered with `code` if it was a request."""

    msg_id: int | str | None
    code: int
    text: str
    answer: bool


# The largest position an LSP `uinteger` holds: lsprotocol refuses a line or character
# outside 0 to this.
UINTEGER_MAX = 2**31 - 1


def clamped_change(data: dict) -> dict:
    """A `didChange` whose ranges' lines and characters are brought into 0 to
    UINTEGER_MAX: one out of it (`"character": -1`) failed to be read at all, so the edit
    was dropped whole and the server's text fell behind the editor's, every later fill
    refused for a version the server never reached.  A notification cannot be refused:
    its range is clamped to the text, as one past the document's end is
    (`documents.apply_change`).  Anything else stays as it came, for pygls to read."""
    params = data.get("params")
    changes = params.get("contentChanges") if isinstance(params, dict) else None
    if not isinstance(changes, list):
        return data
    clamped = []
    for change in changes:
        rng = change.get("range") if isinstance(change, dict) else None
        if isinstance(rng, dict):
            rng = {end: {key: max(0, min(UINTEGER_MAX, value))
                         if isinstance(value, int) and not isinstance(value, bool) else value
                         for key, value in place.items()} if isinstance(place, dict) else place
                   for end, place in rng.items()}
            change = {**change, "range": rng}
        clamped.append(change)
    return {**data, "params": {**params, "contentChanges": clamped}}


def _loose_position(params: Any, depth: int = 0) -> tuple[Any] | None:
    """The first value (as a 1-tuple) of a position (an object with `line` and
    `character`) in a request's params that is not an integer, else None.  lsprotocol's
    converter took `1.5`, `"1"` and `true` for line 1 in `textDocument/inlineCompletion`
    and the other standard requests, a suggestion made at a place the client never named,
    where `dlm/infill` refused them (`parse_range`).  Notifications are left as they come:
    a `didChange` refused for it would leave the server's copy of the text behind."""
    if depth > 8:  # positions sit a few levels down; deeper is arguments, not a place
        return None
    if isinstance(params, dict):
        if "line" in params and "character" in params:
            for value in (params["line"], params["character"]):
                if isinstance(value, bool) or not isinstance(value, int):
                    return (value,)
        children: Any = params.values()
    elif isinstance(params, list):
        children = params
    else:
        return None
    for value in children:
        odd = _loose_position(value, depth + 1)
        if odd is not None:
            return odd
    return None


def _envelope_problem(data: dict) -> str | None:
    """What makes a JSON object something other than a JSON-RPC 2.0 message, if anything."""
    if data.get("jsonrpc") != "2.0":
        return 'the "jsonrpc" member must be "2.0"'
    if "id" in data and not is_id(data["id"]):
        return "a request id must be an integer or a string"
    if "method" in data and not isinstance(data["method"], str):
        return "the method must be a string"
    if "method" not in data and "id" not in data:
        return "a message needs a method (request, notification) or an id (response)"
    return None


class DlmProtocol(LanguageServerProtocol):
    """pygls' LSP protocol, answering every request, readable or not (see module doc)."""

    # Over TCP, `exit` closes its client's connection; the process serves others.
    leaves_on_exit = False
    # Over TCP, what the connection must pass before it is served (admission.py), and
    # how many other connections are served; None: serve (stdio, the tests' servers).
    gate: Gate | None = None
    admitted_elsewhere: Callable[[], int] = staticmethod(lambda: 0)
    admitted = False
    refused = False  # answered once and closing: what it sent after is dropped
    initialize_seen = False  # this connection's initialize came (one is allowed)

    @property
    def awaiting_admission(self) -> bool:
        """Whether this is a gated connection (TCP) whose initialize has not passed yet."""
        return self.gate is not None and not self.admitted

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # request handlers that `$/cancelRequest` cancelled, until they are answered
        self._cancelled_by_client: set[Any] = set()
        # ids of the server's own requests it gave up on (`forget_request`), newest last
        self._given_up: OrderedDict[str, None] = OrderedDict()

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """Stop the process (pygls' way), or over TCP end only this connection."""
        if not self.leaves_on_exit:
            yield from super().lsp_exit(*args)
            return
        if self.writer is not None:
            self.writer.close()  # the reader sees the end, and the connection is let go

    @staticmethod
    def _quiet_pygls(record: logging.LogRecord) -> bool:
        """A logging filter: pygls logs each message it cannot read at ERROR with a
        cattrs traceback (dozens of lines); `structure_message` says why in one line."""
        return not record.getMessage().startswith("Unable to deserialize message")

    def structure_message(self, data: dict[str, Any]) -> Any:
        """A JSON object as a typed message, or `Unreadable` saying why it is not one.

        This is json.loads' object hook, so it also sees every nested object;
        only objects with a "jsonrpc" member are taken for messages.
        """
        if "jsonrpc" not in data:
            return data
        if OVERSIZED in data:
            limit = f"the limit is {MAX_MESSAGE_BYTES} bytes"
            why = (f"message of {data[OVERSIZED]} bytes skipped: {limit}" if "cut" not in data
                   else f"message announced as {data[OVERSIZED]} bytes ({limit}) skipped: "
                        f"the next message's header came after {data['cut']} bytes of it")
            return Unreadable(None, types.ErrorCodes.InvalidRequest, why, answer=True)
        problem = _envelope_problem(data)
        if problem is not None:
            msg_id = data.get("id") if is_id(data.get("id")) else None
            return Unreadable(msg_id, types.ErrorCodes.InvalidRequest, problem,
                              answer="method" in data or "id" not in data)
        stray = self._stray(data)
        if stray is not None:
            return Unreadable(data["id"], types.ErrorCodes.InvalidRequest, stray, answer=True)
        if "method" in data and "params" not in data:
            data = {**data, "params": None}  # JSON-RPC lets a request leave params out
        if "method" in data and "id" in data:
            odd = _loose_position(data["params"])
            if odd is not None:
                return Unreadable(data["id"], types.ErrorCodes.InvalidParams,
                                  f"invalid params for {data['method']}: a position's line "
                                  f"and character must be integers, got {odd[0]!r}",
                                  answer=True)
        if data.get("method") == types.TEXT_DOCUMENT_DID_CHANGE:
            data = clamped_change(data)
        pygls_log = logging.getLogger("pygls.protocol.json_rpc")
        pygls_log.addFilter(self._quiet_pygls)
        try:
            return super().structure_message(data)
        except Exception as exc:  # noqa: BLE001 -- pygls wraps cattrs' many error classes
            reason = _reason(exc.__cause__ or exc)
        finally:
            pygls_log.removeFilter(self._quiet_pygls)
        if "method" not in data:  # a response we cannot read: fail the request awaiting it
            if data.get("result", "") is None and "error" not in data:
                reason = "null, where a result was due"  # cattrs' TypeError said nothing
            return types.ResponseErrorMessage(id=data["id"], error=types.ResponseError(
                types.ErrorCodes.InvalidParams, f"{UNREADABLE_RESPONSE}: {reason}"))
        return Unreadable(data.get("id"), types.ErrorCodes.InvalidParams,
                          f"invalid params for {data['method']}: {reason}",
                          answer="id" in data)

    def _stray(self, data: dict) -> str | None:
        """Why a message with an id gets no answer from pygls, where it gets none: a
        notification sent with an id (a request, which must be answered: pygls ran
        `textDocument/didOpen` with id 30 and answered nothing), or an object with
        neither a method nor a result or error whose id answers no request of ours
        (pygls only logged "response to unknown message id").  An id-only answer to
        one of our requests stays an unreadable answer (it fails that request)."""
        if "id" not in data:
            return None
        method = data.get("method")
        if method is not None:
            kind = types.METHOD_TO_TYPES.get(method, (None,))[0]
            if kind is not None and kind.__name__.endswith("Notification"):
                return f"{method} is a notification, sent with an id: not run"
            return None
        if ("result" in data or "error" in data or data["id"] in self._request_futures
                or data["id"] in self._given_up):
            return None
        return "neither a request (no method) nor an answer (no result or error)"

    def handle_message(self, message: Any) -> None:
        """Answer what cannot be handled; hand the rest to pygls."""
        if isinstance(message, Unreadable):
            log.warning("unreadable message (%s)", message.text)
            if message.answer:
                self.refuse(message.msg_id, message.code, message.text)
        elif not hasattr(message, "jsonrpc"):  # not a JSON object, or no "jsonrpc" member
            msg_id = message.get("id") if isinstance(message, dict) else None
            self.refuse(msg_id if is_id(msg_id) else None, types.ErrorCodes.InvalidRequest,
                         "not a JSON-RPC 2.0 message object")
        elif self.awaiting_admission:
            self._admit(message)
        elif self._shutdown and hasattr(message, "method") and hasattr(message, "id") \
                and message.method != types.EXIT:
            self.refuse(message.id, types.ErrorCodes.InvalidRequest,
                         "the server is shutting down (after a shutdown request)")
        elif self._before_initialize(message):
            return
        else:
            if getattr(message, "method", None) == types.INITIALIZE:
                take_token(message.params.initialization_options)
            super().handle_message(message)

    def _before_initialize(self, message: Any) -> bool:
        """Whether `message` is out of order and was answered here: a request before
        `initialize` gets LSP's "server not initialized" (the workspace does not exist
        yet: pygls answered with an internal error and a traceback), a notification then
        is dropped, and a second `initialize` is refused (it would reload the settings
        under the running session)."""
        method = getattr(message, "method", None)
        if method is None or method == types.EXIT:
            return False
        if method == types.INITIALIZE:
            if not self.initialize_seen:
                self.initialize_seen = True
                return False
            self.refuse(message.id, types.ErrorCodes.InvalidRequest,
                        "initialize was already sent on this connection")
            return True
        if self.initialize_seen:
            return False
        if hasattr(message, "id"):
            self.refuse(message.id, NOT_INITIALIZED,
                        f"{method} before initialize: the server is not initialized yet")
        else:
            log.warning("%s before initialize: dropped", method)
        return True

    def _admit(self, message: Any) -> None:
        """A connection's first message: an `initialize` that passes the gate is served
        (and the connection from then on); anything else is refused, and the connection
        closed, so an unknown client gets no further than one answer."""
        if self.refused:
            return
        method, msg_id = getattr(message, "method", None), getattr(message, "id", None)
        if method == types.INITIALIZE:
            assert self.gate is not None
            refusal = self.gate.refusal(message.params.initialization_options,
                                        self.admitted_elsewhere())
            if refusal is None:
                self.admitted = True  # a client now (shared.py), before its settings apply
                self.handle_message(message)
                return
            code, text = refusal
        else:
            code, text = NOT_INITIALIZED, "this server serves a connection after its initialize"
        self.turn_away(msg_id if method is not None else None, code, text)

    def turn_away(self, msg_id: int | str | None, code: int, text: str) -> None:
        """Refuse a connection not admitted: one answer (for a request), then closed."""
        log.warning("refused a TCP client: %s", text)
        self.refused = True
        if msg_id is not None:
            self.refuse(msg_id, code, text)
        if self.writer is not None:
            self.writer.close()

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any,
                         args: tuple[Any, ...] | None = None,
                         kwargs: dict[str, Any] | None = None) -> None:
        """Run a handler as pygls does, and let go of its future once it is done.

        pygls 2.1 files the future of every handler that is a coroutine, a thread
        function or a generator in `_request_futures`, and only a request's answer takes
        it out.  A notification's (didOpen, didChange, didClose: generators;
        initialized, didChangeConfiguration: coroutines) is filed under a made-up id
        and stayed for good: a server open all day kept one per keystroke (20,000
        didChange: +41 MiB).  A request's entry is still removed by its answer, first.
        """
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done: self._forget_future(msg_id, done))

    def _forget_future(self, msg_id: Any, future: Any) -> None:
        """Remove a finished handler's future, unless another now holds its id.  A
        cancelled one is left to whoever cancelled it (`$/cancelRequest` and
        `drop_connection` take it out first; `shutdown` cancels while it walks the dict,
        where removing it would break the walk)."""
        if not future.cancelled() and self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """Answer a request.  An error the handler raised on purpose (a JsonRpcException:
        cancelled, stale, busy, timed out, ...) is answered and logged in one line; pygls
        would log a traceback at ERROR for each, and an editor cancels most of its
        requests while the user types.

        A request handler cancelled by the client (`$/cancelRequest`) or by `shutdown`
        (pygls' lsp_shutdown cancels every one still running) was answered by pygls
        "Request with id N is canceled", which says neither why nor who.  Here that
        answer says which, with the same -32800, as a fill stopped between its steps
        says its reason.  They are fills (the other requests are answered at once);
        after `shutdown` no `$/cancelRequest` is read, so a request cancelled then and
        not before by the client was cancelled by the shutdown.  One cancelled as its
        client went away (drop_connection) keeps pygls' answer: nobody reads it."""
        by_client = future in self._cancelled_by_client
        self._cancelled_by_client.discard(future)
        error: BaseException | None = None
        if future.cancelled() and (by_client or self._shutdown):
            why = CLIENT_CANCELLED if by_client else SHUTTING_DOWN
            error = JsonRpcRequestCancelled(f"fill stopped: {why}")
        elif not future.cancelled():
            error = future.exception()
        if not isinstance(error, JsonRpcException):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        log.info("request %s answered with an error: %s", msg_id, error)
        self._send_response(msg_id, error=error.to_response_error())

    def refuse(self, msg_id: int | str | None, code: int, text: str) -> None:
        """Answer a request with an error (`msg_id` None when it cannot be known: the
        answer still carries `"id": null`, which lsprotocol's converter would leave out)."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code,
                                                                  "message": text}})

    def _handle_cancel_notification(self, msg_id: int | str) -> None:
        """Cancel a request in flight, and remember who did for its answer; one that
        already finished is not worth a warning."""
        future = self._request_futures.pop(msg_id, None)
        if future is None:
            log.debug("$/cancelRequest for %r, which is not in flight", msg_id)
        elif future.cancel():
            self._cancelled_by_client.add(future)

    def ask(self, method: str, params: Any) -> tuple[asyncio.Future, str]:
        """Send the client a request of the server's own, and its id, by which it can be
        given up (`forget_request`): pygls makes its ids alike (UUIDs), but keeps them."""
        msg_id = str(uuid.uuid4())
        return asyncio.ensure_future(self.send_request_async(method, params, msg_id=msg_id)), msg_id

    def forget_request(self, msg_id: str) -> None:
        """Stop waiting for the client's answer to the server's own request `msg_id` (an
        applyEdit the client left unanswered): pygls keeps its future and result type
        until the answer comes, for good where none does.  An answer that comes later
        is dropped quietly (`_handle_response`); the server's ids are UUIDs, so it
        cannot be taken for another request's."""
        future = self._request_futures.pop(msg_id, None)
        self._result_types.pop(msg_id, None)
        if future is not None:
            future.cancel()
        self._given_up[msg_id] = None
        while len(self._given_up) > GIVEN_UP_KEPT:
            self._given_up.popitem(last=False)

    def _handle_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        """Take the client's answer to a request of the server's own.  A late answer to
        one the server gave up on is expected of a slow editor, not a fault: pygls would
        warn of "a response to unknown message id", which reads as a protocol bug in
        the log; it is noted at debug level and dropped.  An answer to an id the server
        never sent still gets pygls' warning."""
        if msg_id in self._given_up and msg_id not in self._request_futures:
            del self._given_up[msg_id]
            log.debug("late answer to request %s, given up on: dropped", msg_id)
            return
        super()._handle_response(msg_id, result, error)

    def cancelled_by_client(self, future: Any) -> bool:
        """Whether the client cancelled the request `future` handles (`$/cancelRequest`)."""
        return future in self._cancelled_by_client

    def drop_connection(self) -> list[asyncio.Future]:
        """Forget the client that went away: cancel what it was waiting for or owed us, so
        the next client (TCP) starts clean.  Returns the handler tasks still finishing:
        their last words must reach the old connection, not the next one."""
        futures = list(self._request_futures.values())
        self._request_futures.clear()
        self._shutdown = False
        self.initialize_seen = False
        for future in futures:
            future.cancel()
        return [f for f in futures if isinstance(f, asyncio.Future) and not f.done()]

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(self, params: types.ExecuteCommandParams) -> Any:
        """Run a command in the request's own task.  pygls runs it in a task of its own,
        which `$/cancelRequest` does not reach: a cancelled hole filling went on and its
        edit was applied after the client was told it was cancelled."""
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams(f"no command {params.command!r}")
        try:
            args, kwargs = _prepare_command_arguments(handler, params, self._converter)
        except Exception as exc:  # noqa: BLE001 -- cattrs' many error classes, as pygls
            raise JsonRpcInvalidParams(f"arguments of {params.command}: {exc}") from exc
        result = handler(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
            self, params: types.DidChangeTextDocumentParams) -> Generator[Any, Any, None]:
        """Apply edits on LSP lines (see documents.py), then call the server's handler."""
        if not apply_changes(self.workspace, params.text_document, params.content_changes):
            log.warning("didChange for %s, which is not open", params.text_document.uri)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(
            self, params: types.DidChangeNotebookDocumentParams) -> Generator[Any, Any, None]:
        """Apply a notebook's change, its cells' edits on LSP lines (see notebooks.py),
        then call the server's handler."""
        apply_notebook_change(self.workspace, params)
        if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None


    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(
            self, params: types.DidOpenNotebookDocumentParams) -> Generator[Any, Any, None]:
        """Open a notebook, then call the server's handler.  A notebook already open is
        first closed of the cells the new open does not list (`notebooks.
        left_out_on_reopening`), through the server's didClose handler: pygls left them
        open for good."""
        left = left_out_on_reopening(self.workspace, params)
        if left is not None:
            self.workspace.remove_notebook_document(left)
            if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_CLOSE)) is not None:
                yield handler, (left,), None
        self.workspace.put_notebook_document(params)
        if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(
            self, params: types.DidCloseNotebookDocumentParams) -> Generator[Any, Any, None]:
        """Close a notebook and every cell it holds (`notebooks.with_all_cells`), then call
        the server's handler with them all."""
        params = with_all_cells(self.workspace, params)
        self.workspace.remove_notebook_document(params)
        if (handler := self.fm.features.get(types.NOTEBOOK_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None


def _reason(exc: BaseException) -> str:
    """A one-line reason from a (cattrs) structuring error."""
    notes = getattr(exc, "exceptions", None)
    if notes:
        return "; ".join(_reason(e) for e in notes[:3])
    return f"{type(exc).__name__}: {exc}"[:300]
