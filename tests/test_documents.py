"""Specification of dlm_lsp.documents: LSP lines, and finding them again after an edit."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace import TextDocument

from dlm_lsp import documents
from dlm_lsp.documents import _LINES, Lines, apply_change, document_name

# texts of letters, blanks and every kind of line break, so that edits join and split them
pieces = st.lists(st.sampled_from(["a", "é", "😀", " ", "\r", "\n", "\r\n"]), max_size=40).map(
    "".join)


def test_lines_start_after_each_kind_of_line_break() -> None:
    assert Lines("a\nb\r\nc\rd", "utf-16").starts.tolist() == [0, 2, 5, 7]


@settings(max_examples=400, deadline=None)
@given(st.one_of(pieces, st.lists(st.sampled_from(["a", "é", "😀", "\ud800", " ", "\n"]),
                                  max_size=40).map("".join)))
def test_a_line_starts_after_a_line_feed_or_a_carriage_return_alone(text) -> None:
    """Texts without a carriage return are scanned another way (numpy, for speed),
    ASCII or not: every kind of text must give the same starts."""
    expected = [0] + [i + 1 for i, c in enumerate(text)
                      if c == "\n" or (c == "\r" and text[i + 1:i + 2] != "\n")]
    assert Lines(text, "utf-16").starts.tolist() == expected


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


class _Reading:
    """A spy on a module function of dlm_lsp.documents: the lengths of the texts it read."""

    def __init__(self, monkeypatch, name: str) -> None:
        self.lengths: list[int] = []
        real = getattr(documents, name)

        def spy(text, *args):
            self.lengths.append(len(text))
            return real(text, *args)
        monkeypatch.setattr(documents, name, spy)


BUNDLE = "".join(f"function a{k}(t){{return t+{k}}}" for k in range(100_000))  # 3 MB, a line


def test_a_position_in_a_line_of_megabytes_is_read_from_the_line_s_start_to_it(
        monkeypatch) -> None:
    """A minified bundle is one line: a position was read from the whole line, twice, for
    each end of each keystroke's range (0.2-0.3 s of each didChange)."""
    units, index = _Reading(monkeypatch, "_units"), _Reading(monkeypatch, "_index")
    for encoding in ("utf-8", "utf-16", "utf-32"):
        lines = Lines("é = 1\n" + BUNDLE, encoding)
        assert lines.offset(types.Position(1, 1000), "position") == 6 + 1000
        assert lines.clamped_offset(types.Position(1, 2000)) == 6 + 2000
    assert max(units.lengths + index.lengths) <= 2000


def test_an_edit_in_a_line_of_megabytes_scans_only_the_edit_for_line_breaks(monkeypatch) -> None:
    """The lines after an edit were found by scanning the lines around it, all 3 MB of a
    bundle's for each keystroke."""
    scanned: list[int] = []

    class Scanning:
        def __init__(self, pattern) -> None:
            self.pattern = pattern

        def finditer(self, text, pos=0, endpos=None):
            scanned.append((len(text) if endpos is None else endpos) - pos)
            return self.pattern.finditer(text, pos, len(text) if endpos is None else endpos)
    for name in ("_LINE_BREAK", "_BREAK_CHARACTER"):
        if hasattr(documents, name):
            monkeypatch.setattr(documents, name, Scanning(getattr(documents, name)))
    text, at = "x = 1\n" + BUNDLE + "\n", 6 + len(BUNDLE) // 2
    lines = Lines(text, "utf-16")
    scanned.clear()
    new = text[:at] + "\n  " + text[at:]
    edited = lines.edited(at, at, new)
    assert edited.starts.tolist() == [0, 6, at + 1, len(new)]
    assert max(scanned) <= 10


@pytest.mark.parametrize(("uri", "name"), [
    ("file:///work/src/hello.py", "hello.py"),
    ("file:///work/my%20code/a%20b.py", "a b.py"),
    ("untitled:Untitled-1", "Untitled-1"),
    ("vscode-notebook-cell://127.0.0.1:18431/tmp/ws/circles.ipynb#W0sdnNjb2Rl",
     "this cell of circles.ipynb"),
    ("vscode-notebook-cell:/tmp/ws/circles.ipynb#W1", "this cell of circles.ipynb"),
    ("file:///", "file:///"),
])
def test_a_message_names_a_document_as_its_user_knows_it(uri, name):
    assert document_name(uri) == name
