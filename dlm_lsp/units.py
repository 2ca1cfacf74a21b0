"""Whole syntactic units: where a multi-line fill should end.

A diffusion model fills every masked position, so a multi-line fill often runs past the
unit it was asked for: it closes the enclosing block the suffix already closes, starts the
code that follows, or stops halfway through a statement.  `truncate_to_units` cuts it the
way SAFIM scores infilling: stop where the enclosing block ends, and drop a trailing half
statement.  Block ends come from bracket tokens (and, in Python, Ruby, Lua and shell, from
a dedent past the cursor's block; Python's indentation is read by `dlm_lsp/span_hints.py`);
half statements from incremental reparses of the document with each candidate prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tree_sitter import Node, Parser

from dlm_lsp.indentation import (
    _CLOSERS,
    _PAIRS,
    _bracket_depths,
    _leading,
    _line_bounds,
    _width,
)
from dlm_lsp.span_hints import SpanHint, _span_hint
from dlm_lsp.syntax import _container, _Doc, _grammar, _is_comment, _is_literal, _parse
from dlm_lsp.trees import ancestors
from dlm_lsp.validation import ParsedDocument


def _bracket(node: Node) -> str | None:
    """The bracket a token opens or closes (`(`, `)`, `${`...), or None.

    A token spelled with a prefix, shell's `$(`, Ruby's `#{` and `%w(`, Swift's `\\(`, is
    the bracket it ends with where a later token of the same node is that bracket's
    closer: its `)` or `}` closes it, not a bracket around it.  Not `$((` (closed by
    `))`) nor Lua's `[[` (by `]]`), which close no bracket of their own kind."""
    kind = node.type
    if kind in _PAIRS or kind in _CLOSERS:
        return kind
    if len(kind) < 2 or kind[-1] not in _PAIRS:
        return None
    closer = _PAIRS[kind[-1]]
    sibling = node.next_sibling
    while sibling is not None:
        if sibling.type == closer:
            return kind[-1]
        sibling = sibling.next_sibling
    return None


def _brackets(root: Node, descend: Callable[[Node], bool]) -> Iterator[tuple[str, Node]]:
    """Bracket tokens in document order, as (the bracket, the token) (see `_bracket`),
    entering only subtrees that `descend` accepts.

    Not a shell case arm's `a)` (or `(a)`): its `)` closes no bracket, and read as one
    it closed the cursor's block, cutting a fill's `case` at its first arm."""
    stack: list[tuple[Node, Node | None]] = [(root, None)]  # a node and its parent
    while stack:
        node, parent = stack.pop()
        if node.child_count == 0:
            kind = _bracket(node)
            if (kind is not None and not node.is_missing
                    and (parent is None or parent.type != "case_item")):
                yield kind, node
        elif node is root or descend(node):
            stack.extend((child, node) for child in reversed(node.children))


def _closed_by_suffix(doc: _Doc, offset: int) -> tuple[str | None, bool]:
    """The innermost bracket open at byte `offset`, and whether the suffix closes it.

    Error-free subtrees that do not contain the cursor are balanced, so only the path to
    the cursor and damaged regions are scanned, not the whole document.
    """
    def descend(node: Node) -> bool:
        return node.has_error or node.start_byte < offset < node.end_byte

    open_before: list[str] = []
    open_after: list[str] = []
    for kind, token in _brackets(doc.root, descend):
        if token.start_byte < offset:
            if kind in _PAIRS:
                open_before.append(kind)
            elif open_before and _PAIRS[open_before[-1]] == kind:
                open_before.pop()
        elif kind in _PAIRS:
            open_after.append(kind)
        elif open_after and _PAIRS[open_after[-1]] == kind:
            open_after.pop()
        elif open_before:
            return open_before[-1], _PAIRS[open_before[-1]] == kind
    return (open_before[-1] if open_before else None), False


