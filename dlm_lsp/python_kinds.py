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
the name rebound nowhere in the code checked).  Augmented assignments keep it, a
number's where what it adds is a number too (`total = 0` then `total += Decimal(x)` is
no int); any other binding (a loop's target, unpacking, `with ... as`, `global`) leaves it unknown.
A number (int, float or bool) or None cannot be called, iterated, tested with `in` or
subscripted; a str, list, dict, set or tuple cannot be called, nor a set subscripted;
none has an attribute its type lacks.  Where both sides' kinds are known (a name's, or a
literal's: `[0] * n` is a list), an operator must join them (`end - start` with `start =
0,` does not), an order compare two of one kind (not `num < 0` with `num = []`), and a
str, list or tuple take a number or a slice for an index (not `s[s]`).

A builtin function or class read where nothing rebinds it (`range`, `len`), or a name
bound to one (`l2 = len`), is a value too: it cannot be iterated, tested with `in`,
compared by order, added, negated, subscripted (a class that takes `list[int]` can be),
nor given to a builtin that counts or iterates its argument (`range(len)`).  The shipped
model writes such a word where it stops early (`for i in range:`, `l2 = len` where the
code below adds to `l2`): 4 of its 200 single-line HumanEval fills with the length
policy (code 130104d).

The check is made on the function that holds the fill, and a use is reported where the
fill makes it, or where the fill gave the name its kind and the code around uses it so
(pointing at the value the fill bound).  As python_names, it errs toward passing: a
name it is not sure of is not judged.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from types import BuiltinFunctionType, SimpleNamespace
from typing import NamedTuple

from dlm_lsp import python_ast
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
_SEQUENCES = {"str": "string indices must be integers, not '{}'",
              "list": "list indices must be integers or slices, not {}",
              "tuple": "tuple indices must be integers or slices, not {}"}
_NUMERIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift,
            ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd)
_SET_OPS = (ast.Sub, ast.BitOr, ast.BitAnd, ast.BitXor)
_ITERABLE = ("str", "list", "dict", "set", "tuple")
_NOT_INTEGERS = ("none", *_ITERABLE)  # what `range` cannot count by
# calls by which code asks what its first argument is: a kind it says may not hold
_ASKING = ("isinstance", "type", "hasattr", "callable")
_BUILTIN = "builtin:"  # the kind of a builtin function or class, by its name: `builtin:len`
# builtins whose positional arguments are counted, iterated or compared: none takes a
# function or a class (`range(len)`, `sorted(list)`); `map(len, xs)` does
_NO_CALLABLES = frozenset({"range", "len", "abs", "round", "chr", "ord", "enumerate", "zip",
                           "sum", "sorted", "reversed", "list", "tuple", "set", "int",
                           "float", "min", "max", "divmod", "pow", "bin", "hex", "oct",
                           "any", "all"})
_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.MatMult: "@", ast.Div: "/",
            ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
            ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&", ast.FloorDiv: "//",
            ast.USub: "-", ast.UAdd: "+", ast.Invert: "~", ast.Lt: "<", ast.LtE: "<=",
            ast.Gt: ">", ast.GtE: ">="}


def _joins(left: str, right: str, op: ast.AST, augmented: bool) -> bool:
    """Whether `op` joins values of these kinds (known both) without a TypeError."""
    pair = {left, right}
    if pair == {"number"}:
        return isinstance(op, _NUMERIC)
    if isinstance(op, ast.Add):
        # `lst += "ab"` extends a list with any iterable
        return left == right != "none" and left not in ("dict", "set") or (
            augmented and left == "list" and right in _ITERABLE)
    if isinstance(op, ast.Mult):
        return "number" in pair and pair & {"str", "list", "tuple"} != set() and len(pair) == 2
    if isinstance(op, ast.Mod):
        return left == "str" or pair == {"number"}  # a format
    if isinstance(op, _SET_OPS):
        return left == right == "set" or (isinstance(op, ast.BitOr) and left == right == "dict")
    return False


def _builtin(name: str) -> object | None:
    """The builtin function or class `name` names, or None (the site's `exit` and
    `help` are neither)."""
    found = getattr(builtins, name, None)
    return found if isinstance(found, (type, BuiltinFunctionType)) else None


def _builtin_of(kind: str) -> object | None:
    """The builtin a kind `builtin:<name>` stands for (None for another kind)."""
    return _builtin(kind[len(_BUILTIN):]) if kind.startswith(_BUILTIN) else None


@functools.cache  # a few dozen builtin classes
def _subscriptable(cls: type) -> bool:
    """Whether a builtin class takes a subscript (`list[int]`, `type[int]`), asked of
    the class itself: builtins run nothing of the document's."""
    try:
        cls[int]
    except TypeError:
        return False
    return True


class Misuse(NamedTuple):
    """A use of a name its kind cannot serve: character offsets in the source checked of
    the use (or of the value the fill bound), the name, and why (Python's own words)."""

    start: int
    end: int
    name: str
    why: str


def _type_name(kind: str) -> str:
    if kind.startswith(_BUILTIN):
        return "type" if isinstance(_builtin_of(kind), type) \
            else "builtin_function_or_method"
    return {"number": "int", "none": "NoneType"}.get(kind, kind)


def _has(kind: str, attribute: str) -> bool:
    """Whether a value of `kind` has `attribute`."""
    if kind.startswith(_BUILTIN):
        return hasattr(_builtin_of(kind), attribute)
    return any(hasattr(t, attribute) for t in _TYPES[kind])


@functools.lru_cache(maxsize=512)
def _takes(kind: str, attribute: str, given: int, keywords: tuple[str, ...]) -> bool | None:
    """Whether the method `attribute` of a value of `kind` takes `given` positional
    arguments and those `keywords` (`list.append()` takes one); None where a type has no
    signature to say (`str.format`) or no such method."""
    verdict = False
    for cls in _TYPES[kind]:
        try:  # bound to a value, so a class method's (`d.fromkeys(keys, 0)`) is right too
            signature = inspect.signature(getattr(cls(), attribute))
        except (AttributeError, TypeError, ValueError):
            return None
        try:
            signature.bind(*[None] * given, **dict.fromkeys(keywords))
            verdict = True
        except TypeError:
            pass
    return verdict


def _annotated(arg: ast.arg) -> str | None:
    note = arg.annotation
    if isinstance(note, ast.Subscript):
        note = note.value
    if isinstance(note, ast.Attribute) and isinstance(note.value, ast.Name) \
            and note.value.id == "typing":  # not jinja's `nodes.Tuple`
        note = ast.Name(note.attr)
    return _ANNOTATED.get(note.id) if isinstance(note, ast.Name) else None


# containers whose annotation's one argument is their elements' type: `List[float]`
_HOLDERS = frozenset({"list", "List", "set", "Set", "frozenset", "FrozenSet", "Sequence",
                      "Iterable", "Iterator", "Collection"})
# the elements' types that cannot be unpacked
_SCALARS = frozenset({"int", "float", "bool", "complex"})


def _elements(function: ast.AST, givers: dict[str, list]) -> dict[str, str]:
    """The parameters of `function` annotated as holding numbers (`List[float]`,
    `Iterable[int]`) and bound nowhere else in it, with their elements' type's name."""
    found = {}
    for arg, _ in _parameters(function):
        note = arg.annotation
        if not isinstance(note, ast.Subscript) or givers.get(arg.arg) != [arg]:
            continue
        holder = note.value.attr if isinstance(note.value, ast.Attribute) else getattr(
            note.value, "id", None)
        if holder in _HOLDERS and isinstance(note.slice, ast.Name) \
                and note.slice.id in _SCALARS:
            found[arg.arg] = note.slice.id
    return found


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
    if isinstance(value, ast.Name) and _builtin(value.id) is not None \
            and not rebound(value.id):
        return _BUILTIN + value.id
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Mult)):
        # `[0] * n`, `'-' * 20`, `'a' + s`: a sequence's, where it does not raise
        kind = _of_value(value.left, rebound)
        return kind if kind in ("str", "list", "tuple") else None
    return None


def _literal(value: ast.AST) -> str | None:
    """The kind of a literal an example passes (`"abc"`, `[1, 2]`, `-3.5`, `None`)."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        value = value.operand
        return "number" if isinstance(value, ast.Constant) \
            and type(value.value) in (int, float) else None
    if isinstance(value, (ast.Constant, *(t for types, _ in _LITERALS for t in types))):
        return _of_value(value, lambda name: True)
    return None


def _documented(function: ast.AST) -> dict[str, str]:
    """The kinds the examples in `function`'s docstring give its parameters that have no
    annotation: a call of the function by its name (`>>> is_happy("abcd")`,
    `select_words("Mary had a little lamb", 4) ==> ["little"]`), each argument a literal.
    A parameter is given a kind where every example that passes it passes that kind.

    Most HumanEval functions, and much code written to be read, say their parameters'
    types only so: of the shipped model's 200 single-line HumanEval fills at the oracle
    length (code 2214f81), 5 called or counted a parameter its examples pass a str or a
    list (`for i in s(word):`, `for i in range(string):`), which no annotation says.
    An example is read only where it fits the signature, each parameter without a
    default given once and none too many (a method's example leaves out its object); and
    not at all for a decorated function, whose decorator may call it otherwise."""
    doc = ast.get_docstring(function, clean=False) if isinstance(
        function, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if not doc or function.decorator_list:
        return {}
    args = function.args
    names = [arg.arg for arg in (*args.posonlyargs, *args.args)]
    if names[:1] in (["self"], ["cls"], ["ctx"]):
        # a method's example is called on its object: `f(x)` for `f(self, x)`, and for
        # mpmath's functions of a context, `polyval(ctx, coeffs, x)`, made methods of it
        names = names[1:]
    required = {*names[:len(names) - len(args.defaults)],
                *(arg.arg for arg, default in zip(args.kwonlyargs, args.kw_defaults,
                                                 strict=True) if default is None)}
    bare = {arg.arg for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs)
            if arg.annotation is None}
    seen: dict[str, set[str | None]] = defaultdict(set)
    for match in re.finditer(rf"(?<![\w.]){re.escape(function.name)}\(", doc):
        call = _example_call(doc, match.start(), match.end())
        if call is None or len(call.args) > len(names) and args.vararg is None:
            continue
        given = [*zip(names, call.args, strict=False),
                 *((k.arg, k.value) for k in call.keywords)]
        if not required <= {name for name, _ in given}:
            continue
        for name, value in given:
            seen[name].add(_literal(value))
    return {name: kind for name, found in seen.items() if name in bare
            and len(found) == 1 and (kind := next(iter(found))) is not None}


def _example_call(doc: str, start: int, opened: int) -> ast.Call | None:
    """The call that begins at doc[start:], its text read up to the first `)` after which
    it parses (a `)` within a string is passed over so): None where none does within a
    few lines, or it unpacks its arguments (`f(*xs)`)."""
    for close in re.finditer(r"\)", doc[opened:opened + 500]):
        try:
            node = python_ast.parse(doc[start:opened + close.end()], mode="eval").body
        except SyntaxError:
            continue
        if isinstance(node, ast.Call) and not any(
                isinstance(arg, ast.Starred) for arg in node.args) and all(
                k.arg is not None for k in node.keywords):
            return node
        return None
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
    documented = _documented(function)
    for arg, default in _parameters(function):
        kind = _annotated(arg) or documented.get(arg.arg) \
            if arg not in (function.args.vararg, function.args.kwarg) else None
        if default is not None and _of_value(default, rebound) not in (kind, None):
            kind = None
        kinds[arg.arg].add(kind)
        givers[arg.arg].append(arg)
    additions = [node for node in ast.walk(function) if isinstance(node, ast.AugAssign)]
    augmented = {id(node.target) for node in additions}
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
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _ASKING and node.args \
                and isinstance(node.args[0], ast.Name):
            kinds[node.args[0].id].add(None)  # the code asks: a kind it said may not hold
        elif id(node) not in augmented and id(node) not in own:
            for name in binds(node):
                kinds[name].add(None)
    known = {name: next(iter(found)) for name, found in kinds.items()
             if len(found) == 1 and None not in found}
    for node in additions:
        # `n += x` keeps a number a number only where `x`'s kind is known (`perm = 0`
        # then `perm += expr` is sympy's expression); a str, a list, a tuple or a set
        # stays one, and a builtin cannot be added to
        if isinstance(node.target, ast.Name) and known.get(node.target.id) == "number" and (
                    known.get(node.value.id) if isinstance(node.value, ast.Name)
                    else _of_value(node.value, rebound)) is None:
            del known[node.target.id]  # what a known kind adds is judged (`_joins`)
    return known, givers


def _run(function: ast.AST) -> Iterator[ast.AST]:
    """The nodes of what runs in `function`'s scope as it runs: its body, not its
    decorators, defaults or annotations (read in the scope around: `@width.setter` where
    a parameter is `width: int`), nor any annotation within (never run for a local)."""
    stack = list(reversed(function.body))
    while stack:
        node = stack.pop()
        yield node
        skip = (node.annotation if isinstance(node, (ast.arg, ast.AnnAssign))
                else node.returns if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                else None)
        stack.extend(reversed([child for child in ast.iter_child_nodes(node)
                               if child is not skip]))


def _uses(function: ast.AST, known: dict[str, str], rebound: Callable[[str], bool],
          elements: dict[str, str] | None = None
          ) -> Iterator[tuple[ast.Name | ast.Call | ast.Compare, str]]:
    """Each read of a name of known kind that the kind cannot serve, with why (a call of
    one of its methods with arguments the method cannot take: the call); a builtin
    that nothing rebinds (`rebound`) has its own kind; `elements`: the names known to hold
    numbers, with their type's name (`_elements`), whose elements cannot be unpacked."""
    elements = elements or {}
    def kind_of(node: ast.AST) -> str | None:
        if not isinstance(node, ast.Name):
            return None
        if node.id in known:
            return known[node.id]
        bare = _builtin(node.id) is not None and not rebound(node.id)
        return _BUILTIN + node.id if bare else None

    def value(kind: str | None) -> bool:  # a builtin function or class
        return kind is not None and kind.startswith(_BUILTIN)

    def uniterable(kind: str | None) -> bool:
        return kind in _UNITERABLE or value(kind)

    def kind_any(node: ast.AST) -> str | None:  # a name's, or a literal's
        return kind_of(node) if isinstance(node, ast.Name) else _of_value(node, rebound)

    def a_bool(node: ast.AST) -> bool:
        """A comparison of a name with values whose kinds are all known (`l == 1`, `l`
        a number): a builtin type's comparison gives a bool, which no loop iterates
        (the model's `for i in l == 1:`, HumanEval/82)."""
        if not isinstance(node, ast.Compare):
            return False
        sides = [node.left, *node.comparators]
        kinds = [kind_any(side) for side in sides]
        return (any(isinstance(side, ast.Name) for side in sides) and None not in kinds
                and not any(value(kind) for kind in kinds))

    def operand(node: ast.AST, op: ast.AST, augmented: bool = False
                ) -> Iterator[tuple[ast.Name, str]]:
        kind = kind_of(node)
        if value(kind) and not (isinstance(op, ast.BitOr) and _type_name(kind) == "type"):
            symbol = _SYMBOLS[type(op)] + ("=" if augmented else "")
            yield node, f"unsupported operand type(s) for {symbol}: '{_type_name(kind)}'"

    def operands(left: ast.AST, op: ast.AST, right: ast.AST, augmented: bool = False
                 ) -> Iterator[tuple[ast.Name, str]]:
        """Two operands whose kinds are both known, and no operator joins (`n - (1,)`)."""
        yield from operand(left, op, augmented)
        yield from operand(right, op, augmented)
        kinds = kind_any(left), kind_any(right)
        if None in kinds or any(value(k) for k in kinds) or _joins(*kinds, op, augmented):
            return
        name = next((side for side in (right, left) if isinstance(side, ast.Name)), None)
        if name is not None:
            symbol = _SYMBOLS[type(op)] + ("=" if augmented else "")
            yield name, (f"unsupported operand type(s) for {symbol}: "
                         f"'{_type_name(kinds[0])}' and '{_type_name(kinds[1])}'")

    for node in _run(function):
        if isinstance(node, ast.Call):
            # a called builtin's own kind is asked only where an argument is one: whether
            # the document rebinds a name costs a search of its text
            func = node.func.id if isinstance(node.func, ast.Name) else None
            if known.get(func) in _UNCALLED:
                yield node.func, f"'{_type_name(known[func])}' object is not callable"
            elif isinstance(node.func, ast.Attribute) and (
                    kind := kind_of(node.func.value)) in _TYPES \
                    and not any(isinstance(arg, ast.Starred) for arg in node.args) \
                    and all(k.arg is not None for k in node.keywords) \
                    and _takes(kind, node.func.attr, len(node.args),
                               tuple(k.arg for k in node.keywords)) is False:
                # a method of the kind called with arguments it cannot take (`idx.append()`):
                # the call is blamed, its arguments written again
                keywords = "".join(f", {k.arg}=" for k in node.keywords)
                yield node, (f"{_type_name(kind)}.{node.func.attr}() cannot take "
                             f"{len(node.args)} positional argument(s){keywords}")
            elif func in _NO_CALLABLES:
                taken = [arg for arg in node.args if value(kind_of(arg))]
                # `range(string)`: range counts by integers only
                counted = [arg for arg in node.args if func == "range"
                           and kind_of(arg) in _NOT_INTEGERS]
                if (taken or counted) and kind_of(node.func) == _BUILTIN + func:
                    for arg in taken:
                        yield arg, (f"{func}() cannot take a "
                                    f"'{_type_name(kind_of(arg))}' object")
                    for arg in counted:
                        yield arg, (f"'{_type_name(kind_of(arg))}' object cannot be "
                                    "interpreted as an integer")
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and uniterable(kind_of(node.iter)):
            yield node.iter, f"'{_type_name(kind_of(node.iter))}' object is not iterable"
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and a_bool(node.iter):
            yield node.iter, "'bool' object is not iterable"
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) \
                and isinstance(node.target, (ast.Tuple, ast.List)) \
                and isinstance(node.iter, ast.Name) and node.iter.id in elements:
            # `for i, x in numbers:` where `numbers: List[float]`
            yield node.iter, f"cannot unpack non-iterable {elements[node.iter.id]} object"
        elif isinstance(node, ast.Assign) and uniterable(kind := kind_any(node.value)) \
                and any(isinstance(t, (ast.Tuple, ast.List)) for t in node.targets):
            # `i, j = 0`: the value is blamed where it is a name, else the last target
            names = [n for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            blamed = node.value if isinstance(node.value, ast.Name) else names[-1] if names \
                else None
            if blamed is not None:
                yield blamed, f"cannot unpack non-iterable {_type_name(kind)} object"
        elif isinstance(node, ast.Compare):
            for op, left, right in zip(node.ops, [node.left, *node.comparators[:-1]],
                                       node.comparators, strict=True):
                if isinstance(op, (ast.In, ast.NotIn)) and uniterable(kind_of(right)):
                    yield right, (f"argument of type '{_type_name(kind_of(right))}' is not "
                                  "iterable")
                elif isinstance(op, _ORDER):
                    for side in (left, right):
                        if value(kind_of(side)):
                            yield side, (f"'{_type_name(kind_of(side))}' cannot be compared "
                                         "by order")
                    a, b = kind_any(left), kind_any(right)
                    name = next((side for side in (right, left)
                                 if isinstance(side, ast.Name)), None)
                    if None not in (a, b) and not value(a) and not value(b) and name \
                            and (a != b or a in ("none", "dict")):
                        yield name, (f"'{_SYMBOLS[type(op)]}' not supported between "
                                     f"instances of '{_type_name(a)}' and '{_type_name(b)}'")
        elif isinstance(node, ast.Subscript) and (kind := kind_of(node.value)) is not None:
            if kind in _UNSUBSCRIPTED or value(kind) and not (
                    _type_name(kind) == "type" and _subscriptable(_builtin_of(kind))):
                yield node.value, f"'{_type_name(kind)}' object is not subscriptable"
            elif kind in _SEQUENCES and not isinstance(node.slice, (ast.Slice, ast.Tuple)) \
                    and (index := kind_any(node.slice)) not in (None, "number") \
                    and not value(index):
                # the index is blamed where it is a name: the fill may have bound it
                blamed = node.slice if isinstance(node.slice, ast.Name) else node.value
                yield blamed, _SEQUENCES[kind].format(_type_name(index))
        elif isinstance(node, ast.Attribute) and kind_of(node.value) is not None:
            kind = kind_of(node.value)
            if not _has(kind, node.attr):
                yield node.value, (f"'{_type_name(kind)}' object has no attribute "
                                   f"'{node.attr}'")
        elif isinstance(node, ast.BinOp):
            yield from operands(node.left, node.op, node.right)
        elif isinstance(node, ast.AugAssign):
            yield from operands(node.target, node.op, node.value, augmented=True)
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            kind = kind_of(node.operand)
            if value(kind):
                yield node.operand, (f"bad operand type for unary {_SYMBOLS[type(node.op)]}: "
                                     f"'{_type_name(kind)}'")


# Where a line may bind names, each read as a region whose identifiers are taken for
# bound: a `def`'s name and parameters, a `class`'s name, what the line assigns before its
# first `=` (also a keyword argument's name: more is taken than is bound, never less), a
# walrus's target, an import, `global` or `case` line whole, what follows `as`, a
# `for`'s targets, a `lambda`'s parameters.
_DEFINITIONS = re.compile(r"\bdef\s+(\w+)\s*(?:\[[^\]]*\]\s*)?\(([^)]*)|\bclass\s+(\w+)")
_WHOLE_LINE = ("import", "from", "global", "nonlocal", "case")
_ASSIGNED = re.compile(r"([^\n=#]*?)(?<![=!<>])=(?!=)")
_ON_A_LINE = (("def", _DEFINITIONS), ("class", _DEFINITIONS), ("=", _ASSIGNED),
              (":=", re.compile(r"\b(\w+)\s*:=")), ("as", re.compile(r"\bas\s+\(?([\w, ]+)")),
              ("for", re.compile(r"\bfor\s+(.*?)\s+in\b")),
              ("lambda", re.compile(r"\blambda\b([^:]*):")))
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


def _line_binds(name: str, line: str) -> bool:
    """Whether `line` may bind `name` (see `_ON_A_LINE`); a line that starts with it
    followed by `,`, `:`, `=` or `)` is taken for a parameter of a `def` over lines."""
    code = line.lstrip()
    if code.startswith(_WHOLE_LINE):
        return name in _IDENTIFIER.findall(code)
    if re.match(rf"\*{{0,2}}{re.escape(name)}\s*[,:=)]", code):
        return True
    for marker, pattern in _ON_A_LINE:
        if marker in code:
            hits = [pattern.match(code)] if pattern is _ASSIGNED else pattern.finditer(code)
            if any(name in _IDENTIFIER.findall(region or "") for hit in hits if hit
                   for region in hit.groups()):
                return True
    return False


def rebinds(name: str, texts: tuple[str, ...]) -> bool:
    """Whether any of `texts` may bind the builtin `name` (`def len(`, `len = ...`, `a, len
    = ...`, `import x as len`, `with ... as len`, `for len in`, `len :=`, a parameter,
    `global len`): then it is not judged.  Only the lines that name it are read."""
    word = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
    for text in texts:
        seen = -1
        for match in word.finditer(text):
            start = text.rfind("\n", 0, match.start()) + 1
            if start == seen:
                continue
            seen = start
            end = text.find("\n", match.end())
            if _line_binds(name, text[start:end if end != -1 else len(text)]):
                return True
    return False


def _name(read: ast.Name | ast.Call | ast.Compare) -> str:
    """The name a use reads: its own, a method call's object's (`idx` of `idx.append()`),
    or a comparison's first (`l` of `l == 1`)."""
    if isinstance(read, ast.Compare):
        return next(side.id for side in (read.left, *read.comparators)
                    if isinstance(side, ast.Name))
    return read.id if isinstance(read, ast.Name) else read.func.value.id


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
    functions = list(functions_over(tree, rows))
    # a builtin's name bound in any function around the fill (a closure's parameter
    # `exec`) names that there
    local = frozenset(name for function in functions for node in ast.walk(function)
                      for name in binds(node))

    def rebound(name: str) -> bool:
        return name in local or elsewhere(name)

    for function in functions:
        known, givers = _kinds(function, rebound)

        def given_in_fill(name: str, givers: dict[str, list] = givers) -> list[ast.AST]:
            return [g for g in givers[name] if not isinstance(g, ast.arg)
                    and (start := offset(g)) is not None and low <= start < high]

        uses = list(_uses(function, known, rebound, _elements(function, givers)))
        # a kind the code around the fill contradicts, where the fill did not give it, is
        # a wrong annotation (transformers' `config: int` whose `.vocab_size` is read):
        # the name is not judged
        wrong = {_name(read) for read, _ in uses if (at := offset(read)) is not None
                 and not low <= at < high and not given_in_fill(_name(read))}
        for read, why in uses:
            at, name = offset(read), _name(read)
            if at is None or name in found or name in wrong:
                continue
            if low <= at < high:
                # a method's call is blamed at its arguments, a comparison whole, the rest
                # at the name
                start, end = (end_of(read.func), end_of(read)) if isinstance(read, ast.Call) \
                    else (at, end_of(read)) if isinstance(read, ast.Compare) \
                    else (at, at + len(name))
                found[name] = Misuse(start or at, end or at + len(name), name, why)
                continue
            given = given_in_fill(name)
            if given:
                start, end = offset(given[0]), end_of(given[0])
                found[name] = Misuse(start, end or start, name, why)
    return sorted(found.values())
