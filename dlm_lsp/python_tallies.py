"""The locals a Python loop around a fill is there to update, and does not: the line the
fill should begin with (`tallyHints`, passes.InfillRun.tally_hint).

A counter set to 0 just before a loop and returned after it (`ans = 0`, `for ...:`, `if
...:`, the fill, `return ans`) says what the line in the loop is for: `ans += 1`.  The
shipped model often writes something else there, valid and wrong (`return i`, `odd_count
+= 1` where `even_count` was set), and the function then returns the constant it began
with whatever the loop saw.  With the fill in, such a local (an idle tally) is bound
first to a constant or an empty container, by a statement of the block that holds the
loop, before it; it is read after the loop; and nothing in the function changes it: no
other binding but to that constant again or to itself (`count = 0`, `ans = ans`: what
the model wrote for `count += 1`), no update in place (`out.append(x)`, `seen[k] = v`);
one holding a container is not touched inside the loop at all (`helper(out)` may fill
it).  The fill's first line is in the loop's body.

Python itself never complains: the code runs, the loop is idle.  Measured as this was
written (`benchmarks/names_check.py`, code 2cd50ba), on lines people wrote: with the
line written back, no local is idle for any of HumanEval-Infilling's 1,033 single-line
and 5,815 multi-line canonical middles nor for 3,000 held-out standard-library lines.
With the line cleared, 9 single-line tasks leave one idle and all 9 lines begin with its
name (1 of 1 held-out; 21 of 49 multi-line spans, whose first line is often the `if`
above the update).  Of the shipped model's failed single-line fills at the oracle
length (00032ee), 8 leave one idle, and each canonical line begins with that name
(`return i` for `ans += 1`).

A counter the hinted fill sets to a number once more (`odd = 1` where `odd = 0` began
it: `resets`) moves, but whatever the loop saw; the hint's pass then tries again with the
`=` barred, and keeps the first fill where no try moves the local otherwise (a flag may
be written so: HumanEval/161's `flg = 1`).

The other way round, a fill may begin a tally at a number that its updates can never
move: `prod_value = 0` above `prod_value *= n` (a product begun at 0 stays 0; likewise
`&=` and `//=` on 0, `**=` on 1, `|=` on -1).  Such a fill is rejected (`stuck_tallies`,
with `checkNames`), pointing at the number for repair to write again.  No canonical
HumanEval-Infilling middle, no held-out line and no function of 15,258 modules (this
machine's standard library and the venv's packages) does it.
"""

from __future__ import annotations

import ast
import operator
from typing import NamedTuple

from dlm_lsp.python_names import node_offsets
from dlm_lsp.python_order import body_function
from dlm_lsp.python_returns import LOOPS, SCOPES, mutates, own_nodes

# the calls whose value is a new, empty container
_CONTAINERS = frozenset({"list", "dict", "set", "bytearray", "deque", "defaultdict",
                         "Counter", "OrderedDict"})
_CONSTANT_CALLS = frozenset({"str", "int", "float", "bool", "tuple", "frozenset", "bytes"})


def _seed(value: ast.expr) -> bool | None:
    """Whether `value` is a constant a tally begins with: False for one that cannot be
    changed in place (`0`, `-1`, `""`, `None`, `()`), True for an empty or literal
    container (`[]`, `{}`, `set()`); None for anything else (a value computed)."""
    if isinstance(value, ast.UnaryOp):
        value = value.operand
    if isinstance(value, ast.Constant):
        return False
    if isinstance(value, ast.Tuple) and not value.elts:
        return False
    if isinstance(value, (ast.List, ast.Dict, ast.Set)):
        return True
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        name = value.func.id if isinstance(value.func, ast.Name) else None
        if name in _CONTAINERS:
            return True
        if name in _CONSTANT_CALLS:
            return False
    return None


_FOLDS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
          ast.BitOr: operator.or_, ast.BitAnd: operator.and_}


