"""Helpers for end-to-end tests: apply LSP edits the way an editor does, independently."""

from __future__ import annotations


def utf16_offset(text: str, line: int, character: int) -> int:
    """String index of an LSP position (UTF-16 columns), computed without pygls."""
    lines = text.splitlines(keepends=True)
    index = sum(len(x) for x in lines[:line])
    units = 0
    col = 0
    row = lines[line] if line < len(lines) else ""
    while units < character:
        units += 2 if ord(row[col]) > 0xFFFF else 1
        col += 1
    return index + col


def apply_edits(text: str, edits: list[dict]) -> str:
    """Apply JSON TextEdits (all against `text`) from the last to the first."""
    spans = []
    for e in edits:
        r = e["range"]
        start = utf16_offset(text, r["start"]["line"], r["start"]["character"])
        end = utf16_offset(text, r["end"]["line"], r["end"]["character"])
        spans.append((start, end, e["newText"]))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def assert_only_inside(before: str, after: str, start: int, end: int) -> None:
    """The text before `start` and after `end` (offsets in `before`) is byte-identical."""
    assert after.encode()[: len(before[:start].encode())] == before[:start].encode()
    tail = before[end:].encode()
    assert after.encode().endswith(tail)
    assert len(after.encode()) >= len(before[:start].encode()) + len(tail)
