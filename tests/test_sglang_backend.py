"""`backend: sglang` against a fake SGLang server that speaks SGLang's HTTP API.

SGLang needs a GPU, so the fake implements what its source defines, on loopback:
`GET /model_info` (older servers: only `/get_model_info`), `/server_info`, `/health`,
and `POST /generate` streamed as server-sent events (`data: {"text", "output_ids",
"meta_info"}` ... `data: [DONE]`, chunked like uvicorn), whole text per update unless
`--incremental-streaming-output`; stop strings trimmed, `max_new_tokens` honoured,
errors as `{"error": {"message"}}`; the `--api-key` check of `srt/utils/auth.py`
(401 `{"error": "Unauthorized"}`, health paths exempt).  The model's "tokens" are
three-character pieces, emitted in blocks as a block-diffusion model emits them.
"""

from __future__ import annotations

import json
import math
import select
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from rpc import ServerProcess, free_port

from dlm_lsp.backends import BackendError
from dlm_lsp.config import InfillOptions, ServerConfig, from_json
from dlm_lsp.policy import SpanTooLong
from dlm_lsp.remote.sglang import SGLangEngine
from dlm_lsp.results import InfillRequest
from dlm_lsp.sampler import Cancelled

KEY = "sesame"
URI = "file:///work/total.py"
DOC = "def total(items):\n    \n    return result\n"
CURSOR = DOC.index("    \n") + 4  # on the blank line in the body, after its indentation
# The served model writes the body at its own indentation, runs on into the code after
# the gap, closes the code block, and rambles on (the stop string ends it there).
ANSWER = ("\n  result = 0\n  for item in items:\n    result += item\n  return result\n"
          "```\nThis adds the items.")
FILL = "result = 0\n    for item in items:\n        result += item"  # on the document's indentation


class FakeSGLang:
    """A loopback HTTP server that answers like `python -m sglang.launch_server`."""

    def __init__(self, *, api_key: str | None = KEY, answer: str = ANSWER,
                 model_path: str = "inclusionAI/LLaDA2.0-mini",
                 architectures: tuple[str, ...] = ("LLaDA2MoeModelLM",),
                 model_type: str = "llada2_moe",
                 is_generation: bool = True, incremental: bool = False,
                 model_info_path: str = "/model_info", sglang: bool = True, block: int = 4):
        self.api_key, self.answer = api_key, answer
        self.incremental, self.block = incremental, block  # whole text or news; tokens a block
        self.model_info = {"model_path": model_path, "tokenizer_path": model_path,
                           "is_generation": is_generation, "preferred_sampling_params": None,
                           "weight_version": "default", "model_type": model_type,
                           "architectures": list(architectures)}
        self.model_info_path, self.sglang = model_info_path, sglang
        self.info_body: bytes | None = None  # these bytes as /model_info's answer
        self.replies: deque[tuple] = deque()  # scripted answers to /generate, then `answer`
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []  # method, path, ...
        self.disconnected = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def generated(self) -> list[dict]:
        """The bodies of the /generate requests received."""
        return [body for method, path, _, body in self.requests if path == "/generate"]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def _serve(self, method: str) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size) if size else b""
                body = json.loads(raw) if raw else None
                fake.requests.append((method, self.path, dict(self.headers), body))
                exempt = self.path.startswith(("/health", "/ready", "/metrics"))
                if fake.api_key and not exempt and (
                        self.headers.get("Authorization") != f"Bearer {fake.api_key}"):
                    return self._json(401, {"error": "Unauthorized"})
                routes = {("GET", fake.model_info_path): lambda: self._json(200, fake.model_info)
                          if fake.info_body is None else self._raw(fake.info_body),
                          ("GET", "/get_model_info"): lambda: self._json(200, fake.model_info),
                          ("GET", "/server_info"): lambda: self._json(200, {
                              "model_path": fake.model_info["model_path"], "tp_size": 4,
                              "dllm_algorithm": "LowConfidence", "api_key": None}),
                          ("GET", "/health"): lambda: self._json(200, {}),
                          ("POST", "/generate"): lambda: self._generate(body)}
                route = routes.get((method, self.path)) if fake.sglang else None
                if route is None:
                    return self._json(404, {"detail": "Not Found"})
                route()

            def _raw(self, payload: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _json(self, status: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _generate(self, body: Any) -> None:
                if not isinstance(body, dict) or not isinstance(body.get("text"), str):
                    return self._json(400, {"error": {"message": "text is required"}})
                kind, *args = fake.replies.popleft() if fake.replies else ("answer",)
                if kind == "status":
                    return self._json(*args)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if kind == "raw":  # these bytes as the whole answer: no [DONE]
                    return self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(args[0]), args[0]))
                if kind == "error":
                    self._event({"error": {"message": args[0]}})
                else:
                    self._stream(body["sampling_params"], hang=kind == "hang")
                self._event("[DONE]")
                self.wfile.write(b"0\r\n\r\n")

            def _event(self, data: Any) -> None:
                text = data if isinstance(data, str) else json.dumps(data)
                payload = f"data: {text}\n\n".encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
                self.wfile.flush()

            def _stream(self, params: dict, hang: bool) -> None:
                """The answer in blocks of tokens, cut by stop strings and max_new_tokens."""
                answer, finish = fake.answer, None
                for stop in params.get("stop") or []:
                    if stop in answer:
                        answer, finish = answer[:answer.index(stop)], {"type": "stop",
                                                                       "matched": stop}
                pieces = [answer[i:i + 3] for i in range(0, len(answer), 3)]
                if len(pieces) > params["max_new_tokens"]:
                    pieces = pieces[:params["max_new_tokens"]]
                    finish = {"type": "length", "length": len(pieces)}
                sent = 0
                while sent < len(pieces) or sent == 0:
                    new = pieces[sent:sent + fake.block]
                    last = sent + len(new) >= len(pieces)
                    whole = pieces[:sent + len(new)]
                    shown = new if fake.incremental else whole
                    self._event({"text": "".join(shown),
                                 "output_ids": list(range(sent, sent + len(new)))
                                 if fake.incremental else list(range(len(whole))),
                                 "meta_info": {"id": "r1", "prompt_tokens": 100,
                                               "completion_tokens": len(whole),
                                               "cached_tokens": 0,
                                               "finish_reason": (finish or {"type": "stop",
                                                                            "matched": 0})
                                               if last and not hang else None}})
                    sent += len(new)
                    if hang:
                        return self._wait_for_disconnect()
                    if last:
                        return

            def _wait_for_disconnect(self) -> None:
                """Hold the request open, as a long fill does, until the client leaves."""
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    ready, _, _ = select.select([self.connection], [], [], 0.05)
                    if ready and not self.connection.recv(1):
                        fake.disconnected.set()
                        raise ConnectionResetError("the client went away")

        return Handler


