"""Recent fills, so a repeated request or a user typing along a suggestion costs nothing.

Editors ask again for what they just asked (a cursor that left and came
back, a second client on the same file), and a user often types the first
characters of the ghost text they were shown.  Two lookups serve both:

* exact: the same model input (the context tokens the model sees, the span
  length, the moved head), the same options and the same language give the same
  fill, since denoising is deterministic for a seed;
* typed along: the new prefix is the old prefix plus the start of the old
  fill, and the suffix and the language are unchanged; the rest of the old fill
  is the answer.

The language (the one a fill is planned, checked and repaired as) is part of both:
a notebook cell filled as Python and opened again as another language, the same
text, got the Python fill back, checked again but written for another language.

Validity is not cached: it depends on the whole document, so the engine checks
a reused fill again (cheap, incremental).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Remembered:
    """What a finished fill leaves behind for later requests."""

    texts: tuple[str, ...]  # the candidates' fills, best first
    scores: tuple[float, ...]
    used: tuple[int, ...]
    paths: tuple[str, ...]
    steps: int
    tokens: int
    ended: tuple[bool | None, ...] = ()  # per candidate, as `Candidate.ended`


@dataclass(frozen=True)
class _Typed:
    prefix: str
    suffix: str
    fill: str
    options: Any
    language: str | None = None


class RecentFills:
    """A small LRU of fills by model input, plus the last fill of each document."""

    def __init__(self, size: int = 64):
        self.size = size
        self._exact: OrderedDict[Any, Remembered] = OrderedDict()
        self._typed: OrderedDict[str, _Typed] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.typed_hits = self.misses = 0

    def get(self, key: Any) -> Remembered | None:
        with self._lock:
            found = self._exact.get(key)
            if found is None:
                self.misses += 1
                return None
            self._exact.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: Any, value: Remembered) -> None:
        with self._lock:
            self._exact[key] = value
            self._exact.move_to_end(key)
            while len(self._exact) > self.size:
                self._exact.popitem(last=False)

    def remember_typed(self, uri: str, prefix: str, suffix: str, fill: str,
                       options: Any, language: str | None = None) -> None:
        """Keep the last insertion into `uri`, written as `language`, for `typed_along`."""
        with self._lock:
            self._typed[uri] = _Typed(prefix, suffix, fill, options, language)
            self._typed.move_to_end(uri)
            while len(self._typed) > self.size:
                self._typed.popitem(last=False)

    def typed_along(self, uri: str, prefix: str, suffix: str, options: Any,
                    language: str | None = None) -> str | None:
        """The rest of the last fill of `uri` if the user typed its start since, else None.

        Only a strict start of the fill counts (something must be left to offer)
        and the text after the cursor, the options and the language must be as they were.
        """
        with self._lock:
            last = self._typed.get(uri)
        if (last is None or last.suffix != suffix or last.options != options
                or last.language != language):
            return None
        if not prefix.startswith(last.prefix) or len(prefix) == len(last.prefix):
            return None
        typed = prefix[len(last.prefix):]
        if not last.fill.startswith(typed) or len(typed) >= len(last.fill):
            return None
        with self._lock:
            self.typed_hits += 1
        return last.fill[len(typed):]

    def forget(self, uri: str) -> None:
        with self._lock:
            self._typed.pop(uri, None)

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.typed_hits + self.misses
        return (self.hits + self.typed_hits) / total if total else 0.0
