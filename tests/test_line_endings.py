"""Specification of dlm_lsp.line_endings: the model sees `\n`, fills go back as the file's."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dlm_lsp.line_endings import ending_near, normalize


def test_a_file_with_newlines_is_left_as_it_is() -> None:
    text = "a = 1\nb = 2\n"
    lines = normalize(text, 6, 7)
    assert (lines.text, lines.start, lines.end, lines.ending) == (text, 6, 7, "\n")
    assert lines.restore("x\ny") == "x\ny"


@pytest.mark.parametrize("ending", ["\r\n", "\r"])
def test_other_endings_become_newlines_and_the_span_moves_with_them(ending: str) -> None:
    text = ending.join(["def f():", "    ", "x = 1", ""])
    at = text.index("    ") + 4
    lines = normalize(text, at, at)
    assert lines.text == "def f():\n    \nx = 1\n" and lines.ending == ending
    assert lines.text[:lines.start] == "def f():\n    "
    assert lines.restore("return 1\n    ") == "return 1" + ending + "    "


def test_a_selection_keeps_its_text() -> None:
    text = "a = 1\r\nb = [1,\r\n  2]\r\nc = 3\r\n"
    start, end = text.index("b"), text.index("c")
    lines = normalize(text, start, end)
    assert lines.text[lines.start:lines.end] == "b = [1,\n  2]\n"


def test_in_a_file_of_mixed_endings_the_span_s_own_line_decides() -> None:
    text = "a = 1\r\nb = 2\nc = 3\r\n"
    assert ending_near(text, text.index("b"), text.index("b")) == "\n"
    assert ending_near(text, text.index("c"), text.index("c")) == "\r\n"
    assert ending_near("x = 1\r\ny", 9, 9) == "\r\n"  # the last line: the break before it
    assert ending_near("x", 0, 1) == "\n"


_ALPHABET = st.sampled_from(["\r", "\n", "\r\n", "a", " "])


@given(st.lists(_ALPHABET, max_size=12).map("".join), st.data())
def test_on_the_last_line_the_ending_is_the_last_whole_break_before_the_span(text, data):
    """Found from the end (a fill on a 10 MB file's last line once listed every break of
    it): the same as the last break a scan of the text before the span finds."""
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    breaks = re.findall(r"\r\n|\r|\n", text[:start])
    after = re.search(r"\r\n|\r|\n", text[end:])
    want = after.group() if after else (breaks[-1] if breaks else "\n")
    assert ending_near(text, start, end) == want


def test_a_byte_order_mark_is_left_out_and_the_span_moves_with_it() -> None:
    text = "\ufeffa = 1\r\nb = 2\r\n"
    start = text.index("b")
    lines = normalize(text, start, start + 1)
    assert lines.text == "a = 1\nb = 2\n"
    assert lines.text[lines.start:lines.end] == "b"
    assert lines.restore("c\nd") == "c\r\nd"  # the mark is not the fill's


def test_a_span_that_takes_in_the_byte_order_mark_writes_it_back() -> None:
    """A selection of the whole file, mark included, is replaced by the fill: the file
    keeps its mark in front of it, and a cursor before the mark gets none of its own."""
    text = "\ufeffx = 1\n"
    lines = normalize(text, 0, len(text))
    assert (lines.text, lines.start, lines.end) == ("x = 1\n", 0, 6)
    assert lines.restore("y = 2\n") == "\ufeffy = 2\n"
    assert normalize(text, 0, 0).restore("z") == "z"
    assert normalize(text, 1, 1).restore("z") == "z"
