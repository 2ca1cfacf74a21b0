"""Specification of dlm_lsp.python_syntax: CPython confirms what tree-sitter passes.

tree-sitter's Python grammar accepts some text Python rejects; a Python fill is
valid only when CPython's parser agrees, judged on the statements around the
span and never blaming the user's own damage.  Documents mark the span as
⟦old text⟧ (⟦⟧ for an insertion point), as in test_validation.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlm_lsp import validation
from dlm_lsp.python_syntax import CHUNK_CHARS
from dlm_lsp.validation import Validation, validate_fill


def _fill(marked: str, fill: str) -> Validation:
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    return validate_fill(marked.replace("⟦", "").replace("⟧", ""), start, end, fill, "python")


# --- what tree-sitter lets through -------------------------------------------------------


def test_a_comment_that_swallows_the_rest_of_the_line_is_rejected() -> None:
    marked = "import os\n\n__all__ = ⟦⟧['wrap', 'fill']\nx = 3\n"
    result = _fill(marked, "# ")
    assert not result.valid
    assert result.new_errors == ((2, 10),)  # the comment, where the fill starts
    assert "Python: invalid syntax" in result.reason
    assert _fill(marked, "tuple(") .valid is False
    assert _fill(marked, "list(['a']) + ").valid


@pytest.mark.parametrize("fill", ["print 'a'", "exec 'a'", "n = 0777", "a <> b", "del 1",
                                  "with a as 1: pass", "g(x for x in a, 1)"])
def test_statements_python_cannot_parse_are_rejected(fill: str) -> None:
    result = _fill("def f(a, b):\n    ⟦⟧\n    return a\n", fill)
    assert not result.valid
    assert "(Python: " in result.reason  # tree-sitter alone passes every one of them


@pytest.mark.parametrize("marked", [
    "A = 1  # c\n⟦⟧\nC = 3\n",
    "a = (1,\n     2)  # c\n⟦⟧\nC = 3\n",  # the chunk starts where the statement does
])
def test_a_statement_above_that_ends_in_a_comment_is_checked_with_the_span(
        marked: str) -> None:
    """The comment at the end of the line above was taken for the statement the chunk
    starts with; not at its line's start, it gave no chunk, and no check was made."""
    result = _fill(marked, "print 'a'")
    assert not result.valid and "Python: " in result.reason
    assert _fill(marked, "print('a')").valid


def test_a_line_indented_past_its_block_is_rejected() -> None:
    marked = "def f():\n    a = 1\n    ⟦⟧\n    return a\n"
    assert _fill(marked, "b = 2").valid
    result = _fill(marked, "  b = 2")
    assert not result.valid
    assert "unexpected indent" in result.reason


def test_the_error_range_tells_repair_where_the_fill_went_wrong() -> None:
    marked = "total = ⟦⟧\nprint(total)\n"
    text = marked.replace("⟦", "").replace("⟧", "")
    result = _fill(marked, "price count")
    assert not result.valid
    [(a, b)] = result.new_ranges
    filled = text[:8] + "price count" + text[8:]
    assert a >= 8 and "price count" in filled[a - 6:b + 6]


# --- the user's damage is not the fill's -------------------------------------------------


def test_broken_code_below_the_span_is_not_blamed_on_the_fill() -> None:
    marked = "def f():\n    ⟦⟧\n    b = g(1 2)\n    return b\n"
    assert _fill(marked, "a = 1").valid
    result = _fill(marked, "print 'a'")  # CPython now stops earlier: the fill's doing
    assert not result.valid
    assert result.new_errors == ((1, 4),)


def test_broken_code_above_the_span_is_not_blamed_on_the_fill() -> None:
    marked = "def f():\n    b = g(1 2)\n    ⟦⟧\n    return b\n"
    assert _fill(marked, "a = 1").valid


BISECT = ("def bisect_right(a, x, lo=0, hi=None):\n"
          "    if hi is None:\n"
          "        {above}\n"
          "    while lo < hi:\n"
          "        ⟦mid = (lo + ⟧hi) // 2\n"
          "        if x < a[mid]:\n"
          "            hi = mid\n"
          "    return lo\n")


