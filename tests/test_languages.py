"""Specification of filling code in the brace languages, as an editor user meets it.

The shipped model knows only Python, so what matters here is what the server does
around the model: which fills it accepts, where their lines go, where it cuts them.
A fake model writes a chosen fill (tests/fakes.py) so that each verdict is about the
server, not the model's luck.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import Planted

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.validation import validate_fill


@pytest.fixture
def engine(model_dir: Path) -> Engine:
    return Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False))


def planted_fill(engine: Engine, text: str, at: int, language: str, uri: str, broken: str,
                 length: int = 24):
    """The best candidate of a fill at `at` whose model writes `broken` (repair off)."""
    request = InfillRequest(text, at, at, language, uri, InfillOptions(
        length=length, steps=4, repair_rounds=0, fallback=False))
    Planted(engine, request, broken=broken)
    return engine.infill(request).candidates[0]


def _hole(text: str, language: str, uri: str) -> InfillRequest:
    start = text.index("<FILL>")
    return InfillRequest(text, start, start + len("<FILL>"), language, uri,
                         InfillOptions(length=12, steps=4, repair_rounds=0, fallback=False),
                         is_hole=True)


# (language, document with a hole, a fill that breaks it, a fill that does not)
HOLES = [
    ("java", "class A {\n    int sum(int[] xs) {\n        int total = 0;\n"
             "        for (int x : xs) {\n            <FILL>\n        }\n"
             "        return total;\n    }\n}\n", "total +=", "total += x;"),
    ("c", "int sum(int *xs, int n) {\n    int total = 0;\n"
          "    for (int i = 0; i < n; i++) {\n        <FILL>\n    }\n"
          "    return total;\n}\n", "total +=", "total += xs[i];"),
    ("javascript", "function sum(xs) {\n  let total = 0;\n  for (const x of xs) {\n"
                   "    <FILL>\n  }\n  return total;\n}\n", "x +", "total += x;"),
    ("typescript", "function norm(p: { x: number }): number {\n  return <FILL>;\n}\n",
     "=", "p.x"),
    ("rust", "fn max_of(xs: &[i32]) -> i32 {\n    let mut best = xs[0];\n"
             "    for &x in xs {\n        best = <FILL>;\n    }\n    best\n}\n", "#", "x"),
]


@pytest.mark.parametrize(("language", "text", "broken", "good"), HOLES)
def test_a_hole_s_fill_that_breaks_the_code_is_rejected(
        engine: Engine, language: str, text: str, broken: str, good: str) -> None:
    """The marker is not the user's code: in these grammars it parses as one error node
    over exactly the hole, and a fill that parsed as one error node there was excused
    as damage the document already had."""
    request = _hole(text, language, f"file:///t.{language}")
    start, end = request.start, request.end
    without_marker = text[:start] + text[end:]
    assert not validate_fill(without_marker, start, start, broken, language).valid
    planted = Planted(engine, request, broken=broken, good=good)
    [rejected] = engine.infill(request).candidates
    assert (rejected.text, rejected.valid) == (broken, False)
    assert rejected.check is not None and rejected.check.new_errors
    planted.fixed = True
    [accepted] = engine.infill(request).candidates
    assert (accepted.text, accepted.valid) == (good, True)


@pytest.mark.parametrize(("language", "text", "good"), [
    ("python", "total = add(<FILL>, <FILL>)\n", "1"),
    ("python", "def f():\n    <FILL>\n    <FILL>\n", "x = 1"),
    ("python", "if ready:\n    <FILL>\n<FILL>\n", "print()"),
    ("python", "def f(a, b):\n    return <FILL> + <FILL>\n", "b"),
    ("python", "area = <FILL> * <FILL> / 2\n", "3"),
    ("javascript", "const total = <FILL> + <FILL>;\n", "a"),
    ("python", "x = <FILL>\nlimit = <FILL> * 2\n", "0"),
], ids=["arguments", "statements", "block-above-a-hole", "operands", "operands-twice",
        "javascript-operands", "operand-on-a-later-line"])
def test_a_hole_s_fill_is_not_blamed_for_the_markers_of_the_holes_after_it(
        engine: Engine, language: str, text: str, good: str) -> None:
    """Holes are filled left to right, so the first is checked while the markers of the
    later ones still stand in the document, errors of their own beside the fill: the
    good fill was blamed for them (CPython reports the marker where it reported the
    hole's empty block, or as the error it stops at; tree-sitter's recovery reads the
    marker with the fill into errors the document with the hole did not have)."""
    request = _hole(text, language, f"file:///t.{language}")
    Planted(engine, request, broken=good, good=good)
    [best] = engine.infill(request).candidates
    assert (best.text, best.valid) == (good, True)


def test_a_hole_s_multi_line_fill_is_cut_to_its_longest_valid_start(engine: Engine) -> None:
    """Cutting to whole units keeps the longest start that adds no error: judged with
    the marker in place, a start ending in a stray `(` passed (one error node over the
    hole) and the fill was cut there, broken, instead of before it."""
    text = "function sum(xs) {\n  let total = 0;\n  for (const x of xs) {\n    <FILL>\n  }\n}\n"
    request = _hole(text, "javascript", "file:///t.js")
    Planted(engine, request, broken="total\n    (\n    total += x;")
    [best] = engine.infill(request).candidates
    assert (best.text, best.valid) == ("total", True)


def test_a_ruby_fill_s_end_left_of_the_cursor_ends_the_fill(engine: Engine) -> None:
    """A model that writes the method's `end` (and code after it) at column 0 below a
    cursor in the body has left the block: the fill ends before the `end`, which the
    document already has.  It was moved onto the cursor's column with what followed, a
    second `end` with `puts 2` in the method."""
    text = "def f(a)\n  x = a\n  \nend\n\nputs f(1)\n"
    at = text.index("  \nend") + 2
    best = planted_fill(engine, text, at, "ruby", "file:///t.rb", "y = 1\nend\n\nputs 2")
    assert (best.text, best.valid) == ("y = 1", True)


@pytest.mark.parametrize(("language", "uri", "text", "broken", "expected"), [
    ("ruby", "file:///t.rb", "if a\n  x = 1\n  \nend\n", "y = 2\nelse\n  z = 3", "y = 2"),
    ("ruby", "file:///t.rb", "class A\n  def f\n  end\n  \nend\n", "def g\n  2\nend",
     "def g\n    2\n  end"),
], ids=["else-of-the-cursor-s-if", "a-method-s-own-end"])
def test_a_ruby_fill_s_clauses_and_closers_go_with_their_own_block(
        engine: Engine, language: str, uri: str, text: str, broken: str,
        expected: str) -> None:
    """An `else` the model wrote at the `if`'s column is the `if`'s next clause: the fill
    ends before it (it was moved into the body).  A method the fill opens keeps its
    `end`, moved with it onto the cursor's column (it was cut off, the fill invalid)."""
    at = text.index("  \nend") + 2
    best = planted_fill(engine, text, at, language, uri, broken)
    assert (best.text, best.valid) == (expected, True)


