"""Specification of dlm_lsp.holes: finding fill markers and filling them left to right."""

from __future__ import annotations

import pytest

from dlm_lsp.holes import HoleFilling, find_holes


def test_find_holes_returns_every_marker_in_order() -> None:
    text = "a = <FILL>\nb = <FILL>\nc = f(<FILL>)\n"
    holes = find_holes(text, "<FILL>")
    assert holes == [(4, 10), (15, 21), (28, 34)]
    assert all(text[s:e] == "<FILL>" for s, e in holes)


def test_find_holes_without_markers_is_empty() -> None:
    assert find_holes("a = 1\n", "<FILL>") == []


def test_find_holes_with_an_empty_marker_is_empty() -> None:
    assert find_holes("a = 1\n", "") == []


@pytest.mark.parametrize(("text", "marker", "holes"), [
    ("????", "??", [(0, 2), (2, 4)]),
    ("???", "??", [(0, 2)]),
    ("aaaaa", "aa", [(0, 2), (2, 4)]),
])
def test_find_holes_never_returns_overlapping_markers(text: str, marker: str,
                                                      holes: list) -> None:
    assert find_holes(text, marker) == holes


def test_adjacent_markers_are_separate_holes() -> None:
    assert find_holes("<FILL><FILL>", "<FILL>") == [(0, 6), (6, 12)]


def test_first_hole_is_where_it_was() -> None:
    filling = HoleFilling("a = <FILL>\n")
    assert filling.current((4, 10)) == (4, 10)


@pytest.mark.parametrize("fills", [("1", "22"), ("a much longer fill", ""), ("", "x"),
                                   ("<FILL>", "y")])
def test_later_holes_are_mapped_after_fills_of_different_lengths(fills: tuple) -> None:
    text = "a = <FILL>\nb = <FILL>\nc = <FILL>\n"
    holes = find_holes(text, "<FILL>")
    filling = HoleFilling(text)
    filling.accept(holes[0], fills[0])
    start, end = filling.current(holes[1])
    assert filling.text[start:end] == "<FILL>"
    filling.accept(holes[1], fills[1])
    start, end = filling.current(holes[2])
    assert filling.text[start:end] == "<FILL>"
    assert filling.text == f"a = {fills[0]}\nb = {fills[1]}\nc = <FILL>\n"


def test_fills_are_recorded_in_original_coordinates() -> None:
    text = "x(<FILL>, <FILL>)\n"
    holes = find_holes(text, "<FILL>")
    filling = HoleFilling(text)
    filling.accept(holes[0], "first")
    filling.accept(holes[1], "2")
    assert filling.fills == [(2, 8, "first"), (10, 16, "2")]


def test_recorded_fills_applied_to_the_original_give_the_filled_text() -> None:
    text = "<FILL> = f(<FILL>)\n<FILL>\n"
    filling = HoleFilling(text)
    for hole, fill in zip(find_holes(text, "<FILL>"), ["name", "", "print(name)\n"],
                          strict=True):
        filling.accept(hole, fill)
    rebuilt = text
    for start, end, fill in reversed(filling.fills):  # editors apply edits to the original
        rebuilt = rebuilt[:start] + fill + rebuilt[end:]
    assert rebuilt == filling.text == "name = f()\nprint(name)\n\n"


def test_a_fill_of_blanks_only_takes_the_marker_out_and_adds_nothing() -> None:
    """The model wrote no code: its blanks after the line's own indentation left the line
    trailing whitespace to clean up (eight spaces under a `    <FILL>` line)."""
    text = "def f():\n    <FILL>\n    return 1\n"
    filling = HoleFilling(text)
    [hole] = find_holes(text, "<FILL>")
    filling.accept(hole, "    \n")
    assert filling.text == "def f():\n    \n    return 1\n"
    assert filling.fills == [(13, 19, "")]


@pytest.mark.parametrize(("fill", "marker", "places"), [
    ('"<FILL>"', "<FILL>", [(25, 31)]),  # valid Python: a string
    ("f(<FILL>, <FILL>)", "<FILL>", [(26, 32), (34, 40)]),
    ("TODO_HOLE", "TODO_HOLE", [(24, 33)]),  # the server's holeMarker, whatever it is
])
def test_a_fill_that_writes_the_hole_marker_is_rejected_where_it_does(fill: str, marker: str,
                                                                      places: list) -> None:
    """The model is shown the other holes of the document (and of a notebook's other
    cells) and copied them: such a fill, applied, put back a hole that the next Fill holes
    took for the user's.  The places are for repair to write anew."""
    from marked import marked_judged

    verdict = marked_judged("def area(r):\n    return ⟦⟧\n", fill, hole_marker=marker)
    assert not verdict.valid
    assert set(places) <= set(verdict.new_ranges)  # beside a syntax error's or a name's
    assert f"fill writes the hole marker {marker}" in verdict.reason


def test_another_marker_than_the_server_s_is_code_like_any_other() -> None:
    from marked import marked_judged

    assert marked_judged("x = ⟦⟧\n", '"<FILL>"', hole_marker="@@").valid


def test_a_rewrite_of_code_that_holds_the_marker_may_keep_it() -> None:
    """`m = "<FILL>"` rewritten was rejected at every fill that kept its string: repair
    could not mend it, and nothing was offered."""
    from dlm_lsp.config import ServerConfig
    from dlm_lsp.passes import judged
    from dlm_lsp.results import InfillRequest
    from dlm_lsp.validation import parsed_document

    text = 'm = "<FILL>"\nprint(m)\n'
    request = InfillRequest(text, 0, text.index("\n"), "python", "file:///m.py")
    document = parsed_document(text, "python")
    assert judged(document, request, 'm = "<FILL>"', ServerConfig()).valid
    assert not judged(document, request, 'm = "<FILL><FILL>"', ServerConfig()).valid


def test_a_fill_rejected_already_keeps_its_places_beside_the_marker_s() -> None:
    """The marker's rejection replaced the syntax's: repair wrote the marker anew and
    left the syntax error for another round."""
    from marked import marked_judged

    both = marked_judged("x = ⟦⟧\n", "(a + <FILL>")
    assert not both.valid and (9, 15) in both.new_ranges  # the marker's
    assert set(both.new_ranges) - {(9, 15)}  # and the syntax error's
    assert "fill writes the hole marker <FILL>" in both.reason
