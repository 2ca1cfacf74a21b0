"""A thin wrapper over a `tokenizers` tokenizer with what infilling needs.

Infilling has to know where each token starts and ends in the text (so a span
edge that falls inside a token can be handled) and what text each vocabulary
entry stands for (so the first position of a span can be constrained to reproduce
characters moved out of the prefix).  Both Hugging Face fast tokenizers and our
own byte-level BPE expose a `tokenizers.Tokenizer`, so one wrapper serves all.

A byte-level BPE (ours, Qwen's, LLaMA 3's) and a byte-fallback one (`<0xE4>`
tokens) have tokens that are only some bytes of a multi-byte character: `é` can
be two tokens.  A diffusion model commits positions in parallel, so a fill can
hold such a byte with nothing to complete it, and the tokenizers library decodes
it to U+FFFD, which an editor would then write into the user's file.  So `decode`
leaves out the bytes that make no character and `broken` says which tokens held
them (the engine writes those positions again, see `dlm_lsp/passes.py`).  A
U+FFFD that is its own three bytes (EF BF BD, in the user's text) is a character
like any other and stays.  Both also take characters the caller leaves out as if
their bytes were broken: the control characters a fill may not write
(`dlm_lsp/characters.py`).
"""

from __future__ import annotations

import re
from functools import cached_property
from pathlib import Path

from tokenizers import Tokenizer as _Backend
from tokenizers import decoders

from dlm_lsp.characters import without

MASK_TOKEN = "<|mask|>"
PAD_TOKEN = "<|pad|>"
SPECIAL_TOKENS = (PAD_TOKEN, MASK_TOKEN)
_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")  # a byte token of a byte-fallback BPE
_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """`text` as the tokenizers library takes it: with each lone surrogate as U+FFFD.

    JSON may spell a lone surrogate (`"\\ud800"`), and Python reads it as a character of
    its own, which UTF-8 cannot write: tokenizers refused the whole text (TypeError,
    UnicodeEncodeError), and every fill of a document holding one failed.  One character
    for one, so offsets into `text` hold."""
    if text.isascii():
        return text
    return _SURROGATE.sub("\ufffd", text)


def _byte_level_bytes() -> dict[str, int]:
    """The byte each character of a byte-level BPE's vocabulary stands for.

    Byte-level BPE spells every byte as a printable character: the printable
    bytes of Latin-1 as themselves, the other 68 (controls, space, 0x7F-0xA0,
    0xAD) as the characters from U+0100 on, in byte order.
    """
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {chr(b): b for b in printable}
    others = [b for b in range(256) if b not in table.values()]
    table.update({chr(0x100 + n): b for n, b in enumerate(others)})
    return table


def _byte_ranges(text: str, at: int, chars: frozenset[str]) -> list[tuple[int, int]]:
    """The [start, end) byte ranges of the characters in `chars` that `text`, whose UTF-8
    starts at byte `at`, holds."""
    found = []
    for ch in text:
        size = len(ch.encode("utf-8"))
        if ch in chars:
            found.append((at, at + size))
        at += size
    return found


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
        return self.backend.encode(encodable(text), add_special_tokens=False).ids

    def encode_with_offsets(self, text: str) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids and the (start, end) character range of each in `text`."""
        enc = self.backend.encode(encodable(text), add_special_tokens=False)
        return enc.ids, [tuple(o) for o in enc.offsets]

    def decode(self, ids: list[int], leave_out: frozenset[str] = frozenset()) -> str:
        """Text of `ids`, keeping special tokens out and spaces as they are, and leaving
        out the bytes that make no whole character (see the module docstring) and the
        characters in `leave_out`."""
        text = self.backend.decode(ids, skip_special_tokens=True)
        if "\ufffd" not in text:  # the common case: no byte can be broken
            return without(text, leave_out)
        broken = self.broken(ids)
        if not broken:
            return without(text, leave_out)  # each U+FFFD is one the text holds
        if self._byte_level:  # the decoder only joins the tokens' bytes: so can we
            text = b"".join(self.token_bytes[i] for i in ids).decode("utf-8", "ignore")
        else:  # a byte-fallback token is one byte: leaving the broken ones out leaves their bytes
            gone = set(broken)
            text = self.backend.decode([i for k, i in enumerate(ids) if k not in gone],
                                       skip_special_tokens=True)
        return without(text, leave_out)

    def broken(self, ids: list[int], leave_out: frozenset[str] = frozenset()) -> list[int]:
        """Indices in `ids` of the tokens holding bytes that make no whole character
        (a lone lead byte, a continuation byte with no lead) or one of `leave_out`: what
        decode leaves out."""
        pieces = [self.token_bytes[i] for i in ids]
        data = b"".join(pieces)
        bad: list[tuple[int, int]] = []  # [start, end) byte ranges
        at = 0
        while True:
            try:
                whole, wrong = data[at:].decode("utf-8"), None
            except UnicodeDecodeError as exc:  # [start, end): one ill-formed sequence
                whole = data[at:at + exc.start].decode("utf-8")
                wrong = (at + exc.start, at + exc.end)
            if not leave_out.isdisjoint(whole):
                bad += _byte_ranges(whole, at, leave_out)
            if wrong is None:
                break
            bad.append(wrong)
            at = wrong[1]
        if not bad:
            return []
        found, start = [], 0
        for k, piece in enumerate(pieces):
            end = start + len(piece)
            if any(a < end and b > start for a, b in bad):
                found.append(k)
            start = end
        return found

    @cached_property
    def _byte_level(self) -> bool:
        """Whether decoding is joining the tokens' bytes (a byte-level BPE's decoder)."""
        return isinstance(self.backend.decoder, decoders.ByteLevel)

    @cached_property
    def token_bytes(self) -> list[bytes]:
        """The UTF-8 bytes each id stands for (special tokens: none).

        A token whose text is whole characters is its text's bytes; one that decodes
        to U+FFFD on its own is read from its vocabulary entry: a byte-level BPE's
        characters each stand for a byte, a byte-fallback token `<0xNN>` is byte NN.
        (An entry of another kind is taken as its text: no tokenizer we know has one.)
        """
        table = _byte_level_bytes() if self._byte_level else {}
        found = []
        for i, text in enumerate(self.token_texts):
            if "\ufffd" not in text:
                found.append(text.encode("utf-8"))
                continue
            entry = self.backend.id_to_token(i) or ""
            byte = _BYTE_FALLBACK.fullmatch(entry)
            if byte is not None:
                found.append(bytes([int(byte.group(1), 16)]))
            elif entry and all(ch in table for ch in entry):
                found.append(bytes(table[ch] for ch in entry))
            else:
                found.append(text.encode("utf-8"))
        return found

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
    def word_going_on_ids(self) -> frozenset[int]:
        """The ids whose text starts with a letter, digit or underscore: those that, after
        a name, would make it a longer one (`dic` then `_arr`)."""
        return frozenset(i for i, t in enumerate(self.token_texts)
                         if t[:1].isalnum() or t[:1] == "_")

    @cached_property
    def whole_texts(self) -> list[str]:
        """The text each id decodes to on its own, without the bytes that make no whole
        character there: what a token can be trusted to write (a lone byte `0xE4` writes
        nothing, not the U+FFFD a document may hold)."""
        return [t if "\ufffd" not in t else self.decode([i])
                for i, t in enumerate(self.token_texts)]

    @cached_property
    def sorted_texts(self) -> list[tuple[str, int]]:
        """(text, id) of the non-empty whole texts, sorted, for prefix searches."""
        return sorted((t, i) for i, t in enumerate(self.whole_texts) if t)
