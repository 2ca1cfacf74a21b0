"""Specification of the kinds check (dlm_lsp/python_kinds.py): a Python fill that uses a
name as its kind cannot be used (calls a list, iterates a number, reads an attribute a
str lacks), or gives a name a kind the code around it cannot use so, fails wherever it
runs, and is rejected and repaired as a name nothing defines is.

Documents mark the span as ⟦old text⟧ (⟦⟧ for an insertion point), as in
test_python_names.  The check errs toward passing: a name whose bindings do not all say
the same kind is not judged.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import Planted, fixed_on_repair

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.python_kinds import rebinds
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.validation import Validation, parsed_document


def _fill(marked: str, fill: str) -> Validation:
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    text = marked.replace("⟦", "").replace("⟧", "")
    document = parsed_document(text, "python")
    return document.names_checked(start, end, fill, document.validate(start, end, fill))


def test_calling_a_parameter_annotated_list_is_rejected_at_the_call() -> None:
    marked = "def f(l: list):\n    for i in range(3):\n⟦⟧\n            pass\n"
    result = _fill(marked, "        for j in l(i):")
    assert result.valid is False
    assert result.names == ("l",)
    assert "fill uses 'l' as it cannot be ('list' object is not callable)" in result.reason
    at = marked.index("⟦") + len("        for j in ")
    assert result.new_ranges == ((at, at + 1),)


@pytest.mark.parametrize("marked, fill, why", [
    # a number from a literal, iterated, tested with `in`, subscripted
    ("def f(s):\n    depth = 0\n⟦⟧\n        pass\n", "    for c in depth:",
     "'int' object is not iterable"),
    ("def f(s):\n    n = len(s)\n⟦⟧\n", "    return [c for c in n]",
     "'int' object is not iterable"),
    ("def f(s):\n    n = 1.5\n⟦⟧\n", "    return 2 in n", "argument of type 'int' is not iterable"),
    ("def f(n: int):\n⟦⟧\n", "    return n[0]", "'int' object is not subscriptable"),
    # an attribute its type lacks; a None
    ("def f(arr: list):\n⟦⟧\n    return m\n", "    m = arr.max()",
     "'list' object has no attribute 'max'"),
    ("def f(words: List[str]):\n⟦⟧\n", "    return words.split()",
     "'list' object has no attribute 'split'"),
    ("def f(s):\n    best = None\n⟦⟧\n", "    best.append(s)",
     "'NoneType' object has no attribute 'append'"),
    # a str called (HumanEval/99: `if value(value, int):`)
    ("def f(value: str):\n⟦⟧\n        return 1\n", "    if value(value, int):",
     "'str' object is not callable"),
    # a builtin named where the model stopped early (HumanEval/69, 0, 161 with the
    # length policy)
    ("def f(lst):\n⟦⟧\n        pass\n", "    for i in range:",
     "'type' object is not iterable"),
    ("def f(xs):\n⟦⟧\n        pass\n", "    for i, x in enumerate:",
     "'type' object is not iterable"),
    ("def f(s):\n⟦⟧\n        pass\n", "    for i in range(len):",
     "range() cannot take a 'builtin_function_or_method' object"),
    ("def f(s):\n⟦⟧\n", "    return s in list", "argument of type 'type' is not iterable"),
    ("def f(s):\n⟦⟧\n", "    return len < 3", "'builtin_function_or_method' cannot be compared"),
    ("def f(s):\n⟦⟧\n", "    return -len", "bad operand type for unary -"),
    ("def f(s):\n⟦⟧\n", "    return len[0]",
     "'builtin_function_or_method' object is not subscriptable"),
    ("def f(s):\n⟦⟧\n", "    return max + 1", "unsupported operand type(s) for +"),
    ("def f(s):\n⟦⟧\n", "    return sorted.key", "object has no attribute 'key'"),
    # two known kinds that no operator joins, an index of the wrong kind (HumanEval/65's
    # `s[s]`, 140's `start = 0,` above `end - start`, 156's `num < 0` for a list)
    ("def f(x):\n    s = str(x)\n⟦⟧\n", "    return s[s]",
     "string indices must be integers, not 'str'"),
    ("def f(xs: list):\n⟦⟧\n", "    return xs['a']",
     "list indices must be integers or slices, not str"),
    ("def f(s):\n    end = len(s)\n⟦⟧\n    return end - start\n", "    start = 0,",
     "unsupported operand type(s) for -: 'int' and 'tuple'"),
    ("def f(s):\n    num = []\n⟦⟧\n        return 0\n", "    if num < 0:",
     "'<' not supported between instances of 'list' and 'int'"),
    ("def f(s):\n    i = 0\n⟦⟧\n", "    i += [i] * 2",
     "unsupported operand type(s) for +=: 'int' and 'list'"),
    ("def f(s):\n    best = None\n⟦⟧\n", "    return best + 1",
     "unsupported operand type(s) for +: 'NoneType' and 'int'"),
    # a number unpacked: a value (HumanEval/72's `i, j = 0`), a list of numbers' element
    # (HumanEval/0's `for idx, elem in numbers:` where `numbers: List[float]`)
    ("def f(q):\n⟦⟧\n    return i + j\n", "    i, j = 0", "cannot unpack non-iterable int object"),
    ("def f(q):\n    n = len(q)\n⟦⟧\n    return a\n", "    a, b = n",
     "cannot unpack non-iterable int object"),
    ("def f(numbers: List[float]):\n⟦⟧\n            pass\n",
     "    for idx, elem in numbers:", "cannot unpack non-iterable float object"),
    ("def f(xs: typing.Iterable[int]):\n⟦⟧\n", "    return [a for a, b in xs]",
     "cannot unpack non-iterable int object"),
    # a comparison of known kinds is a bool, which no loop iterates (HumanEval/82's
    # `for i in l == 1:` below `l = len(string)`)
    ("def f(string):\n    l = len(string)\n⟦⟧\n        pass\n", "    for i in l == 1:",
     "'bool' object is not iterable"),
    ("def f(s: str):\n⟦⟧\n", "    return [c for c in s in 'abc']",
     "'bool' object is not iterable"),
])
def test_uses_the_kind_cannot_serve_are_rejected(marked: str, fill: str, why: str) -> None:
    result = _fill(marked, fill)
    assert result.valid is False
    assert why in result.reason


@pytest.mark.parametrize("marked, fill, why, arguments", [
    # HumanEval/132's `opening_bracket_index.append()` of the list begun as `[]`
    ("def f(s):\n    idx = []\n    for i in s:\n⟦⟧\n    return idx\n", "        idx.append()",
     "list.append() cannot take 0 positional argument(s)", "()"),
    ("def f(s: str):\n⟦⟧\n", "    return s.split(',', 1, 2)",
     "str.split() cannot take 3 positional argument(s)", "(',', 1, 2)"),
    ("def f(s: str):\n⟦⟧\n", "    return s.split(x=',')",
     "str.split() cannot take 0 positional argument(s), x=", "(x=',')"),
    ("def f(d: dict):\n⟦⟧\n", "    return d.get()",
     "dict.get() cannot take 0 positional argument(s)", "()"),
])
def test_a_method_called_with_arguments_it_cannot_take_is_rejected_at_them(
        marked: str, fill: str, why: str, arguments: str) -> None:
    """Repair writes the arguments again, not the name."""
    result = _fill(marked, fill)
    assert result.valid is False
    assert why in result.reason
    at = marked.index("⟦") + fill.index(arguments)
    assert result.new_ranges == ((at, at + len(arguments)),)


@pytest.mark.parametrize("marked, fill", [
    ("def f(s):\n    idx = []\n    for i in s:\n⟦⟧\n    return idx\n", "        idx.append(i)"),
    ("def f(s: str):\n⟦⟧\n", "    return s.split(sep=',', maxsplit=1)"),
    # a class method called on a value (networkx's `dod.fromkeys(nbrdict, edge_data)`)
    ("def f(d: dict, keys):\n⟦⟧\n", "    return d.fromkeys(keys, 0)"),
    # a method with no signature to say (str.format), a kind of many types (a number:
    # int's bit_length, which float lacks), arguments unpacked: not judged
    ("def f(s: str):\n⟦⟧\n", "    return s.format(1, 2, a=3)"),
    ("def f(n: int):\n⟦⟧\n", "    return n.bit_length(3)"),
    ("def f(xs: list, a):\n⟦⟧\n", "    return xs.index(*a)"),
])
def test_a_method_call_its_signature_may_take_passes(marked: str, fill: str) -> None:
    result = _fill(marked, fill)
    assert result.valid, result.reason


@pytest.mark.parametrize("marked, bad, good, why", [
    # `ans = 0` above the `ans.append(x)` below (HumanEval/129)
    ("def f(xs):\n⟦⟧\n    for x in xs:\n        ans.append(x)\n    return ans\n",
     "ans = 0", "ans = []", "'int' object has no attribute 'append'"),
    # `l2 = len` above `l2 += len(st)` (HumanEval/74 with the length policy)
    ("def f(lst):\n⟦⟧\n    for st in lst:\n        l2 += len(st)\n    return l2\n",
     "l2 = len", "l2 = 0", "unsupported operand type(s) for +=: 'builtin_function_or_method'"),
    # `area = round` above `return round(area, 2)` (HumanEval/71)
    ("def f(a, b):\n⟦⟧\n    return round(area, 2)\n", "area = round", "area = a * b",
     "round() cannot take a 'builtin_function_or_method' object"),
])
def test_a_binding_the_code_around_cannot_use_is_rejected_at_its_value(
        marked: str, bad: str, good: str, why: str) -> None:
    """The fill is blamed where it gives the name its kind: the value is written again."""
    result = _fill(marked, "    " + bad)
    assert result.valid is False
    assert why in result.reason
    at = marked.index("⟦") + len("    ") + bad.index("= ") + 2
    assert result.new_ranges == ((at, at + len(bad) - bad.index("= ") - 2),)
    assert _fill(marked, "    " + good).valid


@pytest.mark.parametrize("marked, fill", [
    # what each kind serves
    ("def f(s: str):\n⟦⟧\n", "    return [c.upper() for c in s]"),
    ("def f(n: int):\n⟦⟧\n", "    return n.bit_length() + n"),
    ("def f(xs):\n    out = []\n⟦⟧\n    return out\n", "    out.append(xs[0])"),
    ("def f(d: Dict[str, int]):\n⟦⟧\n", "    return d['a'] + len(d.keys())"),
    # bindings of two kinds, or of an unknown one: not judged
    ("def f(xs):\n    best = None\n    for x in xs:\n        best = [x]\n⟦⟧\n",
     "    best.append(1)"),
    ("def f(xs):\n    n = 0\n    n, m = xs\n⟦⟧\n", "    return n[0]"),
    ("def f(xs):\n    n = xs.pop()\n⟦⟧\n", "    return n()"),
    ("def f(xs):\n    n = 0\n    for n in xs:\n        pass\n⟦⟧\n", "    return n[0]"),
    # an annotation the default contradicts, one that says nothing, `*args`
    ("def f(n: int = None):\n⟦⟧\n", "    return n.x"),
    ("def f(n: Optional[int]):\n⟦⟧\n", "    return n.x"),
    ("def f(*n: int):\n⟦⟧\n", "    return n[0]"),
    # a builtin the document rebinds says no kind; augmented assignment keeps the kind
    ("def len(x):\n    return [x]\n\ndef f(s):\n    n = len(s)\n⟦⟧\n", "    return n[0]"),
    ("def f(s):\n    t = ''\n    t += s\n⟦⟧\n", "    return t.upper()"),
    # but a number added what may be no number (sympy's `perm += expr`) is not known
    ("from decimal import Decimal\n\ndef f(xs):\n    total = 0\n    for x in xs:\n"
     "        total += Decimal(x)\n⟦⟧\n", "    return total.quantize(Decimal(1))"),
    # a misuse the fill neither makes nor brings about is the document's own; a kind
    # the code around contradicts is a wrong annotation, and not judged in the fill;
    # an index of many dimensions is an array's (the annotation is wrong)
    ("def f(s):\n    n = 0\n    n()\n⟦⟧\n", "    return s"),
    ("def f(config: int):\n    n = config.vocab_size\n⟦⟧\n", "    return config.pad_id"),
    ("def f(states: tuple):\n⟦⟧\n", "    return states[:, 0]"),
    # outside a function the check is not made
    ("n = 0\n⟦⟧\n", "n()\n"),
    # what may be unpacked: a tuple, a name of unknown kind, elements of unknown type,
    # of a list rebound in the function, of a list of lists
    ("def f(q):\n⟦⟧\n    return i + j\n", "    i, j = 0, len(q)"),
    ("def f(q):\n⟦⟧\n    return i + j\n", "    i, j = q"),
    ("def f(pairs: list):\n⟦⟧\n            pass\n", "    for a, b in pairs:"),
    ("def f(xs: List[float]):\n    xs = list(enumerate(xs))\n⟦⟧\n            pass\n",
     "    for i, x in xs:"),
    ("def f(grid: List[List[int]]):\n⟦⟧\n            pass\n", "    for a, b in grid:"),
    ("def f(numbers: List[float]):\n⟦⟧\n            pass\n",
     "    for idx, elem in enumerate(numbers):"),
    # a comparison iterated where a kind is not known (an array's `==` gives an array)
    ("def f(a, n: int):\n⟦⟧\n        pass\n", "    for x in a == n:"),
    ("def f(n: int):\n⟦⟧\n        pass\n", "    for x in [n == 1]:"),
])
def test_uses_a_kind_may_serve_are_accepted(marked: str, fill: str) -> None:
    result = _fill(marked, fill)
    assert result.valid, result.reason


# --- kinds a function's docstring examples give its parameters -----------------------


@pytest.mark.parametrize("marked, fill, why", [
    # HumanEval/117's `for i in s(word):`, where the examples pass a str
    ('def select_words(s, n):\n    """Words.\n    select_words("Mary had a lamb", 4) ==> '
     '["lamb"]\n    select_words("", 4) ==> []\n    """\n    for word in s.split():\n⟦⟧\n'
     '            pass\n', "        for i in s(word):", "'str' object is not callable"),
    # HumanEval/82's `for i in range(string):`, a doctest
    ('def prime_length(string):\n    """Prime?\n    >>> prime_length(\'Hello\')\n    True\n'
     '    """\n⟦⟧\n        pass\n', "    for i in range(string):",
     "'str' object cannot be interpreted as an integer"),
    # numbers, a negative one among them; a keyword argument; a `)` in a string
    ('def f(x):\n    """f(3) == 4, f(-1.5) == 0"""\n⟦⟧\n', "    return x[0]",
     "'int' object is not subscriptable"),
    ('def f(xs, key):\n    """f([1], key="a") is 1"""\n⟦⟧\n', "    return key()",
     "'str' object is not callable"),
    ('def f(s):\n    """f("(a)") == 1"""\n⟦⟧\n', "    return s(1)",
     "'str' object is not callable"),
])
def test_a_parameter_its_docstring_examples_pass_has_their_kind(
        marked: str, fill: str, why: str) -> None:
    result = _fill(marked, fill)
    assert result.valid is False
    assert why in result.reason


