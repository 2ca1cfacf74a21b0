"""Specification of syntax-guided repair and the left-to-right fallback.

A deterministic fake model writes a planted broken fill (`a + (b`, an unclosed
parenthesis) until the engine starts the path under test; from then on it
writes the fixed fill (`a + b`).  So a test can tell exactly which path turned
the fill valid, and that only the tokens near the error were written again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fakes import Planted

import dlm_lsp.passes as passes_module
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.fill import describe_steps
from dlm_lsp.repair import (
    DIFFUSION,
    LEFT_TO_RIGHT,
    REPAIR,
    RepairConfig,
    closing,
    culprits,
    positions_to_remask,
    raw_offset,
    spelled_keywords,
    token_offsets,
    unmatched_openers,
)

DOC = "def add(a, b):\n    return |\n\nprint(add(1, 2))\n"
BROKEN, FIXED = "a + (b", "a + b"


# --- which positions a repair re-masks -----------------------------------------------------


def test_the_tokens_under_an_error_and_a_margin_around_them_are_re_masked() -> None:
    offsets = [0, 2, 4, 6, 8, 10, 12]  # six tokens of two characters
    assert positions_to_remask(offsets, 6, 0, [(6, 7)], 10, margin=1) == [2, 3, 4]


def test_the_head_is_never_re_masked() -> None:
    offsets = [0, 2, 4, 6, 8]
    assert positions_to_remask(offsets, 4, 2, [(0, 3)], 8, margin=2) == [2, 3]


def test_an_error_past_the_content_also_opens_the_first_pad() -> None:
    offsets = [0, 2, 4, 6]  # three tokens, then pads
    assert positions_to_remask(offsets, 3, 0, [(6, 6)], 8, margin=0) == [2, 3]


def test_an_error_before_the_fill_re_masks_its_start() -> None:
    offsets = [0, 2, 4, 6]
    assert positions_to_remask(offsets, 3, 0, [(-5, -1)], 8, margin=0) == [0]


def test_unmatched_openers_are_the_brackets_never_closed() -> None:
    assert unmatched_openers("f(a, [1, 2], g(x)") == [1]
    assert unmatched_openers("s = ')(' + (") == [11]  # brackets in strings do not count
    assert unmatched_openers("{ a: [1] }") == []


def test_closing_closes_the_string_then_the_brackets_left_open_innermost_first() -> None:
    assert closing("    print(a, [b, (c") == ")])"
    assert closing('s = "abc') == '"'
    assert closing('foo("(", [1') == "])"  # a bracket inside a string is not open
    assert closing("f(a)[0]") == ""


def test_no_positions_outside_the_span() -> None:
    offsets = [0, 2, 4, 6]
    assert max(positions_to_remask(offsets, 3, 0, [(5, 6)], 3, margin=4)) == 2


def test_the_culprit_is_the_token_an_error_starts_in() -> None:
    offsets, ids = [0, 2, 4, 6], [10, 11, 12]
    assert culprits(offsets, 3, 0, [(3, 5)], ids) == [(1, 11)]
    assert culprits(offsets, 3, 0, [(6, 6)], ids) == [(2, 12)]  # past the end: the last token
    assert culprits(offsets, 3, 2, [(0, 1)], ids) == []  # the head is never blamed


def test_token_offsets_follow_the_decoded_text(model_dir: Path) -> None:
    tok = Engine(ServerConfig(model=str(model_dir), device="cpu")).model.tokenizer
    ids = tok.encode("x = café(1)")
    offsets = token_offsets(tok, ids)
    assert offsets[0] == 0 and offsets[-1] == len("x = café(1)")
    assert offsets == sorted(offsets)


# --- the engine's paths ----------------------------------------------------------------------


@pytest.fixture
def engine(model_dir: Path) -> Engine:
    return Engine(ServerConfig(model=str(model_dir), device="cpu"))


def _request(doc: str = DOC, **options) -> InfillRequest:
    options = {"length": 8, "steps": 4, **options}
    at = doc.index("|")
    return InfillRequest(doc.replace("|", ""), at, at, "python", "file:///add.py",
                         InfillOptions(**options))


def _spy_paths(monkeypatch: pytest.MonkeyPatch, planted: Planted, fix_on: str) -> list:
    """Record each denoising run's strategy and re-masked count; fix the model when the
    run of `fix_on` ("repair" or "left-to-right") starts."""
    runs = []
    real = passes_module.denoise

    def spy(model, layout, cfg, seed, *args):
        masked = layout.n_masked if layout.init_ids is None else sum(
            i == model.mask_id for i in layout.init_ids)
        kind = REPAIR if layout.init_ids is not None else (
            LEFT_TO_RIGHT if cfg.strategy == "left-to-right" else DIFFUSION)
        runs.append((kind, masked))
        if kind == fix_on:
            planted.fixed = True
        return real(model, layout, cfg, seed, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    return runs


def test_repair_turns_a_planted_error_into_a_valid_fill(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    planted = Planted(engine, request)
    runs = _spy_paths(monkeypatch, planted, fix_on=REPAIR)
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, best.valid, best.path) == (FIXED, True, REPAIR)
    assert (result.path, result.repair_rounds) == (REPAIR, 1)
    assert [kind for kind, _ in runs] == [DIFFUSION, REPAIR]
    assert 0 < runs[1][1] < planted.n, "only the tokens near the error are written again"


def test_repair_stops_after_its_rounds_then_falls_back_to_left_to_right(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(repair_rounds=2)
    runs = _spy_paths(monkeypatch, Planted(engine, request), fix_on=LEFT_TO_RIGHT)
    result = engine.infill(request)
    [best] = result.candidates
    assert (best.text, best.valid, result.path) == (FIXED, True, LEFT_TO_RIGHT)
    assert result.repair_rounds == 2
    assert [kind for kind, _ in runs] == [DIFFUSION, REPAIR, REPAIR, LEFT_TO_RIGHT]


def test_with_nothing_valid_the_best_fill_is_returned_marked_invalid(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(candidates=2)
    runs = _spy_paths(monkeypatch, Planted(engine, request), fix_on="never")
    result = engine.infill(request)
    assert len(result.candidates) == 2, "as many candidates as asked for"
    assert all(c.valid is False for c in result.candidates)
    assert BROKEN in {c.text for c in result.candidates}
    assert [kind for kind, _ in runs] == [DIFFUSION, REPAIR, REPAIR, LEFT_TO_RIGHT]


def test_the_left_to_right_retry_is_spared_on_spans_longer_than_its_bound(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry spends a forward pass per token; past `fallback_max_tokens` it would
    cost more than the fill it rescues, so the best invalid fill is returned instead."""
    request = _request(fallback_max_tokens=7)  # the span is 8 tokens
    runs = _spy_paths(monkeypatch, Planted(engine, request), fix_on=LEFT_TO_RIGHT)
    result = engine.infill(request)
    assert (result.candidates[0].valid, result.path) == (False, REPAIR)
    assert [kind for kind, _ in runs] == [DIFFUSION, REPAIR, REPAIR]
    request = _request(fallback_max_tokens=8)
    runs = _spy_paths(monkeypatch, Planted(engine, request), fix_on=LEFT_TO_RIGHT)
    assert engine.infill(request).path == LEFT_TO_RIGHT


