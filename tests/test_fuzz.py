"""Protocol fuzzing: a hostile client against the real server process, over stdio.

Every request gets its result or a well-formed JSON-RPC error, the process
survives, and the next valid request works.  Positions are checked against an
independent model of LSP lines (breaks at \\n, \\r\\n, \\r only; UTF-16 units), and
edits against the client's own copy of each version of the document.  Examples
are derandomized and bounded, so this runs in CI in well under a minute.
"""

from __future__ import annotations

import itertools
import json
import os
import re

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from rpc import ServerProcess, error_code, frame, free_port, hang_up, tcp_connection


def fuzz(examples: int) -> settings:
    """Derandomized and bounded: the same examples in every run, cheap enough for CI."""
    return settings(derandomize=True, database=None, deadline=None, max_examples=examples,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


URI = "file:///work/fuzz%20target.py"  # percent-encoded, as VS Code sends a space
DOC = "def f(x):\r\n    return '\U0001f600' + x  # <FILL>\r\n\rprint(f('a'))\n"
ANSWERED = {-32600, -32601, -32602, -32800, -32801, -32004}  # well-formed refusals
_uris = itertools.count()


@pytest.fixture(scope="module")
def server(model_dir):
    """One server for the module: fills are short (4 tokens) so examples stay cheap."""
    process = ServerProcess()
    process.client.initialize({"model": str(model_dir), "maxSpanTokens": 4, "repairRounds": 0,
                               "fallback": False, "timeoutMs": 30000})
    process.client.open(URI, DOC)
    yield process
    process.close()


def assert_alive(server: ServerProcess) -> None:
    """The process runs and answers a valid request."""
    reply = server.client.call("dlm/status", {}, timeout=30)
    assert "result" in reply, reply
    assert server.proc.poll() is None


def assert_well_formed(reply: dict, msg_id) -> None:
    assert reply["jsonrpc"] == "2.0" and reply["id"] == msg_id
    assert ("result" in reply) != ("error" in reply)
    if "error" in reply:
        assert isinstance(reply["error"]["message"], str) and reply["error"]["message"]
        assert reply["error"]["code"] in ANSWERED, reply


# -- hostile params ------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                max_size=3),
    max_leaves=8)
numbers = st.sampled_from([0, 1, 2, 5, 11, 12, -1, 2**31, 10**12]) | json_values
positions = st.fixed_dictionaries({"line": numbers, "character": numbers}) | json_values
ranges = st.fixed_dictionaries({"start": positions, "end": positions}) | json_values
documents = st.fixed_dictionaries({"uri": st.sampled_from([URI, "file:///nope.py"])
                                   | json_values}) | json_values


def _valid(method: str) -> dict:
    """Well-formed params of each method, for mutation."""
    doc, cursor = {"uri": URI}, {"line": 1, "character": 4}
    rng = {"start": cursor, "end": cursor}
    return {
        "dlm/infill": {"textDocument": doc, "range": rng, "options": {"length": 2}},
        "dlm/status": {},
        "textDocument/inlineCompletion": {"textDocument": doc, "position": cursor,
                                          "context": {"triggerKind": 1}},
        "textDocument/completion": {"textDocument": doc, "position": cursor},
        "textDocument/codeAction": {"textDocument": doc, "range": rng,
                                    "context": {"diagnostics": []}},
        "workspace/executeCommand": {"command": "dlm.rewriteSelection",
                                     "arguments": [URI, rng]},
    }[method]