@pytest.mark.parametrize("marked, fill", [
    # the right use of the examples' kind
    ('def prime_length(string):\n    """>>> prime_length(\'Hello\')"""\n⟦⟧\n        pass\n',
     "    for i in range(len(string)):"),
    # examples of two kinds, of a name, of an expression, unpacked: no kind
    ('def f(x):\n    """f(3) == 4, f("a") == 0"""\n⟦⟧\n', "    return x[0]"),
    ('def f(x):\n    """f(a) == 4"""\n⟦⟧\n', "    return x[0]"),
    ('def f(x):\n    """f(2 ** 40) == 4"""\n⟦⟧\n', "    return x[0]"),
    ('def f(x, y):\n    """f(*[1, 2]) == 3"""\n⟦⟧\n', "    return x[0]"),
    # an annotation says the kind, not the example (`Any`: none); a method's example is
    # called on its object, so its first argument is the second parameter (mpmath's
    # functions of a context are made its methods: `cplot(ctx, f, re=...)`); an example
    # that does not fit the signature is of another; a decorator may call the function
    # otherwise; another function's example
    ('def f(x: Any):\n    """f(3) == 4"""\n⟦⟧\n', "    return x[0]"),
    ('class C:\n    def f(self, x):\n        """f(3) == 4"""\n⟦⟧\n', "        return self[0]"),
    ('def cplot(ctx, f, re=[-5, 5]):\n    """cplot(lambda z: z, [-2, 2])"""\n⟦⟧\n',
     "    return f(ctx.convert(re[0]))"),
    ('def f(x):\n    """f(1, 2)"""\n⟦⟧\n', "    return x[0]"),
    ('@register\ndef f(x):\n    """f(3) == 4"""\n⟦⟧\n', "    return x[0]"),
    ('def f(x):\n    """Like g(3) or obj.f(3)."""\n⟦⟧\n', "    return x[0]"),
    # where the examples' kind is contradicted by the code around the fill, not judged
    ('def f(x):\n    """f(3) == 4"""\n    y = x[1]\n⟦⟧\n', "    return x[0] + y"),
])
def test_examples_that_say_no_one_kind_give_none(marked: str, fill: str) -> None:
    result = _fill(marked, fill)
    assert result.valid, result.reason


