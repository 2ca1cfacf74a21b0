"""The characters a fill may write: no control character, bidirectional control or
invisible character the model was not shown.

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

So do the characters that draw nothing at all (Unicode's Default_Ignorable_Code_Point:
the zero width space U+200B, the word joiner U+2060, U+FEFF past a file's start, the
soft hyphen U+00AD, the Mongolian vowel separator U+180E, variation selectors, tags,
the Hangul fillers, which are letters).  In an identifier or a string one makes code
that reads right and is not: `is\\u200badmin` is another name than `isadmin` where a
language takes it (JavaScript takes the joiners and the fillers), another key, another
message.

The joiners U+200C and U+200D (ZWNJ, ZWJ) are the same hazard, and also text: Persian
and Indic words need ZWNJ, emoji sequences (a family, a rainbow flag) ZWJ.  They follow
the same rule rather than one that keeps them between two characters they can join: a
file whose strings or comments hold such text holds its joiners, which the model is
shown, so its fills may write them; a file that holds none gets none, and what a user
would miss there is one emoji drawn as its parts.  Which characters join is Unicode data
Python does not carry (Joining_Type, Emoji), and the rule stays a set of characters:
`Tokenizer.broken` names the tokens holding one, whatever their neighbours, and repair
writes those positions again.
"""

from __future__ import annotations

KEPT = frozenset("\t\n")  # the control characters code is made of: always written
CONTROLS = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]) - KEPT
BIDI = frozenset(chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A),
                                  0x200E, 0x200F, 0x061C])
# The other characters that draw nothing: Default_Ignorable_Code_Point (Unicode 15, its
# assigned ones) but the bidirectional controls above.
INVISIBLE = frozenset(chr(c) for c in [
    0x00AD,  # soft hyphen: shown only where a line breaks at it
    0x034F,  # combining grapheme joiner
    0x115F, 0x1160, 0x3164, 0xFFA0,  # Hangul fillers: letters, so they make identifiers
    0x17B4, 0x17B5,  # Khmer inherent vowels
    *range(0x180B, 0x1810),  # Mongolian variation selectors, vowel separator (U+180E)
    *range(0x200B, 0x200E),  # zero width space, non-joiner, joiner
    *range(0x2060, 0x2065),  # word joiner, invisible times, separator, plus; function application
    *range(0x206A, 0x2070),  # deprecated format characters
    *range(0xFE00, 0xFE10),  # variation selectors (U+FE0F: emoji presentation)
    0xFEFF,  # zero width no-break space: a byte order mark anywhere but a file's start
    *range(0x1BCA0, 0x1BCA4),  # shorthand format controls
    *range(0x1D173, 0x1D17B),  # musical symbol format controls
    0xE0001, *range(0xE0020, 0xE0080),  # tags (subdivision flags' emoji sequences)
    *range(0xE0100, 0xE01F0),  # variation selectors supplement
])
UNSEEN = CONTROLS | BIDI | INVISIBLE  # what a fill writes only where the model was shown it


def left_out(seen: str, also: frozenset[str] = frozenset()) -> frozenset[str]:
    """The characters a fill written after `seen` (what the model was shown) leaves out:
    the control, bidirectional and invisible characters, and `also`, that `seen` does
    not hold.  A U+FEFF that opens `seen` is a byte order mark some clients send with a
    file's text (VS Code and Neovim strip it): it says how the file is encoded, so it does
    not license a zero width no-break space in the middle of the fill."""
    return (UNSEEN | also).difference(seen.removeprefix("\ufeff"))


def without(text: str, chars: frozenset[str]) -> str:
    """`text` without the characters in `chars`."""
    if chars.isdisjoint(text):  # the common case: nothing to leave out
        return text
    return "".join(ch for ch in text if ch not in chars)
