"""Specification of the names check (dlm_lsp/python_names.py, python_calls.py): a Python
fill that reads a name nothing in the document defines, or calls a function with
arguments it cannot take, is rejected, as a syntax error is, and repaired.

Documents mark the span as ⟦old text⟧ (⟦⟧ for an insertion point), as in
test_validation.  The check errs toward passing: a name the document may define, in any
way a reading can see, is taken to exist.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import Planted, fixed_on_repair

import dlm_lsp.passes as passes_module
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.validation import Validation, parsed_document, validate_fill


def _fill(marked: str, fill: str, shown: str = "") -> Validation:
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    text = marked.replace("⟦", "").replace("⟧", "")
    document = parsed_document(text, "python")
    return document.names_checked(start, end, fill, document.validate(start, end, fill),
                                  shown)


FUNCTION = "import os\n\n\ndef total(xs, scale=1):\n    result = 0\n    ⟦⟧\n    return result\n"


def test_a_fill_that_reads_a_name_nothing_defines_is_rejected_at_the_name() -> None:
    result = _fill(FUNCTION, "result += summ(xs)")
    assert result.valid is False
    assert "'summ', defined nowhere in the document" in result.reason
    at = FUNCTION.index("⟦") + len("result += ")
    assert result.new_ranges == ((at, at + len("summ")),)  # what repair re-masks
    assert result.new_errors == ((5, 14),)  # line 6, column 15 as the reason says
    assert "line 6, column 15" in result.reason


def test_a_fill_that_completes_a_typed_word_into_a_name_nothing_defines_is_rejected() -> None:
    """The word before the cursor is the fill's too: `st` completed with `h` reads `sth`,
    a NameError, and it passed as valid (a completion item offered it) because the
    name began before the fill."""
    marked = "def f(n):\n    return n + st⟦⟧\n"
    result = _fill(marked, "h")
    assert result.valid is False and "'sth', defined nowhere" in result.reason
    at = marked.index("st⟦")
    assert result.new_ranges == ((at, at + len("sth")),)  # the head's token is re-masked too
    assert "line 2, column 18" in result.reason  # where the fill begins
    assert _fill(marked, "r(n)").valid  # `str(n)`: a builtin
    assert _fill("def f(n, start):\n    return n + st⟦⟧\n", "art").valid


@pytest.mark.parametrize("fill", [
    "result += sum(xs) * scale",  # a builtin, the function's parameters
    "result = os.path.join(xs)",  # an import; `path` and `join` are attributes
    "result = total(xs[1:])",  # the function itself
    "result = [x * scale for x in xs]",  # a comprehension's variable
    "for x in xs: result += x",  # a name the fill binds itself
    "result = LIMIT",  # a global bound below the function, in the chunk
    "result = __file__",  # a module's dunder
    "result = sum(y for y in xs if (z := y) > 0) + z",  # a walrus binds outside
])
def test_names_something_in_the_document_binds_are_accepted(fill: str) -> None:
    marked = FUNCTION + "\n\nLIMIT = 10\n"
    result = _fill(marked, fill)
    assert result.valid, result.reason


def test_a_name_bound_only_in_another_function_is_rejected() -> None:
    """Each function is a scope: `i` of the loop in `first` is nothing in `second`."""
    marked = ("def first(xs):\n    for i in xs:\n        print(i)\n\n\n"
              "def second(xs):\n    ⟦⟧\n    return xs\n")
    assert _fill(marked, "xs = xs[i:]").valid is False
    assert _fill(marked, "xs = xs[1:]").valid


def test_a_global_another_function_declares_and_assigns_is_accepted() -> None:
    marked = ("def setup():\n    global CACHE\n    CACHE = {}\n\n\n"
              "def lookup(key):\n    ⟦⟧\n    return key\n")
    assert _fill(marked, "key = CACHE[key]").valid
    assert _fill(marked, "key = STORE[key]").valid is False


def test_names_of_a_class_count_in_its_methods() -> None:
    """Python does not resolve them there; the check, which only errs toward passing,
    does, so that a method reading a class attribute bare is never a false alarm."""
    marked = "class Box:\n    size = 3\n\n    def area(self):\n        ⟦⟧\n"
    assert _fill(marked, "return size * size").valid


def test_a_name_used_far_from_the_span_is_taken_to_exist() -> None:
    """Outside the statements around the span, a global defined in code further off is
    found, a name read only as an attribute is not."""
    filler = "".join(f"x{i} = {i}\n" for i in range(5))
    far = f"from helpers import scale\n{filler}\ndef f(v):\n    ⟦⟧\n"
    assert _fill(far, "return scale(v)").valid
    only_attribute = f"import helpers\nhelpers.scale(1)\n{filler}\ndef f(v):\n    ⟦⟧\n"
    result = _fill(only_attribute, "return scale(v)")
    assert result.valid is False and "'scale'" in result.reason


FAR = "".join(f"x{i} = {i}\n" for i in range(3))  # statements between, out of the chunk


def test_a_name_only_a_function_far_off_binds_is_rejected() -> None:
    """A file of several functions: `a`, a parameter of one further down, and `result`,
    a local of one further up, are nothing in `is_even` (a NameError when it runs).  As
    words of the document they passed."""
    marked = ("import os\n\n\ndef listing(folder):\n    result = os.listdir(folder)\n"
              f"    return result\n\n\n{FAR}\n\ndef is_even(n):\n    return ⟦n % 2 == 0⟧\n\n\n"
              f"{FAR}\n\ndef add(a, b):\n    return a + b\n")
    for fill in ("a", "result", "a + result"):
        verdict = _fill(marked, fill)
        assert verdict.valid is False and "defined nowhere" in verdict.reason, fill
    assert _fill(marked, "n & 1 == 0").valid
    assert _fill(marked, "listing(os.sep) and add(n, 1)").valid  # the module's own


@pytest.mark.parametrize("far", [
    "try:\n    import json as codec\nexcept ImportError:\n    codec = None\n",
    "if DEBUG:\n    codec = 1\nelse:\n    codec = 2\n",
    "for codec in range(3):\n    pass\n",
    "with open('f') as codec:\n    pass\n",
    "@decorate\ndef codec():\n    pass\n",
    "class codec:\n    pass\n",
    "codec: int = 3\n",
    "def setup():\n    global codec\n    codec = 1\n",  # a global a function sets
    "def broken(<FILL>):\n    codec = 1\n",  # damage: its words may be names
])
def test_a_name_the_module_binds_far_off_in_any_way_is_accepted(far: str) -> None:
    marked = f"{far}\n\n{FAR}\n\ndef use(n):\n    return ⟦n⟧\n"
    assert _fill(marked, "codec").valid, far
    assert _fill(marked, "codex").valid is False


def test_a_function_the_user_s_code_calls_and_has_yet_to_write_is_taken_to_exist() -> None:
    marked = "def report(items):\n    total = summarize(items)\n    ⟦⟧\n    return total\n"
    assert _fill(marked, "total += summarize(items[1:])").valid
    assert _fill(marked, "total += tally(items)").valid is False


def test_a_value_the_lines_below_read_unbound_is_still_the_fill_s_error() -> None:
    """The fill should have bound `c` (`for c in s:`); reading it is a NameError."""
    marked = "def depth(s):\n    n = 0\n    ⟦⟧\n        n += c == '('\n    return n\n"
    assert _fill(marked, "for c in s:").valid
    assert _fill(marked, "if c == '(':").valid is False


def test_a_rewrite_may_keep_the_names_the_user_wrote() -> None:
    marked = "def f(v):\n    return ⟦injected(v)⟧\n"
    assert _fill(marked, "injected(v) + 1").valid
    assert _fill(marked, "other(v)").valid is False


@pytest.mark.parametrize("dynamic", ["from helpers import *", "globals()['name'] = 1",
                                     "exec(SOURCE)", "__builtins__.name = 1"])
def test_code_that_defines_names_out_of_sight_turns_the_check_off(dynamic: str) -> None:
    marked = f"{dynamic}\n\n\ndef f(v):\n    ⟦⟧\n"
    assert _fill(marked, "return name(v)").valid


def test_a_notebook_cell_may_read_names_its_other_cells_define() -> None:
    cell = "⟦⟧\n"
    assert _fill(cell, "frame = load(path)").valid is False
    assert _fill(cell, "frame = load(path)", shown="from io_tools import load\npath = 'x'").valid


def test_a_syntax_error_keeps_its_own_verdict() -> None:
    result = _fill(FUNCTION, "result += summ(xs")
    assert result.valid is False and "syntax error" in result.reason


def test_other_languages_are_not_checked_for_names() -> None:
    text = "function f(xs) {\n  \n}\n"
    at = text.index("  \n") + 2
    document = parsed_document(text, "javascript")
    fill = "return summ(xs);"
    assert document.names_checked(at, at, fill, document.validate(at, at, fill)).valid


def test_the_plain_syntax_check_knows_nothing_of_names() -> None:
    """`validate_fill` (and `ParsedDocument.validate`) stay the syntax's verdict: the
    names are the engine's further check, with its setting."""
    text = FUNCTION.replace("⟦⟧", "")
    at = FUNCTION.index("⟦")
    assert validate_fill(text, at, at, "result += summ(xs)", "python").valid


