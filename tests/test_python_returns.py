"""Specification of return hints (`blankHints`, passes.InfillRun.blank_hint): where the
best fill writes no code at the end of a Python function that must give a value, one more
pass begins the fill with `return` at the function body's indentation and offers it first.

Documents mark the span as ⟦⟧ (an insertion point), as in test_binding_hints.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import planted_engine, spied_layouts

from dlm_lsp import passes as passes_module
from dlm_lsp.config import InfillOptions
from dlm_lsp.engine import InfillRequest
from dlm_lsp.python_returns import ReturnNeed
from dlm_lsp.repair import DIFFUSION, REPAIR, RETURN
from dlm_lsp.validation import ParsedDocument, parsed_document


def _document(marked: str) -> tuple[ParsedDocument, int]:
    """The document `marked` stands for, parsed, and where its span (⟦⟧) is."""
    return parsed_document(marked.replace("⟦⟧", ""), "python"), marked.index("⟦⟧")


def _need(marked: str, fill: str = "") -> ReturnNeed | None:
    document, at = _document(marked)
    return document.return_needed(at, at, fill)


MAXIMUM = ("def maximum(arr, k):\n    if k == 0:\n        return []\n    arr.sort()\n"
           "    ans = arr[-k:]\n⟦⟧")


# --- what says a function gives a value ------------------------------------------------------

def test_a_function_that_returns_a_value_elsewhere_must_return_one_at_its_end() -> None:
    need = _need(MAXIMUM)
    assert need is not None
    assert (need.name, need.indent) == ("maximum", "    ")
    assert "line 3" in need.why


def test_a_fill_that_returns_leaves_no_need() -> None:
    assert _need(MAXIMUM, "    return ans\n") is None


@pytest.mark.parametrize("annotation, needed", [
    ("-> int", True),
    ("-> List[int]", True),
    ('-> "Tree"', True),
    ("-> None", False),
    ("-> Optional[int]", False),
    ("-> int | None", False),
    ("-> Iterator[int]", False),
    ("-> NoReturn", False),
    ("", False),  # nothing says it gives a value
])
def test_an_annotation_that_names_a_value_asks_for_one(annotation: str, needed: bool) -> None:
    marked = f"def f(xs) {annotation}:\n    total = sum(xs)\n⟦⟧"
    assert (_need(marked) is not None) is needed


def test_a_body_of_only_a_docstring_is_still_to_be_written() -> None:
    marked = 'def add(x: int, y: int) -> int:\n    """Add two numbers."""\n⟦⟧'
    assert _need(marked) == ReturnNeed("add", "    ", "its annotation is -> int")


def test_a_docstring_example_that_shows_a_value_asks_for_one() -> None:
    marked = ('def add(x, y):\n    """Add.\n    >>> add(2, 3)\n    5\n    """\n'
              "    total = x + y\n⟦⟧")
    assert _need(marked) is not None


@pytest.mark.parametrize("docstring, needed", [
    ("Return the largest of xs.", True),
    ("Count the items.\n\n    Returns:\n        how many there are.", True),
    ("Returns the index, or -1.", True),
    ("Sort xs in place; returns None.", False),
    ("Log the items, and return nothing.", False),
    ("Print the items.", False),
])
def test_a_docstring_that_says_what_the_function_returns_asks_for_a_value(
        docstring: str, needed: bool) -> None:
    marked = f'def f(xs):\n    """{docstring}"""\n    best = max(xs)\n⟦⟧'
    need = _need(marked)
    assert (need is not None) is needed
    assert need is None or need.why == "its docstring says what it returns"


@pytest.mark.parametrize("docstring, body", [
    (">>> show(2)\n    2", "    print(x)"),  # it prints what the example shows
    (">>> reset(2)\n    None", "    x = 0"),
    (">>> reset(2)\n    >>> reset(3)", "    x = 0"),  # no output line
    (">>> other(2)\n    2", "    x = 0"),  # another function's example
])
def test_a_docstring_example_that_shows_no_value_of_the_function_asks_for_none(
        docstring: str, body: str) -> None:
    name = docstring.split("(")[0].removeprefix(">>> ")
    name = name if name != "other" else "reset"
    marked = f'def {name}(x):\n    """Do it.\n    {docstring}\n    """\n{body}\n⟦⟧'
    assert _need(marked) is None


@pytest.mark.parametrize("marked", [
    "def f(xs):\n    for x in xs:\n        yield x\n    return 1\n⟦⟧",  # a generator
    'def f(k) -> int:\n    """Later."""\n    pass\n⟦⟧',  # a placeholder
    "class P:\n    def f(self) -> int:\n        ...\n⟦⟧",  # a protocol's stub
    "class A:\n    @abstractmethod\n    def f(self) -> int:\n        x = 1\n⟦⟧",
    "@overload\ndef f(x: int) -> int:\n    x = 1\n⟦⟧",
    "def f(k):\n    if k:\n        return\n    k = 1\n⟦⟧",  # only bare returns
    "def f(k):\n    if k:\n        return None\n    k = 1\n⟦⟧",
])
def test_a_function_that_may_end_without_a_value_is_not_judged(marked: str) -> None:
    assert _need(marked) is None


def test_only_the_function_s_own_returns_count() -> None:
    """The `return` of a function nested in it gives that function's value."""
    marked = "def outer(xs):\n    def key(x):\n        return -x\n    xs.sort(key=key)\n⟦⟧"
    assert _need(marked) is None