@st.composite
def hostile_requests(draw) -> tuple[str, object]:
    """A method and params that are almost right, or not at all."""
    method = draw(st.sampled_from(["dlm/infill", "dlm/status", "textDocument/inlineCompletion",
                                   "textDocument/completion", "textDocument/codeAction",
                                   "workspace/executeCommand", "dlm/unknown", "$/unknown"]))
    if method in ("dlm/unknown", "$/unknown") or draw(st.booleans()) is False:
        return method, draw(json_values)
    params = dict(_valid(method)) if method not in ("dlm/unknown", "$/unknown") else {}
    for key in draw(st.lists(st.sampled_from(sorted(params) + ["range", "position"]),
                             min_size=1, max_size=2)):
        params[key] = draw({"range": ranges, "position": positions, "textDocument": documents,
                            "options": st.dictionaries(st.sampled_from(
                                ["length", "steps", "strategy", "seed", "candidates", "x"]),
                                json_values, max_size=3)}.get(key, json_values))
    if method == "workspace/executeCommand":
        params["command"] = draw(st.sampled_from(["dlm.fillHoles", "dlm.rewriteSelection",
                                                  "nope"]) | json_values)
    return method, params


@fuzz(120)
@given(hostile_requests())
def test_every_hostile_request_gets_a_result_or_a_well_formed_error(server, request):
    method, params = request
    client = server.client
    client.send({"jsonrpc": "2.0", "id": "fuzz", "method": method, "params": params})
    reply = client.response("fuzz")
    client.messages.clear()  # the id is reused by the next example
    assert_well_formed(reply, "fuzz")
    assert_alive(server)


@pytest.mark.parametrize("message, code", [
    (b"{not json", -32700),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "dlm/status", "params": {}\x00}', -32700),
    (b"\xff\xfe junk", -32700),
    (b"[" * 100000, -32700),  # nested too deep for the parser
    (b"[1, 2]", -32600),
    (b'"just a string"', -32600),
    (b'{"id": 7, "method": "dlm/status"}', -32600),  # no "jsonrpc"
    (b'{"jsonrpc": "1.0", "id": 7, "method": "dlm/status"}', -32600),
    (b'{"jsonrpc": "2.0", "id": [7], "method": "dlm/status"}', -32600),
    (b'{"jsonrpc": "2.0", "id": 7, "method": 42}', -32600),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/inlineCompletion",'
     b' "params": {"junk": 1}}', -32602),  # stock pygls never answers this one
    (b'{"jsonrpc": "2.0", "id": 7, "method": "dlm/infill", "params": {"type_name": "1x"}}',
     -32602),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "dlm/infill", "params": {"textDocument":'
     b' {"uri": "file:///work/fuzz%20target.py"}, "range": {"start": {"line": 1,'
     b' "character": 4}, "end": {"line": 1, "character": 4}}, "workDoneToken": {}}}', -32602),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "no/such/method", "params": {}}', -32601),
    # a line or character that is no integer: lsprotocol's converter took each for 1
    *((b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/inlineCompletion", "params": '
       b'{"textDocument": {"uri": "file:///work/fuzz%20target.py"}, "position": {"line": '
       + line + b', "character": 0}, "context": {"triggerKind": 1}}}', -32602)
      for line in (b"1.5", b'"1"', b"true", b"null")),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/codeAction", "params": {'
     b'"textDocument": {"uri": "file:///work/fuzz%20target.py"}, "range": {"start": {"line":'
     b' 0, "character": 0}, "end": {"line": 0, "character": 2.5}}, "context": '
     b'{"diagnostics": []}}}', -32602),
    # an id and nothing else: no request, and no answer to one of the server's
    (b'{"jsonrpc": "2.0", "id": 7}', -32600),
    # notifications sent as requests: pygls ran them and answered nothing
    (b'{"jsonrpc": "2.0", "id": 7, "method": "$/cancelRequest", "params": {"id": 1}}', -32600),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "textDocument/didClose", "params": {"textDocument":'
     b' {"uri": "file:///nowhere.py"}}}', -32600),
])
def test_malformed_messages_are_answered_and_the_connection_goes_on(server, message, code):
    client = server.client
    client.messages.clear()
    client.send(message)
    reply = client.wait(lambda ms: next((m for m in ms if "error" in m), None))
    assert reply["error"]["code"] == code and reply["error"]["message"]
    assert reply["id"] in (7, None)
    assert_alive(server)


