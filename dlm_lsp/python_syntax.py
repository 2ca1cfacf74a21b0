"""CPython's own parser as a second opinion on Python fills.

tree-sitter's Python grammar recovers from errors by design, and it also
*accepts* some text that Python rejects: a comment right after `x = ` when an
expression statement follows (it reads `x = y = 3`), a line indented past its
block, Python 2 (`print 'x'`, `exec 'x'`, `<>`, `0777`, backquotes), `del 1`,
`with a as 1:`, an unparenthesized generator among other arguments.  A model that
writes `#` after `x = ` comments out the rest of the user's line, and tree-sitter
calls it valid.  So a Python fill that tree-sitter passes is parsed again by
CPython (`ast.parse`), over the statements around the span rather than the
whole file: the document being edited is often broken elsewhere, and a small
text keeps it near a millisecond.

The text parsed ("the chunk") is whole lines: the top-level statements that
meet the span, with one statement either side, so that a fill that runs into
the next statement is caught too; when that is longer than CHUNK_CHARS, the
statements of the block one level down that holds the span, and so on.  A
chunk inside a block is parsed under `if 1:`, which makes its indentation legal
on its own.  A fill the chunk fails is parsed once more, with the lines below the
chunk to the end of the document or of that block (up to WIDER_CHARS): one that
parses whole there, but for lines below the chunk that tree-sitter finds broken in the
document as it is (read as blank: `parses_below`), opened what a line further down
closes (`y = foo(` over `a,` and the user's `)`), and passes.  What counts against
the fill, with the document as it is (the span's old text) as baseline:

* the chunk parses as it is: the filled chunk must parse too;
* it does not: the fill is blamed only when CPython now fails *earlier* than it
  did, or when the old failure sat at the span (on its lines, or after it with
  only blanks and comments between: an empty block is noticed at the next line
  of code) and the new one sits at the fill the same way (the fill did not
  complete `result = foo(`, or left the block empty), or anywhere where the
  span's line must be a block's header and one there (`if True:`) parses (a
  `try:` with no handler fails at its block's end).  Damage elsewhere in the
  chunk is the user's.

A chunk of top-level statements (not one cut inside a block, whose function or
loop lies outside it) is compiled as well: the parser accepts `def f(a, a)`,
`f(x=1, x=1)`, `break` outside a loop and `return` outside a function, which the
compiler rejects (the first two were among the shipped model's HumanEval fills).
Top-level `await` is allowed, as in a notebook.  Which names exist is python_names'
business (`PythonSyntax.unbound`), and whether they are bound yet python_order's
(`PythonSyntax.read_early`).  Syntax newer than the server's Python is outside
the check's reach: such a chunk fails as it is, which leaves the verdict to
tree-sitter unless the span's own line holds it.
"""

from __future__ import annotations

import ast
import bisect
import warnings
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from tree_sitter import Node

from dlm_lsp import python_ast
from dlm_lsp.python_calls import BadCall, bad_calls
from dlm_lsp.python_globals import OUTSIDE_CHARS, Outside, outside_names
from dlm_lsp.python_kinds import Misuse, misuses, rebinds
from dlm_lsp.python_names import (
    Read,
    called,
    defines_dynamically,
    unbound_reads,
    undefined,
)
from dlm_lsp.python_order import Deletion, deleted_reads, early_reads, function_end
from dlm_lsp.python_predicates import Constant, constant_predicates
from dlm_lsp.python_reach import DeadCode, unreachable
from dlm_lsp.python_returns import ReturnNeed, bare_return, return_need, unused_values
from dlm_lsp.python_tallies import Stuck, idle_tallies, resets, stuck_tallies
from dlm_lsp.python_values import unread_values
from dlm_lsp.python_yields import Generated, made_generators
from dlm_lsp.trees import error_nodes

# The statements handed to CPython are cut at this size (characters); past it the
# check moves into the block that holds the span, or is not made.
CHUNK_CHARS = 20_000
# A fill the chunk fails is judged again over the lines from the chunk's first to the
# end of the document (or of the block it was cut from), where that is no longer than
# this (characters): see `parses_below`, bash_syntax's second look too.
WIDER_CHARS = 200_000

