"""How close a fill is to the canonical middle: exact match and edit similarity.

Apart from the benchmarks that fill through the engine because training scores fills
too (`training.fill_probe`), on a machine without the engine's tree-sitter.
"""

from __future__ import annotations


def normalise(code: str) -> str:
    """Code without the whitespace around it and without each line's trailing blanks.

    The indentation of inner lines stays significant (it is, in Python); the
    first line's is dropped with the rest of the surrounding whitespace, as
    infilling papers compare, since it may sit in the prefix instead.
    """
    return "\n".join(line.rstrip() for line in code.strip().splitlines())


def exact_match(fill: str, middle: str) -> bool:
    """Whether a fill is the canonical middle, up to whitespace that does not matter."""
    return normalise(fill) == normalise(middle)


def levenshtein(a: str, b: str) -> int:
    """Characters to insert, delete or substitute to turn `a` into `b`."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (char != other)))
        previous = current
    return previous[-1]


def edit_similarity(fill: str, middle: str) -> float:
    """1 - edit distance / longer length, of the normalised texts (1.0: identical).

    Exact match and pass@1 say nothing until a model gets whole lines right; edit
    similarity (the code-completion benchmarks' "ES") still ranks a fill that is
    half right above one that is empty or wrong, so settings can be compared on
    a weak model, and a small gain shows before it crosses into exact matches.
    """
    a, b = normalise(fill), normalise(middle)
    longest = max(len(a), len(b))
    return 1.0 - levenshtein(a, b) / longest if longest else 1.0
