"""Specification of dlm_lsp.validation: tree-sitter checks that blame only the fill.

Documents are written with the span marked as ⟦old text⟧ (⟦⟧ for an insertion point);
`_span` removes the markers and returns the text plus the span's character offsets.
"""

from __future__ import annotations

import bisect
import itertools
import random
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlm_lsp import validation
from dlm_lsp.validation import LANGUAGES, Validation, language_for, validate_fill


def _span(marked: str) -> tuple[str, int, int]:
    """Turn 'a⟦b⟧c' into ('abc', 1, 2)."""
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    return marked.replace("⟦", "").replace("⟧", ""), start, end


def _fill(marked: str, fill: str, language: str | None) -> Validation:
    text, start, end = _span(marked)
    return validate_fill(text, start, end, fill, language)


# --- the basic verdicts -------------------------------------------------------------------


def test_valid_python_fill_has_no_new_errors() -> None:
    result = _fill("def add(a, b):\n    return ⟦⟧\n", "a + b", "python")
    assert result == Validation(True, True, "python", (), result.reason)
    assert result.new_errors == ()


def test_unbalanced_paren_fill_is_invalid_and_located() -> None:
    result = _fill("import os\n\ndef add(a, b):\n    return ⟦⟧\n", "a + (b", "python")
    assert result.checked and not result.valid
    assert result.language == "python"
    assert result.new_errors == ((3, 4),)
    assert "line 4, column 5" in result.reason


def test_missing_token_is_located_right_after_the_fill() -> None:
    result = _fill("int add(int a, int b) {\n    return ⟦⟧;\n}\n", "a + (b", "c")
    assert not result.valid
    assert result.new_errors == ((1, 17),)  # the ';' where ')' was expected


def test_fill_that_breaks_code_far_away_is_blamed_there() -> None:
    marked = "function f(x) {\n  ⟦⟧\n  return x;\n}\n\nfunction g() {\n  return 1;\n}\n"
    assert _fill(marked, "if (x) { x++; }", "javascript").valid
    result = _fill(marked, "if (x) {", "javascript")
    assert not result.valid
    assert result.new_errors == ((7, 1),)  # the '}' that was never closed, at the end of file


def test_empty_fill_that_leaves_the_hole_incomplete_is_invalid() -> None:
    result = _fill("print(1)\nx = ⟦⟧\n", "", "python")
    assert result.checked and not result.valid
    assert result.new_errors == ((1, 0),)


# A line left incomplete at the cursor, with code on the lines below: where line breaks
# are white space, the error shows on the next code line, not at the cursor.
INCOMPLETE = [
    ("javascript", "function f(a) {\n  const x = ⟦⟧\n  return x;\n}\n", "a + 1;"),
    ("typescript", "function f(a: number) {\n  const x = ⟦⟧\n  return x;\n}\n", "a + 1;"),
    ("go", "package main\n\nfunc f(a int) int {\n\tx := ⟦⟧\n\treturn x\n}\n", "a + 1"),
    ("rust", "fn f(a: i32) -> i32 {\n    let x = ⟦⟧\n    x\n}\n", "a + 1;"),
    ("java", "class A {\n    int f(int a) {\n        int x = ⟦⟧\n        return x;\n    }\n}\n",
     "a + 1;"),
    ("c", "int f(int a) {\n    int x = ⟦⟧\n    return x;\n}\n", "a + 1;"),
    ("cpp", "int f(int a) {\n    int x = ⟦⟧\n    return x;\n}\n", "a + 1;"),
]


@pytest.mark.parametrize(("language", "marked", "whole"), INCOMPLETE)
def test_a_fill_that_leaves_the_cursor_s_line_incomplete_is_invalid_where_it_ends(
        language: str, marked: str, whole: str) -> None:
    text, start, _ = _span(marked)
    line, column = text.count("\n", 0, start), start - text.rfind("\n", 0, start) - 1
    assert _fill(marked, whole, language).valid
    for fill in ("", "a +"):
        result = _fill(marked, fill, language)
        assert not result.valid, fill
        assert result.new_errors == ((line, column + len(fill)),), fill


@pytest.mark.parametrize(("language", "marked", "whole"), [
    ("javascript", "function f(a) {\n  const x = ⟦⟧ // the sum\n  return x;\n}\n", "a + 1;"),
    ("go", "package main\n\nfunc f(a int) int {\n\tx := ⟦⟧ // the sum\n\treturn x\n}\n",
     "a + 1"),
    ("rust", "fn f(a: i32) -> i32 {\n    let x = ⟦⟧ // the sum\n    x\n}\n", "a + 1;"),
    ("java", "class A {\n    int f(int a) {\n        int x = ⟦⟧ /* the sum */\n"
             "        return x;\n    }\n}\n", "a + 1;"),
    ("c", "int f(int a) {\n    int x = ⟦⟧\n\n    // the sum\n    return x;\n}\n", "a + 1;"),
], ids=["javascript", "go", "rust", "java", "c-comment-line"])
def test_a_comment_after_the_cursor_does_not_excuse_a_line_left_incomplete(
        language: str, marked: str, whole: str) -> None:
    """The parser reads a comment as white space, so the incomplete line's error is at the
    code after it; the comment was taken for that code, and an empty fill or `a +` before
    `// the sum` (or above a comment line) passed."""
    assert _fill(marked, whole, language).valid
    for fill in ("", "a +"):
        assert not _fill(marked, fill, language).valid, fill


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("javascript", "function f(a) {\n  a = 1;⟦⟧\n  ) ) ;\n  return a;\n}\n", " a++;"),
    ("go", "package main\n\nfunc f(a int) int {\n\ta = 1⟦⟧\n\t) ) ;\n\treturn a\n}\n", "; a++"),
    ("rust", "fn f(mut a: i32) -> i32 {\n    a = 1;⟦⟧\n    ) ) ;\n    a\n}\n", " a += 1;"),
    ("java", "class A {\n    int f(int a) {\n        a = 1;⟦⟧\n        ) ) ;\n        return a;\n"
             "    }\n}\n", " a++;"),
    ("c", "int f(int a) {\n    a = 1;⟦⟧\n    ) ) ;\n    return a;\n}\n", " a++;"),
])
def test_a_line_below_the_cursor_broken_on_its_own_is_not_blamed_on_the_fill(
        language: str, marked: str, fill: str) -> None:
    for each in ("", fill):
        result = _fill(marked, each, language)
        assert result.valid and "pre-existing" in result.reason, each


@pytest.mark.parametrize(("language", "marked", "whole"), [
    ("javascript", "function f(a) {\n  const x = ⟦⟧\n  ) ) ;\n  return x;\n}\n", "a + 1;"),
    ("go", "package main\n\nfunc f(a int) int {\n\tx := ⟦⟧\n\t) ) ;\n\treturn x\n}\n", "a + 1"),
    ("rust", "fn f(a: i32) -> i32 {\n    let x = ⟦⟧\n    ) ) ;\n    x\n}\n", "a + 1;"),
    ("java", "class A {\n    int f(int a) {\n        int x = ⟦⟧\n        ) ) ;\n"
             "        return x;\n    }\n}\n", "a + 1;"),
    ("javascript", "const x = ⟦⟧\nconst y = \n", "1;"),
    ("python", "x = ⟦⟧\ny = \n", "1"),
])
def test_a_fill_that_completes_its_line_is_valid_above_a_line_broken_on_its_own(
        language: str, marked: str, whole: str) -> None:
    """The incomplete line's damage and the broken line's below were one error in the
    document as it was, starting above; the error left below once the fill completes
    the line started nowhere in it, and the fill was blamed for the user's line."""
    result = _fill(marked, whole, language)
    assert result.valid and "pre-existing" in result.reason, result.reason


@pytest.mark.parametrize(("language", "marked"), [
    ("javascript", "function f(a) {\n  const x = ⟦⟧\n  ) ) ;\n  return x;\n}\n"),
    ("go", "package main\n\nfunc f(a int) int {\n\tx := ⟦⟧\n\t) ) ;\n\treturn x\n}\n"),
    ("rust", "fn f(a: i32) -> i32 {\n    let x = ⟦⟧\n    ) ) ;\n    x\n}\n"),
    ("java", "class A {\n    int f(int a) {\n        int x = ⟦⟧\n        ) ) ;\n"
             "        return x;\n    }\n}\n"),
    ("c", "int f(int a) {\n    int x = ⟦⟧\n    ) ) ;\n    return x;\n}\n"),
    ("python", "def f(a):\n    x = ⟦⟧\n    ) )\n    return x\n"),
    ("python", "x = ⟦⟧\n) )\ny = 2\n"),
])
def test_a_fill_that_leaves_its_line_incomplete_is_invalid_above_a_line_broken_on_its_own(
        language: str, marked: str) -> None:
    """The document as it is joins `const x = ` and the broken line below into one error
    that encloses the cursor, which excused the empty fill as damage the user's text
    already had: it is judged with that line blank, where it leaves its line incomplete."""
    for fill in ("", "a +"):
        result = _fill(marked, fill, language)
        assert not result.valid, fill
        line = marked.count("\n", 0, marked.index("⟦"))
        assert result.new_errors[0][0] == line, (fill, result.reason)  # the cursor's line


@pytest.mark.parametrize("marked", [
    "def f(a):\n    x = ⟦⟧\n    ) )\n    return x\n",
    "x = ⟦⟧\n) )\ny = 2\n",
    "def f(a):\n    total = ⟦⟧\n    ]\n    return total\n",
])
def test_cpython_does_not_blame_a_line_below_broken_on_its_own_on_a_fill_that_completes_its_line(
        marked: str) -> None:
    """tree-sitter judged the line below the user's, but CPython stops at its first error,
    `unmatched ')'` below, and every fill was rejected for it."""
    for fill in ("1", "foo(a) + 2"):
        result = _fill(marked, fill, "python")
        assert result.valid and "broken on its own" in result.reason, (fill, result.reason)


@pytest.mark.parametrize("marked", [
    "def f(x):\n    ⟦y = x + 1⟧\n    <FILL>\n    return y\n",
    "def f(x):\n    ⟦y = x + 1⟧\n\n    <FILL>\n    return y\n",
    # fixtures/hello.py: the marker at the end of a block, a level out
    "def fib(n):\n    if n < 2:\n        ⟦return n⟧\n    <FILL>\n",
    "def f(x):\n    ⟦y = x + 1⟧\n    total = \n    return y\n",
])
def test_a_rewrite_above_a_line_broken_on_its_own_is_judged_on_its_own_text(
        marked: str) -> None:
    """A rewrite's span starts its line, which tree-sitter's look at the line below
    (`_Below`) leaves alone; CPython then stopped at the hole marker below and rejected
    every rewrite, the selection written back as it was too."""
    selected = marked[marked.index("⟦") + 1:marked.index("⟧")]
    for fill in (selected, "print(x)"):
        result = _fill(marked, fill, "python")
        assert result.valid and "pre-existing" in result.reason, (fill, result.reason)
    assert not _fill(marked, "y = (x", "python").valid  # its own damage still counts


@pytest.mark.parametrize(("marked", "fill"), [
    # the block above a clause is the fill's to fill: alone, `else:` fails too
    ("if x:\n    ⟦a = 1⟧\nelse:\n    pass\n", ""),
    ("def f():\n    ⟦return 1⟧\ndef g():\n    pass\n", ""),
    # a line that a bracket left open above goes on with: not broken on its own
    ("def f(a):\n    ⟦x = foo(a⟧\n    , 2)\n    return x\n", "x = a"),
])
def test_a_line_below_that_the_fill_leaves_broken_is_still_the_fill_s(
        marked: str, fill: str) -> None:
    assert not _fill(marked, fill, "python").valid


