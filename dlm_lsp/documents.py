"""Positions and ranges of open documents, checked before anything is masked.

pygls converts client positions (UTF-16 by default, or the negotiated
encoding) to string offsets, but it quietly clamps positions that lie outside
the document.  An editor that sends such a range has a different idea of the
text than we do, so we refuse it with an error instead of filling the wrong place.
"""

from __future__ import annotations

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import TextDocument, Workspace


def open_document(workspace: Workspace, uri: str) -> TextDocument:
    """The open document at `uri`, or a clear error when the client never opened it."""
    if uri not in workspace.text_documents:
        raise JsonRpcInvalidParams(
            f"document {uri} is not open: send textDocument/didOpen before asking for a fill")
    return workspace.get_text_document(uri)


def _check_position(doc: TextDocument, pos: types.Position, what: str) -> None:
    lines = doc.lines
    if pos.line < 0 or pos.character < 0:
        raise JsonRpcInvalidParams(f"{what} {pos.line}:{pos.character} is negative")
    if pos.line >= len(lines):
        if pos.line == len(lines) and pos.character == 0:
            return  # the position just past a final line break
        raise JsonRpcInvalidParams(
            f"{what} line {pos.line} is outside the document ({len(lines)} lines)")
    line = lines[pos.line].rstrip("\r\n")
    width = doc.position_codec.client_num_units(line)
    if pos.character > width:
        raise JsonRpcInvalidParams(
            f"{what} {pos.line}:{pos.character} is past the end of its line ({width} units)")


def range_offsets(doc: TextDocument, rng: types.Range) -> tuple[int, int]:
    """String offsets (start, end) of a client range, after checking it lies in the document."""
    _check_position(doc, rng.start, "range start")
    _check_position(doc, rng.end, "range end")
    start, end = doc.offset_at_position(rng.start), doc.offset_at_position(rng.end)
    if end < start:
        raise JsonRpcInvalidParams(
            f"range end {rng.end.line}:{rng.end.character} is before its start "
            f"{rng.start.line}:{rng.start.character}")
    return start, end


def offset_range(doc: TextDocument, start: int, end: int) -> types.Range:
    """The client range of string offsets (start, end)."""
    return types.Range(doc.client_position_at_offset(start), doc.client_position_at_offset(end))
