"""Walking up a tree-sitter tree in time that grows with its depth, not its square.

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
