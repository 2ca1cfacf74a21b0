"""Specification of name hints (`nameHints`, passes.InfillRun.name_hint): where the best
fill is a Python line of nothing but a name, a statement that does nothing, one more
pass keeps the name and goes on after it, and is offered first.

Documents mark the span as ⟦⟧ (an insertion point), as in test_python_tallies.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import planted_engine, spied_layouts

from dlm_lsp.config import InfillOptions
from dlm_lsp.engine import InfillRequest
from dlm_lsp.repair import DIFFUSION, NAME, REPAIR

CLOSEST = ("def closest(xs):\n    best = None\n    for a in xs:\n        for b in xs:\n"
           "            distance = abs(a - b)\n⟦⟧\n"
           "            if best is None or distance < best:\n                best = distance\n"
           "    return best\n")
THEN = "            distance = abs(b - a)"


def _request(marked: str = CLOSEST, language: str = "python") -> InfillRequest:
    at = marked.index("⟦⟧")
    return InfillRequest(marked.replace("⟦⟧", ""), at, at, language, "file:///c.py",
                         InfillOptions(length=12, steps=4))


@pytest.mark.parametrize(("bare", "then"), [
    ("            distance", THEN), ("            a.real", "            a.real.conjugate()")])
def test_a_bare_name_gives_way_to_a_line_begun_with_it(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, bare: str, then: str) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, bare, then, request)
    layouts = spied_layouts(monkeypatch)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == (then, True, NAME)
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then one from given tokens
    tok = engine.model.tokenizer
    hinted = layouts[1]
    begun = len(tok.encode(hinted.head + bare))
    assert tok.decode(list(hinted.init_ids[:begun])).endswith(bare)  # the name is kept
    banned = {token for position, token in hinted.banned if position == begun}
    assert engine.model.pad_id in banned and tok.line_break_ids <= banned  # it goes on


@pytest.mark.parametrize("first", [
    "            distance = abs(a - b)",  # a statement that does something
    "            pass",  # a keyword is a statement of its own
    "            print(distance)",
])
def test_a_fill_that_is_not_a_bare_name_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, first: str) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, first, THEN, request)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


@pytest.mark.parametrize("then", ["            distance = (", "            distance",
                                  "            distance = nowhere"])
def test_a_hinted_fill_that_fails_the_checks_or_stays_bare_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            distance", then,
                                  request)
    result = engine.infill(request)
    assert result.candidates[0].text == "            distance"
    assert NAME not in [c.path for c in result.candidates]
    assert REPAIR in runs  # tried, and left out


def test_with_name_hints_off_the_bare_name_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            distance", THEN,
                                  request, name_hints=False)
    assert engine.infill(request).candidates[0].text == "            distance"
    assert runs == [DIFFUSION]


def test_after_code_on_the_line_a_name_may_end_an_expression(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marked = CLOSEST.replace("⟦⟧\n", "            d = ⟦⟧\n")
    assert marked != CLOSEST
    request = _request(marked)
    engine, runs = planted_engine(model_dir, monkeypatch, "a", "abs(a - b)", request)
    assert engine.infill(request).candidates[0].text == "a"
    assert runs == [DIFFUSION]


def test_only_python_is_hinted(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In Ruby a bare name is a call; in other languages it is left as it is."""
    marked = "function f(xs) {\n  let best = 0;\n⟦⟧\n  return best;\n}\n"
    request = _request(marked, language="javascript")
    engine, runs = planted_engine(model_dir, monkeypatch, "  best", "  best = 1;", request)
    assert engine.infill(request).candidates[0].text == "  best"
    assert runs == [DIFFUSION]