@pytest.mark.parametrize("above", ["<FILL>", "hi = len(a) +", "hi = a b"])
def test_broken_code_above_the_span_does_not_hide_what_the_fill_breaks_below_it(
        above: str) -> None:
    """CPython stops at the user's error above (a hole marker, a line being typed), and
    tree-sitter took the fill's unmatched `)` for old damage: the span taken out leaves
    one too.  `lo =` over `hi) // 2` passed as valid, and a rewrite applied it."""
    marked = BISECT.format(above=above)
    for fill in ("lo =", "a"):
        assert not _fill(marked, fill).valid, fill


@pytest.mark.parametrize("above", ["<FILL>", "hi = len(a) +"])
def test_broken_code_above_the_span_is_still_not_blamed_on_a_fill_that_parses(
        above: str) -> None:
    """Judged with that line written as `...`, a fill that breaks nothing passes.  (Below
    `hi = len(` tree-sitter reads the lines as one damage, and rejects these too.)"""
    marked = BISECT.format(above=above)
    assert _fill(marked, "lo = len(").valid  # `lo = len(hi) // 2`
    assert _fill(marked, "mid = (lo + ").valid  # as it was


@pytest.mark.parametrize("marked, fill", [
    # the span's line goes on with the line above: it failed only for the span left empty
    ("def f(a):\n    g(a,\n      ⟦⟧\n    return a\n", "2)"),
    ("def f(a):\n    x = a + \\\n        ⟦⟧\n    return x\n", "1"),
    # a bracket opened lines above: that line written as `...` mends nothing
    (BISECT.format(above="hi = f(\n            a,"), "mid = (lo + "),
])
def test_a_line_above_that_goes_on_below_is_not_taken_for_damage_of_its_own(
        marked: str, fill: str) -> None:
    """The held-out line `Decimal('3.1415926'), F(3,11))` below `self.assertRaises(
    TypeError, operator.add,` (test_fractions.py) was rejected, "unexpected indent": with
    the span empty CPython stops at the line above, and written as `...` that line no
    longer opened what the fill closes.  A line that leaves a bracket open, or ends in a
    backslash, is never written as `...`."""
    assert _fill(marked, fill).valid


def test_an_incomplete_line_at_the_cursor_must_be_completed() -> None:
    marked = "def f(a):\n    result = g(⟦⟧\n    return result\n"
    assert _fill(marked, "a)").valid
    result = _fill(marked, "x for x in a, 1)")
    assert not result.valid
    assert "(Python: Generator expression must be parenthesized)" in result.reason


def test_a_block_left_empty_must_be_filled_with_code() -> None:
    marked = "def f(x):\n    if x:\n        ⟦⟧\n    return x\n"
    assert _fill(marked, "x += 1").valid
    for fill in ("# later", "", "    "):
        result = _fill(marked, fill)
        assert not result.valid, repr(fill)


def test_the_user_s_broken_line_after_a_blank_one_is_not_blamed_on_the_fill() -> None:
    marked = "def f(x):\n    ⟦⟧\n    y = g(1 2)\n    return y\n"
    assert _fill(marked, "x += 1").valid
    assert _fill(marked, "# later").valid


def test_a_warning_while_parsing_never_rejects_a_fill() -> None:
    """CPython warns about an invalid escape like '\\d'; under `python -W error` that
    warning would be a SyntaxError."""
    script = ("from dlm_lsp.validation import validate_fill\n"
              "text = 'import re\\n\\nDIGITS = \\n'\n"
              "print(validate_fill(text, 20, 20, 're.compile(\"\\\\d+\")', 'python').valid)\n")
    shown = subprocess.run([sys.executable, "-W", "error", "-c", script], capture_output=True,
                           text=True, check=True).stdout
    assert shown.strip() == "True"


# --- where the check looks ---------------------------------------------------------------


def _big_class(method_body: str) -> str:
    methods = "".join(f"    def m{i}(self, x):\n        y = x * {i}\n        return y + 1\n\n"
                      for i in range(400))
    return f"class Big:\n{methods}    def last(self):\n{method_body}\n"


def test_a_class_too_big_to_parse_whole_is_checked_in_the_method_that_holds_the_span() -> None:
    marked = _big_class("        ⟦⟧\n        return 1")
    assert len(marked) > CHUNK_CHARS
    assert _fill(marked, "value = self.m1(2)").valid
    result = _fill(marked, "print 'a'")
    assert not result.valid and "(Python: " in result.reason
    assert result.new_errors[0][0] == marked.count("\n", 0, marked.index("⟦"))


