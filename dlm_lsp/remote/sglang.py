"""`backend: sglang`: fills from a model that an SGLang server serves.

Block-diffusion checkpoints such as LLaDA2.0/2.1 mini and flash are served by SGLang
(`python -m sglang.launch_server --dllm-algorithm ...`, tensor parallel across GPUs);
this backend sends each fill to such a server over its native HTTP API:
`POST /generate` with `{"text", "sampling_params", "stream": true}`, answered as
server-sent events (`data: {"text", "output_ids", "meta_info"}` ... `data: [DONE]`).

SGLang's diffusion path only *continues* a prompt (no suffix input, no documented
fill-in-the-middle format), so the infill is posed as a prompt in the model's chat
format and the fill cut back out of the continuation: see `sglang_prompt.py`.

From there a fill is what a local fill is: cut at the first line break for a single-line
fill, re-indented and cut to whole syntactic units for a multi-line one, the borrowed
line break put back, and validated against the document (`dlm_lsp.passes`).  Repair
rounds and the left-to-right retry need the model's tokens and are not available; a
fill gives one candidate.  It leaves out what a local fill leaves out (`_left_out`).

Closing the connection cancels the fill (SGLang aborts a request whose client has gone);
a fill that met a connection error, an HTTP 5xx or a stream that ended early is sent
again up to `remoteRetries` times; an answer that is not SGLang's (a line that is no
server-sent event of its shape) is an error that says so, not tried again.  The key is
sent as `Authorization: Bearer <key>`, SGLang's `--api-key` convention; retries and the
fallback are `retry.py`'s.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

from dlm_lsp.backends import BackendError
from dlm_lsp.characters import left_out, without
from dlm_lsp.config import ServerConfig, setting
from dlm_lsp.line_endings import for_the_model, restored
from dlm_lsp.models.tokenizer import encodable
from dlm_lsp.passes import (
    document_for,
    fill_free_lines,
    judged,
    reindented,
    shape_fill,
    shown_style,
)
from dlm_lsp.policy import LengthEstimate, SpanPlan, local_text, plan_span
from dlm_lsp.remote.retry import Lost, ServerBackend, stop_if_asked
from dlm_lsp.remote.sglang_prompt import (
    CHARS_PER_TOKEN,
    FENCE,
    PLAIN,
    Prompt,
    before_suffix,
    build_prompt,
    chat_format,
    continuation,
)
from dlm_lsp.repair import DIFFUSION, LEFT_TO_RIGHT
from dlm_lsp.results import Candidate, InfillRequest, InfillResult
from dlm_lsp.span import borrowed_line_break
from dlm_lsp.validation import ParsedDocument, language_for

GENERATE_PATH = "/generate"
MODEL_INFO_PATHS = ("/model_info", "/get_model_info")  # the second is the older name
SERVER_INFO_PATHS = ("/server_info", "/get_server_info")
# event-stream lines that carry nothing for a fill: comments and the fields besides data
_PASSED_OVER = (b":", b"event:", b"id:", b"retry:")


class SGLangEngine(ServerBackend):
    """A `Backend` that sends every fill to an SGLang server's `/generate`."""

    BACKEND = "sglang"
    # where the length policy counts a rewrite's tokens (the served model's tokenizer is
    # on the server): the same count its refusal is told from (`rewrite_refusal`)
    LENGTH = LengthEstimate(CHARS_PER_TOKEN)
    SERVER = "the SGLang server"
    LABEL = "SGLang"
    UNREADABLE = ("is {url} the address of an SGLang server (`python -m "
                  "sglang.launch_server`), e.g. http://gpu-box:30000?")

    def __init__(self, config: ServerConfig):
        super().__init__(config)
        self._lock = threading.Lock()
        self._info: dict[str, Any] | None = None  # /model_info, once it answered
        self._algorithm: str | None = None  # --dllm-algorithm ("" when serving without one)
        self._told: set[str] = set()  # notices given once

    # -- Backend -------------------------------------------------------------------------

    def infill(self, req: InfillRequest) -> InfillResult:
        """Fill the span with the served model, shaped and validated like a local fill."""
        began = time.perf_counter()
        req, lines = for_the_model(req)  # the prompt with \n line breaks, as for our engine
        return restored(self._with_retries(req, lambda: self._once(req, began)), lines)

    def reconfigure(self, config: ServerConfig) -> bool:
        """Adopt new fill settings (the server and key are the same: see switch_backend);
        the server's model is asked again at the next fill."""
        to_load = super().reconfigure(config)
        with self._lock:
            self._info = None
        return to_load

    def preload(self) -> str:
        """Reach the server now and say which model it serves."""
        try:
            info = self._model_info()
        except BackendError as exc:
            if not self._falls_back(exc):
                raise
            return self._starting_down(exc)
        how = f" with {self._algorithm}" if self._algorithm else ""
        return f"SGLang at {self.config.remote_url}: model {info.get('model_path')}{how}"

    def status(self) -> dict[str, Any]:
        """What `dlm/status` shows: this client's fills and the server's model."""
        return self._status(self._model_info, lambda info: {
            "model": info.get("model_path"), "device": f"SGLang at {self.config.remote_url}",
            "dllmAlgorithm": self._algorithm or None, "chatFormat": chat_format(info).name})

    # -- one fill ------------------------------------------------------------------------

    def _once(self, req: InfillRequest, began: float) -> InfillResult:
        """One try: the prompt sent, the answer streamed back and made a fill."""
        stop_if_asked(req)  # asking for the model below is not watched for a stop
        cfg = req.config if req.config is not None else self.config
        info = self._model_info()
        chat = chat_format(info)
        language = language_for(req.language_id, req.uri)
        plan = plan_span(req.text, req.start, req.end, cfg, req.options, self.LENGTH,
                         req.is_hole, language)
        if (req.options.candidates or cfg.candidates) > 1:
            self._tell_once("candidates", "the SGLang backend gives one candidate per fill "
                            "(setting candidates)")
        prompt = build_prompt(req, plan, cfg, language, chat)
        params: dict[str, Any] = {"max_new_tokens": plan.n_masked,
                                  "temperature": setting(req.options, cfg, "temperature"),
                                  "stop": [FENCE, *chat.stops] if prompt.fenced else []}
        top_p = setting(req.options, cfg, "top_p")
        if top_p is not None:
            params["top_p"] = top_p
        # a lone surrogate (JSON spells one) as U+FFFD: UTF-8 cannot write it, and the
        # served model reads what a local fill's does there
        body = json.dumps({"text": encodable(prompt.text), "sampling_params": params,
                           "stream": True}, ensure_ascii=False).encode()
        text, meta, chunks = self._post(req, GENERATE_PATH, body, "text/event-stream",
                                        lambda response: self._read(req, response, prompt,
                                                                    plan))
        path = LEFT_TO_RIGHT if self._algorithm == "" else DIFFUSION
        return self._result(req, cfg, plan, language, prompt, text, meta, chunks, path, began)

    def _read(self, req: InfillRequest, response: http.client.HTTPResponse, prompt: Prompt,
              plan: SpanPlan) -> tuple[str, dict[str, Any], int]:
        """Read the event stream to its end, passing each update on as a draft; the text
        comes without what a fill leaves out (`_left_out`).

        A line cut short is the server or the connection lost mid-answer (tried again); a
        whole line that is not a server-sent event of SGLang's (an HTML page, an update
        of another shape) is an answer no retry can mend, said as such (`_reading`).
        Comments and the event fields SGLang does not send (`event:`, `id:`, `retry:`)
        are passed over, as the format allows."""
        text, meta, chunks, finished = "", {}, 0, False
        unwanted = _left_out(prompt)
        ended = f"{self._at()} ended the fill's stream before it finished"
        while True:
            line = self._whole_line(response, ended)
            if not line:
                if finished:
                    return without(text, unwanted), meta, chunks
                raise Lost(ended)
            line = line.strip()
            if not line or line.startswith(_PASSED_OVER):
                continue
            with self._reading(line):
                if not line.startswith(b"data:"):
                    raise ValueError("not a server-sent event")
                data = line[len(b"data:"):].strip()
                if data == b"[DONE]":
                    if finished:
                        return without(text, unwanted), meta, chunks
                    raise Lost(f"{self._at()} ended the fill without finishing it")
                message = json.loads(data)
                if not isinstance(message, dict):
                    raise TypeError(f"an update that is a {type(message).__name__}, not an "
                                    "object")
                if "error" in message:
                    raise BackendError(f"{self._at()} could not fill: {_message(message)}")
                meta = {} if message.get("meta_info") is None else message["meta_info"]
                if not isinstance(meta, dict):
                    raise TypeError(f"meta_info that is a {type(meta).__name__}, not an object")
                text = _grown(text, message)
                step = int(meta.get("completion_tokens") or chunks + 1)
                reason = meta.get("finish_reason")
            chunks += 1
            if isinstance(reason, dict) and reason.get("type") == "abort":
                raise BackendError(f"{self._at()} aborted the fill: "
                                   f"{reason.get('message', 'no reason given')}")
            finished = reason is not None
            if req.on_draft is not None:
                draft = continuation(without(text, unwanted), prompt, meta)
                draft = draft.split("\n", 1)[0] if plan.single_line else draft
                req.on_draft(step, plan.n_masked, draft)

    def _result(self, req: InfillRequest, cfg: ServerConfig, plan: SpanPlan,
                language: str | None, prompt: Prompt, text: str, meta: dict[str, Any],
                chunks: int, path: str, began: float) -> InfillResult:
        """The continuation as a fill: cut to the gap, shaped and validated."""
        # the continuation goes on the document's indentation first, so that the code
        # after the gap, written again, is recognised line for line
        local = None if plan.single_line else local_text(req.text, req.start, req.end)
        written, shown = continuation(text, prompt, meta), shown_style(req, language)
        fill = before_suffix(reindented(written, req, language, local,
                                        fill_free_lines(written, req, language, local), shown),
                             prompt)
        fill = fill.split("\n", 1)[0] if plan.single_line else fill
        tail = borrowed_line_break(req.text[:req.end], req.text[req.end:])
        fill = shape_fill(fill, req, plan, tail, language, local, shown)
        document = document_for(req, cfg)
        # checked as a local fill is (`judged`: its syntax, the names checks where on, the
        # hole marker): its syntax alone was checked, a fill that wrote `<FILL>` passed
        check = (judged(document, req, fill, cfg)
                 if isinstance(document, ParsedDocument) else None)
        used = int(meta.get("completion_tokens") or 0)
        candidate = Candidate(fill, check.valid if check else None, 0.0, used, path, [], check)
        syntax = check.reason if check is not None else f"not checked: {document}"
        ms = (time.perf_counter() - began) * 1000
        return InfillResult([candidate], plan, chunks, plan.n_masked, ms, False, path, 0, None,
                            syntax)

    # -- the server ----------------------------------------------------------------------

    def _model_info(self) -> dict[str, Any]:
        """What the server serves (asked once): a generating model, and how it decodes."""
        with self._lock:
            if self._info is not None:
                return self._info
        info = self._get(*MODEL_INFO_PATHS)
        if info.get("is_generation") is False:
            raise BackendError(
                f"{self._at()} serves {info.get('model_path')}, which does not generate "
                "text (an embedding or reward model): point remoteUrl at a server launched "
                "with a generation model, e.g. inclusionAI/LLaDA2.0-mini with "
                "--dllm-algorithm LowConfidence")
        try:
            algorithm = self._get(*SERVER_INFO_PATHS).get("dllm_algorithm") or ""
        except BackendError:
            algorithm = None  # not shown to this key: assume the diffusion it is meant for
        model = info.get("model_path")
        if chat_format(info) is PLAIN:
            self._tell_once("plain", f"the chat format of {model} is not known here: fills "
                            "continue the code before the cursor without seeing the code "
                            "after it")
        if algorithm == "":
            self._tell_once("autoregressive", f"the SGLang server serves {model} without "
                            "--dllm-algorithm, as an autoregressive model")
        with self._lock:
            self._info, self._algorithm = info, algorithm
        return info

    def _check(self, response: http.client.HTTPResponse, path: str) -> None:
        """Raise for an answer other than HTTP 200, saying what to change."""
        if response.status == 200:
            return
        detail = _message(response.read(4096))[:300]
        url, status = self.config.remote_url, response.status
        if status == 401:
            what = "refused the API key" if self._token() else "wants an API key"
            raise BackendError(
                f"the SGLang server at {url} {what} (HTTP 401): set "
                f"{self._where_the_token_goes()} to the key the server was started with "
                "(--api-key)")
        if status == 403:
            raise BackendError(f"the SGLang server at {url} forbids {path} to this key (HTTP "
                               "403): set remoteToken to the server's --api-key")
        if status == 404:
            raise BackendError(f"no SGLang server answers {path} at {url} (HTTP 404): set "
                               "remoteUrl to the address of `python -m sglang.launch_server`, "
                               "e.g. http://gpu-box:30000")
        if status >= 500 or status == 429:
            raise Lost(f"the SGLang server at {url} failed (HTTP {status}: {detail})")
        hint = "; lower maxContextTokens" if "length" in detail.lower() else ""
        raise BackendError(f"the SGLang server at {url} rejected the fill (HTTP {status}): "
                           f"{detail}{hint}")

    def _tell_once(self, key: str, notice: str) -> None:
        if key not in self._told:
            self._told.add(key)
            self.notices.append(notice)