# --- builtin functions and classes as values, where they may be ----------------------


@pytest.mark.parametrize("marked, fill", [
    # what operators join, and indices of the right kind
    ("def f(s: str, n: int):\n⟦⟧\n", "    return s * n + s[n] + s[1:n] + '%d' % n + n * s"),
    ("def f(xs: list, n: int):\n⟦⟧\n", "    return xs + [n] + xs[n:] + xs * 2 + [xs < [n]]"),
    ("def f(xs: list):\n    out = []\n⟦⟧\n    return out\n", "    out += 'ab'"),
    ("def f(a: set, b: set):\n⟦⟧\n", "    return (a | b) - (a & b) ^ b, a < b"),
    ("def f(n: int, x: float):\n⟦⟧\n", "    return n // x + n ** 2 - (n << 1) + (n < x)"),
    ("def f(d: dict, e: dict):\n⟦⟧\n", "    return d | e"),
    # builtins passed where a function is taken, classes subscripted or joined as types
    ("def f(xs):\n⟦⟧\n", "    return sorted(xs, key=len)"),
    ("def f(xs):\n⟦⟧\n", "    return list(map(str, xs))"),
    ("def f(xs):\n⟦⟧\n", "    return list[int], dict[str, int], type[int]"),
    ("def f(xs):\n⟦⟧\n", "    return isinstance(xs, int | None)"),
    ("def f(xs):\n⟦⟧\n", "    return str.join(',', xs) + int.__name__"),
    ("def f(xs):\n⟦⟧\n", "    return xs == list or callable(len)"),
    # the builtin's name bound: in the function, in one around it (a closure's
    # parameter), in the document
    ("def f(xs):\n    for len in xs:\n        pass\n⟦⟧\n", "    return len + 1"),
    ("def outer(exec):\n    def inner():\n⟦⟧\n    return inner\n",
     "        return exec.run()"),
    ("from shapes import range\n\ndef f(xs):\n⟦⟧\n        pass\n", "    for x in range:"),
    ("with open('f') as iter:\n    pass\n\ndef f(xs):\n⟦⟧\n", "    return iter + 1"),
    # what does not run as the function runs: decorators, annotations; what `isinstance`
    # narrows
    ("class C:\n    @property\n    def width(self) -> int:\n        return 1\n\n⟦⟧\n",
     "    @width.setter\n    def width(self, width: int):\n        self.w = width"),
    ("def f(xs):\n⟦⟧\n    return ys\n", "    ys: list[classmethod[int]] = xs"),
    ("from pyarrow import Table\n\ndef f(batch: dict):\n⟦⟧\n",
     "    return isinstance(batch, Table) and batch.num_rows"),
    # an annotation of a module's own class named as typing's
    ("def f(node: nodes.Tuple):\n⟦⟧\n", "    return node.items"),
])
def test_builtins_and_kinds_used_as_they_may_be_are_accepted(marked: str, fill: str) -> None:
    result = _fill(marked, fill)
    assert result.valid, result.reason