# CPython warns about some valid text while parsing (an invalid escape like '\d');
# under `-W error` that warning would become a SyntaxError and reject a good fill.
_FILENAME = "dlm_lsp_fill_check"
warnings.filterwarnings("ignore", module=_FILENAME + "$")

_INSIDE_BLOCK = "if 1:\n"  # makes an indented chunk a block of its own
# The user's broken lines below the chunk a second look reads as blank, at the most
# (each costs one more parse): see `parses_below`.
BLANKED_LINES = 4


class Rejection(NamedTuple):
    """Where a second parser (CPython, bash) rejects the filled document, in its
    coordinates."""

    line: int  # 0-based
    column: int  # 0-based, characters
    start: int  # character range of the error in the filled document
    end: int
    message: str
    parser: str = "Python"  # which parser said it, as the verdict names it


_Spanned = TypeVar("_Spanned", Read, Misuse, BadCall, DeadCode, Stuck, Deletion, Generated,
                    Constant)


class _Filled(NamedTuple):
    chunk: _Chunk
    tree: ast.Module
    source: str  # the chunk with the fill (under `if 1:` where inside a block)
    low: int  # where the fill starts in source
    shift: int  # source offset + shift = the filled document's offset

    def in_document(self, found: list[_Spanned]) -> list[_Spanned]:
        """`found` (reads, uses, calls, statements: NamedTuples with `start` and `end` in
        source offsets) in the filled document's offsets."""
        return [item._replace(start=item.start + self.shift, end=item.end + self.shift)
                for item in found]


class _Chunk(NamedTuple):
    low: int  # whole lines [low, high) of the document
    high: int
    inside_block: bool  # parsed under `if 1:`
    failure: int | None  # where CPython fails on the chunk as it is (document offset)
    limit: int  # where the lines of the document or block it was cut from end


