"""The names a Python module defines outside the statements the names check parses.

The names check (python_names) parses the statements around a span, one either side
(python_syntax's chunk), and took any *word* of the rest of the document for a name
that may exist there.  In a file of several functions that passed most wrong names:
`return a` in `is_even(n)` was valid because a function further down reads its
parameter `a`, and `return result` because another one has a local `result`; those are
a NameError when the function runs.  Python resolves a function's free name in the
module's own namespace (or an enclosing function's, which a top-level chunk holds),
so outside a top-level chunk what counts is what the module binds:

* each top-level statement outside the chunk (tree-sitter's root children) is parsed
  alone with `ast`; what it binds at the module level counts (assignments, imports,
  `def` and `class` names, loop and `with` targets, in `if`/`try`/`with`/`for` blocks
  too, not in function or class bodies), and every name a `global` statement in it
  declares (a function that sets a module global);
* a statement that does not parse (the user's damage, another hole marker) keeps the
  old reading: any word of it may be a name it defines.

A statement's names are kept by its text (`statement_names`; up to KEPT_CHARS long), so
a later version of the document parses only the statements that changed.  Documents
whose text outside the chunk is longer than `OUTSIDE_CHARS` keep the word search (their
first such check would parse megabytes); so do chunks cut inside a block, whose
enclosing function lies partly outside them.  The check still errs toward passing: a
comprehension's variable at the top level counts as bound, as does a name only a `del`
or a class body's scope sees.
"""

from __future__ import annotations

import ast
import functools
import warnings
from collections.abc import Iterator
from typing import NamedTuple

from dlm_lsp import python_ast
from dlm_lsp.python_names import binds

# Past this many characters of text outside the chunk, the word search is kept.
OUTSIDE_CHARS = 200_000
# Statements up to this long keep their names by their text (at most KEPT of them, a
# few megabytes); a longer one (a long class) is parsed again for each version.
KEPT_CHARS = 4096
KEPT = 2048

# invalid escapes ('\d') warn while parsing; a warning made an error would lose the names
_FILENAME = "dlm_lsp_module_names"
warnings.filterwarnings("ignore", module=_FILENAME + "$")

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


class Outside(NamedTuple):
    """What the statements outside a chunk define: the names they bind at the module
    level (`bound`), and the texts of those that do not parse (`unparsed`), whose words
    are all taken for names that may exist."""

    bound: frozenset[str]
    unparsed: tuple[str, ...]


def _module_level(node: ast.AST) -> Iterator[str]:
    """The names `node`'s statements bind in the scope it is (not in the bodies of the
    functions and classes it holds, whose own names count)."""
    for child in ast.iter_child_nodes(node):
        yield from binds(child)
        if not isinstance(child, _SCOPES):
            yield from _module_level(child)


def statement_names(text: str) -> frozenset[str] | None:
    """The names the top-level statement `text` binds at the module level, with those
    any `global` statement in it declares; None where it does not parse alone."""
    return _kept_names(text) if len(text) <= KEPT_CHARS else _names(text)


@functools.lru_cache(maxsize=KEPT)
def _kept_names(text: str) -> frozenset[str] | None:
    return _names(text)


def _names(text: str) -> frozenset[str] | None:
    try:
        tree = python_ast.parse(text, _FILENAME)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names = set(_module_level(tree))
    names.update(name for node in ast.walk(tree) if isinstance(node, ast.Global)
                 for name in node.names)
    return frozenset(names)


def outside_names(statements: list[str]) -> Outside:
    """What the top-level `statements` (each one's whole lines) define, together."""
    bound: set[str] = set()
    unparsed = []
    for text in statements:
        names = statement_names(text)
        if names is None:
            unparsed.append(text)
        else:
            bound |= names
    return Outside(frozenset(bound), tuple(unparsed))
