"""Holes written in a document: the marker text the user asks the server to fill.

Holes are filled one at a time, left to right, so that each hole is conditioned
on everything around it, including the fills of the holes before it.  The
edits are still reported in the coordinates of the original text, which is
what the editor applies them to.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def find_holes(text: str, marker: str) -> list[tuple[int, int]]:
    """Character ranges (start, end) of every occurrence of `marker`, in order."""
    holes, at = [], text.find(marker)
    while marker and at != -1:
        holes.append((at, at + len(marker)))
        at = text.find(marker, at + len(marker))
    return holes


@dataclass
class HoleFilling:
    """The text as holes are filled in turn, and the fills in original coordinates."""

    text: str
    shift: int = 0
    fills: list[tuple[int, int, str]] = field(default_factory=list)  # original (start, end, fill)

    def current(self, hole: tuple[int, int]) -> tuple[int, int]:
        """Where an original hole lies in the text as filled so far."""
        return hole[0] + self.shift, hole[1] + self.shift

    def accept(self, hole: tuple[int, int], fill: str) -> None:
        """Put `fill` in place of `hole` (holes must be accepted left to right).  A fill of
        whitespace alone (the model wrote no code there) takes the marker out and adds
        nothing: its blanks, written after the indentation before a `    <FILL>` line's
        marker, left the line eight spaces that the user's editor then shows as trailing
        whitespace to clean up."""
        fill = fill if fill.strip() else ""
        start, end = self.current(hole)
        self.text = self.text[:start] + fill + self.text[end:]
        self.shift += len(fill) - (end - start)
        self.fills.append((hole[0], hole[1], fill))
