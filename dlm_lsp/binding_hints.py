"""What a Python fill should begin with where the code below its span reads a name that
nothing binds first (`bindingHints`, passes.InfillRun.bind_hint).

The code below says what is missing.  Where the span's line sits at the indentation of
the statements around it, a statement that binds the names: `res =`, `i, j =` (one line
is missing, so it binds them all), or `import math` where the name is a standard-library
module whose attributes the code reads.  Where the code below is indented deeper than a
statement on the span's line could be, or as deep as a `return` just above it (after
which nothing could run), the line is a block's header, and the header binds the names
its block reads: `for c, n in`; where the code after the block also reads a name nothing
binds, that function's `def` with the block's names as its parameters (`def
is_prime(n):`), a `class` where the name is capitalised, a `with` where its attributes
are read; beside a `try:`, an `except`; in a class, a method's `def`.

How often each begins the line as it was written, before any fill (the canonical middle
against the hint `benchmarks/names_check.py` computes; code 901fbeb): of
HumanEval-Infilling's 1,033 single-line tasks, a statement's hint is asked for by 138
and begins 130 of their lines (the others mostly `x=0` against `x =`), a header's by 99
and begins all 99 (`for` 88 times); of 3,000 held-out standard-library lines, 96 of 111
and 17 of 23 (a `with ... as` read as a loop, a nested `def` read as one).  Multi-line
spans begin with the line the hint names less often (260 of 648, 160 of 730): the
binding is not always their first line.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from dlm_lsp import python_ast
from dlm_lsp.indentation import detect_indent
from dlm_lsp.python_names import binds

# What a list, dict, set, string or bytes answers to: `queue.append(x)` reads a list
# named queue, not the module.
_CONTAINER_METHODS = frozenset(name for kind in (list, dict, set, str, bytes, tuple)
                               for name in dir(kind) if not name.startswith("_"))

_CODE_LINE = re.compile(r"^([ \t]*)[^\s#]", re.M)
_OPENS_BLOCK = re.compile(r":[ \t]*(#.*)?$")
_ENDS_BLOCK = re.compile(r"[ \t]*(return|raise|continue|break)\b")


def _leading(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


@dataclass(frozen=True)
class HeaderSlot:
    """A span's line that must open a block: the code below it is indented deeper than a
    statement there could be."""

    indent: str  # the header's indentation: the line above's, one level in if it opens a block
    block: str  # the lines below that the header's block holds
    after: str  # the code of the function after that block
    # the statement above on the header's indentation (`try:`), and the header of the
    # block that holds them both (`class Proto:`), stripped; "" where there is none
    sibling: str = ""
    opener: str = ""


@dataclass(frozen=True)
class HintPlace:
    """Where a fill over a span may begin with a binding, and what the code below it is."""

    below: str  # the code below: after the span where it starts its line, else past its line
    indent: str  # written before the hint: what the span's line lacks of its indentation
    empty: str  # a fill that binds and reads nothing, for the code below's need without a
    # guess: none, or where the line is a header (`slot`), one that opens the block
    slot: HeaderSlot | None


def hint_place(text: str, start: int, end: int) -> HintPlace | None:
    """Where a binding may begin the fill over [start, end): only on a blank line, or at
    the start of a line (the fill then goes before its code as lines of its own); after
    code, or between a line's indentation and its code, the fill belongs to that line."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    before, rest = text[line_start:start], text[end:line_end]
    if before.strip() or (before and rest.strip()):
        return None
    below = text[end:] if not before else text[line_end + 1:]
    slot = header_slot(text, line_start, below)
    if slot is None:
        code = _CODE_LINE.search(below)
        return HintPlace(below, "" if before or code is None else code.group(1), "", None)
    if not slot.indent.startswith(before):
        return None  # the line's whitespace is deeper than its header goes
    indent = slot.indent[len(before):]
    return HintPlace(below, indent, indent + "if True:" + ("\n" if rest.strip() else ""), slot)


