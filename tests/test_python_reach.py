"""Specification of the reach check (python_reach, part of `checkNames`): a Python fill
that ends a block (`return`, `raise`, `break`, `continue`) above code that then never runs
is rejected, pointing at the statement that ends it.

Documents mark the span as ⟦⟧ (an insertion point), as in test_python_returns.
"""

from __future__ import annotations

import ast

import pytest
from marked import marked_judged, marked_verdict

from dlm_lsp.python_reach import unreachable

SWAP = ("def solve(s):\n    new = []\n    for c in s:\n        new.append(c.swapcase())\n"
        "⟦⟧\n    for c in new:\n        s += c\n    return s\n")
BEST = ("def best(xs):\n    top = 0\n    for x in xs:\n        if x > top:\n⟦⟧\n"
        "            top = x\n    return top\n")


def test_a_return_above_the_rest_of_its_block_is_rejected() -> None:
    verdict = marked_verdict(SWAP, "    return s")
    assert (verdict.valid, verdict.parses, verdict.names) == (False, True, ("return",))
    assert "unreachable" in verdict.reason
    text = SWAP.replace("⟦⟧", "    return s")
    [(start, end)] = verdict.new_ranges  # the statement, for repair to write again
    assert text[start:end] == "return s"


@pytest.mark.parametrize("fill", ["            return x", "            continue",
                                  "            break", "            raise ValueError(x)"])
def test_every_statement_that_ends_a_block_counts(fill: str) -> None:
    verdict = marked_verdict(BEST, fill)
    assert not verdict.valid and verdict.names == (fill.split()[0],)


@pytest.mark.parametrize("fill", [
    "    s = ''.join(new)",  # code that runs on
    "            top = x",
])
def test_a_fill_that_ends_no_block_passes(fill: str) -> None:
    marked = SWAP if fill.startswith("    s") else BEST
    assert marked_verdict(marked, fill).valid


def test_a_return_at_the_end_of_its_block_passes() -> None:
    marked = "def f(xs):\n    for x in xs:\n        if x:\n⟦⟧\n    return 0\n"
    assert marked_verdict(marked, "            return x").valid


@pytest.mark.parametrize("after", ["break", "pass", "...", "'''a note'''", "continue"])
def test_statements_that_do_nothing_after_the_end_are_not_counted(after: str) -> None:
    """HumanEval/150's canonical code has `return y` above a `break`."""
    marked = f"def f(xs):\n    for x in xs:\n        if x:\n⟦⟧\n            {after}\n    return 0\n"
    assert marked_verdict(marked, "            return x").valid


def test_code_that_was_dead_before_the_fill_is_not_the_fill_s_doing() -> None:
    """Below the user's own `return`, what the fill writes never runs either; the user
    asked for it there."""
    marked = "def f(x):\n    return x\n⟦⟧\n    y = 1\n"
    assert marked_verdict(marked, "    return x + 1").valid
    assert marked_verdict(marked, "    z = 2").valid


def test_a_fill_that_ends_its_block_twice_is_rejected() -> None:
    marked = "def f(x):\n⟦⟧\n"
    verdict = marked_verdict(marked, "    return 0\n    return x")
    assert not verdict.valid and verdict.names == ("return",)


def test_a_block_of_the_fill_s_own_with_dead_code_counts() -> None:
    source = "def f(x):\n    if x:\n        return 1\n        x += 1\n    return x\n"
    low = source.index("    if")
    [dead] = unreachable(ast.parse(source), source, low, len(source))
    assert (dead.keyword, dead.line) == ("return", 4)
    assert source[dead.start:dead.end] == "return 1"


def test_only_python_is_judged() -> None:
    assert marked_verdict(SWAP, "    return s", language="javascript").valid


def test_with_check_names_off_nothing_is_rejected_for_reach() -> None:
    assert not marked_judged(SWAP, "    return s").valid
    assert marked_judged(SWAP, "    return s", check_names=False).valid


# --- a loop that never runs twice -------------------------------------------------------------

PRIMES = ("def primes(n):\n    found = []\n    for i in range(2, n):\n"
          "        if all(i % j for j in range(2, i)):\n            found.append(i)\n⟦⟧\n")


def test_a_return_that_ends_a_loop_s_body_whatever_happens_is_rejected() -> None:
    """The model wrote `return primes` inside the loop where it belongs after it: the
    range starts at the line's start, so that repair writes the indentation again."""
    verdict = marked_verdict(PRIMES, "        return found")
    assert (verdict.valid, verdict.names) == (False, ("return",))
    assert "never runs twice" in verdict.reason
    text = PRIMES.replace("⟦⟧", "        return found")
    [(start, end)] = verdict.new_ranges
    assert text[start:end] == "        return found"
    assert marked_verdict(PRIMES, "    return found").valid  # after the loop


def test_a_raise_there_counts_too_and_a_break_in_a_while() -> None:
    assert not marked_verdict(PRIMES, "        raise ValueError(i)").valid
    marked = "def f(n):\n    while n:\n        n -= 1\n⟦⟧\n    return n\n"
    assert not marked_verdict(marked, "        break").valid


@pytest.mark.parametrize(("marked", "fill"), [
    # a `continue` can start the next pass
    ("def f(xs):\n    for x in xs:\n        if not x:\n            continue\n⟦⟧\n",
     "        return x"),
    # the loop's `else` runs where it never returned
    ("def f(xs):\n    for x in xs:\n        y = x\n⟦⟧\n    else:\n        return 0\n",
     "        return x"),
    # the body alone (`for x in xs: return x`: its first item)
    ("def f(xs):\n    for x in xs:\n⟦⟧\n    return None\n", "        return x"),
    # a `for` above a `raise` takes its first item (configparser's popitem)
    ("def f(d):\n    for key in d:\n        value = d[key]\n⟦⟧\n    raise KeyError\n",
     "        return key, value"),
    # the `return` is in a branch: the loop goes on otherwise
    ("def f(xs):\n    for x in xs:\n        y = x\n        if y:\n⟦⟧\n", "            return x"),
])
def test_a_loop_that_can_run_again_passes(marked: str, fill: str) -> None:
    assert marked_verdict(marked, fill).valid


def test_a_while_above_a_raise_is_still_counted() -> None:
    marked = "def f(n):\n    while n:\n        n -= 1\n⟦⟧\n    raise ValueError\n"
    assert not marked_verdict(marked, "        return n").valid


@pytest.mark.parametrize(("marked", "fill"), [
    # a `yield` after a `raise` makes a generator that raises as it is iterated
    ("def stream(self):\n⟦⟧\n    yield b''\n", "    raise StopIteration()"),
    # a `for` ending in `break` takes its first item
    ("def first(params):\n    device = None\n    for p in params:\n        device = p.device\n⟦⟧\n"
     "    return device\n", "        break"),
])
def test_what_real_code_does_on_purpose_passes(marked: str, fill: str) -> None:
    assert marked_verdict(marked, fill).valid
