"""Building the masked sequence for one infill: prefix, masked span, suffix.

Byte-level BPE joins characters across the edge of a span: a line break with
the indentation after it (`ĊĠĠĠ`), or the start of a word with its end.  A prefix
tokenized on its own therefore ends in a token the model rarely saw in that
place, and the fill starts with a token that would not exist in the finished
text.  We handle the prefix edge explicitly: the last pre-token of the prefix
(the regex word the tokenizer would merge across) is moved into the masked span
as the *head*, and the sampler constrains the first span positions to reproduce
the head exactly, in whatever tokenization the model prefers.  The head is then
cut off the decoded fill, so the fill never duplicates or drops edge characters.

At the suffix edge the common merge is a span that ends at the start of a
non-empty line: in the finished text the span's last line break would join the
next line's indentation.  There the line break is *borrowed*: the model sees the
suffix as that line break plus the next line (`ĊĠĠĠ` as in training), fills
the span without a final line break, and the engine appends the borrowed one.
A suffix that starts mid-word is still tokenized on its own.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass

from dlm_lsp.models.tokenizer import Tokenizer, encodable
from dlm_lsp.repair import token_offsets


@dataclass(frozen=True)
class SpanLayout:
    """Token layout of one infill: prefix ids, masked positions, suffix ids."""

    prefix_ids: list[int]
    n_masked: int  # positions in the span, the head's included
    suffix_ids: list[int]
    head: str = ""  # prefix characters moved into the span, which the fill must start with
    head_tokens: int = 0  # the head's own tokens (span positions it takes when pre-filled)
    init_ids: tuple[int, ...] | None = None  # starting span content (refinement), else masks
    # (span position, token id) pairs never written: a repair does not write again what
    # a check rejected, which greedy decoding of the same context would
    banned: tuple[tuple[int, int], ...] = ()

    @property
    def span_start(self) -> int:
        """Index of the first masked position in the sequence."""
        return len(self.prefix_ids)

    @property
    def span_end(self) -> int:
        """Index one past the last masked position."""
        return len(self.prefix_ids) + self.n_masked

    def sequence(self, mask_id: int) -> list[int]:
        """The full input sequence: the span masked, or as `init_ids` starts it."""
        span = list(self.init_ids) if self.init_ids is not None else [mask_id] * self.n_masked
        return self.prefix_ids + span + self.suffix_ids


def borrowed_line_break(before_end: str, suffix: str) -> str:
    """The line break the model should see at the start of the suffix, or "".

    `before_end` is the text up to the span's end (prefix plus any replaced
    text).  When it ends a line and the suffix starts a non-empty line, the
    span's final line break belongs with the suffix's indentation, so the
    suffix is shown to the model with it and the fill gets it back afterwards.
    """
    if not suffix or suffix[0] in "\r\n" or not before_end.endswith("\n"):
        return ""
    return "\r\n" if before_end.endswith("\r\n") else "\n"


HEAD_TAIL_CHARS = 256  # the first tail of the prefix searched for its last pre-token


def _last_pretoken_start(tokenizer: Tokenizer, text: str) -> int:
    """Character offset where the tokenizer's last pre-token (regex word) of `text` starts.

    Pre-tokenizing the whole prefix cost 3.5 s per fill in the middle of a 10 MB
    document, so only a tail is pre-tokenized.  A tail's first piece may be cut
    by where it starts, and a pre-token can be long (a run of blank lines), so
    the answer is trusted once two tails of different lengths agree on a start
    inside both; a pre-tokenizer splits left to right with at most lookahead,
    so two segmentations that meet stay together, and on code they meet within
    a word or two.  Otherwise the tail grows, up to the whole text.
    """
    pre = tokenizer.backend.pre_tokenizer
    if pre is None or not text:
        return len(text)
    size, previous = HEAD_TAIL_CHARS, None
    while True:
        low = max(0, len(text) - size)
        pieces = pre.pre_tokenize_str(encodable(text[low:]))
        start = low + pieces[-1][1][0] if pieces else len(text)
        if low == 0 or (start > low and start == previous):
            return start
        previous, size = (start if start > low else None), size * 4


# The most characters of the prefix moved into the span as its head.  The head is there
# for the merges a BPE makes across the span's edge, which reach a token or two back (our
# vocabulary's longest token is 64 characters).  A pre-token can be far longer: a run of
# brackets nested thousands deep, of blank lines, of `=`.  Moved whole, its chain took
# time and memory quadratic in its length (27 s and 2 GB at 4,000 `[`), and its tokens
# outgrew the span and the model's sequence; past this, its last characters are the head.
HEAD_MAX_CHARS = 64

CHARS_PER_TOKEN = 16  # far more than code ever takes per token: cropping never cuts context


def context_reach(max_context: int) -> int:
    """The most characters of the prefix (less its head, at most HEAD_MAX_CHARS) and of
    the suffix that a layout with `max_context` tokens of context reads (`_near`): what a
    request to a remote engine carries of a notebook's other cells (`remote.wire`)."""
    return CHARS_PER_TOKEN * max(1, max_context)


