"""`backend: remote` without Ray: the wire format, the client's retries, errors,
cancellation and fallback, against small scripted HTTP services on loopback (the real
Ray Serve service is in test_remote_service.py)."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from certificates import self_signed
from rpc import ServerProcess, free_port, tcp_connection

from dlm_lsp.backends import BackendError, make_backend, switch_backend
from dlm_lsp.config import InfillOptions, ServerConfig, from_json
from dlm_lsp.engine import Engine
from dlm_lsp.policy import SpanPlan, SpanTooLong
from dlm_lsp.remote import wire
from dlm_lsp.remote.client import RemoteEngine
from dlm_lsp.remote.http import Unreachable
from dlm_lsp.results import Candidate, InfillRequest, InfillResult
from dlm_lsp.sampler import Cancelled
from dlm_lsp.span import HEAD_MAX_CHARS, _near
from dlm_lsp.validation import Validation

TEXT = "def add(a, b):\n    return \n"
AT = TEXT.index("return ") + 7


def a_result() -> InfillResult:
    check = Validation(True, False, "python", ((1, 11),), "1 new syntax error", ((26, 27),))
    return InfillResult([Candidate("a +", False, -0.25, 2, "repair", [], check, ended=True),
                         Candidate("a + b", None, -0.5, 3)],
                        SpanPlan("single-line", 16, 8, True), 9, 16, 12.5, True, "repair", 1,
                        11.0, "1 new syntax error", "", repair_steps=3, hint_steps=1)


def test_a_result_survives_the_wire_unchanged():
    result = a_result()
    assert wire.result_from_json(json.loads(json.dumps(wire.result_json(result)))) == result


def test_an_older_service_s_result_has_its_repair_steps_unknown():
    """A service from before `repairSteps` does not send it: not known (None), not 0,
    which would say no step went to repair; the steps line then says the total alone."""
    from dlm_lsp.fill import describe_steps

    body = json.loads(json.dumps(wire.result_json(a_result())))
    del body["repairSteps"], body["hintSteps"]
    result = wire.result_from_json(body)
    assert (result.repair_steps, result.hint_steps, result.steps) == (None, None, 9)
    assert describe_steps(result) == "9 steps (stopped early)"
    assert describe_steps(a_result()) == \
        "9 steps (5, stopped early, + 3 in repair + 1 in hints)"


def test_a_request_carries_the_clients_fill_settings_but_never_its_model_or_limits():
    client = ServerConfig(model="/client/model", device="cuda", strategy="random", seed=5,
                          single_line_tokens=9, timeout_ms=5, remote_token="secret")
    req = InfillRequest(TEXT, AT, AT, "python", "file:///a.py", InfillOptions(steps=3))
    body = json.loads(json.dumps(wire.request_json(req, client)))
    assert "remoteToken" not in body["settings"] and "model" not in body["settings"]
    body["settings"]["model"] = "/somewhere/else"  # a client that tries anyway
    service = ServerConfig(model="/service/model", device="cpu", timeout_ms=60000)
    got, drafts, problems = wire.request_from_json(body, service)
    assert (got.text, got.start, got.end, got.options.steps) == (TEXT, AT, AT, 3)
    assert (got.config.strategy, got.config.seed, got.config.single_line_tokens) == (
        "random", 5, 9)
    assert (got.config.model, got.config.device, got.config.timeout_ms) == (
        "/service/model", "cpu", 60000)
    assert drafts is False and problems == []


def test_a_request_carries_the_code_shown_around_its_document():
    """A notebook cell's other cells (`before`, `after`) reach the service's model too."""
    req = InfillRequest(TEXT, AT, AT, "python", before="import os\n\n", after="\n\nmain()")
    body = json.loads(json.dumps(wire.request_json(req, ServerConfig())))
    got, _, _ = wire.request_from_json(body, ServerConfig())
    assert (got.before, got.after) == ("import os\n\n", "\n\nmain()")
    del body["before"], body["after"]  # an older client's request: the document alone
    got, _, _ = wire.request_from_json(body, ServerConfig())
    assert (got.before, got.after) == ("", "")


def _notebook_request(cells: list[str], at: int, line_break: str = "\n") -> InfillRequest:
    """A fill in a cell of `cells`, at `at`, shown the others as the server shows them
    (`notebooks.cell_context`: a blank line between cells)."""
    text = "def area(r):\n    return "
    joined = [cell.replace("\n", line_break) for cell in cells]
    return InfillRequest(text, len(text), len(text), "python",
                         "vscode-notebook-cell:/work/nb.ipynb#W1", InfillOptions(length=6, steps=3),
                         before="".join(f"{cell}{line_break * 2}" for cell in joined[:at]),
                         after="".join(f"{line_break * 2}{cell}" for cell in joined[at + 1:]))


@pytest.mark.parametrize("line_break", ["\n", "\r\n"])
@pytest.mark.parametrize("at", [0, 100, 199])
def test_a_notebook_cell_s_request_carries_only_what_the_engine_reads_and_fills_the_same(
        model_dir, line_break, at):
    """With `backend: remote` the whole notebook went with every fill (a 200-cell notebook
    in full at each pause in typing), where the engine reads only a window of it beside the
    cell (`span.context_reach`): the request carries that window, and the service's fill
    is the one the whole notebook gave."""
    cells = [f"def step_{n}(x):\n    y = x * {n} + {n % 7}\n    return y - {n}" for n in range(200)]
    req = _notebook_request(cells, at, line_break)
    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                          max_context_tokens=48)  # a reach of 768 characters a side
    body = wire.request_body(req, config)
    assert len(body) < 3000 + len(json.dumps(wire.fill_settings(config)))
    sent, _, _ = wire.request_from_json(json.loads(body), config)
    whole_before, whole_after = (side.replace("\r\n", "\n") for side in (req.before, req.after))
    assert whole_before.endswith(sent.before) and whole_after.startswith(sent.after)
    assert 0 < len(sent.before) + len(sent.after) < len(whole_before) + len(whole_after)
    # the characters the layout tokenizes (`span._near`), whatever the head moved out
    whole, kept = whole_before + req.text, sent.before + sent.text
    for head in (0, HEAD_MAX_CHARS):
        assert (_near(whole[:len(whole) - head], whole_after, 48)
                == _near(kept[:len(kept) - head], sent.after, 48))
    engine = Engine(config)
    fills = [[c.text for c in engine.infill(r).candidates] for r in (req, sent)]
    assert fills[0] == fills[1]


def test_a_notebook_whose_indentation_is_read_beyond_the_window_goes_whole():
    """The indentation a bare cell's fill is shaped on is read from the whole notebook
    (`passes.shown_style`): where the window alone reads another, nothing is left out."""
    indented = [f"def step_{n}(x):\n  return x * {n}" for n in range(20)]  # by two, far up
    flat = [f"value_{n} = {n} * 3" for n in range(400)]  # no indentation, near the cell
    req = _notebook_request([*indented, *flat, "this cell"], 420)
    sent, _, _ = wire.request_from_json(wire.request_json(req, ServerConfig()), ServerConfig())
    assert (sent.before, sent.after) == (req.before, req.after)
    without = _notebook_request([*flat, *flat, "this cell"], 800)  # read alike: the window
    sent, _, _ = wire.request_from_json(wire.request_json(without, ServerConfig()),
                                        ServerConfig())
    assert len(sent.before) < len(without.before)


@pytest.mark.parametrize("change, says", [
    ({"protocol": 99}, "update dlm-lsp"),
    ({"after": None}, "'before' and 'after' must be strings"),
    ({"start": 5, "end": 2}, "start <= end"),
    ({"end": 10_000}, "offsets into 'text'"),
    ({"text": 42}, "'text' must be a string"),
])
def test_a_request_the_service_cannot_use_says_why(change, says):
    body = wire.request_json(InfillRequest(TEXT, AT, AT), ServerConfig())
    with pytest.raises(wire.BadRequest, match=says):
        wire.request_from_json({**body, **change}, ServerConfig())


def test_backend_settings_are_checked():
    config, problems = from_json(ServerConfig, {"backend": "cloud", "remoteUrl": "ftp://x",
                                                "remoteRetries": 99})
    assert (config.backend, config.remote_url, config.remote_retries) == ("local", "", 2)
    assert len(problems) == 3


def test_a_new_endpoint_builds_a_new_backend_and_other_changes_keep_it():
    old = ServerConfig()
    local = make_backend(old)
    same, _ = switch_backend(local, old, ServerConfig(steps_single_line=4))
    assert same is local and local.config.steps_single_line == 4
    moved, to_load = switch_backend(local, old, ServerConfig(backend="remote",
                                                             remote_url="http://h:1"))
    assert isinstance(moved, RemoteEngine) and to_load


@pytest.mark.parametrize("change", [{"remote_url": "http://h:1"}, {"remote_token": "t"},
                                    {"remote_ca_file": "/ca.pem"}])
def test_the_remote_settings_pick_a_service_only_once_backend_names_one(change):
    """Under the local backend they mean nothing, and replacing the engine lost its model."""
    old = ServerConfig()
    local = make_backend(old)
    assert switch_backend(local, old, replace(old, **change)) == (local, False)
    remote = ServerConfig(backend="remote", remote_url="http://h:0")
    service = make_backend(remote)
    assert switch_backend(service, remote, replace(remote, **change))[0] is not service


@pytest.mark.parametrize("change", [{"model": "/other"}, {"device": "cpu"},
                                    {"precision": "fp32"}, {"cuda_graphs": False}])
def test_model_settings_under_a_service_leave_nothing_to_load(change):
    """The service fills with its own model whatever a client's settings say (wire.py):
    a change of them was shown as a model load, and the service reached again."""
    remote = ServerConfig(backend="remote", remote_url="http://h:0")
    service = make_backend(remote)
    assert switch_backend(service, remote, replace(remote, **change)) == (service, False)


class Script(BaseHTTPRequestHandler):
    """Answers each POST with the next of the server's scripted replies."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        self.server.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.server.headers.append(dict(self.headers))
        reply = self.server.replies.pop(0) if len(self.server.replies) > 1 else \
            self.server.replies[0]
        reply(self)

    def log_message(self, *args: object) -> None:
        pass