def test_a_request_without_params_is_served(server):
    reply = server.client.call("dlm/status")  # JSON-RPC lets params be left out
    assert reply["result"]["openDocuments"] >= 1


def test_a_message_over_the_size_limit_is_skipped_and_answered(server):
    from dlm_lsp.protocol import MAX_MESSAGE_BYTES

    client = server.client
    client.messages.clear()
    size = MAX_MESSAGE_BYTES + 1
    client.send(b"x" * size)  # read and dropped in chunks, never allocated whole
    reply = client.wait(lambda ms: next((m for m in ms if "error" in m), None), timeout=60)
    assert reply["error"]["code"] == -32600 and str(size) in reply["error"]["message"]
    assert_alive(server)


@pytest.mark.parametrize("length", [b"99999999999999999999999", b"70000000"])
def test_a_length_over_the_limit_with_a_short_body_loses_only_that_message(server, length):
    """The skip waited for bytes no client would send, and every later message went into
    it: the server ran on, answering nothing.  It stops at the next message's header."""
    client = server.client
    client.messages.clear()
    client._write(b"Content-Length: " + length + b"\r\n\r\n{}")
    reply = client.call("dlm/status", {})
    assert reply["result"]["openDocuments"] >= 1
    [skipped] = [m for m in client.messages if "error" in m]
    assert skipped["error"]["code"] == -32600 and skipped["id"] is None
    assert (f"message announced as {int(length)} bytes" in skipped["error"]["message"]
            and "came after 2 bytes of it" in skipped["error"]["message"])
    assert_alive(server)


def test_two_lengths_over_the_limit_in_a_row_are_each_answered(server):
    """The second header is found in the first's skip; its own skip starts with the bytes
    kept from that search."""
    client = server.client
    client.messages.clear()
    lie = b"Content-Length: 99999999999999999999999\r\n\r\n{}"
    client._write(lie + lie)
    assert client.call("dlm/status", {})["result"]["openDocuments"] >= 1
    skipped = [m for m in client.messages if "error" in m]
    assert [m["error"]["code"] for m in skipped] == [-32600, -32600]
    assert all("came after 2 bytes of it" in m["error"]["message"] for m in skipped)


def test_a_line_of_fifty_megabytes_on_stdin_is_skipped_in_bounded_memory():
    """pygls read a header line whole, however long: 50 MB with no line break were held
    (and copied) in memory before a byte was looked at.  Read a bounded piece at a
    time (as asyncio reads TCP), the junk is skipped and answered once, and the request
    right after it, on the same line, is read.  No model: the request is answered
    "not initialized", which is an answer all the same."""
    junk = 50_000_000
    process = ServerProcess()
    try:
        client = process.client
        assert error_code(client.call("dlm/status", {})) == -32002  # up and reading
        _, peak_before = process.memory_kib()
        chunk = b"x" * (1 << 20)
        for start in range(0, junk, len(chunk)):
            client._write(chunk[:junk - start])
        client.send({"jsonrpc": "2.0", "id": "after", "method": "dlm/status", "params": {}})
        assert error_code(client.response("after", timeout=60)) == -32002
        _, peak_after = process.memory_kib()
        skipped = [m for m in client.messages if "id" in m and m["id"] is None]
        assert [error_code(m) for m in skipped] == [-32700]  # told once
        assert f"skipped {junk} bytes" in skipped[0]["error"]["message"]
        # KiB: +1 MiB measured (it was +96 MiB: the line, and a copy of it, whole)
        assert peak_after - peak_before < 20 << 10, (peak_before, peak_after)
    finally:
        process.close()