def test_a_case_block_is_checked_like_any_other() -> None:
    marked = ("def f(x):\n    match x:\n        case 1:\n            ⟦⟧\n            z = 0\n"
              "    return 1\n")
    assert _fill(marked, "y = 2").valid
    assert "(Python: " in _fill(marked, "print 'a'").reason


def test_large_documents_are_checked_in_their_window_with_the_document_line_numbers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "WINDOW_ABOVE", 1_000)
    lines = [f"v{i} = {i}\n" for i in range(300)]
    lines[250] = "x = ⟦⟧1\n"
    result = _fill("".join(lines), "#")
    assert not result.valid
    assert result.new_errors[0][0] == 250
    assert "first at line 251," in result.reason and "(Python: " in result.reason


def test_other_languages_are_left_to_tree_sitter() -> None:
    text = "let x = ;\n"
    assert validate_fill(text, 8, 8, "1", "javascript").valid


# --- the search for the block that holds the span ----------------------------------------


class _Node:
    """A tree-sitter node as `_inner_block` reads one; `walked` says whether its children
    were asked for."""

    def __init__(self, type_: str, children: list[_Node] = (), rows: tuple[int, int] = (0, 0),
                 has_error: bool = False) -> None:
        self.type, self._children, self.has_error = type_, list(children), has_error
        self.start_point, self.end_point = (rows[0], 0), (rows[1], 0)
        self.parent, self.walked = None, False
        for child in self._children:
            child.parent = self

    @property
    def children(self) -> list[_Node]:
        self.walked = True
        return self._children


def test_the_search_for_a_block_skips_an_error_free_expression() -> None:
    """A line of 1 MB of code is one expression of ~670,000 nodes: Python's grammar puts
    no block inside an expression, so walking it for one only cost seconds."""
    from dlm_lsp.python_syntax import _inner_block

    items = _Node("list", [_Node("integer") for _ in range(3)])
    statement = _Node("expression_statement", [_Node("assignment", [_Node("identifier"),
                                                                   items])])
    assert _inner_block(statement, 0, 0) is None
    assert not items.walked


def test_the_search_for_a_block_still_looks_inside_an_expression_with_an_error() -> None:
    """tree-sitter's recovery may put a block anywhere in an expression it could not
    read: such an expression is searched as before."""
    from dlm_lsp.python_syntax import _inner_block

    block = _Node("block", [_Node("pass_statement", rows=(1, 1))], rows=(1, 2))
    statement = _Node("if_statement", [_Node("list", [_Node("ERROR", [block], rows=(0, 2))],
                                             rows=(0, 2), has_error=True)], rows=(0, 2))
    assert _inner_block(statement, 1, 1) is block


def test_a_fill_that_opens_a_bracket_a_line_further_down_closes_is_accepted() -> None:
    """CPython reads the statements around the span, cut from the document as it is: one
    below it, so a fill that opens what the user's `)` three lines further down closes
    failed at the cut, "'(' was never closed"; without that `)` it is rejected still."""
    lines = "\n    a,\n    b,\n    c,\n"
    verdict = _fill("x = 1\n⟦⟧" + lines + ")\nprint(x)\n", "y = foo(")
    assert verdict.valid, verdict.reason
    assert not _fill("x = 1\n⟦⟧" + lines + "print(x)\n", "y = foo(").valid


def test_a_line_the_user_left_broken_further_down_does_not_keep_such_a_fill_rejected() -> None:
    """The second look used to ask for a whole parse, so one stray line far below (`x = =
    1`, broken in the document as it is) kept `y = foo(` rejected though the user's `)`
    closes it: that line is read as blank.  A fill nothing below closes still fails."""
    lines = "\n    a,\n    b,\n    c,\n"
    stray = "\n\nx = = 1\ny = = 2\n"
    verdict = _fill("x = 1\n⟦⟧" + lines + ")\nprint(x)" + stray, "y = foo(")
    assert verdict.valid, verdict.reason
    assert not _fill("x = 1\n⟦⟧" + lines + "print(x)" + stray, "y = foo(").valid


def _below(failures: list[int | None], broken: set[int]) -> tuple[bool, list[str]]:
    """parses_below over a ten-line text whose fill, on row 1, adds no row; the parser
    fails at each of `failures` in turn (rows of the text it is given)."""
    from dlm_lsp.python_syntax import parses_below

    text = "".join(f"line{row}\n" for row in range(10))
    starts = [text.index(f"line{row}") for row in range(10)]
    given: list[str] = []

    def first_error(source: str) -> int | None:
        given.append(source)
        return failures[len(given) - 1]

    def row(offset: int) -> int:
        return max(r for r, at in enumerate(starts) if at <= offset)

    passed = parses_below(text, starts[0], starts[1], starts[1] + 5, "fill1", starts[3],
                          len(text), row, first_error, lambda: broken)
    return passed, given