# --- calls the callee cannot take (python_calls) --------------------------------------------

CALLS = "def factorize(n, base=2):\n    out = []\n    ⟦⟧\n    return out\n"


@pytest.mark.parametrize("fill, why", [
    ("out = factorize(n, 2, 3)", "factorize(): too many positional arguments"),
    ("out = factorize(base=3)", "factorize(): missing a required argument: 'n'"),
    ("out = factorize(n, power=3)", "factorize(): got an unexpected keyword argument 'power'"),
    ("out = abs(n, n, 1)", "abs(): too many positional arguments"),
    ("out = sorted(out, len)", "sorted(): too many positional arguments"),
])
def test_a_call_its_callee_cannot_take_is_rejected_at_the_callee(fill: str, why: str) -> None:
    result = _fill(CALLS, fill)
    assert result.valid is False and f"fill calls {why}" in result.reason
    at = CALLS.index("⟦") + fill.index("(") - len(fill.split("(")[0].split()[-1])
    assert result.new_ranges[0][0] == at and result.names == (fill.split("(")[0].split()[-1],)


@pytest.mark.parametrize("fill", [
    "out = factorize(n)", "out = factorize(n, base=3)", "out = factorize(*out)",
    "out = factorize(**options)", "out = sum(out, 0)", "out = sorted(out, key=len)",
    "out = int(n, 2, 3)",  # a type: its signature is not known, so it is not checked
    "out = out.append(1, 2)",  # a method: its class is not known
])
def test_calls_that_fit_or_that_cannot_be_judged_pass(fill: str) -> None:
    assert _fill(CALLS + "options = {}\n", fill).valid


