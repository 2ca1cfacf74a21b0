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
"""

from __future__ import annotations

from dataclasses import dataclass

from dlm_lsp.models.tokenizer import Tokenizer


@dataclass(frozen=True)
class SpanLayout:
    """Token layout of one infill: prefix ids, masked positions, suffix ids."""

    prefix_ids: list[int]
    n_masked: int
    suffix_ids: list[int]
    head: str = ""  # prefix characters moved into the span, which the fill must start with

    @property
    def span_start(self) -> int:
        """Index of the first masked position in the sequence."""
        return len(self.prefix_ids)

    @property
    def span_end(self) -> int:
        """Index one past the last masked position."""
        return len(self.prefix_ids) + self.n_masked

    def sequence(self, mask_id: int) -> list[int]:
        """The full input sequence with the span masked."""
        return self.prefix_ids + [mask_id] * self.n_masked + self.suffix_ids


def _last_pretoken_start(tokenizer: Tokenizer, text: str) -> int:
    """Character offset where the tokenizer's last pre-token (regex word) of `text` starts."""
    pre = tokenizer.backend.pre_tokenizer
    if pre is None or not text:
        return len(text)
    pieces = pre.pre_tokenize_str(text)
    return pieces[-1][1][0] if pieces else len(text)


def build_layout(tokenizer: Tokenizer, prefix: str, suffix: str, n_masked: int,
                 max_context: int, move_head: bool = True) -> SpanLayout:
    """Tokenize prefix and suffix around `n_masked` masked positions.

    The prefix's last pre-token becomes the head (see module docstring) and its
    positions are added to the span.  Context is cropped to `max_context`
    tokens, giving the prefix up to two thirds when both sides are long.
    `move_head=False` keeps the prefix whole, for a head that no vocabulary
    entry can start (the sampler could not reproduce it).
    """
    cut = _last_pretoken_start(tokenizer, prefix) if move_head else len(prefix)
    head = prefix[cut:]
    prefix_ids = tokenizer.encode(prefix[:cut]) if cut else []
    suffix_ids = tokenizer.encode(suffix) if suffix else []
    head_tokens = len(tokenizer.encode(head)) if head else 0

    budget = max(0, max_context)
    keep_suffix = min(len(suffix_ids), max(budget - len(prefix_ids), budget // 3))
    keep_prefix = min(len(prefix_ids), budget - keep_suffix)
    prefix_ids = prefix_ids[len(prefix_ids) - keep_prefix:]
    suffix_ids = suffix_ids[:keep_suffix]
    return SpanLayout(prefix_ids, n_masked + head_tokens, suffix_ids, head)


def allowed_head_tokens(token_texts: list[str], remaining: str) -> list[int]:
    """Ids whose text continues the unreproduced head `remaining` correctly.

    A token may either cover all of `remaining` (and go on with the fill) or be
    a non-empty piece of its start, leaving the rest to the next position.
    """
    return [i for i, t in enumerate(token_texts)
            if t and (t.startswith(remaining) or remaining.startswith(t))]