def _bracket_cut(removed: _Doc, filled: _Doc, start: int, fill: str) -> int | None:
    """Where a fill that closes the cursor's enclosing bracket should end (a fill index).

    If the suffix already closes it, the fill stops before its closer; if the suffix lacks
    one, the fill keeps the line with the closer and stops there: the block is finished.
    """
    first = filled.byte(start)
    last = first + len(fill.encode("utf-8", "surrogatepass"))
    depth = 0
    for kind, token in _brackets(filled.root,
                                 lambda node: node.end_byte > first and node.start_byte < last):
        if not first <= token.start_byte < last:
            continue
        depth += 1 if kind in _PAIRS else -1
        if depth >= 0:
            continue
        at = filled.char(token.start_byte) - start
        opener, closed = _closed_by_suffix(removed, removed.byte(start))
        if opener is not None and not closed and _PAIRS[opener] == kind:
            line_end = fill.find("\n", at)
            return len(fill) if line_end == -1 else line_end
        line_start = fill.rfind("\n", 0, at) + 1
        return line_start if line_start > 0 and not fill[line_start:at].strip() else at
    return None


# Languages whose blocks end with a dedent (Python) or with a keyword written at the
# block's own indentation (`end` in Ruby and Lua, `fi` / `done` / `esac` in shell): in
# both, a fill line indented less than the cursor's block has left the block.  Brace
# languages end blocks with brackets, which `_bracket_cut` reads.
_DEDENT_ENDS = frozenset({"python", "ruby", "lua", "bash"})
# Bracketed nodes that are blocks all the same: a shell function's `{ ... }` body, where
# `if` ... `fi` is written as anywhere else.  Inside other brackets (a call's arguments, a
# Lua table) a line's indentation says nothing and no dedent is read.
_BRACED_BLOCKS = {"bash": "compound_statement"}


def _dedent_cut(filled: _Doc, start: int, fill: str, base: int,
                python: bool = False) -> int | None:
    """The first fill line indented less than the block, outside strings, heredocs and
    comments (a fill index): a heredoc's `EOF` stands at column 0 in any block.  Nor,
    with `python`, a line inside brackets or after a backslash: its column is free."""
    line_start = fill.find("\n") + 1
    while line_start > 0:
        line_end = fill.find("\n", line_start)
        line = fill[line_start:] if line_end == -1 else fill[line_start:line_end]
        stripped = line.strip()
        if stripped and _width(_leading(line)) < base:
            first = filled.byte(start + line_start + len(_leading(line)))
            node = filled.root.descendant_for_byte_range(first, first + 1)
            inside = node is not None and any(_is_literal(n) or _is_comment(n)
                                              for n in ancestors(filled.root, node))
            if not inside and not (python and _continues(fill[:line_start - 1])):
                return line_start
        line_start = line_end + 1 if line_end != -1 else 0
    return None


def _continues(above: str) -> bool:
    """Whether a line goes on the statement of the fill's lines `above` it: they leave a
    bracket open, or end in a backslash (Python's `#` comments).  Read from the text:
    tree-sitter-python takes `(1 +` then `2)` at column 0 in a block for an error, which
    Python does not."""
    depth = sum(_bracket_depths(line, ("#",))[1] for line in above.split("\n"))
    return depth > 0 or above.rstrip(" \t").endswith("\\")


def _python_base(hint: SpanHint, fill: str, before: str) -> int:
    """The column a Python fill's lines keep while they stay in the cursor's block.

    The span hint's indentation (the cursor's column when the fill writes code on the
    cursor's blank line).  Where the hint only guessed it, a default unit past the line
    that opens the block (a new file's first block, opened on the cursor's line: no line
    shows the file's step), the fill's first code line below says it if it stands right
    of that line, as it does for Python: `def f(x):` then `  return 2` is a body two in,
    not a dedent out of a block four in, which cut the fill to nothing."""
    first, *below = fill.split("\n")
    base = _width(hint.indent)
    if first.strip():  # the fill's code starts on the cursor's line
        return base if before.strip() else min(base, _width(before))
    body = _width(_leading(next((line for line in below if line.strip()), "")))
    if hint.guessed_past is not None and body > _width(hint.guessed_past):
        return body
    return base


