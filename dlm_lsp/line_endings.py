"""Line endings: the model sees `\n` only; a fill goes back with the document's own.

Models are trained on text whose lines end in `\n` (ours on the standard library,
the published ones on code from the web, almost all of it so).  A Windows file's
`\r\n` is a token sequence the model rarely saw: measured on the shipped model,
fills at three blank lines of a `\r\n` Python file (three candidates each) were
valid 0 of 9 times against 4 of 9 for the same file with `\n` (2026-11-30; that file
was not kept: benchmarks/line_endings.py measures a module of its own, where the `\r\n`
text as it was gave 4 valid fills of 9 against 3 for `\n`, 3 of 9 with bare `\n`
breaks).  Its
fills also came back with bare `\n`, which would
leave the user's file with mixed endings.  So the engine fills the text with `\n`
and writes the fill's line breaks back as the document's (old Mac `\r` files too,
which the length policy would otherwise read as one long line).

A byte-order mark at the start of the text (U+FEFF, which `dlm-lsp fill` keeps and a
client may send) is left out the same way: the model never saw one, the length policy
read it as code before a hole on the first line (a single-line fill where a multi-line
one was due), and CPython's check blamed the fill after it for an "invalid
non-printable character" (`x = <FILL>` on a first line: 18 steps, 2 repair rounds and
the left-to-right retry, 582 ms; 3 steps and 137 ms since, as without the mark; the
2-core EPYC VM, 2026-12-06).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from dlm_lsp.results import InfillRequest, InfillResult

_BREAK = re.compile(r"\r\n|\r|\n")
BOM = "\ufeff"


@dataclass(frozen=True)
class Normalized:
    """A document with `\n` line breaks, the span's offsets in it, and the ending its
    fills are written back with."""

    text: str
    start: int
    end: int
    ending: str
    # the span takes in the document's byte-order mark, which the fill then writes back
    bom: bool = False

    def restore(self, fill: str) -> str:
        """A fill (or a draft) with the document's line ending (and its byte-order mark,
        where the span replaces it)."""
        fill = fill if self.ending == "\n" else fill.replace("\n", self.ending)
        return BOM + fill if self.bom else fill


def ending_near(text: str, start: int, end: int) -> str:
    """The line ending of the span's own line: the first break at or after `end`, else
    the last before `start`, else `\n` (a file's endings are seldom mixed, but where
    they are, the span's neighbourhood decides)."""
    after = _BREAK.search(text, end)
    if after is not None:
        return after.group()
    # the last break before `start`, found from the end: listing every break of the prefix
    # cost a pass over a 10 MB document for a fill on its last line
    last = max(text.rfind("\n", 0, start), text.rfind("\r", 0, start))
    if last < 0:
        return "\n"
    if text[last] == "\n" and last > 0 and text[last - 1] == "\r":
        return "\r\n"
    return text[last]


def _with_newlines(text: str) -> str:
    """`text` with every line break as `\n`."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize(text: str, start: int, end: int) -> Normalized:
    """`text` with every line break as `\n` and no byte-order mark, and [start, end)
    moved with it (a `\r\n` before an offset is one character shorter)."""
    bom = False
    if text.startswith(BOM):
        bom = start == 0 < end  # replaced by the fill: written back in front of it
        text, start, end = text[1:], max(start - 1, 0), max(end - 1, 0)
    if "\r" not in text:
        return Normalized(text, start, end, "\n", bom)
    ending = ending_near(text, start, end)
    return Normalized(_with_newlines(text),
                      start - text.count("\r\n", 0, start), end - text.count("\r\n", 0, end),
                      ending, bom)


def for_the_model(req: InfillRequest) -> tuple[InfillRequest, Normalized]:
    """`req` with `\n` line breaks (its drafts shown with the file's own), and what
    `restored` needs to give its fills the file's line breaks back."""
    lines = normalize(req.text, req.start, req.end)
    if lines.text is req.text and "\r" not in req.before and "\r" not in req.after:
        return req, lines
    draft = req.on_draft
    return replace(req, text=lines.text, start=lines.start, end=lines.end,
                   before=_with_newlines(req.before), after=_with_newlines(req.after),
                   on_draft=None if draft is None else (lambda step, steps, text: draft(
                       step, steps, lines.restore(text)))), lines


def restored(result: InfillResult, lines: Normalized) -> InfillResult:
    """`result` with its fills' line breaks as the file's."""
    for candidate in result.candidates:
        candidate.text = lines.restore(candidate.text)
    return result
