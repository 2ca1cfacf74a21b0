"""Specification: a fill never writes U+FFFD made of bytes that make no character, nor a
control character the model was not shown.

A byte-level BPE has tokens that are single bytes of a multi-byte character, and
a diffusion model commits positions in parallel: a span can end up holding a lead
byte with nothing after it, or a continuation byte with nothing before it.  The
tokenizers library decodes those to U+FFFD, which an editor would write into the
user's file.  Such bytes are left out of the text, and the positions holding them
are written again by repair while its rounds last.  A U+FFFD that is its own three
bytes (text the user has) is a character like any other and is kept.

A control character (`\x10`, `\x1d`: random tiny models write them), a bidirectional
control or an invisible character (a zero width space) is left out and written again the
same way, unless it is a tab, a line feed, or one the document around the span holds (a
form feed between pages, the zero width non-joiner of Persian text).  Only what the fill
shows counts: a broken byte past a single-line fill's line break is never written into
the file, and is not worth a repair round.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fakes import Planted
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models

import dlm_lsp.passes as passes_module
from dlm_lsp.characters import BIDI, CONTROLS, INVISIBLE, left_out
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.results import InfillResult
from dlm_lsp.span import build_layout, head_chain

REPLACEMENT = "\ufffd"


@pytest.fixture
def engine(model_dir: Path) -> Engine:
    return Engine(ServerConfig(model=str(model_dir), device="cpu"))


def byte_token(tok: Tokenizer, byte: int) -> int:
    """The id of the token that is the one byte `byte`."""
    return tok.token_bytes.index(bytes([byte]))


# --- the tokenizer: text without broken bytes ------------------------------------------------


def test_a_lone_lead_byte_is_left_out_of_the_text_and_named_broken(engine: Engine) -> None:
    tok = engine.model.tokenizer
    ids = tok.encode("x = ") + [byte_token(tok, 0xE4)] + tok.encode("y")
    assert tok.backend.decode(ids) == f"x = {REPLACEMENT}y"  # what the library writes
    assert tok.decode(ids) == "x = y"
    assert tok.broken(ids) == [len(ids) - 2]


def test_a_continuation_byte_without_its_lead_is_left_out(engine: Engine) -> None:
    tok = engine.model.tokenizer
    ids = tok.encode("first") + [byte_token(tok, 0xBF)] * 3
    assert tok.decode(ids) == "first"
    assert tok.broken(ids) == [len(ids) - 3, len(ids) - 2, len(ids) - 1]


def test_a_character_spelled_in_byte_tokens_is_whole(engine: Engine) -> None:
    tok = engine.model.tokenizer
    ids = tok.encode("x = ") + [byte_token(tok, b) for b in "中".encode()]
    assert (tok.decode(ids), tok.broken(ids)) == ("x = 中", [])


def test_a_u_fffd_of_the_text_s_own_three_bytes_is_kept(engine: Engine) -> None:
    tok = engine.model.tokenizer
    text = f's.replace("{REPLACEMENT}", "")'
    ids = tok.encode(text)
    assert (tok.decode(ids), tok.broken(ids)) == (text, [])


def test_only_the_broken_bytes_of_a_token_are_left_out() -> None:
    """The shipped tokenizer has a token of a space and two bytes of `—`: the space stays."""
    from dlm_lsp.models import DEFAULT_MODEL_DIR
    tok = Tokenizer.from_file(DEFAULT_MODEL_DIR / "tokenizer.json")
    space_and_two_bytes = tok.token_bytes.index(" —".encode()[:3])
    ids = tok.encode("a") + [space_and_two_bytes] + tok.encode("b")
    assert (tok.decode(ids), tok.broken(ids)) == ("a b", [1])
    assert tok.decode(ids[:2] + [byte_token(tok, "—".encode()[2])]) == "a —"


def test_a_byte_fallback_tokenizer_s_broken_bytes_are_left_out_too() -> None:
    """LLaMA 2 style: characters the vocabulary lacks are `<0xNN>` byte tokens."""
    vocab = {"<unk>": 0, "a": 1, **{f"<0x{b:02X}>": 2 + b for b in range(256)}}
    backend = Backend(models.BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    backend.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tok = Tokenizer(backend)
    e4, b8, ad = (2 + b for b in "中".encode())
    assert (tok.decode([1, e4, b8, ad, 1]), tok.broken([1, e4, b8, ad, 1])) == ("a中a", [])
    assert tok.backend.decode([1, e4, 1]) == f"a{REPLACEMENT}a"
    assert (tok.decode([1, e4, 1]), tok.broken([1, e4, 1])) == ("aa", [1])
    ef, bf, bd = (2 + b for b in REPLACEMENT.encode())
    assert tok.decode([ef, bf, bd]) == REPLACEMENT


@pytest.mark.parametrize("head", [f'"{REPLACEMENT}', f'"{REPLACEMENT}"'])
def test_the_head_s_u_fffd_is_never_spelled_by_a_lone_byte(engine: Engine, head: str) -> None:
    """A lone byte decodes to U+FFFD on its own; it must not pass for the one the
    prefix's edge holds, or the fill would begin with a broken byte."""
    tok = engine.model.tokenizer
    chain = head_chain(tok, head)
    for done in range(len(head)):
        for i in chain.allowed(done, 8):
            assert tok.broken([i]) == [], tok.token_bytes[i]


