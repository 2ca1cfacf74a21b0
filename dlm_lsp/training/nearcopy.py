"""Near-copies: files a later run meets edited a little as well as moved.

A model's record of what it trained on and held out (`lineage.SplitRecord`) names
texts by their sha256, so a file that moved keeps its identity and one that changed
by a byte does not: Python 3.12's `test/test_tkinter/test_text.py` is 3.11's
`tkinter/test/test_tkinter/test_text.py` with its imports changed (99.8% alike by
difflib), and a run continuing a 3.11 model on 3.12 decided it by its new path.  This
module gives each file a small sketch from which two files' likeness can be told:

- the file's *shingles* are its runs of `SHINGLE_LINES` consecutive lines, each line
  stripped of its indentation and trailing space, blank and comment lines left out
  (so reindenting or recommenting a file does not make it another);
- its sketch is a MinHash of them: for each of `SLOTS` fixed hash functions, the
  shingle with the least hash, of which `SLOT_BITS` bits are kept (b-bit MinHash).
  Two files agree in a slot with the chance that a shingle drawn from either is in
  both (their Jaccard similarity, J) plus 1/16 for a chance agreement of the bits;
- two files are near-copies when at least `MATCH_SLOTS` of the 16 slots agree.

8 bytes a file (11 of base64 in config.json, as many as its digest), the same
whatever order the files are read in.  At J 0.9 a pair agrees in 12 or more slots
98% of the time, at J 0.8 80%, at J 0.5 4%, and two unrelated files (J near 0) about
once in 10**11 pairs (binomial with 16 slots).  A file with fewer than `MIN_SHINGLES`
distinct shingles has no sketch: too little text to tell an edit from another file
(its exact digest still counts).  Measured on CPython 3.11.7 and 3.12.1: README.md,
"Training, data".
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable

import torch

SHINGLE_LINES = 3
MIN_SHINGLES = 8
SLOTS = 16
SLOT_BITS = 4
SKETCH_BYTES = SLOTS * SLOT_BITS // 8
MATCH_SLOTS = 12

# Fixed odd multipliers and offsets, one pair a slot (from sha256, so that no one chose
# them): a slot orders the shingles by their 64-bit hash times the one plus the other.
_CONSTANTS = [hashlib.sha256(f"dlm-lsp nearcopy slot {i}".encode()).digest()
              for i in range(SLOTS)]
_MUL = torch.tensor([int.from_bytes(c[:8], "little", signed=True) | 1 for c in _CONSTANTS],
                    dtype=torch.int64)
_ADD = torch.tensor([int.from_bytes(c[8:16], "little", signed=True) for c in _CONSTANTS],
                    dtype=torch.int64)
_SHIFTS = torch.arange(SLOTS, dtype=torch.int64) * SLOT_BITS

def shingles(text: str) -> set[bytes]:
    """The file's distinct runs of SHINGLE_LINES normalised lines (see the module)."""
    lines = [s for s in (line.strip() for line in text.splitlines())
             if s and not s.startswith("#")]
    return {"\n".join(lines[i:i + SHINGLE_LINES]).encode("utf-8")
            for i in range(len(lines) - SHINGLE_LINES + 1)}


def jaccard(a: str, b: str) -> float:
    """The two texts' Jaccard similarity of shingles, exactly (what a sketch estimates)."""
    x, y = shingles(a), shingles(b)
    return len(x & y) / max(len(x | y), 1)


def sketch(text: str) -> bytes | None:
    """The text's SKETCH_BYTES sketch, None for one too short to have one."""
    found = shingles(text)
    if len(found) < MIN_SHINGLES:
        return None
    hashes = torch.tensor([int.from_bytes(hashlib.blake2b(s, digest_size=8).digest(),
                                          "little", signed=True) for s in found],
                          dtype=torch.int64)
    order = hashes[:, None] * _MUL + _ADD  # wraps around, as a 64-bit product does
    order = (order ^ (order >> 29)) * _MUL
    first = order.argmin(dim=0)  # each slot's MinHash: the shingle first in its order
    # SLOT_BITS of that shingle's own hash, other bits for each slot
    low = (hashes[first] >> _SHIFTS) & ((1 << SLOT_BITS) - 1)
    return bytes(int(low[i]) | int(low[i + 1]) << 4 for i in range(0, SLOTS, 2))


def agreeing(a: bytes, b: bytes) -> int:
    """How many of the two sketches' slots agree."""
    return sum((x & 15 == y & 15) + (x >> 4 == y >> 4) for x, y in zip(a, b, strict=True))


class SketchIndex:
    """Many files' sketches, to ask whether a file is a near-copy of any of them."""

    def __init__(self, sketches: Iterable[bytes]) -> None:
        self.sketches = frozenset(sketches)
        raw = torch.tensor(list(b"".join(sorted(self.sketches))), dtype=torch.uint8)
        self._slots = torch.stack([raw & 15, raw >> 4], dim=1).reshape(-1, SLOTS)

    def __len__(self) -> int:
        return len(self.sketches)

    def near(self, text_sketch: bytes | None) -> bool:
        """Whether a file of this sketch is a near-copy of one in the index."""
        if text_sketch is None or not self.sketches:
            return False
        if text_sketch in self.sketches:
            return True
        query = torch.tensor(list(text_sketch), dtype=torch.uint8)
        slots = torch.stack([query & 15, query >> 4], dim=1).reshape(SLOTS)
        return bool(((self._slots == slots).sum(dim=1) >= MATCH_SLOTS).any())


def packed(sketches: Iterable[bytes]) -> str:
    """Sketches as config.json keeps them: sorted, end to end, base64."""
    return base64.b64encode(b"".join(sorted(set(sketches)))).decode("ascii")


def unpacked(text: str) -> frozenset[bytes]:
    raw = base64.b64decode(text)
    return frozenset(raw[i:i + SKETCH_BYTES] for i in range(0, len(raw), SKETCH_BYTES))
