"""Reads of a function's local variable that no binding can reach: UnboundLocalError.

A name a function binds anywhere is local to the whole function, so a fill that reads
it before any binding could have run fails at once: `for c in c:` (the loop's `c` is
the only binding), `if n in None:` above the `for n in numbers:` that binds `n`,
`x = x + 1` in a function where `x` was a global.  Of the shipped model's 200
single-line HumanEval fills at the oracle length, 17 failed with an UnboundLocalError
once the names check (python_names) had them read names that something binds.

The check walks the function's statements in the order they run and keeps the names
some path could have bound by then.  Every choice errs toward a binding: both arms of
an `if`, any part of a `try`, a loop's body whatever it binds anywhere in the loop (a
read at a loop's top may see the last iteration's value), code after `return` or
`break` as if it ran.  So a read is flagged only where no path at all binds the name
first, and running it can only raise.  A loop's first test (`while` and the iterable of
`for`) runs once before the loop, and is read so.  So is what the loop's body reads
whenever it runs, before its statements bind anything (`if running_max is None:` at the
top of the loop that binds `running_max` below it): until that read first runs, every
iteration ran only what stands above it, so a later iteration brings no binding.  A read
the body makes only on a condition (`if i: d = x - prev`) may wait for one that does,
and is not judged so.

Only whole functions are judged (their `def` in the statements parsed around the span):
the bindings above the span must be seen to say none exists.  Reads in a nested
function or lambda run when it is called, after the enclosing function may have bound
the name, so they are left out; those of a comprehension run where it stands.  A class
body's reads fall back to the globals and are left out too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from dlm_lsp.python_names import Read, binds, node_offsets, nodes_over

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_DEFS, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp)


def _bindings(nodes: Iterable[ast.AST], augmented: bool = True) -> Iterator[str]:
    """The names `nodes` bind in their scope, nested scopes' own names left out (a nested
    function's or class's name is its scope's; a comprehension's `:=` is, too); without
    `augmented`, not the names an augmented assignment binds (`n += 1`), which binds
    only a name that something bound before."""
    for node in nodes:
        if not isinstance(node, (ast.Global, ast.Nonlocal)):
            yield from binds(node)
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            yield node.target.id
        if isinstance(node, _DEFS + (ast.ClassDef,)):
            yield from _bindings([*node.decorator_list, *_defaults(node)], augmented)
        elif isinstance(node, ast.Lambda):
            yield from _bindings(_defaults(node), augmented)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            yield from (n.target.id for n in ast.walk(node)
                        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name))
        elif not augmented and isinstance(node, ast.AugAssign):
            yield from _bindings([node.value], augmented)
        else:
            yield from _bindings(ast.iter_child_nodes(node), augmented)


def _defaults(node: ast.AST) -> list[ast.AST]:
    """What a `def`, `lambda` or `class` statement evaluates where it stands."""
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *node.keywords]
    args = node.args
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None)]


def _parameters(node: ast.AST) -> set[str]:
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {arg.arg for arg in every if arg is not None}


def _declared(body: list[ast.stmt]) -> set[str]:
    """The names a `global` or `nonlocal` statement of this scope declares."""
    found: set[str] = set()
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            found.update(node.names)
        elif not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return found


class _Flow:
    """One function's statements walked in the order they run (see module docstring)."""

    def __init__(self, local: set[str], offset, low: int, high: int,
                 unbind: tuple[int, int] | None = None):
        self.local = local
        self.offset = offset
        self.low, self.high = low, high
        self.unbind = unbind  # where a `del` unbinds its names (elsewhere: it is passed over)
        self.found: list[Read] = []

    def read(self, node: ast.Name, bound: set[str]) -> None:
        if node.id in self.local and node.id not in bound:
            at = self.offset(node)
            if at is not None and self.low <= at < self.high:
                self.found.append(Read(at, at + len(node.id), node.id))

    def expr(self, node: ast.AST | None, bound: set[str]) -> None:
        """Walk an expression (or a target) in evaluation order; adds what it binds."""
        if node is None:
            return
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.read(node, bound)
            elif isinstance(node.ctx, ast.Store):
                bound.add(node.id)
        elif isinstance(node, ast.NamedExpr):
            self.expr(node.value, bound)
            self.expr(node.target, bound)
        elif isinstance(node, ast.Lambda):
            for child in _defaults(node):
                self.expr(child, bound)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            self.comprehension(node, bound)
        else:
            for child in ast.iter_child_nodes(node):
                self.expr(child, bound)

    def comprehension(self, node: ast.AST, bound: set[str]) -> None:
        """The first iterable is read here; the rest runs at once in the comprehension's
        own scope, whose targets hide the function's names of the same spelling.  A
        generator expression's rest runs as it is consumed, perhaps after a binding."""
        first, *rest = node.generators
        self.expr(first.iter, bound)
        if isinstance(node, ast.GeneratorExp):
            bound.update(_bindings([node]))
            return
        own = {name for gen in node.generators for name in _bindings([gen.target])}
        inner = bound | own
        parts = [*first.ifs]
        for gen in rest:
            parts += [gen.iter, *gen.ifs]
        parts += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in parts:
            self.expr(part, inner)
        bound.update(inner - own)  # its `:=` targets, bound in the function

    def body(self, statements: list[ast.stmt], bound: set[str]) -> set[str]:
        bound = set(bound)
        for statement in statements:
            self.statement(statement, bound)
        return bound

    def statement(self, node: ast.stmt, bound: set[str]) -> None:
        if isinstance(node, (ast.If, ast.While, ast.For, ast.AsyncFor, ast.Try,
                             getattr(ast, "TryStar", ast.Try), ast.Match)):
            self.branches(node, bound)
        elif isinstance(node, ast.Assign):
            self.expr(node.value, bound)
            for target in node.targets:
                self.expr(target, bound)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                self.read(node.target, bound)
            self.expr(node.value, bound)
            self.expr(node.target, bound)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:  # `x: int` alone binds nothing
                self.expr(node.value, bound)
                self.expr(node.target, bound)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expr(item.context_expr, bound)
                self.expr(item.optional_vars, bound)
            bound.update(self.body(node.body, bound))
        elif isinstance(node, (*_DEFS, ast.ClassDef)):
            for child in [*node.decorator_list, *_defaults(node)]:
                self.expr(child, bound)
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update(_bindings([node]))
        elif isinstance(node, ast.Delete) and self.unbinds(node):
            bound.difference_update(_deleted(node))
        elif not isinstance(node, (ast.Global, ast.Nonlocal, ast.Delete)):
            for child in ast.iter_child_nodes(node):  # expression statements, return ...
                self.expr(child, bound)

    def unbinds(self, node: ast.Delete) -> bool:
        at = self.offset(node)
        return self.unbind is not None and at is not None and \
            self.unbind[0] <= at < self.unbind[1]

    def branches(self, node: ast.stmt, bound: set[str]) -> None:
        """A compound statement: what each part may bind is bound after it."""
        if isinstance(node, ast.If):
            self.expr(node.test, bound)
            bound.update(self.body(node.body, bound) | self.body(node.orelse, bound))
        elif isinstance(node, ast.Match):
            self.expr(node.subject, bound)
            after = set(bound)
            for case in node.cases:
                inner = bound | set(_bindings([case.pattern]))
                self.expr(case.guard, inner)
                after |= self.body(case.body, inner)
            bound.update(after)
        elif isinstance(node, ast.While):
            self.expr(node.test, bound)  # its first test, before any iteration
            self.loop(node, bound)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter, bound)
            self.loop(node, bound)
        else:  # try: any prefix of its body may have run before a handler
            inner = bound | set(_bindings(node.body))
            after = self.body(node.body, bound)
            for handler in node.handlers:
                self.expr(handler.type, set(inner))
                after |= self.body(handler.body, inner | set(binds(handler)))
            after |= self.body(node.orelse, after)
            bound.update(self.body(node.finalbody, after | inner))

    def loop(self, node: ast.stmt, bound: set[str]) -> None:
        self.first_iteration(node, bound)
        # all the loop binds, for later iterations; not by `ans += x` alone, which reads
        # `ans` first: a name nothing else binds is never bound by it (UnboundLocalError)
        inner = bound | set(_bindings([node], augmented=False))
        if not isinstance(node, ast.While):
            self.expr(node.target, set(inner))
        self.expr(getattr(node, "test", None), set(inner))  # its tests after the first
        self.body(node.body, inner)
        self.body(node.orelse, inner)
        bound.update(inner)


    def first_iteration(self, node: ast.stmt, bound: set[str]) -> None:
        """The reads the loop's body makes whenever it runs, before its statements bind
        anything: a compound statement's first part (an `if`'s test, a loop's first test
        or iterable, a `with`'s items, a `match`'s subject) but not what it runs only on
        a condition (`if i: d = x - prev` reads `prev` on no first iteration).  Until such
        a read first runs, every iteration ran only what stands above it, so a name none
        of that binds is unbound there however many iterations came before."""
        first = set(bound)
        if not isinstance(node, ast.While):
            self.expr(node.target, first)
        for statement in node.body:
            if isinstance(statement, _COMPOUND):
                for part in _first_parts(statement):
                    self.expr(part, set(first))
                first.update(_bindings([statement]))
            else:
                self.statement(statement, first)