def test_the_second_look_reads_only_the_user_s_broken_lines_below_the_chunk_as_blank() -> None:
    from dlm_lsp.python_syntax import BLANKED_LINES

    passed, given = _below([6, 8, None], {6, 8})
    assert passed and given[1].split("\n")[6].strip() == ""
    assert given[2].split("\n")[8].strip() == "" and given[2].split("\n")[5] == "line5"
    assert not _below([6], set())[0]  # a line the tree reads whole: the fill's doing
    assert not _below([1], {1})[0]  # the fill's own line
    assert not _below([2], {2})[0]  # inside the chunk, which judged it already
    assert not _below([11], {11})[0]  # past the text's last line (a shell's end of file)
    assert not _below([4, 5, 6, 7, 8, 9], {4, 5, 6, 7, 8, 9})[0]  # past BLANKED_LINES
    assert len(_below([4, 5, 6, 7, 8, 9], {4, 5, 6, 7, 8, 9})[1]) == BLANKED_LINES + 1


# --- what only the compiler rejects ------------------------------------------------------


@pytest.mark.parametrize("fill, message", [
    ("def g(a, a): pass", "duplicate argument 'a'"),
    ("total = f(x=1, x=2)", "keyword argument repeated"),
    ("break", "'break' outside loop"),
    ("await g()", "'await' outside async function"),
])
def test_what_the_parser_accepts_and_the_compiler_rejects_is_rejected(
        fill: str, message: str) -> None:
    result = _fill("def f(a, b):\n    ⟦⟧\n    return a\n", fill)
    assert not result.valid
    assert f"(Python: {message}" in result.reason


def test_a_return_is_rejected_outside_a_function_and_accepted_inside_one() -> None:
    assert "'return' outside function" in _fill("x = 1\n⟦⟧\ny = 2\n", "return x").reason
    assert _fill("def f(a):\n    ⟦⟧\n    a += 1\n", "return a").valid


def test_a_break_in_a_loop_and_an_await_at_the_top_level_are_accepted() -> None:
    """A notebook cell may await at its top level."""
    assert _fill("for a in b:\n    ⟦⟧\n    a += 1\n", "break").valid
    assert _fill("import asyncio\n⟦⟧\n", "await asyncio.sleep(1)").valid


def test_the_user_s_own_compile_error_is_not_blamed_on_the_fill() -> None:
    marked = "def f(a, a):\n    pass\n⟦⟧\ny = 2\n"
    assert _fill(marked, "z = 3").valid
    # the compiler stops at the user's error, above: a fill's own goes unseen behind it
    assert _fill(marked, "break").valid


def test_a_return_in_a_large_document_s_window_inside_a_function_is_accepted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A window cut inside a function holds its `return` without the `def`: compiled
    alone it would be "outside function"."""
    monkeypatch.setattr(validation, "WINDOW_ABOVE", 1_000)
    body = [f"    v{i} = {i}\n" for i in range(900)]
    body[600] = "    if v1:\n        ⟦⟧\n"
    marked = "def big():\n" + "".join(body) + "    return v2\n"
    assert _fill(marked, "return v3").valid
    assert not _fill(marked, "return v3 +").valid


def test_a_header_whose_block_cpython_fails_at_its_end_is_rejected_at_the_header() -> None:
    """The code below the span is a block with no header: the document fails at the span
    as it is, and `if True:` there would mend it. `try:` with no handler fails only at
    the block's end, far from the fill, and is the fill's fault all the same."""
    marked = ("def f(xs):\n    n = 0\n⟦⟧        n += 1\n        n *= 2\n    return n\n"
              "\n\nY = 1\n")
    result = _fill(marked, "    try:\n")
    assert not result.valid
    assert "expected 'except' or 'finally' block" in result.reason
    at = marked.index("⟦")
    assert result.new_ranges == ((at, at + len("    try:")),)
    assert _fill(marked, "    for x in xs:\n").valid
    # a statement there leaves the block below without its header, as before
    assert _fill(marked, "    n = 2\n").valid is False
