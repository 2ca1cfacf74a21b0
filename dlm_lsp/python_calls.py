"""Calls a Python fill makes with arguments the callee cannot take.

A fill can parse, read only names that exist, and still fail at once: `abs(x, y, 1)`,
`sum(q, w, w, -1)`, or the function being written called with one argument too many
(`factorize(n, n)` for `def factorize(n)`).  Of the shipped model's 200 single-line
HumanEval fills at the oracle length, 18 failed with a TypeError, a third of them such
calls.  A call is checked when all hold:

* it starts inside the fill, calls a bare name (not an attribute: a method's class is
  not known), and passes no `*args` or `**kwargs`;
* the name is a function the statements around the span define once, undecorated, and
  bind no other way (no assignment, import, parameter, loop variable...) in any scope
  around the call, nor anywhere else in the document as a name; or it is a builtin
  function (`inspect.isbuiltin`: `len`, `abs`, `sum`, `sorted`, `isinstance`, ...; not a
  type such as `int` or `range`, whose signatures Python does not give) that nothing in
  the document rebinds, the name used nowhere outside those statements;
* its signature cannot bind the call's arguments (`inspect.Signature.bind`: too many or
  too few positional arguments, an unknown or repeated keyword).

As python_names, the check errs toward passing: a callee it is not sure of is not
checked.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from collections import Counter
from collections.abc import Iterator
from typing import NamedTuple

from dlm_lsp.python_names import binds, node_offsets, nodes_over, used_as_name

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class BadCall(NamedTuple):
    """A call the callee cannot take: character offsets of its name in the source
    checked, the name, and why (Python's own words)."""

    start: int
    end: int
    name: str
    why: str


def _builtin_signature(name: str) -> inspect.Signature | None:
    function = getattr(builtins, name, None)
    if function is None or not inspect.isbuiltin(function):
        return None
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None


def _signature(arguments: ast.arguments) -> inspect.Signature:
    """The signature a `def` declares (defaults as placeholders: only their presence
    matters to binding)."""
    P = inspect.Parameter
    positional = [*arguments.posonlyargs, *arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    params = [P(a.arg, P.POSITIONAL_ONLY if i < len(arguments.posonlyargs)
                else P.POSITIONAL_OR_KEYWORD, default=None if i >= first_default else P.empty)
              for i, a in enumerate(positional)]
    if arguments.vararg is not None:
        params.append(P(arguments.vararg.arg, P.VAR_POSITIONAL))
    params += [P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else None)
               for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)]
    if arguments.kwarg is not None:
        params.append(P(arguments.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _calls_over(tree: ast.AST, rows: tuple[int, int]) -> Iterator[ast.Call]:
    """The calls of a bare name, with no `*args` or `**kwargs`, on lines that meet rows
    [first, last] (1-based)."""
    for node in nodes_over(tree, rows):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and not any(isinstance(a, ast.Starred) for a in node.args)
                and all(k.arg is not None for k in node.keywords)):
            yield node


def bad_calls(tree: ast.Module, source: str, low: int, high: int,
              elsewhere: tuple[str, ...]) -> list[BadCall]:
    """The calls starting in source[low:high] that their callee cannot take (see the
    module's docstring); `elsewhere`: the document's text outside `source` (and the code
    the model is shown beside it), where a callee's name must not occur."""
    offset = node_offsets(source)
    rows = (source.count("\n", 0, low) + 1, source.count("\n", 0, high) + 1)
    placed = ((offset(call), call) for call in _calls_over(tree, rows))
    calls = [(at, call) for at, call in placed if at is not None and low <= at < high]
    if not calls:
        return []
    # one walk of the chunk: how often each name is bound, in any scope and any way, and
    # the functions defined undecorated outside a class body (a bare call never reaches
    # a method; a class is met before its body)
    counts: Counter[str] = Counter()
    methods: set[int] = set()
    defined: dict[str, ast.AST] = {}
    for node in ast.walk(tree):
        counts.update(binds(node))
        if isinstance(node, ast.ClassDef):
            methods.update(id(child) for child in node.body)
        elif (isinstance(node, _DEFINITIONS) and not node.decorator_list
              and id(node) not in methods):
            defined[node.name] = node
    found = []
    for at, call in calls:
        name = call.func.id
        definition = defined.get(name)
        if definition is not None and counts.get(name) == 1:
            signature = _signature(definition.args)
        elif name not in counts:
            signature = _builtin_signature(name)
        else:
            continue
        if signature is None or any(used_as_name(name, text) for text in elsewhere):
            continue
        try:
            signature.bind(*call.args, **{k.arg: k.value for k in call.keywords})
        except TypeError as error:
            found.append(BadCall(at, at + len(name), name, f"{name}(): {error}"))
    return sorted(found)
