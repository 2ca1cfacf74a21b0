"""Positions and ranges of open documents, mapped exactly as the client counts them.

We do not use pygls' own position helpers for three reasons, each of which
would fill (or edit) a different place than the one the editor meant:

* pygls splits lines with `str.splitlines`, which also breaks at form feeds,
  vertical tabs, U+0085, U+2028 and U+2029; LSP lines end only at `\\n`,
  `\\r\\n` and `\\r`.  A Python file with a form feed would be off by a line.
* It quietly clamps positions outside the document or past a line's end, and
  rounds a position inside a character (between the two UTF-16 units of an
  emoji, inside a UTF-8 sequence) to the next character.  An editor that sends
  such a position has a different idea of the text than we do, so we refuse it.
* Its workspace stores documents under the percent-decoded URI, so a lookup by
  the URI the client sent (`file:///a%20b.py`) must decode it the same way.

Incremental `didChange` edits go through the same mapping (`apply_change`),
so our copy of a document stays the editor's copy.
"""

from __future__ import annotations

import re
import unicodedata
import weakref
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

import numpy as np
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import TextDocument, Workspace

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BREAK_CHARACTER = re.compile(r"[\r\n]")
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")  # two UTF-16 code units each
UTF8, UTF16, UTF32 = (types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16,
                      types.PositionEncodingKind.Utf32)


def document_key(uri: str) -> str:
    """The one spelling of a document's URI that all that is kept of it is keyed by (its
    jobs, parse tree, recent fills, offers): the percent-decoded one pygls' workspace
    keeps it under, which didOpen and didClose go by.  A client may spell one document
    two ways (`file:///a%20b.py` and `file:///a b.py`, a drive letter's colon as `%3A`
    or not); what a request spelled one way left behind stayed after a didClose spelled
    the other.  Decode a client's URI once: a key decoded again is another URI where the
    name holds a `%`."""
    return unquote(uri)


def document_name(uri: str) -> str:
    """A document as a message to the user names it: its file's name (`hello.py`), not a
    URI the user never typed (a notebook cell's was
    `vscode-notebook-cell://host/tmp/c.ipynb#W0sdnNjb2Rl...`); a notebook's cell is "this
    cell of c.ipynb"; a URI with no path, as it is."""
    parts = urlsplit(uri)
    name = unquote(parts.path.rstrip("/").rpartition("/")[2])
    if not name:
        return uri
    return f"this cell of {name}" if parts.scheme.endswith("-cell") else name


def find_document(workspace: Workspace, uri: str) -> TextDocument | None:
    """The open document at `uri` (as the client spells it), or None."""
    return workspace.text_documents.get(document_key(uri))


class Refused:
    """The documents the server would not keep (past `maxOpenDocuments`), each with what
    the user was told then.  A request for one is answered with that, not with "not
    open": the editor did open it, and "send didOpen" tells its user nothing they can
    do.  Forgotten when the editor closes the document or opens it again; at most LIMIT
    are remembered (the oldest go first), so a client opening files without end cannot
    grow it."""

    LIMIT = 4096

    def __init__(self) -> None:
        self._told: dict[str, str] = {}

    def add(self, uri: str, told: str) -> None:
        key = document_key(uri)
        self._told.pop(key, None)
        self._told[key] = told
        while len(self._told) > self.LIMIT:
            del self._told[next(iter(self._told))]

    def discard(self, uri: str) -> None:
        self._told.pop(document_key(uri), None)

    def get(self, uri: str) -> str | None:
        """What the user was told when `uri` was refused, or None if it was not."""
        return self._told.get(document_key(uri))


def open_document(workspace: Workspace, uri: str, refused: Refused | None = None
                  ) -> TextDocument:
    """The open document at `uri`, or a clear error when it is not: one the client never
    opened, or one the server refused to keep (what the user was told then)."""
    doc = find_document(workspace, uri)
    if doc is None:
        told = refused.get(uri) if refused is not None else None
        if told is None and workspace.get_notebook_document(notebook_uri=uri) is not None:
            # "send textDocument/didOpen" is nothing a notebook's client can do
            told = (f"{uri} is a notebook: name one of its cells (a fill is of a cell's "
                    "text, with the notebook's other cells around it)")
        raise JsonRpcInvalidParams(
            f"document {uri} is not open: send textDocument/didOpen before asking for a fill"
            if told is None else told)
    return doc


