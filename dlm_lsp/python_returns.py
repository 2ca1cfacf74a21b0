"""Where a Python function's end is reached though it must give a value: the `return` a
blank fill at the end of a function leaves out (`blankHints`, passes.InfillRun.blank_hint).

A span at the end of a function is often where its `return` belongs, and the shipped
model often writes nothing there: with the server's length policy, of the 44 HumanEval
single-line tasks it failed whose missing line was a `return`, 26 got a blank fill, 25
of them at the function's end (code 47cabda).  The document then falls off the end of
a function that other code says gives a value, and the fill is only the blank line
that was there.  One more pass begun with `return` at the function body's indentation
lets the model write what it returns (`return ans`).

A function must give a value (as mypy's "Missing return statement" and pylint's
inconsistent-return-statements read it) where its own body returns one elsewhere
(`return []` above), its annotation names a type that is not None (`-> List[int]`), its
docstring's examples show a call of it printing a value (`>>> add(2, 3)` then `5`), the
function printing nothing itself, or its docstring says what it returns (`Return the
largest index ...`, `Returns:`; not `returns None`).  Its end is reached where some path
runs past its last statement: not past a `return` or `raise`, an `if` whose every
branch ends so, a `while True:` that never breaks, a `try` all of whose ways out end, a
`match` with a `case _:`, nor `sys.exit()`.  A generator, a stub (`...`, `pass`), an abstract
method or an overload is never judged: each may end without a value.

What the model writes after `return` is often a constant (`return False`) where the
function computed its value in a local: `best = max(best, j)` in a loop, `out.append(x)`,
read nowhere but by those updates.  Such a value, unused once the fill is in
(`unused_values`), is what the `return` should give: where a HumanEval single-line task
or a held-out standard-library line asks for a `return` and a `return 0` would leave one
unused, the line as written reads it in 68 of 68 (measured as this was written; one
held-out line leaves another unused either way).

The model also writes a bare `return` where the line returned a value (`return` for
`return result`): in a function that must give a value that is pylint's
inconsistent-return-statements, and one more pass begins the line with `return` that
goes on (`bare_return`).  Of the shipped model's 200 single-line fills at code 4c8e2d3,
4 at the oracle length and 5 with the length policy were such a `return` (one in a
multi-line span of 100); no canonical HumanEval-Infilling middle and none of 3,000
held-out standard-library lines is.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import NamedTuple

from dlm_lsp.python_order import body_function

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (*_DEFS, ast.ClassDef, ast.Lambda)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
# annotations that let a function end without a value: None, or it never ends
_NO_VALUE = frozenset({"None", "NoReturn", "Never", "Optional", "Iterator", "Iterable",
                       "Generator", "AsyncIterator", "AsyncIterable", "AsyncGenerator",
                       "Any", "object"})
# decorators of a function whose body is not its behaviour
_NOT_JUDGED = frozenset({"abstractmethod", "overload", "abstractproperty"})
# calls that never come back
_EXITS = frozenset({"exit", "quit", "_exit", "abort"})
# only blanks and comments
_QUIET = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")
# a docstring that says what the function returns (`Return the sum ...`, `Returns:`,
# `:return:`), but not that it returns nothing
_SAYS_RETURNS = re.compile(r"\breturns?\b", re.IGNORECASE)
_RETURNS_NOTHING = re.compile(r"\breturns?\s+(?:None|nothing)\b|\bno(?:thing)? return",
                              re.IGNORECASE)


class ReturnNeed(NamedTuple):
    """A function the fill leaves falling off its end, though it must give a value."""

    name: str
    indent: str  # its body's indentation: where a `return` ends it
    why: str  # what says it gives a value, in words


def _name(node: ast.AST) -> str:
    """The last name of a dotted name (`typing.List` -> 'List'); '' for anything else."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a function's body that run as its own code: not those of a function,
    class or lambda nested in it."""
    stack: list[ast.AST] = [node for node in body if not isinstance(node, SCOPES)]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node)
                     if not isinstance(child, SCOPES))


def loop_jumps(body: list[ast.stmt], jump: type[ast.stmt] = ast.Break) -> bool:
    """Whether a `break` (or `jump`: `continue`) in `body` acts on the loop whose body it
    is (not a nested one)."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, jump):
            return True
        if not isinstance(node, (*LOOPS, *SCOPES)):
            stack.extend(ast.iter_child_nodes(node))
        elif isinstance(node, LOOPS):
            stack.extend(node.orelse)  # a loop's `else` breaks the loop around it
    return False


