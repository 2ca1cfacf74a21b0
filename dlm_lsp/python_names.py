"""Names a Python fill reads that nothing defines: fills that parse and fail at once.

A fill can be valid Python and still read a name no code binds: `return _sum_sign(x)`
with no `_sum_sign` anywhere, `if e == m:` in a function that binds neither.  Of the
shipped model's 200 single-line HumanEval fills at the oracle length, 27 parsed and
then failed with a NameError, more than passed (24); this check flags most of them, and
none of the 6,848 canonical middles of HumanEval-Infilling's single- and multi-line
tasks nor of 2,996 lines of held-out standard-library files (each line as the fill,
its file around it: `benchmarks/names_check.py`).  A flagged fill is treated as a
rejected one: repair re-masks the name and the left-to-right retry follows, as for a
syntax error.

A read (`ast.Name` loaded, starting inside the fill, or a word the user began that the
fill goes on with: `st` completed as `sth`) is undefined when all hold:

* no scope around it binds the name, in the statements python_syntax parses around the
  span (its chunk): the function, lambda, comprehension or class it is in, any around
  those, the chunk's top level.  A binding anywhere in a scope counts, before or after
  the read (order is python_order's business: a read before any binding), and
  a class's names count for its methods, a function's for its defaults: the check only
  errs toward passing;
* it is no builtin and no dunder (`__file__`, `__name__`: the module's own);
* outside a top-level chunk, no top-level statement binds it at the module level or
  declares it `global`, and it is no word of one that does not parse alone
  (python_globals); outside a chunk cut inside a block, or a document whose text outside
  the chunk is over 200,000 characters, it is no word there, other than after a `.` (a
  global defined further off, even in a string or a comment).  Nor is it a word of the
  span's old text (a rewrite may keep what the user wrote), nor of the code the model
  is shown around the document (a notebook's other cells, `InfillRequest.before`);
* the user's code around the fill does not call it (`helper(x)` above a fill that calls
  `helper` too: a function the user has yet to write).  A value the user's code reads
  unbound is no such excuse: `c` read below a fill `if c == '(':` that should have bound
  it (`for c in s:`) is still the fill's NameError;
* the document has none of what defines names no reading finds: `import *`,
  `globals()`, `exec(`, `__builtins__`.

The words outside the chunk are searched for per undefined read, which is rare: a
document's words are never collected (a 5 MB file's took ~0.3 s a version).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

BUILTIN_NAMES = frozenset(dir(builtins))

# What can define a name that no binding shows: a star import, writes through globals(),
# exec'd text, injected builtins.
_DYNAMIC = re.compile(r"\bimport\s+\*|\bglobals\s*\(|\bexec\s*\(|__builtins__")

# A `global` statement and the names it declares (any text that looks like one: a string
# that does only adds names taken to exist).
_GLOBAL = re.compile(r"\bglobal\s+([^\W\d]\w*(?:[ \t]*,[ \t]*[^\W\d]\w*)*)")

# The nodes whose body is a scope of its own.
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


class Read(NamedTuple):
    """A name read where nothing binds it: character offsets in the source checked."""

    start: int
    end: int
    name: str


class _Scope:
    def __init__(self, parent: _Scope | None):
        self.parent = parent
        self.bound: set[str] = set()

    def binds(self, name: str) -> bool:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.bound:
                return True
            scope = scope.parent
        return False


def defines_dynamically(text: str) -> bool:
    """Whether `text` may define names that no binding in it shows."""
    return _DYNAMIC.search(text) is not None


def used_as_name(name: str, text: str) -> bool:
    """Whether `name` occurs in `text` as a word that is no attribute (not after a `.`).
    Strings and comments count: a global defined in code that does not parse, or named
    where it is explained, is taken to exist."""
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", text) is not None


def called(name: str, text: str) -> bool:
    """Whether `text` calls `name` (`name(`, not after a `.` nor `def`): the user's code
    calling a function the user has yet to write."""
    return re.search(rf"(?<![\w.])(?<!def ){re.escape(name)}\s*\(", text) is not None


def binds(node: ast.AST) -> Iterator[str]:
    """The names `node` binds in the scope it sits in (not those of nested scopes; a
    parameter, in its function's, where `_walk` meets it)."""
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
        yield node.id
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (*_FUNCTIONS[:2], ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.alias):
        yield (node.asname or node.name).partition(".")[0]
    elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names


def _elsewhere(node: ast.AST, rows: tuple[int, int]) -> bool:
    """Whether `node` is a function or class whose lines (its decorators' too) miss rows
    [first, last] (1-based): nothing it holds is read in the fill, and what it binds
    inside is its own, but for `global` names (found apart, by `_GLOBAL`).  Not walked:
    a chunk is often a class of thousands of nodes, a few ms of walking."""
    if not isinstance(node, (*_FUNCTIONS[:2], ast.ClassDef)):
        return False
    top = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return node.end_lineno is not None and (node.end_lineno < rows[0] or top > rows[1])


def _walk(node: ast.AST, scope: _Scope, reads: list[tuple[ast.Name, _Scope]],
          everywhere: set[str], rows: tuple[int, int]) -> None:
    for child in ast.iter_child_nodes(node):
        scope.bound.update(binds(child))
        if _elsewhere(child, rows):
            continue
        if isinstance(child, (ast.Global, ast.Nonlocal)):
            everywhere.update(child.names)  # bound at the module, or in a function around
        if isinstance(child, ast.NamedExpr) and isinstance(child.target, ast.Name):
            everywhere.add(child.target.id)  # binds in the function around a comprehension
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            reads.append((child, scope))
        inner = scope
        if isinstance(child, (*_FUNCTIONS, ast.ClassDef, *_COMPREHENSIONS)):
            inner = _Scope(scope)
            for param in getattr(child, "type_params", ()):  # Python 3.12's generics
                inner.bound.add(param.name)
        # a function's parameters (`ast.arg`, in its `arguments`) are met in its scope
        _walk(child, inner, reads, everywhere, rows)


def nodes_over(tree: ast.AST, rows: tuple[int, int]) -> Iterator[ast.AST]:
    """The nodes of `tree` whose lines meet rows [first, last] (1-based); what lies wholly
    above or below is not walked (a chunk is often a long class)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            end = getattr(child, "end_lineno", None)
            if end is not None and (end < rows[0] or child.lineno > rows[1]):
                continue
            yield child
            stack.append(child)


def node_offsets(source: str) -> Callable[..., int | None]:
    """The character offset in `source` where a node of its tree starts, or with `end`
    where it ends (None past its lines): ast counts columns in UTF-8 bytes."""
    lines = source.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(node: ast.AST, end: bool = False) -> int | None:
        row, column = ((node.end_lineno, node.end_col_offset) if end
                       else (node.lineno, node.col_offset))
        row -= 1
        if row >= len(lines):
            return None
        line = lines[row]
        return starts[row] + len(line.encode("utf-8")[:column].decode("utf-8", "replace"))
    return offset


def unbound_reads(tree: ast.Module, source: str, low: int, high: int,
                  written: bool = False) -> list[Read]:
    """The reads starting in source[low:high] that no scope of `tree` (parsed from
    `source`) binds, builtins and dunders left out, in the order of the text; with
    `written`, also those that start before `low` and go on into the range: the name
    the user began to type, which a fill that completes it (`st` + `h`) writes too."""
    root = _Scope(None)
    reads: list[tuple[ast.Name, _Scope]] = []
    # names a `global` statement declares, in functions walked or not
    everywhere = {name for names in _GLOBAL.findall(source)
                  for name in re.split(r"[\s,\\]+", names) if name}
    rows = (source.count("\n", 0, low) + 1, source.count("\n", 0, high) + 1)
    _walk(tree, root, reads, everywhere, rows)
    offset = node_offsets(source)
    found = []
    for node, scope in reads:
        name = node.id
        if (name in BUILTIN_NAMES or name in everywhere or (name.startswith("__")
                                                              and name.endswith("__"))
                or scope.binds(name)):
            continue
        at = offset(node)
        if at is not None and (low <= at < high or written and at < low < at + len(name)
                               and low < high):
            found.append(Read(at, at + len(name), name))
    return sorted(found)


def undefined(reads: Iterable[Read], elsewhere: Iterable[str]) -> list[Read]:
    """Those of `reads` whose name no text of `elsewhere` uses as a name."""
    texts = list(elsewhere)
    return [read for read in reads if not any(used_as_name(read.name, t) for t in texts)]
