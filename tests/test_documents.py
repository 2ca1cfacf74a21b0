"""Specification of dlm_lsp.documents: LSP lines, and finding them again after an edit."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace import TextDocument

from dlm_lsp.documents import _LINES, Lines, apply_change

# texts of letters, blanks and every kind of line break, so that edits join and split them
pieces = st.lists(st.sampled_from(["a", "é", "😀", " ", "\r", "\n", "\r\n"]), max_size=40).map(
    "".join)


def test_lines_start_after_each_kind_of_line_break() -> None:
    assert Lines("a\nb\r\nc\rd", "utf-16").starts.tolist() == [0, 2, 5, 7]


@settings(max_examples=400, deadline=None)
@given(pieces, pieces, st.data())
def test_lines_after_an_edit_are_the_lines_of_the_new_text(text, inserted, data) -> None:
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    new = text[:start] + inserted + text[end:]
    edited = Lines(text, "utf-16").edited(start, end, new)
    assert edited.starts.tolist() == Lines(new, "utf-16").starts.tolist()


def test_a_document_s_lines_follow_its_changes() -> None:
    """The lines kept for a document (found again around each edit) are its text's."""
    doc = TextDocument("file:///a.py", "x = 1\r\ny = 2\r\n")
    for (line, start, end), text in [((1, 0, 1), "why"), ((0, 5, 5), "\r"),
                                     ((1, 0, 0), "\n"), ((2, 0, 9), "")]:
        change = types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(line, start), types.Position(line, end)), text=text)
        doc.apply_change(types.TextDocumentContentChangeWholeDocument(apply_change(doc, change)))
        kept = _LINES[doc]
        assert kept.text is doc.source  # the lines found around the edit are the text's
        assert kept.starts.tolist() == Lines(doc.source, "utf-16").starts.tolist()
    assert doc.source == "x = 1\r\n\r\n\r\n"


@settings(max_examples=100, deadline=None)
@given(pieces, pieces, st.data())
def test_offsets_and_positions_are_python_integers_after_edits(text, inserted, data) -> None:
    """Line starts are kept in an array of int64 (documents.Lines); what leaves it is an
    int, as lsprotocol's Position takes (it refuses numpy's integers) and JSON writes."""
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    lines = Lines(text, "utf-16").edited(start, end, text[:start] + inserted + text[end:])
    at = data.draw(st.integers(0, len(lines.text)))
    assume(lines.text[at - 1:at + 1] != "\r\n")  # inside a line break: no position
    position = lines.position(at)
    line_start, line_end = lines.content(position.line)
    offsets = (lines.offset(position, "position"), lines.clamped_offset(position),
               line_start, line_end)
    assert all(type(value) is int for value in (position.line, position.character, *offsets))
    assert lines.offset(position, "position") == at


def test_a_position_inside_a_character_names_the_encoding_positions_count_in() -> None:
    import pytest
    from pygls.exceptions import JsonRpcInvalidParams

    from dlm_lsp.documents import UTF16

    with pytest.raises(JsonRpcInvalidParams, match=r"\(positions count utf-16 code units\)"):
        Lines('s = "😀"', UTF16).offset(types.Position(0, 6), "range start")


def _change(doc: TextDocument, start: tuple[int, int], end: tuple[int, int], text: str) -> str:
    return apply_change(doc, types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(*start), types.Position(*end)), text=text))


def test_a_change_whose_end_comes_before_its_start_replaces_the_range_between_them() -> None:
    """As vscode-languageserver-textdocument takes it (its ends swapped); it was an insert
    at its start, which kept the text the client had replaced."""
    doc = TextDocument("file:///a.py", "def f(x):\n    return x\n")
    assert _change(doc, (1, 12), (1, 4), "pass") == "def f(x):\n    pass\n"
    assert _change(doc, (1, 4), (0, 4), "g(y):\n    ") == "def g(y):\n    return x\n"


@settings(max_examples=300, deadline=None)
@given(pieces, pieces, st.data())
def test_a_change_is_the_same_edit_whichever_end_comes_first(text, inserted, data) -> None:
    doc = TextDocument("file:///a.py", text)
    ends = st.tuples(st.integers(0, 8), st.integers(0, 8))  # some outside the text: clamped
    a, b = data.draw(ends), data.draw(ends)
    assert _change(doc, b, a, inserted) == _change(doc, a, b, inserted)