def _number(node: ast.expr) -> object:
    """The number `node` spells (`0`, `-1`), or None."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        sign, node = -1, node.operand
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sign * node.value
    return None


def _idle_update(statement: ast.stmt, seed: ast.expr) -> bool:
    """Whether `statement`, an update of a local that began as `seed`, leaves it as it
    began: `ans += 0`, `total *= 0` where `total = 0` (what the model wrote for `ans += 1`
    and `total += x`)."""
    if not isinstance(statement, ast.AugAssign) or type(statement.op) not in _FOLDS:
        return False
    start, step = _number(seed), _number(statement.value)
    if start is None or step is None:
        return False
    try:
        return _FOLDS[type(statement.op)](start, step) == start
    except (ArithmeticError, ValueError):
        return False


def _leaves(statement: ast.Assign | ast.AugAssign, seed: ast.expr, name: str,
            container: bool) -> bool:
    """Whether `statement`, which binds `name` (begun as `seed`) once more, leaves it as
    it began: `count = 0` again, `ans = ans`, `ans += 0` (what the model wrote for `count
    += 1`); for a container, bound to any other constant."""
    if isinstance(statement, ast.AugAssign):
        return _idle_update(statement, seed)
    value = statement.value
    return (ast.dump(value) == ast.dump(seed) or (isinstance(value, ast.Name) and value.id == name)
            or (container and _seed(value) is not None))


def _changed_in_place(node: ast.AST, name: str) -> bool:
    """Whether `node` reads an attribute of `name` (`out.pop()`, `out.sort`), which may
    change a container where it is called."""
    for inner in ast.walk(node):
        if isinstance(inner, ast.Attribute) and isinstance(inner.value, ast.Name) \
                and inner.value.id == name:
            return True
    return False


def idle_tallies(tree: ast.Module, source: str, low: int, high: int) -> list[str]:
    """The locals that a loop around source[low:high] (the fill, whose first line must be
    in the loop's body) leaves idle in `tree`, parsed from `source` with the fill in: see
    the module's docstring.  The one bound nearest above its loop first."""
    row = source.count("\n", 0, low) + 1
    inner = body_function(tree, row)
    if inner is None:
        return []
    own = list(own_nodes(inner.body))
    loops = [node for node in own
             if isinstance(node, LOOPS) and node.body[0].lineno <= row <= node.end_lineno]
    if not loops:
        return []
    bound: dict[str, list[ast.AST]] = {}  # a name -> the nodes that bind or declare it
    for node in own:
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bound.setdefault(name, []).append(node)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.setdefault(node.id, []).append(node)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.alias):
            bound.setdefault((node.asname or node.name).partition(".")[0], []).append(node)
    closed = {name.id for node in ast.walk(inner) if isinstance(node, SCOPES)
              and node is not inner for name in ast.walk(node) if isinstance(name, ast.Name)}
    params = {arg.arg for arg in ast.walk(inner.args) if isinstance(arg, ast.arg)}
    statements = [node for node in own if isinstance(node, ast.stmt)]
    blocks = [block for node in (inner, *own) for field in ("body", "orelse", "finalbody")
              if isinstance(block := getattr(node, field, None), list)]
    # a binding Name -> its statement, where one binds it alone (`ans = 0`, `ans += 1`)
    assigned = {id(s.targets[0] if isinstance(s, ast.Assign) else s.target): s
                for s in statements if isinstance(s, ast.AugAssign)
                or (isinstance(s, ast.Assign) and len(s.targets) == 1)}
    found: list[tuple[int, str]] = []
    for name, nodes in bound.items():
        nodes.sort(key=lambda node: (node.lineno, node.col_offset))
        if name in closed | params or id(nodes[0]) not in assigned:
            continue
        seeded = assigned[id(nodes[0])]
        container = None if isinstance(seeded, ast.AugAssign) else _seed(seeded.value)
        if container is None:
            continue
        again = [assigned.get(id(node)) for node in nodes[1:]]
        if any(s is None or not _leaves(s, seeded.value, name, container) for s in again):
            continue
        if any(mutates(s, name) for s in statements if s is not seeded and s not in again):
            continue
        if container and any(_changed_in_place(s, name) for s in statements):
            continue
        rebound = {id(node) for node in nodes[1:]}
        for loop in loops:
            block = next((b for b in blocks if loop in b), [])
            if seeded not in block or block.index(seeded) > block.index(loop):
                continue
            if container and any(isinstance(n, ast.Name) and n.id == name
                                 and id(n) not in rebound for n in ast.walk(loop)):
                continue  # read in the loop: passed to a call, a name for it made there
            if any(isinstance(n, ast.Name) and n.id == name and n.lineno > loop.end_lineno
                   for n in own):
                found.append((seeded.lineno, name))
                break
    return [name for _, name in sorted(found, reverse=True)]


