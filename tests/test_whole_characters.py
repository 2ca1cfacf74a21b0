"""Specification: a fill never writes U+FFFD made of bytes that make no character.

A byte-level BPE has tokens that are single bytes of a multi-byte character, and
a diffusion model commits positions in parallel: a span can end up holding a lead
byte with nothing after it, or a continuation byte with nothing before it.  The
tokenizers library decodes those to U+FFFD, which an editor would write into the
user's file.  Such bytes are left out of the text, and the positions holding them
are written again by repair while its rounds last.  A U+FFFD that is its own three
bytes (text the user has) is a character like any other and is kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from fakes import Planted
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models

import dlm_lsp.passes as passes_module
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.span import head_chain

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


def test_a_draft_shows_a_character_split_over_tokens_whole(engine: Engine) -> None:
    tok, model = engine.model.tokenizer, engine.model
    request = _request('s = "|"\n', length=6)
    run = passes_module.InfillRun(engine, model, request, None, None, "", "unchecked",
                                  None, None)
    ids = [byte_token(tok, b) for b in "é".encode()] + [model.mask_id, byte_token(tok, 0xE4),
                                                      model.mask_id, model.pad_id]
    masked = passes_module.MASK_PLACEHOLDER
    assert run.draft(ids, "") == f"é{masked}{masked}", "the lone 0xE4 shows nothing"


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