def serving(replies: list[Callable[[BaseHTTPRequestHandler], None]],
            port: int = 0) -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Script)
    httpd.replies, httpd.bodies, httpd.headers = replies, [], []
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def stream(*lines: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.end_headers()
        for line in lines:
            handler.wfile.write(line)
            handler.wfile.flush()
    return reply


def status(code: int, text: str = "") -> Callable[[BaseHTTPRequestHandler], None]:
    def reply(handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps({"detail": text}).encode()
        handler.send_response(code)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return reply


def page(code: int) -> Callable[[BaseHTTPRequestHandler], None]:
    """Another web server's error page, as `python -m http.server` answers a POST."""
    def reply(handler: BaseHTTPRequestHandler) -> None:
        body = b"<!DOCTYPE HTML>\n<html lang='en'>\n<body>\n<h1>Error</h1>\n</body>\n</html>\n"
        handler.send_response(code)
        handler.send_header("Content-Type", "text/html;charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    return reply


def client(httpd: ThreadingHTTPServer, **settings) -> RemoteEngine:
    return RemoteEngine(ServerConfig(backend="remote", remote_token="tok",
                                     remote_url=f"http://127.0.0.1:{httpd.server_port}",
                                     **settings))


RESULT = wire.line("result", wire.result_json(a_result(), ["the service says hello"]))


def test_a_fill_streams_drafts_then_its_result_with_the_token():
    httpd = serving([stream(wire.line("draft", {"step": 1, "steps": 2, "text": "a ░"}),
                            wire.line("draft", {"step": 2, "steps": 2, "text": "a +"}),
                            RESULT)])
    drafts = []
    engine = client(httpd)
    got = engine.infill(InfillRequest(TEXT, AT, AT, "python",
                                      on_draft=lambda *d: drafts.append(d)))
    assert got == a_result() and drafts == [(1, 2, "a ░"), (2, 2, "a +")]
    assert httpd.headers[0]["Authorization"] == "Bearer tok"
    assert httpd.bodies[0]["drafts"] is True and list(engine.notices) == [
        "the service says hello"]


class KeepAlive(Script):
    """HTTP/1.1: a connection stays open for the next request unless a reply closes it."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each header line is its own write here

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook
        self.server.ports.append(self.client_address[1])
        super().do_POST()


def sized(body: bytes, then_close: bool = False,
          delay: float = 0.0) -> Callable[[BaseHTTPRequestHandler], None]:
    """A reply with a Content-Length (so the connection can stay open), after `delay`
    seconds; `then_close` drops the connection afterwards without saying so, as a
    server ending an idle one."""
    def reply(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(delay)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
        handler.wfile.flush()
        handler.close_connection = then_close
    return reply


def keep_alive_serving(replies) -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    httpd.replies, httpd.bodies, httpd.headers, httpd.ports = replies, [], [], []
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def test_fills_reuse_one_kept_alive_connection():
    httpd = keep_alive_serving([sized(RESULT)])
    engine = client(httpd)
    for _ in range(3):
        assert engine.infill(InfillRequest(TEXT, AT, AT)) == a_result()
    assert len(httpd.bodies) == 3 and len(set(httpd.ports)) == 1
    assert engine._pool.reused == 2


def test_a_kept_connection_the_server_dropped_is_replaced_without_a_retry():
    httpd = keep_alive_serving([sized(RESULT, then_close=True)])
    engine = client(httpd, remote_retries=0)
    for _ in range(3):  # each pooled connection is found closed, and replaced at once
        assert engine.infill(InfillRequest(TEXT, AT, AT)) == a_result()
    assert engine.retries == 0 and len(set(httpd.ports)) == 3


def test_a_cancelled_fills_connection_is_not_kept():
    httpd = keep_alive_serving([sized(RESULT), sized(RESULT, delay=1.0), sized(RESULT)])
    engine = client(httpd)
    engine.infill(InfillRequest(TEXT, AT, AT))
    with pytest.raises(Cancelled):  # sent on the kept connection, which the stop cuts
        engine.infill(InfillRequest(TEXT, AT, AT, should_stop=lambda: True))
    engine.infill(InfillRequest(TEXT, AT, AT))  # so this one needs a new connection
    assert len(set(httpd.ports)) == 2
    assert engine._pool.take() is not None and engine._pool.take() is None  # one kept


def test_a_failed_or_lost_replica_is_tried_again():
    httpd = serving([status(500, "replica died"), stream(wire.line("draft", {
        "step": 1, "steps": 8, "text": "x"})), stream(RESULT)])
    engine = client(httpd)
    assert engine.infill(InfillRequest(TEXT, AT, AT)) == a_result()
    assert len(httpd.bodies) == 3 and engine.retries == 2


def test_an_answer_cut_off_within_a_line_is_a_lost_replica_tried_again():
    httpd = serving([stream(b'{"draft": {"step": 1, "st'), stream(RESULT)])
    engine = client(httpd)
    assert engine.infill(InfillRequest(TEXT, AT, AT)) == a_result()
    assert engine.retries == 1


def test_out_of_tries_the_error_says_what_happened_and_which_setting_to_change():
    httpd = serving([stream(wire.line("draft", {"step": 1, "steps": 8, "text": "x"}))])
    with pytest.raises(BackendError, match=r"lost before it finished.*tried 2 times.*"
                                           r"remoteRetries"):
        client(httpd, remote_retries=1).infill(InfillRequest(TEXT, AT, AT))
    assert len(httpd.bodies) == 2


def test_retries_stop_where_their_pause_would_outlast_the_fills_timeout():
    """remoteRetries 10 pause 256 s in all: against a service that is down, every fill
    ran into timeoutMs (-32003) and never said why it failed, nor fell back."""
    url = f"http://127.0.0.1:{free_port()}"
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=url, remote_retries=10,
                                       timeout_ms=1000))
    began = time.monotonic()
    gave_up = lambda: time.monotonic() - began > 10  # noqa: E731 -- the old code's way out
    with pytest.raises(BackendError, match=r"cannot reach .*tried 3 times.*remoteUrl"):
        engine.infill(InfillRequest(TEXT, AT, AT, should_stop=gave_up))
    assert time.monotonic() - began < 1.0  # pauses of 0.25 and 0.5 s; 1 s would pass it


@pytest.mark.parametrize("reply, says", [
    (status(401), "refused the token"),
    (status(400, "bad infill request: 'text' must be a string"), "'text' must be a string"),
    (stream(wire.line("error", {"kind": wire.MODEL_UNAVAILABLE, "message": "no weights"})),
     "could not fill: no weights"),
    # another server at remoteUrl, or a service whose answers this version cannot read
    (stream(b"<html>It works!</html>\n"), "cannot read.*dlm-lsp serve-remote service"),
    (page(501), r"is no dlm-lsp serve-remote service: it answered /v1/infill with a web page "
                r"\(HTTP 501\); check remoteUrl$"),  # was tried again as a lost replica
    (page(404), r"no dlm-lsp serve-remote service.*\(HTTP 404\)"),
    (stream(b'{"result": {"text": "x = 1"}}\n'), "cannot read.*KeyError 'plan'"),
    (stream(b'{"draft": [1, 2]}\n'), "cannot read.*TypeError"),
])
def test_what_retrying_cannot_fix_is_not_retried(reply, says):
    httpd = serving([reply])
    with pytest.raises(BackendError, match=says):
        client(httpd).infill(InfillRequest(TEXT, AT, AT))
    assert len(httpd.bodies) == 1


def test_a_service_that_wants_a_token_none_was_sent_for_says_so(monkeypatch):
    """It said "refused the token" with none sent, and the user looked for a wrong one."""
    monkeypatch.delenv(wire.TOKEN_VARIABLE, raising=False)
    httpd = serving([status(401)])
    engine = RemoteEngine(ServerConfig(backend="remote",
                                       remote_url=f"http://127.0.0.1:{httpd.server_port}"))
    with pytest.raises(BackendError) as failed:
        engine.infill(InfillRequest(TEXT, AT, AT))
    assert "wants a token and none was sent (HTTP 401): set remoteToken" in str(failed.value)
    assert "refused" not in str(failed.value)


def test_a_selection_the_service_finds_too_long_is_refused_as_a_local_fill_would_be():
    """The replica's refusal reaches the server as the local engine's (-32602, saying
    which setting to raise), not as a broken stream tried again."""
    says = "the selection is at least 200 tokens, more than ... (maxSpanTokens, 128)"
    httpd = serving([stream(wire.line("error", {"kind": wire.SPAN_TOO_LONG,
                                                "message": says}))] * 3)
    with pytest.raises(SpanTooLong, match=re.escape(says)):
        client(httpd).infill(InfillRequest(TEXT, 0, len(TEXT)))
    assert len(httpd.bodies) == 1


def test_a_rewrite_is_told_too_long_before_asking_only_where_no_tokenizer_could_fit_it():
    """The service's model and tokenizer are not here: a code action is told a rewrite is
    too long only where even 16 characters a token would pass maxSpanTokens (128), so
    that no selection the service could rewrite is shown disabled."""
    engine = RemoteEngine(ServerConfig(backend="remote"))
    assert engine.rewrite_refusal("x" * 16 * 128) is None
    assert "maxSpanTokens, 128" in engine.rewrite_refusal("x" * (16 * 128 + 1))


def test_a_document_holding_a_lone_surrogate_reaches_the_service_as_it_is():
    """JSON may spell one (`"\\ud800"`) and UTF-8 cannot write it: the body failed to
    encode, so no fill of such a document reached the service.  It is sent escaped, as
    JSON spells it, and the service reads the editor's text, offsets and all."""
    text = "s = '\ud800'\n" + TEXT
    httpd = serving([stream(RESULT)])
    at = len("s = '\ud800'\n") + AT
    assert client(httpd).infill(InfillRequest(text, at, at)) == a_result()
    assert httpd.bodies[0]["text"] == text


def test_the_processs_token_goes_to_its_own_editors_service_not_a_tcp_clients(monkeypatch):
    """A client of a `--tcp` server that set `remoteUrl` to a listener of its own was sent
    DLM_LSP_REMOTE_TOKEN, the secret of whoever started the server.  Over stdio the
    process is the editor's own, and an empty `remoteToken` is still the variable."""
    monkeypatch.setenv(wire.TOKEN_VARIABLE, "the-operators-secret")
    httpd = serving([stream(RESULT)])
    url = f"http://127.0.0.1:{httpd.server_port}"
    RemoteEngine(ServerConfig(backend="remote", remote_url=url)).infill(
        InfillRequest(TEXT, AT, AT))
    assert httpd.headers[-1]["Authorization"] == "Bearer the-operators-secret"
    port = free_port()
    server = ServerProcess("--tcp", f"127.0.0.1:{port}")
    try:
        stranger, _ = tcp_connection(port)
        stranger.initialize({"backend": "remote", "remoteUrl": url})
        stranger.open("file:///a.py", TEXT)
        stranger.call("dlm/infill", {"textDocument": {"uri": "file:///a.py"}, "range": {
            "start": {"line": 1, "character": 11}, "end": {"line": 1, "character": 11}}})
    finally:
        server.close()
    assert len(httpd.headers) == 2 and "Authorization" not in httpd.headers[-1]


def test_a_token_variable_an_http_header_cannot_carry_is_said_to_and_not_sent(monkeypatch):
    """It failed every fill as a broken connection, tried again ('latin-1' codec ...)."""
    monkeypatch.setenv(wire.TOKEN_VARIABLE, "€uro")
    httpd = serving([stream(RESULT)])
    engine = RemoteEngine(ServerConfig(backend="remote",
                                       remote_url=f"http://127.0.0.1:{httpd.server_port}"))
    with pytest.raises(BackendError, match=f"{wire.TOKEN_VARIABLE} holds characters an HTTP "
                                           "header cannot carry"):
        engine.infill(InfillRequest(TEXT, AT, AT))
    assert httpd.bodies == [] and engine.retries == 0


def test_cancelling_a_waiting_fill_closes_its_connection():
    """A fill queued on the service sends nothing for a while; a stop must not wait."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, float] = {}

    def accept() -> None:
        conn, _ = listener.accept()
        while conn.recv(1 << 16):  # read the request, answer nothing, until the client goes
            pass
        seen["eof"] = time.monotonic()
    threading.Thread(target=accept, daemon=True).start()
    stop_at = time.monotonic() + 0.3
    engine = RemoteEngine(ServerConfig(backend="remote",
                                       remote_url=f"http://127.0.0.1:{listener.getsockname()[1]}"))
    with pytest.raises(Cancelled):
        engine.infill(InfillRequest(TEXT, AT, AT, should_stop=lambda: time.monotonic() > stop_at))
    assert time.monotonic() - stop_at < 1.0
    deadline = time.monotonic() + 5
    while "eof" not in seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen.get("eof", -1) > 0  # the service saw the client go


def test_an_unreachable_service_falls_back_to_the_local_engine_when_allowed(model_dir):
    url = f"http://127.0.0.1:{free_port()}"
    req = InfillRequest(TEXT, AT, AT, "python")
    with pytest.raises(BackendError, match="cannot reach .*remoteFallback"):
        RemoteEngine(ServerConfig(backend="remote", remote_url=url, remote_retries=0,
                                  model=str(model_dir))).infill(req)
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=url, remote_retries=0,
                                       remote_fallback=True, model=str(model_dir)))
    got = engine.infill(req)
    want = Engine(ServerConfig(model=str(model_dir))).infill(InfillRequest(TEXT, AT, AT,
                                                                           "python"))
    assert [c.text for c in got.candidates] == [c.text for c in want.candidates]
    assert engine.fallbacks == 1 and "run on the local engine" in engine.notices[0]


def test_the_status_of_an_unreachable_service_with_fallback_says_where_fills_run():
    """`loadError` says why the service's model does not fill, and where fills go."""
    url = f"http://127.0.0.1:{free_port()}"
    status = RemoteEngine(ServerConfig(backend="remote", remote_url=url, remote_retries=0,
                                       remote_fallback=True)).status()
    assert (status["loaded"], status["loading"]) == (False, False)
    assert status["loadError"].startswith(f"cannot reach {url}")
    assert "fills will run on the local engine until it answers" in status["loadError"]
    assert status["problem"].startswith(f"cannot reach {url}")


def test_while_the_service_is_down_fills_go_local_at_once_and_one_a_while_tries_it(
        model_dir, monkeypatch):
    """Each fill tried the service and paid the retries' pauses before falling back (1.0
    to 1.2 s a fill against 0.25 s locally, at every pause in typing while it was down).
    Now one fill each RECHECK_S tries it, once; the others fill locally at once."""
    from dlm_lsp.remote import retry

    now = [0.0]  # the module's clock, which its pauses move on
    monkeypatch.setattr(retry, "time", SimpleNamespace(
        monotonic=lambda: now[0], perf_counter=time.perf_counter,
        sleep=lambda s: now.__setitem__(0, now[0] + s)))
    port = free_port()
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=f"http://127.0.0.1:{port}",
                                       remote_retries=2, remote_fallback=True,
                                       model=str(model_dir)))
    engine.infill(InfillRequest(TEXT, AT, AT, "python"))
    assert (engine.retries, engine.fallbacks) == (2, 1)
    httpd = serving([stream(RESULT)], port)  # the service is back
    engine.infill(InfillRequest(TEXT, AT, AT, "python"))
    assert (engine.retries, engine.fallbacks, httpd.bodies) == (2, 2, [])  # down a moment ago
    now[0] += retry.RECHECK_S
    assert engine.infill(InfillRequest(TEXT, AT, AT, "python")) == a_result()
    assert (engine.fills, len(httpd.bodies)) == (1, 1)
    httpd.shutdown()
    httpd.server_close()  # down again: found at once, and the next try waits its turn
    engine.infill(InfillRequest(TEXT, AT, AT, "python"))
    assert (engine.retries, engine.fallbacks) == (4, 3)


@contextlib.contextmanager
def _hung() -> Iterator[int]:
    """A port whose connections the kernel takes and nobody answers: a stopped service."""
    hung = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield hung.getsockname()[1]
    finally:
        hung.close()


def test_with_fallback_a_service_that_takes_the_fill_and_never_answers_is_left_at_once(
        model_dir):
    """A hung service (a stopped replica, a proxy with no replica behind it) accepts the
    connection: no fill found it unreachable, each waited out its whole `timeoutMs` and
    failed, fallback or not.  With fallback, one not answering within `remoteConnectMs`
    is left for the local engine, not tried again, and the next fills go local at once."""
    with _hung() as port:
        engine = RemoteEngine(ServerConfig(
            backend="remote", remote_url=f"http://127.0.0.1:{port}", remote_fallback=True,
            remote_connect_ms=300, remote_retries=2, timeout_ms=20000, model=str(model_dir)))
        give_up = time.monotonic() + 30  # as `timeoutMs` would, through the server's job
        engine.infill(InfillRequest(TEXT, AT, AT, "python",  # the local engine loads
                                    should_stop=lambda: time.monotonic() > give_up))
        began = time.monotonic()
        engine.infill(InfillRequest(TEXT, AT, AT, "python"))
        took = time.monotonic() - began
    assert (engine.fallbacks, engine.retries, engine.fills) == (2, 0, 0)
    assert took < 1.0  # gone local at once: the service was found down a moment ago
    assert "did not start answering within 300 ms (remoteConnectMs)" in engine.notices[0]


def test_without_fallback_a_fill_waits_for_a_busy_service_to_start_answering():
    """A fill queued behind others on a busy service starts its answer late: with nowhere
    else to go, it is waited for (up to `timeoutMs`), not given up."""
    def late(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(0.6)
        stream(RESULT)(handler)
    httpd = serving([late])
    engine = client(httpd, remote_connect_ms=100, remote_retries=0)
    assert engine.infill(InfillRequest(TEXT, AT, AT, "python")) == a_result()
    assert (engine.fills, engine.retries) == (1, 0)


def test_with_fallback_only_the_answer_s_start_is_bounded_not_the_fill():
    """A fill's steps come as the service computes them: once its answer has started, a
    slow one is waited for (`timeoutMs`), not taken for a hung service."""
    def slow(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.end_headers()
        handler.wfile.flush()
        time.sleep(0.6)
        handler.wfile.write(RESULT)
    httpd = serving([slow])
    engine = client(httpd, remote_fallback=True, remote_connect_ms=200)
    assert engine.infill(InfillRequest(TEXT, AT, AT)) == a_result()
    assert (engine.fills, engine.fallbacks) == (1, 0)


def test_with_fallback_a_kept_connection_gone_silent_is_replaced_not_the_service_left():
    """A NAT or balancer that drops an idle keep-alive connection without a word leaves
    it silent: the fill sent on it is sent again on a new one, and the service, which
    answers there, is not taken for down (10 s of fills on the laptop's CPU)."""
    httpd = keep_alive_serving([sized(RESULT), sized(RESULT, delay=3.0), sized(RESULT)])
    engine = client(httpd, remote_fallback=True, remote_connect_ms=300, remote_retries=0)
    engine.infill(InfillRequest(TEXT, AT, AT))
    assert engine.infill(InfillRequest(TEXT, AT, AT)) == a_result()  # the pooled one: silent
    assert (engine.fills, engine.fallbacks, engine.retries) == (2, 0, 0)
    assert len(set(httpd.ports)) == 2


def test_a_service_found_down_at_start_with_fallback_is_not_tried_by_the_first_fills(
        model_dir):
    """The start said "fills will run on the local engine until it answers", and the first
    fills still tried the service: a hung one held each for its whole `timeoutMs`."""
    port = free_port()
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=f"http://127.0.0.1:{port}",
                                       remote_fallback=True, model=str(model_dir)))
    said = engine.preload()
    httpd = serving([stream(RESULT)], port)  # back, but the next RECHECK_S go local
    engine.infill(InfillRequest(TEXT, AT, AT, "python"))
    assert "fills will run on the local engine until it answers" in said
    assert (engine.fallbacks, httpd.bodies) == (1, [])


def test_with_fallback_an_error_that_fails_the_fills_is_not_said_to_fall_back():
    """A refused token fails every fill, fallback or not (only a service unreachable or
    losing fills falls back): the start said "fills will run on the local engine until it
    answers", logged as a success, and `dlm/status` said so too."""
    class Refusing(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook
            status(401)(self)

        def log_message(self, *args: object) -> None:
            pass
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        engine = client(httpd, remote_fallback=True)
        with pytest.raises(BackendError, match="refused the token"):
            engine.preload()
        said = engine.status()["loadError"]
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert "refused the token" in said and "local engine" not in said


def _found_down(model_dir, monkeypatch, connect_s: float) -> tuple[RemoteEngine, list]:
    """A client with fallback that found its service down (and filled locally), its
    recheck due, against a host that drops packets: each connect waits `connect_s`, then
    fails; the list gets the time of each."""
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url="http://127.0.0.1:9",
                                       remote_retries=0, remote_fallback=True,
                                       model=str(model_dir)))
    engine.infill(InfillRequest(TEXT, AT, AT, "python"))
    tried: list[float] = []

    def connecting(*_args: object) -> None:
        tried.append(time.monotonic())
        time.sleep(connect_s)
        raise Unreachable("cannot reach the service")
    monkeypatch.setattr(engine, "_connect", connecting)
    monkeypatch.setattr(engine, "_recheck_at", 0.0)
    return engine, tried