def test_a_control_character_is_left_out_as_a_broken_byte_is(engine: Engine) -> None:
    tok = engine.model.tokenizer
    ids = tok.encode("x = ") + [byte_token(tok, 0x10)] + tok.encode("y")
    assert tok.decode(ids) == "x = \x10y", "left out only when asked"
    assert (tok.decode(ids, CONTROLS), tok.broken(ids, CONTROLS)) == ("x = y", [len(ids) - 2])


def test_tabs_and_line_feeds_are_never_left_out(engine: Engine) -> None:
    tok = engine.model.tokenizer
    ids = tok.encode("if x:\n\treturn 1\n")
    assert (tok.decode(ids, CONTROLS), tok.broken(ids, CONTROLS)) == ("if x:\n\treturn 1\n", [])


def test_a_c1_control_spelled_in_two_byte_tokens_is_left_out(engine: Engine) -> None:
    """U+0085 is two bytes (C2 85): each byte token holds part of it."""
    tok = engine.model.tokenizer
    ids = tok.encode("a") + [byte_token(tok, b) for b in "\x85".encode()] + tok.encode("b")
    assert (tok.decode(ids, CONTROLS), tok.broken(ids, CONTROLS)) == ("ab", [1, 2])


def test_a_control_character_the_model_was_shown_is_not_left_out() -> None:
    """A form feed between a file's pages may be written again where the file has them;
    a carriage return never is (the model sees `\\n` line breaks only)."""
    seen = "int f(void);\n\x0c\nint g(void);\n"
    assert "\x0c" not in left_out(seen)
    assert {"\x00", "\x10", "\x1b", "\r", "\x7f", "\x85"} <= left_out(seen)
    assert {"\t", "\n"}.isdisjoint(left_out(seen))


def test_a_bidirectional_control_is_left_out_unless_the_model_was_shown_one() -> None:
    """A right-to-left override makes a line display other than it compiles (Trojan
    Source); a file holding Hebrew text in a string with its own marks may get them."""
    assert {"\u202e", "\u2066", "\u2069", "\u200f", "\u061c"} <= left_out("x = 1\n")
    hebrew = 's = "\u202b\u05e9\u05dc\u05d5\u05dd\u202c"\n'
    assert {"\u202b", "\u202c"}.isdisjoint(left_out(hebrew))
    assert "\u202e" in left_out(hebrew), "only the ones it holds"
    assert BIDI.isdisjoint(CONTROLS) and "\u05e9" not in left_out("")


def test_an_invisible_character_is_left_out_unless_the_model_was_shown_one() -> None:
    """A zero width space, a word joiner, a soft hyphen, a Hangul filler (a letter: it
    makes an identifier in JavaScript) draw nothing: code that reads right and is not."""
    invisible = {"\u200b", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u3164", "\ufe0f",
                 "\u200c", "\u200d"}
    assert invisible <= left_out("x = 1\n")
    assert INVISIBLE.isdisjoint(BIDI | CONTROLS)


