"""Walks of a tree-sitter tree: up it in time that grows with its depth, not its square
(`ancestors`), and down it to its errors (`error_nodes`).

tree-sitter keeps no parent pointers: `Node.parent` descends from the root to the
node again (`ts_node_parent`), so a walk up by `.parent` costs the node's depth at every
step, and `next_sibling` finds its parent the same way.  Code is seldom nested deeper
than a few dozen levels, but generated code is: a list nested 50,000 deep in a data
file, a call chain of 20,000 in a bundle, an `else if` ladder or a string concatenated
from thousands of pieces (each `+` a level).  The walks up from a cursor inside such
code took minutes (9 minutes at 50,000 levels for the span hints alone); `ancestors`
finds the whole chain in one descent instead.
"""

from __future__ import annotations

from tree_sitter import Node


def ancestors(root: Node, node: Node) -> list[Node]:
    """`node` and every node that holds it up to `root`, innermost first (`node` alone
    when it is not in `root`'s tree)."""
    chain = [root]
    while chain[-1] != node:
        child = chain[-1].child_with_descendant(node)
        if child is None:
            return [node]
        chain.append(child)
    chain.reverse()
    return chain


def error_nodes(node: Node, nested: bool) -> list[Node]:
    """The ERROR and MISSING nodes below `node` in order: where `nested`, every one below
    it (not `node` itself); else the outermost ones at or below it, none inside another.

    Every child of a node with errors is looked at, not only those that report
    `has_error`: tree-sitter's ERROR leaf for a token the lexer could not end (a quote
    never closed, read to the end of a shell script: `UNEXPECTED '\\0'`) reports none,
    and a walk into the children that do went past it (`python_syntax.error_rows` did,
    where it lay inside another ERROR)."""
    found: list[Node] = []
    stack = list(node.children) if nested else [node]
    while stack:
        child = stack.pop()
        broken = child.is_error or child.is_missing
        if broken:
            found.append(child)
        if child.has_error and (nested or not broken):
            stack.extend(child.children)
    return sorted(found, key=lambda n: (n.start_byte, n.end_byte))