_COMPOUND = (ast.If, ast.While, ast.For, ast.AsyncFor, ast.Try, getattr(ast, "TryStar", ast.Try),
             ast.Match, ast.With, ast.AsyncWith)


def _first_parts(node: ast.stmt) -> list[ast.AST]:
    """What a compound statement evaluates whenever it runs, before any choice."""
    if isinstance(node, (ast.If, ast.While)):
        return [node.test]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [node.iter]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in node.items[:1]]
    return [node.subject] if isinstance(node, ast.Match) else []


def functions_over(tree: ast.AST, rows: tuple[int, int]) -> Iterator[ast.AST]:
    """The functions of `tree` whose lines meet rows [first, last] (1-based)."""
    return (node for node in nodes_over(tree, rows) if isinstance(node, _DEFS))


def _functions(tree: ast.Module, source: str, low: int,
               high: int) -> Iterator[tuple[ast.AST, set[str], set[str]]]:
    """Each function of `tree` whose lines meet source[low:high], with its parameters and
    its locals (what it binds, less its `global` and `nonlocal` names)."""
    rows = (source.count("\n", 0, low) + 1, source.count("\n", 0, high) + 1)
    for node in functions_over(tree, rows):
        params = _parameters(node)
        yield node, params, (params | set(_bindings(node.body))) - _declared(node.body)