def test_while_one_fill_rechecks_the_service_the_others_go_local_at_once(model_dir,
                                                                          monkeypatch):
    """The recheck's turn moved on only once it had failed: every fill that came while it
    connected tried the service too, each waiting the connect timeout (remoteConnectMs,
    5 s by default, against a host that drops packets) instead of filling locally."""
    from dlm_lsp.remote import retry

    engine, tried = _found_down(model_dir, monkeypatch, connect_s=1.0)
    took: list[float] = []

    def fill() -> None:
        began = time.monotonic()
        engine.infill(InfillRequest(TEXT, AT, AT, "python"))
        took.append(time.monotonic() - began)  # a fill that raised is missing
    first = threading.Thread(target=fill)
    first.start()
    time.sleep(0.2)  # the recheck is connecting
    others = [threading.Thread(target=fill) for _ in range(3)]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join()
    assert len(tried) == 1 and engine._recheck_at > time.monotonic() + retry.RECHECK_S - 2
    assert (len(took), engine.fallbacks) == (4, 5)  # each filled locally


def test_a_recheck_stopped_before_it_knew_leaves_the_next_fill_to_recheck(model_dir,
                                                                          monkeypatch):
    """The recheck's turn is taken before it connects; a recheck stopped then (a fill
    superseded while typing, the usual end of one) used it up, and the service, back
    meanwhile, was left untried for RECHECK_S."""
    engine, tried = _found_down(model_dir, monkeypatch, connect_s=0.5)
    began = time.monotonic()
    with pytest.raises(Cancelled):
        engine.infill(InfillRequest(TEXT, AT, AT, "python", should_stop=lambda: (
            time.monotonic() > began + 0.1)))
    engine.infill(InfillRequest(TEXT, AT, AT, "python"))
    assert len(tried) == 2  # the next fill was the recheck