def _always(test: ast.expr) -> bool:
    return isinstance(test, ast.Constant) and bool(test.value) and test.value is not ...


def _exits(node: ast.stmt) -> bool:
    """`sys.exit(1)`, `os._exit(0)`, `exit()`: a call that never comes back."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and _name(node.value.func) in _EXITS)


def completes(body: list[ast.stmt]) -> bool:
    """Whether some path runs past the last statement of `body`."""
    return all(_runs_past(statement) for statement in body)


def _runs_past(node: ast.stmt) -> bool:
    """Whether some path runs past `node` to the statement after it."""
    if isinstance(node, (ast.Return, ast.Raise, ast.Break, ast.Continue)) or _exits(node):
        return False
    if isinstance(node, ast.Assert):
        return not (isinstance(node.test, ast.Constant) and not node.test.value)
    if isinstance(node, ast.If):
        return completes(node.body) or completes(node.orelse)
    if isinstance(node, ast.While) and _always(node.test):
        return loop_jumps(node.body)
    if isinstance(node, LOOPS):
        return completes(node.orelse) or loop_jumps(node.body)
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return completes(node.body)
    if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
        return completes(node.finalbody) and (
            completes(node.body + node.orelse)
            or any(completes(handler.body) for handler in node.handlers))
    if isinstance(node, ast.Match):
        catches_all = any(isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None
                          and case.guard is None for case in node.cases)
        return not catches_all or any(completes(case.body) for case in node.cases)
    return True


def _stub(body: list[ast.stmt]) -> bool:
    """A body of `...` or `pass` (and a docstring): a protocol's or a placeholder's.  A
    docstring alone is a body still to be written, the span below it its first line."""
    constants = [node.value.value for node in body
                 if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)]
    passes = sum(isinstance(node, ast.Pass) for node in body)
    return (passes or ... in constants) and passes + len(constants) == len(body)


def _annotation_gives(returns: ast.expr | None) -> bool:
    """Whether a return annotation names a value the function must give: not None, nor
    one that takes None (`Optional[int]`, `int | None`), nor a generator's."""
    if returns is None:
        return False
    if isinstance(returns, ast.Constant):
        return isinstance(returns.value, str) and not any(
            word in returns.value for word in _NO_VALUE)  # `-> "Tree"`
    return not any(isinstance(node, ast.Constant) and node.value is None
                   or _name(node) in _NO_VALUE for node in ast.walk(returns))