@pytest.mark.parametrize("rebinding", [
    "factorize = print\n",  # bound another way too
    "import functools\n\n\n@functools.cache\ndef factorize(n):\n    return n\n",
])
def test_a_callee_bound_more_than_once_or_decorated_is_not_judged(rebinding: str) -> None:
    marked = rebinding + "\n\ndef f(n):\n    ⟦⟧\n    return n\n"
    if "@" not in rebinding:
        marked = "def factorize(n):\n    return n\n\n\n" + marked
    assert _fill(marked, "n = factorize(n, 2)").valid


def test_a_builtin_the_document_may_rebind_far_off_is_not_judged() -> None:
    filler = "".join(f"x{i} = {i}\n" for i in range(5))
    marked = f"from helpers import len\n{filler}\ndef f(v):\n    ⟦⟧\n    return v\n"
    assert _fill(marked, "v = len(v, 1)").valid
    assert _fill(marked.replace("from helpers import len", "import os"), "v = len(v, 1)"
                 ).valid is False


def test_a_method_is_not_taken_for_the_function_a_bare_call_names() -> None:
    marked = "class Box:\n    def area(self):\n        return 1\n\n    def f(self):\n        ⟦⟧\n"
    assert "calls" not in _fill(marked, "return area()").reason


# --- in the engine: repair, and the setting -------------------------------------------------

DOC = "def add(a, b):\n    return |\n\nprint(add(1, 2))\n"


def _request(**options) -> InfillRequest:
    at = DOC.index("|")
    return InfillRequest(DOC.replace("|", ""), at, at, "python", "file:///add.py",
                         InfillOptions(**{"length": 8, "steps": 4, **options}))


def test_repair_rewrites_a_name_nothing_defines(model_dir: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu"))
    request = _request()
    runs = fixed_on_repair(monkeypatch, Planted(engine, request, broken="a + bb", good="a + b"))
    result = engine.infill(request)
    best = result.candidates[0]
    assert (best.text, best.valid, best.path) == ("a + b", True, REPAIR)
    assert runs == [DIFFUSION, REPAIR]


def test_with_check_names_off_such_a_fill_passes(model_dir: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", check_names=False))
    request = _request()
    runs = fixed_on_repair(monkeypatch, Planted(engine, request, broken="a + bb", good="a + b"))
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == ("a + bb", True, DIFFUSION)
    assert runs == [DIFFUSION]


def test_with_nothing_better_the_fill_is_returned_marked_invalid_with_the_reason(
        model_dir: Path) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", fallback=False))
    request = _request(repair_rounds=0)
    Planted(engine, request, broken="a + bb", good="a + bb")
    result = engine.infill(request)
    assert result.candidates[0].valid is False
    assert "'bb', defined nowhere" in result.syntax


def test_a_repair_that_breaks_the_syntax_gives_back_the_fill_that_parsed(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rewriting the name can go wrong (`ifgpa > 3.0:` for `if gpa > 3.0:`): of fills none
    of which is valid, one that parses is offered before one that does not."""
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", fallback=False))
    request = _request()
    runs = fixed_on_repair(monkeypatch, Planted(engine, request, broken="a + bb", good="a + (b"))
    result = engine.infill(request)
    best = result.candidates[0]
    assert runs == [DIFFUSION, REPAIR, REPAIR]  # the broken rewrite is repaired in vain
    assert (best.text, best.valid, best.check.names) == ("a + bb", False, ("bb",))


def test_a_fill_that_parses_ranks_before_a_retry_that_does_not(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", repair_rounds=0))
    request = _request()
    planted = Planted(engine, request, broken="a + bb", good="a + (b")
    real = passes_module.denoise

    def spy(model, layout, cfg, seed, *args):
        planted.fixed = cfg.strategy == "left-to-right"  # the retry writes broken syntax
        return real(model, layout, cfg, seed, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    result = engine.infill(request)
    assert [c.path for c in result.candidates][:1] == [DIFFUSION]
    assert result.candidates[0].text == "a + bb"