@pytest.fixture
def fake():
    server = FakeSGLang()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def no_token_variable(monkeypatch):
    monkeypatch.delenv("DLM_LSP_REMOTE_TOKEN", raising=False)


def engine(url: str, **settings: Any) -> SGLangEngine:
    return SGLangEngine(ServerConfig(backend="sglang", remote_url=url,
                                     **{"remote_token": KEY, **settings}))


def request(text: str = DOC, at: int = CURSOR, **extra: Any) -> InfillRequest:
    return InfillRequest(text, at, at, "python", URI, **extra)


def test_a_multi_line_fill_is_cut_to_the_gap_reindented_and_validated(fake):
    result = engine(fake.url).infill(request())
    [best] = result.candidates
    assert best.text == FILL  # the rewritten `return result` and the rambling are gone
    assert best.valid is True and best.check is not None and best.check.checked
    assert result.plan.kind == "multi-line" and result.syntax == "no syntax errors"
    assert best.used == math.ceil(ANSWER.index("```") / 3)  # tokens up to the stop string


def test_a_fill_written_from_column_0_is_moved_onto_the_cursor_s_block(fake):
    """A served model writes the cursor's line itself, often at column 0: its lines are
    on that base, not dedents out of the function."""
    fake.answer = ANSWER.replace("\n  ", "\n")
    [best] = engine(fake.url).infill(request()).candidates
    assert (best.text, best.valid) == (FILL, True)


def test_a_line_left_of_the_model_s_own_indentation_leaves_the_block(fake):
    """Module code the model wrote below the body stays module code: the fill ends there."""
    fake.answer = "\n  result = sum(items)\nprint(total([1]))\n```"
    [best] = engine(fake.url).infill(request()).candidates
    assert (best.text, best.valid) == ("result = sum(items)", True)