@pytest.mark.parametrize(("language", "uri", "head", "closer", "block"), [
    ("lua", "file:///t.lua", "function t.f(x)", "end", "if x then\n{u}return 2\nend"),
    ("ruby", "file:///t.rb", "def f(x)", "end", "if x\n{u}return 2\nend"),
    ("javascript", "file:///t.js", "function f(x) {", "}", "if (x) {\n{u}return 2;\n}"),
    ("python", "file:///t.py", "def f(x):", "", "if x:\n{u}return 2\nreturn 3"),
])
@pytest.mark.parametrize("step", ["  ", "    "])
def test_a_fill_nests_by_the_cursor_s_step_in_a_file_that_shows_no_other(
        engine: Engine, language: str, uri: str, head: str, closer: str, block: str,
        step: str) -> None:
    """A file with no indented line but the cursor's, which holds only the indentation
    the editor gave it (a new file's first function): that indentation is the file's
    step, and a block the fill opens nests by it, not by the model's own two spaces
    nor by a default.  The fill below, written from column 0, was moved onto the
    cursor's column with four spaces a level, its `return` four past its `if` in a
    file whose other level is two apart."""
    text = f"{head}\n{step}\n{closer}\n" if closer else f"{head}\n{step}\n"
    at = len(head) + 1 + len(step)
    best = planted_fill(engine, text, at, language, uri, block.replace("{u}", "  "))
    first, *rest = block.split("\n")
    expected = "\n".join([first, *(step + line.replace("{u}", step) for line in rest)])
    assert (best.text, best.valid) == (expected, True)


