"""The LSP base protocol in dlm_lsp.framing: framing, incremental reading, the client."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Callable

import pytest

from dlm_lsp.framing import (
    Client,
    FramingError,
    HeaderReader,
    MessageReader,
    ResponseError,
    frame,
    own_reader,
    read_messages,
)

FIRST = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"text": "é\r\n\r\n"}}
SECOND = {"jsonrpc": "2.0", "method": "initialized", "params": {}}


def test_frame_counts_the_bytes_of_the_encoded_body():
    body = "naïve ✓".encode()
    assert frame(body) == b"Content-Length: %d\r\n\r\n" % len(body) + body
    assert frame(FIRST) == frame(json.dumps(FIRST).encode())


def test_a_message_split_at_any_byte_is_read_once_whole():
    data = frame(FIRST)
    for at in range(len(data) + 1):
        reader = MessageReader()
        bodies = reader.feed(data[:at]) + reader.feed(data[at:])
        assert [json.loads(b) for b in bodies] == [FIRST], at


def test_messages_fed_a_byte_at_a_time_come_out_in_order():
    reader = MessageReader()
    bodies = [body for byte in frame(FIRST) + frame(SECOND) for body in reader.feed(bytes([byte]))]
    assert [json.loads(b) for b in bodies] == [FIRST, SECOND]


def test_several_messages_in_one_chunk_all_come_out():
    data = frame(FIRST) + frame(SECOND) + frame(b"") + frame(FIRST)
    bodies = MessageReader().feed(data)
    assert bodies[2] == b""
    assert [json.loads(b) for b in bodies if b] == [FIRST, SECOND, FIRST]


def test_a_partial_message_waits_for_the_rest():
    data = frame(FIRST) + frame(SECOND)
    reader = MessageReader()
    assert len(reader.feed(data[:-1])) == 1
    assert reader.feed(data[-1:]) == [json.dumps(SECOND).encode()]


@pytest.mark.parametrize("header", [
    b"content-length: %d\r\n",
    b"CONTENT-LENGTH:%d\r\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n",
    b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
])
def test_header_names_ignore_case_and_other_headers_are_ignored(header):
    body = json.dumps(FIRST).encode()
    assert MessageReader().feed(header % len(body) + b"\r\n" + body + frame(SECOND)) == [
        body, json.dumps(SECOND).encode()]


@pytest.mark.parametrize("header", [
    b"Content-Type: application/vscode-jsonrpc\r\n",
    b"Content-Length: \r\n",
    b"Content-Length: abc\r\n",
    b"Content-Length: -1\r\n",
    b"Content-Length: 1e3\r\n",
    b"Content-Length: 3\r\nContent-Length: 4\r\n",
    b"garbage\r\n",
])
def test_a_missing_or_invalid_content_length_is_a_clear_error(header):
    reader = MessageReader()
    with pytest.raises(FramingError, match="Content-Length|header line"):
        reader.feed(header + b"\r\n{}")
    with pytest.raises(ValueError):  # and stays one: the stream cannot be read on
        reader.feed(frame(SECOND))


def _server_reads(data: bytes, limit: int | None = None
                  ) -> tuple[list[bytes], list[tuple[int, str] | None]]:
    """The bodies the server's HeaderReader finds in `data` read as a stream (header
    lines, at most `limit` bytes at a time as the server reads them, then each body by
    its length), and what it said was skipped before each."""
    headers, bodies, skipped = HeaderReader(), [], []
    while data:
        end = data.find(b"\n") + 1 or len(data)
        if limit is not None and end > limit:  # a piece of a line over the limit
            headers.feed_part(data[:limit], "a long line")
            data = data[limit:]
            continue
        line, data = data[:end], data[end:]
        length = headers.feed(line)
        if length is not None:
            bodies.append(data[:length])
            skipped.append(headers.take_skipped())
            data = data[length:]
    return bodies, skipped


@pytest.mark.parametrize("header", [
    b"content-length: %d\r\n\r\n", b"CONTENT-LENGTH:%d\r\n\r\n", b"Content-Length: %d\n\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n",
    b"\r\nContent-Length: %d\r\n\r\n",  # a line break between messages
])
def test_the_server_reads_any_spelling_of_a_header_that_says_the_length(header):
    body = json.dumps(FIRST).encode()
    assert _server_reads(header % len(body) + body + frame(SECOND)) == (
        [body, json.dumps(SECOND).encode()], [None, None])


@pytest.mark.parametrize("framed, skipped", [
    # a Content-Length 3 short of the body: the body's tail runs into the next header
    (lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) - 3) + body, 3),
    # 3 past the body: the next header's start is read into the body, so that whole
    # message (its header cut, its body) is skipped
    (lambda body: b"Content-Length: %d\r\n\r\n" % (len(body) + 3) + body,
     len(frame(SECOND)) - 3),
    (lambda body: body, "all"),  # a body without a header
    (lambda body: b"Content-Length: x\r\n\r\n" + body, "all"),  # a header without a length
    (lambda body: b"no header\r\n", "all"),
], ids=["short-length", "long-length", "no-header", "bad-length", "junk-line"])
def test_after_what_is_no_message_the_server_finds_the_next_one_and_says_what_it_skipped(
        framed, skipped):
    """pygls never read another message after one of these; the server's reader skips
    what is not a message, up to the next header (found mid-line too), and says so
    when that next message begins."""
    junk = framed(json.dumps(FIRST).encode())
    bodies, said = _server_reads(junk + frame(SECOND) + frame(FIRST))
    assert json.loads(bodies[-1]) == FIRST
    [(size, why)] = filter(None, said)  # told once, with a reason
    assert why
    if skipped == "all":  # nothing of the junk was read as a body
        assert size == len(junk) and [json.loads(b) for b in bodies] == [SECOND, FIRST]
    else:
        assert size == skipped


HEADER = frame(SECOND)[:frame(SECOND).index(b"\r\n\r\n") + 4]  # where the limit may fall


@pytest.mark.parametrize("cut", range(len(HEADER) + 1))
def test_a_header_that_junk_s_over_long_line_cuts_in_two_is_found(cut):
    """The server reads a line at most 64 KiB at a time and skips a longer one as junk,
    though the next message's header may begin on its last piece (junk and a header share
    a line when a body is longer than announced) and go on past the limit: that message
    is read all the same, and the count of what was skipped is exact."""
    limit = 1 << 16
    junk = b"x" * (3 * limit - cut)  # the limit falls `cut` bytes into the header
    junk_line = b"no header\r\n"  # skipped too, counted with it; a line break is not
    for before, counted in ((b"", 0), (b"\r\n" + junk_line, len(junk_line))):
        bodies, said = _server_reads(before + junk + frame(SECOND) + frame(FIRST), limit)
        assert [json.loads(b) for b in bodies] == [SECOND, FIRST]
        assert said[0][0] == counted + len(junk) and said[1] is None


def test_a_header_begun_before_an_over_long_line_is_skipped_with_it():
    """No header line is 64 KiB long: the header it was part of is no header either."""
    limit = 1 << 16
    broken = b"Content-Length: 5\r\n" + b"x" * (2 * limit) + b"\r\nhello"
    bodies, said = _server_reads(broken + frame(SECOND), limit)
    assert [json.loads(b) for b in bodies] == [SECOND] and said[0][0] == len(broken)


def test_a_document_that_holds_a_header_is_no_place_to_read_on_from():
    """When the reader looks for the next header mid-line, it takes the last one: a
    body's text may hold "Content-Length: " (JSON-escaped, on the same line)."""
    body = json.dumps({**FIRST, "params": {"text": "Content-Length: 3\r\n\r\nabc"}}).encode()
    bodies, said = _server_reads(body + frame(SECOND))
    assert bodies == [json.dumps(SECOND).encode()] and said[0][0] == len(body)


