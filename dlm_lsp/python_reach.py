"""Code a Python fill leaves unreachable: a `return`, `raise`, `break` or `continue` the
fill writes with code after it in the same block (pylint's unreachable, W0101), or at
the end of a loop's body, where the loop then never runs twice.

The shipped model often ends a block where the line in the middle of it was missing:
`return s` above the loop that builds `s`, `return val` above `my_val = val` in the same
`if`, `continue` above the assignment the loop is for.  And it often writes the `return`
that belongs after a loop as the loop body's last line (`return primes` one level too
deep), so that the loop stops after its first pass.  The code parses and CPython
compiles it; the lines below, or the loop's later passes, simply never run.  Of the
shipped model's single-line fills at code 4e46b37 (HumanEval-Infilling, 200 tasks),
15 at the oracle length and 17 with the server's length policy did one or the other
(10 and 12 dead code), all failing; 11 of 100 multi-line fills (at 00032ee).

People leave such code rarely and harmlessly: of the canonical lines (1,033
single-line, 5,815 multi-line middles) and 3,000 held-out standard-library lines
written back, only HumanEval/150's `return y` above a `break` ends a block with
something after it, and a `break`, `continue`, `pass`, `...` or a string after the
ending statement does nothing anyway, so it is not counted.  Of 3,424 loops in this
machine's standard library, 3 end their body so whatever happens: two `for x in xs:
return ...` of one statement (its first item) and configparser's `popitem`, a `for`
just above a `raise`; neither is counted, nor a loop with an `else` or a `continue`.
Over 15,258 whole modules (this VM's standard library and the venv's packages, 235,116
functions, each module taken as one fill), the rules as first written flagged 55
places: 16 a `yield` after a `return` or `raise` (a generator that raises as it is
iterated, on purpose) and 17 a `for` ending in `break` (its first item), no longer
counted; 7 a `for` ending in `return` (setuptools' `for ep in eps: ... return
cmdclass`) and 2 in `raise`, 1 a `while` ending in `break`, still counted, as this is
what the model's error looks like; 11 dead code indeed (a `return` above more code in
transformers, sympy, networkx).
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from dlm_lsp.python_names import node_offsets
from dlm_lsp.python_returns import LOOPS, loop_jumps

_ENDS = {ast.Return: "return", ast.Raise: "raise", ast.Break: "break",
         ast.Continue: "continue"}
_ONCE = (ast.Return, ast.Raise, ast.Break)  # what ends a loop's body for good


class DeadCode(NamedTuple):
    """A statement of the fill that ends its block above code, or its loop's first
    iteration: character offsets of the statement in the source checked (with its
    indentation, where the fill wrote that and the indentation is at fault), its keyword,
    the first line that never runs (the loop's header: it never runs twice), and why."""

    start: int
    end: int
    keyword: str
    line: int  # 1-based, in the source checked
    why: str


def _inert(statement: ast.stmt) -> bool:
    """Whether `statement` does nothing where it stands once the block has ended: `pass`,
    `break`, `continue`, `...` or a string (HumanEval/150's `break` after `return y`); or
    is there on purpose: a `yield` after a `raise` makes the function a generator that
    raises when iterated (httpx's `raise StreamClosed()`, then `yield b""`)."""
    if isinstance(statement, (ast.Pass, ast.Break, ast.Continue)):
        return True
    return isinstance(statement, ast.Expr) and isinstance(
        statement.value, (ast.Constant, ast.Yield, ast.YieldFrom))


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
            for at, loop in enumerate(block):
                once = _once(loop, block[at + 1:at + 2], offset, low, high)
                if once is not None:
                    found.append(once)
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
            keyword = _ENDS[type(statement)]
            found.append(DeadCode(start, offset(statement, end=True), keyword,
                                  below.lineno, "leaves the code below it unreachable"))
    return sorted(found)


def _once(loop: ast.stmt, after: list[ast.stmt], offset, low: int,
          high: int) -> DeadCode | None:
    """The fill's statement that ends `loop`'s body whatever happens in it, so that the
    loop never runs a second time: a `return`, `raise` or `break` last in a body of more
    than one statement with no `continue` (`for i in range(2, n): ... return primes`,
    where the `return` belongs after the loop), of a loop without an `else`; a `for`
    loop just above a `raise` (configparser's `popitem`) or ending in `break` takes its
    first item and is not counted.  Its range begins at its line's start where the fill
    wrote the indentation, as it is the indentation repair should write again."""
    if not isinstance(loop, LOOPS) or loop.orelse or len(loop.body) < 2:
        return None
    if isinstance(loop, (ast.For, ast.AsyncFor)) and after and isinstance(after[0], ast.Raise):
        return None
    last = loop.body[-1]
    if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(last, ast.Break):
        return None  # the first item: `for param in params: device = param.device; break`
    start = offset(last)
    if (type(last) not in _ONCE or start is None or not low <= start < high
            or loop_jumps(loop.body, ast.Continue)):
        return None
    line_start = start - last.col_offset if last.col_offset <= start - low else start
    return DeadCode(line_start, offset(last, end=True), _ENDS[type(last)], loop.lineno,
                    "ends the loop's first pass: it never runs twice")