def test_a_request_whose_header_the_line_limit_cuts_in_two_is_answered():
    """Junk with no line break is read 64 KiB at a time and skipped, and the request
    right after it, on the same line, is read: also when the 64 KiB cut falls inside
    its header (that request was lost, the cut's tail skipped with the junk).  No model:
    "not initialized" is an answer all the same."""
    limit = 1 << 16
    process = ServerProcess()
    try:
        client = process.client
        for cut in (1, 7, 16, 19):  # bytes of its "Content-Length: NN\r\n" before the cut
            client.messages.clear()
            junk = 3 * limit - cut
            client._write(b"x" * junk)
            client.send({"jsonrpc": "2.0", "id": f"cut-{cut}", "method": "dlm/status"})
            assert error_code(client.response(f"cut-{cut}", timeout=30)) == -32002
            [skipped] = [m for m in client.messages if "id" in m and m["id"] is None]
            assert f"skipped {junk} bytes" in skipped["error"]["message"]
    finally:
        process.close()


def test_floods_of_cancels_and_unknown_methods_leave_the_server_responsive(server):
    client = server.client
    slow = client.request("dlm/infill", {"textDocument": {"uri": URI}, "range": {
        "start": {"line": 3, "character": 0}, "end": {"line": 3, "character": 0}},
        "options": {"steps": 4}})
    for i in range(10000):
        client.notify("$/cancelRequest", {"id": i if i % 100 else slow})
        if i % 10 == 0:
            client.notify("$/noSuchNotification", {"i": i})
    for i in range(200):
        client.request("no/such", {}, msg_id=f"unknown-{i}")
    assert error_code(client.response("unknown-199")) == -32601
    assert error_code(client.response(slow)) in (None, -32800)
    assert_alive(server)
    assert "for 9999" not in server.log()  # a cancel for a finished request is not a warning


# -- positions: an independent model of LSP lines ---------------------------------------------

def lsp_lines(text: str) -> list[tuple[int, str]]:
    """(start offset, content) of each line; only \\n, \\r\\n and \\r end a line."""
    lines, start, i = [], 0, 0
    while i < len(text):
        if text[i] in "\r\n":
            end = i
            i += 2 if text[i:i + 2] == "\r\n" else 1
            lines.append((start, text[start:end]))
            start = i
        else:
            i += 1
    return lines + [(start, text[start:])]


def lsp_offset(text: str, line: int, character: int) -> int | None:
    """The offset of a UTF-16 position, or None when it is not a position in `text`."""
    lines = lsp_lines(text)
    if not 0 <= line < len(lines) or character < 0:
        return None
    start, content = lines[line]
    units = 0
    for i, char in enumerate(content):
        if units == character:
            return start + i
        units += 2 if ord(char) > 0xFFFF else 1
    return start + len(content) if units == character else None


