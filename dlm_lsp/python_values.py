"""The value a Python function has and then reads nowhere, with a fill in: the name the
fill's line should read (`valueHints`, passes.InfillRun.value_hint).

A function that works a value out (`balance += op` in a loop, `val = min(...)`, `dic =
{...}`) is there to use it, and one given a value (a parameter) to read it; with a line
missing, that line is often the one that does: `if balance < 0:`, `ans.append(val)`,
`return my_tri`, `for c in paren_string:`.  The shipped model often writes another valid
line there (`if op is not None:`, `ans.append(i)`, `return 0`, `for c in c:`), and the
value is left for nothing.  With the fill in, such a value (unread) is:

- a local bound above the fill's line by an assignment of the function's own code, and
  read nowhere: not after, not by a nested function, only by the statements that update
  it (`best = max(best, x)`, `out.append(x)`: python_returns.unused_values).  An object
  whose methods are called for their effect (`f.write(s)`, `output.flush()`) is used by
  those calls, so a name with a method call that is not one filling a container
  (`append`, `add`, `update`, ...) is never unread;
- or a parameter that nothing in the function reads, where the function is a plain one:
  not a method (an override or a protocol's method takes what its caller passes, used
  or not) and not decorated.

Measured as this was written (`benchmarks/names_check.py`, code 7362f8e and this
module): with the line written back, no HumanEval-Infilling canonical middle leaves one
(0 of 1,033 single-line, 0 of 5,815 multi-line), and 21 of 3,000 held-out
standard-library lines do: 20 in 9 functions that keep a local they never read again
(`funcid = self.scale.bind(...)` in 6 tests; `torot`, computed and left, in
_pydecimal's `rotate` and `shift`), 1 in a test's stand-in `parse_float(s)` that
ignores its `s` (methods' and decorated functions' parameters would add 33, which is
why they are left out).  With the line cleared, 46 single-line tasks leave one unread
and all 46 lines read it (633 of 633 multi-line spans; 63 of 78 held-out lines).  Of
the shipped model's 200 single-line fills at the oracle length (code a603c65), 21 leave
one unread that the fill does not name; all 21 failed their tests, and all 21 canonical
lines read it.  With the hint, 6 of them pass (benchmarks/results/value-hints-cpu.md).

The fill's first line keeps what it began with up to where an expression starts
(`value_slot`: after `return`, `if`, `elif`, `while` or `assert`, after a `for`'s `in`,
inside a call statement's parenthesis, after an assignment's `=`), and the name goes
there: the model writes the rest (`if balance` -> `if balance < 0:`).
"""

from __future__ import annotations

import ast
import re

from dlm_lsp.python_order import body_function
from dlm_lsp.python_returns import own_nodes, unused_values

# the methods that fill a container in place: a name only so called still holds a value
_FILLERS = frozenset({"append", "extend", "add", "update", "insert", "appendleft",
                      "extendleft", "setdefault"})

# the calls that read a function's locals by name, which no reading of its code sees
_BY_NAME = frozenset({"locals", "vars", "eval", "exec"})

# where an expression starts on a line of code: what the line keeps of itself
_SLOT = re.compile(r"""[ \t]*(?:
      (?:return|if|elif|while|assert)[ \t]+
    | for[ \t]+[^\n]+?[ \t]+in[ \t]+
    | [A-Za-z_][\w.]*\(
    | [A-Za-z_][\w.]*(?:\[[^\]\n]*\])?[ \t]*(?://|\*\*|<<|>>|[-+*/%&|^@])?=(?!=)[ \t]*
)""", re.VERBOSE)


def value_slot(line: str) -> int | None:
    """Where the first expression of a line of code starts (the end of what the line keeps
    before a name goes there), or None for a line with no such place (`with`, `else:`, a
    bare expression)."""
    found = _SLOT.match(line)
    return None if found is None else found.end()


def value_hint(fill: str, unread: list[str]) -> tuple[str, str] | None:
    """What a value hint's pass begins with where `fill` leaves the values `unread` (see
    `unread_values`), and the value it reads: `fill`'s first line up to its `value_slot`,
    then the first of them that the fill does not name (one it names it binds or changes:
    what is wrong there is something else); None where none is left or the line has no
    such place."""
    first = fill.split("\n", 1)[0]
    slot = value_slot(first) if first.strip() else None
    names = [name for name in unread if not re.search(rf"\b{re.escape(name)}\b", fill)]
    if slot is None or not names:
        return None
    return first[:slot] + names[0], names[0]


def _called_for_effect(statement: ast.stmt, name: str) -> bool:
    """Whether `statement` calls a method of `name` that does not fill a container."""
    value = statement.value if isinstance(statement, ast.Expr) else None
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == name
            and value.func.attr not in _FILLERS)


def unread_values(tree: ast.Module, source: str, low: int, high: int) -> list[str]:
    """The locals the innermost function of `tree` (parsed from `source`) whose lines hold
    source[low:high] binds by an assignment above that line and reads nowhere (see the
    module's docstring), the one updated last first; then its parameters that nothing in
    it reads, where it is a plain function (`_unread_parameters`).  None in a function
    that calls `locals()`, `vars()`, `eval` or `exec`, which may read any by name."""
    row = source.count("\n", 0, low) + 1
    inner = body_function(tree, row)
    if inner is None or any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                            and node.func.id in _BY_NAME for node in ast.walk(inner)):
        return []  # `fmt.format(**locals())` reads every local
    above: set[str] = set()
    effects: set[str] = set()
    statements = [n for n in own_nodes(inner.body) if isinstance(n, ast.stmt)]
    for statement in statements:
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)) \
                and statement.lineno < row:
            targets = statement.targets if isinstance(statement, ast.Assign) else [
                statement.target]
            above.update(t.id for t in targets if isinstance(t, ast.Name))
    for name in above:
        if any(_called_for_effect(statement, name) for statement in statements):
            effects.add(name)
    values = [name for name in unused_values(tree, source, low, high)
              if name in above and name not in effects]
    return values + _unread_parameters(tree, inner)


def _unread_parameters(tree: ast.Module,
                       inner: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters of `inner` that nothing in it reads, where `inner` is a plain
    function: not a method (an override takes what its caller passes, used or not: one
    in a class's body, or, where the chunk parsed holds no class, one whose first
    parameter is `self` or `cls`) and not decorated; none with a leading `_`."""
    given = inner.args.posonlyargs + inner.args.args + inner.args.kwonlyargs
    if (inner.decorator_list or (given and given[0].arg in ("self", "cls"))
            or any(isinstance(node, ast.ClassDef) and inner in node.body
                   for node in ast.walk(tree))):
        return []
    reads = {node.id for node in ast.walk(inner)
             if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return [p.arg for p in given if p.arg not in reads and not p.arg.startswith("_")]
