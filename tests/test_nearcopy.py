"""Near-copy sketches: a file moved and edited a little is told from another file."""

from __future__ import annotations

import pytest

from dlm_lsp.training import nearcopy
from dlm_lsp.training.nearcopy import SketchIndex, agreeing, jaccard, packed, sketch, unpacked


def module(name: str, functions: int = 12) -> str:
    """A module of distinct lines, its names after `name`."""
    return "".join(f"def {name}_{i}(value):\n    total = value * {i} + {len(name)}\n"
                   f"    return total - {name!r}.count('{i}')\n\n" for i in range(functions))


def edited(text: str) -> str:
    """`text` as Python 3.12 edited 3.11's tkinter test_text.py: an import changed."""
    return text.replace("def", "import tkinter\ndef", 1)


def test_an_edited_copy_is_near_and_another_module_is_not():
    text = module("spam")
    assert jaccard(text, edited(text)) > 0.9
    assert agreeing(sketch(text), sketch(edited(text))) >= nearcopy.MATCH_SLOTS
    assert jaccard(text, module("eggs")) == 0
    assert agreeing(sketch(text), sketch(module("eggs"))) < nearcopy.MATCH_SLOTS
    index = SketchIndex([sketch(module("eggs")), sketch(text)])
    assert index.near(sketch(edited(text))) and not index.near(sketch(module("ham")))


def test_indentation_blank_lines_and_comments_leave_a_sketch_as_it_was():
    text = module("spam")
    reformatted = "# a new comment\n\n" + text.replace("    ", "\t").replace("\n\n", "\n\n\n")
    assert sketch(reformatted) == sketch(text)


def test_a_sketch_is_fixed_by_the_text_alone():
    """The same in every process: no salted hash(), no order of the files read."""
    assert sketch(module("spam")).hex() == sketch(module("spam")).hex()
    assert len(sketch(module("spam"))) == nearcopy.SKETCH_BYTES == 8
    first = packed([sketch(module("spam")), sketch(module("eggs"))])
    assert first == packed([sketch(module("eggs")), sketch(module("spam"))])
    assert unpacked(first) == {sketch(module("spam")), sketch(module("eggs"))}


@pytest.mark.parametrize("functions", [0, 1, 2])
def test_a_text_too_short_to_tell_has_no_sketch_and_is_near_nothing(functions):
    short = module("spam", functions)
    assert sketch(short) is None
    assert not SketchIndex([sketch(module("spam"))]).near(sketch(short))
