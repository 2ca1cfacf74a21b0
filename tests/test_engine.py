"""Specification of dlm_lsp.engine with the session's random tiny model on the CPU.

A random model writes nonsense, so these tests check what must hold whatever it
writes: the fill lands exactly in the span (nothing at the edges duplicated or
dropped), single-line fills stay on one line, candidates are ranked, and errors
(cancellation, out of memory, a missing model) surface as their documented types.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import dlm_lsp.passes as passes_module
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import (
    LOAD_RETRY_CAP_S,
    LOAD_RETRY_S,
    MASK_PLACEHOLDER,
    Engine,
    InfillRequest,
    OutOfMemory,
)
from dlm_lsp.indentation import to_cursor_column
from dlm_lsp.models import ModelLoadError
from dlm_lsp.policy import MULTI_LINE, REWRITE, SINGLE_LINE, span_reach
from dlm_lsp.sampler import Cancelled
from dlm_lsp.span import borrowed_line_break
from dlm_lsp.validation import ParsedDocument, Validation


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Engine:
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False))
    eng.model  # noqa: B018 -- load once for the module
    return eng


def _request(marked: str, **options) -> InfillRequest:
    """'a|b' is a cursor between a and b; 'a[b]c' a selection of b.  A random model's
    fills are seldom valid: repair and the fallback stay off unless a test asks."""
    options = {"repair_rounds": 0, "fallback": False, **options}
    if "|" in marked:
        at = marked.index("|")
        text, start, end = marked.replace("|", ""), at, at
    else:
        start, end = marked.index("["), marked.index("]") - 1
        text = marked.replace("[", "").replace("]", "")
    polls = itertools.count()  # a loop that never ends fails as Cancelled instead of hanging
    return InfillRequest(text, start, end, "python", "file:///t.py", InfillOptions(**options),
                         should_stop=lambda: next(polls) > 500)


def _record_denoise(monkeypatch: pytest.MonkeyPatch) -> list:
    """Wrap the engine's denoise so a test can see each layout and raw span."""
    calls = []
    real = passes_module.denoise

    def spy(model, layout, cfg, seed, *args, **kwargs):
        out = real(model, layout, cfg, seed, *args, **kwargs)
        calls.append((layout, out))
        return out
    monkeypatch.setattr(passes_module, "denoise", spy)
    return calls


# cursor positions where the tokenizer would merge the prefix's end with the fill
EDGES = {
    "end-of-word": "y = ret|\n",
    "mid-word": "y = ret|urn\n",
    "end-of-line": "x = foo(|\n",
    "indented-line-start": "def f():\n    |\n",
    "after-line-break": "a = 1\n|b = 2\n",
    "end-of-file": "a = 1\n|",
    "mid-word-at-end-of-file": "y = ret|",
    "start-of-file": "|x = 1\n",
    "selection": "total = [sum](values)\n",
}


# --- the fill lands exactly in the span ---------------------------------------------------


def _assert_inserted_exactly(engine: Engine, req: InfillRequest, result, calls: list) -> None:
    """The document with the fill reads exactly as the model's sequence: nothing at the
    edges is duplicated or dropped (checked for a single-candidate request)."""
    tok, pad = engine.model.tokenizer, engine.model.pad_id
    layout, out = calls[-1]
    ids = out.span_ids[0].tolist()
    written = tok.decode(ids[:ids.index(pad)] if pad in ids else ids)
    # the model's sequence starts where the document's prefix minus the head ends ...
    assert tok.decode(layout.prefix_ids) + layout.head == req.text[:req.start]
    # ... and its span starts with the head, which the fill must neither repeat nor lose
    assert written.startswith(layout.head), (layout.head, written)
    body = written[len(layout.head):]
    if result.plan.single_line:
        body = body.split("\n", 1)[0]
    tail = borrowed_line_break(req.text[:req.end], req.text[req.end:])
    assert tok.decode(layout.suffix_ids) == (tail + req.text[req.end:])[:len(
        tok.decode(layout.suffix_ids))]  # the model sees the suffix after the borrowed break
    if tail and body.strip() and not body.endswith(tail):
        body += tail
    # a line the model began deeper than a cursor in a block's body starts at the cursor
    # (test_syntax.py specifies that move); the edges are what this checks
    body = to_cursor_column(body, req.text, req.start, req.end, req.language_id)
    [candidate] = result.candidates
    assert candidate.text == body, (layout.head, written)


@pytest.mark.parametrize("edge", list(EDGES))
def test_fill_reads_exactly_as_the_model_wrote_it_at_the_edges(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, edge: str) -> None:
    calls = _record_denoise(monkeypatch)
    for seed in range(3):
        req = _request(EDGES[edge], seed=seed, candidates=1)
        _assert_inserted_exactly(engine, req, engine.infill(req), calls)