@pytest.mark.parametrize(("language", "marked"), [
    ("python", "def f(a):\n    x = a +  # note⟦⟧\n    return x\n"),
    ("python", "def f(a):\n    x = # note⟦⟧\n    return x\n"),
    ("javascript", "function f(a) {\n  const x = // note⟦⟧\n  return x;\n}\n"),
    ("go", "package main\n\nfunc f(a int) int {\n\tx := // note⟦⟧\n\treturn x\n}\n"),
    ("c", "int f(int a) {\n    int x = // note⟦⟧\n    return x;\n}\n"),
])
def test_a_fill_at_the_end_of_a_comment_after_an_incomplete_line_is_comment_text(
        language: str, marked: str) -> None:
    """Written in the comment, the fill changes no code: the line left incomplete before
    the comment is the user's, and every fill was rejected for it, the empty one too
    (a line comment holds the cursor at its end)."""
    for fill in (" more", " the sum of a and 1", ""):
        result = _fill(marked, fill, language)
        assert result.valid and "comment text" in result.reason, (fill, result.reason)


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("c", "int f(int a) {\n    int x = // note⟦⟧\n    return x;\n}\n", " more \\"),
    ("php", "<?php\nfunction f($a) {\n    $x = 1; // note⟦⟧\n    return $x;\n}\n",
     " ?> <p>"),
    ("javascript", "function f(a) {\n  const x = /* note */⟦⟧\n  return x;\n}\n", ""),
    ("javascript", "function f(a) {\n  const x = /* note */⟦⟧\n  return x;\n}\n", " a +"),
])
def test_a_fill_that_ends_the_comment_or_follows_a_closed_one_is_judged_as_code(
        language: str, marked: str, fill: str) -> None:
    """A C line comment's last backslash pulls the next line into it, PHP's `?>` ends it,
    and after a closed block comment the fill is code."""
    assert not _fill(marked, fill, language).valid


@pytest.mark.parametrize(("language", "marked", "fill", "where"), [
    ("c", "#include <stdio.h>\n#define N 10⟦⟧\nint main(void) {\n    return N;\n}\n", " \\",
     (1, 13)),
    ("c", "#define N ⟦⟧\nint main(void) {\n    return N;\n}\n", "10 \\  ", (0, 13)),
    ("cpp", "int f(int a) {\n    int x = a; // note⟦⟧\n    return x;\n}\n", " more \\",
     (1, 28)),
    ("c", "int x;\n⟦⟧\nint main(void) {\n    return 0;\n}\n", "#define N 10\n#define M \\",
     (2, 10)),
    # bash joins them too: `echo a ls`, `echo start ls -l`
    ("shellscript", "#!/bin/bash\necho start\n⟦⟧\nls -l\n", "echo a \\", (2, 7)),
    ("shellscript", "#!/bin/bash\nf() {\n  echo start⟦⟧\n  ls -l\n}\n", " \\", (2, 13)),
    # a fill of whole lines, ending in a line break of its own: the user's line is below it
    ("c", "⟦⟧int y = N;\n", "#define N 10 \\\n", (0, 13)),
    ("shellscript", "#!/bin/bash\necho start\n⟦⟧ls -l\n", "echo a \\\n", (2, 7)),
])
def test_a_c_or_shell_fill_that_ends_its_line_in_a_backslash_does_not_join_the_line_below(
        language: str, marked: str, fill: str, where: tuple[int, int]) -> None:
    """The preprocessor (or bash) joins the lines, which parses: the line below became
    part of the macro (or the comment, or the command), and the fill passed."""
    result = _fill(marked, fill, language)
    assert not result.valid and "joins line" in result.reason
    assert result.new_errors == (where,)
    text, start, _ = _span(marked)
    low, high = result.new_ranges[0]
    assert (text[:start] + fill + text[start:])[low:high] == "\\"


@pytest.mark.parametrize(("marked", "fill"), [
    ("#define MAX(a, b) ⟦⟧\n    ((a) > (b) ? (a) : (b))\nint x;\n", "\\"),  # its body below
    ("#define F(a) do { ⟦⟧\n    g(a); \\\n} while (0)\n", "f(a); \\"),  # continued below
    ("#define N 10⟦⟧\n\nint x;\n", " \\"),  # a blank line ends the macro
    ("#define N ⟦10 \\⟧\n+ 1\nint x;\n", "20 \\"),  # the line had it
])
def test_a_backslash_that_continues_onto_the_line_the_user_wrote_for_it_is_kept(
        marked: str, fill: str) -> None:
    assert _fill(marked, fill, "c").valid


@pytest.mark.parametrize(("marked", "fill"), [
    ("#!/bin/bash\ncurl ⟦⟧\n    -o out \"$url\"\n", "-s \\"),  # its arguments below
    ("#!/bin/bash\necho start # note⟦⟧\nls -l\n", " \\"),  # a comment ends at its line
    ("#!/bin/bash\necho start⟦⟧\nls -l\n", " a\\\\"),  # a backslash written out
    ("#!/bin/bash\necho 'a⟦⟧\nb'\nls -l\n", " \\"),  # single quotes: text
    ("#!/bin/bash\necho \"a⟦⟧\nb\"\nls -l\n", " \\"),  # the user's string goes on below
    ("#!/bin/bash\ncat <<'EOF'\na⟦⟧\nb\nEOF\n", " \\"),  # a heredoc's text
])
def test_a_shell_backslash_that_joins_no_line_of_code_is_left_to_the_parse(
        marked: str, fill: str) -> None:
    assert _fill(marked, fill, "shellscript").valid


# A fill whose line ends in an operator or separator of its own, over the user's next
# line of code, no deeper: the line below becomes part of the fill's expression (or the
# shell's list or pipeline), which parses, so no error objected.  (language, document,
# fill, the joining token's place)
JOINING = [
    ("javascript", "function f(a) {\n  ⟦⟧\n  foo();\n}\n", "const x = a +", (1, 14)),
    ("javascript", "function f(a) {\n  const x = ⟦⟧\n  foo();\n}\n", "a.", (1, 13)),
    ("typescript", "function f(a: number) {\n  ⟦⟧\n  foo();\n}\n", "const x =", (1, 10)),
    ("c", "int f(int a) {\n    ⟦⟧\n    foo();\n}\n", "int x = a,", (1, 13)),
    ("cpp", "int f(int a) {\n    int x = a ⟦⟧\n    foo();\n}\n", "*", (1, 14)),
    ("go", "package main\n\nfunc f(a int) {\n\t⟦⟧\n\tfoo()\n}\n", "x := a +", (3, 8)),
    ("rust", "fn f(a: i32) {\n    ⟦⟧\n    foo();\n}\n", "let x = a.", (1, 13)),
    ("java", "class A {\n    void f(int a) {\n        ⟦⟧\n        foo();\n    }\n}\n",
     "int x = a &&", (2, 18)),
    ("ruby", "def f(a)\n  ⟦⟧\n  foo()\nend\n", "x = a +", (1, 8)),
    ("lua", "function f(a)\n  ⟦⟧\n  foo()\nend\n", "local x = a ..", (1, 14)),
    # Scala's operators are named tokens (`operator_identifier`); scalac, too, reads a
    # line break after an infix operator as white space: `val x = a + foo()`
    ("scala", "object A {\n  def f(a: Int) = {\n    ⟦⟧\n    foo()\n  }\n}\n", "val x = a +",
     (2, 14)),
    ("scala", "object A {\n  def f(a: Int) = {\n    val x = a ⟦⟧\n    foo()\n  }\n}\n", "::",
     (2, 14)),
    ("python", "def f(a):\n    ⟦⟧\n    foo()\n", "x = a + \\", (1, 10)),  # CPython joins
    ("python", "def f():\n    ⟦⟧\n    call = ''\n", "args, \\", (1, 8)),  # `args, call = ''`
    # blank lines and comments between do not end the expression
    ("javascript", "function f(a) {\n  ⟦⟧\n\n  // next\n  foo();\n}\n", "x = a + // why", (1, 8)),
    # shell: `echo a && ls`, `echo a | ls`
    ("shellscript", "#!/bin/bash\necho start\n⟦⟧\nls -l\n", "echo a &&", (2, 7)),
    ("shellscript", "#!/bin/bash\nf() {\n  echo start⟦⟧\n  ls -l\n}\n", " ||", (2, 13)),
    ("shellscript", "#!/bin/bash\necho start\n⟦⟧\nls -l\n", "echo a |", (2, 7)),
    ("shellscript", "#!/bin/bash\n⟦⟧\nls && echo b\n", "echo a &&", (1, 7)),  # into a list
    # a pipeline of the user's is one flat node that the fill's `|` goes on in front
    ("shellscript", "#!/bin/bash\necho start\n⟦⟧\nls | wc\n", "echo a |", (2, 7)),
    ("shellscript", "#!/bin/bash\nf() {\n  ⟦⟧\n  ls | wc | sort\n}\n", "echo a |", (2, 9)),
    ("javascript", "class A {\n  ⟦⟧\n  opt;\n}\n", "sync =", (1, 7)),  # a field's value
    # a fill of whole lines, ending in a line break of its own (the user's next line then
    # starts the line below the fill's), or in one and the next line's indentation
    ("shellscript", "#!/bin/bash\necho start\n⟦echo old\n⟧ls -l\n", "echo a &&\n", (2, 7)),
    ("javascript", "function f(a) {\n⟦  old();\n⟧  foo();\n}\n", "  const x = a +\n",
     (1, 14)),
    ("c", "int f(int a) {\n    ⟦⟧\n    foo();\n}\n", "int x = a +\n    ", (1, 14)),
]


@pytest.mark.parametrize(("language", "marked", "fill", "where"), JOINING)
def test_a_fill_whose_line_ends_in_an_operator_does_not_join_the_user_s_line_below(
        language: str, marked: str, fill: str, where: tuple[int, int]) -> None:
    """`const x = a +` over `foo();` read `const x = a + foo();`, and `echo a &&` over
    `ls` ran `echo a && ls`: valid, and the fill passed."""
    token, _, _ = _joining_token(language, marked, fill, where)
    assert not token[-1].isalnum() or token in ("and", "or")


def _joining_token(language: str, marked: str, fill: str,
                   where: tuple[int, int]) -> tuple[str, int, int]:
    """The token that a fill's rejection names as joining the line below, checked to be
    the one at `where` and the one the reason names, with where it ends and where the
    span starts in the filled document."""
    result = _fill(marked, fill, language)
    assert not result.valid and "joins line" in result.reason
    assert result.new_errors == (where,)
    text, start, end = _span(marked)
    low, high = result.new_ranges[0]
    token = (text[:start] + fill + text[end:])[low:high]
    assert f"`{token}` at the end of the line joins line" in result.reason
    return token, high, start


# The empty fill where the user's line ends in an operator, over a line of its own: the
# line is left incomplete, and the line below is taken into it.  (language, document,
# fill, the user's token's place)
LEFT_INCOMPLETE = [
    ("javascript", "function f() {\n  const x = ⟦⟧\n  foo();\n}\n", "", (1, 10)),
    ("javascript", "function f() {\n  const x = a +⟦⟧\n  foo();\n}\n", "", (1, 14)),
    ("javascript", "function f() {\n  const x = ⟦⟧ // note\n  foo();\n}\n", "", (1, 10)),
    ("javascript", "function f() {\n  const x = ⟦b⟧\n  foo();\n}\n", "", (1, 10)),  # deleted
    ("javascript", "function f() {\n  const x = ⟦⟧\n  foo();\n}\n", "\n  ", (1, 10)),
    ("shellscript", "#!/bin/bash\necho a &&⟦⟧\nls\n", "", (1, 7)),
    ("scala", "object A {\n  val x = a +⟦⟧\n  foo()\n}\n", " ", (1, 12)),
]