def header_slot(text: str, line_start: int, below: str) -> HeaderSlot | None:
    """The header the line starting at `line_start` must be, with `below` the code after
    the span; None where a statement fits there: the first line of `below` is no deeper
    than the line above (one level in where that opens a block), nor as deep as a
    `return` just above it.  A line above that continues a bracket is taken for a
    statement's; the hint's checks catch the rest.  Only the lines near the span are
    read (this runs at every checked Python fill, in documents of megabytes)."""
    code = _CODE_LINE.search(below)
    prev = next(_code_lines_above(text, line_start), None)
    if code is None or prev is None:
        return None
    deep = code.group(1)
    indent = _leading(prev)
    if deep == indent and _ENDS_BLOCK.match(prev):
        # beside a `return` the code below could never run: the block above has ended,
        # and the line opens one of its own beside that block's header
        indent = next((_leading(line) for line in _code_lines_above(text, line_start)
                       if len(_leading(line)) < len(deep)), None)
        if indent is None:
            return None
    elif _OPENS_BLOCK.search(prev):
        if len(deep) <= len(indent):
            return None
        indent += detect_indent(text, "python").unit
    if len(deep) <= len(indent) or not deep.startswith(indent):
        return None
    block: list[str] = []
    after: list[str] = []
    lines = _lines(below, code.start())
    line = next(lines, None)
    while line is not None and (not line.strip() or line.startswith(deep)):
        block.append(line)
        line = next(lines, None)
    # the code after the block, to the end of the block that holds both
    while line is not None and not (line.strip() and len(_leading(line)) < len(indent)):
        after.append(line)
        line = next(lines, None)
    sibling = opener = ""
    for line in _code_lines_above(text, line_start):
        if len(_leading(line)) < len(indent):
            opener = line.strip()
            break
        if _leading(line) == indent and not sibling:
            sibling = line.strip()
            if not indent:
                break  # at the top: no block holds it
    return HeaderSlot(indent, "\n".join(block), "\n".join(after), sibling, opener)


def _code_lines_above(text: str, line_start: int) -> Iterator[str]:
    """The lines above `line_start` that hold code, nearest first, read as asked."""
    end = line_start - 1  # the line break that ends the line above
    while end >= 0:
        begin = text.rfind("\n", 0, end) + 1
        line = text[begin:end]
        if line.strip() and not line.lstrip().startswith("#"):
            yield line
        end = begin - 1


def _lines(text: str, start: int) -> Iterator[str]:
    """The lines of text[start:], read as asked."""
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end == -1 else end
        yield text[start:end]
        start = end + 1


@dataclass(frozen=True)
class Hint:
    """How a fill begins that binds `names`."""

    text: str
    names: tuple[str, ...]


def begin_binding(names: list[str], first: str, below: str,
                  slot: HeaderSlot | None) -> Hint | None:
    """The hint that binds `names` (in the order the code below reads them), `first`
    among them where it is a module: where the span's line is a statement, `import
    first`, or an assignment to all but the modules (the one line missing binds them all:
    `begin, end =`); where it is a block's header (`slot`), a loop over the names its
    block reads, or where the code after the block calls one function of `names`, that
    function's `def` taking the others; None where the block reads none of them."""
    if slot is None:
        if binding_hint(first, below).startswith("import"):
            return Hint(binding_hint(first, below), (first,))
        values = [n for n in names if not binding_hint(n, below).startswith("import")]
        return Hint(f"{', '.join(values)} =", tuple(values))
    # a module the block reads is imported, not looped over
    names = [n for n in names if not binding_hint(n, below).startswith("import")]
    inside = [n for n in names if _reads(n, slot.block)]
    # what the header binds that only the code after its block reads: a function's name
    # or a class's (`def is_prime(n):`, `class Proto`: what it derives from is unsaid)
    later = [n for n in names if n not in inside and _reads(n, slot.after, calls=True)]
    if len(later) == 1:
        if re.search(rf"(?<![\w.]){re.escape(later[0])}\.\w", slot.after):
            # its attributes read: what a `with` gave (`with self.assertRaises(E) as cm:`)
            return Hint("with", (later[0],))
        if later[0][:1].isupper():
            return Hint(f"class {later[0]}", (later[0],))
        if not inside:  # what it takes, its block does not say
            return Hint(f"def {later[0]}(", (later[0],))
        return Hint(f"def {later[0]}({', '.join(inside)}):", (later[0], *inside))
    if not inside:
        return None
    if slot.sibling.startswith(("try:", "except")) and len(inside) == 1:
        return Hint("except", tuple(inside))  # a handler's `as exc`, of a type unsaid
    if slot.opener.startswith("class "):
        return Hint("def", tuple(inside))  # a method, whose parameters the block reads
    return Hint(f"for {', '.join(inside)} in", tuple(inside))


