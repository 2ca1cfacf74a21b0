"""Specification of python_ast: the server's Python parses run one thread at a time,
since CPython 3.11 counts an AST conversion's depth per interpreter and fails a parse
that another thread's overlapped (`SystemError: AST constructor recursion depth
mismatch`, seen as a -32603 on fills while typing in a large file)."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import pytest

import dlm_lsp
from dlm_lsp import python_ast


def test_a_parse_waits_for_another_thread_s() -> None:
    done = threading.Event()

    def parse() -> None:
        python_ast.parse("x = 1\n")
        done.set()

    with python_ast._LOCK:  # another thread's parse under way
        thread = threading.Thread(target=parse)
        thread.start()
        assert not done.wait(0.2)
    assert done.wait(5)
    thread.join()


def test_parse_and_compile_give_what_ast_and_compile_do() -> None:
    tree = python_ast.parse("f(1)", mode="eval")
    assert isinstance(tree, ast.Expression) and isinstance(tree.body, ast.Call)
    with pytest.raises(SyntaxError, match="outside function"):
        python_ast.compiled(python_ast.parse("return 1\n"), "<check>")


def test_no_module_of_the_server_parses_python_but_through_it() -> None:
    """The sandbox's child runs alone in a process of its own: it may."""
    package = Path(dlm_lsp.__file__).parent
    direct = [str(path.relative_to(package)) for path in package.rglob("*.py")
              if path.name not in ("python_ast.py", "sandbox_child.py")
              and re.search(r"\bast\.parse\(|(?<![\w.])compile\(|literal_eval\(",
                            path.read_text(encoding="utf-8"))]
    assert direct == []