def test_a_string_s_lines_keep_their_columns_where_the_model_s_code_moves(fake):
    """The model's two-space body goes on the document's four; a line inside its string
    moves with the line the string opens on, or stays, left of it (see
    indentation.FreeLines): it is the string's text, not a level."""
    fake.answer = "\n  sql = '''\n  SELECT 1\n'''\n  result = sql\n  return result\n```"
    [best] = engine(fake.url).infill(request()).candidates
    assert (best.text, best.valid) == ("sql = '''\n    SELECT 1\n'''\n    result = sql", True)


def test_a_template_string_s_lines_at_column_0_are_no_sign_of_the_model_s_base(fake):
    """Read as code, the template's column-0 lines said the model wrote from column 0:
    its code went a level deeper and the string's text changed."""
    fake.answer = "\n  const s = `\nabc\n`;\n  return s;\n}\n```"
    doc = "function f() {\n    \n}\n"
    at = doc.index("    \n") + 4
    [best] = engine(fake.url).infill(
        InfillRequest(doc, at, at, "javascript", "file:///t.js")).candidates
    assert (best.text, best.valid) == ("const s = `\nabc\n`;\n    return s;", True)


def test_the_request_is_a_llada2_prompt_with_the_fill_settings_and_the_key(fake):
    engine(fake.url, temperature=0.3, top_p=0.9).infill(
        request(options=InfillOptions(length=40)))
    [(method, path, headers, body)] = [r for r in fake.requests if r[1] == "/generate"]
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert body["stream"] is True
    assert body["sampling_params"] == {"max_new_tokens": 40, "temperature": 0.3, "top_p": 0.9,
                                       "stop": ["```", "<|role_end|>"]}
    prompt = body["text"]
    assert prompt.startswith("<role>SYSTEM</role>detailed thinking off<|role_end|>"
                             "<role>HUMAN</role>")
    assert "```python\n\n    return result\n\n```" in prompt  # the code after the gap
    # the answer starts as the file up to the cursor; the blank line is left to the model
    assert prompt.endswith("<|role_end|><role>ASSISTANT</role>```python\ndef total(items):")


def test_a_crlf_file_is_sent_with_newlines_and_its_fill_comes_back_with_crlf(fake):
    crlf = DOC.replace("\n", "\r\n")
    result = engine(fake.url).infill(request(crlf, CURSOR + DOC.count("\n", 0, CURSOR)))
    [(_, _, _, body)] = [r for r in fake.requests if r[1] == "/generate"]
    assert "\r" not in body["text"]
    assert result.candidates[0].text == FILL.replace("\n", "\r\n")


def test_a_notebook_cell_s_prompt_shows_the_other_cells_around_it_with_newlines(fake):
    """The cells above come before the document in the answer's start, those below after
    it in the code after the gap; their `\r\n` are sent as `\n`, as the document's are."""
    engine(fake.url).infill(request(before="import math\r\n\r\n",
                                    after="\r\n\r\nprint(total([1]))"))
    [(_, _, _, body)] = [r for r in fake.requests if r[1] == "/generate"]
    prompt = body["text"]
    assert "\r" not in prompt
    assert prompt.endswith("```python\nimport math\n\ndef total(items):")
    assert "    return result\n\n\nprint(total([1]))\n```" in prompt


def test_a_fill_that_breaks_the_syntax_is_marked_invalid_with_where(fake):
    text = "def f(a):\n    return a + \n"
    fake.answer = " (a *\nprint(a)\n"
    result = engine(fake.url).infill(request(text, text.index("+ ") + 2))
    [best] = result.candidates
    assert result.plan.kind == "single-line" and best.text == "(a *"  # one line, head dropped
    assert best.valid is False and best.check.new_errors == ((1, 4),)
    assert "syntax error" in result.syntax


def test_a_fill_that_writes_the_hole_marker_is_rejected_as_a_local_one_is(fake):
    """Its syntax alone was checked: a string holding `<FILL>` passed, and Fill holes
    would have put a hole back."""
    text = "def f(a):\n    return \n"
    fake.answer = ' "<FILL>"\n'
    result = engine(fake.url).infill(request(text, text.index("return ") + 7))
    [best] = result.candidates
    assert best.text == '"<FILL>"' and best.valid is False
    assert "fill writes the hole marker <FILL>" in result.syntax


def test_a_fill_inside_a_line_stops_where_the_line_goes_on_as_before(fake):
    text = "print(max(1, ))\n"
    fake.answer = " 2))\nprint(3)"
    result = engine(fake.url).infill(request(text, text.index("))")))
    assert result.candidates[0].text == "2" and result.candidates[0].valid is True