# --- in the engine: repair ------------------------------------------------------------------


def test_repair_rewrites_a_call_of_a_list(model_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", fallback=False))
    text = "def f(l: list):\n    \n    return n\n"
    at = text.index("    \n") + 4
    request = InfillRequest(text, at, at, "python", "file:///f.py",
                            InfillOptions(length=8, steps=4))
    runs = fixed_on_repair(monkeypatch, Planted(engine, request, broken="n = l(0)",
                                                good="n = l[0]"))
    result = engine.infill(request)
    best = result.candidates[0]
    assert (best.text, best.valid) == ("n = l[0]", True)
    assert runs[0] == DIFFUSION and REPAIR in runs


def test_with_check_names_off_a_misused_kind_passes(model_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", check_names=False))
    text = "def f(l: list):\n    \n    return n\n"
    at = text.index("    \n") + 4
    request = InfillRequest(text, at, at, "python", "file:///f.py",
                            InfillOptions(length=8, steps=4))
    fixed_on_repair(monkeypatch, Planted(engine, request, broken="n = l(0)", good="n = l[0]"))
    assert engine.infill(request).candidates[0].text == "n = l(0)"


# --- what the document may bind ----------------------------------------------------------


@pytest.mark.parametrize("text", [
    "def f(a, len=3):", "def f(\n    a,\n    len=2):", "def len(x):", "class len:",
    "a, len = 1, 2", "len: int = 3", "with x as len:", "except E as len:", "for i, len in z:",
    "x = [a for len in y]", "if (len := 3):", "global len", "f = lambda len: 1",
    "from m import len", "import len",
])
def test_a_binding_of_a_builtin_anywhere_in_the_document_is_found(text: str) -> None:
    assert rebinds("len", (text,))


@pytest.mark.parametrize("text", [
    "x = len(a)", "for x in range(len(a)):", "y = sorted(a, key=len)",
    "def g(x):\n    return len(x)", "if a == len(b): pass", "if x <= len(y): pass",
    "z = f(len)  # c = d",
])
def test_a_builtin_only_read_is_not_taken_for_bound(text: str) -> None:
    assert not rebinds("len", (text,))