def test_a_fill_stopped_while_connecting_ends_at_once_and_its_connection_is_closed(
        monkeypatch):
    """The connect came before the stop was watched: a superseded or timed-out fill held
    its thread (one of the server's few) until the connect gave up, up to remoteConnectMs
    (5 s) against a host that drops packets."""
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url="http://127.0.0.1:9",
                                       remote_retries=0))
    closed = threading.Event()

    def connecting(*_args: object) -> tuple:
        time.sleep(1.0)  # the SYN unanswered, at last answered
        return SimpleNamespace(close=closed.set), ""
    monkeypatch.setattr(engine, "_connect", connecting)
    began = time.monotonic()
    with pytest.raises(Cancelled):
        engine.infill(InfillRequest(TEXT, AT, AT, should_stop=lambda: time.monotonic() >
                                    began + 0.1))
    assert time.monotonic() - began < 0.6
    assert closed.wait(5)  # what the connect got at last is not left open


def test_falling_back_is_told_once_an_outage_not_at_every_fill(model_dir):
    """Ghost text asks for a fill at each pause in typing: a message at each fallback was
    a new pop-up every few seconds while the service was down."""
    httpd = serving([status(503, "down"), status(503, "down"), stream(RESULT),
                     status(503, "down")])
    engine = client(httpd, remote_retries=0, remote_fallback=True, model=str(model_dir))
    told = []
    for _ in range(4):
        engine.infill(InfillRequest(TEXT, AT, AT, "python"))
        told.append([n for n in engine.notices if "remoteFallback" in n])
        engine.notices.clear()
    assert [len(notices) for notices in told] == [1, 0, 0, 1]  # again after it answered
    assert "fills run on the local engine until it answers" in told[0][0]
    assert engine.fallbacks == 3 and engine.fills == 1