@pytest.mark.parametrize(("language", "marked", "fill", "where"), LEFT_INCOMPLETE)
def test_the_empty_fill_does_not_leave_the_user_s_operator_joining_the_line_below(
        language: str, marked: str, fill: str, where: tuple[int, int]) -> None:
    """`const x = |` over `foo();` read `const x = foo();` with the empty fill, which
    passed: the line the fill was asked to complete stayed incomplete, as over a line
    below that does not parse after it (`return x;`), where the empty fill is refused."""
    _, high, start = _joining_token(language, marked, fill, where)
    assert high <= start  # the user's, before the span


# A fill whose line ends in an operand (a name, a literal, a closing bracket) over the
# user's line that starts with a round or square bracket, where a line break is white
# space: the line becomes the arguments or the index of the fill's last expression.
# (language, document, fill, the operand's last token's place)
OPENED = [
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "const x = a", (1, 12)),
    ("javascript", "function f() {\n  ⟦⟧\n  [1, 2].forEach(g);\n}\n", "foo()", (1, 6)),
    ("javascript", "class A {\n  ⟦⟧\n  [JOBS] = 0;\n}\n", "[QUEUE] = []", (1, 13)),
    ("typescript", "function f() {\n  ⟦⟧\n  (0, g)(x);\n}\n", "const y = function () {}",
     (1, 25)),
    ("c", "int f(void) {\n    ⟦⟧\n    (b);\n}\n", "int x = a", (1, 12)),
    ("rust", "fn f() {\n    ⟦⟧\n    (b)();\n}\n", "let x = a", (1, 12)),
    ("lua", "function f()\n  ⟦⟧\n  (b)()\nend\n", "local x = a", (1, 12)),
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "const x = a /* c */", (1, 12)),
    ("javascript", "function f() {\n  ⟦⟧\n  (b)()\n}\n", "foo()", (1, 6)),  # no `;` either
    # a literal's closing delimiter ends an operand too: `"a"(b)()` is a call
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", 'const s = "a"', (1, 14)),
    ("javascript", "function f() {\n  ⟦⟧\n  [1, 2].forEach(g);\n}\n", "const s = `a`", (1, 14)),
    # (a line below that ends in a quote too is no chain the user goes on with)
    ("javascript", "function f() {\n  ⟦⟧\n  (b).c + \"d\"\n}\n", 'const s = "a"', (1, 14)),
    ("typescript", "function f() {\n  ⟦⟧\n  (b as any).c();\n}\n", "const r = /a/", (1, 14)),
    ("c", "int f(void) {\n    ⟦⟧\n    (b);\n}\n", 'char *s = "a"', (1, 16)),
    ("rust", "fn f() {\n    ⟦⟧\n    (b)();\n}\n", 'let s = "a"', (1, 14)),
    # TypeScript's non-null `!` ends an operand: `a!(b)()` is a call
    ("typescript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "const y = a!", (1, 13)),
]


@pytest.mark.parametrize(("language", "marked", "fill", "where"), OPENED)
def test_a_fill_that_ends_in_an_operand_does_not_take_the_user_s_bracketed_line_below(
        language: str, marked: str, fill: str, where: tuple[int, int]) -> None:
    """`const x = a` over `(b)();` read `const x = a(b)();`: no operator ends the fill's
    line, and the fill passed."""
    token, high, start = _joining_token(language, marked, fill, where)
    assert fill[:high - start].endswith(token) and fill[high - start:].strip() in ("", "/* c */")


# A fill that ends in a line break of its own, written at the cursor after the
# indentation of the user's line (or in it): the user's code after the span starts the
# line below the fill's, a line of its own, whichever indentation the fill leaves it,
# tabs and CRLF too; a span from the lines above that ends there likewise.  (language,
# document, fill, the joining token's place, the token)
AT_INDENTATION = [
    ("javascript", "function f() {\n  ⟦⟧(b)();\n}\n", "a\n", (1, 2), "a"),
    ("javascript", "function f() {\n  ⟦⟧(b)();\n}\n", "a\n  ", (1, 2), "a"),
    ("javascript", "function f() {\n  ⟦⟧  (b)();\n}\n", "a\n", (1, 2), "a"),
    ("javascript", "function f() {\n⟦  old();\n  ⟧(b)();\n}\n", "  a\n  ", (1, 2), "a"),
    ("javascript", "function f() {\r\n  ⟦⟧foo();\r\n}\r\n", "const x = a +\r\n  ",
     (1, 14), "+"),
    ("typescript", "function f() {\n\t⟦⟧[1, 2].forEach(g);\n}\n", "foo()\n\t", (1, 5), ")"),
    ("c", "int f(void) {\n    ⟦⟧(b);\n}\n", "int x = a\n    ", (1, 12), "a"),
    ("cpp", "int f(int a) {\r\n    ⟦⟧foo();\r\n}\r\n", "int x = a +\r\n    ", (1, 14), "+"),
    ("rust", "fn f() {\n    ⟦⟧(b)();\n}\n", "let x = a\n    ", (1, 12), "a"),
    ("php", "<?php\nfunction f($a) {\n    ⟦⟧foo();\n}\n", "$x = $a .\n    ", (2, 12), "."),
    ("go", "package main\n\nfunc f(a int) {\n\t⟦⟧foo()\n}\n", "x := a +\n\t", (3, 8), "+"),
    ("python", "def f(a):\n    ⟦⟧foo()\n", "x = a + \\\n    ", (1, 10), "+"),
    ("shellscript", "#!/bin/bash\nf() {\n  ⟦⟧ls -l\n}\n", "echo a &&\n  ", (2, 9), "&&"),
    # the backslash: the preprocessor's join, and bash's
    ("c", "void f(void) {\n    ⟦⟧int y = N;\n}\n", "#define N 10 \\\n    ", (1, 17),
     "\\"),
    ("cpp", "void f() {\n\t⟦⟧int y = N;\n}\n", "#define N 10 \\\n\t", (1, 14), "\\"),
    ("shellscript", "#!/bin/bash\nf() {\n  ⟦⟧ls -l\n}\n", "echo a \\\n", (2, 9), "\\"),
]


@pytest.mark.parametrize(("language", "marked", "fill", "where", "token"), AT_INDENTATION)
def test_a_fill_ending_in_a_line_break_at_the_cursor_in_the_indentation_does_not_join_the_line(
        language: str, marked: str, fill: str, where: tuple[int, int], token: str) -> None:
    """`a` and a line break at `  |(b)();` read `a(b)()`, and `const x = a +` and one at
    `  |foo();` read `const x = a + foo();`: both passed, for the rules read a fill that
    ends in a line break only where the span ends at a line's start."""
    result = _fill(marked, fill, language)
    assert not result.valid and "joins line" in result.reason
    assert result.new_errors == (where,)
    text, start, end = _span(marked)
    low, high = result.new_ranges[0]
    assert (text[:start] + fill + text[end:])[low:high] == token


@pytest.mark.parametrize(("language", "marked", "fill"), [
    # the user's line below goes on with what the fill began: deeper, as a continuation is
    ("javascript", "function f(a) {\n  const x = ⟦⟧\n    foo();\n}\n", "a +"),
    ("scala", "object A {\n  def f(a: Int) = {\n    ⟦⟧\n      foo()\n  }\n}\n", "val x = a +"),
    ("shellscript", "#!/bin/bash\n⟦⟧\n  grep x\n", "cat f |"),
    # ... or it closes what the fill opened, or goes on from it
    ("javascript", "function f() {\n  const x = foo(⟦⟧\n  a, b);\n}\n", "c,"),
    ("javascript", "function f() {\n  ⟦⟧\n    .then((r) => r.json());\n}\n",
     "return fetch(url)"),
    ("javascript", "function f() {\n  ⟦⟧\n  } else {\n    b();\n  }\n}\n", "if (x) {\n    a();"),
    # a bracket or a keyword opens a body the user's lines close
    ("javascript", "function f() {\n  ⟦⟧\n  foo();\n  }\n}\n", "if (x) {"),
    ("javascript", "function f() {\n  ⟦⟧\n  foo(); }\n}\n", "if (x) {"),
    ("lua", "function f(a)\n  ⟦⟧\n  foo()\n  end\nend\n", "if a then"),
    # what the fill's line ends in prefixes the declaration below, or closes a bracket
    ("cpp", "⟦⟧\nT f(T a) { return a; }\n", "template <class T>"),
    ("c", "⟦⟧\nmain(void) { return 0; }\n", "static int"),
    ("java", "class A {\n    ⟦⟧\n    void f() {}\n}\n", "@Override"),
    ("python", "⟦⟧\ndef f(a):\n    foo()\n", "@dec"),
    ("c", "int f(void) {\n  ⟦⟧\n  {\n    return 0;\n  }\n}\n", "for (;;)"),
    ("shellscript", "#!/bin/bash\n⟦⟧\n{\n  ls\n}\n", "f()"),
    # items of a list that began above the span, one a line
    ("javascript", "const o = {\n  ⟦⟧\n  b: 2\n};\n", "a: 1,"),
    ("go", "package main\n\nvar x = []int{\n\t⟦⟧\n\t2,\n}\n", "1,"),
    ("go", "package main\n\nvar p = Point{\n\t⟦⟧\n\tY: 2}\n", "X: 1,"),
    ("rust", "fn f(a: i32) -> i32 {\n    match a {\n        ⟦⟧\n        _ => 2,\n    }\n}\n",
     "1 => 1,"),
    # inside round or square brackets a line break never ends anything
    ("python", "x = compute(\n    a,⟦⟧\n    b,\n)\n", " c +"),
    # a chain the user writes: the line below goes on the same way, or the line above
    ("shellscript", "#!/bin/bash\n⟦⟧\nls &&\necho done\n", "echo a &&"),
    ("shellscript", "#!/bin/bash\nmake &&\n⟦⟧\nls\n", "echo a &&"),
    ("javascript", "function f() {\n  let x, y;\n  x =\n  ⟦⟧\n  foo();\n}\n", "y ="),
    # the user's own text ends the line, or follows the fill on it
    ("javascript", "function f() {\n  const x = a +⟦⟧\n  foo();\n}\n", " b"),
    ("javascript", "function f() {\n  const x = ⟦⟧ + 1;\n  foo();\n}\n", "a"),
    # the user's `&&` over a line no deeper is read as a line left incomplete (the empty
    # fill is refused: LEFT_INCOMPLETE), so a fill that completes it passes, though bash
    # then runs `make` alone where the text as it is ran `cd build && make`: typed lines
    # (`[ -z $f ] && |` over a command) outnumber such chains 207 to 15 (README)
    ("shellscript", "#!/bin/bash\ncd build &&⟦⟧\nmake\n", " cmake .."),
    # a fill of whole statements; an operator in a comment or a string
    ("javascript", "function f() {\n  ⟦⟧\n  foo();\n}\n", "const x = 1;\nconst y = 2;"),
    ("shellscript", "#!/bin/bash\necho start # a ⟦⟧\nls -l\n", "b &&"),
    # a statement's end before the user's next, in a block or a script that begins with
    # the fill's (a script's last line without a line break after it)
    ("python", "def f():\n    ⟦⟧\n    b = 2\n", "a = 1;"),
    # a line break ends a Python statement outside brackets: CPython reads the tuple
    # `(args,)`, then the user's line as it was (tree-sitter reads `args, call = ''`)
    ("python", "def f():\n    ⟦⟧\n    call = ''\n", "args,"),
    ("ruby", "def f\n  ⟦⟧\n  b\nend\n", "a;"),
    ("shellscript", "⟦⟧\nls", "echo a;"),
    ("shellscript", "⟦⟧\nls", "sleep 1 &"),
    ("shellscript", "#!/bin/bash\necho \"a⟦⟧\nls\"\n", " &&"),
    # without the span's line, which closes a comment or a string from above, the line
    # below is not code: a line of its own nowhere
    ("c", "/* c\n*/ int a = ⟦⟧\nfoo(); /* d */\n", "1 +"),
    # a rewrite of the user's line that ended in the operator joining the line below
    ("shellscript", "#!/bin/bash\n⟦ls &&⟧\necho ok\n", "ls -la &&"),
    ("shellscript", "#!/bin/bash\n⟦make &&\n⟧make install\n", "make -j4 &&\n"),
    ("javascript", "function f(a) {\n  const x = ⟦a +⟧\n  b;\n}\n", "a * 2 +"),
    # a fill's line break puts the user's own text after the span below it: theirs goes on
    ("javascript", "function f() {\n  const x = ⟦⟧a;\n  foo();\n}\n", "b +\n"),
    ("javascript", "function f(a) {\n⟦  old();\n⟧  foo();\n}\n", "  const x = a;\n"),
    ("javascript", "/* c\n*/ let a = ⟦⟧\nfoo(); /* d */\n", "1 +"),
    # the empty fill after a line the user completed, continued deeper, or whose own
    # operator in the span joined the line below; after Python's backslash, the user's
    ("javascript", "function f() {\n  const x = a;⟦⟧\n  foo();\n}\n", ""),
    ("javascript", "function f() {\n  const x = a +⟦⟧\n    foo();\n}\n", ""),
    ("javascript", "const o = [\n  a,⟦⟧\n  b,\n];\n", ""),
    ("javascript", "function f() {\n  const x = ⟦a +⟧\n  foo();\n}\n", ""),
    ("javascript", "function f() {\n  const x =\n⟦⟧  foo();\n}\n", "  "),
    ("shellscript", "#!/bin/bash\nmake &&⟦⟧\nls &&\necho done\n", ""),
    ("python", "def f(a):\n    x = a + \\⟦⟧\n    foo()\n", ""),
    # a line break before a bracket ends the statement in these languages, and the tree
    # says so; a body or a statement that starts with the bracket is not an argument
    ("kotlin", "fun f() {\n    ⟦⟧\n    (b)()\n}\n", "val x = a"),
    ("swift", "func f() {\n    ⟦⟧\n    (b)()\n}\n", "let x = a"),
    ("go", "package main\n\nfunc f() {\n\t⟦⟧\n\t(b)()\n}\n", "x := a"),
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "if (x)"),
    ("c", "int f(void) {\n    ⟦⟧\n    (void)y;\n}\n", "if (x)"),
    ("javascript", "function f() {\n  ⟦⟧\n    (b)();\n}\n", "const x = a"),  # deeper
    # JavaScript ends the statement where tree-sitter reads a call: after an operator or
    # a keyword (`x++`, `return`) and after an arrow function (no callee)
    ("javascript", "function f() {\n  ⟦⟧\n  (0, g)(x);\n}\n", "count++"),
    ("javascript", "function f() {\n  ⟦⟧\n  (b);\n}\n", "return"),
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "const g = () => {}"),
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "const g = () => {} // c"),
    ("typescript", "function f() {\n  ⟦⟧\n  (0, g)(x);\n}\n", "count++"),
    ("typescript", "function f() {\n  ⟦⟧\n  (b);\n}\n", "return"),
    ("typescript", "function f() {\n  ⟦⟧\n  [a, b] = [b, a];\n}\n", "const g = () => {}"),
    # ... and after TypeScript's type (`as`, `satisfies`)
    ("typescript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "const y = a as T"),
    ("typescript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "y = a satisfies T"),
    # a literal that Lua does not call (only a name, a call or a bracketed expression)
    ("lua", "function f()\n  ⟦⟧\n  (b)()\nend\n", 'local s = "a"'),
    # the empty fill after a line the user ended in a name: it may be whole
    ("javascript", "function f() {\n  const x = a⟦⟧\n  (b)();\n}\n", ""),
    # at the cursor in the user's line's indentation: a fill's line break ends its
    # statement, its `;` does, the fill indents the line deeper (a continuation, as a
    # line the user wrote deeper is), or the line was continued already above
    ("javascript", "function f() {\n  ⟦⟧(a, b) => a;\n}\n", "count++\n  "),
    ("javascript", "function f() {\n  ⟦⟧(b)();\n}\n", "a;\n  "),
    ("javascript", "function f() {\n  ⟦⟧(b)();\n}\n", "a\n    "),
    ("c", "#define F(a) \\\n    ⟦⟧g(a);\nint x;\n", "f(a); \\\n    "),
])
def test_a_line_below_that_the_fill_does_not_take_from_the_user_is_left_to_the_parse(
        language: str, marked: str, fill: str) -> None:
    assert _fill(marked, fill, language).valid


