"""The characters a fill may write: no control character the model was not shown.

A byte-level vocabulary has a token for every byte, so a model can write any
control character (Unicode category Cc: U+0000-U+001F, U+007F-U+009F), and random
tiny models do (`\\x10`, `\\x1d`).  Code never wants one it did not already hold: an
editor shows it as a symbol or nothing, most compilers reject it, and the user would
not see what went wrong.  So a fill leaves out the control characters other than
the tab and the line feed, and the engine writes the positions that held them again,
as it does bytes that make no whole character (`Tokenizer.broken`, `dlm_lsp/passes.py`).

Except those the model was shown (the document around the span): a file that holds
form feeds between its pages (the GNU coding standards ask for them in C; Emacs Lisp
files have them) or an ESC in a shell script's colour codes may get another where
its own pattern goes on, and a fill that writes one writes what the file already
writes.  The carriage return is never one of them: the model sees `\\n` line breaks
only and a fill gets the document's own back (`dlm_lsp/line_endings.py`), so a `\\r`
a model writes is always a stray one.
"""

from __future__ import annotations

KEPT = frozenset("\t\n")  # the control characters code is made of: always written
CONTROLS = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) - KEPT


def left_out(seen: str, also: frozenset[str] = frozenset()) -> frozenset[str]:
    """The characters a fill written after `seen` (what the model was shown) leaves out:
    the control characters, and `also`, that `seen` does not hold."""
    return (CONTROLS | also).difference(seen)


def without(text: str, chars: frozenset[str]) -> str:
    """`text` without the characters in `chars`."""
    if chars.isdisjoint(text):  # the common case: nothing to leave out
        return text
    return "".join(ch for ch in text if ch not in chars)