def lsp_position(text: str, offset: int) -> dict:
    """The UTF-16 position of an offset (not inside a \\r\\n)."""
    for number, (start, content) in reversed(list(enumerate(lsp_lines(text)))):
        if start <= offset:
            before = content[:offset - start]
            return {"line": number, "character": len(before.encode("utf-16-le")) // 2}
    raise AssertionError(offset)


PIECES = ["a", "bc", " ", "\t", "\n", "\r\n", "\r", "\x0c", "\x0b", "\u2028", "\x85", "é",
          "\U0001f600", "\x00", "<FILL>", "def g():\n    return 1\n"]
texts = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def _range(rng: dict) -> dict:
    return {"start": rng["start"], "end": rng["end"]}


@fuzz(80)
@given(texts, st.data())
def test_a_range_is_accepted_exactly_when_it_is_a_range_of_the_clients_text(server, text,
                                                                            data):
    lines = lsp_lines(text)

    def in_or_just_outside(last: int) -> int:  # 0..last mostly, sometimes -1 or last + 1
        outside = data.draw(st.sampled_from([False, False, False, False, True]))
        return data.draw(st.sampled_from([-1, last + 1]) if outside else st.integers(0, last))

    def near_a_position() -> tuple[int, int]:
        line = in_or_just_outside(len(lines) - 1)
        content = lines[line][1] if 0 <= line < len(lines) else ""
        return line, in_or_just_outside(len(content.encode("utf-16-le")) // 2)

    uri = f"file:///work/positions-{next(_uris)}.py"
    client = server.client
    client.open(uri, text)
    ends = [near_a_position(), near_a_position()]
    (sl, sc), (el, ec) = sorted(ends) if data.draw(st.sampled_from([1, 1, 1, 0])) else ends
    rng = {"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}}
    start, end = lsp_offset(text, sl, sc), lsp_offset(text, el, ec)
    reply = client.call("dlm/infill", {"textDocument": {"uri": uri}, "range": rng,
                                       "options": {"length": 1, "steps": 1}})
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    if start is None or end is None or end < start:
        event("refused")
        assert error_code(reply) == -32602, (text, rng, reply)
        return
    event("accepted")
    assert "result" in reply, (text, rng, reply)
    result = reply["result"]
    if not result["edits"]:  # only whitespace, in place of code or at a cursor: said why
        assert (text[start:end].strip() or start == end) and "message" in result
        assert not any(c["text"].strip() for c in result["candidates"])
        return
    [edit] = result["edits"]
    assert edit["range"] == rng


# -- nothing lost: random interleavings of edits and fills --------------------------------------

@st.composite
def sessions(draw) -> tuple[str, list]:
    """A starting text and a list of operations: edits, fills, hole fills, waits."""
    text = draw(texts)
    ops = draw(st.lists(st.one_of(
        st.tuples(st.just("edit"), st.integers(0, 10**6), st.integers(0, 10**6),
                  st.sampled_from(PIECES + [""])),
        st.tuples(st.just("fill"), st.integers(0, 10**6), st.integers(0, 10**6)),
        st.tuples(st.just("holes")),
        st.tuples(st.just("wait"))), max_size=10))
    return text, ops


def _char_boundaries(text: str) -> list[int]:
    """Offsets that are positions: not inside a \\r\\n."""
    return [i for i in range(len(text) + 1) if text[i - 1:i + 1] != "\r\n" or i == 0]


def answered(ids: set):
    """A wait predicate: every request in `ids` has its answer."""
    return lambda messages: {m.get("id") for m in messages if "method" not in m} >= ids


@fuzz(60)
@given(sessions())
def test_edits_change_only_their_range_of_the_version_they_name_and_never_go_stale(
        server, session):
    text, ops = session
    client = server.client
    uri = f"file:///work/session-{next(_uris)}.py"
    versions = {1: text}
    fills: dict = {}  # request id -> (version when sent, range, offsets)
    markers: dict = {}  # dlm/status id sent right after a change -> the version it confirms
    client.messages.clear()
    client.open(uri, text)
    for op in ops:
        current = max(versions)
        text = versions[current]
        bounds = _char_boundaries(text)
        if op[0] in ("edit", "fill"):
            a, b = sorted((bounds[op[1] % len(bounds)], bounds[op[2] % len(bounds)]))
            rng = {"start": lsp_position(text, a), "end": lsp_position(text, b)}
        if op[0] == "edit":
            versions[current + 1] = text[:a] + op[3] + text[b:]
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": current + 1},
                "contentChanges": [{"range": rng, "text": op[3]}]})
            markers[client.request("dlm/status", {})] = current + 1
        elif op[0] == "fill":
            fills[client.request("dlm/infill", {
                "textDocument": {"uri": uri, "version": current}, "range": rng,
                "options": {"length": 2, "steps": 2}})] = (current, rng, a, b)
        elif op[0] == "holes":
            fills[client.request("workspace/executeCommand", {
                "command": "dlm.fillHoles", "arguments": [uri]})] = (current, None, 0, 0)
        else:
            client.wait(answered(set(fills) | set(markers)))
    client.wait(answered(set(fills) | set(markers)))
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    confirmed = 1  # the newest version the server has been seen to know
    for message in client.messages:
        if message.get("method") == "workspace/applyEdit":
            [change] = message["params"]["edit"]["documentChanges"]
            version = change["textDocument"]["version"]
            event("applyEdit")
            assert version >= confirmed  # never an edit for a version the server knew was old
            holes = [m.start() for m in re.finditer("<FILL>", versions[version])]
            starts = [lsp_offset(versions[version], e["range"]["start"]["line"],
                                 e["range"]["start"]["character"]) for e in change["edits"]]
            ends = [lsp_offset(versions[version], e["range"]["end"]["line"],
                               e["range"]["end"]["character"]) for e in change["edits"]]
            assert starts == holes and ends == [h + len("<FILL>") for h in holes]
        elif message.get("id") in markers:
            confirmed = max(confirmed, markers[message["id"]])
        elif message.get("id") in fills and "method" not in message:
            sent, rng, a, b = fills[message["id"]]
            event(f"answer {error_code(message) or 'result'}")
            if "error" in message:
                assert error_code(message) in (-32800, -32801), message
                continue
            result = message["result"]
            assert result["version"] == sent
            if rng is None:  # dlm.fillHoles: its edit went as an applyEdit, checked above, and
                continue  # its answer waits for the client's, which may come after a change
            assert sent >= confirmed  # a fill's edits are never for a version known old
            before = versions[sent]
            if not result["edits"]:  # only whitespace, in place of code or at a cursor
                assert (before[a:b].strip() or a == b) and "message" in result
                continue
            [edit] = result["edits"]
            assert edit["range"] == rng
            after = before[:a] + edit["newText"] + before[b:]
            assert after.startswith(before[:a]) and after.endswith(before[b:])


# -- big documents ---------------------------------------------------------------------------

def _big_documents() -> list[tuple[str, str]]:
    typing_py = open(os.path.join(os.path.dirname(os.__file__), "typing.py")).read()
    return [
        ("ten-megabytes", (typing_py * (10_000_000 // len(typing_py) + 1))[:10_000_000]),
        ("ten-thousand-lines", "".join(f"x{i} = {i}  # \U0001f600\r\n" for i in range(10000))),
        ("one-megabyte-line", 's = "' + "ab cd \U0001f600 " * 100000 + '"\n'),
    ]


@pytest.mark.parametrize("name, text", _big_documents(), ids=lambda v: v[:20])
def test_big_documents_get_checked_ranges_and_fills(server, name, text):
    client = server.client
    uri = f"file:///work/{name}.py"
    client.open(uri, text)
    lines = lsp_lines(text)
    last, (start, content) = len(lines) - 1, lines[-2] if lines[-1][1] == "" else lines[-1]
    line = lines.index((start, content))
    width = len(content.encode("utf-16-le")) // 2

    def infill(sl, sc, el, ec, **options):
        return client.call("dlm/infill", {"textDocument": {"uri": uri}, "range": {
            "start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}},
            "options": {"length": 2, "steps": 2, **options}}, timeout=120)

    assert "outside the document" in infill(last + 1, 0, last + 1, 0)["error"]["message"]
    assert "past the end" in infill(line, width + 1, line, width + 1)["error"]["message"]
    emoji = content.find("\U0001f600")
    if emoji >= 0:
        inside = len(content[:emoji].encode("utf-16-le")) // 2 + 1
        assert "inside a character" in infill(line, inside, line, inside)["error"]["message"]
    middle = len(lines) // 2  # ~2 s in 10 MB, most of it the first full parse
    assert "result" in infill(middle, 0, middle, 0)
    end = {"line": line, "character": width}
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"range": {
                                                 "start": end, "end": end}, "text": "\r\n# end"}]})
    # the edit landed where the client put it: a new line of exactly 5 units after `line`
    assert "past the end" in infill(line + 1, 6, line + 1, 6)["error"]["message"]
    # (both ends valid, so the range is checked for its order: no fill runs)
    assert "before its start" in infill(line + 1, 5, line + 1, 4)["error"]["message"]
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert_alive(server)


def test_a_did_change_with_a_position_out_of_range_is_clamped_not_dropped(server):
    """`"character": -1` failed to be read at all: the edit was dropped whole, the
    server's text fell behind the editor's, and every later fill was refused for a
    version the server never reached, until the document was opened again.  A
    notification cannot be refused: its range is clamped to the text (which text:
    test_handlers)."""
    client, uri = server.client, f"file:///work/clamped{next(_uris)}.py"
    client.open(uri, "x = 1\ny = 2\n")
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"range": {
                                                 "start": {"line": 0, "character": -1},
                                                 "end": {"line": 0, "character": 0}},
                                                 "text": "Q"}]})
    reply = client.call("dlm/infill", {"textDocument": {"uri": uri, "version": 2},
                                       "range": {"start": {"line": 0, "character": 6},
                                                 "end": {"line": 0, "character": 6}},
                                       "options": {"length": 1, "steps": 1}}, timeout=120)
    # at 2, and 6 is the end of its first line, `Qx = 1`, not past it
    assert reply["result"]["version"] == 2, reply
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def test_framing_with_crlf_variants_and_split_writes_still_reads(server):
    client = server.client
    client.messages.clear()
    data = frame({"jsonrpc": "2.0", "id": "split", "method": "dlm/status", "params": {}})
    data = data.replace(b"\r\n\r\n", b"\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n")
    for i in range(0, len(data), 7):
        client._write(data[i:i + 7])
    assert "result" in client.response("split")


