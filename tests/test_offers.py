"""Which suggestion requests come right after the user accepted a fill (offers.py)."""

from __future__ import annotations

from types import SimpleNamespace

from dlm_lsp.offers import Offers

URI = "file:///work/a.py"
SOURCE = "def f(x):\n    retu\n"
AT = SOURCE.index("retu") + 4


def result(*texts: str, used: int = 3, tokens: int = 16, reused: str = "",
           ended: bool | None = None):
    return SimpleNamespace(tokens=tokens, reused=reused, candidates=[
        SimpleNamespace(text=text, used=used, ended=ended) for text in texts])


def inserted(fill: str, source: str = SOURCE, at: int = AT) -> tuple[str, int]:
    """The document once `fill` was accepted at `at`, and the cursor at its end."""
    return source[:at] + fill + source[at:], at + len(fill)


def test_any_offered_candidate_accepted_is_told():
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x", "rn 1"), ["rn x", "rn 1"])
    assert offers.accepted(URI, *inserted("rn 1"))
    assert offers.accepted(URI, *inserted("rn x"))


def test_a_candidate_not_offered_is_not_taken_for_one():
    """A candidate the syntax check rejected was never shown: text equal to it is typed."""
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x", "rn ("), ["rn x"])
    assert not offers.accepted(URI, *inserted("rn ("))


def test_the_cursor_elsewhere_or_other_text_is_a_new_place():
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x"), ["rn x"])
    text, end = inserted("rn x")
    assert not offers.accepted(URI, text, end - 1)  # inside the fill
    assert not offers.accepted(URI, text + "y = 2\n", end)  # other text after it
    assert not offers.accepted(URI, "#\n" + text, end + 2)  # other text before it
    assert not offers.accepted("file:///work/b.py", text, end)  # another document


def test_a_newer_offer_with_no_fill_ended_replaces_the_older():
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x"), ["rn x"])
    offers.offered(URI, SOURCE, AT, result("rn x", used=16), ["rn x"])
    assert not offers.accepted(URI, *inserted("rn x"))


def test_a_fill_the_model_did_not_end_is_continued_whatever_tokens_it_used():
    """`used` leaves out the head's tokens (`retu` here), which the span's `tokens` count:
    a fill that used its whole span counted fewer, and was taken for one the model ended."""
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x", used=14, ended=False), ["rn x"])
    assert not offers.accepted(URI, *inserted("rn x"))


def test_the_rest_of_a_fill_typed_along_ended_where_the_fill_did():
    """The user typed `r` of `rn x`: the rest, `n x`, comes from recent fills (no span of
    its own, `tokens` 0) and is accepted as the whole fill would be."""
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x"), ["rn x"])
    typed, cursor = inserted("r")
    offers.offered(URI, typed, cursor, result("n x", used=0, tokens=0, reused="typed"), ["n x"])
    assert offers.accepted(URI, *inserted("n x", typed, cursor))


def test_the_rest_of_a_fill_cut_short_by_its_span_is_continued():
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x", used=16), ["rn x"])
    typed, cursor = inserted("r")
    offers.offered(URI, typed, cursor, result("n x", used=0, tokens=0, reused="typed"), ["n x"])
    assert not offers.accepted(URI, *inserted("n x", typed, cursor))


def test_a_closed_document_s_offer_is_forgotten():
    offers = Offers()
    offers.offered(URI, SOURCE, AT, result("rn x"), ["rn x"])
    offers.forget(URI)
    assert not offers.accepted(URI, *inserted("rn x"))


def test_an_edit_that_accepts_a_fill_or_types_its_start_keeps_the_offer():
    for typed in ("", "r", "rn", "rn x"):
        offers = Offers()
        offers.offered(URI, SOURCE, AT, result("rn x"), ["rn x"])
        offers.edited(URI, inserted(typed)[0])
        assert offers.accepted(URI, *inserted("rn x")), typed


def test_any_other_edit_drops_the_offer_even_where_the_text_comes_back():
    """A space typed (then deleted): the text after the deletion is the accepted one,
    and the place is one to fill again."""
    for other in (inserted("rn x ")[0], inserted("rn y")[0], "#\n" + SOURCE, SOURCE[:-1]):
        offers = Offers()
        offers.offered(URI, SOURCE, AT, result("rn x"), ["rn x"])
        offers.edited(URI, other)
        offers.edited(URI, inserted("rn x")[0])
        assert not offers.accepted(URI, *inserted("rn x")), other