# --- whether its end is reached ---------------------------------------------------------------

@pytest.mark.parametrize("ending", [
    "    return ans",
    "    raise ValueError(k)",
    "    if ans:\n        return ans\n    else:\n        return []",
    "    while True:\n        return ans",
    "    try:\n        return ans[0]\n    except IndexError:\n        return None",
    "    match ans:\n        case []:\n            return 0\n        case _:\n            return 1",
    "    sys.exit(1)",
    "    for a in ans:\n        pass\n    else:\n        return a",
])
def test_an_end_no_path_reaches_needs_no_return(ending: str) -> None:
    marked = f"def f(k):\n    if k == 0:\n        return []\n    ans = k\n{ending}\n⟦⟧"
    assert _need(marked) is None


@pytest.mark.parametrize("ending", [
    "    if ans:\n        return ans",  # no `else`
    "    for a in ans:\n        return a",  # the loop may not run
    "    while True:\n        if ans:\n            break\n        return ans",
    "    try:\n        return ans[0]\n    except IndexError:\n        pass",
    "    match ans:\n        case []:\n            return 0",  # no `case _:`
    "    with open(ans) as f:\n        f.read()",
])
def test_an_end_some_path_reaches_needs_a_return(ending: str) -> None:
    marked = f"def f(k):\n    if k == 0:\n        return []\n    ans = k\n{ending}\n⟦⟧"
    assert _need(marked) is not None


# --- where the span is ------------------------------------------------------------------------

def test_a_span_with_the_function_s_code_below_it_is_not_its_end() -> None:
    marked = "def f(k):\n    if k:\n        return 1\n⟦⟧\n    k += 1\n"
    assert _need(marked) is None


def test_comments_and_blank_lines_between_the_function_and_the_span_are_nothing() -> None:
    marked = MAXIMUM.replace("⟦⟧", "    # the largest k\n\n⟦⟧\n\ndef next_one():\n    pass\n")
    assert _need(marked) is not None


def test_the_innermost_function_that_needs_a_return_is_the_one_named() -> None:
    marked = ("def outer(n):\n    if n:\n        return 0\n    def inner(k) -> int:\n"
              "        k += 1\n⟦⟧")
    need = _need(marked)
    assert need is not None
    assert (need.name, need.indent) == ("inner", "        ")


def test_an_outer_function_that_needs_a_return_is_found_past_an_inner_one_that_ends() -> None:
    marked = ("def outer(n):\n    if n:\n        return 0\n    def inner(k):\n"
              "        return k\n⟦⟧")
    need = _need(marked)
    assert need is not None
    assert (need.name, need.indent) == ("outer", "    ")


def test_outside_any_function_nothing_is_needed() -> None:
    assert _need("x = 1\n⟦⟧") is None
    assert _need("def f():\n    return 1\n\nx = f()\n⟦⟧") is None


def test_a_document_that_does_not_parse_needs_nothing() -> None:
    assert _need("def f(k):\n    if k:\n        return 1\n    x = (\n⟦⟧") is None


# --- the value a function computes -----------------------------------------------------------

def _unused(marked: str, fill: str) -> list[str]:
    document, at = _document(marked)
    return document.unused_values(at, at, fill)