def _status_body(msg_id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "dlm/status"}).encode()


WRONGLY_FRAMED = {  # a dlm/status request, framed as no LSP message should be
    "short-length": lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) - 3) + body,
    "long-length": lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) + 3) + body,
    "no-header": lambda body: body,
    "bad-length": lambda body: b"Content-Length: many\r\n\r\n" + body,
}


def _read_on_after_framing_error(client, framed) -> None:
    """Send a wrongly framed request and then good ones: the good ones are answered
    (the first of them may be lost with the bad one: a Content-Length past the body
    swallows its header), and everything else the server sent is a -32700 with a
    null id (what was skipped, or a body that was no JSON)."""
    client.messages.clear()
    client._write(framed(_status_body("lost")))  # as it is, with no header added
    for msg_id in ("next-1", "next-2"):
        client.send(_status_body(msg_id))
    assert "result" in client.response("next-2", timeout=30)
    others = [m for m in client.messages if m.get("id") not in ("next-1", "next-2")
              and "method" not in m]
    assert others and all(m["id"] is None and error_code(m) == -32700 for m in others)


@pytest.mark.parametrize("framed", WRONGLY_FRAMED.values(), ids=WRONGLY_FRAMED)
def test_after_a_wrongly_framed_message_the_server_reads_on_and_says_so(server, framed):
    """pygls' reader answered nothing ever again (the process ran on, deaf)."""
    _read_on_after_framing_error(server.client, framed)
    assert "skipped" in server.log() or "unreadable JSON" in server.log()
    assert_alive(server)


@pytest.mark.parametrize("header", [b"content-length: %d\r\n\r\n", b"Content-Length:%d\r\n\r\n",
                                    b"Content-Length: %d\n\n"])
def test_a_header_in_another_spelling_is_read(server, header):
    body = _status_body("spelt")
    server.client._write(header % len(body) + body)
    assert "result" in server.client.response("spelt")


def test_a_tcp_connection_reads_on_after_a_wrongly_framed_message(model_dir):
    port = free_port()
    process = ServerProcess("--tcp", f"127.0.0.1:{port}")
    try:
        client, sock = tcp_connection(port)
        client.initialize({"model": str(model_dir)})
        _read_on_after_framing_error(client, WRONGLY_FRAMED["short-length"])
        hang_up(sock)
    finally:
        process.close()
