"""Lines a Python fill writes twice in a row: a line of the fill that is the code line
right above it, or right below it, to the character (indentation included).

The shipped model, unsure what comes next, often copies the line beside the span: a
multi-line fill of `'one': 1,` four times over, `for key in dict.keys():` under the
same `for`, `return fact` under `return fact`.  Such code parses, reads bound names and
runs; it only does a thing twice, or nothing new.

People almost never write it.  Of the 671,112 pairs of neighbouring code lines in this
VM's standard library (blank and comment lines left out), 1,137 (0.17%) are the same
line twice, nearly all data in tests (`'\\n'`, string tables, `f.close()` in a test of
closing twice).  Of HumanEval-Infilling's 6,848 canonical fills (single- and
multi-line), none writes a line next to the same line.  The shipped model's fills did
so in 12 of 100 multi-line tasks, none of which passed, and in 2 of 200 single-line
tasks (2026-12-06, benchmarks/results of 822a84b and 0bbc493).

So a fill is rejected, for repair to write that line anew, where a code line holding
some of its text (not only blanks) repeats the code line before it, or the one after
it where that one is the user's.  Lines with no letter or digit (`)`, `]`, a closing
quote) are left alone, as closers may stack.
"""

from __future__ import annotations

import ast
from typing import NamedTuple


class Repeat(NamedTuple):
    """The fill's part of a line that repeats its neighbour: character offsets in the
    source checked, and the line."""

    start: int
    end: int
    line: str


def _code_lines(source: str) -> list[tuple[int, int]]:
    """(start, end) of each line that holds code: not blank, not only a comment, and with
    a letter or digit in it (closers and quotes alone may repeat)."""
    lines, at = [], 0
    for text in source.split("\n"):
        stripped = text.strip()
        if stripped and not stripped.startswith("#") and any(c.isalnum() for c in stripped):
            lines.append((at, at + len(text)))
        at += len(text) + 1
    return lines


def repeated_lines(tree: ast.Module, source: str, low: int, high: int) -> list[Repeat]:
    """The lines of the fill over source[low:high] that repeat a neighbouring code line
    (see the module's docstring), in the order of the text.  `tree` is unused: the check
    reads lines, not statements, and takes the parse only as every check does."""
    del tree
    lines = _code_lines(source)
    found = []
    for i, (a, b) in enumerate(lines):
        own = source[max(a, low):min(b, high)]
        if b < low or a > high or not own.strip():
            continue  # no text of the fill on this line
        text = source[a:b].rstrip()
        before = i > 0 and source[slice(*lines[i - 1])].rstrip() == text
        after = (i + 1 < len(lines) and lines[i + 1][0] >= high
                 and source[slice(*lines[i + 1])].rstrip() == text)
        if before or after:
            found.append(Repeat(max(a, low), min(b, high), text.strip()))
    return found