def _units(text: str, encoding: str) -> int:
    """Length of `text` in the client's code units."""
    if encoding == UTF32 or text.isascii():
        return len(text)
    if encoding == UTF8:
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _index(line: str, units: int, encoding: str) -> int | None:
    """The string index `units` code units into `line`, or None inside a character."""
    if encoding == UTF32 or line.isascii():
        return units
    if encoding == UTF8:
        try:
            return len(line.encode("utf-8", "surrogatepass")[:units]
                       .decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:  # the prefix ends inside a multi-byte sequence
            return None
    index = units
    for before, astral in enumerate(_ASTRAL.finditer(line)):
        at = astral.start() + before  # where this character starts, in UTF-16 units
        if at >= units:
            break
        if at + 1 == units:
            return None  # between the two halves of a surrogate pair
        index -= 1
    return index


def _line_starts(text: str) -> np.ndarray:
    """Where each line of `text` starts.  A text without `\r` (nearly every one) is
    scanned by numpy, a character an array element: a regex match a line took 0.34-0.57 s
    on the event loop for a 1,000,000-line file's first didChange, numpy ~0.1 s."""
    if "\r" not in text:
        if text.isascii():
            chars = np.frombuffer(text.encode("ascii"), np.uint8)
        else:  # four bytes a character, so that an element's index is its offset
            chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
        return np.concatenate((np.zeros(1, np.int64), np.flatnonzero(chars == 10) + 1))
    return np.array([0] + [m.end() for m in _LINE_BREAK.finditer(text)], dtype=np.int64)


class Lines:
    """A text's LSP lines: where each starts and where its content ends.

    The starts are an int64 array: a keystroke moves every line start after it, and
    a list of Python ints took 2-3 ms to rebuild for that in a 30,000-line file (on
    the event loop, per change), and 36 bytes a line to keep, against 8 here."""

    def __init__(self, text: str, encoding: str, starts: np.ndarray | None = None):
        self.text, self.encoding = text, encoding
        self.starts = starts if starts is not None else _line_starts(text)

    def _line_of(self, offset: int) -> int:
        """The line `offset` is on (a line break is on the line it ends)."""
        return int(np.searchsorted(self.starts, offset, side="right")) - 1

    def edited(self, start: int, end: int, text: str) -> Lines:
        """The lines of `text`, which is this text with [start, end) replaced, found by
        scanning only the edit and a character either side: a keystroke in a 3 MB file
        rescanned all of it (about 50 ms on the event loop, per change), and so did one
        in a 3 MB line, when the lines around the edit were rescanned whole.

        A line starts after a `\n`, or after a `\r` that no `\n` follows, so a start
        is decided by the two characters either side of it.  Those before `start` keep
        theirs, and those past the edit's end and the character after it too, moved with
        the text; a `\r` and a `\n` that the edit brings together (or apart) are read
        in between, as one line break (or two)."""
        size = len(text) - (len(self.text) - end) - start  # the characters inserted
        kept = self.starts[:int(np.searchsorted(self.starts, start))]
        tail = self.starts[int(np.searchsorted(self.starts, end + 2)):] + (size - (end - start))
        last = start + size + 1  # the last start read anew
        middle = [m.end() for m in _BREAK_CHARACTER.finditer(text, max(0, start - 1), last)
                  if start <= m.end() <= last and text[m.start():m.end() + 1] != "\r\n"]
        return Lines(text, self.encoding, np.concatenate(
            (kept if len(kept) else np.zeros(1, np.int64), np.array(middle, np.int64), tail)))

    def content(self, line: int) -> tuple[int, int]:
        """(start, end) offsets of a line without its line break."""
        start = int(self.starts[line])
        if line + 1 == len(self.starts):
            return start, len(self.text)
        end = int(self.starts[line + 1])
        return start, end - (2 if self.text[max(start, end - 2):end] == "\r\n" else 1)

    def _head(self, line: int, units: int) -> tuple[int, str]:
        """Where `line` starts, and its first `units` characters (all of it if it has
        fewer): they hold its first `units` code units, in any encoding, and a position
        is read from them alone.  Reading the whole line cost a minified bundle's 3 MB,
        twice, for each position of each keystroke (0.2-0.3 s on the event loop)."""
        start, end = self.content(line)
        return start, self.text[start:min(end, start + max(0, units))]

    def offset(self, pos: types.Position, what: str) -> int:
        """The string offset of a client position; -32602 if it is not in the text."""
        if pos.line < 0 or pos.character < 0:
            raise JsonRpcInvalidParams(f"{what} {pos.line}:{pos.character} is negative")
        if pos.line >= len(self.starts):
            raise JsonRpcInvalidParams(
                f"{what} line {pos.line} is outside the document ({len(self.starts)} lines)")
        start, line = self._head(pos.line, pos.character)
        width = _units(line, self.encoding)  # the whole line's, where it is short of the position
        if pos.character > width:
            raise JsonRpcInvalidParams(
                f"{what} {pos.line}:{pos.character} is past the end of its line ({width} units)")
        index = _index(line, pos.character, self.encoding)
        if index is None:
            raise JsonRpcInvalidParams(
                f"{what} {pos.line}:{pos.character} falls inside a character "
                f"(positions count {getattr(self.encoding, 'value', self.encoding)} code units)")
        return start + index

    def clamped_offset(self, pos: types.Position) -> int:
        """The nearest offset to a position that may lie outside the text (for edits)."""
        if pos.line >= len(self.starts):
            return len(self.text)
        start, line = self._head(max(0, pos.line), pos.character)
        units = min(max(0, pos.character), _units(line, self.encoding))
        index = _index(line, units, self.encoding)
        while index is None:  # inside a character: after it
            units += 1
            index = _index(line, units, self.encoding)
        return start + index

    def position(self, offset: int) -> types.Position:
        """The client position of a string offset."""
        line = self._line_of(offset)
        start = int(self.starts[line])
        return types.Position(line, _units(self.text[start:offset], self.encoding))


# each open document's lines, for its current text (made again when the text changes)
_LINES: weakref.WeakKeyDictionary[TextDocument, Lines] = weakref.WeakKeyDictionary()


def _lines(doc: TextDocument) -> Lines:
    text, encoding = doc.source, doc.position_codec.encoding
    known = _LINES.get(doc)
    if known is None or known.text is not text or known.encoding != encoding:
        known = _LINES[doc] = Lines(text, encoding)
    return known


def range_offsets(doc: TextDocument, rng: types.Range) -> tuple[int, int]:
    """String offsets (start, end) of a client range, after checking it lies in the document."""
    lines = _lines(doc)
    start, end = lines.offset(rng.start, "range start"), lines.offset(rng.end, "range end")
    if end < start:
        raise JsonRpcInvalidParams(
            f"range end {rng.end.line}:{rng.end.character} is before its start "
            f"{rng.start.line}:{rng.start.character}")
    return start, end


def position_offset(doc: TextDocument, position: types.Position) -> int:
    """The string offset of a client's cursor, after checking it lies in the document:
    a request that sends a position (inline completion) is told about its `position`,
    not about a "range start" it never sent."""
    return _lines(doc).offset(position, "position")


def offset_range(doc: TextDocument, start: int, end: int) -> types.Range:
    """The client range of string offsets (start, end)."""
    lines = _lines(doc)
    return types.Range(lines.position(start), lines.position(end))


def _in_word(char: str) -> bool:
    """Whether `char` can be part of an identifier: a letter or digit of any script, a
    connector such as `_`, or a combining mark (`e` + U+0301 is an `é`), as Python's
    identifiers (XID_Continue) and the words editors filter completion items by."""
    return char.isalnum() or unicodedata.category(char) in ("Pc", "Mn", "Mc")


def word_before(doc: TextDocument, position: types.Position) -> tuple[types.Range, str]:
    """The word (letters, digits, `_`, combining marks: `_in_word`) the cursor's line holds
    just before `position`, and its range up to the position (empty where no word ends
    there): the text a client filters completion items by.  -32602 for a position not in
    the document."""
    lines = _lines(doc)
    at = position_offset(doc, position)
    line_start, _ = lines.content(position.line)
    start = at
    while start > line_start and _in_word(lines.text[start - 1]):
        start -= 1
    return types.Range(lines.position(start), position), lines.text[start:at]


def apply_change(doc: TextDocument, change: types.TextDocumentContentChangeEvent) -> str:
    """The document's text after one `didChange` content change.

    A range outside the text is clamped to it (the editor's edit cannot be
    refused: it is a notification), as pygls does, but on LSP lines.  A range whose
    end comes before its start is taken with its ends swapped, as the reference
    implementation (vscode-languageserver-textdocument's getWellformedRange, which
    most servers follow) takes it: inserted at the start, as it was, the edit left text
    that the client had replaced, and our copy then differed from the client's.
    """
    if not isinstance(change, types.TextDocumentContentChangePartial):
        return change.text
    lines = _lines(doc)
    start, end = sorted((lines.clamped_offset(change.range.start),
                         lines.clamped_offset(change.range.end)))
    text = lines.text[:start] + change.text + lines.text[end:]
    _LINES[doc] = lines.edited(start, end, text)  # the document's next text, if it takes it
    return text


def apply_changes(workspace: Workspace, document: types.VersionedTextDocumentIdentifier,
                  changes: Sequence[types.TextDocumentContentChangeEvent]) -> bool:
    """Apply a didChange's content changes (a text document's, or a notebook cell's) in
    order, each by `apply_change` on LSP lines, and take the version they make; False
    where the document is not open (nothing applied)."""
    doc = find_document(workspace, document.uri)
    if doc is None:
        return False
    for change in changes:
        doc.apply_change(types.TextDocumentContentChangeWholeDocument(apply_change(doc, change)))
    doc.version = document.version
    return True
