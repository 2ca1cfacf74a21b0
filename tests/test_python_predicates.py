"""Specification of the predicates check (python_predicates, part of `checkNames`): a
Python fill whose `return True` or `return False` makes every `return` of its function
give that same bool is rejected, pointing at the constant, which repair may not write
again.

Documents mark the span as ⟦⟧ (an insertion point), as in test_python_reach.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fakes import planted_engine, spied_layouts
from marked import marked_judged, marked_request, marked_verdict

from dlm_lsp.python_predicates import constant_predicates
from dlm_lsp.repair import REPAIR

# HumanEval/48: the model wrote `return False` where the loop's tests all passed
PALINDROME = ("def is_palindrome(text):\n    for i in range(len(text)):\n"
              "        if text[i] != text[len(text) - 1 - i]:\n            return False\n⟦⟧\n")


def test_a_return_that_makes_the_function_answer_one_bool_is_rejected() -> None:
    verdict = marked_verdict(PALINDROME, "    return False")
    assert (verdict.valid, verdict.parses, verdict.names) == (False, True, ("False",))
    assert "makes 'is_palindrome' return it whatever happens" in verdict.reason
    text = PALINDROME.replace("⟦⟧", "    return False")
    [(start, end)] = verdict.new_ranges  # the constant, for repair to write again
    assert text[start:end] == "False"


def test_the_other_answer_passes() -> None:
    assert marked_verdict(PALINDROME, "    return True").valid


@pytest.mark.parametrize("fill", [
    "    return text == text[::-1]",  # not a constant
    "    return 0",  # a number, not a bool
    "    return None",
])
def test_a_return_of_anything_but_the_same_bool_passes(fill: str) -> None:
    assert marked_verdict(PALINDROME, fill).valid


def test_the_fill_s_return_in_the_middle_counts_as_well() -> None:
    """The function's own last `return` gives `True`; the fill's inside the loop too."""
    marked = ("def has_zero(xs):\n    for x in xs:\n        if x == 0:\n⟦⟧\n"
              "    return True\n")
    assert not marked_verdict(marked, "            return True").valid
    assert marked_verdict(marked, "            return False").valid


@pytest.mark.parametrize("marked", [
    # one `return`: nothing else the function answers
    "def ok(x):\n    x.check()\n⟦⟧\n",
    # it may fall off its end: None is another answer (sympy's `_eval_is_positive`)
    "def ok(x):\n    if x.a:\n        return False\n    for y in x:\n    ⟦⟧\n",
    # it raises where the test fails (idna's `check_bidi`)
    "def ok(x):\n    if x.a:\n        return False\n    if x.b:\n        raise ValueError(x)\n⟦⟧\n",
    "def ok(x):\n    if x.a:\n        return False\n    assert x.b\n⟦⟧\n",
    # a generator's `return` ends it
    "def ok(x):\n    if x.a:\n        return False\n    yield x\n⟦⟧\n",
])
def test_a_function_that_answers_otherwise_too_passes(marked: str) -> None:
    assert marked_verdict(marked, "    return False").valid


def test_returns_of_a_function_inside_are_its_own() -> None:
    """`inner`'s `return True` is not an answer of `outer`, which answers False always."""
    marked = ("def outer(xs):\n    def inner(x):\n        return True\n"
              "    if not xs:\n        return False\n⟦⟧\n")
    verdict = marked_verdict(marked, "    return False")
    assert not verdict.valid and "'outer'" in verdict.reason
    assert marked_verdict(marked, "    return all(map(inner, xs))").valid


def test_a_constant_function_the_fill_did_not_answer_for_is_not_its_doing() -> None:
    marked = ("def always(x):\n    if x:\n        return True\n    return True\n\n"
              "def other(y):\n⟦⟧\n")
    assert marked_verdict(marked, "    return y").valid


def test_the_fill_s_last_constant_is_blamed() -> None:
    source = ("def f(xs):\n    for x in xs:\n        if x:\n            return False\n"
              "    return False\n")
    low = source.index("    for")
    [found] = constant_predicates(ast.parse(source), source, low, len(source))
    assert found.value is False and "'f'" in found.why
    assert found.start == source.rindex("False")
    assert source[found.start:found.end] == "False"


# HumanEval/109: an empty list answers True first, so the function is no constant; but
# the loop's search decides nothing where the `return` after it gives what it gives
SORTED = ("def move_one_ball(arr):\n    if len(arr) == 0:\n        return True\n"
          "    for i in range(1, len(arr)):\n        if arr[i - 1] > arr[i]:\n"
          "            return False\n⟦⟧\n")


def test_a_return_after_a_loop_that_gives_what_the_loop_s_returns_give_is_rejected() -> None:
    verdict = marked_verdict(SORTED, "    return False")
    assert (verdict.valid, verdict.names) == (False, ("False",))
    assert "makes its `for` loop decide nothing" in verdict.reason
    assert marked_verdict(SORTED, "    return True").valid


def test_a_while_loop_counts_too() -> None:
    marked = ("def odd_free(n):\n    if n < 0:\n        return True\n    while n > 1:\n"
              "        if n % 2:\n            return False\n        n //= 2\n⟦⟧\n")
    verdict = marked_verdict(marked, "    return False")
    assert not verdict.valid and "its `while` loop decide nothing" in verdict.reason


@pytest.mark.parametrize("marked", [
    # the loop also raises: that is its other answer
    SORTED.replace("            return False\n", "            return False\n"
                   "        if arr[i] < 0:\n            raise ValueError(i)\n"),
    # the loop's `else` runs where it ends without a `return`
    SORTED.replace("⟦⟧", "    else:\n        arr.sort()\n⟦⟧"),
    # something runs between the loop and the `return`
    SORTED.replace("⟦⟧", "    arr.sort()\n⟦⟧"),
])
def test_a_loop_that_answers_otherwise_passes(marked: str) -> None:
    assert marked_verdict(marked, "    return False").valid


def test_only_python_is_judged() -> None:
    assert marked_verdict(PALINDROME, "    return False", language="javascript").valid


def test_with_check_names_off_nothing_is_rejected_for_it() -> None:
    assert not marked_judged(PALINDROME, "    return False").valid
    assert marked_judged(PALINDROME, "    return False", check_names=False).valid


def test_repair_writes_the_other_answer(model_dir: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    request = marked_request(PALINDROME, length=8, steps=4)
    engine, runs = planted_engine(model_dir, monkeypatch, "    return False",
                                  "    return True", request)
    layouts = spied_layouts(monkeypatch)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == ("    return True", True, REPAIR)
    # from its first round, repair may not write the rejected constant again
    tok = engine.model.tokenizer
    assert layouts[1].init_ids is not None
    assert [tok.decode([token]).strip() for _, token in layouts[1].banned] == ["False"]
