"""Syntax-aware steering of a fill: what to ask for, where to stop, how to indent.

Text heuristics (policy.task_kind) see only the cursor's line; the syntax tree also sees the
block the cursor is in.  Three pure functions use it:

* `span_kind` -- single-line or multi-line, how long, at which indentation, inside what.
* `truncate_to_units` -- cut a multi-line fill to whole syntactic units, as SAFIM scores
  infilling: stop where the enclosing block ends, and drop a trailing half statement.
* `enclosing_node_range` -- grow a selection to the statement-level code around it.
(`reindent`, which puts the fill's lines on the document's indentation, lives in
`dlm_lsp/indentation.py`: it needs no tree.)

Tree-sitter speaks UTF-8 byte offsets; everything here takes and returns `str` indices.
Parsers come from validation's cache; a language without a grammar gets None or an unchanged
fill, so callers always keep their text-only fallback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tree_sitter import Node, Parser

from dlm_lsp.indentation import (
    _CLOSERS,
    _PAIRS,
    IndentStyle,
    _leading,
    _line_bounds,
    _width,
    detect_indent,
)
from dlm_lsp.validation import _LOCK, ParsedDocument, _parser, language_for

# The same strings as dlm_lsp.policy's kinds (not imported: policy will import this module).
SINGLE_LINE, MULTI_LINE = "single-line", "multi-line"


# Nodes whose named children are statements, members or items: the units a rewrite grows to.
_BODIES = frozenset({
    "module", "block", "program", "statement_block", "class_body", "source_file",
    "statement_list", "translation_unit", "compound_statement", "declaration_list",
    "field_declaration_list", "interface_body", "enum_body", "enum_body_declarations",
    "constructor_body", "switch_body", "switch_block", "switch_block_statement_group",
    "switch_case", "switch_default", "case_statement", "expression_case", "default_case",
    "type_case", "communication_case", "match_block", "object_type",
})
# Owners whose empty body usually gets a whole implementation, hence a longer hint.
_DEFINITION_WORDS = ("function", "method", "class", "impl", "constructor", "trait", "struct")
_PY_HEADER_WORDS = frozenset({"if", "elif", "else", "for", "while", "try", "except", "finally",
                              "with", "def", "class", "async", "match", "case"})


@dataclass(frozen=True)
class SpanHint:
    """How to fill at a cursor, read from the syntax tree around it."""

    kind: str  # SINGLE_LINE or MULTI_LINE
    max_lines: int  # a length hint for the policy: lines a typical unit here takes
    indent: str  # the indentation the fill's new lines belong at
    node_type: str  # the node that decided: 'block', 'arguments', 'ERROR', ...
    owner_type: str | None = None  # what owns that node: 'function_definition', ...


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
    with _LOCK:  # parsers are shared and not thread-safe
        tree = parser.parse(data)
    return _Doc(text, data, tree.root_node)


def _grammar(language: str | None) -> tuple[str, Parser] | None:
    canonical = language_for(language) if language else None
    if canonical is None:
        return None
    parser = _parser(canonical)
    return None if isinstance(parser, str) else (canonical, parser)


def _nonblank_line(text: str, index: int, step: int) -> tuple[int, str] | None:
    """The nearest line with code before (step -1) or after (step 1) the line at `index`,
    as (offset of its start, its text)."""
    if step < 0:
        line_end = text.rfind("\n", 0, index)
        while line_end != -1:
            line_start = text.rfind("\n", 0, line_end) + 1
            if text[line_start:line_end].strip():
                return line_start, text[line_start:line_end]
            line_end = line_start - 1
        return None
    line_start = text.find("\n", index)
    while line_start != -1:
        line_start += 1
        line_end = text.find("\n", line_start)
        line = text[line_start:] if line_end == -1 else text[line_start:line_end]
        if line.strip():
            return line_start, line
        line_start = line_end
    return None


# --- tree helpers ---------------------------------------------------------------------------


def _is_comment(node: Node) -> bool:
    return "comment" in node.type


def _last_code_token(doc: _Doc, line_start: int, offset: int) -> Node | None:
    """The last token before byte `offset` on its line, skipping comments."""
    while offset > line_start:
        code = doc.data[line_start:offset].rstrip()
        if not code:
            return None
        last = line_start + len(code)
        node = doc.root.descendant_for_byte_range(last - 1, last)
        if node is None or not _is_comment(node):
            return node
        offset = node.start_byte
    return None


def _opens_body(token: Node | None, line: str, canonical: str) -> bool:
    """Whether a line ending in `token` opens a block: a Python header's ':' or any '{'."""
    if token is None:
        return False
    if canonical != "python":
        return token.type == "{"
    if token.type != ":" or token.parent is None:
        return False
    owner = token.parent.type
    if owner.endswith(("_definition", "_statement", "_clause")):
        return True
    return token.parent.is_error and line.split(maxsplit=1)[0].rstrip(":") in _PY_HEADER_WORDS


def _container(doc: _Doc, offset: int) -> Node | None:
    """The innermost bracketed node strictly around byte `offset` (a missing closer counts)."""
    node = doc.root.descendant_for_byte_range(offset, offset)
    while node is not None:
        children = node.children
        if (len(children) >= 2 and children[0].type in _PAIRS
                and children[0].end_byte <= offset
                and children[-1].type == _PAIRS[children[0].type]
                and offset <= children[-1].start_byte):
            return node
        node = node.parent
    return None


def _inside_text(doc: _Doc, offset: int) -> Node | None:
    """The string or comment that byte `offset` lies strictly inside, if any."""
    node: Node | None = doc.root.descendant_for_byte_range(offset, offset)
    while node is not None and node.start_byte < offset < node.end_byte:
        if node.type in ("interpolation", "template_substitution"):
            return None  # code inside an f-string or template literal
        if node.type.endswith(("string", "string_literal")) or _is_comment(node):
            return node
        node = node.parent
    return None


def _members(node: Node) -> list[Node]:
    """Named children, looking through Go's statement_list wrapper."""
    members: list[Node] = []
    for child in node.named_children:
        members.extend(child.named_children if child.type == "statement_list" else [child])
    return members


def _brackets(root: Node, descend: Callable[[Node], bool]) -> Iterator[Node]:
    """Bracket tokens in document order, entering only subtrees that `descend` accepts."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            if (node.type in _PAIRS or node.type in _CLOSERS) and not node.is_missing:
                yield node
        elif node is root or descend(node):
            stack.extend(reversed(node.children))


# --- span_kind ------------------------------------------------------------------------------


def _body_lines(owner: str | None, empty: bool) -> int:
    """An empty definition body gets room for an implementation; other blocks a few lines."""
    if empty and owner and any(word in owner for word in _DEFINITION_WORDS):
        return 16
    return 8


def _deeper(indent: str, style: IndentStyle, before: str = "") -> str:
    """One level below `indent`, unless the cursor already stands deeper on a blank line:
    the editor's own indentation is better evidence than a guessed unit."""
    if not before.strip() and _width(before) > _width(indent):
        return before
    return indent + style.unit


def _container_hint(doc: _Doc, node: Node, offset: int, style: IndentStyle,
                    before: str) -> SpanHint:
    """Multi-line hint inside brackets: align with the nearest member on its own line."""
    members = [m for m in _members(node) if doc.starts_line(m)]
    above = [m for m in members if m.end_byte <= offset]
    below = [m for m in members if m.start_byte >= offset]
    if above or below:
        indent = doc.line_indent(above[-1] if above else below[0])
    else:
        indent = _deeper(doc.line_indent(node.children[0]), style, before)
    owner = node.parent.type if node.parent is not None else None
    if node.type in _BODIES:
        lines = _body_lines(owner, not _members(node))
    else:
        lines = 4  # an argument list, array or literal: a few elements
    return SpanHint(MULTI_LINE, lines, indent, node.type, owner)


def _opener_hint(doc: _Doc, line_start: int, line_end: int, line: str, canonical: str,
                 style: IndentStyle, before: str) -> SpanHint | None:
    """A multi-line hint for the body of a block whose header ends at byte `line_end`."""
    token = _last_code_token(doc, line_start, line_end)
    if token is None or not _opens_body(token, line.strip(), canonical):
        return None
    body = token.parent if canonical != "python" else None  # '{' is part of its body node
    owner_node = body.parent if body is not None else token.parent
    owner = owner_node.type if owner_node is not None else None
    empty = body is None or not _members(body)
    indent = _deeper(_leading(line), style, before)
    return SpanHint(MULTI_LINE, _body_lines(owner, empty), indent,
                    body.type if body is not None else "block", owner)


def _python_block_hint(doc: _Doc, start: int, before: str) -> SpanHint:
    """Python blocks have no brackets: the indentation the cursor stands at picks one.

    A block's last statement ends its node, so blank lines after it belong to no block;
    the blocks around the previous code line are the candidates, and the deepest one not
    indented past the cursor wins.  A cursor at column 0 with code below it is taken to
    stand where the code around it does (an editor that did not indent); at the end of
    the file it starts top-level code.
    """
    previous = _nonblank_line(doc.text, start, -1)
    if previous is None:
        return SpanHint(MULTI_LINE, 8, "", doc.root.type)
    following = _nonblank_line(doc.text, start, 1)
    target = _width(before)
    if target == 0 and following is not None:
        target = min(_width(_leading(previous[1])), _width(_leading(following[1])))
    anchor = doc.byte(previous[0] + len(previous[1].rstrip()))
    node = doc.root.descendant_for_byte_range(anchor - 1, anchor)
    while node is not None:
        if (node.type == "block" and node.end_byte > node.start_byte
                and doc.starts_line(node) and _width(doc.line_indent(node)) <= target):
            owner = node.parent.type if node.parent is not None else None
            return SpanHint(MULTI_LINE, 8, doc.line_indent(node), "block", owner)
        node = node.parent
    return SpanHint(MULTI_LINE, 8, "", doc.root.type)


def _blank_line_hint(doc: _Doc, start: int, canonical: str, style: IndentStyle,
                     before: str) -> SpanHint:
    """A cursor on a blank line: inside brackets, after a block header, or in a block."""
    offset = doc.byte(start)
    container = _container(doc, offset)
    if container is not None:
        return _container_hint(doc, container, offset, style, before)
    previous = _nonblank_line(doc.text, start, -1)
    if previous is not None:
        line_start, line = previous
        hint = _opener_hint(doc, doc.byte(line_start), doc.byte(line_start + len(line)), line,
                            canonical, style, before)
        if hint is not None:  # a header, or a '{' the parser could not match
            return hint
    if canonical == "python":
        return _python_block_hint(doc, start, before)
    indent = _leading(previous[1]) if previous is not None else ""
    return SpanHint(MULTI_LINE, 8, indent, doc.root.type)


def span_kind(text: str, start: int, end: int, language: str | None) -> SpanHint | None:
    """Single-line or multi-line for the span [start, end), from the syntax tree around it.

    Code on the cursor's line makes a single-line fill (an unfinished expression, argument
    list or condition), except at the end of a line that opens a block (`def f():`, `{`),
    whose body is multi-line.  A blank line is multi-line, indented like the block or
    bracketed list it is in.  The span's own text is ignored (a hole marker, or code to
    replace).  None when there is no grammar for `language`.
    """
    grammar = _grammar(language)
    if grammar is None:
        return None
    canonical, parser = grammar
    return _span_hint(_parse(parser, text[:start] + text[end:]), start, canonical)


def _span_hint(doc: _Doc, start: int, canonical: str) -> SpanHint:
    """span_kind at character `start` of `doc`, the parse of the text with the span removed."""
    style = detect_indent(doc.text, canonical)
    before, after = _line_bounds(doc.text, start, start)
    offset = doc.byte(start)
    blank = not before.strip() and not after.strip()
    text_node = _inside_text(doc, offset)
    if text_node is not None:  # prose: a docstring or comment goes on at the cursor's column
        indent = (before or doc.line_indent(text_node)) if blank else _leading(before)
        return SpanHint(MULTI_LINE if blank else SINGLE_LINE, 4 if blank else 1, indent,
                        text_node.type,
                        text_node.parent.type if text_node.parent is not None else None)
    if blank:
        return _blank_line_hint(doc, start, canonical, style, before)

    closers_only = all(ch in "})];," for ch in after.strip())
    if before.strip() and (not after.strip() or (canonical != "python" and closers_only)):
        line_start = offset - len(before.encode("utf-8", "surrogatepass"))
        hint = _opener_hint(doc, line_start, offset, before, canonical, style, "")
        if hint is not None:
            return hint
    node = doc.root.named_descendant_for_byte_range(offset, offset)
    while node is not None and node.parent is not None and not (
            node.start_byte < offset < node.end_byte):
        node = node.parent
    node = node or doc.root
    owner = node.parent.type if node.parent is not None else None
    return SpanHint(SINGLE_LINE, 1, _leading(before), node.type, owner)


# --- truncate_to_units ----------------------------------------------------------------------


def _closed_by_suffix(doc: _Doc, offset: int) -> tuple[str | None, bool]:
    """The innermost bracket open at byte `offset`, and whether the suffix closes it.

    Error-free subtrees that do not contain the cursor are balanced, so only the path to
    the cursor and damaged regions are scanned, not the whole document.
    """
    def descend(node: Node) -> bool:
        return node.has_error or node.start_byte < offset < node.end_byte

    open_before: list[str] = []
    open_after: list[str] = []
    for token in _brackets(doc.root, descend):
        if token.start_byte < offset:
            if token.type in _PAIRS:
                open_before.append(token.type)
            elif open_before and _PAIRS[open_before[-1]] == token.type:
                open_before.pop()
        elif token.type in _PAIRS:
            open_after.append(token.type)
        elif open_after and _PAIRS[open_after[-1]] == token.type:
            open_after.pop()
        elif open_before:
            return open_before[-1], _PAIRS[open_before[-1]] == token.type
    return (open_before[-1] if open_before else None), False


def _bracket_cut(removed: _Doc, filled: _Doc, start: int, fill: str) -> int | None:
    """Where a fill that closes the cursor's enclosing bracket should end (a fill index).

    If the suffix already closes it, the fill stops before its closer; if the suffix lacks
    one, the fill keeps the line with the closer and stops there: the block is finished.
    """
    first = filled.byte(start)
    last = first + len(fill.encode("utf-8", "surrogatepass"))
    depth = 0
    for token in _brackets(filled.root,
                           lambda node: node.end_byte > first and node.start_byte < last):
        if not first <= token.start_byte < last:
            continue
        depth += 1 if token.type in _PAIRS else -1
        if depth >= 0:
            continue
        at = filled.char(token.start_byte) - start
        opener, closed = _closed_by_suffix(removed, removed.byte(start))
        if opener is not None and not closed and _PAIRS[opener] == token.type:
            line_end = fill.find("\n", at)
            return len(fill) if line_end == -1 else line_end
        line_start = fill.rfind("\n", 0, at) + 1
        return line_start if line_start > 0 and not fill[line_start:at].strip() else at
    return None


def _dedent_cut(filled: _Doc, start: int, fill: str, base: int) -> int | None:
    """Python: the first fill line indented less than the block, outside strings (a fill index)."""
    line_start = fill.find("\n") + 1
    while line_start > 0:
        line_end = fill.find("\n", line_start)
        line = fill[line_start:] if line_end == -1 else fill[line_start:line_end]
        stripped = line.strip()
        if stripped and _width(_leading(line)) < base:
            first = filled.byte(start + line_start + len(_leading(line)))
            node: Node | None = filled.root.descendant_for_byte_range(first, first + 1)
            while node is not None and "string" not in node.type and not _is_comment(node):
                node = node.parent
            if node is None:
                return line_start
        line_start = line_end + 1 if line_end != -1 else 0
    return None


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
    closer when the suffix has one (else right after it), and a Python fill stops before
    a line that dedents past the cursor's block.  Then statements: the longest prefix
    ending at a line boundary whose parse adds no errors is kept.  A single-line fill, an
    unknown language, or a fill that is already whole comes back unchanged.
    """
    grammar = _grammar(language)
    if grammar is None or "\n" not in fill:
        return fill
    canonical, parser = grammar
    removed = _parse(parser, text[:start] + text[end:])
    filled = _parse(parser, text[:start] + fill + text[end:])
    cuts = [_bracket_cut(removed, filled, start, fill)]
    if canonical == "python" and _container(removed, removed.byte(start)) is None:
        base = _width(_span_hint(removed, start, canonical).indent)
        before, _ = _line_bounds(text, start, end)
        if not before.strip() and fill.split("\n", 1)[0].strip():
            base = min(base, _width(before))
        cuts.append(_dedent_cut(filled, start, fill, base))
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


# --- enclosing_node_range -------------------------------------------------------------------


def enclosing_node_range(text: str, start: int, end: int,
                         language: str | None) -> tuple[int, int] | None:
    """The statement-level code around the selection [start, end), as character offsets.

    The smallest named node containing the selection grows to the nearest node that sits
    in a body (a statement, definition, member or item); a selection spanning several of a
    body's members grows to those members, not the whole body.  The range starts at the
    line start when the code starts its line, and always contains the selection.
    """
    grammar = _grammar(language)
    if grammar is None:
        return None
    doc = _parse(grammar[1], text)
    first, last = doc.byte(start), doc.byte(end)
    node = doc.root.named_descendant_for_byte_range(first, last) or doc.root
    while node.parent is not None and node.type not in _BODIES and not (
            node.parent.type in _BODIES or node.parent.parent is None):
        node = node.parent
    lo, hi = node.start_byte, node.end_byte
    if node.type in _BODIES or node.parent is None:
        if first < last:
            inside = [m for m in _members(node) if m.start_byte < last and m.end_byte > first]
        else:
            inside = [m for m in _members(node) if m.start_byte <= first < m.end_byte]
        if inside:
            lo, hi = inside[0].start_byte, inside[-1].end_byte
        elif node.parent is None:
            return None  # between top-level code: nothing to grow to
    line_start = doc.data.rfind(b"\n", 0, lo) + 1
    if not doc.data[line_start:lo].strip():
        lo = line_start
    return min(start, doc.char(lo)), max(end, doc.char(hi))
