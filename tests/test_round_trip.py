"""The oracle round trip of fill shaping: code a file had, written back, comes back whole.

Shaping (`passes.shape_fill`: the cursor's column, the document's indentation, whole
units) works from heuristics.  Whatever they are, when the model writes exactly the
code the document had at a span, at the columns the document had it, the fill offered
is that code.  Every run of whole sibling statements of every file below is taken out
and written back by a planted model, three ways (benchmarks/shaping_round_trip.py: the
cursor at the block's column, a hole there, the cursor at column 0), and the document
must come back as it was.  Spans whose lines carry no indentation level of their own
(inside a multi-line string, a block comment or a heredoc, a preprocessor directive, a
label, a Python line inside brackets) are left out: shaping does not read them yet.

The files: fixtures/round_trip/, one per language with a grammar (and wordfreq.c, C in
GNU style: levels of two, every 8 columns of indentation a tab), and fixtures/hello.*
with the line of their hole left out.  The same script measures large corpora
(README, Benchmarks); its fills are checked here to be the engine's own.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_scripts import script
from fakes import Planted

from dlm_lsp.config import ServerConfig
from dlm_lsp.engine import Engine
from dlm_lsp.validation import LANGUAGES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
round_trip = script("shaping_round_trip")
FILES = sorted((FIXTURES / "round_trip").iterdir()) + sorted(FIXTURES.glob("hello.*"))


def without_holes(path: Path) -> str:
    """The file's text, without the lines that hold a hole marker."""
    lines = path.read_text(encoding="utf-8").split("\n")
    return "\n".join(line for line in lines if round_trip.HOLE not in line)


@pytest.fixture(scope="module")
def engine(model_dir: Path) -> Engine:
    """An engine whose spans hold the longest fill here whole (maxSpanTokens past 128)."""
    return Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                               max_span_tokens=512))


def test_the_round_trip_files_cover_every_language_with_a_grammar() -> None:
    assert {round_trip.language_of(path) for path in FILES} == set(LANGUAGES)


@pytest.mark.parametrize("path", FILES, ids=lambda path: path.name)
def test_code_a_file_had_written_back_by_the_model_comes_back_unchanged(
        engine: Engine, path: Path) -> None:
    """Every other span's fills are the planted model's through the engine, and checked to
    be the script's (`offered`, which shapes as the engine does without a model, at half
    the cost); the others are the script's."""
    language = round_trip.language_of(path)
    spans = round_trip.spans(path, language, without_holes(path))
    assert spans, f"{path.name} does not parse cleanly"
    tokenizer = engine.model.tokenizer
    wrong = []
    for index, span in enumerate(spans):
        if span.exception is not None:
            continue
        for mode in round_trip.MODES:
            asked = round_trip.ask(span, mode)
            # room for the whole fill and the prefix's edge the span takes in
            request = round_trip.request(span, asked, len(tokenizer.encode(asked.fill)) + 16)
            fill = round_trip.offered(request, asked.fill)
            if index % 2 == 0:
                Planted(engine, request, broken=asked.fill)
                assert engine.infill(request).candidates[0].text == fill
            outcome = round_trip.Outcome(
                span, asked, asked.document[:asked.start] + fill + asked.document[asked.end:])
            if not outcome.identical:
                wrong.append(f"line {span.line}, {mode}:\n{round_trip.diff(outcome)}")
    assert not wrong, f"{len(wrong)} fills changed:\n\n" + "\n\n".join(wrong[:4])