def test_by_default_only_single_line_spans_are_retried_left_to_right() -> None:
    assert RepairConfig().fallback_max_tokens == ServerConfig().single_line_tokens
    assert ServerConfig().multi_line_tokens > RepairConfig().fallback_max_tokens


def test_repair_and_fallback_can_be_turned_off(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(repair_rounds=0, fallback=False)
    runs = _spy_paths(monkeypatch, Planted(engine, request), fix_on=REPAIR)
    result = engine.infill(request)
    assert (result.candidates[0].valid, result.path, result.repair_rounds) == (
        False, DIFFUSION, 0)
    assert [kind for kind, _ in runs] == [DIFFUSION]


def test_a_valid_first_fill_needs_no_repair(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    planted = Planted(engine, request)
    planted.fixed = True
    runs = _spy_paths(monkeypatch, planted, fix_on="never")
    result = engine.infill(request)
    assert (result.candidates[0].text, result.path) == (FIXED, DIFFUSION)
    assert [kind for kind, _ in runs] == [DIFFUSION]


def test_a_fill_asked_left_to_right_reports_that_path(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(strategy="left-to-right")
    planted = Planted(engine, request)
    planted.fixed = True
    _spy_paths(monkeypatch, planted, fix_on="never")
    result = engine.infill(request)
    assert (result.candidates[0].text, result.path) == (FIXED, LEFT_TO_RIGHT)


def test_the_result_and_its_forward_passes_count_every_path(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    planted = Planted(engine, request)
    _spy_paths(monkeypatch, planted, fix_on=LEFT_TO_RIGHT)
    result = engine.infill(request)
    assert result.steps == planted.fake.calls


# Lines whose error no single-line fill at the cursor can mend: the document as it is
# has it, at the same place, away from the cursor; whatever the model writes, it stays.
# Each says why in the fixture, which benchmarks/out_of_reach.py times too.
def _count_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The steps of each denoising run, in order (over any spy already in place)."""
    steps = []
    inner = passes_module.denoise

    def counting(*args):
        out = inner(*args)
        steps.append(out.steps)
        return out
    monkeypatch.setattr(passes_module, "denoise", counting)
    return steps


def test_a_fill_s_repair_steps_are_those_of_its_runs_after_the_first(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fill --steps 1` said "3 steps": the steps of repair and the left-to-right retry
    count, and nothing told them from the budget the option sets."""
    request = _request(repair_rounds=2)
    _spy_paths(monkeypatch, Planted(engine, request), fix_on=LEFT_TO_RIGHT)
    steps = _count_steps(monkeypatch)
    result = engine.infill(request)
    assert len(steps) == 4  # diffusion, two repair rounds, the left-to-right retry
    assert (result.steps, result.repair_steps) == (sum(steps), sum(steps[1:]))
    assert steps[0] < 4  # the first run's text settled before its budget of 4 steps
    assert describe_steps(result) == (f"{sum(steps)} steps ({steps[0]}, stopped early, + "
                                      f"{sum(steps[1:])} in repair)")


def test_a_fill_without_repair_says_its_steps_alone(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    Planted(engine, request, broken=FIXED, good=FIXED)  # valid from the first pass
    steps = _count_steps(monkeypatch)
    result = engine.infill(request)
    assert (result.repair_rounds, result.repair_steps) == (0, 0)
    assert result.early_stopped  # sure of the planted fill before the budget ran out
    assert describe_steps(result) == f"{steps[0]} steps (stopped early)"


OUT_OF_REACH = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "out_of_reach"
                           / "lines.json").read_text(encoding="utf-8"))["lines"]


@pytest.mark.parametrize("line", OUT_OF_REACH, ids=lambda line: line["name"])
def test_an_error_no_single_line_fill_can_mend_spends_no_repair_and_no_retry(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, line: dict) -> None:
    """Repair and the left-to-right retry would spend ~20 passes to offer nothing."""
    request = _request(line["document"], kind="single-line")
    planted = Planted(engine, request, broken="y", good="z")
    runs = _spy_paths(monkeypatch, planted, fix_on=REPAIR)
    result = engine.infill(request)
    assert [kind for kind, _ in runs] == [DIFFUSION]
    assert (result.candidates[0].text, result.candidates[0].valid) == ("y", False)
    assert (result.path, result.repair_rounds, result.steps) == (DIFFUSION, 0, planted.fake.calls)


# Lines where the model's first fill has the document's own error, and a fill mends it.
MENDABLE = [
    # CPython reports the unclosed `(` at the `(`: the fill closes it
    ("def f(a, b):\n    result = foo(a, |\n    return result\n", "b", "b)"),
    ("def f(a):\n    s = 'abc|\n    return s\n", "d", "d'"),
    # at the start of a line the fill may begin any statement: here the header of the
    # block below (bench heldout's lines are of this kind)
    ("def f(x):\n    y = 1\n    |\n        return y\n", "y = 2", "if x:"),
]


@pytest.mark.parametrize(("doc", "broken", "good"), MENDABLE)
def test_an_error_a_single_line_fill_can_mend_still_gets_repair(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, doc: str, broken: str,
        good: str) -> None:
    request = _request(doc, kind="single-line")
    runs = _spy_paths(monkeypatch, Planted(engine, request, broken=broken, good=good),
                      fix_on=REPAIR)
    engine.infill(request)
    assert [kind for kind, _ in runs][:2] == [DIFFUSION, REPAIR]


# --- the offered fill: re-indented and cut to whole units -------------------------------


def test_raw_offsets_follow_lines_whose_indentation_changed() -> None:
    raw, shown = "if x:\n  y = 1\n  z", "if x:\n    y = 1\n    z"
    for a, b in [(0, 0), (3, 3), (6, 6), (10, 8), (12, 10), (shown.index("z"), raw.index("z"))]:
        assert raw_offset(raw, shown, a) == b
    assert raw_offset(raw + "\nmore", shown, len(shown)) == len(raw)  # truncated: the cut


BLOCK_DOC = "def add(a, b):\n    |\n\ndef other():\n    return 0\n"


def test_a_multi_line_fill_is_cut_at_the_end_of_its_block(engine: Engine) -> None:
    request = _request(BLOCK_DOC, length=24, steps=24)
    Planted(engine, request, broken="s = a + b\n    return s\ndef g():\n    pass")
    result = engine.infill(request)
    assert result.candidates[0].text == "s = a + b\n    return s"
    assert result.candidates[0].valid


def test_a_multi_line_fill_is_put_on_the_document_s_indentation(engine: Engine) -> None:
    request = _request(BLOCK_DOC, length=24, steps=24)
    Planted(engine, request, broken="s = a + b\n\treturn s")
    text = engine.infill(request).candidates[0].text
    assert text == "s = a + b\n    return s"


def test_a_repair_maps_errors_through_the_re_indentation(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request(BLOCK_DOC, length=24, steps=24)
    planted = Planted(engine, request, broken="s = (a + b\n\treturn s",
                      good="s = a + b\n\treturn s")
    runs = _spy_paths(monkeypatch, planted, fix_on=REPAIR)
    result = engine.infill(request)
    assert (result.candidates[0].text, result.path) == ("s = a + b\n    return s", REPAIR)
    assert runs[1][1] < planted.n


# --- per language, on the fixtures with holes ----------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# fixture -> (language id, a good fill, the same fill with a planted bracket error)
PER_LANGUAGE = {
    "hello.py": ("python", "return fibonacci(n - 1) + fibonacci(n - 2)",
                 "return fibonacci(n - 1) + (fibonacci(n - 2)"),
    "hello.js": ("javascript", 'return "hello " + name;', 'return "hello " + (name;'),
    "hello.ts": ("typescript", "Math.sqrt(p.x * p.x + p.y * p.y)",
                 "Math.sqrt(p.x * p.x + p.y * p.y))"),
    "hello.go": ("go", "for _, x := range xs {\n\t\ttotal += x\n\t}",
                 "for _, x := range xs {\n\t\ttotal += (x\n\t}"),
    "hello.rs": ("rust", "if x > best {\n            best = x;\n        }",
                 "if x > best {\n            best = (x;\n        }"),
}


def _fixture_request(name: str, **options) -> InfillRequest:
    language, _, _ = PER_LANGUAGE[name]
    text = (FIXTURES / name).read_text()
    start = text.index("<FILL>")
    return InfillRequest(text, start, start + len("<FILL>"), language, f"file:///{name}",
                         InfillOptions(**{"length": 40, "steps": 8, **options}), is_hole=True)


@pytest.mark.parametrize("name", sorted(PER_LANGUAGE))
def test_a_planted_error_is_reported_where_it_is_and_repaired_in_each_language(
        name: str, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    _, good, broken = PER_LANGUAGE[name]
    request = _fixture_request(name, repair_rounds=0, fallback=False)
    Planted(engine, request, broken=broken, good=good)
    unrepaired = engine.infill(request).candidates[0]
    assert unrepaired.valid is False
    error_line = request.text.count("\n", 0, request.start)  # the hole's line, or the next
    assert {line for line, _ in unrepaired.check.new_errors} <= {
        error_line, error_line + 1, error_line + broken.count("\n") + 1}

    request = _fixture_request(name)
    planted = Planted(engine, request, broken=broken, good=good)
    _spy_paths(monkeypatch, planted, fix_on=REPAIR)
    result = engine.infill(request)
    assert (result.candidates[0].valid, result.path) == (True, REPAIR)
    assert result.candidates[0].text.strip() == good.strip()


def _repair_layouts(monkeypatch: pytest.MonkeyPatch) -> list:
    """Record the layout of each repair run, and the span it wrote."""
    runs = []
    real = passes_module.denoise

    def spy(model, layout, cfg, seed, *args):
        out = real(model, layout, cfg, seed, *args)
        if layout.init_ids is not None:
            runs.append((layout, out.span_ids[0].tolist()))
        return out
    monkeypatch.setattr(passes_module, "denoise", spy)
    return runs


def test_a_token_that_comes_back_from_a_repair_is_not_written_there_again(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    Planted(engine, request)  # writes the unclosed parenthesis whatever it is shown
    runs = _repair_layouts(monkeypatch)
    engine.infill(request)
    (first, wrote), (second, wrote_again) = runs
    assert first.banned == ()
    [(position, token)] = second.banned
    assert wrote[position] == token, "banned: what the first round wrote where the error began"
    assert wrote_again[position] != token


def test_a_return_above_code_it_leaves_unreachable_is_not_written_there_again(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """`return a` above `return a + b` parses, and leaves the line below it dead: a
    `return` there is wrong whatever follows it, so even the first round may not write it
    again (shown the context that chose it, the first round wrote `return results[0]`
    again where `results.pop(0)` belonged, HumanEval/46)."""
    request = _request("def add(a, b):\n    |\n    return a + b\n")
    Planted(engine, request, broken="return a", good="a += b")
    runs = _repair_layouts(monkeypatch)
    engine.infill(request)
    (first, wrote), *_ = runs
    [(position, token)] = first.banned
    assert engine.model.tokenizer.decode([token]).strip() == "return"
    assert wrote[position] != token


def test_a_name_nothing_defines_is_left_to_the_first_round_to_write_again(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """`return a + c` reads `c`, which nothing defines, but a name's first token may be the
    right name's (`b` for `bb`): it is banned only once a round gives it back."""
    request = _request()
    Planted(engine, request, broken="a + c")
    runs = _repair_layouts(monkeypatch)
    engine.infill(request)
    (first, _), *_ = runs
    assert first.banned == ()


def test_only_a_blamed_token_that_spells_a_named_keyword_is_certain(model_dir: Path) -> None:
    tok = Engine(ServerConfig(model=str(model_dir), device="cpu")).model.tokenizer
    [ret], [name] = tok.encode(" return"), tok.encode(" c")
    blamed = [(0, ret), (3, name)]
    assert spelled_keywords(tok, blamed, ("return",)) == [(0, ret)]
    assert spelled_keywords(tok, blamed, ("c",)) == []  # a name's check: none certain
    assert spelled_keywords(tok, [(3, name)], ("return",)) == []


class _SecondChoiceWithoutSpace(Planted):
    """Also likes, at the span's first position, a token that would drop the head."""

    unspaced = 0

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        out = super().logits(ids)
        out[:, self.start, self.unspaced] = 5.0
        return out


def test_a_repair_can_rewrite_the_token_that_carries_the_head(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `total = ` the span starts with the space before the cursor (the head), and
    the model's `#` joins it in one token ` #`: a repair must be free to write it again,
    and must still spell the head."""
    doc = "price = 3\ntotal = |price * 2\nprint(total)\n"
    request = _request(doc)
    planted = _SecondChoiceWithoutSpace(engine, request, broken="#", good="2 * ")
    tok = engine.model.tokenizer
    planted.unspaced = tok.encode("2")[0]
    assert tok.decode([planted.targets[False][0]]) == " #"  # the head's token carries the '#'
    runs = _repair_layouts(monkeypatch)
    engine.infill(request)
    (first, _), (second, wrote_again) = runs
    assert first.init_ids[0] == engine.model.mask_id and first.head_tokens == 0
    assert second.banned == ((0, planted.targets[False][0]),)
    assert tok.decode(wrote_again[:1]).startswith(" ") and wrote_again[0] != second.banned[0][1]


def test_a_c_fill_whose_backslash_joins_the_user_s_line_below_is_repaired(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """` \\` after `#define N 10` took `int y = N;` into the macro, valid C: the fill
    was offered. Refused, its backslash is re-masked and written again."""
    doc = "#define N 10|\nint y = N;\n"
    at = doc.index("|")
    request = InfillRequest(doc.replace("|", ""), at, at, "c", "file:///n.c",
                            InfillOptions(length=8, steps=4))
    planted = Planted(engine, request, broken=" \\", good=" + 1")
    runs = _spy_paths(monkeypatch, planted, fix_on=REPAIR)
    result = engine.infill(request)
    assert [kind for kind, _ in runs][:2] == [DIFFUSION, REPAIR]
    assert (result.candidates[0].text, result.candidates[0].valid) == (" + 1", True)


@pytest.mark.parametrize(("fill", "expected"), [
    ("t = 0\n        for x in xs:\n                t += x\n        return t",
     "t = 0\n\t\tfor x in xs:\n\t\t\tt += x\n\t\treturn t"),
    ("t = 0\n                for x in xs:\n                    t += x\n                return t",
     "t = 0\n\t\tfor x in xs:\n\t\t\tt += x\n\t\treturn t"),
])
def test_a_fill_in_spaces_of_two_widths_below_two_tabs_is_offered_whole_on_the_tabs(
        engine: Engine, fill: str, expected: str) -> None:
    """Through the engine: its second line read one tab in, the fill left the method
    and was cut to `t = 0`."""
    doc = "class A:\n\tdef f(self, xs):\n\t\t|\n\n\nx = 1\n"
    request = _request(doc, length=40, steps=40)
    Planted(engine, request, broken=fill)
    candidate = engine.infill(request).candidates[0]
    assert (candidate.text, candidate.valid) == (expected, True)


def test_a_fill_deeper_than_a_cursor_two_tabs_in_is_offered_at_its_column_by_its_own_step(
        engine: Engine) -> None:
    """Through the engine: 4 spaces past two tabs, then a block of eight; one tab stood
    for four columns from column 0, and the block's line went two tabs past the
    cursor's."""
    doc = "class A:\n\tdef f(self, xs):\n\t\tt = 0\n\t\t|\n\n\nx = 1\n"
    request = _request(doc, length=40, steps=40)
    Planted(engine, request,
            broken="    for x in xs:\n                    t += x\n            return t")
    candidate = engine.infill(request).candidates[0]
    assert (candidate.text, candidate.valid) == (
        "for x in xs:\n\t\t\tt += x\n\t\treturn t", True)


@pytest.mark.parametrize(("language", "doc", "broken", "good"), [
    ("javascript", "function f(a) {\n  const x = |\n  foo();\n}\n", "a +", "a + 1;"),
    ("shellscript", "#!/bin/bash\necho start|\nls -l\n", " &&", " a"),
])
def test_a_fill_whose_operator_joins_the_user_s_line_below_is_repaired(
        engine: Engine, monkeypatch: pytest.MonkeyPatch, language: str, doc: str, broken: str,
        good: str) -> None:
    """`const x = a +` over `foo();` read `const x = a + foo();`, and `echo start &&` over
    `ls -l` ran both: valid, the fill was offered. Refused, its operator is re-masked and
    written again."""
    at = doc.index("|")
    request = InfillRequest(doc.replace("|", ""), at, at, language, "file:///j",
                            InfillOptions(length=8, steps=4))
    planted = Planted(engine, request, broken=broken, good=good)
    runs = _spy_paths(monkeypatch, planted, fix_on=REPAIR)
    result = engine.infill(request)
    assert [kind for kind, _ in runs][:2] == [DIFFUSION, REPAIR]
    assert (result.candidates[0].text, result.candidates[0].valid) == (good, True)