def test_the_editor_is_told_when_the_service_is_unreachable(model_dir: Path):
    server = ServerProcess()
    try:
        server.client.initialize({"model": str(model_dir), "backend": "remote",
                                  "remoteUrl": f"http://127.0.0.1:{free_port()}",
                                  "remoteRetries": 0})
        server.client.open("file:///u.py", TEXT)
        here = {"line": 1, "character": 11}
        answer = server.client.call("dlm/infill", {
            "textDocument": {"uri": "file:///u.py"}, "range": {"start": here, "end": here}})
        assert answer["error"]["code"] == -32005
        assert "cannot reach http://127.0.0.1" in answer["error"]["message"]
        startup = server.client.wait(lambda _: [m for m in server.client.shown()
                                                if "cannot reach" in m])
        assert startup  # the start-up check said so before any fill
        status = server.client.call("dlm/status")["result"]
        assert status["loaded"] is False and status["reachable"] is False
        assert status["model"].startswith("remote engine at http://127.0.0.1")
        # why no model fills, where a local engine says it: not a load under way
        assert status["loading"] is False
        assert status["loadError"].startswith("cannot reach http://127.0.0.1")
    finally:
        server.close()


@contextlib.contextmanager
def served_by_a_hung_service(model_dir: Path) -> Iterator[ServerProcess]:
    """A server whose remote service took the connection and never answers (a status of
    it waits up to 2 s), once it has told the user so at start-up."""
    with _hung() as port:
        server = ServerProcess()
        try:
            server.client.initialize({"model": str(model_dir), "backend": "remote",
                                      "remoteUrl": f"http://127.0.0.1:{port}",
                                      "remoteRetries": 0})
            server.client.wait(lambda _: [m for m in server.client.shown()
                                          if "did not answer" in m])
            yield server
        finally:
            server.close()