def _end_at(kept: str, text: str, start: int, end: int) -> str:
    """A cut fill ends at its last code; a line break follows if the suffix's line has code."""
    before, after = _line_bounds(text, start, end)
    kept = kept.rstrip()
    if not after.strip():
        return kept
    newline = "\r\n" if "\r\n" in text else "\n"
    return kept + newline + (before if not before.strip() else _leading(before))


# Validations are whole-document parses; past this many prefixes the fill is left as it is.
_MAX_PREFIXES = 12


def truncate_to_units(text: str, start: int, end: int, fill: str, language: str | None) -> str:
    """Cut a multi-line fill for [start, end) to whole syntactic units (SAFIM-style).

    First the block: a fill that closes the bracket the cursor is in stops before that
    closer when the suffix has one (else right after it), and a Python, Ruby, Lua or
    shell fill outside brackets (but for a shell function's braces) stops before a line
    that dedents past the cursor's block.  Then
    statements: the longest prefix ending at a line boundary whose parse adds no errors
    is kept.  A single-line fill, an unknown language, or a fill that is already whole
    comes back unchanged.
    """
    grammar = _grammar(language, text)
    if grammar is None or "\n" not in fill:
        return fill
    canonical, parser = grammar
    removed = _parse(parser, text[:start] + text[end:])
    filled = _parse(parser, text[:start] + fill + text[end:])
    cuts = [_bracket_cut(removed, filled, start, fill)]
    container = _container(removed, removed.byte(start))
    braced = container is not None and container.type == _BRACED_BLOCKS.get(canonical)
    if canonical in _DEDENT_ENDS and (container is None or braced):
        before, _ = _line_bounds(text, start, end)
        if canonical == "python":
            base = _python_base(_span_hint(removed, start, canonical), fill, before)
        else:  # no block hint is read for these grammars: the cursor's line is in the block
            base = _width(_leading(before))
        cuts.append(_dedent_cut(filled, start, fill, base, canonical == "python"))
    found = [cut for cut in cuts if cut is not None and fill[cut:].strip()]
    body = _end_at(fill[:min(found)], text, start, end) if found else fill

    # one parse of the document; each prefix below reparses incrementally from its tree
    document = ParsedDocument(text, canonical, parser)
    if _is_whole(document, parser, text, start, end, body, canonical):
        return body
    breaks = [i for i, ch in enumerate(body) if ch == "\n"][::-1][:_MAX_PREFIXES]
    for index in breaks:
        if not body[:index].strip():
            break
        candidate = _end_at(body[:index], text, start, end)
        if _is_whole(document, parser, text, start, end, candidate, canonical):
            return candidate
    return body


def _is_whole(document: ParsedDocument, parser: Parser, text: str, start: int, end: int,
              fill: str, canonical: str) -> bool:
    """No new syntax errors, and (Python) no block header left without a body.

    tree-sitter-python parses `if x:` followed by a line at the same indentation as an
    if_statement with an empty block and no error, so that case is looked for directly.
    """
    if not document.validate(start, end, fill).valid:
        return False
    if canonical != "python" or ":" not in fill:
        return True
    doc = _parse(parser, text[:start] + fill + text[end:])
    first = doc.byte(start)
    last = first + len(fill.encode("utf-8", "surrogatepass"))
    stack = [doc.root]
    while stack:
        node = stack.pop()
        if node.type == "block" and node.start_byte == node.end_byte:
            if first < node.start_byte <= last:
                return False
        elif node.end_byte >= first and node.start_byte <= last:
            stack.extend(node.children)
    return True