LARGEST = ("def largest(n):\n    if n < 2:\n        return 0\n    best = 1\n"
           "    for j in range(2, n):\n        if n % j == 0:\n            best = max(best, j)\n⟦⟧")


def test_a_value_updated_and_read_nowhere_else_is_unused_by_a_return_of_another() -> None:
    assert _unused(LARGEST, "    return False\n") == ["best"]
    assert _unused(LARGEST, "    return best\n") == []
    assert _unused(LARGEST, "    return best > 1\n") == []  # read, however


@pytest.mark.parametrize("update", [
    "out.append(j)", "out.extend([j])", "out[j] = 1", "out += [j]", "out = out + [j]",
])
def test_updates_in_place_and_by_assignment_are_no_use(update: str) -> None:
    marked = f"def f(n):\n    out = []\n    for j in range(n):\n        {update}\n⟦⟧"
    assert _unused(marked, "    return None\n") == ["out"]


def test_the_value_updated_last_comes_first() -> None:
    marked = ("def f(xs):\n    total = 0\n    seen = []\n    for x in xs:\n"
              "        seen.append(x)\n        total += x\n⟦⟧")
    assert _unused(marked, "    return 0\n") == ["total", "seen"]


@pytest.mark.parametrize("marked", [
    # read by a condition, a call, another value: used
    "def f(xs):\n    depth = 0\n    for x in xs:\n        depth += x\n        if depth < 0:\n"
    "            return 1\n⟦⟧",
    "def f(xs):\n    out = []\n    out.append(1)\n    print(out)\n⟦⟧",
    "def f(xs):\n    out = []\n    out.append(1)\n    n = len(out)\n    return n\n⟦⟧",
    # a closure reads it; declared global; a parameter; a loop's variable
    "def f(xs):\n    out = []\n    def g():\n        return out\n    out.append(1)\n⟦⟧",
    "def f(xs):\n    global out\n    out = []\n⟦⟧",
    "def f(out):\n    out.append(1)\n⟦⟧",
    "def f(xs):\n    for x in xs:\n        pass\n⟦⟧",
])
def test_a_value_something_reads_is_used(marked: str) -> None:
    assert _unused(marked, "    return 0\n") == []


# --- the hinted pass --------------------------------------------------------------------------

DOC = MAXIMUM.replace("⟦⟧", "|")


def _request(text: str = DOC, **options) -> InfillRequest:
    at = text.index("|")
    return InfillRequest(text.replace("|", ""), at, at, "python", "file:///maximum.py",
                         InfillOptions(**{"length": 8, "steps": 4, **options}))


def test_a_blank_fill_at_the_end_gives_way_to_one_begun_with_return(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return ans", request)
    result = engine.infill(request)
    best = result.candidates[0]
    assert (best.text, best.valid, best.path) == ("    return ans", True, RETURN)
    assert result.path == RETURN
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then one from given tokens


def test_a_fill_with_code_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A statement there may be the next step of a function still being written."""
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "    ans.sort()", "    return ans",
                                  request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    ans.sort()", DIFFUSION)
    assert runs == [DIFFUSION]


@pytest.mark.parametrize("then", ["    return", "    return (", "    return answer"])
def test_a_hinted_fill_that_gives_no_value_or_fails_the_checks_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", then, request)
    result = engine.infill(request)
    assert [c.path for c in result.candidates] == [DIFFUSION]
    assert result.candidates[0].text.strip() == ""
    assert runs[:2] == [DIFFUSION, REPAIR]  # tried, and left out


def test_with_blank_hints_off_the_blank_fill_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return ans", request,
                                  blank_hints=False)
    assert engine.infill(request).candidates[0].text.strip() == ""
    assert runs == [DIFFUSION]


def test_where_no_function_needs_a_value_no_return_is_begun(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = "def log(msg):\n    print(msg)\n|"
    request = _request(text)
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return msg", request)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


# --- a bare `return` where the function gives a value -----------------------------------------

def test_a_bare_return_in_a_function_that_gives_a_value_is_found() -> None:
    document, at = _document(MAXIMUM)
    assert "line 3" in document.bare_return(at, at, "    return\n")
    assert document.bare_return(at, at, "    return ans\n") is None
    assert document.bare_return(at, at, "    ans.sort()\n") is None
    log, at = _document("def log(msg):\n    print(msg)\n⟦⟧")
    assert log.bare_return(at, at, "    return\n") is None  # it gives none anywhere


def test_a_bare_return_gives_way_to_one_that_goes_on(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model wrote `return` where `return True` was (HumanEval/48/L3), in a function
    that returns a value elsewhere: one more pass begins with `return`, and the position
    after it may not end the line."""
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "    return", "    return ans",
                                  request)
    layouts = spied_layouts(monkeypatch)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == ("    return ans", True, RETURN)
    assert runs == [DIFFUSION, REPAIR]
    tok = engine.model.tokenizer
    after = len(tok.encode(layouts[1].head + "    return"))
    assert engine.model.pad_id in {t for p, t in layouts[1].banned if p == after}


