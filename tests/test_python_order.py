"""Specification of the order check (dlm_lsp/python_order.py): a Python fill that reads a
function's local variable before any binding of it could have run fails at once with an
UnboundLocalError, and is rejected and repaired as a name nothing defines is.

Documents mark the span as ⟦old text⟧ (⟦⟧ for an insertion point), as in
test_python_names.  The check errs toward passing: a read that some path could reach
with the name bound (a loop's later iteration, one arm of an `if`, part of a `try`)
is accepted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import Planted, fixed_on_repair

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.validation import Validation, parsed_document


def _fill(marked: str, fill: str) -> Validation:
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    text = marked.replace("⟦", "").replace("⟧", "")
    document = parsed_document(text, "python")
    return document.names_checked(start, end, fill, document.validate(start, end, fill))


LOOP = ("def split(paren_string):\n    result = []\n    ⟦⟧\n        if c == '(':\n"
        "            result.append(c)\n    return result\n")


def test_a_loop_over_its_own_variable_is_rejected_at_the_read() -> None:
    result = _fill(LOOP, "for c in c:\n")
    assert result.valid is False
    assert result.names == ("c",)
    assert "fill reads 'c' before the function binds it (UnboundLocalError)" in result.reason
    at = LOOP.index("⟦") + len("for c in ")
    assert result.new_ranges == ((at, at + 1),)  # the read, not the loop's target


def test_the_loop_over_the_parameter_passes() -> None:
    result = _fill(LOOP, "for c in paren_string:\n")
    assert result.valid, result.reason


@pytest.mark.parametrize("marked, fill, name", [
    # read above the loop that binds it (HumanEval/5: `if n in None:` over `for n in ...`)
    ("def f(numbers):\n    ⟦⟧\n        return []\n    for n in numbers:\n        print(n)\n",
     "if n in None:\n", "n"),
    # an assignment makes a global local to the whole function
    ("total = 0\n\ndef add(x):\n    ⟦⟧\n    return total\n", "total = total + x\n", "total"),
    ("def count(xs):\n    ⟦⟧\n    n = 0\n    return n\n", "n += len(xs)\n", "n"),
    # a list comprehension runs where it stands
    ("def f(xs):\n    ⟦⟧\n    k = 2\n    return ys\n", "ys = [x * k for x in xs]\n", "k"),
    # an annotation alone binds nothing
    ("def f():\n    best: int\n    ⟦⟧\n    best = 3\n", "print(best)\n", "best"),
    # a `while`'s first test runs before its body binds anything
    ("def f(s):\n    ⟦⟧\n        i += 1\n    return i\n", "while i < len(s):\n", "i"),
    # what a loop's body reads whenever it runs, before it binds it: the first
    # iteration raises, and no later one comes (HumanEval/9's `running_max`)
    ("def f(xs):\n    total = 0\n    for x in xs:\n        ⟦⟧\n        prev = x\n",
     "total += prev\n", "prev"),
    ("def f(xs):\n    for x in xs:\n        ⟦⟧\n            best = x\n    return best\n",
     "if x > best:\n", "best"),
    ("def f(s):\n    i = 0\n    while i < len(s):\n        ⟦⟧\n        last = s[i]\n"
     "        i += 1\n", "print(last)\n", "last"),
    # `+=` reads before it binds: a name nothing else binds is never bound, on any
    # iteration, however conditional the read (HumanEval/147's `ans += [...]`)
    ("def f(xs):\n    for x in xs:\n        if x:\n            ⟦⟧\n    return 0\n",
     "total += x\n", "total"),
])
def test_reads_no_binding_can_precede_are_rejected(marked: str, fill: str, name: str) -> None:
    result = _fill(marked, fill)
    assert result.valid is False
    assert result.names == (name,)


@pytest.mark.parametrize("marked, fill", [
    # a read on a condition may wait for a later iteration, which sees what the body
    # binds below it
    ("def f(xs):\n    total = 0\n    for i, x in enumerate(xs):\n        if i:\n"
     "            ⟦⟧\n        prev = x\n", "total += x - prev\n"),
    ("def f(s):\n    i = 0\n    while i < len(s):\n        if i:\n            ⟦⟧\n"
     "        last = s[i]\n        i += 1\n", "print(last)\n"),
    # bound above the read in the body, on a path that may have run
    ("def f(xs):\n    for x in xs:\n        if x:\n            y = x\n        ⟦⟧\n",
     "print(y)\n"),
    # another binding in the loop may run on an earlier iteration than the `+=`
    ("def f(xs):\n    for x in xs:\n        if x:\n            ⟦⟧\n        else:\n"
     "            total = 0\n", "total += x\n"),
    ("def f(xs):\n    for x in xs:\n        try:\n            y = int(x)\n"
     "        except ValueError:\n            continue\n        ⟦⟧\n", "print(y)\n"),
    # one arm of an `if` binds it; after the loop its variable may be bound
    ("def f(a):\n    if a:\n        y = 1\n    ⟦⟧\n", "return y\n"),
    ("def f(xs):\n    for i in xs:\n        pass\n    ⟦⟧\n", "return i\n"),
    # any part of a `try` may have run before its handler
    ("def f(g):\n    try:\n        v = g()\n    except ValueError:\n        ⟦⟧\n", "print(v)\n"),
    # a nested function or a generator runs later; a class body falls back to globals
    ("def f():\n    def g():\n        ⟦⟧\n    y = 1\n    return g()\n", "return y\n"),
    ("def f():\n    ⟦⟧\n    y = 1\n    return list(g)\n", "g = (y for _ in range(3))\n"),
    ("def f():\n    class A:\n        ⟦⟧\n    q = 1\n", "z = q\n"),
    # names declared global or nonlocal, a comprehension's own variable, parameters
    ("def f():\n    global y\n    ⟦⟧\n    y = 1\n", "z = y\n"),
    ("def f(xs):\n    ⟦⟧\n    x = 1\n    return ys\n", "ys = [x for x in xs]\n"),
    ("def f(a, *b, c=1, **d):\n    ⟦⟧\n", "return a, b, c, d\n"),
    # bindings of every kind before the read
    ("def f(p):\n    match p:\n        case [x, *rest]:\n            ⟦⟧\n", "return x, rest\n"),
    ("def f(xs):\n    if (n := len(xs)) > 1:\n        ⟦⟧\n", "return n\n"),
    ("def f(p):\n    with open(p) as fh:\n        ⟦⟧\n", "return fh.read()\n"),
    ("def f():\n    import os\n    from sys import path as p\n    ⟦⟧\n", "return os, p\n"),
    # a read at module level is no function's local
    ("⟦⟧\nx = 1\n", "print(x)\n"),
])
def test_reads_a_binding_may_precede_are_accepted(marked: str, fill: str) -> None:
    result = _fill(marked, fill)
    assert result.valid, result.reason


def test_a_window_cut_inside_a_function_is_not_judged() -> None:
    """A function too long to parse whole is checked in a window of its body: the
    bindings above the window are unseen, so no read in it can be said to come first."""
    body = "".join(f"    v{i} = {i}\n" for i in range(3000))
    marked = f"def big(n):\n    seen = 0\n{body}    ⟦⟧\n    seen = 1\n"
    assert _fill(marked, "print(seen)\n").valid
    small = "def f(n):\n    ⟦⟧\n    seen = 1\n"  # the same read, the whole function seen
    assert _fill(small, "print(seen)\n").valid is False


# --- in the engine: repair ------------------------------------------------------------------

DOC = "def double(n):\n    |\n    return result\n"


def test_repair_rewrites_a_read_before_the_binding(model_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", fallback=False))
    at = DOC.index("|")
    request = InfillRequest(DOC.replace("|", ""), at, at, "python", "file:///double.py",
                            InfillOptions(length=12, steps=4))
    planted = Planted(engine, request, broken="result = result * 2", good="result = n * 2")
    runs = fixed_on_repair(monkeypatch, planted)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == ("result = n * 2", True, REPAIR)
    assert runs == [DIFFUSION, REPAIR]


def test_with_check_names_off_the_read_passes(model_dir: Path) -> None:
    # the value hint, which would begin the line with the unread `n`, is not what is asked
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", check_names=False,
                                 value_hints=False))
    at = DOC.index("|")
    request = InfillRequest(DOC.replace("|", ""), at, at, "python", "file:///double.py",
                            InfillOptions(length=12, steps=4))
    Planted(engine, request, broken="result = result * 2")
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid) == ("result = result * 2", True)