def _left_out(prompt: Prompt) -> frozenset[str]:
    """What a fill from the served model leaves out: the control characters its prompt
    does not hold, as a local fill does (`dlm_lsp/characters.py`), and U+FFFD unless
    the prompt holds one.

    SGLang decodes the model's tokens itself, so bytes that make no whole character (a
    lone byte of `中`, which a block-diffusion model commits as ours does, see
    `Tokenizer.decode`) arrive as U+FFFD, as a real one would.  The `output_ids` beside
    the text are the served model's, whose tokenizer is on the server: ours cannot
    decode them again.  A model writes a real U+FFFD by copying one it was shown, so
    where the prompt holds none, each is broken bytes.
    """
    return left_out(prompt.text, also=frozenset("\ufffd"))


def _message(data: bytes | dict[str, Any]) -> str:
    """The error text of an SGLang answer: `{"error": {"message"}}`, `{"error": "..."}`,
    an OpenAI-style `{"message"}` or FastAPI's `{"detail"}`."""
    if isinstance(data, bytes):
        try:
            data = json.loads(data)
        except ValueError:
            return data.decode("utf-8", "replace").strip()
    if not isinstance(data, dict):
        return str(data)
    error = data.get("error", data)
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or error)
    return str(error)


def _grown(text: str, message: dict[str, Any]) -> str:
    """The text so far after one streamed update: SGLang sends the whole text each time,
    or only the new part when started with --incremental-streaming-output."""
    new = message.get("text")
    if not isinstance(new, str):
        return text
    ids = message.get("output_ids")
    done = (message.get("meta_info") or {}).get("completion_tokens")
    whole = len(ids) >= done if isinstance(ids, list) and isinstance(done, int) \
        else new.startswith(text)
    return new if whole else text + new
