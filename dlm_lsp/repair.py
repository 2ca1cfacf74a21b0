"""Syntax-guided repair: re-mask only the tokens a syntax error points at.

A diffusion model writes every position of a span in parallel, so one bad token
(an unclosed bracket, a stray `:`) can make an otherwise good fill invalid.  An
autoregressive model could only start over; a masked-diffusion model can mask
the few tokens that overlap the new ERROR / MISSING nodes (plus a margin, since
the cause often sits just before the place the parser noticed it) and denoise
them again with everything else in the span as context.  The engine does this
for up to `rounds` rounds, and when no candidate is valid after that it retries
once strictly left to right (`fallback`), on spans of at most `fallback_max_tokens`.
The rounds also re-mask, with the same margin, the tokens whose bytes make no whole
character (see `dlm_lsp/models/tokenizer.py`) or hold a control character the fill
leaves out (`dlm_lsp/characters.py`), where the fill shows them.
"""

from __future__ import annotations

import bisect
import keyword
from dataclasses import dataclass

from dlm_lsp.models.tokenizer import Tokenizer

# Which path produced a candidate: the first denoising, a repair round, the
# left-to-right retry, the rest of a fill the user is typing along (recent.py), or a pass
# begun with the binding the code below the span needs (passes.InfillRun.bind_hint), or
# where the best fill was blank (or a bare `return`), one begun with the `return` a
# function must end with or the header of the block below (passes.InfillRun.blank_hint),
# or one begun with the local a loop around the span is there to update
# (passes.InfillRun.tally_hint), or one that reads a value the function has (a local
# worked out above, a parameter) and reads nowhere (passes.InfillRun.value_hint).
DIFFUSION, REPAIR, LEFT_TO_RIGHT, REUSED = "diffusion", "repair", "left-to-right", "reused"
BINDING, RETURN, HEADER, TALLY, VALUE = "binding", "return", "header", "tally", "value"


@dataclass(frozen=True)
class RepairConfig:
    """How hard the engine tries to turn an invalid fill into a valid one."""

    rounds: int = 2  # repair rounds in all, across candidates; 0 turns repair off
    margin: int = 2  # extra tokens re-masked on each side of an error
    fallback: bool = True  # when nothing is valid, retry once left to right ...
    # ... on spans this short.  The retry spends a forward pass per token: on the 48-token
    # spans of multi-line fills it doubled their time and rescued 3 of 124 invalid fills of
    # the shipped model (README, Benchmarks: the left-to-right retry).
    fallback_max_tokens: int = 16


def token_offsets(tokenizer: Tokenizer, ids: list[int],
                  leave_out: frozenset[str] = frozenset()) -> list[int]:
    """Character offset where each token's text starts in decode(ids, leave_out), plus
    the end.

    Decoding prefixes (not summing token lengths) keeps the offsets right for
    byte tokens that only together make one character.
    """
    return [len(tokenizer.decode(ids[:i], leave_out)) for i in range(len(ids) + 1)]


def positions_to_remask(offsets: list[int], used: int, protected: int,
                        errors: list[tuple[int, int]], n: int, margin: int) -> list[int]:
    """Span positions to mask again so that the errors' text is written anew.

    `offsets` are the token offsets (`token_offsets`) of the span's first `used`
    tokens (the content before the pad tail), in the coordinates of the decoded
    span; `errors` are character ranges in the same coordinates, clipped by the
    caller to where they touch the fill.  Positions before `protected` (the
    head) never change.  An error at or past the end of the content also opens
    the first pad positions, so a fill that stopped too early can grow.
    """
    end = offsets[used]
    chosen: set[int] = set()
    for a, b in errors:
        a, b = min(max(a, 0), end), min(max(b, a), end)
        hit = [i for i in range(used) if offsets[i] < max(b, a + 1) and offsets[i + 1] > a]
        if not hit:  # an empty range between tokens, or past the content
            hit = [max(0, min(used - 1, next((i for i in range(used) if offsets[i] >= a), used)))]
            if a >= end:
                hit.append(used)
        for i in range(min(hit) - margin, max(hit) + margin + 1):
            if protected <= i < n:
                chosen.add(i)
    return sorted(chosen)


