"""Where a Python fill's first line may stand: the widths the code above allows
(`python_indents`), and the tokens barred from starting that line with the shipped
tokenizer, which keeps line breaks apart from indentation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from fakes import FakeModel, spied_layouts
from tiny_model import small_tokenizer

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.models import DEFAULT_MODEL_DIR
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.python_indents import (
    Indents,
    barred_at_line_start,
    indents_after,
    with_line_start_bars,
)
from dlm_lsp.results import InfillRequest
from dlm_lsp.sampler import SamplerConfig, denoise
from dlm_lsp.span import build_layout


@pytest.fixture(scope="module")
def shipped() -> Tokenizer:
    return Tokenizer.from_file(DEFAULT_MODEL_DIR / "tokenizer.json")


def _fits(before: str, widths: range = range(14)) -> list[int]:
    indents = indents_after(before)
    assert indents is not None
    return [w for w in widths if indents.fits(w)]


def test_below_a_block_header_only_a_deeper_line_fits() -> None:
    assert _fits("def f(x):\n") == list(range(1, 14))
    assert _fits("def f(x):\n    if x:\n") == list(range(5, 14))


def test_in_a_block_a_line_stays_at_its_level_or_returns_to_an_open_one() -> None:
    before = "def f(x):\n    if x:\n        y = 1\n"
    assert _fits(before) == [0, 4, 8]
    assert _fits("def f(x):\n    '''Doc.'''\n\n") == [0, 4], "the end of the code read closes none"


def test_a_closed_block_s_level_is_no_longer_open() -> None:
    before = "def f(x):\n    for a in x:\n        if a:\n            y = 1\n    z = 2\n"
    assert _fits(before) == [0, 4]


def test_comment_lines_say_nothing_of_the_levels() -> None:
    assert _fits("def f():\n    x = 1\n  # an aside\n") == [0, 4]


def test_widths_narrower_than_the_first_line_read_are_not_known_so_they_fit() -> None:
    before = "    def f(self):\n        x = 1\n"
    assert _fits(before) == [0, 1, 2, 3, 4, 8]


@pytest.mark.parametrize("before", [
    "x = [\n",  # inside a bracket: any width
    'def f():\n    """Doc\n',  # inside a string
    "x = 1 + \\\n",  # a continued line
    "def f():\n\tx = 1\n",  # tabs
    "def f():\n    x = 1",  # not at a line's start
])
def test_nothing_is_said_where_the_next_line_is_no_statement_of_its_own(before: str) -> None:
    assert indents_after(before) is None


def test_the_document_s_start_takes_a_line_at_column_0() -> None:
    assert _fits("") == [0]


def _token(tok: Tokenizer, text: str) -> int:
    [token] = tok.encode(text)
    return token


def test_code_one_space_in_is_barred_in_a_body_four_in(shipped: Tokenizer) -> None:
    barred = set(barred_at_line_start(shipped, Indents(frozenset({0, 4}))))
    assert _token(shipped, " if") in barred, "` if` after a line break is a line 1 space in"
    assert _token(shipped, "   ") not in barred, "`   ` then ` if`: 4 spaces"
    assert _token(shipped, "if") not in barred, "column 0 is open"
    assert _token(shipped, "  ") in barred, "2 or 3 spaces: no level"
    assert _token(shipped, "       ") in barred, "7 then a word's space: 8, an unexpected indent"
    assert _token(shipped, "#") not in barred and _token(shipped, " #") not in barred
    assert shipped.line_break_ids.isdisjoint(barred), "a blank line first is free"
    assert shipped.token_id("<|pad|>") not in barred, "the empty fill is free"


def test_below_a_header_code_at_the_header_s_width_is_barred(shipped: Tokenizer) -> None:
    barred = set(barred_at_line_start(shipped, Indents(frozenset({0}), header=0)))
    assert {_token(shipped, "if"), _token(shipped, "return")} <= barred
    assert _token(shipped, " if") not in barred and _token(shipped, "   ") not in barred


def test_a_tokenizer_that_joins_line_breaks_to_indentation_bars_nothing() -> None:
    tok = small_tokenizer()  # `\n        ` is one of its tokens
    assert any(text.startswith("\n ") for text in tok.token_texts)
    assert barred_at_line_start(tok, Indents(frozenset({0, 4}))) == []


DOC = 'def f(xs):\n    """Sum."""\n\n    return total\n'


def _layout(tok: Tokenizer, text: str, at: int):
    return build_layout(tok, text[:at], text[at:], 8, 512)


def test_bars_sit_at_the_position_after_the_head_s_line_break(shipped: Tokenizer) -> None:
    at = DOC.index("\n    return") + 1
    layout = _layout(shipped, DOC, at)
    assert layout.head == "\n"
    barred = with_line_start_bars(layout, shipped, DOC, at).banned
    assert {position for position, _ in barred} == {1}
    assert (1, _token(shipped, " if")) in barred and (1, _token(shipped, "   ")) not in barred


def test_a_span_that_starts_mid_line_gets_no_bars(shipped: Tokenizer) -> None:
    at = DOC.index("total")
    layout = _layout(shipped, DOC, at)
    assert with_line_start_bars(layout, shipped, DOC, at) is layout


def test_the_sampler_writes_no_barred_token_however_many(shipped: Tokenizer) -> None:
    """The model's favourite at the first position is barred with thousands of others:
    the best one left is written."""
    at = DOC.index("\n    return") + 1
    layout = with_line_start_bars(_layout(shipped, DOC, at), shipped, DOC, at)
    assert len(layout.banned) > 1000
    one_in, three = _token(shipped, " if"), _token(shipped, "   ")

    def prefers_one_space_in(ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(*ids.shape, shipped.vocab_size)
        out[:, layout.span_start + 1, one_in] = 10.0
        out[:, layout.span_start + 1, three] = 5.0
        return out
    model = FakeModel(shipped, prefers_one_space_in)
    out = denoise(model, layout, SamplerConfig(steps=4), seed=0)
    assert out.span_ids[0, 1].item() == three
    plain = denoise(model, replace(layout, banned=()), SamplerConfig(steps=4), seed=0)
    assert plain.span_ids[0, 1].item() == one_in, "without the bars the model's favourite"


def test_the_engine_bars_a_python_line_start_and_not_another_language_s(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, shipped: Tokenizer) -> None:
    """Bars are Python's rule: a line the span starts takes them in a Python document,
    not in a JavaScript one, nor where fills are not checked (`validate` off: the
    model's own text, as the training's fill probe writes it).  The shipped tokenizer
    in each; its model's own weights are not needed."""
    layouts = spied_layouts(monkeypatch)
    at = DOC.index("\n    return") + 1
    options = InfillOptions(length=8, steps=2)
    for validate, language in ((True, "python"), (True, "javascript"), (False, "python")):
        engine = Engine(ServerConfig(model=str(model_dir), device="cpu", repair_rounds=0,
                                     fallback=False, binding_hints=False, blank_hints=False,
                                     tally_hints=False, validate=validate))
        engine._model = FakeModel(shipped)
        engine.infill(InfillRequest(DOC, at, at, language, "file:///f", options=options))
    python, javascript, unchecked = layouts
    assert (1, _token(shipped, " if")) in python.banned
    assert javascript.banned == () and unchecked.banned == ()