@pytest.mark.parametrize(("text", "broken", "expected"), [
    ("def f(x):\n", "\n  return 2", "\n  return 2"),
    ("def f(x):", "\n  if x:\n    return 2\n  return 3", "\n  if x:\n    return 2\n  return 3"),
    ("def f(x):\n", "\n  return 2\nx = 1", "\n  return 2"),
], ids=["a-body", "a-block-in-it", "then-module-code"])
def test_a_new_python_file_s_first_body_at_two_spaces_is_kept(
        engine: Engine, text: str, broken: str, expected: str) -> None:
    """At the end of `def f(x):`, the file's only line, a body the model writes two spaces
    in is a body: nothing in the file says its step is not two, so reindent keeps it.
    The dedent cut took the block's depth from the span hint's default four, read the
    body as leaving the block, and the fill came back empty."""
    at = len("def f(x):")
    best = planted_fill(engine, text, at, "python", "file:///t.py", broken)
    assert (best.text, best.valid) == (expected, True)


@pytest.mark.parametrize(("language", "uri", "text", "broken", "expected"), [
    ("lua", "file:///t.lua", "function t.f()\n  \nend\n", "if x then\n    return 2\nend",
     "if x then\n    return 2\n  end"),
    ("lua", "file:///t.lua", "function t.f()\n  \nend\n",
     "if x then\n    for i = 1, 2 do\n        y()\n    end\nend\nend",
     "if x then\n    for i = 1, 2 do\n      y()\n    end\n  end"),
    ("ruby", "file:///t.rb", "def f\n  \nend\n", "if x\n    2\nelse\n    3\nend",
     "if x\n    2\n  else\n    3\n  end"),
    ("shellscript", "file:///t.sh", "f() {\n  \n}\n", "if x; then\n    echo 2\nfi",
     "if x; then\n    echo 2\n  fi"),
], ids=["lua-if", "lua-nested-then-the-function-s-end", "ruby-if-else", "shell-if"])
def test_a_block_the_fill_opens_keeps_its_closer_written_left_of_the_cursor(
        engine: Engine, language: str, uri: str, text: str, broken: str,
        expected: str) -> None:
    """A fill written from column 0, four spaces a level, below a cursor two in: its body
    sits right of the cursor, as if written from there, but the `end` of the block its
    first line opens is at column 0.  Those languages close the innermost open block
    whatever the column, so that `end` is the block's own: the fill moves onto the
    cursor's column with it, on the file's two.  The `end` was taken for the cursor's
    block's and cut, leaving an `if` with no `end`; a second `end` is the function's."""
    at = text.index("  \n") + 2
    best = planted_fill(engine, text, at, language, uri, broken, length=32)
    assert (best.text, best.valid) == (expected, True)


@pytest.mark.parametrize(("language", "uri", "text", "broken", "expected"), [
    ("javascript", "file:///t.js", "function f() {\n  \n}\n", "if (x) {\n    return 2;\n}",
     "if (x) {\n    return 2;\n  }"),
    ("c", "file:///t.c", "int f(int x) {\n  \n}\n", "if (x) {\n    return 2;\n}",
     "if (x) {\n    return 2;\n  }"),
    ("go", "file:///t.go", "package main\n\nfunc f(x bool) int {\n  \n}\n",
     "if x {\n    return 2\n}\n}", "if x {\n    return 2\n  }"),
], ids=["javascript-if", "c-if", "go-if-then-the-function-s-brace"])
def test_a_brace_block_the_fill_opens_moves_with_its_closer_written_left_of_the_cursor(
        engine: Engine, language: str, uri: str, text: str, broken: str,
        expected: str) -> None:
    """The same fill in a brace language: its `}` at column 0 closes the `if` whatever its
    column, so the fill was written from column 0 and moves onto the cursor's column
    with it, on the file's two.  The `}` stayed at column 0, valid but left of the block
    it closes (and of the function's body); a second `}` is the function's, cut."""
    at = text.index("  \n") + 2
    best = planted_fill(engine, text, at, language, uri, broken, length=32)
    assert (best.text, best.valid) == (expected, True)