def _failure(source: str, inside_block: bool) -> tuple[int, int, int, str] | None:
    """(row, column, end offset within its row, message) of CPython's first syntax error
    in `source`, rows counted from the chunk's first line; None when it parses (and, at
    the top level, compiles: see the module's docstring).  A large document's window
    cut inside a function starts indented and fails to parse as it is, fill or not: its
    `return` is never compiled as "outside function"."""
    text = _INSIDE_BLOCK + source if inside_block else source
    try:
        tree = python_ast.parse(text, _FILENAME)
        if not inside_block:
            python_ast.compiled(tree, _FILENAME, flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError as error:
        shift = 1 if inside_block else 0
        row = max(0, (error.lineno or 1) - 1 - shift)
        column = max(0, (error.offset or 1) - 1)
        same_row = error.end_lineno in (None, error.lineno)
        end = max(column + 1, (error.end_offset or 0) - 1) if same_row else column + 1
        return row, column, end, error.msg
    except (ValueError, RecursionError, MemoryError) as error:  # e.g. a NUL byte
        return 0, 0, 1, str(error)
    return None


def _offset(source: str, row: int, column: int) -> int:
    """Character offset of (row, column) in `source`, clamped to it."""
    at = 0
    for _ in range(row):
        found = source.find("\n", at)
        if found == -1:
            return len(source)
        at = found + 1
    line_end = source.find("\n", at)
    return min(at + column, len(source) if line_end == -1 else line_end + 1)


def _only_blanks(text: str) -> bool:
    """Whether `text` holds nothing but blank lines and comments."""
    return all(not piece.strip() or piece.lstrip().startswith("#") for piece in text.split("\n"))


def _beside(text: str, a: int, b: int, at: int) -> bool:
    """Whether offset `at` lies in [a, b] or only blanks and comments part them."""
    return _only_blanks(text[b:at]) if at >= b else at >= a or _only_blanks(text[at:a])


# clauses that go on a statement above them: alone they fail, but so they do where the
# span above is an empty block (`if x:` over the span), the fill's to fill
_CLAUSES = frozenset({"else", "elif", "except", "finally"})


def broken_alone(line: str) -> bool:
    """Whether a line of code fails to parse whatever the lines around it hold (a hole
    marker, `x = `): it fails alone, and it leaves no bracket, string or backslash open
    that lines around it could go on with, is no header (`def g():` fails alone for
    want of a body, as it does below an empty block) and no clause of a statement
    above (`else:`)."""
    code = line.strip()
    if not code or code.endswith(":") or code.split(maxsplit=1)[0].rstrip(":") in _CLAUSES:
        return False
    # it reads policy, which reads validation, which reads this module
    from dlm_lsp.python_indents import indents_after

    if indents_after(code + "\n") is None:
        return False
    try:
        python_ast.parse(code, _FILENAME)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return False


def error_rows(root: Node) -> set[int]:
    """The rows where tree-sitter's tree puts an ERROR or MISSING node (where it starts),
    those inside another too: the walk validation reads errors with (`error_nodes`)."""
    broken = [root] if root.is_error or root.is_missing else []
    return {node.start_point[0] for node in broken + error_nodes(root, nested=True)}


def parses_below(text: str, low: int, start: int, end: int, fill: str, high: int, limit: int,
                 row: Callable[[int], int], first_error: Callable[[str], int | None],
                 users_broken: Callable[[], set[int]]) -> bool:
    """Whether a fill the chunk, lines [low, high), fails parses over the chunk's lines
    down to `limit`, where that is no longer than WIDER_CHARS: the second look of
    python_syntax and bash_syntax.

    A fill that opens what a line further down closes fails at the chunk's end whatever
    it is; parsed down to that line it passes.  A whole parse alone would let one line
    the user left broken further down (a `;;` outside a `case`, `x = = 1`) keep every
    such fill refused.  So a line where the parser first fails (`first_error`: its row in
    the text given, None where that parses whole, row 0 where there is no clear verdict)
    that lies below the chunk and is broken in tree-sitter's tree of the document as it
    is (`users_broken`, its rows) is the user's: it is read as blank and the text parsed
    again, up to BLANKED_LINES times.  A failure on the fill's lines, in the chunk, past
    the text's end or on a line the tree reads whole (a `}` the fill's own `}` left with
    nothing to close) stands."""
    if high >= limit or limit - low > WIDER_CHARS:
        return False  # nothing below the chunk, or more than is parsed at a keystroke
    top = row(low)
    fill_last = row(start) - top + fill.count("\n")
    shift = fill_last - (row(end) - top)  # rows the fill adds below its own
    lines = (text[low:start] + fill + text[end:limit]).split("\n")
    for _ in range(BLANKED_LINES + 1):
        failed = first_error("\n".join(lines))
        if failed is None:
            return True
        at = top + failed - shift  # the row of the document as it is
        if (failed <= fill_last or failed >= len(lines) or at < row(high)
                or at not in users_broken()):
            return False
        lines[failed] = " " * len(lines[failed])
    return False


def _rows(node: Node) -> tuple[int, int]:
    return node.start_point[0], node.end_point[0]


def _statements(body: Node, first: int, last: int) -> tuple[Node | None, int, int]:
    """The statements of `body` that meet rows [first, last], one either side: the first
    of them and the rows they cover (with the span's own rows)."""
    children = body.children
    if not children:
        return None, first, last
    hit = [i for i, child in enumerate(children) if child.start_point[0] <= last
           and child.end_point[0] >= first]
    if hit:
        low, high = max(0, hit[0] - 1), min(len(children) - 1, hit[-1] + 1)
    else:  # blank lines or comments between statements: their neighbours
        after = next((i for i, child in enumerate(children) if child.start_point[0] > last),
                     len(children))
        low, high = max(0, after - 1), min(len(children) - 1, after)
    top = min(first, children[low].start_point[0])
    return children[low], top, max(last, children[high].end_point[0])


# Expressions and simple statements: in Python's grammar no block (a compound statement's
# body) lies inside one, so an error-free one need not be searched for a block.  A line
# of 1 MB of code (`x = [1, 1, ...]`) is one such expression of ~670,000 nodes, whose
# walk was ~1 s of the first fill there (benchmarks/results/fill-overhead-cpu.md).  One
# with an error is still searched: tree-sitter's recovery may put anything in it.
_BLOCKLESS = frozenset({
    "expression_statement", "assignment", "augmented_assignment", "return_statement",
    "list", "tuple", "set", "dictionary", "pair", "parenthesized_expression",
    "binary_operator", "boolean_operator", "comparison_operator", "unary_operator",
    "not_operator", "conditional_expression", "call", "argument_list", "keyword_argument",
    "attribute", "subscript", "slice", "string", "concatenated_string",
    "list_comprehension", "set_comprehension", "dictionary_comprehension",
    "generator_expression", "lambda"})


def _inner_block(statement: Node, first: int, last: int) -> Node | None:
    """The block one level down in `statement` whose statements hold rows [first, last]."""
    stack = list(statement.children)
    while stack:
        node = stack.pop()
        if node.type in _BLOCKLESS and not node.has_error:
            continue
        if node.type == "block":
            if node.parent is not None and node.parent.type == "match_statement":
                stack.extend(node.children)  # its children are case clauses, not statements
                continue
            start, end = _rows(node)
            if start <= first and last <= end and node.children:
                return node
            continue  # a block that does not hold the span: nothing inside it does
        stack.extend(node.children)
    return None


class PythonSyntax:
    """CPython's verdict on fills of one version of a Python document."""

    def __init__(self, text: str, root: Node, line_starts: list[int]):
        self.text, self.root, self.lines = text, root, line_starts
        self._dynamic: bool | None = None  # see `unbound`
        self._last_filled: tuple[tuple[int, int, str], _Filled | None] | None = None
        self._chunks: dict[tuple[int, int], _Chunk | None] = {}
        self._outsides: dict[tuple[int, int], Outside | None] = {}  # see `_outside`
        # whether the text outside a span may rebind a builtin (python_kinds.rebinds)
        self._rebound: dict[tuple[str, int, int, str], bool] = {}
        self._broken: set[int] | None = None

    def _row(self, offset: int) -> int:
        return bisect.bisect_right(self.lines, offset) - 1

    def _line_end(self, row: int) -> int:
        return self.lines[row + 1] if row + 1 < len(self.lines) else len(self.text)

    def _chunk(self, start: int, end: int) -> _Chunk | None:
        """The statements around [start, end), as they are, or None when no chunk small
        enough and well formed is found (the check is then not made)."""
        key = (start, end)
        if key not in self._chunks:
            self._chunks[key] = self._find_chunk(start, end)
        return self._chunks[key]

    def _find_chunk(self, start: int, end: int) -> _Chunk | None:
        first, last = self._row(start), self._row(end)
        body: Node | None = self.root
        while body is not None:
            opening, top, bottom = _statements(body, first, last)
            inside = body is not self.root
            while (opening is not None and opening.type == "comment"
                   and opening.prev_sibling is not None
                   and opening.prev_sibling.end_point[0] == opening.start_point[0]):
                # a comment at the end of a statement's line: the chunk starts with that
                # statement (`A = 1  # c` above the span checked nothing, so `B =` over
                # `C = 3` passed: tree-sitter reads `B = C = 3`)
                opening = opening.prev_sibling
                top = min(top, opening.start_point[0])
            if opening is not None and not self._opens_its_line(opening):
                return None  # e.g. `if x: y = 1`: the header owns the line
            low, high = self.lines[top], self._line_end(bottom)
            if high - low <= CHUNK_CHARS:
                source = self.text[low:high]
                failure = _failure(source, inside)
                at = None if failure is None else low + _offset(source, *failure[:2])
                limit = self._line_end(body.end_point[0]) if inside else len(self.text)
                return _Chunk(low, high, inside, at, limit)
            holders = [c for c in body.children
                       if c.start_point[0] <= first and last <= c.end_point[0]]
            body = _inner_block(holders[0], first, last) if len(holders) == 1 else None
        return None

    def _opens_its_line(self, statement: Node) -> bool:
        """Whether only indentation comes before `statement` on its line, so that the
        chunk's lines start with its statements."""
        row = statement.start_point[0]
        before = self.text[self.lines[row]:self._line_end(row)]
        indent = len(before) - len(before.lstrip(" \t"))
        return statement.start_point[1] == indent  # ASCII blanks: bytes are characters

    def rejects(self, start: int, end: int, fill: str) -> Rejection | None:
        """CPython's objection to `fill` written over [start, end), or None.

        The chunk is cut from the document as it is, so it ends one statement below the
        span: a fill that opens a bracket a line further down closes (`y = foo(` over
        `a,`, `b,` and the user's `)`) failed at the chunk's end, "'(' was never closed",
        whatever it was.  A rejection is judged again over the chunk's lines to the end
        of the document (or of the block the chunk was cut from), and overturned where
        that parses whole but for lines below the chunk the user left broken
        (`parses_below`): where the lines below fail as they are, CPython's first error
        there would hide the fill's."""
        chunk = self._chunk(start, end)
        if chunk is None:
            return None
        rejected = self._rejects_in(chunk, start, end, fill)
        if rejected is None:
            return None

        def first_error(source: str) -> int | None:
            failure = _failure(source, chunk.inside_block)
            return None if failure is None else failure[0]

        below = parses_below(self.text, chunk.low, start, end, fill, chunk.high, chunk.limit,
                             self._row, first_error, self._users_broken)
        return None if below else rejected

    def chunk_parses(self, start: int, end: int) -> bool:
        """Whether CPython reads the span's chunk as it is (False where no chunk is found)."""
        chunk = self._chunk(start, end)
        return chunk is not None and chunk.failure is None

    def damage_above(self, start: int, end: int) -> tuple[int, int] | None:
        """The line [low, high) above the span, its line break left out, where CPython
        stops in the span's chunk as it is, where that line is broken on its own; or None.
        CPython stops at its first error, so there it hides whatever the fill breaks below
        (`ParsedDocument._mended`).  A line that leaves a bracket open (or ends in a
        backslash) is not on its own: the lines below may go on with it, the span's among
        them (`f(a,` over a span that holds `b)`, where it fails only for the span left
        empty)."""
        chunk = self._chunk(start, end)
        if chunk is None or chunk.failure is None:
            return None
        row = self._row(chunk.failure)
        if row >= self._row(start):
            return None
        # it reads policy, which reads validation, which reads this module
        from dlm_lsp.python_indents import indents_after

        low, high = self.lines[row], self._line_end(row)
        line = self.text[low:high].rstrip("\r\n")
        # a line after which Python reads a new statement: no bracket, string or backslash
        # left open
        return (low, low + len(line)) if indents_after(line.strip() + "\n") is not None else None

    def _users_broken(self) -> set[int]:
        """The rows tree-sitter finds broken in the document as it is (found once)."""
        if self._broken is None:
            self._broken = error_rows(self.root)
        return self._broken

    def _rejects_in(self, chunk: _Chunk, start: int, end: int, fill: str) -> Rejection | None:
        """CPython's objection to the fill over `chunk`'s lines (see `rejects`)."""
        source = self.text[chunk.low:start] + fill + self.text[end:chunk.high]
        failure = _failure(source, chunk.inside_block)
        if failure is None:
            return None
        row, column, column_end, message = failure
        at = chunk.low + _offset(source, row, column)
        line = self._row(chunk.low) + row
        until = chunk.low + _offset(source, row, column_end)
        if chunk.failure is not None:
            if not self._blamed(chunk, source, at, line, start, end, fill):
                return None
            if not start <= at <= start + len(fill) and self._a_header_mends(chunk, start,
                                                                               end):
                # the header is at fault, not the block's end where CPython noticed it
                line = self._row(start)
                at, until = start, start + len(fill.rstrip())
                column = start - self.lines[line]
        return Rejection(line, column, at, max(until, at), message)

    def _blamed(self, chunk: _Chunk, source: str, at: int, line: int, start: int, end: int,
                fill: str) -> bool:
        """With the chunk broken already: whether the new failure (offset `at` on `line`
        of the filled document, whose chunk is `source`) is the fill's doing."""
        old = chunk.failure
        assert old is not None
        moved = old if old < start else start if old < end else old + len(fill) - (end - start)
        if at < moved:  # CPython now stops earlier than it did
            return True
        # CPython notices an empty block at the next line of code (or at the end of the
        # line before): only blanks and comments between count as beside the span
        first = self._row(start)
        on_the_span = (first <= self._row(old) <= self._row(end)
                       or _beside(self.text, start, end, old))
        fill_at = start - chunk.low
        on_the_fill = (first <= line <= first + fill.count("\n")
                       or _beside(source, fill_at, fill_at + len(fill), at - chunk.low))
        return on_the_span and (on_the_fill or self._a_header_mends(chunk, start, end))

    def _a_header_mends(self, chunk: _Chunk, start: int, end: int) -> bool:
        """Whether the chunk parses with a header that binds nothing (`if True:`) over
        the span, where the code below is indented as a block's (binding_hints): then the
        span's line was all that broke it, and a fill that leaves it failing anywhere
        (`try:` with no handler, the failure at the block's end) is to blame."""
        from dlm_lsp.binding_hints import hint_place  # it reads indentation, which
        # reads validation, which reads this module
        place = hint_place(self.text, start, end)
        if place is None or place.slot is None:
            return False
        source = self.text[chunk.low:start] + place.empty + self.text[end:chunk.high]
        return _failure(source, chunk.inside_block) is None

    def _filled(self, start: int, end: int, fill: str) -> _Filled | None:
        """The chunk around the span with `fill` written over it, parsed; None where no
        chunk is found or it does not parse with the fill (the parse check's verdict)."""
        key = (start, end, fill)
        if self._last_filled is not None and self._last_filled[0] == key:
            return self._last_filled[1]  # the names' check, then the calls' of one fill
        chunk = self._chunk(start, end)
        filled = None
        if chunk is not None:
            head = _INSIDE_BLOCK if chunk.inside_block else ""
            source = head + self.text[chunk.low:start] + fill + self.text[end:chunk.high]
            try:
                filled = _Filled(chunk, python_ast.parse(source, _FILENAME), source,
                                 len(head) + start - chunk.low, chunk.low - len(head))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
        self._last_filled = (key, filled)  # one tuple: right for any thread that reads it
        return filled

    def _dynamic_names(self, shown: str) -> bool:
        if self._dynamic is None:  # the document's, once a version
            self._dynamic = defines_dynamically(self.text)
        return self._dynamic or defines_dynamically(shown)

    def unbound(self, start: int, end: int, fill: str, shown: str = "") -> list[Read]:
        """The names `fill`, written over [start, end), reads that nothing defines (see
        python_names), in the filled document's offsets; none where the chunk around the
        span is not found or does not parse with the fill (the parse check's verdict).
        `shown`: code the model sees beside the document (a notebook's other cells)."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return []
        reads = self._defined_nowhere(filled, start, end, shown, filled.low,
                                      filled.low + len(fill), written=True)
        return filled.in_document(reads)

    def _defined_nowhere(self, filled: _Filled, start: int, end: int, shown: str, low: int,
                         high: int, calls: bool = False, written: bool = False) -> list[Read]:
        """The reads starting in filled.source[low:high] of names nothing defines (see
        python_names), in the source's offsets; with `calls`, also those of a function
        the code around calls (one still to be written, for the names check); with
        `written`, also a word begun before `low` that the range goes on with."""
        reads = unbound_reads(filled.tree, filled.source, low, high, written)
        if not reads:
            return []
        chunk = filled.chunk
        reads = undefined(reads, (self.text[start:end], shown))
        outside = self._outside(chunk)
        if outside is None:  # a chunk cut inside a block, a long document: their words
            reads = undefined(reads, (self.text[:chunk.low], self.text[chunk.high:]))
        else:
            reads = undefined([read for read in reads if read.name not in outside.bound],
                              outside.unparsed)
        around = (self.text[chunk.low:start], self.text[end:chunk.high])
        if not calls:
            reads = [read for read in reads if not any(called(read.name, t) for t in around)]
        if not reads or self._dynamic_names(shown):
            return []
        return reads

    def _outside(self, chunk: _Chunk) -> Outside | None:
        """What the top-level statements outside a top-level `chunk` define (see
        python_globals), once a chunk a version; None for a chunk cut inside a block or
        where the text outside it is longer than OUTSIDE_CHARS."""
        if chunk.inside_block or len(self.text) - (chunk.high - chunk.low) > OUTSIDE_CHARS:
            return None
        key = (chunk.low, chunk.high)
        if key not in self._outsides:
            first, last = self._row(chunk.low), self._row(max(chunk.low, chunk.high - 1))
            # whole lines of each statement; one that shares a row with the chunk's is in it
            self._outsides[key] = outside_names([
                self.text[self.lines[child.start_point[0]]:self._line_end(child.end_point[0])]
                for child in self.root.children
                if child.end_point[0] < first or child.start_point[0] > last])
        return self._outsides[key]

    def wanted(self, start: int, end: int, fill: str = "", shown: str = "",
               calls: bool = False) -> list[str]:
        """The names the code below the span, in the function around it, reads where
        nothing binds them first (python_order) or at all (python_names), with `fill` over
        [start, end): what the span leaves for a binding to give (`wanted(start, end)`,
        the code below's need; with a fill, what that fill leaves of it).  In the order
        they are first read; none outside a function or where the chunk does not parse.
        With `calls`, also the functions it calls that nothing defines (a block's header
        may be the `def` of one)."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return []
        low = filled.low + len(fill)
        high = function_end(filled.tree, filled.source, low)
        if high is None:
            return []
        reads = self._defined_nowhere(filled, start, end, shown, low, high, calls)
        reads += early_reads(filled.tree, filled.source, low, high)
        return list(dict.fromkeys(read.name for read in sorted(reads)))

    def return_needed(self, start: int, end: int, fill: str) -> ReturnNeed | None:
        """The function that `fill`, code-less over [start, end), leaves falling off its
        end though it must give a value (see python_returns); None where none does, or
        the chunk around the span is not found or does not parse with the fill."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return None
        return return_need(filled.tree, filled.source, filled.low, filled.low + len(fill))

    def bare_return(self, start: int, end: int, fill: str) -> str | None:
        """What says the function around a bare `return` that `fill` over [start, end)
        writes must give a value (see python_returns.bare_return); None where it writes
        none, its function may end without a value, or the chunk around the span is not
        found or does not parse with the fill."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return None
        return bare_return(filled.tree, filled.source, filled.low, filled.low + len(fill))

    def _names_in_fill(self, check: Callable[[ast.Module, str, int, int], list[str]],
                       start: int, end: int, fill: str) -> list[str]:
        """The names `check(tree, source, low, high)` gives for `fill` over [start, end)
        (`_found_in_fill` for what has no place in the document to map); none where the
        filled code does not parse."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return []
        return check(filled.tree, filled.source, filled.low, filled.low + len(fill))

    def unused_values(self, start: int, end: int, fill: str) -> list[str]:
        """The values the function around the span computes and never uses, with `fill`
        over [start, end) (see python_returns.unused_values); none where the chunk around
        the span is not found or does not parse with the fill."""
        return self._names_in_fill(unused_values, start, end, fill)

    def unread_values(self, start: int, end: int, fill: str) -> list[str]:
        """The values the function around the span has (locals it binds above it, a plain
        function's parameters) that, with `fill` over [start, end), nothing reads (see
        python_values.unread_values); none where the chunk around the span is not found or
        does not parse with the fill."""
        return self._names_in_fill(unread_values, start, end, fill)

    def idle_tallies(self, start: int, end: int, fill: str) -> list[str]:
        """The locals a loop around the span is there to update and, with `fill` over
        [start, end), does not (see python_tallies); none where the chunk around the span
        is not found or does not parse with the fill."""
        return self._names_in_fill(idle_tallies, start, end, fill)

    def resets(self, start: int, end: int, fill: str, name: str) -> bool:
        """Whether `fill` over [start, end) sets the counter `name` to a number once more
        (see python_tallies.resets); False where the chunk around the span is not found
        or does not parse with the fill."""
        filled = self._filled(start, end, fill)
        return filled is not None and resets(filled.tree, filled.source, filled.low,
                                             filled.low + len(fill), name)

    def _found_in_fill(self, check: Callable[[ast.Module, str, int, int], list[_Spanned]],
                       start: int, end: int, fill: str) -> list[_Spanned]:
        """What `check(tree, source, low, high)` finds in `fill` over [start, end), in the
        filled document's offsets; nothing where the filled code does not parse."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return []
        return filled.in_document(
            check(filled.tree, filled.source, filled.low, filled.low + len(fill)))

    def read_early(self, start: int, end: int, fill: str) -> list[Read]:
        """The names local to a function that `fill` reads before any binding of them
        could have run (see python_order), in the filled document's offsets.  No text
        elsewhere, nor `exec`, binds a function's local for it."""
        return self._found_in_fill(early_reads, start, end, fill)

    def misused(self, start: int, end: int, fill: str, shown: str = "") -> list[Misuse]:
        """The uses of a name its kind cannot serve that `fill` makes or brings about (see
        python_kinds), in the filled document's offsets."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return []

        def elsewhere(name: str) -> bool:
            key = (name, start, end, shown)
            if key not in self._rebound:
                self._rebound[key] = rebinds(name, (self.text[:start], self.text[end:], shown))
            return self._rebound[key]
        uses = misuses(filled.tree, filled.source, filled.low, filled.low + len(fill),
                       elsewhere)
        return filled.in_document(uses)

    def deleted(self, start: int, end: int, fill: str) -> list[Deletion]:
        """The `del` statements of `fill` after which the code reads a name they deleted
        (see python_order.deleted_reads), in the filled document's offsets.  A fill
        without the word writes no `del`: its functions are not walked again."""
        return self._found_in_fill(deleted_reads, start, end, fill) if "del" in fill else []

    def generators(self, start: int, end: int, fill: str) -> list[Generated]:
        """The `yield`s of `fill` that make a function returning values a generator (see
        python_yields), in the filled document's offsets (none without the word)."""
        return self._found_in_fill(made_generators, start, end, fill) if "yield" in fill else []

    def unreachable(self, start: int, end: int, fill: str) -> list[DeadCode]:
        """The statements of `fill` that end their block above code that then never runs
        (see python_reach), in the filled document's offsets."""
        return self._found_in_fill(unreachable, start, end, fill)

    def constant_predicates(self, start: int, end: int, fill: str) -> list[Constant]:
        """The bool constants `fill` returns that fix its function's answer, or a loop's
        (see python_predicates), in the filled document's offsets (none without a
        `return`)."""
        return self._found_in_fill(constant_predicates, start, end, fill) \
            if "return" in fill else []

    def stuck(self, start: int, end: int, fill: str) -> list[Stuck]:
        """The locals `fill` begins at a number their updates never move (see
        python_tallies.stuck_tallies), in the filled document's offsets."""
        return self._found_in_fill(stuck_tallies, start, end, fill)

    def bad_calls(self, start: int, end: int, fill: str, shown: str = "") -> list[BadCall]:
        """The calls `fill` makes that their callee cannot take (see python_calls), in the
        filled document's offsets."""
        filled = self._filled(start, end, fill)
        if filled is None:
            return []
        chunk = filled.chunk
        calls = bad_calls(filled.tree, filled.source, filled.low, filled.low + len(fill),
                          (self.text[:chunk.low], self.text[chunk.high:], shown))
        if not calls or self._dynamic_names(shown):
            return []
        return filled.in_document(calls)
