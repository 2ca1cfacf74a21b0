"""Specification of reusing recent fills: repeated requests and typing along a suggestion."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import Planted

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.recent import RecentFills

DOC = "def add(a, b):\n    return |\n\nprint(add(1, 2))\n"
FILL = "a + b"


@pytest.fixture
def engine(model_dir: Path) -> Engine:
    return Engine(ServerConfig(model=str(model_dir), device="cpu"))


def _request(text: str = DOC, language_id: str = "python", **options) -> InfillRequest:
    at = text.index("|")
    return InfillRequest(text.replace("|", ""), at, at, language_id, "file:///add.py",
                         InfillOptions(**{"length": 8, "steps": 4, **options}))


def test_a_repeated_request_is_answered_without_the_model(engine: Engine) -> None:
    planted = Planted(engine, _request(), broken=FILL)
    first = engine.infill(_request())
    calls = planted.fake.calls
    again = engine.infill(_request())
    assert planted.fake.calls == calls, "no forward pass"
    assert (again.reused, again.steps) == ("exact", 0)
    assert [c.text for c in again.candidates] == [c.text for c in first.candidates]
    assert again.candidates[0].valid is True, "validity is checked again"


def test_a_repeated_request_s_fills_keep_whether_the_model_ended_them(engine: Engine) -> None:
    """offers.py tells from it whether a fill accepted is continued."""
    Planted(engine, _request(), broken=FILL)
    first = engine.infill(_request())
    again = engine.infill(_request())
    assert again.reused == "exact"
    assert [c.ended for c in again.candidates] == [c.ended for c in first.candidates] == [True]


def test_other_options_or_another_context_are_computed_afresh(engine: Engine) -> None:
    planted = Planted(engine, _request(), broken=FILL)
    engine.infill(_request())
    calls = planted.fake.calls
    assert engine.infill(_request(seed=5)).reused == ""
    assert engine.infill(_request(DOC.replace("b)", "c)"))).reused == ""
    assert planted.fake.calls > calls


def test_typing_along_a_suggestion_offers_the_rest_of_it(engine: Engine) -> None:
    planted = Planted(engine, _request(), broken=FILL)
    assert engine.infill(_request()).candidates[0].text == FILL
    calls = planted.fake.calls
    typed = engine.infill(_request(DOC.replace("|", "a +|")))
    assert (typed.candidates[0].text, typed.reused) == (" b", "typed")
    assert planted.fake.calls == calls


def test_a_fill_written_as_one_language_is_not_reused_for_another(engine: Engine) -> None:
    """The same text as another language (a notebook's cell opened again as one, a file
    whose language the user set) is planned, checked and repaired as that language: a
    fill written as Python was given back, typed along or asked again."""
    planted = Planted(engine, _request(), broken=FILL)
    engine.infill(_request())
    calls = planted.fake.calls
    typed = engine.infill(_request(DOC.replace("|", "a +|"), "javascript"))
    assert typed.reused == "" and planted.fake.calls > calls
    calls = planted.fake.calls
    assert engine.infill(_request(language_id="javascript")).reused == ""
    assert planted.fake.calls > calls
    assert engine.infill(_request()).reused == "exact"  # the Python fill is still kept


@pytest.mark.parametrize("change", [{"repair_rounds": 0}, {"check_names": False},
                                    {"binding_hints": False}, {"strength": 0.5}])
def test_a_fill_made_under_other_settings_is_not_reused(engine: Engine, change) -> None:
    """The keys held the sampler's settings and `validate` alone, and typing along none:
    after the user turned repair or a hint on or off (or switched model), the fill made
    before came back as it was, asked again or typed along."""
    from dataclasses import replace

    planted = Planted(engine, _request(), broken=FILL)
    engine.infill(_request())
    engine.reconfigure(replace(engine.config, **change))
    calls = planted.fake.calls
    assert engine.infill(_request(DOC.replace("|", "a +|"))).reused == ""
    assert engine.infill(_request()).reused == ""
    assert planted.fake.calls > calls
    assert engine.infill(_request()).reused == "exact"  # under the new settings, kept


def test_settings_only_the_language_server_reads_leave_remembered_fills_be(
        engine: Engine) -> None:
    from dataclasses import replace

    Planted(engine, _request(), broken=FILL)
    engine.infill(_request())
    engine.reconfigure(replace(engine.config, timeout_ms=1234, drafts=False,
                               suggest_invalid=True))
    assert engine.infill(_request()).reused == "exact"
    assert engine.infill(_request(DOC.replace("|", "a +|"))).reused == "typed"


def test_typing_something_else_asks_the_model_again(engine: Engine) -> None:
    planted = Planted(engine, _request(), broken=FILL)
    engine.infill(_request())
    calls = planted.fake.calls
    assert engine.infill(_request(DOC.replace("|", "x|"))).reused == ""
    assert planted.fake.calls > calls


def test_reuse_can_be_switched_off(model_dir: Path) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False))
    planted = Planted(engine, _request(), broken=FILL)
    engine.infill(_request())
    calls = planted.fake.calls
    assert engine.infill(_request()).reused == ""
    assert planted.fake.calls > calls


def test_the_cache_keeps_only_the_most_recent_fills() -> None:
    recent = RecentFills(size=2)
    for key in "abc":
        recent.put(key, key)  # type: ignore[arg-type]
    assert recent.get("a") is None and recent.get("c") == "c"
    assert (recent.hits, recent.misses) == (1, 1) and recent.hit_rate == 0.5


def test_typed_along_needs_the_same_suffix_and_a_strict_start_of_the_fill() -> None:
    recent = RecentFills()
    recent.remember_typed("u", "x = ", "\n", "foo(1)", None)
    assert recent.typed_along("u", "x = fo", "\n", None) == "o(1)"
    assert recent.typed_along("u", "x = fo", "\ny", None) is None  # the suffix changed
    assert recent.typed_along("u", "x = foo(1)", "\n", None) is None  # nothing left
    assert recent.typed_along("u", "x = ", "\n", None) is None  # nothing typed
    assert recent.typed_along("u", "x = fo", "\n", {"seed": 1}) is None  # other options
    recent.remember_typed("v", "x = ", "\n", "foo(1)", None, "python")
    assert recent.typed_along("v", "x = fo", "\n", None, "python") == "o(1)"
    assert recent.typed_along("v", "x = fo", "\n", None, "javascript") is None  # another
