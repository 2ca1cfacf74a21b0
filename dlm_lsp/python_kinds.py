"""Values whose kind the code says, used as that kind cannot be: TypeError, AttributeError.

A fill can parse, read only bound names in order, call what takes its arguments, and
still fail wherever it runs: `for j in l(i):` where `l: list`, `for c in depth:` where
`depth = 0`, `min_value = arr.max()` on a list, or `ans = 0` above the `ans.append(x)`
the code below makes.  Of the shipped model's 200 single-line HumanEval fills at the
oracle length with the binding hints (code ee5c406), 21 raised a TypeError or an
AttributeError; this check flags 4 of them (`for c in depth:`, `ans = 0`, two numbers
subscripted below), the rest calling or indexing names no annotation or literal types.

A name's kind is known in a function where every binding of it there (nested scopes
too) gives the same one: a parameter annotated `str`, `int`, `float`, `bool`, `list`,
`dict`, `set` or `tuple` (`List[int]`, `dict[str, int]` too) and no default of another
kind; an assignment of a literal (`0`, `""`, `[]`, `{}`, `None`, a comprehension, an
f-string) or of a call of a builtin that returns one (`len`, `int`, `str`, `sorted`, ...;
the name rebound nowhere in the code checked).  Augmented assignments keep it; any
other binding (a loop's target, unpacking, `with ... as`, `global`) leaves it unknown.
A number (int, float or bool) or None cannot be called, iterated, tested with `in` or
subscripted; a str, list, dict, set or tuple cannot be called, nor a set subscripted;
none has an attribute its type lacks.

The check is made on the function that holds the fill, and a use is reported where the
fill makes it, or where the fill gave the name its kind and the code around uses it so
(pointing at the value the fill bound).  As python_names, it errs toward passing: a
name it is not sure of is not judged.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import NamedTuple

from dlm_lsp.python_names import binds, node_offsets
from dlm_lsp.python_order import functions_over

_TYPES = {"number": (int, float, bool), "none": (type(None),), "str": (str,),
          "list": (list,), "dict": (dict,), "set": (set,), "tuple": (tuple,)}
_ANNOTATED = {"int": "number", "float": "number", "bool": "number", "str": "str",
              "list": "list", "List": "list", "dict": "dict", "Dict": "dict", "set": "set",
              "Set": "set", "tuple": "tuple", "Tuple": "tuple"}
_RETURNS = {"len": "number", "int": "number", "float": "number", "ord": "number",
            "str": "str", "chr": "str", "repr": "str", "list": "list", "sorted": "list",
            "dict": "dict", "set": "set", "tuple": "tuple"}
_LITERALS = ((ast.List, ast.ListComp), "list"), ((ast.Dict, ast.DictComp), "dict"), \
    ((ast.Set, ast.SetComp), "set"), ((ast.Tuple,), "tuple"), ((ast.JoinedStr,), "str")
_UNCALLED = ("number", "none", "str", "list", "dict", "set", "tuple")
_UNITERABLE = ("number", "none")
_UNSUBSCRIPTED = ("number", "none", "set")


class Misuse(NamedTuple):
    """A use of a name its kind cannot serve: character offsets in the source checked of
    the use (or of the value the fill bound), the name, and why (Python's own words)."""

    start: int
    end: int
    name: str
    why: str


def _type_name(kind: str) -> str:
    return {"number": "int", "none": "NoneType"}.get(kind, kind)


def _annotated(arg: ast.arg) -> str | None:
    note = arg.annotation
    if isinstance(note, ast.Subscript):
        note = note.value
    if isinstance(note, ast.Attribute):  # typing.List
        note = ast.Name(note.attr)
    return _ANNOTATED.get(note.id) if isinstance(note, ast.Name) else None


def _of_value(value: ast.AST, rebound: Callable[[str], bool]) -> str | None:
    """The kind of what `value` evaluates to, where its form says it."""
    if isinstance(value, ast.Constant):
        if value.value is None:
            return "none"
        if isinstance(value.value, (bool, int, float)):
            return "number"
        return "str" if isinstance(value.value, str) else None
    for types, kind in _LITERALS:
        if isinstance(value, types):
            return kind
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id in _RETURNS and not rebound(value.func.id):
        return _RETURNS[value.func.id]
    return None


def _parameters(node: ast.AST) -> Iterator[tuple[ast.arg, ast.AST | None]]:
    """A function's parameters, each with its default (None where it has none)."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    yield from zip(positional, defaults, strict=True)
    yield from zip(args.kwonlyargs, args.kw_defaults, strict=True)
    for arg in (args.vararg, args.kwarg):
        if arg is not None:
            yield arg, None


def _kinds(function: ast.AST, rebound: Callable[[str], bool]
           ) -> tuple[dict[str, str], dict[str, list]]:
    """The names whose kind `function` says, and for each the values that give it (the
    parameter's node where its annotation does)."""
    kinds: dict[str, set[str | None]] = defaultdict(set)
    givers: dict[str, list[ast.AST]] = defaultdict(list)
    own = {id(arg) for arg, _ in _parameters(function)}
    for arg, default in _parameters(function):
        kind = _annotated(arg) if arg not in (function.args.vararg, function.args.kwarg) \
            else None
        if default is not None and _of_value(default, rebound) not in (kind, None):
            kind = None
        kinds[arg.arg].add(kind)
        givers[arg.arg].append(arg)
    augmented = {id(node.target) for node in ast.walk(function)
                 if isinstance(node, ast.AugAssign)}
    for node in ast.walk(function):
        if node is function or id(node) in own:
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    kinds[target.id].add(_of_value(node.value, rebound))
                    givers[target.id].append(node.value)
                    own.add(id(target))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                kinds[name].add(None)
        elif id(node) not in augmented and id(node) not in own:
            for name in binds(node):
                kinds[name].add(None)
    known = {name: next(iter(found)) for name, found in kinds.items()
             if len(found) == 1 and None not in found}
    return known, givers


def _uses(function: ast.AST, known: dict[str, str]) -> Iterator[tuple[ast.Name, str]]:
    """Each read of a name of known kind that the kind cannot serve, with why."""
    def kind_of(node: ast.AST) -> str | None:
        return known.get(node.id) if isinstance(node, ast.Name) else None

    for node in ast.walk(function):
        if isinstance(node, ast.Call) and kind_of(node.func) in _UNCALLED:
            kind = kind_of(node.func)
            yield node.func, f"'{_type_name(kind)}' object is not callable"
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and kind_of(node.iter) in _UNITERABLE:
            yield node.iter, f"'{_type_name(kind_of(node.iter))}' object is not iterable"
        elif isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) and kind_of(right) in _UNITERABLE:
                    yield right, (f"argument of type '{_type_name(kind_of(right))}' is not "
                                  "iterable")
        elif isinstance(node, ast.Subscript) and kind_of(node.value) in _UNSUBSCRIPTED:
            yield node.value, (f"'{_type_name(kind_of(node.value))}' object is not "
                               "subscriptable")
        elif isinstance(node, ast.Attribute) and kind_of(node.value) is not None:
            kind = kind_of(node.value)
            if not any(hasattr(t, node.attr) for t in _TYPES[kind]):
                yield node.value, (f"'{_type_name(kind)}' object has no attribute "
                                   f"'{node.attr}'")


def _rebinds(name: str, text: str) -> bool:
    """Whether `text` may bind `name` (`def len(`, `len = ...`, `import x as len`)."""
    word = re.escape(name)
    return re.search(rf"\b(def|class)\s+{word}\b|^[ \t]*{word}\s*(:[^=\n]*)?=(?!=)|"
                     rf"\bimport\b[^\n]*\b{word}\b", text, re.M) is not None


def rebinds(name: str, texts: tuple[str, ...]) -> bool:
    """Whether any of `texts` may bind the builtin `name`."""
    return any(_rebinds(name, text) for text in texts)


def misuses(tree: ast.Module, source: str, low: int, high: int,
            elsewhere: Callable[[str], bool] = lambda name: False) -> list[Misuse]:
    """The uses of a name its kind cannot serve (see the module's docstring) that the
    fill over source[low:high] makes, or that its binding brings about, in a function of
    `tree` (parsed from `source`) that holds it; `elsewhere(name)`: whether the
    document's text outside the span (or the code shown beside it) may rebind the builtin
    `name`, whose result then says no kind (`rebinds`, kept by the caller for the span:
    the text is long, and the same at every fill); the function itself is read here."""
    offset = node_offsets(source)
    rows = (source.count("\n", 0, low) + 1, source.count("\n", 0, high) + 1)

    def end_of(node: ast.AST) -> int | None:
        return offset(SimpleNamespace(lineno=node.end_lineno, col_offset=node.end_col_offset))

    found: dict[str, Misuse] = {}
    for function in functions_over(tree, rows):
        local = frozenset(name for node in ast.walk(function) for name in binds(node))
        known, givers = _kinds(function, lambda name, local=local: name in local
                               or elsewhere(name))
        for read, why in _uses(function, known):
            at = offset(read)
            if at is None or read.id in found:
                continue
            if low <= at < high:
                found[read.id] = Misuse(at, at + len(read.id), read.id, why)
                continue
            given = [g for g in givers[read.id] if not isinstance(g, ast.arg)
                     and (start := offset(g)) is not None and low <= start < high]
            if given:
                start, end = offset(given[0]), end_of(given[0])
                found[read.id] = Misuse(start, end or start, read.id, why)
    return sorted(found.values())
