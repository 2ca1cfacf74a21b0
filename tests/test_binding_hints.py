"""Specification of binding hints (`bindingHints`, passes.InfillRun.bind_hint): where the
code below a Python span reads a name that nothing binds before it, and the best fill
leaves it so, one more pass begins the fill with the binding and offers it first.

Documents mark the span as ⟦old text⟧ (⟦⟧ for an insertion point), as in
test_python_names.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fakes import Planted, planted_engine

from dlm_lsp import passes as passes_module
from dlm_lsp.binding_hints import (
    HeaderSlot,
    Hint,
    begin_binding,
    binding_hint,
    header_slot,
    hint_place,
    plain_header,
)
from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.fill import describe_steps
from dlm_lsp.repair import BINDING, DIFFUSION, HEADER, REPAIR
from dlm_lsp.validation import parsed_document


def _wanted(marked: str, fill: str = "") -> list[str]:
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    document = parsed_document(marked.replace("⟦", "").replace("⟧", ""), "python")
    return document.wanted(start, end, fill)


COLLECT = "def collect(xs):\n⟦⟧    for x in xs:\n        out.append(x)\n    return out\n"


def test_a_name_the_code_below_reads_and_nothing_binds_is_wanted() -> None:
    assert _wanted(COLLECT) == ["out"]
    assert _wanted(COLLECT, "    out = []\n") == []  # the fill binds it
    assert _wanted(COLLECT, "    seen = set()\n") == ["out"]


def test_a_local_the_code_below_reads_before_its_binding_is_wanted() -> None:
    marked = ("def f(s):\n⟦⟧\n    while not ok(s[b:]):\n        b += 1\n    return b\n"
              "\n\ndef ok(t):\n    return t\n")
    assert _wanted(marked) == ["b"]
    assert _wanted(marked, "    b = 0") == []
    # read by a loop's body whenever it runs, before the body binds it
    marked = ("def f(numbers):\n⟦⟧\n    for n in numbers:\n        if top is None:\n"
              "            top = n\n    return top\n")
    assert _wanted(marked) == ["top"]
    assert _wanted(marked, "    top = None") == []


@pytest.mark.parametrize("marked", [
    # bound above the span, or a parameter
    "def f(xs, out):\n⟦⟧    out.append(xs)\n",
    "def f(xs):\n    out = []\n⟦⟧    out.append(xs)\n",
    # a function the code calls, one still to be written; a global defined elsewhere
    "def f(xs):\n⟦⟧    return helper(xs)\n",
    "def f(xs):\n⟦⟧    return LIMIT + xs\n\n\nLIMIT = 3\n",
    # a loop's later iterations see what its body binds below a read made on a condition
    "def f(xs):\n    total = 0\n⟦⟧    for i, x in enumerate(xs):\n        if i:\n"
    "            total += prev\n        prev = x\n",
    # outside a function the check is not made
    "⟦⟧\nprint(out)\n",
])
def test_nothing_is_wanted_where_a_binding_may_come_first(marked: str) -> None:
    assert _wanted(marked) == []


def test_a_name_only_an_augmented_assignment_binds_is_wanted() -> None:
    """`ans += [...]` in a loop reads `ans` first (HumanEval/147 with `ans = []` gone)."""
    marked = ("def f(n):\n⟦⟧\n    for i in range(n):\n        if i % 3:\n"
              "            ans += [i]\n    return len(ans)\n")
    assert _wanted(marked) == ["ans"]
    assert _wanted(marked, "    ans = []") == []


def test_the_hint_is_an_import_for_a_standard_module_whose_attributes_are_read() -> None:
    assert binding_hint("math", "    return math.sqrt(x)\n") == "import math"
    assert binding_hint("out", "    out.append(x)\n") == "out ="
    assert binding_hint("collections", "    c = collections.Counter(x)\n") == \
        "import collections"
    # a list named like a module: what it answers to is a list's
    assert "queue" in sys.stdlib_module_names
    assert binding_hint("queue", "    queue.append(x)\n") == "queue ="
    assert binding_hint("math", "    return math.cube(x)\n") == "math ="  # no such function
    assert binding_hint("math", "    return math + 1\n") == "math ="  # read, no attribute
    # a module in Python whose function is named like a string's method: its source says
    assert binding_hint("re", "    words = re.split(r'\\s+', s)\n") == "import re"
    assert binding_hint("hashlib", "    return hashlib.md5(b).hexdigest()\n") == \
        "import hashlib"  # bound by spelling, through globals()
    assert binding_hint("code", "    name = code.co_filename\n") == "code ="  # a code object


# --- in the engine ---------------------------------------------------------------------------

DOC = COLLECT.replace("⟦⟧", "|")


def _request(**options) -> InfillRequest:
    at = DOC.index("|")
    return InfillRequest(DOC.replace("|", ""), at, at, "python", "file:///collect.py",
                         InfillOptions(**{"length": 8, "steps": 4, **options}))


def _engine(model_dir: Path, **settings) -> Engine:
    return Engine(ServerConfig(model=str(model_dir), device="cpu", **settings))


def _planted(model_dir: Path, monkeypatch: pytest.MonkeyPatch, first: str, then: str,
             request: InfillRequest | None = None, **settings):
    """An engine whose model writes `first` until a pass starts from given tokens (the
    hinted one), then `then`; the request; and the list of its denoising runs."""
    request = request or _request()
    engine, runs = planted_engine(model_dir, monkeypatch, first, then, request, **settings)
    return engine, request, runs


def test_a_fill_that_leaves_the_name_unbound_gives_way_to_one_begun_with_its_binding(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the line that binds `out` comes only from a pass begun with `out =`
    engine, request, runs = _planted(model_dir, monkeypatch, "    seen = 0\n", "    out = []\n")
    result = engine.infill(request)
    best = result.candidates[0]
    assert (best.text, best.valid, best.path) == ("    out = []\n", True, BINDING)
    assert result.path == BINDING
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then one from given tokens


def test_a_hint_s_steps_are_counted_as_the_hint_s_not_as_repair(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fill` said `8 steps (4, stopped early, + 4 in repair)` of a fill no repair round
    touched (`repairRounds` 0): the 4 were a hint pass's."""
    engine, request, runs = _planted(model_dir, monkeypatch, "    seen = 0\n", "    out = []\n")
    result = engine.infill(request)
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then the hinted one
    assert (result.repair_rounds, result.repair_steps) == (0, 0)
    assert 0 < result.hint_steps < result.steps
    first = result.steps - result.hint_steps
    assert describe_steps(result).startswith(f"{result.steps} steps ({first}")
    assert describe_steps(result).endswith(f" + {result.hint_steps} in hints)")


