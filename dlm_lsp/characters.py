"""The characters a fill may write: no control character (nor bidirectional control)
the model was not shown.

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

The invisible bidirectional controls (embeddings, overrides and isolates, U+202A-U+202E
and U+2066-U+2069, and the marks U+200E, U+200F and U+061C) follow the same rule.  They
reorder how a line is shown without changing what the compiler reads, so code that
reads as a comment can run ("Trojan Source", CVE-2021-42574); a fill must not bring one
the user did not have.  A document that holds one (a string of Arabic or Hebrew text)
may get it again.
"""

from __future__ import annotations

KEPT = frozenset("\t\n")  # the control characters code is made of: always written
CONTROLS = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) - KEPT
BIDI = frozenset(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                  0x200E, 0x200F, 0x061C])
UNSEEN = CONTROLS | BIDI  # what a fill writes only where the model was shown it


def left_out(seen: str, also: frozenset[str] = frozenset()) -> frozenset[str]:
    """The characters a fill written after `seen` (what the model was shown) leaves out:
    the control and bidirectional characters, and `also`, that `seen` does not hold."""
    return (UNSEEN | also).difference(seen)


def without(text: str, chars: frozenset[str]) -> str:
    """`text` without the characters in `chars`."""
    if chars.isdisjoint(text):  # the common case: nothing to leave out
        return text
    return "".join(ch for ch in text if ch not in chars)
