"""Code a Python fill leaves unreachable: a `return`, `raise`, `break` or `continue` the
fill writes with code after it in the same block (pylint's unreachable, W0101).

The shipped model often ends a block where the line in the middle of it was missing:
`return s` above the loop that builds `s`, `return val` above `my_val = val` in the same
`if`, `continue` above the assignment the loop is for.  The code parses and CPython
compiles it; the lines below simply never run.  Of the shipped model's failed
HumanEval-Infilling single-line fills at code c8df71b, 12 of 200 at the oracle length
and 13 of 200 with the server's length policy did this (12 of 100 multi-line fills).
People leave such code rarely and harmlessly: of the canonical lines (1,033
single-line, 5,815 multi-line middles) and 3,000 held-out standard-library lines
written back, only HumanEval/150's `return y` above a `break` ends a block with
something after it, and a `break`, `continue`, `pass`, `...` or a string after the
ending statement does nothing anyway, so it is not counted.
"""

from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import NamedTuple

from dlm_lsp.python_names import node_offsets

_ENDS = {ast.Return: "return", ast.Raise: "raise", ast.Break: "break",
         ast.Continue: "continue"}


class DeadCode(NamedTuple):
    """A statement of the fill that ends its block above code: character offsets of the
    statement in the source checked, its keyword, and the first line that never runs."""

    start: int
    end: int
    keyword: str
    line: int  # 1-based, in the source checked


def _inert(statement: ast.stmt) -> bool:
    """Whether `statement` does nothing where it stands once the block has ended: `pass`,
    `break`, `continue`, `...` or a string (HumanEval/150's `break` after `return y`)."""
    if isinstance(statement, (ast.Pass, ast.Break, ast.Continue)):
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def unreachable(tree: ast.Module, source: str, low: int, high: int) -> list[DeadCode]:
    """The statements starting in source[low:high] (the fill) that end their block
    (`return`, `raise`, `break`, `continue`) above a statement that does something, in
    `tree` parsed from `source`; in the order of the text."""
    offset = node_offsets(source)
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            # the block's first ending statement: what follows it is dead already, the
            # fill's doing only where the fill wrote it
            at, statement = next(((at, s) for at, s in enumerate(block[:-1])
                                  if type(s) in _ENDS), (None, None))
            if statement is None:
                continue
            below = next((s for s in block[at + 1:] if not _inert(s)), None)
            start = offset(statement)
            if below is None or start is None or not low <= start < high:
                continue
            end = offset(SimpleNamespace(lineno=statement.end_lineno,
                                         col_offset=statement.end_col_offset))
            found.append(DeadCode(start, start if end is None else end,
                                  _ENDS[type(statement)], below.lineno))
    return sorted(found)