def test_the_status_of_a_service_that_does_not_answer_holds_up_no_other_message(model_dir):
    """An editor polls `dlm/status` while a remote service is down.  Asking a service
    that took the connection and never answers waits up to 2 s a try: asked on the
    server's event loop, that held every message behind it (edits, cancels, ghost text)
    for as long, at each poll.  A request sent after the status is answered first."""
    with served_by_a_hung_service(model_dir) as server:
        asked = server.client.request("dlm/status")
        after = server.client.request("dlm/no-such-method")
        server.client.response(asked)
        order = [m.get("id") for m in server.client.messages if m.get("id") in (asked, after)]
        status = server.client.response(asked)["result"]
    assert order == [after, asked]
    assert status["reachable"] is False and "did not answer" in status["loadError"]


def test_a_fill_that_times_out_on_a_service_names_it(model_dir):
    """Without `remoteFallback` a hung service holds a fill for `timeoutMs`; the -32003
    said only "infill timed out after 2000 ms (setting timeoutMs)", nothing of the
    service the fill was waiting on."""
    with served_by_a_hung_service(model_dir) as server:
        uri = "file:///t.py"
        server.client.notify("workspace/didChangeConfiguration",
                             {"settings": {"dlm": {"timeoutMs": 1500}}})
        server.client.open(uri, "x = \n")
        error = server.client.call("dlm/infill", {
            "textDocument": {"uri": uri},
            "range": {"start": {"line": 0, "character": 4},
                      "end": {"line": 0, "character": 4}}})["error"]
    assert error["code"] == -32003
    assert re.fullmatch(r"infill timed out after 1500 ms \(setting timeoutMs; backend remote, "
                        r"http://127\.0\.0\.1:\d+\)", error["message"])