def test_a_fill_that_binds_the_name_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, request, runs = _planted(model_dir, monkeypatch, "    out = []\n", "    out = []\n")
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    out = []\n", DIFFUSION)
    assert runs == [DIFFUSION]


def test_a_hinted_fill_that_fails_the_checks_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, request, runs = _planted(model_dir, monkeypatch, "    seen = 0\n", "    out = (\n")
    result = engine.infill(request)
    assert [c.path for c in result.candidates] == [DIFFUSION]
    assert result.candidates[0].text == "    seen = 0\n"
    assert runs == [DIFFUSION, REPAIR]  # tried, and left out


def test_with_binding_hints_off_the_first_fill_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine, request, runs = _planted(model_dir, monkeypatch, "    seen = 0\n", "    out = []\n",
                                     binding_hints=False)
    assert engine.infill(request).candidates[0].text == "    seen = 0\n"
    assert runs == [DIFFUSION]


def test_after_code_on_the_line_no_binding_is_begun(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`    x = |` asks for a value: the fill belongs to that line."""
    text = "def collect(xs):\n    x = \n    for x in xs:\n        out.append(x)\n"
    at = text.index("x = ") + len("x = ")
    request = InfillRequest(text, at, at, "python", "file:///c.py",
                            InfillOptions(length=4, steps=4))
    engine, request, runs = _planted(model_dir, monkeypatch, "0", "0", request)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


def test_a_hinted_fill_that_unbinds_what_the_first_fill_bound_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines below read `math` and `x`; the first fill imports `math`: a fill begun
    with `x =` that no longer imports it mends nothing."""
    text = "def f(q):\n\n    return x + math.sqrt(q)\n"
    at = text.index("\n\n") + 1
    request = InfillRequest(text, at, at, "python", "file:///f.py",
                            InfillOptions(length=8, steps=4))
    engine, request, runs = _planted(model_dir, monkeypatch, "    import math", "    x = 1",
                                     request)
    result = engine.infill(request)
    assert [(c.text, c.path) for c in result.candidates] == [("    import math", DIFFUSION)]
    assert runs == [DIFFUSION, REPAIR]  # the hinted pass ran, and was left out


def test_a_fill_that_binds_one_of_two_names_gives_way_to_one_that_binds_both(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines below read `i` and `j`; the first fill binds `i` alone (HumanEval/72)."""
    text = "def f(q):\n\n    while i < j:\n        i += 1\n    return i\n"
    at = text.index("\n\n") + 1
    request = InfillRequest(text, at, at, "python", "file:///f.py",
                            InfillOptions(length=16, steps=4))
    engine, request, runs = _planted(model_dir, monkeypatch, "    i = 0",
                                     "    i, j = 0, len(q)", request)
    result = engine.infill(request)
    assert [(c.text, c.path) for c in result.candidates] == [("    i, j = 0, len(q)", BINDING)]


# --- a block's header -------------------------------------------------------------------------

def _slot(marked: str) -> HeaderSlot | None:
    text = marked.replace("⟦⟧", "")
    at = marked.index("⟦")
    return header_slot(text, text.rfind("\n", 0, at) + 1, text[at:])


COUNT = ("def count(s):\n    n = 0\n⟦⟧        if c == '(':\n            n += 1\n"
         "    return n\n")


def test_a_line_above_code_indented_deeper_than_a_statement_there_is_a_header() -> None:
    slot = _slot(COUNT)
    assert slot == HeaderSlot("    ", "        if c == '(':\n            n += 1",
                              "    return n\n", "n = 0", "def count(s):")
    # one level in where the line above opens a block, in the document's own unit
    slot = _slot("def f(rows):\n  for row in rows:\n⟦⟧      print(cell)\n")
    assert slot is not None and slot.indent == "    "


def test_a_line_beside_a_return_that_code_below_follows_deeper_is_a_header() -> None:
    """Code beside the `return` could never run: the `if` has ended, and the line is
    the header of the block below, beside the `if` (HumanEval's two-space bodies)."""
    slot = _slot("def f(n):\n    if n < 2:\n      return False\n⟦⟧      if n % k == 0:\n"
                 "        return False\n    return True\n")
    assert slot is not None and slot.indent == "    "


@pytest.mark.parametrize("marked", [
    "def f(xs):\n⟦⟧    return xs\n",  # the body's first line
    "def f(xs):\n    y = 1\n⟦⟧    return xs + y\n",  # beside the statement above
    "def f(xs):\n    for x in xs:\n⟦⟧        print(x)\n",  # the loop's body
    "def f(xs):\n    for x in xs:\n        print(x)\n⟦⟧    return xs\n",  # after a block
    "def f(xs):\n    if xs:\n        return 1\n⟦⟧    return xs\n",  # after a return
])
def test_a_line_where_a_statement_fits_is_no_header(marked: str) -> None:
    assert _slot(marked) is None


def test_a_header_binds_the_names_its_block_reads_in_a_loop() -> None:
    slot = _slot(COUNT)
    assert begin_binding(["c"], "c", "", slot) == Hint("for c in", ("c",))
    pairs = _slot("def f(xs):\n    best = 0\n⟦⟧        best = max(best, i * x)\n"
                  "    return best\n")
    assert begin_binding(["i", "x"], "i", "", pairs) == Hint("for i, x in", ("i", "x"))
    # a standard module the block reads is imported, not looped over
    roots = _slot("def f(xs):\n    out = []\n⟦⟧        out.append(math.sqrt(x))\n"
                  "    return out\n")
    assert begin_binding(["math", "x"], "math", roots.block, roots) == Hint("for x in", ("x",))
    # nothing wanted that the block reads: no header to guess
    assert begin_binding(["total"], "total", "", slot) is None


def test_a_header_whose_function_the_code_after_calls_is_its_def() -> None:
    marked = ("def fib_primes(n):\n    n += 1\n⟦⟧        return all(k % d for d in range(2, k))\n"
              "    return [k for k in range(n) if is_prime(k)]\n")
    slot = _slot(marked)
    assert begin_binding(["k", "is_prime"], "k", "", slot) == Hint("def is_prime(k):",
                                                              ("is_prime", "k"))
    # the code below calling a function nothing defines is wanted only when asked for
    text = marked.replace("⟦⟧", "")
    at = marked.index("⟦")
    document = parsed_document(text, "python")
    fill = hint_place(text, at, at).empty
    assert fill == "    if True:\n"
    assert document.wanted(at, at, fill) == ["k"]
    assert document.wanted(at, at, fill, calls=True) == ["k", "is_prime"]


@pytest.mark.parametrize("marked, names, begun", [
    # beside a `try:`, its handler's `as`
    ("def f(g):\n    try:\n        return g()\n⟦⟧        log(exc)\n", ["exc"], "except"),
    # in a class, a method, whose parameters the block reads
    ("class A:\n    x = 1\n⟦⟧        return self.x + base\n", ["self", "base"], "def"),
    # read only after the block: a class, or what a `with` gave, whose attributes are read
    ("def f():\n    n = 0\n⟦⟧        pass\n    return Proto()\n", ["Proto"], "class Proto"),
    ("def f(t):\n    n = 0\n⟦⟧        t()\n    return cm.exception\n", ["cm"], "with"),
    # a function called after it whose block reads nothing unbound: its parameters unsaid
    ("def f():\n    n = 0\n⟦⟧        return 1\n    return g(n)\n", ["g"], "def g("),
])
def test_a_header_s_kind_follows_the_code_around_it(marked: str, names: list[str],
                                                    begun: str) -> None:
    hint = begin_binding(names, names[0], "", _slot(marked))
    assert hint is not None and hint.text == begun
    assert set(hint.names) == set(names)


def test_a_statement_s_line_binds_every_name_wanted() -> None:
    """One line is missing, so it binds all the code below reads unbound (`begin, end =
    -1., 1.`), but a module, which it imports alone where the best fill left it."""
    assert begin_binding(["out"], "out", "    out.append(1)\n", None) == Hint("out =", ("out",))
    assert begin_binding(["begin", "end"], "end", "    while begin < end:\n", None) == Hint(
        "begin, end =", ("begin", "end"))
    below = "    return math.sqrt(x)\n"
    assert begin_binding(["math", "x"], "math", below, None) == Hint("import math", ("math",))
    assert begin_binding(["math", "x"], "x", below, None) == Hint("x =", ("x",))


def test_a_fill_that_leaves_a_header_s_loop_variable_unbound_gives_way_to_a_loop(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`if s:` parses and passes the checks, but the block below still reads `c`: the
    hinted pass begins `for c in` on the header's indentation."""
    text = COUNT.replace("⟦⟧", "")
    at = COUNT.index("⟦")
    request = InfillRequest(text, at, at, "python", "file:///count.py",
                            InfillOptions(length=8, steps=4))
    engine, request, runs = _planted(model_dir, monkeypatch, "    if s:\n",
                                     "    for c in s:\n", request)
    begun = []
    real = passes_module.denoise

    def spy(model, layout, *args):
        if layout.init_ids is not None:
            begun.append(model.tokenizer.decode(
                [i for i in layout.init_ids if i != model.mask_id]))
        return real(model, layout, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    result = engine.infill(request)
    assert [(c.text, c.path) for c in result.candidates] == [("    for c in s:\n", BINDING)]
    # after the prefix's line break, which the span's tokens begin with (the head)
    assert begun == ["\n    for c in"]
    assert runs == [DIFFUSION, REPAIR]


def test_a_hinted_fill_that_fails_a_check_is_repaired_once(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`for c in n:` binds `c` but loops over a number: one repair round writes the
    iterable again, and the mended fill is offered as the binding's."""
    text = COUNT.replace("⟦⟧", "")
    at = COUNT.index("⟦")
    request = InfillRequest(text, at, at, "python", "file:///count.py",
                            InfillOptions(length=8, steps=4))
    engine = _engine(model_dir)
    mended = Planted(engine, request, good="    for c in s:\n").targets[True]
    planted = Planted(engine, request, broken="    if s:\n", good="    for c in n:\n")
    begun = []
    real = passes_module.denoise

    def spy(model, layout, *args):
        if layout.init_ids is not None:
            begun.append(layout.init_ids)
            planted.fixed = True
            if len(begun) == 2:  # the repair round
                planted.targets[True] = mended
        return real(model, layout, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    result = engine.infill(request)
    assert [(c.text, c.path) for c in result.candidates] == [("    for c in s:\n", BINDING)]
    assert len(begun) == 2


def test_the_repair_of_a_hinted_fill_keeps_the_hint(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`for c in n:` loops over a number: its repair round writes the iterable again and
    never the hint `for c in` itself, which the code below asks for (written again, it
    came back as `for s in l:`, which binds no `c`)."""
    text = COUNT.replace("⟦⟧", "")
    at = COUNT.index("⟦")
    request = InfillRequest(text, at, at, "python", "file:///count.py",
                            InfillOptions(length=8, steps=4))
    engine = _engine(model_dir)
    planted = Planted(engine, request, broken="    if s:\n", good="    for c in n:\n")
    begun = []
    real = passes_module.denoise

    def spy(model, layout, *args):
        if layout.init_ids is not None:
            begun.append(layout)
            planted.fixed = True
        return real(model, layout, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    engine.infill(request)
    hinted, repaired = begun
    tok, mask = engine.model.tokenizer, engine.model.mask_id
    hint = len(tok.encode(hinted.head + "    for c in"))
    assert mask not in repaired.init_ids[:hint], "the hint's positions stay as written"
    assert mask in repaired.init_ids[hint:], "what the model wrote after it is masked"


def test_the_code_after_a_header_s_block_is_that_of_the_block_holding_it() -> None:
    """A name the next function calls is no `def` this header could be."""
    slot = _slot("def f(xs):\n    n = 0\n⟦⟧        n += x\n    return n\n\n\ndef g():\n"
                 "    return h()\n")
    assert slot is not None and slot.after == "    return n\n\n"
    assert begin_binding(["x", "h"], "x", "", slot) == Hint("for x in", ("x",))


def test_a_fill_asked_for_one_pass_alone_gets_no_hint(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No repair rounds and no fallback: one denoising pass, as a step budget's
    benchmarks ask; the hint's pass is one more."""
    engine, request, runs = _planted(model_dir, monkeypatch, "    seen = 0\n", "    out = []\n",
                                     _request(repair_rounds=0, fallback=False))
    assert engine.infill(request).candidates[0].text == "    seen = 0\n"
    assert runs == [DIFFUSION]


# --- a header where the fill was blank (`blankHints`, InfillRun.blank_hint) ----------------------

def test_a_block_that_reads_no_name_to_bind_is_headed_by_a_condition() -> None:
    slot = _slot("def f(s, d):\n    for c in s:\n⟦⟧            print(d[c])\n")
    assert slot is not None and plain_header(slot) == "if"


def test_in_a_class_a_block_that_reads_no_name_to_bind_is_a_method() -> None:
    slot = _slot('class A:\n    """An A."""\n⟦⟧        pass\n')
    assert slot is not None and plain_header(slot) == "def"


LOOKUP = "def f(s, d):\n    out = 0\n    for c in s:\n|\n            out += d[c]\n    return out\n"


def _blank_request(text: str = LOOKUP) -> InfillRequest:
    at = text.index("|")
    return InfillRequest(text.replace("|", ""), at, at, "python", "file:///f.py",
                         InfillOptions(length=12, steps=4))


def test_a_blank_fill_above_a_deeper_block_gives_way_to_one_begun_with_its_header(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _blank_request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "        if c in d:", request)
    result = engine.infill(request)
    assert [(c.text, c.path) for c in result.candidates][0] == ("        if c in d:", HEADER)
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then one from given tokens


def test_a_header_hinted_where_the_fill_was_blank_must_pass_the_checks(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _blank_request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "        if c in d", request)
    result = engine.infill(request)
    assert [c.path for c in result.candidates] == [DIFFUSION]
    assert runs[:2] == [DIFFUSION, REPAIR]  # tried (and repaired once), left out


def test_a_blank_fill_in_a_class_above_a_deeper_block_gives_way_to_a_method(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _blank_request("class A:\n    def g(self):\n        return 1\n|\n        pass\n")
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    def f(self):", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("    def f(self):", HEADER)


def test_with_blank_hints_off_a_blank_fill_above_a_deeper_block_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _blank_request()
    engine, runs = planted_engine(model_dir, monkeypatch, "", "        if c in d:", request,
                                  blank_hints=False)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


def test_a_blank_fill_where_a_statement_fits_gets_no_header(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _blank_request("def f(s, d):\n    out = 0\n|\n    return out\n")
    engine, runs = planted_engine(model_dir, monkeypatch, "", "    if s:", request)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]