def test_broken_bytes_and_control_characters_are_left_out_of_fills_and_drafts(fake):
    """SGLang decodes the model's tokens itself: bytes that make no whole character arrive
    as U+FFFD, which the document does not hold, and the served model's ids are not ours
    to decode again.  A zero width space is left out as a local fill leaves it out."""
    fake.answer = ANSWER.replace("result = 0", "re\u200bs\ufffdult\x10 = 0\x1d")
    drafts: list[str] = []
    result = engine(fake.url).infill(request(on_draft=lambda *d: drafts.append(d[2])))
    assert result.candidates[0].text == FILL and result.candidates[0].valid
    assert drafts[-1].startswith("result = 0\n")
    assert not any(ch in draft for draft in drafts for ch in "\ufffd\x10\x1d\u200b")


def test_a_u_fffd_or_a_control_character_the_document_holds_is_kept(fake):
    """A form feed between pages, a U+FFFD in a string: the model may copy what it was shown."""
    text = '# \x0c \ufffd\n' + DOC
    fake.answer = ANSWER.replace("result = 0", "result = '\ufffd\x0c'")
    result = engine(fake.url).infill(request(text, CURSOR + len('# \x0c \ufffd\n')))
    assert result.candidates[0].text == FILL.replace("result = 0", "result = '\ufffd\x0c'")


def test_a_lone_surrogate_in_the_document_reaches_the_model_as_u_fffd(fake):
    """JSON may spell one (`"\\ud800"`), UTF-8 cannot write it: the request failed before
    it was sent.  The served model reads U+FFFD there, as a local fill's does."""
    text = "# \ud800\n" + DOC
    engine(fake.url).infill(request(text, CURSOR + len("# \ud800\n")))
    [(_, _, _, body)] = [r for r in fake.requests if r[1] == "/generate"]
    assert "# \ufffd\n" in body["text"] and "\ud800" not in body["text"]


def test_drafts_arrive_as_the_streamed_text_grows(fake):
    drafts: list[tuple[int, int, str]] = []
    engine(fake.url).infill(request(on_draft=lambda *d: drafts.append(d)))
    assert len(drafts) >= 3
    steps = [step for step, _, _ in drafts]
    assert steps == sorted(steps) and all(total == 48 for _, total, _ in drafts)
    assert drafts[0][2] != drafts[-1][2] and drafts[-1][2].startswith("result = 0\n")


def test_cancelling_closes_the_connection_mid_stream(fake):
    fake.replies.append(("hang",))
    stop = threading.Event()
    began = time.monotonic()
    with pytest.raises(Cancelled):
        engine(fake.url).infill(request(should_stop=stop.is_set,
                                        on_draft=lambda *d: stop.set()))
    assert time.monotonic() - began < 3
    assert fake.disconnected.wait(5), "the server never saw the client leave"


def test_a_wrong_key_is_refused_with_the_setting_to_change(fake):
    with pytest.raises(BackendError) as err:
        engine(fake.url, remote_token="wrong").infill(request())
    assert "401" in str(err.value) and "remoteToken" in str(err.value)
    assert "--api-key" in str(err.value) and not fake.generated()


def test_no_key_where_the_server_wants_one_says_so(fake):
    with pytest.raises(BackendError, match="wants an API key .*remoteToken"):
        engine(fake.url, remote_token="").preload()


def test_a_rewrite_is_told_too_long_before_asking_as_the_fill_would_refuse_it(fake):
    """The SGLang backend sizes a rewrite from its characters (3.5 a token): a code action
    is told what the fill would be refused with, and nothing where it would run."""
    text = "".join(f"value_{i} = {i}\n" for i in range(60))
    sglang = engine(fake.url)
    told = sglang.rewrite_refusal(text)
    with pytest.raises(SpanTooLong) as refused:
        sglang.infill(InfillRequest(text, 0, len(text), "python", URI))
    assert told == str(refused.value) and "maxSpanTokens, 128" in told
    assert sglang.rewrite_refusal(text[:200]) is None


