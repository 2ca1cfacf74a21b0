"""Specification of the repeats check (python_repeats, part of `checkNames`): a Python
fill that writes a code line right beside the same line, to the character, is rejected,
pointing at the fill's copy, for repair to write it anew.

Documents mark the span as ⟦⟧ (an insertion point), as in test_python_predicates.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from fakes import planted_engine
from marked import marked_judged, marked_request, marked_verdict

from dlm_lsp.python_repeats import repeated_lines
from dlm_lsp.repair import REPAIR

# HumanEval/25: the model wrote `return fact` under `return fact`
LOOP = ("def product(n):\n    fact = 1\n    for i in range(1, n):\n        fact *= i\n⟦⟧\n"
        "    return fact\n")


def test_a_line_that_repeats_the_line_above_is_rejected() -> None:
    verdict = marked_verdict(LOOP, "        fact *= i")
    assert (verdict.valid, verdict.parses) == (False, True)
    assert "fill writes `fact *= i` twice in a row" in verdict.reason
    text = LOOP.replace("⟦⟧", "        fact *= i")
    [(start, end)] = verdict.new_ranges  # the fill's copy, for repair
    assert text[start:end] == "        fact *= i"


def test_a_line_that_repeats_the_user_s_line_below_is_rejected() -> None:
    marked = "def f(xs):\n⟦⟧\n    xs.sort()\n    return xs\n"
    verdict = marked_verdict(marked, "    xs.sort()")
    assert not verdict.valid and "`xs.sort()` twice in a row" in verdict.reason
    assert marked_verdict(marked, "    xs = list(xs)").valid


def test_a_fill_that_writes_one_line_twice_is_rejected() -> None:
    """HumanEval/19: a dict written as one entry over and over."""
    marked = "def numbers():\n    table = {\n⟦⟧\n    }\n    return table\n"
    verdict = marked_verdict(marked, "        'one': 1,\n        'one': 1,\n        'one': 1,")
    assert not verdict.valid and "`'one': 1,` twice in a row" in verdict.reason
    assert marked_verdict(marked, "        'one': 1,\n        'two': 2,").valid


def test_a_fill_that_completes_a_line_into_its_neighbour_is_rejected() -> None:
    marked = "def f(xs):\n    total = 0\n    total = ⟦⟧\n    return total\n"
    assert not marked_verdict(marked, "0").valid
    assert marked_verdict(marked, "sum(xs)").valid


@pytest.mark.parametrize("fill", [
    "        fact *= i + 1",  # another line
    "    fact *= i",  # the same words at another depth: another statement
    "        print(i)",
])
def test_a_different_line_passes(fill: str) -> None:
    assert marked_verdict(LOOP, fill).valid


@pytest.mark.parametrize(("marked", "fill"), [
    # lines with no letter or digit may stack: closers of nested brackets
    ("def f():\n    return g(\n        h(\n            1\n⟦⟧\n    )\n", "        )"),
    # the same line two lines up is no neighbour
    ("def f(xs):\n    xs.pop()\n    xs.sort()\n⟦⟧\n", "    xs.pop()"),
])
def test_what_is_no_repeat_passes(marked: str, fill: str) -> None:
    assert marked_verdict(marked, fill).valid


def test_blank_lines_and_comments_between_do_not_part_them() -> None:
    assert not marked_verdict("def f(xs):\n    xs.pop()\n\n    # again\n⟦⟧\n",
                              "    xs.pop()").valid


def test_lines_of_the_user_s_own_that_repeat_are_not_the_fill_s() -> None:
    source = "x = 1\nx = 1\ny = 2\n"
    low = source.index("y")
    assert repeated_lines(ast.parse(source), source, low, low + 5) == []


def test_only_python_is_judged() -> None:
    assert marked_verdict(LOOP, "        fact *= i", language="javascript").valid


def test_with_check_names_off_nothing_is_rejected_for_it() -> None:
    assert not marked_judged(LOOP, "        fact *= i").valid
    assert marked_judged(LOOP, "        fact *= i", check_names=False).valid


def test_repair_writes_the_line_anew(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = marked_request(LOOP, length=8, steps=4)
    engine, _ = planted_engine(model_dir, monkeypatch, "        fact *= i",
                               "        fact += i", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == ("        fact += i", True, REPAIR)