def early_reads(tree: ast.Module, source: str, low: int, high: int) -> list[Read]:
    """The reads starting in source[low:high] of a name local to a function of `tree`
    (parsed from `source`) that no binding can precede, in the order of the text."""
    offset = node_offsets(source)
    found: list[Read] = []
    for node, params, local in _functions(tree, source, low, high):
        flow = _Flow(local, offset, low, high)
        flow.body(node.body, params)
        found += flow.found
    return sorted(set(found))


class Deletion(NamedTuple):
    """A `del` of the fill after which the code reads a name it deleted: character offsets
    of the statement in the source checked, and the name."""

    start: int
    end: int
    name: str


def _deleted(node: ast.Delete) -> set[str]:
    """The plain names a `del` statement unbinds (`del a, (b, c)`; not `del a[0]`)."""
    return {n.id for target in node.targets for n in ast.walk(target)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)}


def deleted_reads(tree: ast.Module, source: str, low: int, high: int) -> list[Deletion]:
    """The `del` statements starting in source[low:high] (the fill) after which a read of
    a name they delete can only raise (NameError), in the order of the text.

    The walk above passes a `del` over (it binds nothing and, there, unbinds nothing), so
    `del s` where `s = ""` belonged left the `s += i` below it as good (HumanEval/161).
    Here each function is walked twice, the fill's `del`s unbinding only in the second:
    a read flagged only then is one those `del`s cut from every binding.  Every choice
    still errs toward a binding (a loop that deletes a name counts as binding it for the
    code after it), so only a read that nothing can have bound again is found.  Of the
    6,265 `del` statements in 27,931 modules of this VM's Python 3.11 standard library
    and installed packages, each taken as the fill, 2 were found, both in CPython's tests
    of the NameError itself (test_scope, test_exceptions)."""
    offset = node_offsets(source)
    found: list[Deletion] = []
    for node, params, local in _functions(tree, source, low, high):
        flows = [_Flow(local, offset, 0, len(source), unbind) for unbind in (None, (low, high))]
        for flow in flows:
            flow.body(node.body, params)
        cut = sorted(set(flows[1].found) - set(flows[0].found))
        for statement in ast.walk(node):
            at = offset(statement) if isinstance(statement, ast.Delete) else None
            reads = [read for read in cut if read.name in _deleted(statement)] \
                if at is not None and low <= at < high else []
            if reads:
                found.append(Deletion(at, offset(statement, end=True), reads[0].name))
    return sorted(set(found))


def body_function(tree: ast.AST, row: int) -> ast.AST | None:
    """The innermost function of `tree` whose body holds `row` (1-based; not its `def`
    line), or None."""
    return max((node for node in functions_over(tree, (row, row)) if node.lineno < row),
               key=lambda node: node.lineno, default=None)


def function_end(tree: ast.Module, source: str, at: int) -> int | None:
    """Where the innermost function of `tree` (parsed from `source`) whose lines hold
    offset `at` ends: the end of its last line; None outside every function."""
    row = source.count("\n", 0, at) + 1
    inner = None
    for node in functions_over(tree, (row, row)):
        if inner is None or node.lineno >= inner.lineno:
            inner = node
    if inner is None:
        return None
    lines = source.split("\n")
    return sum(len(line) + 1 for line in lines[:inner.end_lineno]) - 1