def test_a_status_asked_across_a_backend_swap_is_the_new_backend_s(model_dir):
    """A status asks a remote service on a thread (up to 2 s where it does not answer);
    the user switched to the local engine meanwhile.  The answer was the remote one's,
    "unreachable", for a backend no longer serving, and a status bar showed it until its
    next poll: the status is of the backend serving when it is answered."""
    with served_by_a_hung_service(model_dir) as server:
        asked = server.client.request("dlm/status")
        server.client.notify("workspace/didChangeConfiguration",
                             {"settings": {"dlm": {"backend": "local"}}})
        status = server.client.response(asked)["result"]
        local = server.client.call("dlm/status")["result"]
    assert "backend" not in local and local["model"] == str(model_dir)  # the local engine's
    assert "backend" not in status and "reachable" not in status
    assert status["model"] == str(model_dir) and status["loadError"] is None


@contextlib.contextmanager
def _listening(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A port on 127.0.0.1 whose connections `answer` takes, one after another."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                with contextlib.suppress(OSError):
                    answer(conn)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        thread.join()
        server.close()


def _tls_server(cert: Path, key: Path) -> Callable[[socket.socket], None]:
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)

    def answer(conn: socket.socket) -> None:
        conn.settimeout(2)
        with context.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)
    return answer