def culprits(offsets: list[int], used: int, protected: int, errors: list[tuple[int, int]],
             ids: list[int]) -> list[tuple[int, int]]:
    """(position, token id) of the token each error starts in, for the next round to avoid.

    Re-masking alone often gives the rejected text back: the context around the
    masked positions is what it was, and the model is as sure as before (a `#`
    after `x = ` is this bootstrap model's favourite).  An error at or past the
    end of the content is blamed on the last content token (a dangling `.` or
    operator).  Coordinates as in `positions_to_remask`; positions before
    `protected` are never blamed (the engine passes 0: the token that carries the
    head may be at fault, and it is then written again with the head spelled anew).
    """
    if used == 0:
        return []
    found: list[tuple[int, int]] = []
    end = offsets[used]
    for a, _ in errors:
        if a >= end:
            i = used - 1
        else:
            i = max(0, bisect.bisect_right(offsets, max(a, 0), 0, used) - 1)
        if i >= protected and (i, ids[i]) not in found:
            found.append((i, ids[i]))
    return found


def spelled_keywords(tokenizer: Tokenizer, blamed: list[tuple[int, int]],
                     names: tuple[str, ...]) -> list[tuple[int, int]]:
    """The blamed tokens that spell, whole, a keyword among a check's `names`.

    Only four checks name keywords, each for a word that is wrong where it stands,
    whatever follows it: the `return` above code it leaves dead (python_reach), the
    `del` of a name the code below reads (python_order), the `yield` that makes a
    function returning values a generator (python_yields), the `True` or `False` that
    fixes a function's answer or a loop's (python_predicates); the others name
    names of the code.  So a repair round may not write that keyword there again, from
    the first round on: shown the context that chose it, the first round wrote `return
    results[0]` once more where `results.pop(0)` belonged (HumanEval/46).
    A name's token is not banned so soon: the right name may begin with it (`b` for the
    rejected `bb`), and a rejected call may be the call, not the name (`l(0)` for `l[0]`).
    """
    words = {name for name in names if keyword.iskeyword(name)}
    if not words:
        return []
    return [(i, token) for i, token in blamed if tokenizer.decode([token]).strip() in words]


def raw_offset(raw: str, shown: str, offset: int) -> int:
    """Where character `offset` of `shown` was in `raw`, the fill as the model wrote it.

    The offered fill differs from the model's text only in the leading
    whitespace of its lines (re-indentation) and by being cut short
    (truncation to whole units); lines correspond one to one.  Offsets past
    the shown text map past the end of the raw one (clamped to it).
    """
    if offset <= 0:
        return offset
    line = shown.count("\n", 0, offset)
    column = offset - (shown.rfind("\n", 0, offset) + 1)
    raw_lines, shown_lines = raw.split("\n"), shown.split("\n")
    if line >= len(raw_lines) or line >= len(shown_lines):
        return len(raw) + max(0, offset - len(shown))
    shown_indent = len(shown_lines[line]) - len(shown_lines[line].lstrip(" \t"))
    raw_indent = len(raw_lines[line]) - len(raw_lines[line].lstrip(" \t"))
    column = min(column, raw_indent) if column < shown_indent else (
        column - shown_indent + raw_indent)
    return sum(len(t) + 1 for t in raw_lines[:line]) + min(column, len(raw_lines[line]))


_PAIRS = {")": "(", "]": "[", "}": "{"}
_CLOSERS = {opener: closer for closer, opener in _PAIRS.items()}


def _left_open(text: str) -> tuple[list[tuple[str, int]], str | None]:
    """The brackets `text` opens and never closes, with their offsets, and the quote of
    a string it leaves open (None), read roughly: quotes skip brackets."""
    stack: list[tuple[str, int]] = []
    quote = None
    for i, ch in enumerate(text):
        if quote is not None:
            if ch == quote and text[i - 1] != "\\":
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            stack.append((ch, i))
        elif ch in _PAIRS and stack and stack[-1][0] == _PAIRS[ch]:
            stack.pop()
    return stack, quote


def unmatched_openers(text: str) -> list[int]:
    """Offsets of the brackets `text` opens and never closes (quotes skipped, roughly).

    A parser notices a missing `)` only where the code ends, far from the `(`
    that caused it; repair then re-masks the opener too.
    """
    return [i for _, i in _left_open(text)[0]]


def closing(text: str) -> str:
    """What closes the string and the brackets `text` leaves open, innermost first: how
    a fill written after `text` mends an error reported at an opener."""
    stack, quote = _left_open(text)
    return (quote or "") + "".join(_CLOSERS[ch] for ch, _ in reversed(stack))
