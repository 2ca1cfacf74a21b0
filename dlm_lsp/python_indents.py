"""Where a Python fill's first line may stand: the indentation the code above allows.

A span that starts a line (the prefix ends at a line break: a hole on a line of its
own, whole lines selected, HumanEval's infilling tasks) leaves the model to write the
first line's indentation.  The shipped tokenizer keeps line breaks apart from
indentation and joins a line's last space to its first word (`ĠĠĠ` `Ġif`), so the
model may go straight from the line break to ` if`: a line one space in.  In 11 of 100
multi-line tasks and 4 of 200 single-line ones (oracle length) the fill's first line
stood at 1 or 3 spaces, which Python refuses (`unindent does not match any outer
indentation level`), and repair never wrote that token again: its errors point at the
line's end or the lines below.

Python says which widths a new line may take: after a block's header (`if x:`), any
deeper than the header; otherwise one of the levels open above (a dedent must land on
one).  The tokens that would put the first line anywhere else are barred at its first
position, before any pass writes it; comments and blank lines are free, as Python
leaves their indentation alone.  Where the code above cannot be read for it (inside
a bracket or a string, a line continued with a backslash, tabs, a tokenizer that joins
line breaks to what follows) nothing is barred.
"""

from __future__ import annotations

import functools
import io
import tokenize
from dataclasses import dataclass, replace

import torch

from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.policy import local_text
from dlm_lsp.span import SpanLayout


@dataclass(frozen=True)
class Indents:
    """The widths (in spaces) a new line may start at, as Python reads the code above."""

    levels: frozenset[int] = frozenset({0})  # open levels a line may stay at or return to
    header: int | None = None  # a block's header ends the code above: deeper than it
    floor: int = 0  # the code read starts this far in: narrower widths are not known

    def fits(self, width: int) -> bool:
        if self.header is not None:
            return width > self.header
        return width < self.floor or width in self.levels


def indents_after(before: str) -> Indents | None:
    """The widths a line that follows `before` (code that ends at a line break, or
    nothing) may start at; None where Python would not read that line as a new
    statement of its own (inside a bracket, a string, after a backslash) or the code
    is indented with tabs."""
    if before and not before.endswith("\n"):
        return None
    first = before.lstrip("\n")
    floor = len(first) - len(first.lstrip(" "))
    stack, depth, last = [0], 0, None
    try:
        for token in tokenize.generate_tokens(io.StringIO(before).readline):
            kind = token.type
            if kind == tokenize.INDENT:
                if "\t" in token.string:
                    return None
                stack.append(len(token.string))
            elif kind == tokenize.DEDENT and token.line:  # not the end's: levels still open
                stack.pop()
            elif kind == tokenize.OP:
                depth += (token.string in "([{") - (token.string in ")]}")
            if kind not in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
                last = token
    except (tokenize.TokenError, SyntaxError):  # an open bracket or string; bad indentation
        return None
    if depth:
        return None
    if last is not None and last.type == tokenize.OP and last.string == ":":
        return Indents(frozenset(stack), header=stack[-1], floor=floor)
    return Indents(frozenset(stack), floor=floor)


_FREE, _SPACES, _WORD = 0, 1, 2  # a token's kind as a line's first (`_leads`)


@functools.lru_cache(maxsize=8)  # one a tokenizer, as `span.head_chain` is kept
def _leads(tokenizer: Tokenizer) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Each token's kind as a line's first (`_FREE`: a special token, a line break, a
    comment, a tab; `_SPACES`: spaces only; `_WORD`: spaces, then code) and its spaces;
    None for a tokenizer with a token that joins a line break to more than line breaks
    (`ĊĠĠĠ`): there the position after a line break need not start a line."""
    kinds, widths = [], []
    for text in tokenizer.token_texts:
        if "\n" in text and text.strip("\r\n"):
            return None
        code = text.lstrip(" ")
        widths.append(len(text) - len(code))
        if not text or "\n" in text or code[:1] in ("#", "\t", "\r", "\f"):
            kinds.append(_FREE)
        else:
            kinds.append(_WORD if code else _SPACES)
    return torch.tensor(kinds), torch.tensor(widths)


def barred_at_line_start(tokenizer: Tokenizer, indents: Indents) -> list[int]:
    """The tokens that may not open a line that must fit `indents`: code at a width it
    does not allow, or spaces that neither are one nor one short of one (the next token's
    space makes up the width: `ĠĠĠ` `Ġif`)."""
    leads = _leads(tokenizer)
    if leads is None:
        return []
    kinds, widths = leads
    wide = int(widths.max()) + 2
    fits = torch.tensor([indents.fits(w) for w in range(wide)])
    word = (kinds == _WORD) & ~fits[widths]
    spaces = (kinds == _SPACES) & ~fits[widths] & ~fits[widths + 1]
    return (word | spaces).nonzero().flatten().tolist()


def with_line_start_bars(layout: SpanLayout, tokenizer: Tokenizer, text: str,
                         start: int) -> SpanLayout:
    """`layout` with the tokens `barred_at_line_start` banned at the span's first position
    that starts a line, where the span (at `start` in `text`) starts one: a head of one
    line break takes the first position (its token writes nothing after the break)."""
    if layout.head not in ("", "\n") or (start and text[start - 1] != "\n"):
        return layout
    local = local_text(text, start, start)
    if local is None:
        return layout
    lines, low = local
    indents = indents_after(lines[:start - low])
    if indents is None:
        return layout
    at = len(layout.head)  # the head's one token, when it is a line break
    barred = tuple((at, token) for token in barred_at_line_start(tokenizer, indents))
    return replace(layout, banned=layout.banned + barred) if barred else layout