def _near(prefix: str, suffix: str, max_context: int) -> tuple[str, str]:
    """The prefix's last lines and the suffix's first lines that could fit the context.

    Tokenizing a 10 MB document whole to keep its last 300 tokens costs seconds,
    so the text is first cut to whole lines within CHARS_PER_TOKEN characters per
    token of context on each side; the token budget then crops exactly.
    """
    chars = context_reach(max_context)
    if len(prefix) > chars:
        start = prefix.find("\n", len(prefix) - chars) + 1
        prefix = prefix[start:] if start > 0 else prefix[len(prefix) - chars:]
    if len(suffix) > chars:
        end = suffix.rfind("\n", 0, chars)
        suffix = suffix[:end + 1] if end >= 0 else suffix[:chars]
    return prefix, suffix


def build_layout(tokenizer: Tokenizer, prefix: str, suffix: str, n_masked: int,
                 max_context: int, move_head: bool = True,
                 max_length: int | None = None) -> SpanLayout:
    """Tokenize prefix and suffix around `n_masked` masked positions.

    The prefix's last pre-token becomes the head (see module docstring), at most its
    last HEAD_MAX_CHARS characters, and its positions are added to the span.  Context
    is cropped to `max_context` tokens, giving the prefix up to two thirds when both
    sides are long.
    `move_head=False` keeps the prefix whole, for a head that no vocabulary
    entry can start (the sampler could not reproduce it).  With `max_length`,
    the context shrinks further so the whole sequence fits the model.
    """
    cut = len(prefix)
    if move_head:
        cut = max(_last_pretoken_start(tokenizer, prefix), len(prefix) - HEAD_MAX_CHARS)
    head = prefix[cut:]
    before, suffix = _near(prefix[:cut], suffix, max_context)
    prefix_ids = tokenizer.encode(before) if before else []
    suffix_ids = tokenizer.encode(suffix) if suffix else []
    head_tokens = len(tokenizer.encode(head)) if head else 0

    budget = max(0, max_context)
    if max_length is not None:
        budget = max(0, min(budget, max_length - n_masked - head_tokens))
    keep_suffix = min(len(suffix_ids), max(budget - len(prefix_ids), budget // 3))
    keep_prefix = min(len(prefix_ids), budget - keep_suffix)
    prefix_ids = prefix_ids[len(prefix_ids) - keep_prefix:]
    suffix_ids = suffix_ids[:keep_suffix]
    return SpanLayout(prefix_ids, n_masked + head_tokens, suffix_ids, head, head_tokens)


def reproducible_layout(tokenizer: Tokenizer, prefix: str, suffix: str, n_masked: int,
                        max_context: int, max_length: int | None = None) -> SpanLayout:
    """`build_layout`, with the prefix kept whole where the head it would move is one no
    vocabulary entry can start (the sampler could not spell it again): the engine's
    layout, and the training probe's (`training.fill_probe`), by one rule."""
    layout = build_layout(tokenizer, prefix, suffix, n_masked, max_context,
                          max_length=max_length)
    if layout.head and not head_chain(tokenizer, layout.head).reproducible:
        layout = build_layout(tokenizer, prefix, suffix, n_masked, max_context,
                              move_head=False, max_length=max_length)
    return layout


def past_head(written: str, head: str, single_line: bool) -> str:
    """A fill's text from what its span decodes to up to its first pad: the head dropped
    (the prefix's edge, written again), cut to one line if asked."""
    if not written.startswith(head):
        return ""  # cannot happen by construction; never duplicate the prefix's edge
    written = written[len(head):]
    return written.split("\n", 1)[0] if single_line else written


def head_positions(tokenizer: Tokenizer, ids: list[int], head: str,
                   leave_out: frozenset[str] = frozenset()) -> int:
    """How many of `ids` (the head and the text after it, tokenized together) hold the
    head's characters: those that start inside it.  Tokenized alone the head can take
    fewer (`\n        ` is one token, but before `return` its last space joins
    ` return`), and a position past those would be taken for the fill's own.  The
    tokens' starts are `repair.token_offsets`, whose last entry is the end."""
    return bisect.bisect_left(token_offsets(tokenizer, ids, leave_out)[:-1], len(head))


def head_only_positions(tokenizer: Tokenizer, ids: list[int], head: str,
                        leave_out: frozenset[str] = frozenset()) -> int:
    """How many of `ids` hold nothing but the head's characters: those that end inside
    it.  A token that finishes the head and goes on (` n` after the head ` `) is the
    fill's too, where `head_positions` counts it as the head's (it must never be
    masked); counted so, a fill of `n` after `return ` said it used no position.  Nor is
    a token that starts at the head's end, though it spells nothing there (a byte of a
    character the next token finishes: `é` after the head ` `)."""
    offsets = token_offsets(tokenizer, ids, leave_out)
    return min(bisect.bisect_left(offsets[:-1], len(head)),
               bisect.bisect_right(offsets[1:], len(head)))


class HeadChain:
    """Which tokens may continue the head, so that it is always reproduced exactly.

    The head may be produced by the model in any tokenization: one token that
    covers all that is left of it (and goes on with the fill), or a token that
    is exactly a piece of its start, leaving the rest to the next position.  A
    piece is allowed only if the rest can still be finished in the positions
    that remain (`min_tokens` is that shortest chain, by dynamic programming),
    so the chain never runs out of span.  A head that no chain of vocabulary
    entries spells (a character split into byte tokens, say) is not
    `reproducible`; the caller then keeps the prefix whole.
    """

    def __init__(self, token_texts: list[str], head: str,
                 ordered: list[tuple[str, int]] | None = None):
        self.head = head
        self.texts = token_texts
        n = len(head)
        by_text: dict[str, list[int]] = {}
        for i, t in enumerate(token_texts):
            if t and len(t) <= n and head.find(t) != -1:
                by_text.setdefault(t, []).append(i)
        ordered = sorted_texts(token_texts) if ordered is None else ordered
        self._covering = [_starting_with(ordered, head[i:]) for i in range(n)]
        self._pieces = [[(j, by_text.get(head[i:j], [])) for j in range(i + 1, n)]
                        for i in range(n)]
        inf = n + 1
        self.min_tokens = [inf] * n + [0]
        for i in range(n - 1, -1, -1):
            best = 1 if self._covering[i] else inf
            for j, ids in self._pieces[i]:
                if ids:
                    best = min(best, 1 + self.min_tokens[j])
            self.min_tokens[i] = best

    @property
    def reproducible(self) -> bool:
        """Whether some chain of tokens spells the head exactly."""
        return self.min_tokens[0] <= len(self.head)

    def allowed(self, done: int, positions_left: int) -> list[int]:
        """Ids that may follow `done` head characters with `positions_left` positions free."""
        if done >= len(self.head) or positions_left < 1:
            return []
        ids = list(self._covering[done])
        for j, piece in self._pieces[done]:
            if piece and self.min_tokens[j] <= positions_left - 1:
                ids.extend(piece)
        return ids

    def advance(self, done: int, text: str) -> int:
        """Head characters reproduced after committing a token with `text`."""
        return len(self.head) if text.startswith(self.head[done:]) else done + len(text)


@functools.lru_cache(maxsize=256)
def head_chain(tokenizer: Tokenizer, head: str) -> HeadChain:
    """The HeadChain of `head` for a tokenizer, built once: the engine checks it, the
    sampler follows it, and the same heads (a line break, an indentation) recur.  It
    reads the tokens' whole texts: a lone byte token decodes to U+FFFD on its own, and
    must not pass for a U+FFFD the head holds."""
    return HeadChain(tokenizer.whole_texts, head, tokenizer.sorted_texts)


def sorted_texts(token_texts: list[str]) -> list[tuple[str, int]]:
    """(text, id) of every non-empty token text, sorted: the index HeadChain searches."""
    return sorted((t, i) for i, t in enumerate(token_texts) if t)


def _starting_with(ordered: list[tuple[str, int]], prefix: str) -> list[int]:
    """Ids of the (sorted) token texts that start with `prefix`."""
    at = bisect.bisect_left(ordered, (prefix, -1))
    ids = []
    while at < len(ordered) and ordered[at][0].startswith(prefix):
        ids.append(ordered[at][1])
        at += 1
    return ids
