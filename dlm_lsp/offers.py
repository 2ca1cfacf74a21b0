"""The suggestions last offered in each document, to tell a request made right after the
user accepted one, which needs no fill.

Accepting a suggestion (ghost text with Tab, the dlm completion item with Enter) inserts
the fill at the cursor and leaves the cursor at its end, and the editor asks there again
at once: VS Code for ghost text after the accepted text, and, while the dlm item is only
selected in its suggest widget, for ghost text after the item's text
(`selectedCompletionInfo`), a fill of the same place before anything is accepted.  A fill
there asks the model for the middle between the same prefix and suffix that it has just
answered: the accepted fill, if the model ended it before the span did (the span's tail
was padding), is the whole middle as the model sees it.  Measured with the shipped model
(`benchmarks/accepted_fills.py`) on 40 held-out lines and 20 HumanEval multi-line tasks,
ghost text at a line's start and after its first 3 characters: every one of the 56 fills
offered ended before its span (a pad written, `Candidate.ended`: measured again so on
2026-12-03, after the first count, by `used` against the span's length, had taken a fill
for ended wherever a head shared its span); the fill made after it offered nothing
(whitespace, or rejected) in 31, and otherwise text such as `(`, `. self`, `.assertEqual`
or `#` lines, never the rest of the canonical middle (which the first fills, from this
small model, never were either).  Those 56 fills took 27 s on one core, against 124 s for
all 120 first fills (measured again: 49 s against 204 s, 2-core VM loaded by other jobs).
Such a request is answered with no suggestion and no fill.  A fill that used its whole
span may have been cut short by it: the fill after it continues it, and is made as
before.  The user's own requests (`dlm/infill`) are never held back, nor is ghost text
the user asks for on purpose (VS Code's Alt+\\, `Invoked`), and any edit other than the
acceptance (or typing the fill's own start) makes the next request a new place: an edit
that left the text as it was after the acceptance (a space typed and deleted) kept the
place answered with nothing, and so did Alt+\\ there, until the text itself differed.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlm_lsp.results import InfillResult


@dataclass(frozen=True)
class Offer:
    """Fills offered at offset `at` of the text `source`, those the model ended itself."""

    source: str
    at: int
    ended: tuple[str, ...]


class Offers:
    """The last offer per document (URI) whose fills, once accepted, ask for no new one."""

    def __init__(self) -> None:
        self._last: dict[str, Offer] = {}

    def offered(self, uri: str, source: str, at: int, result: InfillResult,
                texts: list[str]) -> None:
        """`texts` (of `result`) were offered at offset `at` of `source`: keep those the
        model ended before their span ended, replacing the document's earlier offer.  A
        rest reused from recent fills (the user typed the start of a fill, `reused`
        "typed") ended if the fill it is the rest of did."""
        earlier = self._last.get(uri)
        ended = []
        for candidate in result.candidates:
            if candidate.text not in texts or candidate.text in ended:
                continue
            if result.reused == "typed":
                whole = earlier is not None and any(
                    fill.endswith(candidate.text) for fill in earlier.ended)
            elif candidate.ended is not None:
                whole = candidate.ended
            else:  # not told (older services): its tokens against the span's
                whole = candidate.used < result.tokens
            if whole:
                ended.append(candidate.text)
        if ended:
            self._last[uri] = Offer(source, at, tuple(ended))
        else:
            self._last.pop(uri, None)

    def accepted(self, uri: str, source: str, at: int) -> bool:
        """Whether `source` is the last offer's text with one of its ended fills inserted
        at its place, and `at` is that fill's end: the editor asks again after the user
        accepted it (or with it selected)."""
        offer = self._last.get(uri)
        if offer is None or source[at:] != offer.source[offer.at:]:
            return False
        if source[:offer.at] != offer.source[:offer.at]:
            return False
        return source[offer.at:at] in offer.ended

    def edited(self, uri: str, source: str) -> None:
        """The document is now `source`: keep its offer only where the edit accepted one
        of its fills or typed that fill's start (a fill reused as typed asks whether the
        fill it is the rest of was ended); any other edit drops it, so the text coming
        back to the accepted state later is a place to fill again."""
        offer = self._last.get(uri)
        if offer is None:
            return
        grown = len(source) - len(offer.source)
        inserted = source[offer.at:offer.at + grown] if grown >= 0 else None
        if (inserted is None or source[:offer.at] != offer.source[:offer.at]
                or source[offer.at + grown:] != offer.source[offer.at:]
                or not any(fill.startswith(inserted) for fill in offer.ended)):
            del self._last[uri]

    def forget(self, uri: str) -> None:
        """A closed document's offer goes with it."""
        self._last.pop(uri, None)
