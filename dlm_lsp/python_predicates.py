"""Predicates a Python fill makes constant: every `return` of the function gives one bool.

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

The blame falls on the fill's last such constant, which repair may not write again
(`repair.spelled_keywords`: `True` and `False` are keywords).

People seldom write such a function.  Of the 33,017 functions with two `return`s or
more in this VM's standard library and the venv's packages (15,206 modules), 8 fit the
rule, none in the standard library: methods that act and then return `True` either way
(ray's logging filters, `start_monitoring`, torch's `_gradcheck_helper`), or `False`
(ray's `_compute`, transformers' `_fix_bfloat16_convolution`), torch's
`is_torchdynamo_compiling` and jsonschema's `is_idn_host_name`, each a stand-in whose
answer is fixed on purpose.  None of HumanEval-Infilling's canonical lines, nor of the
held-out lines, is rejected (benchmarks/names_check.py).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import NamedTuple

from dlm_lsp.python_names import node_offsets

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_FUNCTIONS, ast.ClassDef, ast.Lambda)
# statements by which a function answers other than by its `return`s
_OTHER_ANSWERS = (ast.Raise, ast.Assert, ast.Yield, ast.YieldFrom)


class Constant(NamedTuple):
    """The fill's bool constant that makes `function` return it whatever happens:
    character offsets of the constant in the source checked."""

    start: int
    end: int
    value: bool
    function: str


def _own_returns(function: ast.AST) -> list[ast.Return] | None:
    """The `return`s of `function` itself, in the order of the text; None where it
    answers otherwise too (`_OTHER_ANSWERS`)."""
    found = []
    stack = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPES):
            continue
        if isinstance(node, _OTHER_ANSWERS):
            return None
        if isinstance(node, ast.Return):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return sorted(found, key=lambda node: (node.lineno, node.col_offset))


def _one_bool(returns: list[ast.Return]) -> bool | None:
    """The bool every one of `returns` gives, or None where they give anything else."""
    values = {node.value.value if isinstance(node.value, ast.Constant)
              and type(node.value.value) is bool else None for node in returns}
    return next(iter(values)) if len(values) == 1 else None


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    return (node for node in ast.walk(tree) if isinstance(node, _FUNCTIONS))


def constant_predicates(tree: ast.Module, source: str, low: int, high: int) -> list[Constant]:
    """The bool constants that the fill over source[low:high] returns and that make a
    function of `tree` (parsed from `source`) return that bool whatever happens (see the
    module's docstring): the fill's last one in each such function, in the order of the
    text."""
    offset = node_offsets(source)
    found = []
    for function in _functions(tree):
        if not isinstance(function.body[-1], ast.Return):
            continue
        returns = _own_returns(function)
        if not returns or len(returns) < 2 or (value := _one_bool(returns)) is None:
            continue
        filled = [node.value for node in returns
                  if (at := offset(node.value)) is not None and low <= at < high]
        if filled:
            last = filled[-1]
            start = offset(last)
            found.append(Constant(start, offset(last, end=True) or start, value,
                                  function.name))
    return sorted(found)