def _plain_http(conn: socket.socket) -> None:
    conn.settimeout(2)
    conn.recv(1024)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def _fill_error(url: str, **settings: object) -> str:
    engine = RemoteEngine(ServerConfig(backend="remote", remote_url=url, remote_retries=0,
                                       **settings))
    with pytest.raises(BackendError) as failed:
        engine.infill(InfillRequest("x = \n", 4, 4, "python"))
    return str(failed.value)


def test_tls_failures_say_what_to_set(tmp_path):
    """Every TLS failure said "(for a private CA, set remoteCaFile)": a host the
    certificate does not name, with its CA set, read as the CA missing; and so did an
    https URL of a service that speaks plain http."""
    cert, key = self_signed(tmp_path)
    with _listening(_tls_server(cert, key)) as port:
        named_otherwise = _fill_error(f"https://localhost:{port}", remote_ca_file=str(cert))
        no_ca = _fill_error(f"https://127.0.0.1:{port}")
    assert "certificate is not valid for 'localhost'" in named_otherwise
    assert "name the host as the certificate does, in remoteUrl" in named_otherwise
    assert "CA" not in named_otherwise
    assert "for a private CA, set remoteCaFile" in no_ca
    with _listening(_plain_http) as port:
        plain = _fill_error(f"https://127.0.0.1:{port}")
    assert "does not speak TLS (WRONG_VERSION_NUMBER): is it an http:// one?" in plain
    assert "CA" not in plain


def test_a_plain_http_url_of_an_https_service_says_to_check_the_scheme(tmp_path):
    """The service closes the connection without a word, and the fill was said lost,
    pointing at remoteRetries, where the URL's scheme was the mistake."""
    cert, key = self_signed(tmp_path)
    with _listening(_tls_server(cert, key)) as port:
        said = _fill_error(f"http://127.0.0.1:{port}")
    assert "if the service was started with --ssl-certfile, remoteUrl takes https://" in said


def test_the_start_says_a_plain_http_url_of_an_https_service_may_be_the_scheme(tmp_path):
    """Said at the fill only: the start (and `status --remote`) said "Remote end closed
    connection without response", where the URL's scheme was the mistake."""
    cert, key = self_signed(tmp_path)
    with _listening(_tls_server(cert, key)) as port:
        engine = RemoteEngine(ServerConfig(backend="remote",
                                           remote_url=f"http://127.0.0.1:{port}"))
        with pytest.raises(BackendError) as failed:
            engine.preload()
    assert "remoteUrl takes https://" in str(failed.value)