@pytest.mark.parametrize("lines", [56, 57])  # 448 and 456 characters with \n: 128, 131 tokens
def test_a_crlf_selection_is_told_too_long_as_the_fill_counts_it_with_newlines(fake, lines):
    """The fill sizes a rewrite from the text the model is shown, its line breaks `\n`
    (line_endings.py): counted with its `\r`s, a selection of a Windows file was told
    too long (greyed in the editor) where the command would rewrite it."""
    text = "value=1\r\n" * lines
    sglang = engine(fake.url)
    told = sglang.rewrite_refusal(text)
    try:
        sglang.infill(InfillRequest(text, 0, len(text), "python", URI))
    except SpanTooLong as refused:
        assert told == str(refused)
    else:
        assert told is None
    assert (told is None) == (lines == 56)


def test_a_rewrite_shows_the_old_code_and_is_sized_from_it(fake):
    text = "def f(x):\n    return x+1\n"
    fake.answer = " x + 1\n```"
    start = text.index("x+1")
    result = engine(fake.url).infill(InfillRequest(text, start, start + 3, "python", URI))
    assert result.plan.kind == "rewrite" and result.candidates[0].text == "x + 1"
    [body] = fake.generated()
    assert "rewritten:\n```python\nx+1\n```" in body["text"]
    assert body["sampling_params"]["max_new_tokens"] == 1 + 8  # ~3.5 characters a token


def test_an_unreachable_server_with_fallback_fills_on_the_local_engine(model_dir):
    backend = engine(f"http://127.0.0.1:{free_port()}", remote_retries=0,
                     remote_fallback=True, model=str(model_dir))
    result = backend.infill(request(options=InfillOptions(length=4, steps=2)))
    assert result.tokens >= 4 and backend.status()["fallbacks"] == 1
    assert any("remoteFallback" in notice for notice in backend.notices)


def test_an_unreachable_server_is_a_quick_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    with pytest.raises(BackendError) as err:
        engine(url, remote_retries=1).infill(request())
    assert time.monotonic() - began < 3
    assert f"cannot reach {url}" in str(err.value) and "remoteUrl" in str(err.value)


@pytest.mark.parametrize("url, words", [
    ("", "set 'remoteUrl'"),
    ("ftp://gpu-box", "not an http:// or https:// URL"),
    ("http://gpu-box:99999", r"no port number 0-65535"),  # was a bare ValueError
    ("http://gpu-box:3000O", r"no port number 0-65535"),
    ("http://me:pw@gpu-box:30000", "user name or password, which is never sent"),
])
def test_a_bad_url_says_what_is_wrong(url, words):
    with pytest.raises(BackendError, match=words):
        engine(url).infill(request())
    if url:  # and the setting is refused before it is used
        assert "setting 'remoteUrl'" in from_json(ServerConfig, {"remoteUrl": url})[1][0]


def test_a_server_that_is_not_sglang_is_named_by_the_setting():
    other = FakeSGLang(sglang=False)
    try:
        with pytest.raises(BackendError) as err:
            engine(other.url).preload()
        assert "404" in str(err.value) and "remoteUrl" in str(err.value)
    finally:
        other.close()


def test_a_model_that_does_not_generate_is_refused():
    embedder = FakeSGLang(model_path="BAAI/bge-m3", architectures=("XLMRobertaModel",),
                          is_generation=False)
    try:
        with pytest.raises(BackendError, match="does not generate text"):
            engine(embedder.url).infill(request())
        assert not embedder.generated()
    finally:
        embedder.close()


def test_a_server_error_is_retried(fake):
    fake.replies.append(("status", 500, {"error": {"message": "scheduler restarting"}}))
    backend = engine(fake.url)
    result = backend.infill(request())
    assert result.candidates[0].text == FILL
    assert len(fake.generated()) == 2 and backend.status()["retries"] == 1


def test_a_server_error_past_the_retries_names_the_setting(fake):
    fake.replies.extend([("status", 503, {"error": "starting"})] * 2)
    with pytest.raises(BackendError) as err:
        engine(fake.url, remote_retries=1).infill(request())
    assert "HTTP 503" in str(err.value) and "remoteRetries" in str(err.value)
    assert len(fake.generated()) == 2


def test_an_error_in_the_stream_is_reported(fake):
    fake.replies.append(("error", "The input (9000 tokens) is longer than the model's "
                                  "context length (8192 tokens)."))
    with pytest.raises(BackendError, match="longer than the model's context length"):
        engine(fake.url).infill(request())
    assert len(fake.generated()) == 1  # not a failure that another try would mend


def test_a_stream_cut_within_a_line_is_a_lost_fill_tried_again(fake):
    fake.replies.append(("raw", b'data: {"text": "\\n  res'))
    backend = engine(fake.url)
    assert backend.infill(request()).candidates[0].text == FILL
    assert len(fake.generated()) == 2 and backend.status()["retries"] == 1


