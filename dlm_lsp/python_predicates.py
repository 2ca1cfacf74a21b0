"""Answers a Python fill makes constant: every `return` of a function, or of a loop and
the `return` right after it, gives one bool.

A function that tests something returns `False` where the test fails and `True` where
it holds (`is_prime`, `is_palindrome`).  The shipped model often writes the last
`return` of such a function as the one above it, `return False` after a loop whose
body returns `False`, so that the function answers `False` whatever it is given and
its tests decide nothing.  The code parses, reads only bound names and runs; only its
answer is wrong.

So a fill is rejected where it writes a `return` of a bool constant and then every
`return` of the function that holds it gives that same constant, with:
* two `return`s or more (of the function itself, not of a function or class inside);
* the function's last statement a `return`: one that can fall off its end returns None
  there, which is another answer (sympy's `_eval_is_positive`: `True` or None);
* no `raise`, `assert` or `yield` in it: a function that raises where the test fails
  answers with the exception (idna's `check_bidi` returns `True` or raises).

The same goes for a search loop: where every `return` in a loop's body (with no `else`)
gives the bool that the `return` right after the loop gives, the loop decides nothing,
though the function may answer otherwise above it (HumanEval/109 returns `True` for an
empty list first, then the model wrote `return False` after the loop that returns `False`
where the list is out of order).  The same exceptions hold (no `raise`, `assert` or
`yield` in the loop's body).

The blame falls on the fill's last such constant, which repair may not write again
(`repair.spelled_keywords`: `True` and `False` are keywords).

People seldom write such a function.  Of the 33,017 functions with two `return`s or
more in this VM's standard library and the venv's packages (15,206 modules), 8 fit the
rule, none in the standard library: methods that act and then return `True` either way
(ray's logging filters, `start_monitoring`, torch's `_gradcheck_helper`), or `False`
(ray's `_compute`, transformers' `_fix_bfloat16_convolution`), torch's
`is_torchdynamo_compiling` and jsonschema's `is_idn_host_name`, each a stand-in whose
answer is fixed on purpose.  Of the 1,525 loops there that hold a `return` and have one
right after them, none fits the loop's rule.  None of HumanEval-Infilling's canonical
lines, nor of the held-out lines, is rejected (benchmarks/names_check.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from dlm_lsp.python_names import node_offsets
from dlm_lsp.python_order import functions_over
from dlm_lsp.python_returns import LOOPS, own_nodes

# statements by which a function answers other than by its `return`s
_OTHER_ANSWERS = (ast.Raise, ast.Assert, ast.Yield, ast.YieldFrom)


class Constant(NamedTuple):
    """The fill's bool constant that leaves a function's answer, or a loop's, fixed:
    character offsets of the constant in the source checked, and why."""

    start: int
    end: int
    value: bool
    why: str


def _own_returns(body: list[ast.stmt]) -> list[ast.Return] | None:
    """The `return`s in `body` (not in a function or class inside), in the order of the
    text; None where it answers otherwise too (`_OTHER_ANSWERS`)."""
    own = list(own_nodes(body))
    if any(isinstance(node, _OTHER_ANSWERS) for node in own):
        return None
    return sorted((node for node in own if isinstance(node, ast.Return)),
                  key=lambda node: (node.lineno, node.col_offset))


def _one_bool(returns: list[ast.Return]) -> bool | None:
    """The bool every one of `returns` gives, or None where they give anything else."""
    values = {node.value.value if isinstance(node.value, ast.Constant)
              and type(node.value.value) is bool else None for node in returns}
    return next(iter(values)) if len(values) == 1 else None


def _answers(function: ast.AST) -> Iterator[tuple[list[ast.Return], str]]:
    """The sets of `return`s in `function` that may fix an answer, with what that answer
    is: the function's own (see the module's docstring), and each loop's with the
    `return` after it."""
    if isinstance(function.body[-1], ast.Return):
        returns = _own_returns(function.body)
        if returns and len(returns) > 1:
            yield returns, f"makes '{function.name}' return it whatever happens"
    for node in ast.walk(function):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for loop, after in zip(block, block[1:], strict=False):
                if isinstance(loop, LOOPS) and not loop.orelse \
                        and isinstance(after, ast.Return):
                    returns = _own_returns(loop.body)
                    if returns:
                        keyword = "while" if isinstance(loop, ast.While) else "for"
                        yield [*returns, after], (
                            f"makes its `{keyword}` loop decide nothing: the loop's "
                            "`return`s and the one after it all give it")


def constant_predicates(tree: ast.Module, source: str, low: int, high: int) -> list[Constant]:
    """The bool constants that the fill over source[low:high] returns and that leave the
    answer of a function of `tree` (parsed from `source`), or of a loop, fixed (see the
    module's docstring): the fill's last one in each such function or loop, in the order
    of the text."""
    offset = node_offsets(source)
    rows = (source.count("\n", 0, low) + 1, source.count("\n", 0, high) + 1)
    found = {}
    answers = (answer for function in functions_over(tree, rows)
               for answer in _answers(function))
    for returns, why in answers:
        value = _one_bool(returns)
        if value is None:
            continue
        filled = [node.value for node in returns
                  if (at := offset(node.value)) is not None and low <= at < high]
        if filled:
            start = offset(filled[-1])
            end = offset(filled[-1], end=True) or start
            found.setdefault((start, end), Constant(start, end, value, why))
    return sorted(found.values())