def plain_header(slot: HeaderSlot) -> str:
    """How the header of `slot`'s block begins where the block reads no name the header
    must bind: `if`, or in a class a method's `def`.  Such a line is most often a
    condition: of HumanEval-Infilling's 1,033 single-line tasks, 182 have such a slot
    outside a class once their line is cleared, and 138 of their lines begin with `if`
    (`while` 15, `else` 10, `for` 9); of 3,000 held-out standard-library lines, 226 of
    452, and in a class 146 of 153 begin with `def` (code 8cab276)."""
    return "def" if slot.opener.startswith("class ") else "if"


def _reads(name: str, code: str, calls: bool = False) -> bool:
    """Whether `code` reads `name`: other than as a function it calls, but with `calls`."""
    rest = "" if calls else r"(?!\s*\()"
    return re.search(rf"(?<![\w.]){re.escape(name)}\b{rest}", code) is not None


def binding_hint(name: str, below: str) -> str:
    """How a statement begins that binds `name` for the code `below` it: `import math`
    where the name is a module of the standard library whose attributes the code reads
    (all of them the module's, for a compiled one, which imports without running Python
    code; for the others, all defined in the module's source, read and not run, or
    named in its strings (hashlib's `md5`), and where that source takes names it does not
    spell (`from posix import *`), none a container's method); else `name =`.
    The same answer in every process: no module is imported that could do anything on
    import."""
    attributes = set(re.findall(rf"(?<![\w.]){re.escape(name)}\.(\w+)", below))
    if name in sys.stdlib_module_names and attributes:
        if _compiled(name):
            is_module = all(hasattr(importlib.import_module(name), a) for a in attributes)
        else:
            defined = _defines(name)
            is_module = (not attributes & _CONTAINER_METHODS if defined is None
                         else attributes <= defined)
        if is_module:
            return f"import {name}"
    return f"{name} ="


@functools.lru_cache(maxsize=64)
def _defines(name: str) -> frozenset[str] | None:
    """The names the source of the standard-library module `name` binds at its top
    (in its `if` and `try` blocks too), and the identifiers its strings there spell (a
    name bound through `globals()`), read without running it; None where it has no
    Python source or takes names it does not spell (`from posix import *`)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not (spec.origin or "").endswith(".py"):
        return None
    try:
        with open(spec.origin, encoding="utf-8") as source:
            tree = python_ast.parse(source.read())
    except (OSError, SyntaxError, ValueError):
        return None
    found: set[str] = set()
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return None
        found.update(binds(node))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.isidentifier():
            found.add(node.value)  # a name it binds by spelling: `globals()[name] = ...`
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                 ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))
    return frozenset(found)


def _compiled(name: str) -> bool:
    """Whether the module `name` is compiled (built in, or an extension like math): found
    without importing it, and imported without running Python code."""
    spec = importlib.util.find_spec(name)
    return spec is not None and (spec.origin == "built-in" or isinstance(
        spec.loader, importlib.machinery.ExtensionFileLoader))