@pytest.mark.parametrize("answer, says", [
    (b"<html>It works!</html>\n", r"<html>It works!</html>'?: ValueError not a server-sent"),
    (b"data: Internal Server Error\n\n", "JSONDecodeError"),
    (b"data: [1, 2]\n\n", "TypeError an update that is a list"),
    (b'data: {"text": "x", "meta_info": [1]}\n\n', "TypeError meta_info that is a list"),
    (b'data: {"text": "x", "meta_info": {"completion_tokens": "many"}}\n\n',
     "ValueError invalid literal"),
])
def test_an_answer_that_is_not_sglang_s_says_so_and_is_not_retried(fake, answer, says):
    fake.replies.extend([("raw", answer)] * 3)
    with pytest.raises(BackendError, match=f"cannot read.*{says}.*is remoteUrl the address "
                                           "of an SGLang server"):
        engine(fake.url, remote_retries=2).infill(request())
    assert len(fake.generated()) == 1


@pytest.mark.parametrize("body, says", [
    (b"<!DOCTYPE html><html>Welcome</html>", "JSONDecodeError"),
    (b'["LLaDA2.0-mini"]', "TypeError an answer to /model_info that is a list"),
])
def test_model_info_that_is_not_sglang_s_says_so_and_is_not_retried(fake, body, says):
    fake.info_body = body
    with pytest.raises(BackendError, match=f"cannot read.*{says}.*is remoteUrl the address "
                                           "of an SGLang server"):
        engine(fake.url, remote_retries=2).infill(request())
    assert sum(path == "/model_info" for _, path, _, _ in fake.requests) == 1


def test_an_older_server_with_incremental_streaming_gives_the_same_fill():
    old = FakeSGLang(incremental=True, model_info_path="/get_model_info")
    try:
        assert engine(old.url).infill(request()).candidates[0].text == FILL
    finally:
        old.close()


def test_a_model_without_a_known_chat_format_continues_the_code_before_the_gap():
    other = FakeSGLang(model_path="/models/dg", architectures=("DiffusionGemmaForBlockDiffusion",),
                       model_type="gemma4", answer="\n    result = sum(items)\n    return result\n")
    try:
        backend = engine(other.url)
        result = backend.infill(request())
        body = other.generated()[0]
        assert body["text"] == "def total(items):" and body["sampling_params"]["stop"] == []
        assert result.candidates[0].text == "result = sum(items)"
        assert any("chat format" in notice for notice in backend.notices)
    finally:
        other.close()


def test_status_and_preload_name_the_server_and_its_model(fake):
    backend = engine(fake.url)
    assert backend.preload() == (f"SGLang at {fake.url}: model inclusionAI/LLaDA2.0-mini "
                                 "with LowConfidence")
    status = backend.status()
    assert status["reachable"] and status["backend"] == "sglang"
    assert status["model"] == "inclusionAI/LLaDA2.0-mini" and status["chatFormat"] == "llada2"
    # as a local engine's with its model loaded
    assert (status["loaded"], status["loading"], status["loadError"]) == (True, False, None)


def test_the_language_server_fills_through_sglang_end_to_end(fake):
    """An editor's view: settings pick the backend, `dlm/infill` answers with the edit."""
    server = ServerProcess()
    try:
        client = server.client
        client.initialize({"backend": "sglang", "remoteUrl": fake.url, "remoteToken": KEY})
        client.open(URI, DOC)
        line = {"line": 1, "character": 4}
        reply = client.call("dlm/infill", {"textDocument": {"uri": URI},
                                           "range": {"start": line, "end": line}})
        assert "error" not in reply, reply
        assert reply["result"]["edits"][0]["newText"] == FILL
        assert reply["result"]["candidates"][0]["valid"] is True
        status = client.call("dlm/status")["result"]
        assert status["backend"] == "sglang" and status["fills"] == 1
        client.notify("workspace/didChangeConfiguration", {"settings": {
            "backend": "sglang", "remoteUrl": fake.url, "remoteToken": "wrong"}})
        refused = client.call("dlm/infill", {"textDocument": {"uri": URI},
                                             "range": {"start": line, "end": line}})
        assert refused["error"]["code"] == -32005 and "remoteToken" in refused["error"]["message"]
    finally:
        server.close()

