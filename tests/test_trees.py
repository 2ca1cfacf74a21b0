"""Specification of dlm_lsp.trees: the nodes holding a node, found in one descent, the
tree walks of the fill steering on code nested tens of thousands deep, and the error
nodes below a node."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from tree_sitter import Node

from dlm_lsp.passes import shape_fill
from dlm_lsp.policy import MULTI_LINE, SpanPlan, local_text
from dlm_lsp.python_syntax import error_rows
from dlm_lsp.results import InfillRequest
from dlm_lsp.span_hints import span_kind
from dlm_lsp.syntax import enclosing_node_range
from dlm_lsp.trees import ancestors, error_nodes
from dlm_lsp.validation import _parser, validate_fill

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _parents(node: Node) -> list[Node]:
    chain = [node]
    while chain[-1].parent is not None:
        chain.append(chain[-1].parent)
    return chain


def _nodes(root: Node) -> list[Node]:
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children)
    return found


@pytest.mark.parametrize(("language", "text"), [
    ("python", (FIXTURES / "hello.py").read_text()),
    ("python", "def f(:\n    return (1,\n"),  # error nodes
    ("c", "int main() { int x = 1 return x; }\n"),  # a missing `;`
    ("javascript", (FIXTURES / "hello.js").read_text()),
])
def test_ancestors_are_the_parent_chain_of_every_node(language: str, text: str) -> None:
    tree = _parser(language).parse(text.encode())
    for node in _nodes(tree.root_node):
        assert ancestors(tree.root_node, node) == _parents(node)



@pytest.mark.parametrize(("language", "text"), [
    ("python", "def f(:\n    return (1,\n"),
    ("c", "int main() { int x = 1 return x; }\n"),  # a missing `;`
    ("bash", "if true; then\n  echo 'x\nfi\n"),  # a quote never closed, in an ERROR
    ("bash", "echo a\necho 'abc\necho b\n"),
    ("javascript", "function f( {\n  return [1, 2;\n}\n"),
])
def test_error_nodes_are_every_error_and_missing_node_of_the_tree(language: str,
                                                                   text: str) -> None:
    """Also tree-sitter's ERROR leaf for a quote a shell script never closes (`UNEXPECTED
    '\\0'`, at its second line inside the ERROR of the `if`), which reports no
    `has_error`: error_rows, which walked only into the children that do, left its row
    out, so the second look did not read that line as the user's."""
    root = _parser(language).parse(text.encode()).root_node
    broken = [node for node in _nodes(root) if node.is_error or node.is_missing]
    assert broken  # each text is broken
    order = sorted(broken, key=lambda n: (n.start_byte, n.end_byte))
    assert error_nodes(root, nested=True) == [node for node in order if node != root]
    assert error_nodes(root, nested=False) == [
        node for node in order if not any(up.is_error or up.is_missing
                                          for up in ancestors(root, node)[1:])]
    assert error_rows(root) == {node.start_point[0] for node in broken}


DEPTH = 20_000


def _finishes(work: Callable[[], object], seconds: float = 20.0) -> object:
    """`work`'s result; fails if it has not finished in `seconds` (the walks up by
    `.parent` took minutes at this depth)."""
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert done, f"still walking the tree after {seconds} s"
    return done[0]


def test_a_cursor_inside_brackets_nested_20000_deep_gets_its_span_hint() -> None:
    text = "x = " + "[" * DEPTH + " " + "]" * DEPTH + "\n"
    at = 4 + DEPTH  # between the innermost `[` and the space
    hint = _finishes(lambda: span_kind(text, at, at, "python"))
    assert hint.kind == "single-line" and hint.node_type == "list"


def test_a_fill_inside_calls_nested_20000_deep_is_validated_and_shaped() -> None:
    text = "const v = " + "f(" * DEPTH + " " + ")" * DEPTH + ";\n"
    at = 10 + 2 * DEPTH
    verdict = _finishes(lambda: validate_fill(text, at, at, "1,\n  2", "javascript"))
    assert verdict.valid
    request = InfillRequest(text, at, at, "javascript")
    shaped = _finishes(lambda: shape_fill("1,\n  2", request, SpanPlan(MULTI_LINE, 8, 8, False),
                                          "", "javascript", local_text(text, at, at)))
    assert shaped.startswith("1,\n")


def test_a_selection_inside_a_dict_nested_20000_deep_grows_to_its_statement() -> None:
    text = "CONFIG = " + '{"a": ' * DEPTH + "1" + "}" * DEPTH + "\n"
    at = text.index("1")
    found = _finishes(lambda: enclosing_node_range(text, at, at + 1, "python"))
    assert found == (0, len(text) - 1)
