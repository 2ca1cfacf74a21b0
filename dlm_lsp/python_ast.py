"""`ast.parse` and `compile` of an AST, one thread at a time.

CPython 3.11 counts the depth of the AST it converts (C structures to Python objects
and back) in one counter per interpreter, not per thread, and checks it at the end
(gh-106905; later versions count per call).  A conversion that lets another thread
run halfway (a garbage collection that runs a finalizer, a switch of the GIL) leaves
the counter off for both, and one of them fails with `SystemError: AST constructor
recursion depth mismatch (before=54, after=45)`.  The server parses Python on several
threads at once (a fill's checks on its worker, another's reused fill on the event
loop's pool, a document parsed ahead): typing fast in a 5 MB file with fills asked as
it went, 2 of 19 fills failed so, -32603 with the traceback sent to the editor.

So every parse of the server's Python checks goes through one lock.  A parse of a
check's chunk takes a millisecond or so: waiting for another costs little.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)`, alone among the server's threads."""
    with _LOCK:
        return ast.parse(source, filename, mode)


def compiled(tree: ast.AST, filename: str, flags: int = 0) -> None:
    """Compile `tree` (for the errors only compiling finds: a `return` outside a
    function), alone among the server's threads; its SyntaxError is raised."""
    with _LOCK:
        compile(tree, filename, "exec", flags=flags, dont_inherit=True)