@pytest.mark.parametrize(("language", "uri", "text", "header", "broken", "expected"), [
    ("lua", "file:///t.lua", "do\n  function g()\n  end\nend\n", "function g()",
     "\n    return 2\nend", "\n    return 2"),
    ("ruby", "file:///t.rb", "class A\n  def g\n  end\nend\n", "def g",
     "\n    2\nend", "\n    2"),
    ("shellscript", "file:///t.sh", "f() {\n  if true; then\n  fi\n}\n", "then",
     "\n    echo 2\nfi", "\n    echo 2"),
    ("lua", "file:///t.lua", "map('n', ']]', function()\nend)\n", "function()",
     "\n  jump(1)\nend)", "\n  jump(1)"),
], ids=["lua-function", "ruby-def", "shell-then", "lua-callback"])
def test_a_fill_at_the_end_of_a_keyword_block_header_writes_its_body(
        engine: Engine, language: str, uri: str, text: str, header: str, broken: str,
        expected: str) -> None:
    """At the end of `function g()` (`def g`, `then`) whose `end` the document holds, the
    fill is the block's body: the model's `end` below it is the document's, cut.  The
    line was taken for an unfinished statement (single-line), so only the fill's first
    line was kept: an empty fill, offered as valid."""
    at = text.index(header) + len(header)
    best = planted_fill(engine, text, at, language, uri, broken)
    assert (best.text, best.valid) == (expected, True)


DOC_COMMENT = "/// Sums.\n///\n/// Returns 0 when empty.\nfn f() {}\n"


@pytest.mark.parametrize(("start", "written", "expected"), [
    (DOC_COMMENT.index("///\n") + 3, "", DOC_COMMENT),
    (3, "  ", DOC_COMMENT.replace(" Sums.", "  ")),
], ids=["a-line-break-written-as-nothing", "a-line-s-end-written-as-blanks"])
def test_a_rewrite_keeps_the_line_break_its_selection_ended_in(
        engine: Engine, start: int, written: str, expected: str) -> None:
    """A selection that ends in a line break before code is shown to the model with that
    line break in the suffix, and the fill gets it back after: it is the document's.  It
    came back only after a fill with code, so a rewrite the model wrote as nothing or
    blanks joined the lines either side (`///` and the comment line below it: a
    selection from the end of a Rust doc comment's blank line to the next line)."""
    end = DOC_COMMENT.index("\n", start) + 1
    request = InfillRequest(DOC_COMMENT, start, end, "rust", "file:///t.rs",
                            InfillOptions(length=8, steps=4, repair_rounds=0, fallback=False))
    Planted(engine, request, broken=written)
    best = engine.infill(request).candidates[0]
    assert DOC_COMMENT[:start] + best.text + DOC_COMMENT[end:] == expected


SCRIPT = ('if [ -z "$SOURCED" ]; then\n    set "$0" "$@"\nfi\n\n'
          'start() {\n\tSTATUS=0\n\trun || STATUS=$?\n\treturn $STATUS\n}\n')


@pytest.mark.parametrize("selected", ["start() {", "\tSTATUS=0"], ids=["function", "body"])
def test_a_rewrite_is_indented_as_the_code_it_replaces(engine: Engine, selected: str) -> None:
    """A selection is the user's code until the rewrite replaces it: its lines are the
    document's indentation as much as any other's.  Read without them, a small script
    whose only tab-indented code is the function selected showed one line of spaces
    (the `set` at its top), and the function written back as it was came back in spaces."""
    start = SCRIPT.index(selected)
    end = SCRIPT.index("\n}") + (2 if selected.startswith("start") else 0)
    request = InfillRequest(SCRIPT, start, end, "shellscript", "file:///t.sh",
                            InfillOptions(length=48, steps=4, repair_rounds=0, fallback=False))
    Planted(engine, request, broken=SCRIPT[start:end])
    best = engine.infill(request).candidates[0]
    assert SCRIPT[:start] + best.text + SCRIPT[end:] == SCRIPT
