"""The syntax tree of a document: parsing it, and the tree queries the fill steering shares.

Text heuristics (policy.task_kind) see only the cursor's line; the syntax tree also sees the
block the cursor is in.  This module holds what every tree-reading step needs -- a parse
with its byte<->character conversions, the grammar for a language, the bracketed node or
the body around an offset -- so that the steps themselves stay one job each:

* `span_kind` (`dlm_lsp/span_hints.py`) -- single-line or multi-line, how long, at which
  indentation, inside what.
* `truncate_to_units` (`dlm_lsp/units.py`) -- cut a multi-line fill to whole syntactic units.
* `enclosing_node_range` (here: it is one tree query) -- grow a selection to the
  statement-level code around it.
* `free_lines` (here: one tree query) -- the lines of a fill in a string, heredoc or block
  comment, or a `#if`, whose indentation is no level.
(`reindent`, which puts the fill's lines on the document's indentation, lives in
`dlm_lsp/indentation.py`: it needs no tree.)

Tree-sitter speaks UTF-8 byte offsets; everything public takes and returns `str` indices.
Parsers come from validation's cache; a language without a grammar gets None or an unchanged
fill, so callers always keep their text-only fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node, Parser

from dlm_lsp.indentation import _PAIRS, FreeLines
from dlm_lsp.trees import ancestors
from dlm_lsp.validation import _parser, language_for, parse, part_parser

# Nodes whose named children are statements, members or items: the units a rewrite grows to.
_BODIES = frozenset({
    "module", "block", "program", "statement_block", "class_body", "source_file",
    "statement_list", "translation_unit", "compound_statement", "declaration_list",
    "field_declaration_list", "interface_body", "enum_body", "enum_body_declarations",
    "constructor_body", "switch_body", "switch_block", "switch_block_statement_group",
    "switch_case", "switch_default", "case_statement", "expression_case", "default_case",
    "type_case", "communication_case", "match_block", "object_type",
    # C#, Ruby, Bash, Lua, Kotlin, Scala, Swift
    "compilation_unit", "body_statement", "do_group", "chunk", "statements",
    "template_body", "when_entry", "switch_entry", "case_clause",
})


@dataclass(frozen=True)
class _Doc:
    """A parsed text with the byte<->character conversions tree-sitter needs."""

    text: str
    data: bytes
    root: Node

    def byte(self, index: int) -> int:
        if len(self.data) == len(self.text):
            return index
        return len(self.text[:index].encode("utf-8", "surrogatepass"))

    def char(self, offset: int) -> int:
        if len(self.data) == len(self.text):
            return offset
        return len(self.data[:offset].decode("utf-8", "surrogatepass"))

    def line_indent(self, node: Node) -> str:
        """Leading whitespace of the line `node` starts on."""
        line = self.data[node.start_byte - node.start_point.column:node.start_byte]
        text = line.decode("utf-8", "surrogatepass")
        return text[:len(text) - len(text.lstrip(" \t"))]

    def starts_line(self, node: Node) -> bool:
        line = self.data[node.start_byte - node.start_point.column:node.start_byte]
        return not line.strip()


def _parse(parser: Parser, text: str) -> _Doc:
    data = text.encode("utf-8", "surrogatepass")
    tree = parse(parser, data)  # on this thread's own parser (validation._own)
    return _Doc(text, data, tree.root_node)


def _grammar(language: str | None, text: str | None = None) -> tuple[str, Parser] | None:
    """The canonical name of `language` and the parser for `text`, the lines around a span
    (`validation.part_parser`: PHP lines below the opening tag are PHP code); None
    without a grammar."""
    canonical = language_for(language) if language else None
    if canonical is None:
        return None
    parser = _parser(canonical) if text is None else part_parser(canonical, text)
    return None if isinstance(parser, str) else (canonical, parser)


# --- tree helpers ---------------------------------------------------------------------------


def _is_comment(node: Node) -> bool:
    return "comment" in node.type


def _is_literal(node: Node) -> bool:
    """A string of any grammar (Python's triple quotes, JS's template, Rust's and C++'s raw
    strings, Java's text block, Lua's long string), or a heredoc (shell, Ruby, PHP)."""
    return any(kind in node.type for kind in ("string", "heredoc", "nowdoc"))


def _is_heredoc(node: Node) -> bool:
    return "heredoc" in node.type or "nowdoc" in node.type


def free_lines(text: str, start: int, end: int, fill: str, language: str | None) -> FreeLines:
    """The lines of `fill`, put in place of [start, end), whose indentation is no level
    (see indentation.FreeLines): each line that starts inside a string or heredoc opened
    above it (with the fill line that string opens on, if the fill's: None for a heredoc,
    or for one opened before the fill), inside a block comment opened above it, or with a
    comment or a preprocessor directive (`_column_free`)."""
    grammar = _grammar(language, text)
    if grammar is None or "\n" not in fill:
        return FreeLines()
    doc = _parse(grammar[1], text[:start] + fill + text[end:])
    starts = [0]
    for line in fill.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    literal: dict[int, int | None] = {}
    passive: set[int] = set()
    opens: dict[int, int] = {}
    for index, at in enumerate(starts):
        offset = doc.byte(start + at)
        node = _innermost(doc.root, doc.root.descendant_for_byte_range(offset, offset),
                          lambda n, offset=offset: n.start_byte < offset
                          and (_is_literal(n) or _is_comment(n)))
        if node is not None and _is_literal(node):
            opened = doc.char(node.start_byte) - start
            opener = next((i for i, s in enumerate(starts) if s > opened), len(starts)) - 1
            own = opened >= 0 and not _is_heredoc(node)
            literal[index] = opener if own else None
            if own:
                column = opened - starts[opener]
                opens[opener] = min(opens.get(opener, column), column)
        elif node is not None:
            passive.add(index)
        elif index > 0 and _column_free(doc, start + at, fill[at:].split("\n", 1)[0]):
            passive.add(index)
    return FreeLines(literal, frozenset(passive), opens)


def _column_free(doc: _Doc, at: int, line: str) -> bool:
    """Whether `line` (at character `at` of the document) starts with a comment or a
    preprocessor directive: code that may stand at any column (C's `#if`, and a comment
    an editor put at column 0 over code two levels in, as JetBrains' do)."""
    if not line.strip():
        return False
    code = doc.byte(at + len(line) - len(line.lstrip(" \t")))
    token = doc.root.descendant_for_byte_range(code, code)
    if token is None or token.start_byte != code:
        return False
    return _is_comment(token) or (token.type.startswith("#") and token.parent is not None
                                  and token.parent.type.startswith("preproc"))


def _innermost(root: Node, node: Node | None, wanted: Callable[[Node], bool]) -> Node | None:
    """The innermost of `node` and the nodes holding it that is `wanted`, if any (see
    trees.ancestors: walking up by `.parent` is quadratic in the depth)."""
    if node is None:
        return None
    return next((n for n in ancestors(root, node) if wanted(n)), None)


def _container(doc: _Doc, offset: int) -> Node | None:
    """The innermost bracketed node strictly around byte `offset` (a missing closer counts)."""

    def bracketed(node: Node) -> bool:
        children = node.children
        return (len(children) >= 2 and children[0].type in _PAIRS
                and children[0].end_byte <= offset
                and children[-1].type == _PAIRS[children[0].type]
                and offset <= children[-1].start_byte)
    return _innermost(doc.root, doc.root.descendant_for_byte_range(offset, offset), bracketed)


def _members(node: Node) -> list[Node]:
    """Named children, looking through Go's statement_list wrapper."""
    members: list[Node] = []
    for child in node.named_children:
        members.extend(child.named_children if child.type == "statement_list" else [child])
    return members


# --- enclosing_node_range -------------------------------------------------------------------


def enclosing_node_range(text: str, start: int, end: int,
                         language: str | None) -> tuple[int, int] | None:
    """The statement-level code around the selection [start, end), as character offsets.

    The smallest named node containing the selection grows to the nearest node that sits
    in a body (a statement, definition, member or item); a selection spanning several of a
    body's members grows to those members, not the whole body.  The range starts at the
    line start when the code starts its line, and always contains the selection.

    The node is found from the selection's code, without the whitespace at its ends: a
    whole line (what both editors send for the cursor's line) starts in its indentation,
    outside its statement's node, and grown from there `result = 0` in a method became
    the whole method.
    """
    grammar = _grammar(language, text)
    if grammar is None:
        return None
    doc = _parse(grammar[1], text)
    selected = text[start:end]
    if selected.strip():
        code_start = start + len(selected) - len(selected.lstrip())
        code_end = end - (len(selected) - len(selected.rstrip()))
    else:
        code_start, code_end = start, end
    first, last = doc.byte(code_start), doc.byte(code_end)
    chain = ancestors(doc.root, doc.root.named_descendant_for_byte_range(first, last)
                      or doc.root)
    at = 0  # chain[at + 1] is chain[at]'s parent
    while at + 1 < len(chain) and chain[at].type not in _BODIES and not (
            chain[at + 1].type in _BODIES or at + 2 == len(chain)):
        at += 1
    node, top = chain[at], at + 1 == len(chain)
    lo, hi = node.start_byte, node.end_byte
    if node.type in _BODIES or top:
        if first < last:
            inside = [m for m in _members(node) if m.start_byte < last and m.end_byte > first]
        else:
            inside = [m for m in _members(node) if m.start_byte <= first < m.end_byte]
        if inside:
            lo, hi = inside[0].start_byte, inside[-1].end_byte
        elif top:
            return None  # between top-level code: nothing to grow to
    line_start = doc.data.rfind(b"\n", 0, lo) + 1
    if not doc.data[line_start:lo].strip():
        lo = line_start
    return min(start, doc.char(lo)), max(end, doc.char(hi))