def resets(tree: ast.Module, source: str, low: int, high: int, name: str) -> bool:
    """Whether the fill (source[low:high]) sets `name`, which the innermost function
    around it begins as a number above the fill (`odd = 0`, not `False`), to a number
    once more (`odd = 1`): a counter set whatever the loop saw, where the tally hint's
    pass was to update it (`odd += 1`); or `name`, begun as a container (`idx = []`),
    to another name (`idx = i`, where `idx.append(i)` was).

    Not idle, since the local moves; a flag may be written so (`flg = 1`, HumanEval/161's
    canonical line), which is why this only asks the hint's pass to try once more and
    keeps what it wrote where that try does not update the local.  With the length
    policy, 4 of the shipped model's 200 single-line fills at 2214f81 were such a line
    from the tally hint (`ans = 1`, `odd = 1`, `squared = 1`), and 1 at the oracle
    length; all failed."""
    inner = body_function(tree, source.count("\n", 0, low) + 1)
    if inner is None:
        return False
    offset = node_offsets(source)
    sets = sorted((node for node in own_nodes(inner.body) if isinstance(node, ast.Assign)
                   and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                   and node.targets[0].id == name), key=lambda node: node.lineno)
    if not sets or (start := offset(sets[0])) is None or start >= low:
        return False
    number, container = _number(sets[0].value) is not None, _seed(sets[0].value)
    if not number and not container:
        return False
    return any(low <= (offset(node) or -1) < high and (
        _number(node.value) is not None if number
        else isinstance(node.value, ast.Name) and node.value.id != name)
        for node in sets[1:])


class Stuck(NamedTuple):
    """A local the fill begins at a number that every update of it leaves as it is:
    character offsets of that number in the source checked, the name, the operator."""

    start: int
    end: int
    name: str
    op: str


# (operator, the number it never moves): 0 * x, 0 & x, 0 // x, 0 % x, 0 << x, 0 >> x,
# 1 ** x, -1 | x
_ABSORBING = {(ast.Mult, 0): "*=", (ast.BitAnd, 0): "&=", (ast.FloorDiv, 0): "//=",
              (ast.Mod, 0): "%=", (ast.LShift, 0): "<<=", (ast.RShift, 0): ">>=",
              (ast.Pow, 1): "**=", (ast.BitOr, -1): "|="}


def stuck_tallies(tree: ast.Module, source: str, low: int, high: int) -> list[Stuck]:
    """The locals the fill (source[low:high]) begins at a number that their updates can
    never move: `prod_value = 0` above `prod_value *= n`, the function's only other
    binding of it (a product begun at 0 stays 0).  Each such local is bound nowhere
    else in the innermost function around the fill, and updated at least once."""
    inner = body_function(tree, source.count("\n", 0, low) + 1)
    if inner is None:
        return []
    offset = node_offsets(source)
    own = list(own_nodes(inner.body))
    found = []
    for seed in own:
        if not (isinstance(seed, ast.Assign) and len(seed.targets) == 1
                and isinstance(seed.targets[0], ast.Name)):
            continue
        start, number = offset(seed), _number(seed.value)
        if start is None or not low <= start < high or number is None:
            continue
        name = seed.targets[0].id
        binds = [node for node in own if isinstance(node, ast.Name) and node.id == name
                 and not isinstance(node.ctx, ast.Load) and node is not seed.targets[0]]
        updates = [node for node in own if isinstance(node, ast.AugAssign)
                   and isinstance(node.target, ast.Name) and node.target.id == name]
        ops = {_ABSORBING.get((type(update.op), number)) for update in updates}
        if (updates and len(binds) == len(updates) and None not in ops
                and not any(isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names
                            for node in own)):
            found.append(Stuck(offset(seed.value), offset(seed.value, end=True), name,
                               sorted(ops)[0]))
    return found
