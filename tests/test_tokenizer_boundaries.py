"""Specification of the training tokenizer's boundaries: a text cut at a line start
tokenizes, in its two parts, exactly as it does whole.

That is what infilling needs: the server tokenizes the prefix and the suffix
apart, and the model was trained on whole files.  Plain byte-level BPE fails it
(a line break merges with the indentation after it); the tokenizer every
training run now learns (`split_lines=True`) must pass it on real source.
"""

from __future__ import annotations

import sysconfig
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.span import build_layout
from dlm_lsp.training.data import train_tokenizer

STDLIB = Path(sysconfig.get_paths()["stdlib"])
TRAIN_ON = ("textwrap.py", "argparse.py", "json/encoder.py")
SOURCES = ("ast.py", "dataclasses.py", "difflib.py", "email/utils.py", "functools.py",
           "inspect.py", "pathlib.py", "pprint.py", "shlex.py", "string.py", "tokenize.py")


@cache
def tokenizer(split_lines: bool = True) -> Tokenizer:
    """A small tokenizer of the kind training learns, built once per process."""
    return train_tokenizer([(STDLIB / n).read_text() for n in TRAIN_ON], 1024,
                           split_lines=split_lines)


@cache
def source(name: str) -> str:
    return (STDLIB / name).read_text()


def line_starts(text: str) -> list[int]:
    """Every offset where a line starts (after a line break)."""
    return [i + 1 for i, ch in enumerate(text) if ch == "\n" and i + 1 < len(text)]


@st.composite
def excerpts_and_cuts(draw: st.DrawFn) -> tuple[str, list[int]]:
    """A window of real source (sometimes with CRLF line ends) and line starts to cut at."""
    text = source(draw(st.sampled_from(SOURCES)))
    starts = line_starts(text)
    first = draw(st.integers(0, len(starts) - 80))
    excerpt = text[starts[first]:starts[first + 79]]
    if draw(st.booleans()):
        excerpt = excerpt.replace("\n", "\r\n")
    cuts = draw(st.lists(st.sampled_from(line_starts(excerpt)), min_size=1, max_size=4,
                         unique=True))
    return excerpt, sorted(cuts)


@settings(max_examples=60, deadline=None)
@given(excerpts_and_cuts())
def test_cutting_at_line_starts_keeps_every_token(case: tuple[str, list[int]]) -> None:
    text, cuts = case
    tok = tokenizer()
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert [i for piece in pieces for i in tok.encode(piece)] == tok.encode(text)


def test_plain_byte_level_bpe_does_not_keep_them() -> None:
    text = "def f(x):\n    return x\n"
    cut = text.index("    return")
    for split_lines, same in ((True, True), (False, False)):
        tok = tokenizer(split_lines)
        assert (tok.encode(text[:cut]) + tok.encode(text[cut:]) == tok.encode(text)) is same


def test_each_line_break_stands_alone() -> None:
    tok, text = tokenizer(), "if x:\n\n    y = 1\r\n\tz = 2\n"
    pieces = tok.backend.pre_tokenizer.pre_tokenize_str(text)
    breaks = [text[a:b] for _, (a, b) in pieces if "\n" in text[a:b]]
    assert breaks == ["\n", "\n", "\r\n", "\n"], "CRLF is one line break"
    ids, offsets = tok.encode_with_offsets(text)
    assert all(text[a:b].strip("\r\n") == "" for a, b in offsets if "\n" in text[a:b])
    assert tok.decode(ids) == text


def test_the_span_head_is_the_indentation_after_a_line_break() -> None:
    tok = tokenizer()
    layout = build_layout(tok, "def f():\n    ", "\n", 4, 100)
    assert layout.head == "    "
    assert tok.decode(layout.prefix_ids) == "def f():\n"
    assert layout.prefix_ids == tok.encode("def f():\n    return 1\n")[:len(layout.prefix_ids)]