def test_a_byte_order_mark_opening_the_file_does_not_count_as_shown() -> None:
    """Some clients send a file's leading BOM with its text: that marks the encoding, and a
    U+FEFF written mid-code is still invisible; one inside the text counts as shown."""
    assert "\ufeff" in left_out("\ufeffx = 1\n")
    assert "\ufeff" not in left_out('x = "\ufeff"\n')


@pytest.mark.parametrize("text, joiner", [
    ('label = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"\n', "\u200c"),  # Persian
    ('family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"\n', "\u200d"),  # one emoji
], ids=["ZWNJ in Persian", "ZWJ in an emoji"])
def test_a_joiner_the_document_holds_in_its_text_may_be_written_again(
        text: str, joiner: str) -> None:
    """ZWNJ and ZWJ are text too: a file whose strings hold them may get more; a file
    that holds none gets none, and the other joiner only where it holds that one."""
    assert joiner not in left_out(text)
    assert ({"\u200c", "\u200d"} - {joiner}) <= left_out(text)
    assert "\u200b" in left_out(text), "only the ones it holds"


def _run(engine: Engine, request: InfillRequest) -> passes_module.InfillRun:
    """An infill run of `request` on its own layout, its fills unchecked."""
    prefix, suffix = request.text[:request.start], request.text[request.end:]
    layout = build_layout(engine.model.tokenizer, prefix, suffix, request.options.length,
                          engine.config.max_context_tokens)
    return passes_module.InfillRun(engine, engine.model, request, None, layout, "",
                                   "unchecked", None, None)


def test_a_draft_shows_a_character_split_over_tokens_whole(engine: Engine) -> None:
    tok, model = engine.model.tokenizer, engine.model
    run = _run(engine, _request('s = "|"\n', length=6))
    ids = [byte_token(tok, b) for b in "é".encode()] + [model.mask_id, byte_token(tok, 0xE4),
                                                      model.mask_id, model.pad_id]
    masked = passes_module.MASK_PLACEHOLDER
    assert run.draft(ids, "") == f"é{masked}{masked}", "the lone 0xE4 shows nothing"


def test_a_draft_leaves_out_control_characters(engine: Engine) -> None:
    tok, model = engine.model.tokenizer, engine.model
    run = _run(engine, _request('s = "|"\n', length=6))
    ids = tok.encode("a") + [byte_token(tok, 0x1D), model.mask_id] + tok.encode("b")
    assert run.draft(ids, "") == f"a{passes_module.MASK_PLACEHOLDER}b"


# --- the engine: broken bytes are written again, then left out -----------------------------


def _request(doc: str, language: str = "python", **options) -> InfillRequest:
    options = {"length": 8, "steps": 4, **options}
    at = doc.index("|")
    return InfillRequest(doc.replace("|", ""), at, at, language, None, InfillOptions(**options))


def _plant(engine: Engine, request: InfillRequest, first: list[int],
           again: list[int]) -> Planted:
    """A model that writes the fill ids `first` (after the head's) until a repair run
    starts, then `again`."""
    planted = Planted(engine, request)
    planted.targets = {False: planted.spelled(first), True: planted.spelled(again)}
    return planted


def _spy_repairs(monkeypatch: pytest.MonkeyPatch, planted: Planted) -> list[list[int]]:
    """The masked positions of each repair run; the model writes `again` from the first."""
    runs: list[list[int]] = []
    real = passes_module.denoise

    def spy(model, layout, cfg, seed, *args):
        if layout.init_ids is not None:
            runs.append([i for i, t in enumerate(layout.init_ids) if t == model.mask_id])
            planted.fixed = True
        return real(model, layout, cfg, seed, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    return runs


@pytest.mark.parametrize("language", ["python", "plaintext"])
def test_broken_bytes_are_written_again_by_a_repair_round(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, language: str) -> None:
    """With a grammar or without one: bytes that make no character are not the fill's
    text, whatever the syntax check says of the rest."""
    tok = engine.model.tokenizer
    request = _request('s = "|"\n', language)
    first = tok.encode("first") + [byte_token(tok, 0xBF)] * 3
    planted = _plant(engine, request, first, tok.encode("first é"))
    runs = _spy_repairs(monkeypatch, planted)
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, best.path, best.broken) == ("first é", REPAIR, ())
    assert result.repair_rounds == 1
    at = len(planted.head_ids) + len(tok.encode("first"))  # the first broken byte's position
    broken = [at, at + 1, at + 2]
    assert runs == [list(range(broken[0] - 2, broken[-1] + 3))], "the broken bytes, a margin"


