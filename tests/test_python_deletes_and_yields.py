"""Specification of two statements a Python fill may write that parse and compile but leave
the function broken (both part of `checkNames`):

- a `del` of a name the code below then reads before anything binds it again
  (python_order.deleted_reads): every run of that read raises NameError;
- a `yield` statement in an ordinary function that returns values (python_yields): the
  function becomes a generator, and no call returns its value any more.

Each is rejected pointing at the statement, whose keyword the checks name, so that repair
writes a different statement there (`spelled_keywords`).  Documents mark the span as ⟦⟧
(an insertion point), as in test_python_returns.
"""

from __future__ import annotations

import ast

import pytest
from marked import marked_verdict

from dlm_lsp.python_order import deleted_reads
from dlm_lsp.python_yields import made_generators

# HumanEval/161: `s = ""` belongs at the span; the model wrote `del s` and `yield s`
SOLVE = ("def solve(s):\n    new_str = list(s)\n⟦⟧\n    for i in new_str:\n        s += i\n"
         "    return s\n")


def _spans(marked: str, fill: str) -> tuple[ast.Module, str, int, int]:
    at = marked.index("⟦⟧")
    text = marked.replace("⟦⟧", fill)
    return ast.parse(text), text, at, at + len(fill)


# --- del ---------------------------------------------------------------------------------


def test_a_del_of_a_name_the_code_below_reads_is_rejected() -> None:
    verdict = marked_verdict(SOLVE, "    del s")
    assert (verdict.valid, verdict.parses, verdict.names) == (False, True, ("del",))
    assert "'s' unbound" in verdict.reason
    [(start, end)] = verdict.new_ranges  # the statement, for repair to write again
    assert SOLVE.replace("⟦⟧", "    del s")[start:end] == "del s"


@pytest.mark.parametrize("below", [
    "    s = ''\n    return s\n",  # bound again before the read
    "    return 1\n",  # never read again
    "    return t\n",  # reads another name
])
def test_a_del_the_code_below_never_regrets_passes(below: str) -> None:
    marked = "def f(s, t):\n    t = s\n⟦⟧\n" + below
    assert marked_verdict(marked, "    del s").valid


def test_a_del_on_one_branch_only_leaves_the_name_bound_on_the_other() -> None:
    marked = "def f(s):\n    if s:\n⟦⟧\n    return s\n"
    assert marked_verdict(marked, "        del s").valid


def test_a_del_in_a_loop_is_taken_as_binding_for_the_code_after_the_loop() -> None:
    """The loop may run again and bind it, or not at all: no path is sure to raise."""
    marked = "def f(s):\n    while s:\n        s = s[1:]\n⟦⟧\n    return s\n"
    assert marked_verdict(marked, "        del s").valid


def test_a_del_of_an_item_deletes_no_name() -> None:
    marked = "def f(r):\n⟦⟧\n    return r\n"
    assert marked_verdict(marked, "    del r[0]").valid


def test_only_the_fill_s_own_del_is_judged() -> None:
    """A `del` above the span, and its reads, are the code's, whatever they do."""
    tree, text, low, high = _spans("def f(s):\n    del s\n⟦⟧\n    return s\n", "    x = 1")
    assert deleted_reads(tree, text, low, high) == []
    tree, text, low, high = _spans("def f(s):\n⟦⟧\n    return s\n", "    del s")
    [found] = deleted_reads(tree, text, low, high)
    assert (found.name, text[found.start:found.end]) == ("s", "del s")


# --- yield -------------------------------------------------------------------------------


def test_a_yield_that_makes_a_function_returning_values_a_generator_is_rejected() -> None:
    verdict = marked_verdict(SOLVE, "    yield s")
    assert (verdict.valid, verdict.parses, verdict.names) == (False, True, ("yield",))
    assert "'solve'" in verdict.reason and "generator" in verdict.reason
    [(start, end)] = verdict.new_ranges
    assert SOLVE.replace("⟦⟧", "    yield s")[start:end] == "yield s"


@pytest.mark.parametrize("marked", [
    "def gen(xs):\n    for x in xs:\n⟦⟧\n",  # returns nothing: a generator meant as one
    "def gen(x):\n    yield 0\n⟦⟧\n    return 1\n",  # a generator already
    "def f(x):\n⟦⟧\n    return\n",  # a bare return gives no value
    "@contextmanager\ndef f(x):\n⟦⟧\n    return x\n",  # decorated: its own protocol
    "def __await__(x):\n⟦⟧\n    return x.result\n",  # a special method
])
def test_a_yield_where_a_generator_may_be_meant_passes(marked: str) -> None:
    indent = "        " if "for x" in marked else "    "
    assert marked_verdict(marked, indent + "yield x").valid


def test_a_yield_whose_value_is_used_or_in_a_nested_scope_is_not_counted() -> None:
    for fill in ["    got = yield x", "    g = (y for y in x)", "    f = lambda: (yield)"]:
        tree, text, low, high = _spans("def f(x):\n⟦⟧\n    return x\n", fill)
        assert made_generators(tree, text, low, high) == [], fill