# A statement that no `(` or `[` continues, over the user's line that starts with one:
# JavaScript ends it at the line break (automatic semicolon insertion), where
# tree-sitter's grammars insert no `;` before a bracket and read one broken statement.
# Each verdict checked against TypeScript's parser (the text reads the same with a `;`
# after the fill).  (language, document, fill)
ENDED_BY_LINE_BREAK = [
    # `break` and `continue` end at any line break, `debugger` is followed by nothing
    ("javascript", "for (;;) {\n  ⟦⟧\n  (b)();\n}\n", "break"),
    ("javascript", "outer: for (;;) {\n  ⟦⟧\n  [a, b] = [b, a];\n}\n", "continue outer"),
    ("javascript", "for (;;) {\n  ⟦⟧\n  (b)();\n}\n", "if (a) break /* done */"),
    ("javascript", "function f() {\n  ⟦⟧\n  (b)();\n}\n", "debugger"),
    # a declaration's last name without a value
    ("javascript", "function f() {\n  ⟦⟧\n  [1, 2].forEach(g);\n}\n", "let d"),
    # `x++` and an arrow function's block body are no callee: over an arrow function
    # written as a statement of its own, tree-sitter reads `x++(a, b)` and then `=>`
    ("javascript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "count++"),
    ("javascript", "function f() {\n  ⟦⟧\n  (a) => { a; };\n}\n", "n = count--"),
    ("javascript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "const g = () => {}"),
    ("typescript", "function f() {\n  ⟦⟧\n  (x: number) => x;\n}\n", "count++"),
    ("typescript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "() => {}"),
    # TypeScript's type after `as` or `satisfies`: a `[` continues it on its line only
    ("typescript", "function f() {\n  ⟦⟧\n  [1, 2].forEach(g);\n}\n", "y = a as T"),
    ("typescript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "const y = a satisfies T"),
    # a fill of whole lines, its line break its own
    ("javascript", "function f() {\n⟦⟧  (a, b) => a;\n}\n", "  count++\n"),
]


@pytest.mark.parametrize(("language", "marked", "fill"), ENDED_BY_LINE_BREAK)
def test_a_statement_that_no_bracket_continues_ends_at_the_line_break_above_one(
        language: str, marked: str, fill: str) -> None:
    assert _fill(marked, fill, language).valid


@pytest.mark.parametrize(("language", "marked", "fill"), [
    # the bracket continues what the fill's line ends in, and the line does not parse so
    ("javascript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "x = b"),
    ("javascript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "let d = b"),
    ("javascript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "f(x++)"),
    ("javascript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "const g = () => b"),
    ("typescript", "function f() {\n  ⟦⟧\n  (a, b) => a;\n}\n", "x = b"),
    # the fill's own statement is broken, with a `;` as without
    ("javascript", "for (;;) {\n  ⟦⟧\n  (b)();\n}\n", "break )"),
    # the user's text goes on after the fill on its line
    ("javascript", "for (;;) {\n  ⟦⟧ x\n  (b)();\n}\n", "break"),
])
def test_a_statement_that_the_bracket_below_continues_is_still_refused(
        language: str, marked: str, fill: str) -> None:
    assert not _fill(marked, fill, language).valid


def test_python_rejects_an_operator_at_a_line_s_end_outside_brackets_itself() -> None:
    """CPython ends a statement at a line break outside brackets: its error is the
    verdict, which the join rule leaves as it was."""
    result = _fill("def f(a):\n    ⟦⟧\n    foo()\n", "x = a +", "python")
    assert not result.valid and "Python: invalid syntax" in result.reason


class _ReplacedAfterEachLook(dict):
    """A document's kept cut (`ParsedDocument._stands_alone`) that another fill's thread,
    judging another span, replaces with its own right after each look at it."""

    def __init__(self, document: validation.ParsedDocument, *args: object) -> None:
        super().__init__(*args)
        self.document = document

    def _replaced(self) -> None:
        self.document._cut = _ReplacedAfterEachLook(self.document)

    def __contains__(self, key: object) -> bool:
        self._replaced()
        return super().__contains__(key)

    def get(self, key: object, default: object = None) -> object:
        self._replaced()
        return super().get(key, default)


def test_a_cut_replaced_by_another_thread_between_a_look_and_a_read_is_still_used() -> None:
    """Fills on one document are validated on several threads, which keep one span's cut
    each: a cut looked up, then read again after another thread replaced the dict,
    raised KeyError in the middle of a fill's validation."""
    text, start, end = _span("function f(a) {\n  ⟦⟧\n  foo();\n}\n")
    document = validation.ParsedDocument(text, "javascript", validation._parser("javascript"))
    assert not document.validate(start, end, "const x = a +").valid  # keeps the span's cut
    document._cut = _ReplacedAfterEachLook(document, document._cut)
    result = document.validate(start, end, "const y = a +")
    assert not result.valid and "joins line 3 to it" in result.reason


def test_a_joined_line_is_numbered_in_the_document_where_a_window_judged_it() -> None:
    head = "".join(f"function g{i}() {{\n  return {i};\n}}\n" for i in range(12_000))
    marked = head + "function f(a) {\n  ⟦⟧\n  foo();\n}\n"
    assert len(marked) > validation.WINDOW_ABOVE
    line = marked.count("\n", 0, marked.index("⟦"))
    result = _fill(marked, "const x = a +", "javascript")
    assert not result.valid and result.new_errors == ((line, 14),)
    assert f"joins line {line + 2} to it" in result.reason


def test_empty_fill_where_the_span_was_optional_is_valid() -> None:
    assert _fill("x = f(1⟦, 2⟧)\n", "", "python").valid


def test_replacement_fill_is_judged_in_place_of_the_old_span() -> None:
    marked = "x = f(1, ⟦2⟧)\n"
    assert _fill(marked, "g(3)", "python").valid
    assert not _fill(marked, "g(3", "python").valid


# --- pre-existing errors ------------------------------------------------------------------


def test_preexisting_error_elsewhere_is_not_blamed_on_the_fill() -> None:
    marked = "def f(:\n    pass\n\nx = ⟦1⟧\n\ndef g(:\n    pass\n"
    result = _fill(marked, "2", "python")
    assert result.checked and result.valid
    assert result.new_errors == ()
    assert "pre-existing" in result.reason


def test_new_error_is_reported_even_when_others_preexist() -> None:
    marked = "def f(:\n    pass\n\nx = ⟦1⟧\n\ndef g(:\n    pass\n"
    result = _fill(marked, "[2", "python")
    assert not result.valid
    assert result.new_errors == ((3, 0),)  # only the edited line, not lines 1 and 6


def test_preexisting_error_after_the_span_is_shifted_by_the_fill_length_in_characters() -> None:
    # The fill is 5 characters but 8 UTF-8 bytes: a byte shift would miss the old error.
    marked = "s = 'ü'\ndef f(:\n    pass\n\nx = ⟦1⟧\n\ndef g(:\n    pass\n"
    assert _fill(marked, "'ééé'", "python").valid
    assert _fill(marked, "'ééé", "python").new_errors == ((4, 4),)


def test_error_that_only_exists_with_the_span_removed_does_not_excuse_the_fill() -> None:
    # Without its span, `x = ` swallows the broken `def` below into one big ERROR; a fill
    # that breaks the line must not hide behind that artifact.
    marked = "x = ⟦1⟧\ndef f(:\n    pass\n"
    assert _fill(marked, "2", "python").valid
    assert not _fill(marked, "[2", "python").valid


def test_deleting_needed_code_is_blamed_although_the_baseline_has_the_same_error() -> None:
    # With the span removed the baseline *is* the candidate, `x = foob)`; only the original
    # document may excuse an error at the fill, and there the code was fine.
    result = _fill("x = foo⟦(a, ⟧b)\ny = 2\n", "", "python")
    assert not result.valid
    assert result.new_errors == ((0, 4),)


def test_neutral_fill_inside_an_already_broken_region_is_not_blamed() -> None:
    # The unclosed `foo(` makes the whole module one ERROR, which overlaps the span.
    marked = "foo(1,\n\nx = 1\ny = 2\n\ndef g():\n    return ⟦3⟧\n"
    result = _fill(marked, "4", "python")
    assert result.checked and result.valid


def test_fill_adding_damage_inside_an_already_broken_region_is_blamed() -> None:
    marked = "foo(1,\n\nx = 1\ny = ⟦2⟧\n\ndef g():\n    return 3\n"
    assert not _fill(marked, "[5", "python").valid


def test_each_error_is_compared_only_with_the_baseline_s_at_its_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of holes to fill is broken at every marker still in it: the 300 errors of a
    fill at one of them are each compared with the baseline errors of their kind at
    their place, not with all 300 (90,000 comparisons a verdict, each in Python), and
    still excuse the markers and blame the fill's own damage."""
    text = "".join(f"def f{k}(x):\n    return <FILL>\n\n\n" for k in range(300))
    at = text.index("<FILL>", len(text) // 2)
    text = text[:at] + text[at + len("<FILL>"):]  # the hole being filled, its marker out
    compared = []
    explains = validation._explains
    monkeypatch.setattr(validation, "_explains",
                        lambda *args: compared.append(args) or explains(*args))
    document = validation.parsed_document(text, "python")
    assert len(document.errors) >= 299
    assert document.validate(at, at, "x + 1").valid
    verdict = document.validate(at, at, "(x + 1")
    assert not verdict.valid and verdict.new_errors[0][0] == text.count("\n", 0, at)
    assert len(compared) <= 4 * len(document.errors)


def test_fill_identical_to_the_span_in_a_valid_document_is_valid() -> None:
    assert _fill("fn main() {\n    let x = ⟦1 + 2⟧;\n}\n", "1 + 2", "rust").valid


# --- offsets ------------------------------------------------------------------------------


def test_non_ascii_text_reports_character_columns() -> None:
    # 'ééé' is 3 characters but 6 bytes: the stray '3' is character 22, byte 25.
    result = _fill('s = "ééé"; x = f(1, ⟦2⟧)\n', "2 3", "python")
    assert not result.valid
    assert result.new_errors == ((0, 22),)


def test_astral_characters_count_as_one_column() -> None:
    result = _fill('let s = "😀😀"; let x = f(1, ⟦2⟧);\n', "(2", "javascript")
    assert result.new_errors == ((0, 30),)  # the ';' where ')' was expected


def test_non_ascii_in_earlier_lines_does_not_shift_columns() -> None:
    result = _fill("# ñandú ☃\nint main() {\n    return ⟦⟧;\n}\n", "f(1", "cpp")
    assert result.new_errors == ((2, 14),)


def test_empty_document_with_empty_fill_is_valid() -> None:
    result = validate_fill("", 0, 0, "", "python")
    assert result.checked and result.valid


def test_fill_into_empty_document_is_checked() -> None:
    assert validate_fill("", 0, 0, "x = 1\n", "python").valid
    assert validate_fill("", 0, 0, "x = (", "python").new_errors == ((0, 0),)


@pytest.mark.parametrize(("start", "end"), [(-1, 0), (2, 1), (0, 99)])
def test_span_outside_the_document_is_rejected(start: int, end: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        validate_fill("x = 1\n", start, end, "2", "python")


# --- skipping -----------------------------------------------------------------------------


def test_unknown_language_is_skipped_with_reason() -> None:
    result = validate_fill("IDENTIFICATION DIVISION.", 0, 0, "((((", "cobol")
    assert result == Validation(False, True, None, (), "no grammar for language 'cobol'")


def test_missing_language_is_skipped_with_reason() -> None:
    result = validate_fill("x = ", 4, 4, "(", None)
    assert not result.checked and result.valid
    assert result.language is None
    assert result.reason


def test_missing_grammar_package_is_skipped_with_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validation, "_PARSERS", {})
    monkeypatch.setitem(validation._GRAMMARS, "go", ("tree_sitter_no_such_grammar", "language"))
    result = validate_fill("package main\n", 13, 13, "func (", "go")
    assert not result.checked and result.valid
    assert result.language == "go"
    assert "tree_sitter_no_such_grammar" in result.reason


def test_parser_is_built_once_per_language() -> None:
    assert validation._parser("python") is validation._parser("python")
    assert validation._parser("python") is not validation._parser("go")


# --- languages ----------------------------------------------------------------------------


def test_supported_languages_are_the_seventeen_grammars() -> None:
    assert set(LANGUAGES) == {
        "python", "javascript", "typescript", "tsx", "go", "rust", "java", "c", "cpp",
        "csharp", "ruby", "php", "bash", "lua", "kotlin", "scala", "swift",
    }


# (document with an insertion point, a valid fill, an invalid fill) for every grammar
CASES = {
    "python": ("def add(a, b):\n    return ⟦⟧\n", "a + b", "a +"),
    "javascript": ("function add(a, b) {\n  return ⟦⟧;\n}\n", "a + b", "a + (b"),
    "typescript": (
        "function add(a: number, b: number): number {\n  return ⟦⟧;\n}\n",
        "(a as number) + b",
        "a + (b",
    ),
    "tsx": ("const App = () => <div>⟦⟧</div>;\n", "<span>{name}</span>", "<span>{name}</"),
    "go": ("package main\n\nfunc add(a, b int) int {\n\treturn ⟦⟧\n}\n", "a + b", "a + (b"),
    "rust": ("fn add(a: i32, b: i32) -> i32 {\n    ⟦⟧\n}\n", "a.wrapping_add(b)", "a + (b"),
    "java": ("class A {\n  int add(int a, int b) {\n    return ⟦⟧;\n  }\n}\n", "a + b", "a +"),
    "c": ("int add(int a, int b) {\n    return ⟦⟧;\n}\n", "a + b", "a + (b"),
    "cpp": ("template <typename T>\nT add(T a, T b) {\n    return ⟦⟧;\n}\n", "a + b", "a + (b"),
    "csharp": ("class A {\n  int Add(int a, int b) {\n    return ⟦⟧;\n  }\n}\n", "a + b",
               "a + (b"),
    "ruby": ("def add(a, b)\n  ⟦⟧\nend\n", "a + b", "a + (b"),
    "php": ("<?php\nfunction add($a, $b) {\n    return ⟦⟧;\n}\n", "$a + $b", "$a + ($b"),
    "bash": ("add() {\n  echo ⟦⟧\n}\n", "$(( $1 + $2 ))", "$(("),
    "lua": ("local function add(a, b)\n  return ⟦⟧\nend\n", "a + b", "a + (b"),
    "kotlin": ("fun add(a: Int, b: Int): Int {\n    return ⟦⟧\n}\n", "a + b", "a + (b"),
    "scala": ("object A {\n  def add(a: Int, b: Int): Int = {\n    ⟦⟧\n  }\n}\n", "a + b",
              "a + (b"),
    "swift": ("func add(a: Int, b: Int) -> Int {\n    return ⟦⟧\n}\n", "a + b", "a + (b"),
}


def test_every_supported_language_has_a_case() -> None:
    assert set(CASES) == set(LANGUAGES)


@pytest.mark.parametrize("language", sorted(CASES))
def test_valid_fill_is_accepted_in_each_language(language: str) -> None:
    marked, good, _ = CASES[language]
    result = _fill(marked, good, language)
    assert result == Validation(True, True, language, (), result.reason)


@pytest.mark.parametrize("language", sorted(CASES))
def test_invalid_fill_is_rejected_in_each_language(language: str) -> None:
    marked, _, bad = CASES[language]
    result = _fill(marked, bad, language)
    assert result.checked and not result.valid
    assert result.language == language
    line = _span(marked)[0].count("\n", 0, _span(marked)[1])
    assert [error_line for error_line, _ in result.new_errors] == [line]


def test_jsx_in_typescript_needs_the_tsx_grammar() -> None:
    marked = "const App = () => <div>⟦⟧</div>;\n"
    assert not _fill(marked, "<b>hi</b>", "typescript").valid
    assert _fill(marked, "<b>hi</b>", "tsx").valid


def test_validate_fill_accepts_lsp_language_ids() -> None:
    result = _fill("const App = () => <div>⟦⟧</div>;\n", "<b>hi</b>", "typescriptreact")
    assert result.checked and result.valid
    assert result.language == "tsx"


@pytest.mark.parametrize(
    ("language_id", "expected"),
    [
        ("python", "python"),
        ("javascript", "javascript"),
        ("javascriptreact", "javascript"),
        ("typescript", "typescript"),
        ("typescriptreact", "tsx"),
        ("go", "go"),
        ("rust", "rust"),
        ("java", "java"),
        ("c", "c"),
        ("cpp", "cpp"),
        ("Python", "python"),
        ("csharp", "csharp"),
        ("ruby", "ruby"),
        ("php", "php"),
        ("shellscript", "bash"),
        ("lua", "lua"),
        ("kotlin", "kotlin"),
        ("scala", "scala"),
        ("swift", "swift"),
    ],
)
def test_language_is_found_from_lsp_language_id(language_id: str, expected: str) -> None:
    assert language_for(language_id) == expected


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("file:///src/app.py", "python"),
        ("file:///src/stubs.pyi", "python"),
        ("file:///src/app.js", "javascript"),
        ("file:///src/app.mjs", "javascript"),
        ("file:///src/app.cjs", "javascript"),
        ("file:///src/App.jsx", "javascript"),
        ("file:///src/app.ts", "typescript"),
        ("file:///src/app.mts", "typescript"),
        ("file:///src/app.cts", "typescript"),
        ("file:///src/App.tsx", "tsx"),
        ("file:///src/types.d.ts", "typescript"),
        ("file:///src/main.go", "go"),
        ("file:///src/lib.rs", "rust"),
        ("file:///src/A.java", "java"),
        ("file:///src/main.c", "c"),
        ("file:///src/main.h", "c"),
        ("file:///src/main.cc", "cpp"),
        ("file:///src/main.cpp", "cpp"),
        ("file:///src/main.cxx", "cpp"),
        ("file:///src/main.hpp", "cpp"),
        ("file:///src/main.hh", "cpp"),
        ("file:///src/Program.cs", "csharp"),
        ("file:///src/app.rb", "ruby"),
        ("file:///src/index.php", "php"),
        ("file:///src/build.sh", "bash"),
        ("file:///src/init.lua", "lua"),
        ("file:///src/Main.kt", "kotlin"),
        ("file:///src/build.gradle.kts", "kotlin"),
        ("file:///src/Main.scala", "scala"),
        ("file:///src/main.swift", "swift"),
        ("/home/me/project/script.PY", "python"),
        ("C:\\work\\main.rs", "rust"),
        ("untitled:notebook.py?cell=3#frag", "python"),
    ],
)
def test_language_is_found_from_file_extension(uri: str, expected: str) -> None:
    assert language_for(None, uri) == expected


def test_language_id_takes_precedence_over_extension() -> None:
    assert language_for("cpp", "file:///src/main.h") == "cpp"


def test_unknown_language_id_falls_back_to_extension() -> None:
    assert language_for("plaintext", "file:///src/main.go") == "go"


@pytest.mark.parametrize("language_id", ["markdown", "sql", "raw"])
def test_a_notebook_cell_of_a_language_not_ours_is_none_whatever_its_notebook_file(
        language_id: str) -> None:
    """A cell's uri holds its notebook's path: a markdown cell of a notebook kept as a .py
    file is no Python, though a cell that names no language is taken as its file's."""
    cell = "vscode-notebook-cell:/work/etl.py#W3sZmlsZQ%3D%3D"
    assert language_for(language_id, cell) is None
    assert language_for("python", cell) == language_for(None, cell) == "python"


@pytest.mark.parametrize(
    ("language_id", "uri"),
    [
        ("cobol", None),
        (None, None),
        ("", "file:///README.md"),
        (None, "file:///src/Makefile"),
        (None, "file:///src.py/notes"),
    ],
)
def test_unknown_language_is_none(language_id: str | None, uri: str | None) -> None:
    assert language_for(language_id, uri) is None


# --- large documents: incremental parsing and validation in a window ----------------------


def _big(language: str, copies: int = 30) -> tuple[str, int, int]:
    """The language's case in the middle of many valid copies of itself."""
    marked, good, _ = CASES[language]
    whole = marked.replace("⟦⟧", good)
    text, start, end = _span(whole * copies + marked + whole * copies)
    return text, start, end


@pytest.fixture
def windowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Validate every document in a window of a few lines, as large documents are."""
    monkeypatch.setattr(validation, "WINDOW_ABOVE", 0)
    monkeypatch.setattr(validation, "WINDOW_LINES", 4)


@pytest.mark.parametrize("language", sorted(CASES))
def test_windowed_validation_gives_the_whole_document_s_verdict(language: str, windowed) -> None:
    _, good, bad = CASES[language]
    text, start, end = _big(language)
    document = validation.parsed_document(text, language)
    low, high = document.window(start, end)
    assert 0 < low and high < len(text), "the window is a part of the document"
    assert document.validate(start, end, good).valid
    verdict = document.validate(start, end, bad)
    assert not verdict.valid
    assert [line for line, _ in verdict.new_errors] == [text.count("\n", 0, start)]
    assert all(a <= start + len(bad) and b >= start for a, b in verdict.new_ranges)  # at the fill


def test_a_php_window_below_the_opening_tag_is_read_as_php(windowed) -> None:
    """A large PHP document's window holds no `<?php` once it is below the tag: read by
    the grammar of .php files as the HTML around a tag, it was one `text` node, and
    every fill in it passed."""
    marked, good, bad = CASES["php"]
    body = marked.removeprefix("<?php\n")
    text, start, end = _span("<?php\n" + body.replace("⟦⟧", good) * 30 + body)
    document = validation.parsed_document(text, "php")
    low, _ = document.window(start, end)
    assert low > 0
    assert document.validate(start, end, good).valid
    assert not document.validate(start, end, bad).valid


def _bundle(functions: int = 400, text: str = "") -> str:
    """A minified bundle: one line, one function around small functions and objects."""
    return ("!function(){var e={};" + "".join(
        f'function a{k}(t,n){{if(!t)return n;for(var o=0;o<t.length;o++)n+=t[o]*{k};'
        f'return n}}e.f{k}=a{k};var s{k}={{id:{k},name:"{text}n{k}"}};'
        for k in range(functions)) + "module.exports=e}();\n")


@pytest.fixture
def one_line_too_long(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Windows of whole lines at most 1,000 characters, from documents of 1,000 on: the
    texts cut out and parsed on their own are listed."""
    monkeypatch.setattr(validation, "WINDOW_ABOVE", 1_000)
    monkeypatch.setattr(validation, "WINDOW_MAX_CHARS", 1_000)
    parts: list[str] = []
    monkeypatch.setattr(validation, "part_parser", lambda language, text: (
        parts.append(text), validation._parser(language))[1])
    return parts


def _whole(text: str, language: str) -> validation.ParsedDocument:
    whole = validation.ParsedDocument(text, language, validation._parser(language))
    whole.windowed = False
    return whole


@pytest.mark.parametrize("text", ["", "é中😀"])
def test_a_fill_in_a_line_too_long_for_a_window_is_validated_in_a_cut_of_it(
        text: str, one_line_too_long: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A minified bundle is one line, so a window of whole lines around a span in it was
    all of it, and the document was validated whole: each fill reparsed the bundle's one
    node (0.35 s at 3 MB).  The window is cut inside the line now, at the boundaries of
    the functions and statements around the span, and says the document's line and
    column (the characters before it may be of one to four bytes)."""
    monkeypatch.setattr(validation, "_BYTE_BLOCK", 7)
    bundle = _bundle(text=text)
    at = bundle.index("return n}", len(bundle) // 2) + len("return")
    document = validation.parsed_document(bundle, "javascript")
    assert document.validate(at, at, " n+1;").valid
    verdict = document.validate(at, at, " n)")
    whole = _whole(bundle, "javascript").validate(at, at, " n)")
    assert not verdict.valid
    assert (verdict.new_errors, verdict.new_ranges, verdict.reason) == (
        whole.new_errors, whole.new_ranges, whole.reason)
    assert one_line_too_long and all(len(part) <= 1_000 for part in one_line_too_long)
    assert all(part in bundle and part.startswith(("function", "e.f", "var"))
               for part in one_line_too_long), "cut at the tree's own boundaries"


def test_a_cut_window_gives_the_whole_document_s_verdict(one_line_too_long) -> None:
    """At every offset of a function in the middle of the bundle, written over and
    inserted: brackets, strings and comments left open, statements and expressions."""
    bundle = _bundle(12)
    low = bundle.index("function a6(")
    high = bundle.index("function a7(")
    document = validation.parsed_document(bundle, "javascript")
    whole = _whole(bundle, "javascript")
    fills = ["", "n+1", "1)", "}", "{", "'", "/*", ";var q=2;"]
    for at, size, fill in itertools.product(range(low, high), (0, 2), fills):
        assert document.validate(at, at + size, fill).valid == whole.validate(
            at, at + size, fill).valid, (bundle[at:at + size], fill)
    assert one_line_too_long


def test_a_fill_that_makes_the_code_after_a_cut_read_otherwise_is_validated_whole(
        one_line_too_long) -> None:
    """A function written over with `n+` makes the next one an operand, and the one
    after that cannot follow it: in a window that ends with the next one, nothing was
    wrong."""
    bundle = "".join(f"function a{k}(t){{return t+{k}}}" for k in range(400)) + "\n"
    start = bundle.index("function a202(")
    end = bundle.index("function a203(")
    assert not validation.parsed_document(bundle, "javascript").validate(
        start, end, "n+").valid


def test_a_closer_taken_out_with_the_span_is_missed_at_the_end_of_a_cut(
        one_line_too_long) -> None:
    """`99}` of the bundle's last function written over with `n+` leaves it open to the
    window's end; the text without the span is missing the same `}` there, which
    excused it."""
    bundle = "!function(){" + "".join(f"function a{k}(t){{return t+{k}}}"
                                      for k in range(400)) + "}();\n"
    at = bundle.index("99}}();")
    document = validation.parsed_document(bundle, "javascript")
    assert document.validate(at, at + 3, "1}").valid
    assert not document.validate(at, at + 3, "n+").valid


def test_damage_already_in_a_long_line_is_not_the_fill_s(one_line_too_long) -> None:
    """A function broken far away and the one next to the span: the cut reads as the
    document does, their errors are in its baselines."""
    bundle = _bundle().replace("function a5(t,n){", "function a5(t,n{", 1)
    at = bundle.index("return n}", len(bundle) // 2) + len("return")
    near = bundle.rfind("for(var o=0;", 0, at - 200)
    bundle = bundle[:near] + "for(var o=0;;" + bundle[near + len("for(var o=0;"):]
    at += 1
    document = validation.parsed_document(bundle, "javascript")
    assert document.errors, "the document is broken"
    assert document.validate(at, at, " n+1;").valid
    assert not document.validate(at, at, " n)").valid


def test_a_cut_that_does_not_read_as_the_document_is_not_used(one_line_too_long) -> None:
    """A dictionary's pairs cut out of their braces are broken code: a fill in a line of
    them is validated in the whole document, as before."""
    table = "T = {" + ", ".join(f'"k{k}": [{k}, {k + 1}]' for k in range(600)) + "}\n"
    at = table.index("[300,") + 1
    document = validation.parsed_document(table, "python")
    assert document._validate_inside_lines(at, at, "1, ") is None
    assert document.validate(at, at, "1, ").valid
    assert not document.validate(at, at, "1, (").valid


def test_a_span_across_statements_of_a_long_line_is_validated_in_a_cut_of_them(
        one_line_too_long: list[str]) -> None:
    """A rewrite selected over the end of one function of a bundle and into the
    statements after it lies in no node but the bundle's body: the document was
    validated whole, two parses of the bundle a candidate (0.7 s at 3 MB).  The window
    is the run of statements the span covers, with one either side, and gives the
    whole document's verdicts."""
    bundle = _bundle()
    at = bundle.index("return n}", len(bundle) // 2) + len("return")
    start, end = at - 20, at + 40  # from inside the for loop to inside `var s..={...}`
    document = validation.parsed_document(bundle, "javascript")
    whole = _whole(bundle, "javascript")
    assert bundle[start:end] == '+)n+=t[o]*203;return n}e.f203=a203;var s203={id:203,name:"n2'
    good, bad = '+)n+=t[o];return n}e.f=a203;var q={name:"n2', '+)n+=t[o]*203;return n}e.f203=a'
    for fill in (good, bad, " #\n  #\n"):
        verdict, expected = document.validate(start, end, fill), whole.validate(start, end, fill)
        assert (verdict.valid, verdict.new_errors, verdict.reason) == (
            expected.valid, expected.new_errors, expected.reason)
    assert document.validate(start, end, good).valid
    assert not document.validate(start, end, bad).valid
    assert one_line_too_long, "validated in a cut"
    for part in one_line_too_long:
        assert len(part) <= 1_000 and part in bundle
        assert part.startswith("var s") and part.endswith("return n}"), "whole statements"


def test_a_span_in_the_blanks_before_a_statement_too_long_to_cut_is_validated_whole(
        one_line_too_long) -> None:
    """The run of statements a span covers starts at the first that ends after it: a
    span in the blanks before it lies outside the run where the statement before is too
    long to join it, and the document is validated whole."""
    text = ("var big=[" + "1," * 495 + "1];  var x=1;var y=2;") * 3 + "\n"
    at = text.index("  var x") + 1
    document = validation.parsed_document(text, "javascript")
    assert document.validate(at, at, "q").valid == _whole(text, "javascript").validate(
        at, at, "q").valid
    assert document.validate(at, at, " ").valid


@pytest.mark.parametrize("items", [
    ",".join(str(k * 7) for k in range(600)),  # numbers
    ",".join(f"(t)=>t+{k}" for k in range(300)),  # arrow functions
])
def test_a_list_s_items_cut_out_of_their_brackets_are_no_window(items: str,
                                                                one_line_too_long) -> None:
    """A list's items, cut out of their brackets, read as one expression of commas, in
    which `1; 2` is code: a fill that ends one item's statement there was accepted,
    which the list cannot hold.  A cut whose top-level nodes are not the document's
    nodes it was cut at (the items) is not used."""
    text = f"const N=[{items}];\n"
    at = text.index(",", len(text) // 2) + 1
    document = validation.parsed_document(text, "javascript")
    assert not document.validate(at, at, "1; 2,").valid
    assert document._validate_inside_lines(at, at, "1; 2,") is None
    assert document.validate(at, at, "1, 2,").valid


BETWEEN_DEFINITIONS = {
    # a blank line between two top-level functions: the module is the only node around it
    "module": ("".join(f"def f{i}(a):\n    b = a + {i}\n    return b\n\n\n" for i in range(40)),
               "def f20("),
    # between two methods of a class far longer than a window
    "class": ("class Big:\n" + "".join(f"    def m{i}(self):\n        return {i}\n\n"
                                      for i in range(40)), "    def m20("),
}


@pytest.mark.parametrize("where", sorted(BETWEEN_DEFINITIONS))
def test_a_span_between_definitions_is_validated_in_a_window_not_the_whole_file(
        where: str, windowed) -> None:
    text, following = BETWEEN_DEFINITIONS[where]
    at = text.index(following) - 1  # the blank line before the definition
    indent = following[:len(following) - len(following.lstrip())]
    document = validation.parsed_document(text, "python")
    low, high = document.window(at, at)
    assert 0 < low and high < len(text) and high - low < len(text) // 4
    assert text[low:high].count("def ") == 2, "the definitions either side, whole"
    whole = validation.ParsedDocument(text, "python", validation._parser("python"))
    whole.windowed = False
    fills = [f"{indent}x = 1\n", f"{indent}x = (1\n"]
    if where == "module":
        # the compiler refuses a `return` outside a function.  A window cut inside a class
        # starts indented, so CPython never reads it (tree-sitter's verdict stands there):
        # the whole file refuses `return` in the class's body, its window does not
        fills.append(f"{indent}return\n")
    for fill in fills:
        assert document.validate(at, at, fill).valid == whole.validate(at, at, fill).valid, fill
    assert not document.validate(at, at, f"{indent}x = (1\n").valid


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_a_window_spans_its_rows_from_the_start_of_the_first_to_the_end_of_the_last(
        language: str, windowed) -> None:
    """Spans at every offset of a document, at its first and last lines too, with and
    without a final line break, within a line and over many: the window is the lines
    `window_rows` chooses for the span's lines, whole, as the document's line starts
    give them (found without listing them, see the test below)."""
    marked, good, _ = CASES[language]
    whole = marked.replace("⟦⟧", good)
    for text in (whole * 6, (whole * 6).rstrip("\n")):
        starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
        document = validation.parsed_document(text, language)
        for start, size in itertools.product(range(len(text) + 1), (0, 3, 150)):
            end = min(len(text), start + size)
            first = bisect.bisect_right(starts, start) - 1
            last = bisect.bisect_right(starts, end) - 1
            top, bottom = document.window_rows(first, last, starts[first], starts[last])
            assert top <= first <= last <= bottom
            assert document.window(start, end) == (
                starts[top], starts[bottom + 1] if bottom + 1 < len(starts) else len(text))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.text(alphabet="a\n\r", max_size=30), st.data())
def test_a_window_edge_is_found_by_stepping_lines_from_the_span_s(text: str, data) -> None:
    """Every line's start (the text's length past its last line), stepped to from any
    line, up or down, is where the text's line breaks put it: a window's edges are found
    this way, without listing the lines of a whole document."""
    starts = [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]
    known = data.draw(st.integers(0, len(starts) - 1))
    row = data.draw(st.integers(0, len(starts) + 2))
    expected = starts[row] if row < len(starts) else len(text)
    assert validation._row_start(text, row, known, starts[known]) == expected


@pytest.mark.parametrize("text", ["x = 1\n", "x = 1\n\n\n", "", "\n", "# only a comment\n"])
def test_a_span_after_the_last_statement_is_validated_in_a_window(text: str, windowed) -> None:
    """No child of the module ends after the span (tree-sitter's lookup of one crashed)."""
    document = validation.parsed_document(text, "python")
    end = len(text)
    low, high = document.window(end, end)
    assert low <= end <= high == len(text)
    assert document.validate(end, end, "y = 2\n").valid
    assert not document.validate(end, end, "y = (2\n").valid


def test_windowed_validation_excuses_damage_elsewhere_in_the_document(windowed) -> None:
    text, start, end = _big("python")
    broken = "def oops(:\n" + text[:start] + "a + b" + text[end:]
    at = len("def oops(:\n") + start
    assert validate_fill(broken, at, at + len("a + b"), "a * b", "python").valid


def test_new_ranges_cover_the_new_error_in_the_filled_document() -> None:
    text, start, end = _span("x = 1\ny = ⟦⟧\nz = 3\n")
    verdict = validate_fill(text, start, end, "(2", "python")
    filled = text[:start] + "(2" + text[end:]
    assert verdict.new_ranges
    a, b = verdict.new_ranges[0]
    assert a <= start + 1 and b >= start  # the error touches the fill
    assert "(" in filled[min(a, start):max(b, start + 2)]


def _naive_common_ends(old: str, new: str) -> tuple[int, int]:
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while (suffix < min(len(old), len(new)) - prefix
           and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]):
        suffix += 1
    return prefix, suffix


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.text(alphabet="ab\né", max_size=40), st.integers(0, 5_000), st.integers(0, 40),
       st.text(alphabet="ab\né", max_size=6), st.integers(0, 3))
def test_the_common_ends_of_two_versions_are_those_a_character_scan_finds(
        base: str, at: int, removed: int, inserted: str, block_power: int) -> None:
    """Edits anywhere in texts longer than a comparison block, small and large blocks."""
    old = (base * (5_000 // max(1, len(base)) + 1))[:5_000] if base else ""
    at = min(at, len(old))
    new = old[:at] + inserted + old[at + removed:]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validation, "_BLOCK", [1, 7, 64, 1 << 15][block_power])
        assert validation._common_ends(old, new) == _naive_common_ends(old, new)
        assert validation._common_ends(new, old) == _naive_common_ends(new, old)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from(["a", "\n", "é", "中", "😀", "\ud800"]), max_size=30).map("".join),
       st.sampled_from([1, 3, 1 << 16]))
def test_a_character_s_byte_offset_and_point_are_those_of_the_text_encoded_up_to_it(
        text: str, block: int) -> None:
    """At every offset, in text with characters of one to four bytes (and a lone
    surrogate, as editors can send), found from the start of its block of characters
    (a document not in ASCII keeps one every _BYTE_BLOCK), blocks of one and more."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(validation, "_BYTE_BLOCK", block)
        document = validation.ParsedDocument(text, "python", validation._parser("python"))
        assert document.data == text.encode("utf-8", "surrogatepass")
        for offset in range(len(text) + 1):
            byte = len(text[:offset].encode("utf-8", "surrogatepass"))
            line = text[:text.rfind("\n", 0, offset) + 1].encode("utf-8", "surrogatepass")
            assert document._place(offset) == (
                byte, (text.count("\n", 0, offset), byte - len(line)))


EDITS = [(0, 0, "import os\n"), (10, 12, ""), (25, 25, "(\n"), (25, 27, ""), (5, 5, "é")]


def test_a_new_version_reparsed_from_the_old_tree_equals_a_fresh_parse() -> None:
    text = "\n".join(f"def f{i}(a):\n    return a + {i}\n" for i in range(20))
    uri = "file:///edits.py"
    previous = validation.parsed_document(text, "python", uri)
    for start, end, inserted in EDITS:
        text = text[:start] + inserted + text[end:]
        document = validation.parsed_document(text, "python", uri)
        fresh = validation.ParsedDocument(text, "python", validation._parser("python"))
        assert document is not previous
        assert str(document.tree.root_node) == str(fresh.tree.root_node)
        assert document.errors == fresh.errors
        previous = document
    assert validation.parsed_document(text, "python", uri) is previous  # same version: reused


def test_a_fill_judged_again_on_the_same_version_is_not_parsed_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Repairs and the retry write texts already judged, the early stop's text is judged
    again as a candidate: each verdict cost parses and CPython's compile."""
    text, start, end = _span("def add(a, b):\n    return ⟦⟧\n")
    document = validation.parsed_document(text, "python", "file:///again.py")
    parses = []
    errors = validation._errors
    monkeypatch.setattr(validation, "_errors", lambda *a: parses.append(1) or errors(*a))
    first = document.validate(start, end, "a + (b")
    counted = len(parses)
    assert counted > 0
    assert document.validate(start, end, "a + (b") == first
    assert len(parses) == counted
    assert document.validate(start, end, "a + b").valid  # another fill is judged anew
    assert len(parses) > counted


def test_a_new_version_judges_a_fill_against_its_own_text() -> None:
    """Verdicts are kept per version: after an edit the same fill at the same offsets is
    judged on the new text, not answered from the old one."""
    uri = "file:///edited.py"
    old = validation.parsed_document("a = \n", "python", uri)
    assert old.validate(4, 4, "1").valid
    new = validation.parsed_document("def \n", "python", uri)  # same length, other code
    assert new is not old
    assert not new.validate(4, 4, "1").valid
    assert validation.validate_fill("a = \n", 4, 4, "1", "python", uri).valid  # and back


@pytest.mark.parametrize("language", sorted(CASES))
def test_a_preexisting_error_elsewhere_does_not_make_a_good_fill_invalid_in_each_language(
        language: str) -> None:
    marked, good, bad = CASES[language]
    broken_copy = marked.replace("⟦⟧", bad)  # the same code, already broken, further up
    text, start, end = _span(broken_copy + "\n" + marked)
    assert validate_fill(text, start, end, good, language).valid
    verdict = validate_fill(text, start, end, bad, language)
    assert not verdict.valid, "a second, new break is still seen"


def test_the_parse_trees_kept_are_bounded_by_size_and_the_latest_is_always_kept(monkeypatch):
    """A tree costs tens of bytes a character, so the trees kept for incremental
    reparsing are bounded by the characters their documents hold, not only by count;
    the document parsed last stays however large, or its next keystroke would be
    parsed from nothing."""
    from collections import OrderedDict

    monkeypatch.setattr(validation, "_DOCUMENTS", OrderedDict())
    monkeypatch.setattr(validation, "_KEEP_CHARACTERS", 1000)
    small = "x = 1\n" * 50  # 300 characters
    for name in "abc":
        validation.parsed_document(small, "python", f"file:///{name}.py")
    assert list(validation._DOCUMENTS) == ["file:///a.py", "file:///b.py", "file:///c.py"]
    validation.parsed_document(small, "python", "file:///d.py")  # 1,200 characters
    assert list(validation._DOCUMENTS) == ["file:///b.py", "file:///c.py", "file:///d.py"]
    big = "y = 2\n" * 400  # 2,400 characters: over the bound alone
    kept = validation.parsed_document(big, "python", "file:///big.py")
    assert list(validation._DOCUMENTS) == ["file:///big.py"]
    edited = big + "z = 3\n"
    assert validation.parsed_document(edited, "python", "file:///big.py").text == edited
    assert validation._DOCUMENTS["file:///big.py"] is not kept  # its next version, kept


def test_a_version_asked_for_while_it_is_parsed_is_parsed_once(monkeypatch):
    """A fill that comes while its document is being parsed (as a large one is when it
    is opened, passes.parse_ahead) waits for that parse and takes its tree, instead of
    parsing the document again from nothing once the first parse lets go."""
    from collections import OrderedDict

    monkeypatch.setattr(validation, "_DOCUMENTS", OrderedDict())
    monkeypatch.setattr(validation, "_PARSING", {})
    real_parse, real_encode, parses = validation.parse, validation._encode_blocks, []
    inside, go = threading.Event(), threading.Event()

    def counted_parse(parser, data, old_tree=None):
        parses.append(old_tree)
        return real_parse(parser, data, old_tree)

    def first_held(text):  # the first parse is held before it begins
        if not inside.is_set():
            inside.set()
            go.wait(30)
        return real_encode(text)

    monkeypatch.setattr(validation, "parse", counted_parse)
    monkeypatch.setattr(validation, "_encode_blocks", first_held)
    text, uri, got = "x = 1\n" * 100, "file:///opened.py", []
    threads = [threading.Thread(target=lambda: got.append(
        validation.parsed_document(text, "python", uri))) for _ in range(2)]
    threads[0].start()
    assert inside.wait(30)
    threads[1].start()
    time.sleep(0.5)  # the second asks while the first parses
    go.set()
    for thread in threads:
        thread.join(30)
    assert parses == [None]
    assert got[0] is got[1]


# --- a long parse lets the server's other threads run --------------------------------------


def test_a_large_text_parses_to_the_same_tree_in_chunks(monkeypatch) -> None:
    monkeypatch.setattr(validation, "PARSE_CHUNK", 1024)
    parser = validation._parser("javascript")
    data = _bundle(400).encode()
    whole = parser.parse(data)
    assert str(validation.parse(parser, data).root_node) == str(whole.root_node)
    middle = data.index(b"n+=t[o]*200;") + len(b"n+=t[o]*")
    edited = data[:middle] + b"7" + data[middle:]
    old = whole.copy()
    point = (0, middle)
    old.edit(middle, middle, middle + 1, point, point, (0, middle + 1))
    assert (str(validation.parse(parser, edited, old).root_node)
            == str(parser.parse(edited).root_node))


def test_other_threads_run_while_a_large_text_parses(monkeypatch) -> None:
    """tree-sitter holds the GIL for a whole parse: the server's event loop answered no
    message (a cancel, a status) for the seconds a large file's first parse took."""
    monkeypatch.setattr(validation, "PARSE_CHUNK", 4096)
    parser = validation._parser("javascript")
    data = _bundle(4000).encode()  # ~110 chunks
    parsing, done, ticks = threading.Event(), threading.Event(), []

    def ticker() -> None:
        parsing.wait()
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0001)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)  # a waiting thread asks for the GIL after 0.2 ms
    thread = threading.Thread(target=ticker)
    thread.start()
    try:
        parsing.set()
        time.sleep(0.01)
        started = time.perf_counter()
        validation.parse(parser, data)
        ended = time.perf_counter()
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert sum(started < tick < ended for tick in ticks) >= 10


# --- what a version keeps between candidates ---------------------------------------------

LEFT_INCOMPLETE = "function f(a) {\n  const x = ⟦⟧\n  %s\n  return x;\n}\n"


def test_candidates_at_one_span_parse_the_document_without_its_lines_once(monkeypatch) -> None:
    """Each candidate at a span is judged against the document with the span's lines taken
    out (a line left incomplete errs on the line below): one parse of the version for
    them all, not one each (in a file of 200 hole markers, a second whole parse a hole)."""
    text, start, _ = _span(LEFT_INCOMPLETE % "return x;")
    document = validation.parsed_document(text, "javascript")
    parses = []
    parse_with = validation.ParsedDocument._parse_with
    monkeypatch.setattr(validation.ParsedDocument, "_parse_with",
                        lambda self, *edit: parses.append(edit) or parse_with(self, *edit))
    verdicts = [document.validate(start, start, fill) for fill in ("", "a +", "a")]
    assert [v.valid for v in verdicts] == [False, False, True]
    assert len(set(parses)) == len(parses)  # each candidate's own, and the lines' once


def test_an_edit_below_the_span_is_read_by_the_next_version_s_verdict() -> None:
    """The lines taken out are parsed again for a new version: a line below that the edit
    broke on its own is no longer blamed on a fill that completes the line at the span
    (read from the last version's lines-out parse, it was: `x = = 1;` started no error
    there), and the empty fill still leaves that line incomplete."""
    uri = "file:///w/left_incomplete.js"
    before, start, _ = _span(LEFT_INCOMPLETE % "return x;")
    assert [validate_fill(before, start, start, fill, "javascript", uri).valid
            for fill in ("", "a")] == [False, True]
    after, start, _ = _span(LEFT_INCOMPLETE % "x = = 1;")
    assert [validate_fill(after, start, start, fill, "javascript", uri).valid
            for fill in ("", "a")] == [False, True]


def test_a_document_is_parsed_while_another_is(monkeypatch) -> None:
    """Each thread parses with a parser of its own: with one parser a language under one
    lock, a fill in a small file waited for a large file's whole parse (one opened a moment
    before, parsed ahead of its fills: 1.4 s at 4.3 M characters), in the plan's parse of
    its lines and in its own document's.  Here the large parse is held in its middle
    while the small document is planned, parsed and validated."""
    from collections import OrderedDict

    from dlm_lsp.span_hints import span_kind

    monkeypatch.setattr(validation, "_DOCUMENTS", OrderedDict())
    monkeypatch.setattr(validation, "_PARSING", {})
    monkeypatch.setattr(validation, "PARSE_CHUNK", 1024)
    inside, go, real_sleep = threading.Event(), threading.Event(), time.sleep
    large_thread: list[threading.Thread] = []

    def held_sleep(seconds: float) -> None:  # the large parse stops at its first chunk
        if threading.current_thread() in large_thread and not inside.is_set():
            inside.set()
            go.wait(30)
        real_sleep(seconds)

    monkeypatch.setattr(validation, "time", SimpleNamespace(sleep=held_sleep,
                                                            monotonic=time.monotonic))
    large = "def f(a):\n    return a + 1\n\n" * 2000
    large_thread.append(threading.Thread(
        target=lambda: validation.parsed_document(large, "python", "file:///large.py")))
    large_thread[0].start()
    try:
        assert inside.wait(30)
        small, ran = "def g(b):\n    return b\n" * 50, []

        def small_fill() -> None:
            ran.append(span_kind(small, 9, 9, "python"))
            ran.append(validation.parsed_document(small, "python", "file:///small.py"))
            ran.append(validation.validate_fill(small, 9, 9, " b = 1;", "python"))

        small_thread = threading.Thread(target=small_fill)
        small_thread.start()
        small_thread.join(10)
        finished = not small_thread.is_alive()
        assert inside.is_set() and not go.is_set()  # the large parse is still held
    finally:
        go.set()
        large_thread[0].join(30)
    small_thread.join(30)
    assert finished
    assert ran[1].text == small and not ran[2].valid
    assert validation._DOCUMENTS["file:///large.py"].text == large


class _CountedText(str):
    """A document's text that records how many characters each `count` call reads."""

    def __new__(cls, text: str, read: list[int]) -> _CountedText:
        made = super().__new__(cls, text)
        made.read = read
        return made

    def count(self, sub, start=0, end=None) -> int:  # type: ignore[override]
        end = len(self) if end is None else end
        self.read.append(max(0, min(end, len(self)) - max(0, start)))
        return super().count(sub, start, end)


def test_a_fill_near_the_end_of_a_large_document_counts_the_lines_around_it_not_before_it(
        windowed) -> None:
    """A version's lines are counted from where it differs from the last one, and then
    from each offset found, not from the document's start: the edit, each fill's window
    and each rejected fill's error counted every line above the span again (~0.3 ms a MB
    each, ~6 ms a request at 1.8 M characters).  The verdicts and the places they name
    are those of counting from the start."""
    text = "".join(f"def f{i}(a):\n    b = a + {i}\n    return b\n\n\n" for i in range(2000))
    at = text.index("def f1990(") + len("def f1990(a):\n    b = ")
    parser = validation._parser("python")
    previous = validation.ParsedDocument(text, "python", parser)
    edited = text[:at] + "c" + text[at:]  # a keystroke near the end: `b = ca + 1990`
    read: list[int] = []
    document = validation.ParsedDocument(_CountedText(edited, read), "python", parser, previous)
    whole = validation.ParsedDocument(edited, "python", parser)
    fills = ("a + 1", "(a +", "a)", "")
    verdicts = [document.validate(at + 1, at + 6, fill) for fill in fills]
    assert [v.valid for v in verdicts] == [True, False, False, True]
    for verdict, fill in zip(verdicts, fills, strict=True):
        assert verdict == whole.validate(at + 1, at + 6, fill), fill
    assert sum(read) < len(text) // 20, "lines counted from the document's start"
    offsets = list(range(0, len(edited), 997))
    random.Random(0).shuffle(offsets)
    assert ([document._row(offset) for offset in offsets]
            == [edited.count("\n", 0, offset) for offset in offsets])


def test_a_parse_behind_others_work_waits_for_it_unless_a_fill_waits_for_the_parse(
        monkeypatch) -> None:
    """`parsed_behind`: a document parsed when it is opened waits between chunks while
    other work is under way, and goes on at once when a fill asks for the same document
    (which waits for that parse rather than making another)."""
    from collections import OrderedDict

    monkeypatch.setattr(validation, "_DOCUMENTS", OrderedDict())
    monkeypatch.setattr(validation, "_PARSING", {})
    monkeypatch.setattr(validation, "PARSE_CHUNK", 1024)
    monkeypatch.setattr(validation, "YIELD_SECONDS", 0.001)
    large, uri, busy, got = "def f(a):\n    return a + 1\n\n" * 2000, "file:///large.py", [True], []

    def ahead() -> None:
        with validation.parsed_behind(lambda: busy[0], uri):
            got.append(validation.parsed_document(large, "python", uri))

    behind = threading.Thread(target=ahead)
    behind.start()
    behind.join(0.5)
    assert behind.is_alive() and uri not in validation._DOCUMENTS  # held while busy
    fill = threading.Thread(target=lambda: got.append(
        validation.parsed_document(large, "python", uri)))
    fill.start()
    fill.join(30)
    done_while_busy = not fill.is_alive() and busy[0]
    busy[0] = False  # (had the fill not freed it, or the test would hang)
    behind.join(30)
    assert done_while_busy
    assert len(got) == 2 and got[0] is got[1] and got[0].text == large
    assert validation._WAITING == {}


def test_a_parse_behind_others_work_waits_for_it_a_bounded_time(monkeypatch) -> None:
    """Work that is never done (a job a closed connection left registered) does not hold
    a parse made behind it, nor its thread, for ever."""
    monkeypatch.setattr(validation, "PARSE_CHUNK", 1024)
    monkeypatch.setattr(validation, "YIELD_SECONDS", 0.001)
    monkeypatch.setattr(validation, "YIELD_LIMIT", 0.2)
    large, done = "def f(a):\n    return a + 1\n\n" * 2000, []

    def ahead() -> None:
        with validation.parsed_behind(lambda: True, "file:///large.py"):
            done.append(validation.parsed_document(large, "python"))

    behind = threading.Thread(target=ahead, daemon=True)  # (ended with the tests if held)
    behind.start()
    behind.join(10)
    assert done and done[0].text == large


def test_parsing_a_large_document_again_and_again_keeps_no_memory() -> None:
    """py-tree-sitter keeps a reference to every piece its read callback returns: a new
    `bytes` a piece lost about twice the document's size at each parse, and a server
    that fills as the user types in a 5 MB file grew without end."""
    import gc
    import tracemalloc

    parser = validation._parser("python")
    data = ("def f(x):\n    return x + 1\n\n" * 40_000).encode()  # 1.2 MB: in pieces
    assert len(data) > 4 * validation.PARSE_CHUNK
    expected = str(parser.parse(data).root_node)
    validation.parse(parser, data, None)  # the thread's buffer, made once
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5):
            assert str(validation.parse(parser, data, None).root_node) == expected
            gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < len(data) // 4, grown  # it was 10 times the document