def test_read_messages_stops_at_the_end_of_the_stream():
    chunks = iter([frame(FIRST)[:5], frame(FIRST)[5:] + frame(SECOND)[:9], b""])
    assert [json.loads(b) for b in read_messages(lambda: next(chunks))] == [FIRST]


def _fake_server(answer: Callable[[dict, socket.socket], None]) -> Client:
    """A client whose server is a thread calling answer(message, its socket) per message."""
    ours, theirs = socket.socketpair()

    def serve() -> None:
        with theirs:
            for body in read_messages(lambda: theirs.recv(4096)):
                answer(json.loads(body), theirs)

    threading.Thread(target=serve, daemon=True).start()
    return Client.over_socket(ours)


def _reply(sock: socket.socket, msg_id: int, **answer: object) -> None:
    sock.sendall(frame({"jsonrpc": "2.0", "id": msg_id, **answer}))


def test_each_request_gets_the_response_with_its_id_whatever_their_order():
    held: list[dict] = []

    def answer(message: dict, sock: socket.socket) -> None:
        held.append(message)
        if len(held) == 2:  # both are waiting: answer the later one first
            for m in reversed(held):
                _reply(sock, m["id"], result=m["params"]["n"] * 10)

    results: dict[int, int] = {}
    with _fake_server(answer) as client:
        threads = [threading.Thread(target=lambda n=n: results.update(
            {n: client.request("double", {"n": n}, timeout=10)})) for n in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert results == {1: 10, 2: 20}


def test_notifications_and_server_requests_go_to_on_message():
    ours, theirs = socket.socketpair()
    seen: list[dict] = []
    with Client.over_socket(ours, on_message=seen.append) as client:
        theirs.sendall(frame({"jsonrpc": "2.0", "method": "window/logMessage", "params": {}})
                       + frame({"jsonrpc": "2.0", "id": 1, "method": "workspace/applyEdit"}))
        client.notify("ping")
        reader = MessageReader()
        assert json.loads(reader.feed(theirs.recv(4096))[0]) == {
            "jsonrpc": "2.0", "method": "ping"}
        answers: dict[str, object] = {}
        asking = threading.Thread(target=lambda: answers.update(
            x=client.request("x", timeout=10)))
        asking.start()
        request = []
        while not request:  # answer only once the request is out, as a server would
            request = [json.loads(b) for b in reader.feed(theirs.recv(4096))]
        _reply(theirs, request[0]["id"], result="answered")
        asking.join(10)
        assert answers == {"x": "answered"}
    theirs.close()
    assert [m["method"] for m in seen] == ["window/logMessage", "workspace/applyEdit"]


def test_an_error_answer_raises_response_error_with_its_message():
    def answer(message: dict, sock: socket.socket) -> None:
        _reply(sock, message["id"], error={"code": -32601, "message": "no such method"})

    with _fake_server(answer) as client, pytest.raises(ResponseError, match="no such method") as e:
        client.request("no/such", timeout=10)
    assert e.value.error["code"] == -32601


def test_a_request_waiting_when_the_server_leaves_fails_with_connection_error():
    def answer(message: dict, sock: socket.socket) -> None:
        sock.shutdown(socket.SHUT_RDWR)

    with _fake_server(answer) as client:
        with pytest.raises(ConnectionError, match="closed"):
            client.request("initialize", timeout=10)
        with pytest.raises(ConnectionError):
            client.request("initialize", timeout=10)


def test_a_request_without_an_answer_times_out():
    with _fake_server(lambda message, sock: None) as client, pytest.raises(TimeoutError):
        client.request("initialize", timeout=0.2)


def test_a_client_over_pipes_talks_to_a_process_style_server():
    server_in, client_out = os.pipe()
    client_in, server_out = os.pipe()
    answers: dict[str, object] = {}
    with open(client_out, "wb") as stdin, open(client_in, "rb") as stdout:
        client = Client.over_pipes(stdin, stdout)
        client.notify("initialized", {})
        asking = threading.Thread(target=lambda: answers.update(
            initialize=client.request("initialize", {}, timeout=10)))
        asking.start()
        reader, received = MessageReader(), []
        while len(received) < 2:  # the server reads both, then answers the request
            received += [json.loads(b) for b in reader.feed(os.read(server_in, 4096))]
        os.write(server_out, frame({"jsonrpc": "2.0", "id": received[1]["id"],
                                    "result": {"ok": True}}))
        asking.join(10)
        assert answers == {"initialize": {"ok": True}}
        client.close()  # the server's stdin ends
        assert list(read_messages(lambda: os.read(server_in, 4096))) == []
        os.close(server_out)  # and the client's reader sees the end of its stdout
        assert client.finished.wait(10)
    os.close(server_in)
    assert [m["method"] for m in received] == ["initialized", "initialize"]


def test_a_reader_never_takes_the_data_of_a_pipe_that_reused_its_descriptor_number():
    """A reader thread may be about to read when its pipe is closed; the number is then
    free, and the next pipe gets it.  The reader keeps reading its own pipe."""
    first_read, first_write = os.pipe()
    pipe = open(first_read, "rb")  # noqa: SIM115 - closed below, as a caller would
    read = own_reader(pipe)
    pipe.close()
    second_read, second_write = os.pipe()
    assert second_read == first_read  # the number went to the new pipe
    os.write(second_write, frame(FIRST))
    os.close(first_write)
    assert read() == b""  # the end of its own pipe, not the other pipe's message
    for fd in (second_read, second_write):
        os.close(fd)