def test_head_is_used_at_a_word_edge(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_denoise(monkeypatch)
    engine.infill(_request("y = ret|\n"))
    assert calls[-1][0].head == " ret"


def test_fill_after_a_non_ascii_word_is_inserted_exactly(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_denoise(monkeypatch)
    req = _request("x = café|\nprint(x)\n", seed=0, candidates=1)
    polls = itertools.count()
    req.should_stop = lambda: next(polls) > 100  # a correct fill needs at most ~25 steps
    _assert_inserted_exactly(engine, req, engine.infill(req), calls)


@pytest.mark.parametrize("marked", ['s = "\ud800|"\n', 's = "\ud800"\nx = |\n',
                                    '[s = "\ud800"]\n'])
def test_a_document_holding_a_lone_surrogate_is_filled(engine: Engine, marked: str) -> None:
    """JSON may spell a lone surrogate (`"\\ud800"`), which Python reads as a character
    UTF-8 cannot write: the tokenizer refused the text, and every fill of the document
    (its cursor after the surrogate, below it, or a selection of it) failed."""
    result = engine.infill(_request(marked))
    assert result.candidates and "\ud800" not in result.candidates[0].text


def test_fill_is_inserted_exactly_when_the_model_prefers_short_tokens(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    model, calls = engine.model, _record_denoise(monkeypatch)
    space, newline = model.tokenizer.token_id("Ġ"), model.tokenizer.token_id("Ċ")

    def one_character_tokens(ids):  # a (weak) model that spells whitespace out
        logits = torch.zeros(*ids.shape, model.tokenizer.vocab_size)
        logits[..., space], logits[..., newline] = 5.0, 4.0
        return logits
    monkeypatch.setattr(model, "logits", one_character_tokens)
    monkeypatch.setattr(model, "hidden", None)  # the fake is the whole forward pass
    req = _request("def f():\n    |\n", length=2, candidates=1)
    _assert_inserted_exactly(engine, req, engine.infill(req), calls)


@pytest.mark.parametrize("length", [4, 4096])
def test_sequence_never_exceeds_the_model_s_max_length(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, length: int) -> None:
    """Nor does a span past it (maxSpanTokens raised): 4,097 tokens ran the shipped
    model, which reads 512, on positions it never saw, for a minute of a CPU."""
    # without the context cache, every forward pass of the engine starts at `hidden` (the
    # cache's run the layers themselves, on the same ids: tests/test_cache.py)
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", max_context_tokens=100_000,
                              max_span_tokens=4096, context_cache=False))
    model = eng.model
    lengths: list[int] = []
    real = model.hidden

    def spy(ids):
        lengths.append(ids.shape[1])
        assert ids.shape[1] <= model.max_length, f"{ids.shape[1]} > {model.max_length}"
        return real(ids)
    monkeypatch.setattr(model, "hidden", spy)
    text = "x = 1\n" * 400 + "y = 2  # " + "#" * 24
    result = eng.infill(InfillRequest(text + "\n", len(text), len(text), "python",
                                      options=InfillOptions(length=length, steps=2)))
    assert lengths and result.plan.n_masked == min(length, span_reach(model.max_length))


# --- shape of the fills -------------------------------------------------------------------


@pytest.mark.parametrize("marked", ["y = ret|\n", "a = 1\n|b = 2\n", "x = foo(|)\n"])
def test_single_line_fills_contain_no_line_break(engine: Engine, marked: str) -> None:
    for seed in range(3):
        result = engine.infill(_request(marked, seed=seed, candidates=3))
        assert result.plan.kind == SINGLE_LINE
        at_line_start = marked.split("|")[0].endswith("\n")
        for c in result.candidates:
            # a fill at the start of a code line ends with its own line break, nowhere else
            body = c.text[:-1] if at_line_start and c.text.endswith("\n") else c.text
            assert "\n" not in body


def test_plan_kind_follows_the_cursor(engine: Engine) -> None:
    assert engine.infill(_request("def f():\n    |\n")).plan.kind == MULTI_LINE
    assert engine.infill(_request("x = [a + b]\n")).plan.kind == REWRITE


def test_span_length_counts_the_requested_tokens_plus_the_head(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_denoise(monkeypatch)
    result = engine.infill(_request("y = ret|\n", length=5))
    layout = calls[-1][0]
    tok = engine.model.tokenizer
    assert result.tokens == layout.n_masked == 5 + len(tok.encode(layout.head))


@pytest.mark.parametrize("grow", [False, True])
def test_span_length_counts_the_positions_a_head_s_chain_grew_the_span_by(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, grow: bool) -> None:
    """With `growForHead`, a chain of one-character tokens for the head (a line break and
    8 spaces) grows the span past its plan; `tokens` says the span the fill was denoised
    in, as it counts the head's own tokens, in every candidate row."""
    import dlm_lsp.sampler as sampler_module
    spelled, tok = sampler_module.head_tokens, engine.model.tokenizer

    def one_character_chain(chain, logits):
        boost = torch.zeros_like(logits)
        boost[:, [tok.token_id("Ġ"), tok.token_id("Ċ")]] = 100.0
        return spelled(chain, logits + boost)
    monkeypatch.setattr(sampler_module, "head_tokens", one_character_chain)
    calls = _record_denoise(monkeypatch)
    result = engine.infill(_request("def f():\n    if x:\n        |\n", length=5,
                                    candidates=2, grow_for_head=grow))
    layout = calls[-1][0]
    assert layout.head == "\n        " and len(result.candidates) == 2
    assert all(len(c.ids) == result.tokens for c in result.candidates)
    assert (result.tokens > layout.n_masked) is grow


def test_left_to_right_spends_one_step_per_masked_token(engine: Engine) -> None:
    result = engine.infill(_request("y = ret|\n", strategy="left-to-right", length=6))
    assert result.steps == result.tokens


def test_requested_number_of_candidates_is_returned(engine: Engine) -> None:
    assert len(engine.infill(_request("y = ret|\n", candidates=4)).candidates) == 4


def test_same_seed_gives_the_same_candidates(engine: Engine) -> None:
    a = engine.infill(_request("def f():\n    |\n", seed=5, candidates=3, temperature=1.0))
    b = engine.infill(_request("def f():\n    |\n", seed=5, candidates=3, temperature=1.0))
    assert [c.text for c in a.candidates] == [c.text for c in b.candidates]


def test_drafts_are_reported_each_step_and_end_unmasked(engine: Engine) -> None:
    drafts: list[tuple[int, int, str]] = []
    req = _request("def f():\n    |\n", steps=4, length=8)
    req.on_draft = lambda step, steps, text: drafts.append((step, steps, text))
    result = engine.infill(req)
    assert [d[0] for d in drafts] == list(range(1, result.steps + 1))
    assert MASK_PLACEHOLDER in drafts[0][2]
    assert MASK_PLACEHOLDER not in drafts[-1][2]


# --- ranking ------------------------------------------------------------------------------


def _key(c) -> tuple[bool, bool, float]:
    """Valid first; of those as valid, the ones whose text lost no broken bytes; by score."""
    return (c.valid is False, bool(c.broken), -c.score)


def test_candidates_are_ranked_valid_first_then_by_score(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_validate(document, start, end, fill):  # half valid, half not
        return Validation(True, len(fill) % 2 == 0, "python")
    monkeypatch.setattr(ParsedDocument, "validate", fake_validate)
    seen = set()
    for seed in range(3):
        cands = engine.infill(_request("y = ret|\n", seed=seed, candidates=6)).candidates
        assert [_key(c) for c in cands] == sorted(_key(c) for c in cands)
        seen |= {c.valid for c in cands}
    assert seen == {True, False}, "the check needs both kinds of candidate"


def test_candidates_with_real_validation_are_ranked(engine: Engine) -> None:
    cands = engine.infill(_request("def f(a):\n    return |\n", candidates=5)).candidates
    assert all(c.valid in (True, False) for c in cands)
    assert [_key(c) for c in cands] == sorted(_key(c) for c in cands)


def test_an_unknown_language_skips_validation_and_says_so(engine: Engine) -> None:
    result = engine.infill(InfillRequest("x = |\n".replace("|", ""), 4, 4, "cobol",
                                         "file:///a.cbl", InfillOptions(length=3)))
    assert result.candidates[0].valid is None
    assert result.syntax == "not checked: no grammar for language 'cobol'"
    checked = engine.infill(_request("x = |\n", length=3))
    assert checked.syntax.startswith(("no syntax errors", "no new syntax errors", "fill intro"))


def test_unchecked_candidates_have_no_verdict(model_dir: Path) -> None:
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", validate=False))
    cands = eng.infill(_request("y = ret|\n", candidates=3)).candidates
    assert [c.valid for c in cands] == [None] * 3
    assert [c.score for c in cands] == sorted((c.score for c in cands), reverse=True)


# --- errors -------------------------------------------------------------------------------


def test_should_stop_cancels_with_the_sampler_s_cancelled(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                                 context_cache=False))
    forward = []
    real = engine.model.hidden  # without the cache every forward pass starts here
    monkeypatch.setattr(engine.model, "hidden", lambda ids: forward.append(1) or real(ids))
    req = _request("def f():\n    |\n", steps=8)
    polls = itertools.count()
    req.should_stop = lambda: next(polls) >= 2
    with pytest.raises(Cancelled):
        engine.infill(req)
    assert len(forward) == 2


def test_oom_once_fault_fails_the_first_infill_only(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLM_LSP_FAULTS", "oom-once")
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    with pytest.raises(OutOfMemory, match="out of memory"):
        eng.infill(_request("y = ret|\n"))
    assert eng.infill(_request("y = ret|\n")).candidates


def test_oom_fault_fails_every_infill(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLM_LSP_FAULTS", "oom")
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    for _ in range(2):
        with pytest.raises(OutOfMemory):
            eng.infill(_request("y = ret|\n"))


def test_missing_model_directory_raises_model_load_error_naming_the_path(
        tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    eng = Engine(ServerConfig(model=str(missing), device="cpu"))
    with pytest.raises(ModelLoadError) as info:
        eng.infill(_request("y = ret|\n"))
    assert str(missing) in str(info.value)


def test_before_the_model_loads_a_selection_plainly_too_long_is_told_without_loading_it(
        tmp_path: Path) -> None:
    """A code action asked while the model loads (or failed to) is not kept waiting, and a
    selection longer than `maxSpanTokens` at 16 characters a token is told disabled then,
    as the command would refuse it; a shorter one waits for the model's own count."""
    eng = Engine(ServerConfig(model=str(tmp_path / "no-such-model"), device="cpu",
                              max_span_tokens=64))
    told = eng.rewrite_refusal("x = 1\n" * (16 * 64 // 6 + 1))
    assert told is not None and "maxSpanTokens, 64" in told
    assert eng.rewrite_refusal("x = 1\n" * (16 * 64 // 6 - 1)) is None
    assert eng._model is None and eng._failure is None  # nothing was loaded or tried


@contextlib.contextmanager
def _loading(eng: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A load of `eng`'s model under way on another thread through the block (it waits
    for the block to end), and done after it."""
    import dlm_lsp.engine as engine_module

    release, loading = threading.Event(), threading.Event()
    real_load = engine_module.load_model

    def slow_load(*args, **kwargs):
        loading.set()
        assert release.wait(30), "the test never let the load finish"
        return real_load(*args, **kwargs)

    monkeypatch.setattr(engine_module, "load_model", slow_load)
    loader = threading.Thread(target=lambda: eng.model, daemon=True)
    loader.start()
    try:
        assert loading.wait(30)
        yield
    finally:
        release.set()
        loader.join(30)


def _stoppable_fill(eng: Engine, stop: threading.Event) -> tuple[threading.Thread, list[str]]:
    """A fill started on a thread that `stop` stops, and where its outcome is written."""
    outcome: list[str] = []

    def fill() -> None:
        try:
            eng.infill(replace(_request("x = |\n", steps=2), should_stop=stop.is_set))
            outcome.append("filled")
        except Cancelled:
            outcome.append("cancelled")

    thread = threading.Thread(target=fill, daemon=True)
    thread.start()
    return thread, outcome


def test_status_answers_loading_while_the_model_loads_instead_of_waiting_for_it(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """dlm/status is answered on the server's event loop: while a big checkpoint loaded, it
    waited for the load (the same lock), so the whole server stood still, an editor never
    saw "loading", and Neovim's :checkhealth said "no answer to dlm/status in 10 s"."""
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    with _loading(eng, monkeypatch):
        answers: list[dict] = []
        asker = threading.Thread(target=lambda: answers.append(eng.status()), daemon=True)
        asker.start()
        asker.join(5)
        assert answers, "status() waited for the model load"
        assert answers[0]["loaded"] is False and answers[0]["loadError"] is None
        assert answers[0]["loading"] is True  # `status --server` tells it from no load yet
        assert answers[0]["model"] == str(model_dir) and answers[0]["device"] == "cpu"
    assert eng.status()["loaded"] is True and eng.status()["loading"] is False


def test_a_fill_stopped_while_another_runs_alone_ends_at_once(model_dir: Path) -> None:
    """With a context cache (the CPU's default) a fill runs alone, and the next waited
    for the lock: one stopped meanwhile (an edit, a newer request, a cancel) was answered
    only once the other ended, 30 s later for a long rewrite."""
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                              batch_rows=0))
    eng.model  # noqa: B018 -- loaded: the wait below is the pass's alone
    stop = threading.Event()
    with eng._alone:  # another fill's pass, running alone
        waiting, outcome = _stoppable_fill(eng, stop)
        waiting.join(0.3)
        assert waiting.is_alive() and not outcome  # it waits its turn
        stop.set()
        waiting.join(5)
        assert outcome == ["cancelled"], "the stopped fill waited for the other one"
    assert eng.infill(_request("x = |\n", steps=2)).candidates  # the lock was let go


def test_a_fill_stopped_while_the_model_loads_ends_before_the_load(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill that came during a load (minutes for a published checkpoint) waited for all
    of it, however soon it was cancelled; it ends at once, and the load goes on."""
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False))
    with _loading(eng, monkeypatch):
        stop = threading.Event()
        stop.set()  # cancelled as soon as asked
        waiting, outcome = _stoppable_fill(eng, stop)
        waiting.join(5)
        assert outcome == ["cancelled"], "the stopped fill waited for the load"
        assert eng.status()["loading"] is True
    assert eng.status()["loaded"] is True


@pytest.mark.parametrize("cuda", [False, True])
def test_status_before_the_load_names_the_device_the_model_will_load_on(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, cuda: bool) -> None:
    """Editors show `device` as where the model runs (Neovim's :DlmStatus said "(loading)
    on auto"): the setting "auto" is resolved as the load resolves it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    status = Engine(ServerConfig(model=str(model_dir), device="auto")).status()
    assert status["loaded"] is False and status["device"] == ("cuda" if cuda else "cpu")
    assert Engine(ServerConfig(model=str(model_dir), device="cpu")).status()["device"] == "cpu"


def _reconfigure_once_begun(eng: Engine, begun: list, model_dir: Path, what: str) -> None:
    """Once `begun` has an entry (the gated work started), change the settings (to bf16,
    a reload from the tests' fp32) from another thread: reconfigure must return without
    waiting for `what`."""
    import threading

    deadline = time.monotonic() + 30
    while not begun and time.monotonic() < deadline:
        time.sleep(0.01)
    changer = threading.Thread(target=lambda: eng.reconfigure(ServerConfig(
        model=str(model_dir), device="cpu", precision="bf16")), daemon=True)
    changer.start()
    changer.join(5)
    assert not changer.is_alive(), f"reconfigure waited for {what}"


def test_new_settings_during_a_load_do_not_wait_for_it_and_the_load_is_done_again(
        model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reconfigures on its event loop: waiting there for a load stood the whole
    server still until the load ended.  The load begun with the old settings cannot be
    kept (nor its error reported): the model is the one the settings in effect ask for."""
    import threading

    import dlm_lsp.engine as engine_module

    release, loads = threading.Event(), []
    real_load = engine_module.load_model

    def gated_load(spec, device, precision, graphs):
        loads.append((spec, precision))
        assert release.wait(30), "the test never let the load finish"
        return real_load(spec, device, precision, graphs)

    monkeypatch.setattr(engine_module, "load_model", gated_load)
    missing = str(tmp_path / "no-such-model")
    eng = Engine(ServerConfig(model=missing, device="cpu"))
    got: list = []
    loader = threading.Thread(target=lambda: got.append(eng.model), daemon=True)
    loader.start()
    try:
        _reconfigure_once_begun(eng, loads, model_dir, "the model load")
        assert eng.status()["model"] == str(model_dir)
    finally:
        release.set()
        loader.join(30)
    [model] = got  # not the missing model's error: those settings were no longer in effect
    assert (model.name, model.precision) == (str(model_dir), "bf16")
    assert loads == [(missing, "auto"), (str(model_dir), "bf16")]
    assert eng.model is model and eng.status()["loadError"] is None


def test_a_step_cost_timed_on_a_model_the_settings_replaced_is_not_kept_for_the_new_one(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Calibrating no longer holds the lock that reconfigure takes, so the settings can
    change while it runs: its cost is the old model's, and the new model is timed anew."""
    import threading

    import dlm_lsp.engine as engine_module

    release, timed = threading.Event(), []
    real_calibrate = engine_module.calibrate

    def gated_calibrate(model):
        timed.append(model)
        assert release.wait(30), "the test never let the calibration finish"
        return real_calibrate(model, lengths=(8,), repeats=1)

    monkeypatch.setattr(engine_module, "calibrate", gated_calibrate)
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", precision="fp32"))
    old = eng.model
    timer = threading.Thread(target=eng.step_cost, daemon=True)
    timer.start()
    try:
        _reconfigure_once_begun(eng, timed, model_dir, "the calibration")
    finally:
        release.set()
        timer.join(30)
    assert eng.status()["stepMs"] is None  # the old model's cost is not the new one's
    eng.step_cost()
    assert timed == [old, eng.model] and eng.status()["stepMs"] is not None


def test_reconfigure_keeps_the_model_unless_model_or_device_change(
        model_dir: Path, tmp_path: Path) -> None:
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    model = eng.model
    eng.reconfigure(ServerConfig(model=str(model_dir), device="cpu", seed=3))
    assert eng.model is model
    eng.reconfigure(ServerConfig(model=str(tmp_path / "other"), device="cpu"))
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018


@pytest.mark.parametrize("cuda, before, after", [
    (False, "auto", "cpu"), (False, "cpu", "auto"), (True, "auto", "cuda"),
    (True, "cuda", "auto")])
def test_naming_the_device_auto_resolves_to_keeps_the_model_and_its_step_cost(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, cuda_machine: list, cuda: bool,
        before: str, after: str) -> None:
    """"auto" is the GPU where CUDA is, else the CPU: saying which loaded the same model
    again (seconds to minutes for a big checkpoint) and timed its step again."""
    import dlm_lsp.engine as engine_module

    real_calibrate = engine_module.calibrate
    monkeypatch.setattr(engine_module, "calibrate",
                        lambda model: real_calibrate(model, lengths=(8,), repeats=1))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    eng = Engine(ServerConfig(model=str(model_dir), device=before))
    model, cost = eng.model, eng.step_cost()
    assert eng.reconfigure(ServerConfig(model=str(model_dir), device=after)) is False
    assert eng.model is model and eng.step_cost() is cost
    assert eng.status()["stepMs"] is not None and cuda_machine == [(before, True)]


def test_a_device_setting_that_resolves_elsewhere_reloads_the_model(
        model_dir: Path, cuda_machine: list) -> None:
    eng = Engine(ServerConfig(model=str(model_dir), device="auto"))  # the GPU here
    model = eng.model
    assert eng.reconfigure(ServerConfig(model=str(model_dir), device="cpu"))
    assert eng.model is not model and cuda_machine == [("auto", True), ("cpu", True)]


def test_settings_that_place_the_model_alike_during_its_load_keep_what_it_loads(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load whose settings changed meanwhile is thrown away and done again (see the
    test above): not when the new settings load the same model."""
    import threading

    import dlm_lsp.engine as engine_module

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    release, loads = threading.Event(), []
    real_load = engine_module.load_model

    def gated_load(spec, device, precision, graphs):
        loads.append(device)
        assert release.wait(30), "the test never let the load finish"
        return real_load(spec, device, precision, graphs)

    monkeypatch.setattr(engine_module, "load_model", gated_load)
    eng = Engine(ServerConfig(model=str(model_dir), device="auto"))
    got: list = []
    loader = threading.Thread(target=lambda: got.append(eng.model), daemon=True)
    loader.start()
    try:
        deadline = time.monotonic() + 30
        while not loads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not eng.reconfigure(ServerConfig(model=str(model_dir), device="cpu",
                                                cuda_graphs=False))
    finally:
        release.set()
        loader.join(30)
    assert loads == ["auto"] and eng.model is got[0]


def test_a_fill_at_the_start_of_a_code_line_is_a_whole_line_of_its_own(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_denoise(monkeypatch)
    for seed in range(4):
        req = _request("a = 1\n|    b = 2\n", seed=seed, candidates=1)
        fill = engine.infill(req).candidates[0].text
        layout, _ = calls[-1]
        assert engine.model.tokenizer.decode(layout.suffix_ids).startswith("\n    b = 2")
        assert fill == "" or (fill.endswith("\n") and "\n" not in fill[:-1])
        assert (req.text[:req.start] + fill + req.text[req.end:]).endswith("\n    b = 2\n")


@pytest.mark.parametrize("before, suffix, expected", [
    ("a = 1\n", "    b = 2\n", "\n"),
    ("a = 1\r\n", "b = 2\r\n", "\r\n"),
    ("a = 1\n", "\nb = 2\n", ""),  # the next line is empty: already natural
    ("a = 1", "\nb = 2\n", ""),  # the span ends mid-line
    ("a = 1\n", "", ""),  # end of file
])
def test_the_line_break_is_borrowed_only_before_a_non_empty_line(before, suffix, expected):
    assert borrowed_line_break(before, suffix) == expected


def test_refining_whole_lines_keeps_one_line_break_before_the_next_line(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _record_denoise(monkeypatch)
    text = "def f(x):\n    y = x + 1\n    return y\n"
    start, end = text.index("    y"), text.index("    return")
    req = InfillRequest(text, start, end, "python",
                        options=InfillOptions(strength=0.0, steps=2, candidates=1))
    fill = engine.infill(req).candidates[0].text
    layout, _ = calls[-1]
    tok = engine.model.tokenizer
    assert tok.decode(list(layout.init_ids)).count("\n") == 1  # only the head's break
    assert fill == "    y = x + 1\n"  # strength 0 keeps the old code exactly


def test_a_fill_ends_on_the_model_it_began_with_when_the_settings_replace_it(
        model_dir: Path, tmp_path: Path) -> None:
    """New settings may name another model while a fill runs (the editor's
    didChangeConfiguration): the fill's tokens belong to the model it began with, so it
    ends on that model, never decoded or denoised by the new one."""
    from tiny_model import small_tokenizer, write_random_model

    # another vocabulary: the fill's ids would decode to other text
    other = write_random_model(tmp_path / "other", d_model=96, seed=1,
                               tokenizer=small_tokenizer(vocab_size=512))
    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False)
    options = {"length": 12, "steps": 12, "early_stop": False, "stop_when_settled": False}
    expected = Engine(config).infill(_request("x = |\n", **options)).candidates[0].text
    engine = Engine(config)
    request = _request("x = |\n", **options)

    def switch(step: int, steps: int, draft: str) -> None:
        if step == 3:
            engine.reconfigure(ServerConfig(model=str(other), device="cpu", reuse_fills=False))
    request.on_draft = switch
    assert engine.infill(request).candidates[0].text == expected
    assert engine.model.name == str(other)  # the next fill is the new model's


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_a_file_with_other_line_endings_is_filled_as_with_newlines_and_keeps_its_own(
        engine: Engine, ending: str) -> None:
    """The model sees the text with `\n`; the fill's line breaks are the file's."""
    marked = "def f(x):\n    |\n    return x\n"
    options = {"length": 24, "steps": 8}
    plain = engine.infill(_request(marked, **options))
    other = engine.infill(_request(marked.replace("\n", ending), **options))
    assert plain.plan.kind == other.plan.kind == MULTI_LINE
    assert [c.text for c in other.candidates] == [
        c.text.replace("\n", ending) for c in plain.candidates]


@pytest.mark.parametrize("marked", ["|\nx = 1\n", "x = |\n", "def f(x):\n    |\n    return x\n"])
def test_a_file_with_a_byte_order_mark_is_filled_as_without_it(engine: Engine,
                                                                  marked: str) -> None:
    """A U+FEFF at the start of the text (`dlm-lsp fill` keeps a file's) was shown to
    the model and to the length policy, which read a hole alone on the first line as one
    with code before it: a single-line fill where a multi-line one was due."""
    options = {"steps": 8}
    plain = engine.infill(_request(marked, **options))
    marked_bom = engine.infill(_request("\ufeff" + marked, **options))
    assert marked_bom.plan == plain.plan
    assert [c.text for c in marked_bom.candidates] == [c.text for c in plain.candidates]
    assert [c.valid for c in marked_bom.candidates] == [c.valid for c in plain.candidates]


def _hold_passes(model, monkeypatch: pytest.MonkeyPatch):
    """(in_pass, release): the model's forward passes wait for `release`; `in_pass` is
    set once one has begun."""
    import threading

    in_pass, release = threading.Event(), threading.Event()
    real_hidden = model.hidden

    def held_pass(ids: torch.Tensor) -> torch.Tensor:
        in_pass.set()
        assert release.wait(30), "the test never let the pass finish"
        return real_hidden(ids)

    monkeypatch.setattr(model, "hidden", held_pass)
    return in_pass, release


def test_closing_the_engine_does_not_wait_for_the_forward_pass_in_progress(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server closes the engine on its event loop (the backend switched away from
    local).  close() joined the batching worker, which ends only between forward passes,
    for up to 5 s (a 7B model's pass on a CPU can take that long), holding the lock that
    status() and reconfigure() take: the whole server stood still meanwhile.  The worker
    is retired, not waited for: the fill in it ends on its model (it was cancelled, and
    the client told "fill stopped" with no reason), then the worker ends.  A fill of the
    closed engine that comes to denoise later runs alone: it starts no new worker (which
    would keep the model in memory for as long as the process runs)."""
    import threading

    # the batching worker's: a fill with the context cache (on by default on a CPU) runs alone
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                              context_cache=False))
    model = eng.model
    real_hidden = model.hidden
    in_pass, release = _hold_passes(model, monkeypatch)
    outcome: list = []

    def fill() -> None:
        try:
            outcome.append(eng.infill(_request("x = |\n", steps=2, candidates=1)))
        except Cancelled as exc:
            outcome.append(exc)

    filler = threading.Thread(target=fill, daemon=True)
    filler.start()
    try:
        assert in_pass.wait(30)
        worker = eng._batcher._thread
        began = time.monotonic()
        closer = threading.Thread(target=eng.close, daemon=True)
        closer.start()
        closer.join(2)
        assert not closer.is_alive(), "close() waited for the forward pass"
        assert eng.status()["loaded"] and time.monotonic() - began < 2
    finally:
        release.set()
        filler.join(30)
    assert not isinstance(outcome[0], Cancelled), "the fill under way was cancelled"
    assert outcome[0].candidates  # it ended on its model
    worker.join(5)
    assert not worker.is_alive()
    assert eng.batcher(model) is None  # a closed engine starts no new worker
    monkeypatch.setattr(model, "hidden", real_hidden)
    before = set(threading.enumerate())
    assert eng.infill(_request("x = |\n", steps=2, candidates=1)).candidates  # alone
    assert not [t for t in set(threading.enumerate()) - before if t.name == "dlm-batcher"]


def test_a_new_model_s_fill_does_not_wait_for_the_old_model_s_forward_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After settings that reload the model, the first fill of the new model replaces the
    old model's batching worker.  It joined the old worker (up to 5 s, for the old pass
    in progress) holding `_lock`: that fill, and status() on the event loop, waited."""
    import threading

    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                              precision="fp32", context_cache=False))  # batched, uncached
    old = eng.model
    in_pass, release = _hold_passes(old, monkeypatch)

    old_fill = []

    def fill() -> None:
        old_fill.append(eng.infill(_request("x = |\n", steps=2, candidates=1)))

    filler = threading.Thread(target=fill, daemon=True)
    filler.start()
    try:
        assert in_pass.wait(30)
        eng.reconfigure(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                                     precision="bf16", context_cache=False))
        assert eng.model is not old
        began = time.monotonic()
        assert eng.infill(_request("y = |\n", steps=2, candidates=1)).candidates
        assert eng.status()["loaded"]
        assert time.monotonic() - began < 2, "the new model's fill waited for the old pass"
    finally:
        release.set()
        filler.join(30)
    # ... and the fill that began on the old model ends on it, not cancelled
    assert old_fill and old_fill[0].candidates


def test_batch_rows_set_to_0_ends_the_batching_worker_and_fills_run_alone(
        model_dir: Path) -> None:
    """batchRows 0 means each request alone (README's settings table).  Set at run time,
    the fills ran alone but the worker that served them so far was left waiting for a
    fill that never came, a thread kept for as long as the process ran (and counted in
    `dlm/status`).  New settings of 0 retire it: it ends once its fills are done."""
    import threading

    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                          context_cache=False)  # batched: the cache's fills run alone
    eng = Engine(config)
    shared = eng.infill(_request("x = |\n", steps=2, candidates=1))
    assert shared.candidates
    worker = eng._batcher._thread
    eng.reconfigure(replace(config, batch_rows=0))
    worker.join(5)
    assert not worker.is_alive(), "the batching worker outlived batchRows 0"
    before = set(threading.enumerate())
    alone = eng.infill(_request("y = |\n", steps=2, candidates=1))
    assert alone.candidates
    assert not [t for t in set(threading.enumerate()) - before if t.name == "dlm-batcher"]
    # the passes it ran alone are counted (they were not: a server of batchRows 0 said 0),
    # and so are the retired worker's: the count never goes back (the remote service
    # exports it as a counter; new settings took the worker's passes out of it)
    assert eng.status()["forwardPasses"] == shared.steps + alone.steps
    assert shared.steps > 0 and alone.steps > 0


def test_status_shows_the_padded_passes_and_the_fills_that_ran_in_them(model_dir: Path) -> None:
    """Beside the batching worker's passes and occupancy: how often batchPadding shared a
    pass between rows of different lengths, and how many fills it reached."""
    from types import SimpleNamespace

    from dlm_lsp.serving import BatchStats

    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    eng._batcher = SimpleNamespace(stats=BatchStats(passes=9, rows=12, padded=3, padded_fills=5),
                                   depth=0)
    status = eng.status()
    assert (status["forwardPasses"], status["paddedPasses"], status["paddedFills"]) == (9, 3, 5)


def test_status_shows_the_load_factor_that_scales_step_budgets(model_dir: Path) -> None:
    """Passes measured at twice their predicted time (another job on the cores): the
    factor shows, 1 before any pass is measured."""
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    assert eng.status()["loadFactor"] == 1.0
    for _ in range(4):
        eng.load_factor.note(20.0, 10.0)
    assert eng.status()["loadFactor"] == 2.0


def test_a_new_calibration_forgets_the_passes_timed_against_the_old_one(
        model_dir: Path) -> None:
    """Their ratios were to the cost model replaced (new settings loaded another model,
    or the model moved to the CPU after running out of memory)."""
    eng = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    for _ in range(4):
        eng.load_factor.note(30.0, 10.0)
    eng.step_cost()
    assert eng.load_factor.value == 1.0


def test_batch_padding_is_off_by_default_and_the_setting_reaches_the_batching_worker(
        model_dir: Path) -> None:
    """Padded, a fill's tokens could depend on what it shared a pass with, so rows of
    different lengths share one only when batchPadding says so, also set at run time."""
    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False)
    eng = Engine(config)
    assert eng.infill(_request("x = |\n", steps=2, candidates=1)).candidates
    assert not eng.batcher().pads
    eng.reconfigure(replace(config, batch_padding=True))
    assert eng.batcher().pads


def test_settings_that_reload_the_model_end_the_old_model_s_batching_worker(
        model_dir: Path) -> None:
    """The old model's worker was replaced only at the new model's first fill, after that
    fill had loaded the new model: until then the worker kept the old model (for good,
    were no fill to come), and both were in memory while the new one loaded (a device
    with room for one ran out of memory).  Settings that reload the model retire its
    worker at once: it ends once its fills are done."""
    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                          precision="fp32", context_cache=False)  # batched, uncached
    eng = Engine(config)
    shared = eng.infill(_request("x = |\n", steps=2, candidates=1))
    assert shared.candidates
    worker = eng._batcher._thread
    assert eng.reconfigure(replace(config, precision="bf16"))
    worker.join(5)
    assert not worker.is_alive(), "the old model's worker outlived the new settings"


@pytest.mark.parametrize("how", ["closed", "replaced"])
def test_a_fill_whose_worker_ends_before_it_takes_the_fill_goes_on_alone(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """The engine hands a fill its model's batching worker, and the fill gives it its
    steps a moment later: in between, the engine may close (the backend switched away
    from local) or new settings' first fill may retire the worker, which, having no fill
    of its own, ends.  The fill then failed with RuntimeError 'the batching worker is
    closed', an internal error to the client.  It goes on alone on the model it began
    with (see Engine.close and Engine.batcher), with the fill it would have had."""
    config = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                          precision="fp32", context_cache=False)  # batched, uncached
    options = {"length": 6, "steps": 3, "candidates": 2}
    expected = [c.text for c in Engine(config).infill(_request("x = |\n", **options)).candidates]
    eng = Engine(config)
    hand_out, handed = eng.batcher, []

    def worker_ends_once_handed_out(model=None):
        worker = hand_out(model)
        if worker is not None and not handed:
            handed.append(worker)
            if how == "closed":
                eng.close()
            else:  # the new model's first fill retires the old model's worker
                eng.reconfigure(replace(config, precision="bf16"))
                assert hand_out() is not worker
            worker._thread.join(5)
            assert not worker._thread.is_alive()
        return worker

    monkeypatch.setattr(eng, "batcher", worker_ends_once_handed_out)
    result = eng.infill(_request("x = |\n", **options))
    assert handed, "the fill was never handed a worker"
    assert [c.text for c in result.candidates] == expected


@pytest.mark.parametrize("end", [False, True])
def test_a_fill_is_ended_only_where_the_model_wrote_a_pad_before_its_span_ended(
        model_dir: Path, end: bool) -> None:
    """A fill at `ret|` (its head ` ret` takes span positions) that writes `x` in every
    position was cut short by its span, and `ended` says so (offers.py continues it once
    accepted): `used` is no sign of it where the head's chain took more positions than
    the span's length counts.  Here the chain's ` return` writes `urn` too, the fill's."""
    from fakes import FakeModel

    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                              validate=False))
    tok = eng.model.tokenizer
    fake = FakeModel(tok)

    def make(ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[..., tok.encode("x")[0]] = 10.0
        logits[..., fake.pad_id] = 20.0 if end else 0.0  # the fill's end, at once
        return logits
    fake._make = make
    eng._model = fake
    result = eng.infill(_request("y = ret|\n", length=4, steps=4))
    best = result.candidates[0]
    assert best.ended is end and best.text.startswith("urn")
    assert best.used == (1 if end else result.tokens)  # ` return`, then `x` to the end


def test_a_partial_rewrite_keeps_every_token_that_holds_the_head(model_dir: Path) -> None:
    """`return x` after 8 spaces: the head `\\n        ` is one token alone, but before
    `return` its last space joins ` return`, which was taken for old code and masked;
    written again without the space, the fill no longer started with the head and came
    back empty."""
    from fakes import FakeModel

    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                              validate=False))
    tok = eng.model.tokenizer

    def make(ids: torch.Tensor) -> torch.Tensor:  # `y` everywhere: no space before it
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[..., tok.encode("y")[0]] = 10.0
        return logits
    eng._model = FakeModel(tok, make)
    text = "def f(x):\n    if x:\n        return x\n"
    start = text.index("return")
    result = eng.infill(InfillRequest(text, start, start + len("return x"), "python",
                                      options=InfillOptions(strength=0.9, steps=4,
                                                            repair_rounds=0, fallback=False)))
    assert result.candidates[0].text.startswith("return")


def test_a_rewrite_at_strength_one_keeps_nothing_of_the_old_code(model_dir: Path) -> None:
    """The token that holds the head (` `) and the old code's start (` f` of `foo`) was
    kept as the head's, so `foo(a, b)` rewritten whole still began with `f`."""
    from fakes import FakeModel

    eng = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                              validate=False))
    tok = eng.model.tokenizer

    def make(ids: torch.Tensor) -> torch.Tensor:  # the head as ` `, then `y` everywhere
        logits = torch.zeros(*ids.shape, tok.vocab_size)
        logits[..., tok.encode("y")[0]] = 10.0
        logits[..., tok.encode(" ")[0]] = 5.0
        return logits
    eng._model = FakeModel(tok, make)
    text = "x = foo(a, b)\n"
    result = eng.infill(InfillRequest(text, 4, 4 + len("foo(a, b)"), "python",
                                      options=InfillOptions(strength=1.0, steps=4,
                                                            repair_rounds=0, fallback=False)))
    assert set(result.candidates[0].text) == {"y"}


def _failing_loads(monkeypatch: pytest.MonkeyPatch, clock: list[float]) -> list[str]:
    """Make every model load fail (as a checkpoint too big for memory does), count the
    loads, and run the engine's clock from `clock[0]` (moved by the test)."""
    import dlm_lsp.engine as engine_module

    loads: list[str] = []

    def failing_load(spec, device, precision, graphs):
        loads.append(spec)
        raise ModelLoadError(f"could not load {spec}: out of memory")

    monkeypatch.setattr(engine_module, "load_model", failing_load)
    monkeypatch.setattr(engine_module, "_clock", lambda: clock[0])
    return loads


def test_a_model_that_failed_to_load_is_not_loaded_again_at_every_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every typing pause asks for ghost text: a checkpoint whose load ran out of memory
    was read again (gigabytes, seconds) and failed again at each one.  Requests with the
    same settings now fail at once with the same error until the retry is due, and the
    wait grows with each failure."""
    clock = [1000.0]
    loads = _failing_loads(monkeypatch, clock)
    eng = Engine(ServerConfig(model="big-model", device="cpu"))
    errors = []
    for _ in range(5):
        with pytest.raises(ModelLoadError) as failed:
            eng.model  # noqa: B018
        errors.append(str(failed.value))
    assert loads == ["big-model"] and set(errors) == {"could not load big-model: out of memory"}
    status = eng.status()
    assert status["loadError"] == errors[0] and status["loadRetryS"] == LOAD_RETRY_S
    clock[0] += LOAD_RETRY_S  # due: tried again, fails, and waits twice as long
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    assert len(loads) == 2 and eng.status()["loadRetryS"] == 2 * LOAD_RETRY_S
    clock[0] += 2 * LOAD_RETRY_S - 0.5
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    assert len(loads) == 2 and eng.status()["loadRetryS"] == 0.5


def test_the_wait_before_a_failed_load_is_tried_again_is_capped_and_at_least_the_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait doubles up to LOAD_RETRY_CAP_S; a load that took longer than the wait to
    fail waits as long as it took, so failing loads take at most half the server's time."""
    clock = [1000.0]
    _failing_loads(monkeypatch, clock)
    eng = Engine(ServerConfig(model="big-model", device="cpu"))
    waits = []
    for _ in range(8):
        with pytest.raises(ModelLoadError):
            eng.model  # noqa: B018
        waits.append(eng.status()["loadRetryS"])
        clock[0] += waits[-1]
    assert waits[0] == LOAD_RETRY_S and max(waits) == waits[-1] == LOAD_RETRY_CAP_S
    assert all(b == min(2 * a, LOAD_RETRY_CAP_S) for a, b in zip(waits, waits[1:], strict=False))
    import dlm_lsp.engine as engine_module

    def slow_failing_load(spec, device, precision, graphs):
        clock[0] += 300.0  # a huge checkpoint read for five minutes, then refused
        raise ModelLoadError("could not load huge-model: out of memory")

    monkeypatch.setattr(engine_module, "load_model", slow_failing_load)
    eng = Engine(ServerConfig(model="huge-model", device="cpu"))
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    assert eng.status()["loadRetryS"] == 300.0


def test_new_settings_after_a_failed_load_load_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait is for the settings that failed: a model setting changed (the user's fix)
    is loaded at the next request, and going back to the failed one tries it afresh."""
    clock = [1000.0]
    loads = _failing_loads(monkeypatch, clock)
    eng = Engine(ServerConfig(model="big-model", device="cpu"))
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    assert eng.reconfigure(ServerConfig(model="other-model", device="cpu"))
    assert eng.status()["loadError"] is None and eng.status()["loadRetryS"] is None
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    eng.reconfigure(ServerConfig(model="big-model", device="cpu"))
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    assert loads == ["big-model", "other-model", "big-model"]
    assert eng.status()["loadRetryS"] == LOAD_RETRY_S  # afresh: the first wait again


def test_a_retry_asked_for_loads_at_once_and_a_failure_then_waits_longer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`dlm/retryLoad`: the user mended the checkpoint, or freed memory, and asks for the
    model now, within the wait.  The load is tried at once; failing again, it waits as a
    further failure does (twice as long), not the first wait again."""
    clock = [1000.0]
    loads = _failing_loads(monkeypatch, clock)
    eng = Engine(ServerConfig(model="big-model", device="cpu"))
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    eng.retry_load()
    assert eng.status()["loadRetryS"] == 0  # due: said as "at the next request"
    with pytest.raises(ModelLoadError):
        eng.model  # noqa: B018
    assert len(loads) == 2 and eng.status()["loadRetryS"] == 2 * LOAD_RETRY_S


def test_requests_within_the_wait_each_raise_their_own_copy_of_the_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests run on several threads; raising the one recorded error object in each gave
    one request's traceback to another's log.  Each gets an error of the same type and
    message, its own."""
    clock = [1000.0]
    _failing_loads(monkeypatch, clock)
    eng = Engine(ServerConfig(model="big-model", device="cpu"))
    raised = []
    for _ in range(3):
        with pytest.raises(ModelLoadError) as failed:
            eng.model  # noqa: B018
        raised.append(failed.value)
    assert raised[1] is not raised[2] and raised[1] is not eng._failure
    assert {(type(e), str(e)) for e in raised} == {(ModelLoadError, str(raised[0]))}


def test_a_load_refused_for_want_of_cuda_is_told_as_such_within_the_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The error raised again is the load's own, of its own kind: `dlm-lsp` commands word
    a DeviceUnavailable for their `--device` flag (`command_line_message`)."""
    from dlm_lsp.models import DeviceUnavailable

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    eng = Engine(ServerConfig(device="cuda"))
    raised = []
    for _ in range(2):
        with pytest.raises(DeviceUnavailable) as failed:
            eng.model  # noqa: B018
        raised.append(failed.value)
    assert raised[1].device == "cuda" and str(raised[1]) == str(raised[0])


@pytest.mark.parametrize("target", ["latency_ms", "latency_ms_rewrite"])
def test_with_a_latency_target_the_steps_are_timed_at_preload_not_in_the_first_fill(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """The first fill with a target took the timing's seconds into its own (3.5 s against
    a 200 ms target)."""
    import dlm_lsp.engine as engine_module

    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", **{target: 200}))
    assert engine.preload().endswith(", its steps timed")
    monkeypatch.setattr(engine_module, "calibrate",
                        lambda model: pytest.fail("timed again in the fill"))
    engine.infill(InfillRequest("def f(x):\n    return \n", 21, 21, "python"))


def test_without_a_latency_target_preload_times_nothing(model_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import dlm_lsp.engine as engine_module

    monkeypatch.setattr(engine_module, "calibrate",
                        lambda model: pytest.fail("timed with no target to meet"))
    assert Engine(ServerConfig(model=str(model_dir), device="cpu")).preload().endswith(" cpu")