def _doctest_shows_value(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether the docstring's examples call the function and show what it gave: `>>>
    add(2, 3)` then `5`.  A function that prints shows its own output there."""
    doc = ast.get_docstring(node, clean=True)
    if not doc or f">>> {node.name}(" not in doc:
        return False
    lines = doc.splitlines()
    for i, line in enumerate(lines):
        if not line.strip().startswith(f">>> {node.name}("):
            continue
        after = next((rest.strip() for rest in lines[i + 1:]
                      if not rest.strip().startswith("... ")), "")
        if after and not after.startswith((">>>", "Traceback")) and after != "None":
            return not any(isinstance(call, ast.Call) and _name(call.func) == "print"
                           for call in own_nodes(node.body))
    return False


def gives_value(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """What says the function must give a value, in words; None where nothing does, or
    it may end without one (a generator, a stub, an abstract method, an overload)."""
    own = list(own_nodes(node.body))
    if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own) or _stub(node.body):
        return None
    if any(_name(d.func if isinstance(d, ast.Call) else d) in _NOT_JUDGED
           for d in node.decorator_list):
        return None
    valued = next((n for n in own if isinstance(n, ast.Return) and n.value is not None
                   and not (isinstance(n.value, ast.Constant) and n.value.value is None)),
                  None)
    if valued is not None:
        return f"it returns a value on line {valued.lineno}"
    if _annotation_gives(node.returns):
        return f"its annotation is -> {ast.unparse(node.returns)}"
    if _doctest_shows_value(node):
        return "its docstring's examples show the value it returns"
    doc = ast.get_docstring(node) or ""
    if _SAYS_RETURNS.search(doc) and not _RETURNS_NOTHING.search(doc):
        return "its docstring says what it returns"
    return None


def _offset(lines: list[str], row: int, column: int) -> int:
    """The character offset of (1-based row, UTF-8 byte column) in the lines."""
    line = lines[row - 1]
    return sum(len(text) + 1 for text in lines[:row - 1]) + len(
        line.encode("utf-8")[:column].decode("utf-8", "replace"))


def return_need(tree: ast.Module, source: str, low: int, high: int) -> ReturnNeed | None:
    """The innermost function of `tree` (parsed from `source`, with a fill of no code over
    source[low:high]) that ends before the fill, with only blanks and comments between,
    whose end is reached though it must give a value; None where there is none.  Its
    `return` would stand where the fill is."""
    lines = source.split("\n")
    found = None
    for node in ast.walk(tree):
        if not isinstance(node, _DEFS) or node.end_lineno is None:
            continue
        end = _offset(lines, node.end_lineno, node.end_col_offset or 0)
        if end > low or _QUIET.fullmatch(source, end, low) is None:
            continue
        if found is not None and node.lineno < found[0].lineno:
            continue  # an outer function: the inner one's end is nearer
        why = None if not completes(node.body) else gives_value(node)
        if why is not None:
            indent = lines[node.body[0].lineno - 1][:node.body[0].col_offset]
            found = (node, ReturnNeed(node.name, indent, why))
    return None if found is None else found[1]


def bare_return(tree: ast.Module, source: str, low: int, high: int) -> str | None:
    """What says that the innermost function around a bare `return` which source[low:high]
    (the fill) writes must give a value (`gives_value`, pylint's
    inconsistent-return-statements); None where the fill writes no bare `return`, or its
    function may end without a value."""
    lines = source.split("\n")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Return) and node.value is None
                and low <= _offset(lines, node.lineno, node.col_offset) < high):
            continue
        inner = body_function(tree, node.lineno)
        why = None if inner is None else gives_value(inner)
        if why is not None:
            return why
    return None


def mutates(statement: ast.stmt, name: str) -> bool:
    """Whether `statement` binds `name` or changes its value in place: `best = max(best,
    x)`, `total += x`, `seen[k] = v`, `out.append(x)`."""
    def based(node: ast.AST) -> bool:  # `out`, `out[i]`, `out.attr`, `out[i][j]`
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        return isinstance(node, ast.Name) and node.id == name
    if isinstance(statement, ast.Assign):
        return any(based(target) for target in statement.targets)
    if isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
        return based(statement.target)
    return (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call)
            and isinstance(statement.value.func, ast.Attribute)
            and based(statement.value.func.value))


def unused_values(tree: ast.Module, source: str, low: int, high: int) -> list[str]:
    """The values the innermost function of `tree` (parsed from `source`) whose lines hold
    source[low:high] computes and never uses: its locals bound by assignment that nothing
    reads but the statements that update them (`best = max(best, x)`, `out.append(x)`),
    the one updated last first.  A `return` that gives another value leaves them unused;
    none for a name a nested function reads, or one declared global or nonlocal."""
    inner = body_function(tree, source.count("\n", 0, low) + 1)
    if inner is None:
        return []
    updated: dict[str, int] = {}  # a local's name -> the last line that updates it
    used: set[str] = set()
    for statement in (n for n in own_nodes(inner.body) if isinstance(n, ast.stmt)):
        if isinstance(statement, (ast.Global, ast.Nonlocal)):
            used.update(statement.names)
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [
                statement.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    updated[target.id] = max(updated.get(target.id, 0), statement.lineno)
        parts = [n for n in ast.iter_child_nodes(statement) if not isinstance(n, ast.stmt)]
        for read in (n for part in parts for n in ast.walk(part)
                     if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)):
            if mutates(statement, read.id):
                updated[read.id] = max(updated.get(read.id, 0), statement.lineno)
            else:
                used.add(read.id)
    for nested in (n for n in ast.walk(inner) if isinstance(n, SCOPES) and n is not inner):
        used.update(n.id for n in ast.walk(nested) if isinstance(n, ast.Name))
    params = {a.arg for a in ast.walk(inner.args) if isinstance(a, ast.arg)}
    dead = [name for name in updated if name not in used | params and not name.startswith("_")]
    return sorted(dead, key=lambda name: -updated[name])
