"""Span hints: what kind of fill the syntax tree around a cursor asks for.

The text heuristic (policy.task_kind) sees only the cursor's line, so an unfinished
argument list on an otherwise blank line looks like a multi-line fill and the end of a
`def f():` line like a single-line one.  `span_kind` reads the tree instead: whether the
cursor is in an expression, a bracketed list, a string or comment, or a block's body, and
so whether the fill is single-line or multi-line, about how many lines it takes, and at
which indentation its new lines belong.  The policy turns the hint into a mask length;
truncation (`dlm_lsp/units.py`) reuses the block indentation to find where a fill dedents
out of its block.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from dlm_lsp.indentation import (
    IndentStyle,
    _bracket_depths,
    _code_end,
    _leading,
    _line_bounds,
    _line_comments,
    _opens_keyword_block,
    _statement_indent,
    _unquoted,
    _width,
    detect_indent,
)
from dlm_lsp.syntax import (
    _BODIES,
    _container,
    _Doc,
    _grammar,
    _is_comment,
    _members,
    _parse,
)
from dlm_lsp.trees import ancestors

# The same strings as dlm_lsp.policy's kinds (not imported: policy will import this module).
SINGLE_LINE, MULTI_LINE = "single-line", "multi-line"

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
    # None when `indent` was read from the document or the cursor's line; else the
    # indentation of the line that opens the block, `indent` being a guessed default unit
    # past it (a document that shows no step, the cursor not standing deeper)
    guessed_past: str | None = None


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


def _inside_text(doc: _Doc, offset: int) -> Node | None:
    """The string or comment that byte `offset` lies strictly inside, if any."""
    leaf = doc.root.descendant_for_byte_range(offset, offset)
    for node in ancestors(doc.root, leaf) if leaf is not None else []:
        if not node.start_byte < offset < node.end_byte:
            return None
        if node.type in ("interpolation", "template_substitution"):
            return None  # code inside an f-string or template literal
        if node.type.endswith(("string", "string_literal")) or _is_comment(node):
            return node
    return None


# --- span_kind ------------------------------------------------------------------------------


def _body_lines(owner: str | None, empty: bool) -> int:
    """An empty definition body gets room for an implementation; other blocks a few lines."""
    if empty and owner and any(word in owner for word in _DEFINITION_WORDS):
        return 16
    return 8


def _deeper(indent: str, style: IndentStyle, before: str = "") -> tuple[str, str | None]:
    """One level below `indent`, unless the cursor already stands deeper on a blank line:
    the editor's own indentation is better evidence than a guessed unit.  With it, `indent`
    if the level is a guess (the document shows no unit), else None (`guessed_past`)."""
    if not before.strip() and _width(before) > _width(indent):
        return before, None
    return indent + style.unit, None if style.measured else indent


def _container_hint(doc: _Doc, node: Node, offset: int, style: IndentStyle,
                    before: str) -> SpanHint:
    """Multi-line hint inside brackets: align with the nearest member on its own line."""
    members = [m for m in _members(node) if doc.starts_line(m)]
    above = [m for m in members if m.end_byte <= offset]
    below = [m for m in members if m.start_byte >= offset]
    if above or below:
        indent, guessed_past = doc.line_indent(above[-1] if above else below[0]), None
    else:
        indent, guessed_past = _deeper(doc.line_indent(node.children[0]), style, before)
    owner = node.parent.type if node.parent is not None else None
    if node.type in _BODIES:
        lines = _body_lines(owner, not _members(node))
    else:
        lines = 4  # an argument list, array or literal: a few elements
    return SpanHint(MULTI_LINE, lines, indent, node.type, owner, guessed_past)


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
    # a header that continues a statement (`class A(B,` / `        C):`) opens a body a
    # step right of the line the statement begins on, as reindent reads it
    statement = _statement_indent(doc.text, doc.char(line_start), line, canonical)
    indent, guessed_past = _deeper(statement, style, before)
    return SpanHint(MULTI_LINE, _body_lines(owner, empty), indent,
                    body.type if body is not None else "block", owner, guessed_past)


def _keyword_opener_hint(doc: _Doc, line_start: int, offset: int, before: str,
                         canonical: str, style: IndentStyle) -> SpanHint | None:
    """A multi-line hint for the body of a block that the line from byte `line_start` to
    `offset`, its end (its text `before`), opens with a keyword its language closes with
    one: Ruby's `def g`, Lua's `function g()`, shell's `if x; then` (see
    indentation._KEYWORD_HEADS).

    No bracket token says so, so the line's text is read, as reindent reads it; a line
    still inside a bracket it opened (`def g(a,`) is an argument list, not a header,
    unless what follows that bracket opens the block itself: a callback passed to a
    call, Lua's `set('n', 'x', function()`, Ruby's `run(xs.map do |x|`.  Read as
    single-line, a fill that writes the body (`\n    return 2`) kept its first line
    only: nothing."""
    comments = _line_comments(canonical)
    code = before[:_code_end(before, comments)].strip()
    if not _opens_keyword_block(code, canonical):
        return None
    if _bracket_depths(code, comments)[1] > 0 and not _opens_keyword_block(
            _after_open_bracket(code, comments), canonical):
        return None
    token = _last_code_token(doc, line_start, offset)
    header = line_start + len(_leading(before))  # where the header's code starts
    # the node the header opens: the innermost one past the cursor (its closer below),
    # else the outermost one the header's line starts (a block not closed yet)
    owner: Node | None = None
    # the nodes holding the token, below the root
    holding = ancestors(doc.root, token)[1:-1] if token is not None else []
    for node in holding:
        if node.start_byte < header:
            break
        owner = node
        if node.end_byte > offset:
            break
    owner_type = owner.type if owner is not None else None
    indent, guessed_past = _deeper(_leading(before), style)
    return SpanHint(MULTI_LINE, _body_lines(owner_type, True), indent,
                    owner_type or doc.root.type, owner_type, guessed_past)


def _after_open_bracket(code: str, comments: tuple[str, ...]) -> str:
    """The text of a line of code after the last bracket it leaves open."""
    opened: list[int] = []
    for index, ch in _unquoted(code, comments):
        if ch is not None and ch in "([{":
            opened.append(index)
        elif ch is not None and ch in ")]}" and opened:
            opened.pop()
    return code[opened[-1] + 1:].strip() if opened else code


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
    chain = ancestors(doc.root, node) if node is not None else []
    for at, node in enumerate(chain):
        if (node.type == "block" and node.end_byte > node.start_byte
                and doc.starts_line(node) and _width(doc.line_indent(node)) <= target):
            owner = chain[at + 1].type if at + 1 < len(chain) else None
            return SpanHint(MULTI_LINE, 8, doc.line_indent(node), "block", owner)
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
    list or condition), except at the end of a line that opens a block (`def f():`, `{`,
    Ruby's `def g`, Lua's `function g()`, shell's `if x; then`), whose body is
    multi-line.  A blank line is multi-line, indented like the block or bracketed list it
    is in.  The span's own text is ignored (a hole marker, or code to replace).  None when
    there is no grammar for `language`.
    """
    grammar = _grammar(language, text)
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
        if hint is None and not after.strip():
            hint = _keyword_opener_hint(doc, line_start, offset, before, canonical, style)
        if hint is not None:
            return hint
    chain = ancestors(doc.root, doc.root.named_descendant_for_byte_range(offset, offset)
                      or doc.root)
    at = next((at for at, node in enumerate(chain[:-1])
               if node.start_byte < offset < node.end_byte), len(chain) - 1)
    owner = chain[at + 1].type if at + 1 < len(chain) else None
    return SpanHint(SINGLE_LINE, 1, _leading(before), chain[at].type, owner)


