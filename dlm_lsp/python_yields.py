"""A `yield` a Python fill writes into a function that returns values: a generator now.

A `yield` anywhere in a function's own body makes the function a generator: calling it
runs none of its code and returns a generator object, and its `return x` no longer gives
`x` to the caller.  The shipped model writes one where a statement of the function's
work belonged: `yield s` for `s = ""` above the loop that extends `s` (HumanEval/161),
`yield res` for `res.append(...)`, once a repair may no longer write the `return` the
reach check rejected there.  The code parses and compiles; every call then returns the
wrong kind of thing.

A generator that also returns a value is legal Python, so the check is a choice, and
counts only the plain case: a `yield x` statement (its value unused) in the function's
own scope (not a nested function, lambda or generator expression), of an ordinary
function (not async, not decorated, not a special method) that returns a value outside
the fill and yields nowhere else.  Over 27,931 modules of this VM's Python 3.11 standard
library and installed packages, each of the 15,387 `yield`s taken as the fill, it
rejected 12 (0.08%): coroutine-style readers (websockets' streams, which `yield` until
data comes, then return it), two hypothesis strategies and CPython's own generator
tests.  Counting every `yield` of any function rejected 111: pytest's hook wrappers
(`outcome = yield`), `__await__` methods, async helpers.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from dlm_lsp.python_names import node_offsets
from dlm_lsp.python_order import functions_over
from dlm_lsp.python_returns import own_nodes


class Generated(NamedTuple):
    """A `yield x` statement of the fill that makes function `function` a generator:
    character offsets of the statement in the source checked."""

    start: int
    end: int
    function: str


def _plain(function: ast.AST) -> bool:
    """Whether `function` is an ordinary one: not async (an async generator may not return
    a value at all), not decorated (`@contextmanager`, pytest's hook wrappers, which
    yield once and return the outcome) and not a special method (`__await__` yields, then
    returns its result)."""
    name = function.name
    return isinstance(function, ast.FunctionDef) and not function.decorator_list and not (
        name.startswith("__") and name.endswith("__"))


def made_generators(tree: ast.Module, source: str, low: int, high: int) -> list[Generated]:
    """The `yield`s starting in source[low:high] (the fill) of a function of `tree`
    (parsed from `source`) that returns a value outside the fill and yields nowhere else,
    in the order of the text."""
    offset = node_offsets(source)
    rows = (source.count("\n", 0, low) + 1, source.count("\n", 0, high) + 1)
    found: list[Generated] = []
    for function in functions_over(tree, rows):
        if not _plain(function):
            continue
        yields, returns = [], False
        for node in own_nodes(function.body):  # each statement before its `yield`
            if not isinstance(node, (ast.Expr, ast.Yield, ast.YieldFrom, ast.Return)):
                continue
            at = offset(node)
            inside = at is not None and low <= at < high
            if isinstance(node, ast.Expr):
                if inside and isinstance(node.value, ast.Yield):  # `yield x`, a statement
                    yields.append(Generated(at, offset(node, end=True), function.name))
            elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                if not inside or not any(y.start == at for y in yields):
                    break  # a generator already, or a `yield` whose value is used
            elif isinstance(node, ast.Return) and node.value is not None and not inside:
                returns = True
        else:
            if returns:
                found += yields
    return sorted(found)
