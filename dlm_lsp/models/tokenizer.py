"""A thin wrapper over a `tokenizers` tokenizer with what infilling needs.

Infilling has to know where each token starts and ends in the text (so a span
edge that falls inside a token can be handled) and what text each vocabulary
entry stands for (so the first position of a span can be constrained to reproduce
characters moved out of the prefix).  Both Hugging Face fast tokenizers and our
own byte-level BPE expose a `tokenizers.Tokenizer`, so one wrapper serves all.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer as _Backend

MASK_TOKEN = "<|mask|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (PAD_TOKEN, MASK_TOKEN)


class Tokenizer:
    """Encode with character offsets, decode, and look up special tokens."""

    def __init__(self, backend: _Backend):
        self.backend = backend
        # Text that spells a special token ("<|mask|>" in a user's file) is ordinary text:
        # it must never turn into a real mask.  Not stored in tokenizer.json, so set here.
        backend.encode_special_tokens = True

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        """Load a `tokenizer.json`."""
        return cls(_Backend.from_file(str(path)))

    @property
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce, special tokens included."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, without any special tokens added."""
        return self.backend.encode(text, add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids and the (start, end) character range of each in `text`."""
        enc = self.backend.encode(text, add_special_tokens=False)
        return enc.ids, [tuple(o) for o in enc.offsets]

    def decode(self, ids: list[int]) -> str:
        """Text of `ids`, keeping special tokens out and spaces as they are."""
        return self.backend.decode(ids, skip_special_tokens=True)

    def token_id(self, token: str) -> int | None:
        """Id of a special or ordinary token string, or None."""
        return self.backend.token_to_id(token)

    @cached_property
    def token_texts(self) -> list[str]:
        """The text each id decodes to on its own (special tokens decode to '')."""
        return [self.backend.decode([i], skip_special_tokens=True) for i in range(self.vocab_size)]

    @cached_property
    def line_break_ids(self) -> frozenset[int]:
        """The ids whose text holds a line break (where a one-line fill ends)."""
        return frozenset(i for i, t in enumerate(self.token_texts) if "\n" in t)

    @cached_property
    def sorted_texts(self) -> list[tuple[str, int]]:
        """(text, id) of the non-empty token texts, sorted, for prefix searches."""
        return sorted((t, i) for i, t in enumerate(self.token_texts) if t)