def test_still_broken_after_the_repair_rounds_the_bytes_are_left_out(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = engine.model.tokenizer
    request = _request('s = "|"\n', repair_rounds=2)
    first = tok.encode("first") + [byte_token(tok, 0xBF)] * 3
    planted = _plant(engine, request, first, tok.encode("first") + [byte_token(tok, 0xE4)])
    runs = _spy_repairs(monkeypatch, planted)
    result = engine.infill(request)
    [best] = result.candidates
    assert REPLACEMENT not in best.text
    assert best.text == "first" and best.broken and best.valid
    assert len(runs) == result.repair_rounds == 2


def test_with_repair_off_broken_bytes_are_left_out_at_once(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = engine.model.tokenizer
    request = _request('s = "|"\n', repair_rounds=0)
    first = tok.encode("first") + [byte_token(tok, 0xBF)] * 3
    runs = _spy_repairs(monkeypatch, _plant(engine, request, first, tok.encode("x")))
    result = engine.infill(request)
    assert (result.candidates[0].text, result.path, runs) == ("first", DIFFUSION, [])


def test_a_u_fffd_the_fill_copies_from_the_document_is_kept(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = engine.model.tokenizer
    request = _request(f'BAD = "{REPLACEMENT}"\ns = "|"\n')
    planted = _plant(engine, request, tok.encode(f"x{REPLACEMENT}"), tok.encode("y"))
    runs = _spy_repairs(monkeypatch, planted)
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, best.broken, best.path, runs) == (f"x{REPLACEMENT}", (), DIFFUSION, [])


def test_of_two_valid_fills_the_one_with_broken_bytes_ranks_last(
        engine: Engine) -> None:
    """A candidate that lost characters is worse than a whole one the syntax check
    accepts as well (the two score the same here: the whole one used to come second)."""
    tok = engine.model.tokenizer
    request = _request('s = "|"\n', candidates=2, temperature=1.0, repair_rounds=0)
    planted = Planted(engine, request)
    rows = [planted.spelled(tok.encode("first") + [byte_token(tok, 0xBF)]),
            planted.spelled(tok.encode("first"))]

    def logits(ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(*ids.shape, planted.fake.vocab)
        for row, target in enumerate(rows):
            for i, token in enumerate(target):
                out[row, planted.start + i, token] = 10.0
        return out
    planted.fake._make = logits
    result = engine.infill(request)
    assert [(c.text, bool(c.broken)) for c in result.candidates] == [
        ("first", False), ("first", True)]


# --- control characters: written again, then left out; a document's own are kept ---------


@pytest.mark.parametrize("language", ["python", "plaintext"])
@pytest.mark.parametrize("control", ["\x10", "\u202e", "\u200b"],
                         ids=["C0", "right-to-left override", "zero width space"])
def test_a_control_character_is_written_again_by_a_repair_round(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, language: str, control: str) -> None:
    """A bidirectional override (Trojan Source) or a zero width space is three byte
    tokens here, a C0 control one."""
    tok = engine.model.tokenizer
    request = _request('s = "|"\n', language)
    spelled = [byte_token(tok, b) for b in control.encode()]
    first = tok.encode("first") + spelled + tok.encode("x")
    planted = _plant(engine, request, first, tok.encode("first x"))
    runs = _spy_repairs(monkeypatch, planted)
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, best.path, best.broken, result.repair_rounds) == (
        "first x", REPAIR, (), 1)
    at = len(planted.head_ids) + len(tok.encode("first"))  # the control's first position
    assert runs == [list(range(at - 2, at + len(spelled) + 2))], "it, a margin either side"


def test_with_repair_off_a_control_character_is_left_out_at_once(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    tok = engine.model.tokenizer
    request = _request('s = "|"\n', repair_rounds=0)
    first = tok.encode("first") + [byte_token(tok, 0x1D)] + tok.encode("x")
    runs = _spy_repairs(monkeypatch, _plant(engine, request, first, tok.encode("y")))
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, bool(best.broken), result.path, runs) == ("firstx", True, DIFFUSION, [])


@pytest.mark.parametrize("char", ["\x0c", "\u200c"], ids=["form feed", "ZWNJ"])
def test_a_control_character_the_document_holds_beside_the_span_is_written(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, char: str) -> None:
    """A form feed, as between a file's pages, or the zero width non-joiner of a Persian
    string: the fill may go on with the file's own."""
    tok = engine.model.tokenizer
    request = _request(f'PAGE = "{char}"\ns = "|"\n')
    fill = tok.encode("a") + [byte_token(tok, b) for b in char.encode()] + tok.encode("b")
    runs = _spy_repairs(monkeypatch, _plant(engine, request, fill, tok.encode("y")))
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, best.broken, best.path, runs) == (f"a{char}b", (), DIFFUSION, [])


# --- only what the fill shows counts ---------------------------------------------------------


def _passes(engine: Engine, request: InfillRequest, fill: list[int],
            monkeypatch: pytest.MonkeyPatch) -> tuple[InfillResult, list[list[int]], Planted]:
    """The result of a fill the model writes as `fill` ("again" in a repair run), its
    repair runs, and the model (its forward passes: `.fake.calls`)."""
    planted = _plant(engine, request, fill, engine.model.tokenizer.encode("again"))
    with monkeypatch.context() as patch:
        runs = _spy_repairs(patch, planted)
        result = engine.infill(request)
    if not runs:
        assert result.candidates[0].ids == planted.spelled(fill), "the model wrote `fill`"
    return result, runs, planted


@pytest.mark.parametrize("flaw", [[0xBF], [0xE4], [0x10]], ids=["continuation", "lead", "control"])
def test_a_flaw_past_a_single_line_fill_s_line_break_costs_no_repair_round(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, flaw: list[int]) -> None:
    """The fill is cut at its line break: what the model wrote after it is never shown,
    and the fill costs the passes it costs without the flaw."""
    tok = engine.model.tokenizer
    request = _request("first = 1\nx = |\n", kind="single-line")
    whole = tok.encode("first\n") + tok.encode("y") * (1 + len(flaw))
    flawed = tok.encode("first\n") + [byte_token(tok, b) for b in flaw] + tok.encode("y")
    _, _, without_flaw = _passes(engine, request, whole, monkeypatch)
    result, runs, planted = _passes(engine, request, flawed, monkeypatch)
    [best] = result.candidates
    assert (best.text, best.broken, best.path, runs) == ("first", (), DIFFUSION, [])
    assert (result.repair_rounds, planted.fake.calls) == (0, without_flaw.fake.calls)


def test_a_flaw_before_a_single_line_fill_s_line_break_is_written_again(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lone byte just before the break writes nothing, but where the fill shows text."""
    tok = engine.model.tokenizer
    request = _request("first = 1\nx = |\n", kind="single-line")
    result, runs, planted = _passes(engine, request, tok.encode("first") + [
        byte_token(tok, 0xE4)] + tok.encode("\ny"), monkeypatch)
    at = len(planted.head_ids) + len(tok.encode("first"))  # the lone byte's position
    assert (result.repair_rounds, len(runs)) == (1, 1) and at in runs[0]


def test_a_flaw_in_code_a_multi_line_fill_cuts_off_costs_no_repair_round(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """A multi-line fill ends with the block it was asked for (the suffix closes it): code
    the model went on to write after it is cut off, whatever it holds."""
    tok = engine.model.tokenizer
    request = _request("function f() {\n  |\n}\n", "javascript", kind="multi-line",
                       length=16)
    tail = tok.encode("foo(1);\n")
    flawed = tok.encode("return 1;\n}\n") + [byte_token(tok, 0xBF)] + tail
    _, _, without_flaw = _passes(engine, request, tok.encode("return 1;\n}\n") + tail
                                 + tail[-1:], monkeypatch)
    result, runs, planted = _passes(engine, request, flawed, monkeypatch)
    [best] = result.candidates
    assert (best.text, best.broken, best.path, runs) == ("return 1;", (), DIFFUSION, [])
    assert (result.repair_rounds, planted.fake.calls) == (0, without_flaw.fake.calls)