def test_with_blank_hints_off_a_bare_return_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "    return", "    return ans",
                                  request, blank_hints=False)
    assert engine.infill(request).candidates[0].text == "    return"
    assert runs == [DIFFUSION]


def test_a_bare_return_where_no_value_is_given_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request("def log(msg):\n    print(msg)\n|")
    engine, runs = planted_engine(model_dir, monkeypatch, "    return", "    return msg",
                                  request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    return", DIFFUSION)
    assert runs == [DIFFUSION]


def test_inside_a_block_deeper_than_the_body_the_return_goes_out_to_the_body(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The blank fill holds the loop's indentation: the hint writes the body's, which
    ends the function; a cursor deeper than the body cannot move out."""
    text = ("def largest(xs):\n    if not xs:\n        return 0\n    top = xs[0]\n"
            "    for x in xs:\n        top = max(top, x)\n|")
    request = _request(text)
    engine, runs = planted_engine(model_dir, monkeypatch, "        ", "    return top", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    return top", RETURN)
    deeper = text.replace("|", "        |")
    request = _request(deeper)
    engine, runs = planted_engine(model_dir, monkeypatch, "", "return top", request)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


def test_at_the_start_of_a_line_of_code_the_return_goes_before_it(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cursor at the start of the next function's `def`: the fill is a line of its own
    above it, as a binding hint's is."""
    text = "def f(k):\n    if k:\n        return 1\n    k += 1\n|def g():\n    pass\n"
    request = _request(text)
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return k\n", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    return k\n", RETURN)


def _hinted_passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text each hinted pass of the engine begins with, listed as they run."""
    begun: list[str] = []
    real = passes_module.InfillRun._begun_with

    def spy(self, text, *args, **kwargs):
        begun.append(text)
        return real(self, text, *args, **kwargs)
    monkeypatch.setattr(passes_module.InfillRun, "_begun_with", spy)
    return begun


def test_a_return_of_another_value_than_the_one_computed_gives_way_to_that_one(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's `return False` leaves `best`, updated in the loop, unused: one more pass
    begins with `return best`."""
    request = _request(LARGEST.replace("⟦⟧", "|"))
    begun = _hinted_passes(monkeypatch)
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return best", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    return best", RETURN)
    assert begun == ["    return"]  # it wrote `best` itself: no second pass
    begun.clear()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return False", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    return best", RETURN)
    assert begun == ["    return", "    return best"]


def test_past_the_latency_target_no_second_pass_begins_the_computed_value(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill with a latency target runs the unused value's pass only where it still
    fits: here none is left once the first hinted pass has run."""
    request = _request(LARGEST.replace("⟦⟧", "|"))
    begun = _hinted_passes(monkeypatch)
    monkeypatch.setattr(passes_module.InfillRun, "affords", lambda self, steps: not begun)
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return False", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    return False", RETURN)
    assert begun == ["    return"]


def test_the_position_after_the_hinted_return_may_not_end_the_line(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model wrote a bare `return` where `return times` was: what follows the hint is
    code, so the position after it may hold no pad and no line break."""
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    return ans", request)
    layouts = spied_layouts(monkeypatch)
    engine.infill(request)
    hinted = [layout for layout in layouts if layout.init_ids is not None][0]
    tok = engine.model.tokenizer
    after = len(tok.encode(hinted.head + "    return"))
    banned = {token for position, token in hinted.banned if position == after}
    assert engine.model.pad_id in banned
    assert tok.line_break_ids <= banned
    assert not any(position != after for position, _ in hinted.banned)
