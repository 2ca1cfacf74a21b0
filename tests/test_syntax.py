"""Specification of dlm_lsp.syntax, span_hints and units: the syntax tree steers what a
fill is and where it ends.

Documents are written with the span marked as ⟦old text⟧ (⟦⟧ for a cursor); `_span` removes
the markers and returns the text plus the span's character offsets.
"""

from __future__ import annotations

import pytest

from dlm_lsp.indentation import IndentStyle, detect_indent, reindent, to_cursor_column
from dlm_lsp.passes import shape_fill
from dlm_lsp.policy import SpanPlan, local_text
from dlm_lsp.results import InfillRequest
from dlm_lsp.span_hints import MULTI_LINE, SINGLE_LINE, SpanHint, span_kind
from dlm_lsp.syntax import enclosing_node_range
from dlm_lsp.units import truncate_to_units


def _span(marked: str) -> tuple[str, int, int]:
    """Turn 'a⟦b⟧c' into ('abc', 1, 2)."""
    start = marked.index("⟦")
    end = marked.index("⟧") - 1
    return marked.replace("⟦", "").replace("⟧", ""), start, end


def _kind(marked: str, language: str) -> SpanHint | None:
    return span_kind(*_span(marked), language)


def _truncate(marked: str, fill: str, language: str) -> str:
    text, start, end = _span(marked)
    return truncate_to_units(text, start, end, fill, language)


def _enclosing(marked: str, language: str) -> str | None:
    text, start, end = _span(marked)
    found = enclosing_node_range(text, start, end, language)
    return None if found is None else text[found[0]:found[1]]


def _reindent(marked: str, fill: str, language: str | None = None) -> str:
    text, start, end = _span(marked)
    return reindent(fill, text, start, end, language)


# --- span_kind: single-line or multi-line, from the tree around the cursor -----------------


def test_cursor_inside_an_argument_list_is_single_line() -> None:
    hint = _kind("def f(x):\n    return max(x, ⟦⟧)\n", "python")
    assert hint == SpanHint(SINGLE_LINE, 1, "    ", "argument_list", "call")


def test_cursor_in_an_unfinished_condition_is_single_line() -> None:
    hint = _kind("function f(a) {\n  if (a > ⟦⟧\n}\n", "javascript")
    assert hint is not None and hint.kind == SINGLE_LINE and hint.max_lines == 1


def test_blank_line_in_an_empty_function_body_is_multi_line_at_the_body_indent() -> None:
    hint = _kind("def f(x):\n    ⟦⟧\n", "python")
    assert hint == SpanHint(MULTI_LINE, 16, "    ", "block", "function_definition")


def test_end_of_a_block_header_line_is_multi_line_one_level_deeper() -> None:
    hint = _kind("class A:\n  def f(self):⟦⟧\n", "python")
    assert hint is not None and hint.kind == MULTI_LINE
    assert hint.indent == "    " and hint.owner_type == "function_definition"


@pytest.mark.parametrize(("language", "marked", "owner"), [
    ("lua", "do\n  function g()⟦⟧\n  end\nend\n", "function_declaration"),
    ("lua", "do\n  if x then⟦⟧\n  end\nend\n", "if_statement"),
    ("ruby", "class A\n  def g⟦⟧\n  end\nend\n", "method"),
    ("ruby", "class A\n  xs.each do |x|⟦⟧\n  end\nend\n", "do_block"),
    ("bash", "f() {\n  if true; then⟦⟧\n  fi\n}\n", "if_statement"),
    ("lua", "do\n  map('n', ']]', function()⟦⟧\n  end)\nend\n", "function_definition"),
    ("ruby", "class A\n  run(xs.map do |x|⟦⟧\n  end)\nend\n", "do_block"),
], ids=["lua-function", "lua-then", "ruby-def", "ruby-do-block", "bash-then",
        "lua-callback", "ruby-block-in-a-call"])
def test_end_of_a_keyword_block_header_line_is_multi_line_one_level_deeper(
        language: str, marked: str, owner: str) -> None:
    """Ruby, Lua and shell headers end with no bracket (`def g`, `function g()`, `then`),
    and were read as an unfinished statement: single-line, so a fill writing the body
    (`\n    return 2`) kept only its first line, nothing.  So was a callback passed to
    a call, whose header leaves the call's bracket open (Neovim's `vim.keymap.set('n',
    ']]', function()`)."""
    hint = _kind(marked, language)
    assert hint is not None and hint.kind == MULTI_LINE
    assert (hint.indent, hint.owner_type) == ("    ", owner)


def test_a_header_that_continues_a_statement_opens_a_body_a_step_right_of_the_statement(
        ) -> None:
    """The standard library's codecs write `class IncrementalDecoder(mbc.Multibyte...,` and
    `                         codecs.IncrementalDecoder):` (aligned under the `(`): the
    body is four in, a step right of the `class`.  Read as a step right of the line that
    ends in `:`, 29 in, the body written where the file has it was a dedent out of the
    block, and the unit cut left nothing."""
    marked = ("class Codec:\n    x = 1\n\nclass IncrementalDecoder(Multibyte,\n"
              "                         codecs.IncrementalDecoder):⟦⟧\n\nclass B:\n    y = 2\n")
    hint = _kind(marked, "python")
    assert hint is not None and (hint.kind, hint.indent) == (MULTI_LINE, "    ")
    assert _truncate(marked, "\n    codec = codec", "python") == "\n    codec = codec"


@pytest.mark.parametrize(("language", "marked"), [
    ("ruby", "def g(a, ⟦⟧\n"),
    ("ruby", "x = 1 # def g⟦⟧\n"),
    ("bash", "echo to do⟦⟧\n"),
    ("lua", "if x then y()⟦⟧\n"),
], ids=["inside-a-parameter-list", "in-a-comment", "shell-words", "code-after-then"])
def test_a_line_that_opens_no_keyword_block_stays_single_line(language: str,
                                                              marked: str) -> None:
    hint = _kind(marked, language)
    assert hint is not None and hint.kind == SINGLE_LINE


@pytest.mark.parametrize(("marked", "indent", "guessed_past"), [
    ("def f(x):⟦⟧\n", "    ", ""),
    ("class A:\n  def f(self):⟦⟧\n", "    ", None),
    ("def f(x):\n  ⟦⟧\n", "  ", None),
], ids=["no-line-shows-a-step", "the-file-shows-two", "the-editor-indented-the-line"])
def test_a_body_s_indentation_says_whether_it_is_a_guess(
        marked: str, indent: str, guessed_past: str | None) -> None:
    """Below a header in a file with no indented line the body's indentation is the
    header's plus a default unit, which nothing in the file confirms: the hint names the
    header's indentation it guessed past, so that a fill's own body may say otherwise.
    A step the file shows, or the editor's indentation of the cursor's line, is measured."""
    hint = _kind(marked, "python")
    assert hint is not None and (hint.indent, hint.guessed_past) == (indent, guessed_past)


def test_a_colon_that_opens_no_block_is_not_a_header() -> None:
    hint = _kind("f = lambda x:⟦⟧\n", "python")
    assert hint is not None and hint.kind == SINGLE_LINE


def test_python_blank_line_picks_the_block_the_cursor_column_stands_in() -> None:
    marked = "def f(x):\n    if x:\n        y = 1\n    ⟦⟧\n"
    hint = _kind(marked, "python")
    assert hint is not None and (hint.indent, hint.owner_type) == ("    ", "function_definition")
    deeper = _kind(marked.replace("    ⟦⟧", "        ⟦⟧"), "python")
    assert deeper is not None and (deeper.indent, deeper.owner_type) == ("        ", "if_statement")


def test_python_blank_line_between_top_level_definitions_is_at_module_level() -> None:
    hint = _kind("def f():\n    return 1\n⟦⟧\ndef g():\n    return 2\n", "python")
    assert hint is not None and (hint.kind, hint.indent, hint.node_type) == (
        MULTI_LINE, "", "module")


def test_blank_line_in_a_bracketed_list_aligns_with_its_elements() -> None:
    hint = _kind("xs = [\n    1,\n    ⟦⟧\n]\n", "python")
    assert hint == SpanHint(MULTI_LINE, 4, "    ", "list", "assignment")


def test_brace_block_indentation_follows_its_statements() -> None:
    hint = _kind("function f(a) {\n  const b = 1;\n  ⟦⟧\n  return b;\n}\n", "javascript")
    assert hint == SpanHint(MULTI_LINE, 8, "  ", "statement_block", "function_declaration")


def test_cursor_between_braces_is_multi_line() -> None:
    hint = _kind("fn f() -> i32 {⟦⟧}\n", "rust")
    assert hint is not None and hint.kind == MULTI_LINE and hint.node_type == "block"


@pytest.mark.parametrize(("language", "marked", "indent", "owner"), [
    ("javascript", "function f(a) {\n  ⟦⟧\n}\n", "  ", "function_declaration"),
    ("typescript", "function f(a: number): number {\n  ⟦⟧\n}\n", "  ", "function_declaration"),
    ("tsx", "class A {\n  ⟦⟧\n}\n", "  ", "class_declaration"),
    ("go", "package main\n\nfunc f() int {\n\t⟦⟧\n}\n", "\t", "function_declaration"),
    ("rust", "impl A {\n    fn f(&self) -> i32 {\n        ⟦⟧\n    }\n}\n", "        ",
     "function_item"),
    ("java", "class A {\n    int f() {\n        ⟦⟧\n    }\n}\n", "        ", "method_declaration"),
    ("c", "int f(void) {\n    ⟦⟧\n}\n", "    ", "function_definition"),
    ("cpp", "int f() {\n    ⟦⟧\n}\n", "    ", "function_definition"),
])
def test_blank_line_in_a_function_body_is_multi_line(language: str, marked: str, indent: str,
                                                     owner: str) -> None:
    hint = _kind(marked, language)
    assert hint is not None and hint.kind == MULTI_LINE
    assert (hint.indent, hint.owner_type) == (indent, owner)


def test_python_cursor_at_column_zero_at_the_end_of_the_file_starts_top_level_code() -> None:
    hint = _kind("def f():\n    return 1\n\n⟦⟧", "python")
    assert hint is not None and (hint.kind, hint.indent, hint.node_type) == (
        MULTI_LINE, "", "module")


def test_blank_line_in_a_docstring_is_prose_at_its_indentation() -> None:
    hint = _kind('def f():\n    """Sum.\n\n⟦⟧\n    """\n', "python")
    assert hint == SpanHint(MULTI_LINE, 4, "    ", "string", "expression_statement")


def test_cursor_inside_a_string_or_comment_is_single_line_text() -> None:
    hint = _kind('fn f() { let s = "ab⟦⟧c"; }\n', "rust")
    assert hint is not None and (hint.kind, hint.node_type) == (SINGLE_LINE, "string_literal")
    hint = _kind("int f(void) { /* sums ⟦⟧ */ }\n", "c")
    assert hint is not None and (hint.kind, hint.node_type) == (SINGLE_LINE, "comment")


def test_code_inside_an_f_string_is_not_text() -> None:
    hint = _kind('x = f"{a + ⟦⟧}"\n', "python")
    assert hint is not None and hint.node_type == "interpolation"


def test_span_kind_accepts_lsp_language_ids() -> None:
    assert _kind("const x = ⟦⟧;\n", "typescriptreact") is not None


def test_unknown_language_has_no_hint() -> None:
    assert _kind("x = ⟦⟧\n", "cobol") is None
    assert _kind("x = ⟦⟧\n", None) is None


def test_the_span_text_is_ignored_like_a_hole() -> None:
    hint = _kind("def f(x):\n    ⟦<FILL>⟧\n", "python")
    assert hint is not None and hint.kind == MULTI_LINE and hint.indent == "    "


# --- truncate_to_units: whole blocks, whole statements -------------------------------------


def test_python_fill_stops_before_a_dedented_definition() -> None:
    fill = "y = x + 1\n    return y\n\ndef g():\n    return 2\n"
    assert _truncate("def f(x):\n    ⟦⟧\n", fill, "python") == "y = x + 1\n    return y"


def test_python_fill_stops_at_the_end_of_the_cursor_block() -> None:
    marked = "def f(x):\n    if x:\n        ⟦⟧\n    return 0\n"
    fill = "y = 1\n        return y\n    else:\n        return 2"
    assert _truncate(marked, fill, "python") == "y = 1\n        return y"


def test_python_trailing_half_statement_is_dropped() -> None:
    fill = "y = x + 1\n    z = y * 2\n    return foo(z,"
    assert _truncate("def f(x):\n    ⟦⟧\n", fill, "python") == "y = x + 1\n    z = y * 2"


def test_python_trailing_block_header_without_body_is_dropped() -> None:
    fill = "y = x + 1\n    if y:"
    assert _truncate("def f(x):\n    ⟦⟧\n    return 0\n", fill, "python") == "y = x + 1"


@pytest.mark.parametrize("fill", ["y = x + 1\n    return y", "y = x + 1\n    return y\n"])
def test_python_whole_fill_is_unchanged(fill: str) -> None:
    assert _truncate("def f(x):\n    ⟦⟧\n", fill, "python") == fill


def test_python_string_lines_at_column_zero_are_not_a_dedent() -> None:
    fill = 'y = """\nat column 0\n"""\n    return y\ndef g():\n    pass'
    result = _truncate("def f(x):\n    ⟦⟧\n", fill, "python")
    assert result == 'y = """\nat column 0\n"""\n    return y'


def test_python_comment_at_column_zero_is_not_a_dedent() -> None:
    fill = "y = 1\n# note\n    return y"
    assert _truncate("def f(x):\n    ⟦⟧\n", fill, "python") == fill


@pytest.mark.parametrize(("language", "marked", "fill", "kept"), [
    ("ruby", "def f(a)\n  ⟦⟧\nend\n\nputs f(1)\n",
     "x = a + 1\n  x * 2\nend\n\ndef g\n  3\n", "x = a + 1\n  x * 2"),
    ("ruby", "def f(a)\n  if a\n    ⟦⟧\n  end\nend\n",
     "x = 1\n    y = 2\n  else\n    z = 3\n", "x = 1\n    y = 2"),
    ("lua", "local function f(a)\n  ⟦⟧\nend\n\nprint(f(1))\n",
     "local x = a + 1\n  return x\nend\n\nlocal function g()\n  return 3\n",
     "local x = a + 1\n  return x"),
])
def test_a_keyword_block_fill_stops_where_it_dedents_past_the_cursor_s_block(
        language: str, marked: str, fill: str, kept: str) -> None:
    """Ruby's and Lua's `end` sits at its block's own indentation: a fill line left of
    the cursor's block closes it, so the fill ends there, as a Python fill ends at a
    dedent (whole as it is: the suffix's `end` would close the extra `def g`)."""
    assert _truncate(marked, fill, language) == kept


def test_a_keyword_block_fill_that_stays_in_its_block_is_unchanged() -> None:
    fill = "  y = 2\n  z = 3\n"
    assert _truncate("def f(a)\n  x = 1\n⟦⟧\nend\n", fill, "ruby") == fill


def test_python_fill_inside_brackets_stops_before_the_suffix_closer() -> None:
    assert _truncate("xs = [\n    ⟦⟧\n]\n", "1,\n    2,\n]\nys = 3", "python") == "1,\n    2,"


def test_header_fill_keeps_its_body_and_stops_at_the_next_statement() -> None:
    marked = "def f(x):⟦⟧\n\nprint(1)\n"
    fill = "\n    y = 1\n    return y\n\nprint(2)\n"
    assert _truncate(marked, fill, "python") == "\n    y = 1\n    return y"


BRACE_CASES = [
    ("javascript", "function f(a) {\n  ⟦⟧\n}\n",
     "const b = a + 1;\n  return b;", "\n}\n\nfunction g() {\n  return 2;\n}\n", "\n  return g("),
    ("typescript", "function f(a: number): number {\n  ⟦⟧\n}\n",
     "const b: number = a + 1;\n  return b;", "\n}\nfunction g(): number {", "\n  return g(b,"),
    ("go", "package main\n\nfunc f() int {\n\t⟦⟧\n}\n",
     "x := 1\n\treturn x", "\n}\n\nfunc g() int {\n\treturn 2\n}\n", "\n\tfmt.Println(x,"),
    ("rust", "fn f() -> i32 {\n    ⟦⟧\n}\n",
     "let x = 1;\n    x + 1", "\n}\n\nfn g() -> i32 {\n    2\n}\n", "\n    let y = vec![x,"),
    ("java", "class A {\n    int f() {\n        ⟦⟧\n    }\n}\n",
     "int x = 1;\n        return x;", "\n    }\n\n    int g() {\n        return 2;\n    }\n",
     "\n        int y = g(x,"),
    ("c", "int f(void) {\n    ⟦⟧\n}\n",
     "int x = 1;\n    return x;", "\n}\n\nint g(void) {\n    return 2;\n", "\n    int y = g(x,"),
    ("cpp", "int f() {\n    ⟦⟧\n}\n",
     "int x = 1;\n    if (x) {\n        x++;\n    }", "\n}\nint g() {", "\n    return x"),
]


@pytest.mark.parametrize(("language", "marked", "whole", "beyond", "half"), BRACE_CASES)
def test_brace_fill_that_closes_the_block_is_cut_before_the_closer(
        language: str, marked: str, whole: str, beyond: str, half: str) -> None:
    assert _truncate(marked, whole + beyond, language) == whole


@pytest.mark.parametrize(("language", "marked", "whole", "beyond", "half"), BRACE_CASES)
def test_brace_fill_drops_a_trailing_half_statement(
        language: str, marked: str, whole: str, beyond: str, half: str) -> None:
    assert _truncate(marked, whole + half, language) == whole


@pytest.mark.parametrize(("language", "marked", "whole", "beyond", "half"), BRACE_CASES)
def test_brace_whole_fill_is_unchanged(language: str, marked: str, whole: str, beyond: str,
                                       half: str) -> None:
    assert _truncate(marked, whole, language) == whole


def test_fill_keeps_the_closer_the_suffix_lacks_and_stops_after_it() -> None:
    fill = "const b = a + 1;\n  return b;\n}\n\nfunction g() {\n  return 2;\n}\n"
    assert _truncate("function f(a) {\n  ⟦⟧\n", fill, "javascript") == (
        "const b = a + 1;\n  return b;\n}")


def test_fill_ending_with_the_needed_closer_and_a_line_break_is_already_whole() -> None:
    fill = "return a;\n}\n"
    assert _truncate("function f(a) {\n  ⟦⟧\n", fill, "javascript") == fill


def test_braces_inside_strings_do_not_count() -> None:
    fill = "const s = `}${a}` + '}';\n  return s;\n}\nfunction g() {"
    assert _truncate("function f(a) {\n  ⟦⟧\n}\n", fill, "javascript") == (
        "const s = `}${a}` + '}';\n  return s;")


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("bash", "#!/bin/sh\n⟦⟧\nexec $prog\n", "prog=$(basename $0)\ndir=$(dirname $0)"),
    ("ruby", "def f(env)\n  ⟦⟧\nend\n", "servers = %w(puma thin)\n  warn \"#{env} dropped\""),
    ("swift", "func f() -> String {\n    ⟦⟧\n}\n", 'let s = "\\(a)"\n    return "\\(s)!"'),
])
def test_a_bracket_spelled_with_a_prefix_opens_what_its_closer_closes(
        language: str, marked: str, fill: str) -> None:
    """Shell's `$(`, Ruby's `#{` and `%w(`, Swift's `\\(` are tokens of their own, not
    `(` or `{`: their `)` or `}` was read as closing the cursor's bracket, so a fill of
    whole statements was cut inside its first one (`prog=$(basename $0`)."""
    assert _truncate(marked, fill, language) == fill


def test_cut_fill_before_a_code_line_keeps_its_line_break() -> None:
    fill = "  a++;\n  a--;\n}\nfunction g() {\n"
    result = _truncate("function f(a) {\n⟦⟧  return a;\n}\n", fill, "javascript")
    assert result == "  a++;\n  a--;\n"


def test_truncation_counts_characters_not_bytes() -> None:
    marked = "def f(x):\n    s = 'héllo wörld ☃'\n    ⟦⟧\n"
    fill = "y = 'ü'\n    return y\n\ndef g():\n    return 'é'\n"
    assert _truncate(marked, fill, "python") == "y = 'ü'\n    return y"


def test_single_line_fill_and_unknown_language_are_unchanged() -> None:
    assert _truncate("def f(x):\n    return ⟦⟧\n", "foo(x,", "python") == "foo(x,"
    assert _truncate("f :: Int\n⟦⟧\n", "f = 1\nzz(", "haskell") == "f = 1\nzz("


# --- enclosing_node_range: grow a selection to the statement around it ---------------------


def test_selection_inside_a_statement_grows_to_the_whole_line_of_it() -> None:
    assert _enclosing("def f(x):\n    y = ⟦foo(x)⟧ + 1\n    return y\n", "python") == (
        "    y = foo(x) + 1")


def test_enclosing_range_is_in_characters_with_non_ascii_text() -> None:
    marked = "def f(x):\n    s = 'héllo ☃'\n    y = ⟦'ü'⟧ + s\n    return y\n"
    assert _enclosing(marked, "python") == "    y = 'ü' + s"


def test_selection_across_statements_grows_to_those_statements_only() -> None:
    marked = "def f(x):\n    a = 0\n    y⟦ = 1\n    z⟧ = 2\n    return y\n"
    assert _enclosing(marked, "python") == "    y = 1\n    z = 2"


@pytest.mark.parametrize("marked", [
    "class A:\n    def total(self, xs):\n⟦        result = 0⟧\n        return result\n",
    "class A:\n    def total(self, xs):\n⟦        result = 0\n⟧        return result\n",
    "class A:\n    def total(self, xs):\n        ⟦result = 0  ⟧\n        return result\n",
])
def test_a_whole_line_selected_grows_to_its_own_statement_not_the_one_around_it(marked):
    """Both editors send the cursor's line from column 0: its indentation lies outside
    its statement's node, and grown from there the line became its whole method."""
    assert _enclosing(marked, "python").strip() == "result = 0"


def test_a_whole_line_in_a_loop_grows_to_that_line_not_the_loop() -> None:
    marked = "def f(xs):\n    r = 0\n    for x in xs:\n⟦        r += x⟧\n    return r\n"
    assert _enclosing(marked, "python") == "        r += x"


def test_enclosing_range_always_contains_the_selection() -> None:
    text, start, end = _span("def f(x):\n⟦    y = 1\n⟧    return y\n")
    found = enclosing_node_range(text, start, end, "python")
    assert found is not None and found[0] <= start and found[1] >= end


def test_cursor_between_top_level_statements_has_no_enclosing_node() -> None:
    assert _enclosing("x = 1\n⟦⟧\ny = 2\n", "python") is None
    assert _enclosing("x = ⟦1⟧\n", "cobol") is None


@pytest.mark.parametrize(("language", "marked", "expected"), [
    ("javascript", "function f(a) {\n  if (a) {\n    return ⟦a + 1⟧;\n  }\n}\n",
     "    return a + 1;"),
    ("typescript", "function f(a: number) {\n  const b: number = ⟦a⟧;\n}\n",
     "  const b: number = a;"),
    ("go", "package main\n\nfunc f() int {\n\tx := ⟦1⟧\n\treturn x\n}\n", "\tx := 1"),
    ("rust", "fn f() -> i32 {\n    let x = ⟦1⟧;\n    x\n}\n", "    let x = 1;"),
    ("java", "class A {\n    int f() {\n        int x = ⟦1⟧;\n        return x;\n    }\n}\n",
     "        int x = 1;"),
    ("c", "int f(void) {\n    int x = ⟦1⟧;\n    return x;\n}\n", "    int x = 1;"),
    ("cpp", "int f(int n) {\n    for (int i = 0; i < ⟦n⟧; i++) {}\n    return 0;\n}\n",
     "    for (int i = 0; i < n; i++) {}"),
    ("csharp", "class A {\n    int F() {\n        int x = ⟦1⟧;\n        return x;\n    }\n}\n",
     "        int x = 1;"),
    ("ruby", "def f\n  x = ⟦1⟧\n  x\nend\n", "  x = 1"),
    ("php", "<?php\nfunction f() {\n    $x = ⟦1⟧;\n    return $x;\n}\n", "    $x = 1;"),
    ("bash", "f() {\n  local x=⟦1⟧\n  echo $x\n}\n", "  local x=1"),
    ("lua", "local function f()\n  local x = ⟦1⟧\n  return x\nend\n", "  local x = 1"),
    ("kotlin", "fun f(): Int {\n    val x = ⟦1⟧\n    return x\n}\n", "    val x = 1"),
    ("scala", "object A {\n  def f(): Int = {\n    val x = ⟦1⟧\n    x\n  }\n}\n", "    val x = 1"),
    ("swift", "func f() -> Int {\n    let x = ⟦1⟧\n    return x\n}\n", "    let x = 1"),
])
def test_selection_inside_a_statement_per_language(language: str, marked: str,
                                                   expected: str) -> None:
    assert _enclosing(marked, language) == expected


def test_decorated_definition_grows_with_its_decorator() -> None:
    marked = "@cache\ndef f(x):\n    return x\n\n\n@cache\ndef ⟦g⟧(x):\n    return x\n"
    assert _enclosing(marked, "python") == "@cache\ndef g(x):\n    return x"


# --- reindent: the document's indentation, never the fill's code ---------------------------


def test_document_indentation_is_detected() -> None:
    assert detect_indent("def f():\n  if x:\n    pass\n") == IndentStyle(False, 2)
    assert detect_indent("func f() {\n\tx := 1\n}\n") == IndentStyle(True, 4)
    assert detect_indent("x = 1\n") == IndentStyle(False, 4)
    assert detect_indent("x := 1\n", "go").tabs
    assert IndentStyle(False, 2).unit == "  " and IndentStyle(True, 4).unit == "\t"


def test_a_c_header_s_doc_comments_do_not_outvote_its_tabs() -> None:
    """` * ` lines of block comments start with a space at column 0; in a tab-indented
    header with more comment lines than code lines they made it a file of spaces, and a
    fill's tab-indented body was rewritten in spaces."""
    doc = "/**\n * The frobnicator.\n *\n * It frobs.\n */\n"
    text = doc + "struct f {\n\tint a;\n};\n" + doc + "int g(void) {\n\treturn 1;\n}\n"
    assert detect_indent(text, "c").tabs


GO_SCRIPT = ("package cmd\n\ntype Flag struct {\n\tName string `json:\"name\"`\n}\n\n"
             "func gen(name string) string {\n\treturn fmt.Sprintf(`# completion for %s\n"
             + "".join(f"    if ($x -eq {i}) {{\n        `+\"`t\"+`\n    }}\n"
                       for i in range(20))
             + "`, name)\n}\n\nfunc run() {\n\tgen(\"a\")\n}\n")


def test_a_go_raw_string_s_lines_are_not_the_file_s_indentation() -> None:
    """A raw string's lines are text: cobra writes its shell and PowerShell completion
    scripts, hundreds of lines in spaces, in raw strings, and they outnumbered the file's
    tabs (a fill's or a rewrite's body came back in spaces).  A struct tag's backquotes
    open no raw string, nor does one in a string spliced into it (PowerShell's `t)."""
    assert GO_SCRIPT.count("\n    ") > GO_SCRIPT.count("\n\t")  # spaces outnumber tabs
    assert detect_indent(GO_SCRIPT, "go").tabs


GOOGLE_JAVA = ("class A {\n  void f() {\n"
               "    assertThat(gson.toJson(x))\n        .isEqualTo(\"a\");\n"
               "    assertThat(gson.toJson(y))\n        .isEqualTo(\"b\");\n"
               "    assertThat(z)\n        .isTrue();\n    ⟦⟧\n  }\n}\n")


def test_a_continuation_s_indentation_is_not_the_document_s_step() -> None:
    """A block's step is measured below the line that opens it: Google's Java style nests
    blocks by two and continues a statement four in, and its continuations outnumbered
    its blocks, so the file read as four a level."""
    assert detect_indent(_span(GOOGLE_JAVA)[0], "java") == IndentStyle(False, 2)


def test_a_fill_in_a_file_whose_continuations_step_further_keeps_the_file_s_step() -> None:
    fill = "for (int i = 0; i < 3; ++i) {\n      list.add(i);\n    }"
    assert _reindent(GOOGLE_JAVA, fill, "java") == fill


def test_a_document_whose_only_step_is_a_continuation_s_shows_no_step() -> None:
    """Lodash's one-function modules: with the function's body the fill, the only indented
    line left is `    CLONE_SYMBOLS_FLAG = 4;`, the second of a `var` statement, whose
    four spaces moved the fill's body from two to four."""
    marked = "var CLONE_DEEP_FLAG = 1,\n    CLONE_SYMBOLS_FLAG = 4;\n\n⟦⟧\n\nmodule.exports = f;\n"
    assert not detect_indent(_span(marked)[0], "javascript").measured
    fill = "function f(value) {\n  return baseClone(value, CLONE_DEEP_FLAG);\n}"
    assert _reindent(marked, fill, "javascript") == fill


def test_a_python_dict_s_lines_are_no_step_of_the_document() -> None:
    """A Python line ending in `{` opens a dict or set, not a block: its lines are a
    continuation, four in where the blocks nest by two (a two-space notebook's cell
    holding `_hoppish = {` above a function whose body is the span read as four)."""
    text = "_hoppish = {\n    'connection', 'keep-alive',\n}.__contains__\n\ndef f(name):\n"
    assert not detect_indent(text, "python").measured
    assert detect_indent("x = {\n    1: 2,\n}\n\nif x:\n  y = 1\n", "python") == (
        IndentStyle(False, 2))


@pytest.mark.parametrize("marked", ["x = {\n    'a': 1,\n}\n\ndef f(y):⟦⟧",
                                    "x = {\n    'a': 1,\n}\n\ndef f(y):\n  ⟦⟧"])
def test_a_two_space_body_below_a_python_dict_comes_back_at_two(marked: str) -> None:
    fill = "z = y\n  return z" if marked.endswith("  ⟦⟧") else "\n  z = y\n  return z"
    assert _shaped(marked, fill, "python") == fill


def test_spaces_become_tabs_in_a_tab_document() -> None:
    marked = "package main\n\nfunc f() int {\n\tx := 1\n\t⟦⟧\n}\n"
    fill = "y := 2\n    if y > x {\n        y--\n    }\n    return x + y"
    assert _reindent(marked, fill, "go") == (
        "y := 2\n\tif y > x {\n\t\ty--\n\t}\n\treturn x + y")


@pytest.mark.parametrize(("marked", "first"), [
    ("package main\n\nfunc f(xs []int) int {\n\tt := 0\n\tfor _, x := range xs {\n\t\t⟦⟧\n"
     "\t}\n\treturn t\n}\n", "\tt += x"),  # in the line's indentation, after a '{'
    ("package main\n\nfunc f(xs []int) int {\n\tt := 0\n\tfor _, x := range xs {\n⟦⟧\n"
     "\t}\n\treturn t\n}\n", "\tt += x"),  # at column 0
])
def test_a_tab_document_s_fill_has_no_spaces_in_its_first_line_s_indentation(
        marked: str, first: str) -> None:
    fill = "    t += x\n    if x > 0 {\n        t++\n    }"
    result = _reindent(marked, fill, "go")
    assert result.split("\n")[0] == first  # its width kept: one tab for the fill's step
    text, start, end = _span(marked)
    filled = text[:start] + result + text[end:]
    leading = [line[:len(line) - len(line.lstrip())] for line in filled.split("\n")]
    assert all(" " not in blanks for blanks in leading), filled


def test_tabs_become_spaces_in_a_space_document() -> None:
    fill = "z = 2\n\tif z:\n\t\tz += 1\n\treturn z"
    assert _reindent("def f(x):\n    y = 1\n    ⟦⟧\n", fill, "python") == (
        "z = 2\n    if z:\n        z += 1\n    return z")


_SPACES = "def a(x):\n    if x:\n        return 1\n    return 2\n\n\n"  # most of the file
_TABS = _SPACES.replace("    ", "\t")


@pytest.mark.parametrize(("marked", "fill", "expected"), [
    # a tab-indented function in a file of spaces: the fill in spaces, or in tabs
    (_SPACES + "def f(x):\n\ty = 1\n\t⟦⟧\n", "if x:\n        y = 2\n    return y",
     "if x:\n\t\ty = 2\n\treturn y"),
    (_SPACES + "def f(x):\n\ty = 1\n\t⟦⟧\n", "if x:\n\t\ty = 2\n\treturn y",
     "if x:\n\t\ty = 2\n\treturn y"),
    (_SPACES + "def f(x):\n\ty = 1\n⟦⟧\n", "\tif x:\n\t\ty = 2\n\treturn y",  # column 0
     "\tif x:\n\t\ty = 2\n\treturn y"),
    # a space-indented function in a file of tabs
    (_TABS + "def f(x):\n    y = 1\n    ⟦⟧\n", "if x:\n\t\ty = 2\n\treturn y",
     "if x:\n        y = 2\n    return y"),
    # a method body that goes on from its class's spaces with a tab (valid Python 3)
    ("class A:\n    x = 1\n\n    def f(self):\n    \ty = 1\n    \t⟦⟧\n",
     "if y:\n        y = 2\n    return y", "if y:\n    \t\ty = 2\n    \treturn y"),
    ("class A:\n    x = 1\n\n    def f(self):\n    \ty = 1\n⟦⟧\n",  # column 0
     "    \tif y:\n    \t\ty = 2\n    \treturn y", "    \tif y:\n    \t\ty = 2\n    \treturn y"),
], ids=["tab-block-spaced-fill", "tab-block-tabbed-fill", "tab-block-column-0",
        "space-block-in-tab-file", "tab-after-class-spaces", "tab-after-class-spaces-column-0"])
def test_a_python_fill_is_indented_in_its_block_s_own_characters(marked: str, fill: str,
                                                                  expected: str) -> None:
    """The tabs or spaces of the block the fill goes in, not those of most of the file:
    Python rejects a block whose lines begin with other characters (TabError)."""
    result = _reindent(marked, fill, "python")
    assert result == expected
    text, start, end = _span(marked)
    compile(text[:start] + result + text[end:], "filled.py", "exec")  # no TabError


_C_SPACES = "struct a {\n    int x;\n    int y;\n};\n\nstruct b {\n    int z;\n};\n\n"


@pytest.mark.parametrize(("marked", "language", "fill", "expected"), [
    # the end of a header whose body, below the fill, is in tabs in a file of spaces
    (_SPACES + "def f(x):⟦⟧\n\treturn x\n", "python", "\n    y = 1\n    x += y",
     "\n\ty = 1\n\tx += y"),
    (_C_SPACES + "typedef struct {⟦⟧\n\tCARD16 zero;\n} Req;\n", "c",
     "\n    CARD8 reqType;\n    CARD8 data;", "\n\tCARD8 reqType;\n\tCARD8 data;"),
    # and the other way round: a body of spaces in a file of tabs
    (_TABS + "def f(x):⟦⟧\n    return x\n", "python", "\n\ty = 1\n\tx += y",
     "\n    y = 1\n    x += y"),
    # a body that already goes on from its header's tab with spaces (valid Python 3)
    ("class A:\n\tx = 1\n\n\tdef f(self):⟦⟧\n\t    return 1\n", "python",
     "\n\t\ty = 1", "\n\t    y = 1"),
], ids=["python-tab-body-below", "c-tab-members-below", "space-body-below-in-tab-file",
        "tab-and-spaces-body-below"])
def test_a_fill_at_the_end_of_a_header_joins_the_body_below_it(marked: str, language: str,
                                                               fill: str, expected: str):
    """At the end of a line that opens a block with lines already in it, the fill's
    lines go among those lines, so they begin with their whitespace: tabs where they
    have tabs, whatever most of the file has (X11's headers write some structs' members
    with tabs in files of spaces; perf's scripts some functions)."""
    result = _reindent(marked, fill, language)
    assert result == expected
    if language == "python":
        text, start, end = _span(marked)
        compile(text[:start] + result + text[end:], "filled.py", "exec")  # no TabError


# (level below the cursor's, code) of a fill whose blocks nest; its first line continues
# the cursor's line, and documents open their blocks by `unit` (⟦⟧ on a blank body line)
_NESTED = {
    "python": ("def f(a):\n{u}b = 1\n{u}if a:\n{u}{u}b += 1\n{u}⟦⟧\n",
               [(0, "if b:"), (1, "for x in a:"), (2, "b += x"), (0, "return b")]),
    "javascript": ("function f(a) {\n{u}let b = 1;\n{u}if (a) {\n{u}{u}b++;\n{u}}\n{u}⟦⟧\n}\n",
                   [(0, "if (b) {"), (1, "for (const x of a) {"), (2, "b += x;"), (1, "}"),
                    (0, "}"), (0, "return b;")]),
}


@pytest.mark.parametrize("language", sorted(_NESTED))
@pytest.mark.parametrize("unit", ["  ", "    ", "\t"])
@pytest.mark.parametrize("fill_unit", ["  ", "    "])
def test_a_fill_s_blocks_open_by_the_document_s_step(language: str, unit: str,
                                                     fill_unit: str) -> None:
    marked, lines = _NESTED[language]
    cursor = fill_unit if unit == "\t" else unit  # a tab stands for the fill's step
    fill = "\n".join([lines[0][1]] + [cursor + fill_unit * level + code
                                      for level, code in lines[1:]])
    assert _reindent(marked.replace("{u}", unit), fill, language).split("\n") == (
        [lines[0][1]] + [unit * (1 + level) + code for level, code in lines[1:]])


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("python", "x = 1\n⟦⟧\n", "if x:\n  y = 2\n  z = 3"),  # no indented line: no step known
    ("java", "class A {\n  void f() {\n    ⟦⟧\n  }\n}\n",  # no block opens in the fill:
     "int x = foo(\n        a, b);\n    return x;"),  # a continuation's indentation is its own
])
def test_a_fill_keeps_its_step_where_a_step_is_not_known(language: str, marked: str,
                                                         fill: str) -> None:
    assert _reindent(marked, fill, language) == fill


_UNINDENTED_C = "/*\n * A point.\n */\nstruct point {\n⟦⟧\n};\n"  # comment lines only


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("c", _UNINDENTED_C, "\tint x;\n\tint y;"),  # a header's only indented lines, the fill's
    ("python", "x = 1\n⟦⟧\n", "if x:\n\ty = 2\n\tz = 3"),
])
def test_a_fill_in_tabs_keeps_them_where_no_line_of_the_document_is_indented(
        language: str, marked: str, fill: str) -> None:
    """Nothing in the document says tabs or spaces, and the fill's tabs say tabs: they
    were rewritten in the default four spaces (/usr/include/linux/ppdev.h's struct)."""
    assert _reindent(marked, fill, language) == fill


def test_the_editor_s_spaces_on_the_cursor_s_line_outweigh_the_fill_s_tabs() -> None:
    marked = _UNINDENTED_C.replace("⟦⟧", "  ⟦⟧")
    assert _reindent(marked, "int x;\n\tint y;", "c") == "int x;\n  int y;"


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("javascript", "function f(x) {\n  ⟦⟧\n}\n", "if (x) {\n      return 2;\n  }",
     "if (x) {\n    return 2;\n  }"),
    ("python", "def f(x):\n  ⟦⟧\n", "if x:\n      return 2\n  return 3",
     "if x:\n    return 2\n  return 3"),
])
def test_the_cursor_s_indentation_is_the_step_of_a_file_that_shows_no_other(
        language: str, marked: str, fill: str, expected: str) -> None:
    """The editor indented the cursor's blank line by the file's step (two here), and no
    other line shows one: a fill that nests by four from the cursor's column is put on
    two, as in a file whose lines show two.  It kept its four: the unit of a file with
    no indented line was taken for unknown."""
    assert _reindent(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("python", "def f(x):⟦⟧\n", "\nif x:\n  return 2\nreturn 3",
     "\n    if x:\n        return 2\n    return 3"),
    ("lua", "function f(x)⟦⟧\nend\n", "\nif x then\n  return 2\nend",
     "\n    if x then\n        return 2\n    end"),
])
def test_a_block_opened_on_the_cursor_s_line_of_a_new_file_gets_the_default_step(
        language: str, marked: str, fill: str, expected: str) -> None:
    """With the cursor at column 0 nothing shows the file's step, the model's own two
    included: the body goes one default step in, where the span hint puts it (and with
    it Python's dedent cut, which cut a body kept at two to nothing)."""
    result = _reindent(marked, fill, language)
    assert result == expected
    text, start, end = _span(marked)
    assert truncate_to_units(text, start, end, result, language) == result


@pytest.mark.parametrize(("marked", "fill", "expected"), [
    ("def f(x):⟦⟧\n", "\n  return 2", "\n  return 2"),
    ("def f(x):⟦⟧\n", "\n  if x:\n    return 2\n  return 3", "\n  if x:\n    return 2\n  return 3"),
    ("import os\ndef f(x):⟦⟧\n", "\n  return 2\n\ndef g():\n  pass", "\n  return 2"),
    ("def f(x):\n⟦⟧\n", "\n  return 2\nx = 1", "\n  return 2"),
    ("def f(x):⟦⟧\n", "\nreturn 2", ""),
], ids=["a-body-at-two", "a-block-in-it", "then-a-definition", "cursor-below-header",
        "no-body"])
def test_a_new_file_s_first_body_is_as_deep_as_the_fill_writes_it(
        marked: str, fill: str, expected: str) -> None:
    """No line of the file shows its step, so a block opened on the cursor's line has its
    body where the fill's first line below puts it, if right of the header: a body two
    spaces in was taken for a dedent out of a block four in (the span hint's guess) and
    cut to nothing.  A line back at the header's column still leaves the block."""
    assert _truncate(marked, fill, "python") == expected


def test_the_end_of_a_block_the_document_opens_is_not_moved_as_the_fill_s_own() -> None:
    """At the end of `function g()`, whose `end` the document holds, an `end` the fill
    writes left of the cursor's line closes no block of the fill's: it stays where it
    was written (`dlm_lsp.units` ends the fill before it), not moved onto g's column."""
    marked = "do\n  function g()⟦⟧\n  end\nend\n"
    assert _reindent(marked, "\n    return 2\nend", "lua") == "\n    return 2\nend"


def test_fill_on_a_different_base_is_shifted_to_the_cursor_line() -> None:
    fill = "if y:\n    z = 2\nelse:\n    z = 3\nreturn z"
    assert _reindent("def f(x):\n    y = 1\n    ⟦⟧\n", fill) == (
        "if y:\n        z = 2\n    else:\n        z = 3\n    return z")


def test_fill_on_the_right_base_is_unchanged() -> None:
    fill = "if y:\n        z = 2\n    return z"
    assert _reindent("def f(x):\n    y = 1\n    ⟦⟧\n", fill, "python") == fill


def test_header_body_written_at_the_wrong_level_moves_one_document_step_deeper() -> None:
    marked = "function f(a) {\n    let b = 1;\n    ⟦⟧\n}\n"
    assert _reindent(marked, "if (a) {\n  b++;\n}\nreturn b;", "javascript") == (
        "if (a) {\n        b++;\n    }\n    return b;")


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("java", "class A {\n  String f(int s) {\n    switch (s) {\n      ⟦⟧\n      default:\n"
             "        return \"b\";\n    }\n  }\n}\n",
     "case 1:\n      case 2:\n        return \"a\";"),
    ("c", "int f(int s) {\n    switch (s) {\n    ⟦⟧\n    }\n    return 0;\n}\n",
     "case 1:\n    case 2:\n        return 1;"),
    ("cpp", "class A {\n  ⟦⟧\n  int y;\n};\n", "public:\n  int x;"),
])
def test_a_line_ending_in_a_colon_opens_no_block_outside_python(
        language: str, marked: str, fill: str) -> None:
    """A `case 1:` with `case 2:` below it at its column, or C++'s `public:` with its
    members, is written at the document's columns: read as a Python header whose body
    sat at its column, every line below it moved a step right."""
    assert _reindent(marked, fill, language) == fill


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("go", "package main\n\nfunc f(s string) int {\n\t⟦⟧\n\treturn 0\n}\n",
     "switch s {\n\tcase \"a\", \"b\":\n\t\treturn 1\n\tdefault:\n\t\treturn 2\n\t}"),
    ("c", "int f(int s)\n{\n\t⟦⟧\n\treturn 0;\n}\n",
     "switch (s) {\n\tcase 1:\n\t\treturn 1;\n\tdefault:\n\t\treturn 2;\n\t}"),
    ("swift", "func f(_ s: Int) -> Int {\n    ⟦⟧\n}\n",
     "switch s {\n    case 1:\n        return 1\n    default:\n        return 2\n    }"),
])
def test_a_switch_s_labels_at_its_own_column_are_the_document_s(
        language: str, marked: str, fill: str) -> None:
    """gofmt, the Linux kernel and Swift write a switch's `case` and `default` at the
    column of its `switch`: a label right below the `{` at its column is no body written
    a step too far left, and moving it (and all below) a step right broke the style."""
    assert _reindent(marked, fill, language) == fill


def test_a_shell_line_ending_in_a_question_mark_or_an_equals_sign_is_a_whole_command(
        ) -> None:
    """`RESULT=$?` and `X=` end with what ends a line that goes on elsewhere (`a ?`,
    `x =`): read so, the `else` below was a continuation of the `if` body's last
    command, and the `else` body written at its column moved a step right."""
    marked = "if test -z \"$*\"; then\n  run\n  RESULT=$?\nelse⟦⟧\n  RESULT=$?\nfi\n"
    assert _reindent(marked, "\n  run \"$@\"", "bash") == "\n  run \"$@\""


@pytest.mark.parametrize(("marked", "fill"), [
    ("class Queue {⟦⟧\nprivate:\n  int size_;\n};\n", "\npublic:\n  void push(int x);"),
    ("namespace n\n{\n  class Queue\n  {⟦⟧\n  private:\n    int size_;\n  };\n}\n",
     "\n  public:\n    void push(int x);"),
], ids=["llvm", "gnu"])
def test_a_cpp_class_s_access_label_at_its_column_is_the_document_s(
        marked: str, fill: str) -> None:
    """LLVM, Qt and GNU write `public:` at the column of its class (or of the class's
    own `{`): a label right below the `{` at its column is no body written a step too
    far left, and the fill was moved a step right, its members two steps."""
    assert _reindent(marked, fill, "cpp") == fill


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    # libstdc++ (GNU): `public:` at the column of its class's `{`, two in
    ("cpp", "namespace n\n{\n  class Queue\n  {⟦⟧\n  private:\n    int size_;\n  };\n}\n",
     "\n  public:\n      void push(int x);\n\n      /// Pops.\n      void pop();",
     "\n  public:\n    void push(int x);\n\n    /// Pops.\n    void pop();"),
    # a clause right below its header, two in: Ruby's `else` of an empty `if`
    ("ruby", "def f(x)\n  if x⟦⟧\n  end\nend\n", "\n  else\n      g(x)", "\n  else\n    g(x)"),
], ids=["cpp-gnu", "ruby-else"])
def test_a_fill_below_its_header_s_own_line_is_re_stepped_from_that_line(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A fill whose first line is at its header's column (a C++ access label, a next
    clause) is re-stepped from that column: a model nesting by four writes the members
    four past a `public:` two in, and that step was read from column 0 (the label two
    in, the members six: a step of two, the file's), so they kept their four spaces a
    level (libstdc++'s pb_ds sample policies, the request round trip in four spaces)."""
    assert _reindent(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    # prettier: a call's arguments one a line, one step in, in a file of two
    ("javascript", "function f(a) {\n  const x = g(\n    a,\n  );\n  ⟦⟧\n  return x;\n}\n",
     "const y = h(\n      a,\n      b,\n  );", "const y = h(\n    a,\n    b,\n  );"),
    # Google Java (gson): blocks two in, a continuation four, written eight
    ("java", "class A {\n  void f() {\n    Gson gson =\n        new GsonBuilder().create();\n"
             "    ⟦⟧\n  }\n}\n",
     "Gson other =\n            new GsonBuilder()\n                    .create();",
     "Gson other =\n        new GsonBuilder()\n            .create();"),
    # a Lua call's arguments, a call in them
    ("lua", "local function f(x)\n  health.ok(\n    x\n  )\nend\n\nlocal function g(p)\n"
            "  ⟦⟧\nend\n",
     "health.error(\n      string.format(\n          'failed: %s',\n          p\n      )\n  )",
     "health.error(\n    string.format(\n      'failed: %s',\n      p\n    )\n  )"),
], ids=["javascript", "java", "lua"])
def test_a_fill_s_continuations_written_in_fours_are_re_stepped(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A fill of one statement continued on the lines below (a call's arguments one a
    line, a value below its `=`) shows no block step, only its continuations': nested
    by four where the document's continuations nest by its unit (prettier, ktfmt), or
    by eight where they nest by two of its units (Google Java), they are the document's
    written by a model that nests by four, and go on the document's.  They kept their
    four spaces a level (481 of the 597 fills of the request round trip in four spaces
    that still differed)."""
    assert _reindent(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill"), [
    # lodash: `var a,` and its next name four in, in a file of two, as the fill
    ("javascript", "var a = require('./a'),\n    b = require('./b');\n\nfunction f() {\n"
                   "  return g(\n    a\n  );\n}\n⟦⟧\n",
     "var c = require('./c'),\n    d = require('./d');"),
    # a document that continues no line: nothing says what the fill's step is
    ("javascript", "function f() {\n  return 1;\n}\n⟦⟧\n", "const y = h(\n    a,\n);"),
    # Python: a bracket's lines are aligned, no level (PEP 8)
    ("python", "def f(a):\n  return g(\n    a)\n⟦⟧\n", "x = h(\n    a)"),
], ids=["step-shown", "nothing-shown", "python"])
def test_a_fill_s_continuations_are_kept_without_the_document_s_evidence(
        language: str, marked: str, fill: str) -> None:
    """A continuation nested by a step the document's own continuations show somewhere
    is the writer's (lodash's `var a,` / `    b` four in, in files of two), and one the
    document shows no continuation to compare with says nothing: both are kept, as a
    Python bracket's lines, whose column is an alignment."""
    assert _reindent(marked, fill, language) == fill


# Google's and LLVM's styles: a namespace's body at the column of `namespace`
_FLUSH_NAMESPACES = ("namespace a {\n\nint g() {\n  return 1;\n}\n\n}  // namespace a\n\n"
                     "namespace b {⟦⟧\n}  // namespace b\n")


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("cpp", "namespace dap {⟦⟧\n\nint g() {\n  return 1;\n}\n\n}  // namespace dap\n",
     "\nint f() {\n  return 0;\n}"),
    # KDE's kate: the `{` on a line of its own
    ("cpp", "#include \"bus.h\"\n\nnamespace dap\n{⟦⟧\n\nBus::State Bus::state() const\n{\n"
            "    return m_state;\n}\n}\n", "\nBus::Bus(QObject *parent)\n    : QObject(parent)\n"
                                            "{\n}"),
    # the fill is all of the body: the file's other namespaces say where it goes
    ("cpp", _FLUSH_NAMESPACES, "\nint f() {\n  return 0;\n}"),
    ("c", "#ifdef __cplusplus\nextern \"C\" {⟦⟧\n#endif\n\nint g(void);\n\n#ifdef __cplusplus\n"
          "}\n#endif\n", "\nint f(void);"),
], ids=["namespace", "namespace-brace-below", "namespace-elsewhere", "extern-c"])
def test_a_namespace_body_at_the_header_s_column_is_the_document_s(
        language: str, marked: str, fill: str) -> None:
    """Google's and LLVM's styles write a namespace's body (and C headers their `extern
    "C"` block's) at the column of its header: a fill there at the end of the header,
    where the file's namespaces keep that column, is no body written a step too far
    left, and moving it a step right broke the file's style."""
    assert _reindent(marked, fill, language) == fill


# ncurses's and autoconf's scripts: a case arm's pattern at the column of its `case`
_FLUSH_ARMS = ("for opt in \"$@\"; do\n\tcase $opt in\n\t--help)\n\t\tusage\n\t\t;;\n\tesac\ndone\n"
               "if [ -n \"$dir\" ]; then\n\tcase $dir in⟦⟧\n\tesac\nfi\n")


@pytest.mark.parametrize(("arms", "expected"), [
    ("\t--help)\n\t\tusage\n\t\t;;",) * 2,
    ("  --help)\n    usage\n    ;;", "    --help)\n      usage\n      ;;"),
], ids=["at-the-case-column", "indented"])
def test_a_shell_case_s_arms_go_where_the_file_s_other_cases_put_them(
        arms: str, expected: str) -> None:
    """A fill at the end of `case $dir in` whose arms the model writes at the column of
    the `case` is where a script that writes its other cases' patterns so has them
    (ncurses6-config), not a body a step too far left; in a script whose arms are a
    step in, the fill's arms move there, as any block's."""
    marked = _FLUSH_ARMS if arms.startswith("\t") else (
        "case $1 in\n  a)\n    run\n    ;;\nesac\nif true; then\n  case $dir in⟦⟧\n  esac\nfi\n")
    assert _reindent(marked, "\n" + arms, "bash") == "\n" + expected


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("bash", "f() {\n    a\n}\n\ng() {\n    b\n}\n\ndo_resume()\n{⟦⟧\n  lock\n}\n",
     "\n  unlock"),
    ("javascript", "function f() {\n    a();\n}\nfunction g() {⟦⟧\n        b();\n}\n",
     "\n        if (c) {\n                d();\n        }"),
    # a header that continues a statement: the step is read from the header's line
    ("kotlin", "fun f() {\n  metadata(\"a\")\n    .apply {⟦⟧\n      check()\n    }\n}\n",
     "\n      a()\n      b()"),
], ids=["two-in-a-file-of-four", "eight-in-a-file-of-four", "continued-header"])
def test_a_fill_at_a_header_s_end_takes_the_step_its_block_s_lines_below_show(
        language: str, marked: str, fill: str) -> None:
    """The block a fill opens at the end of its header may have lines already, a step in
    other than the file's (a function two spaces in, in a script of four: xdg-screensaver;
    perf's eight in a file of two): the fill goes among them at their step, not re-stepped
    to the file's."""
    assert _reindent(marked, fill, language) == fill


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    # a comment alone at the header's end, among the block's lines two in (zustand)
    ("typescript", "function f() {⟦⟧\n  b();\n}\n", "\n    // why", "\n  // why"),
    ("typescript", "function f() {\n  a();\n}\nfunction g() {⟦⟧\n}\n",
     "\n    // why\n    if (x) {\n        // and why\n        a();\n    }",
     "\n  // why\n  if (x) {\n    // and why\n    a();\n  }"),
    ("python", "def f():\n  a = 1\n\ndef g():⟦⟧\n",
     "\n    # why\n    for x in a:\n        # and why\n        b(x)",
     "\n  # why\n  for x in a:\n    # and why\n    b(x)"),
    # a comment an editor put at column 0 (JetBrains') stays there, and the code below it
    # reads its step from the header
    ("typescript", "function f() {\n  a();\n}\nfunction g() {⟦⟧\n}\n",
     "\n// off\n    a();\n    if (x) {\n// off\n        b();\n    }",
     "\n// off\n  a();\n  if (x) {\n// off\n    b();\n  }"),
], ids=["alone-among-lines-below", "ts", "python", "column-0"])
def test_a_comment_line_is_re_stepped_with_the_code_around_it(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A model that nests by four writes its comments at its levels, as its code: on a
    file of two, a comment line at one of the fill's levels goes to the document's level
    the code at that level goes to; it stayed four in, and a comment alone (the first
    statement of a block, taken out) said nothing of the fill's step (zustand's
    persist.ts; the standard library's dis.py in a notebook of two)."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("python", "def f():\n  a = 1\n  ⟦⟧\n",
     "if a:\n      b = a + \\\n          1\n      c = 2",
     "if a:\n    b = a + \\\n        1\n    c = 2"),
    ("bash", "f() {\n  a\n}\ng() {⟦⟧\n}\n",
     "\n    if [ -n \"$1\" ]; then\n        run --a \\\n            --b \\\n"
     "            --c\n    fi",
     "\n  if [ -n \"$1\" ]; then\n    run --a \\\n        --b \\\n        --c\n  fi"),
], ids=["python", "bash"])
def test_a_backslash_continuation_moves_with_its_statement(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A line after a backslash continues its statement at the column the writer chose
    (aligned, or some spaces in): no level.  Where the fill's levels are re-stepped to
    the document's, it moves as far as its statement's first line did; read as levels, a
    continuation eight in under a statement four in went two in, not six (runpy.py and
    shell scripts, the model in four spaces in a file of two)."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("lua", "local function f()\n  if x then\n    a()\n  end\n  ⟦⟧\nend\n",
     "for _, v in ipairs(t) do\n      if v then\n          return v\n      end\n  end",
     "for _, v in ipairs(t) do\n    if v then\n      return v\n    end\n  end"),
    ("ruby", "class A\n  def f\n    a\n  end\n\n  ⟦⟧\nend\n",
     "def g(x)\n      x.each do |y|\n          b(y)\n      end\n  end",
     "def g(x)\n    x.each do |y|\n      b(y)\n    end\n  end"),
    ("bash", "f() {\n  if a; then\n    b\n  fi\n  ⟦⟧\n}\n",
     "for x in \"$@\"; do\n      if [ -n \"$x\" ]; then\n          echo \"$x\"\n      fi\n  done",
     "for x in \"$@\"; do\n    if [ -n \"$x\" ]; then\n      echo \"$x\"\n    fi\n  done"),
    # the cursor's own header: a body four in below `then`, one line
    ("bash", "f() {\n  if a; then\n    b\n  fi\n  if c; then⟦⟧\n  fi\n}\n",
     "\n      d", "\n    d"),
], ids=["lua", "ruby", "bash", "bash-header"])
def test_a_fill_s_keyword_blocks_are_re_stepped_as_its_brace_blocks(
        language: str, marked: str, fill: str, expected: str) -> None:
    """Lua's, Ruby's and shell's blocks open with a keyword (`then`, `do`, `def g`): a
    fill nested by four in a file whose keyword blocks nest by two shows its step below
    them, as a brace language's below `{`, and goes on the file's (nvim's runtime, the
    model in four spaces).  Only `{` and `:` were read as opening a block, so such a fill
    showed no step and kept its four spaces a level."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill"), [
    # ripgrep's brew formula: `if` and `elsif` four in, in a file of two
    ("ruby", "class RipgrepBin < Formula\n  version '15.0.0'\n\n  if OS.mac?\n"
     "      url \"a.tar.gz\"\n      sha256 \"af78\"\n  elsif OS.linux?⟦⟧\n  end\n\n"
     "  def install\n    bin.install \"rg\"\n  end\nend\n",
     "\n      url \"b.tar.gz\"\n      sha256 \"33e1\""),
    # perf's tests: functions of two, an `if` / `then` eight in
    ("bash", "cleanup() {\n  rm -f \"$file\"\n}\n\nrun() {\n  perf record -- \"$@\"\n}\n\n"
     "report() {\n  perf report\n}\n\nif ! [ -x \"$(command -v gcc)\" ]; then\n"
     "        echo \"skip: no gcc\"\n        exit 2\nfi\n\nif [ \"$a\" = \"$b\" ];\nthen⟦⟧\n"
     "else\n        echo PASS\nfi\n",
     "\n        echo FAIL\n        exit 1"),
    # a selection rewritten: the `if` it holds is the document's own eight in
    ("bash", "cleanup() {\n  rm -f \"$file\"\n}\n\n⟦if ! [ -x \"$(command -v gcc)\" ]; then\n"
     "        echo \"skip: no gcc\"\n        exit 2\nfi⟧\n",
     "if ! [ -x \"$(command -v gcc)\" ]; then\n        echo \"skip: no gcc\"\n        exit 2\nfi"),
    # sensible-editor: `then` / a tab, as its functions' `{` / a tab, beside `if` / four
    ("bash", "IsError()\n{\n\t[ \"$1\" -ne 126 ]\n}\n\nRun()\n{\n\t\"$@\"\n\tret=$?\n}\n\n"
     "nano ()\n{\n    if [ -z \"$TERM\" ]; then\n\treturn 126\n    else\n\tcommand nano \"$@\"\n"
     "    fi\n}\n\n⟦⟧\n\n# fix\nif [ -n \"$HOME\" ]; then\n    if [ -r ~/.e ]; then\n\t. ~/.e\n"
     "    fi\nfi\n",
     "if [ -n \"$VISUAL\" ]; then\n\tRun \"$VISUAL\" \"$@\"\nfi"),
], ids=["ruby-elsif", "bash-then", "bash-rewrite", "bash-brace-step"])
def test_a_keyword_block_nested_by_a_step_the_file_s_own_show_is_kept_as_written(
        language: str, marked: str, fill: str) -> None:
    """A script that writes one block unlike the rest of the file (ripgrep's brew
    formula, perf's tests, fakeroot's `do` / four in) has that step in its own blocks: a
    fill nested by it, the block rewritten or its twin clause, is the writer's and
    stays.  Re-stepped to the file's unit as a model's four, it changed the file (15
    fills of the exact-code request round trip; sensible-editor's `then` / a tab, whose
    step only its functions' `{` show, at a blank line)."""
    assert _shaped(marked, fill, language) == fill


@pytest.mark.parametrize(("marked", "fill"), [
    # bzdiff: a case's arms two in, in a script of four
    ("prog=`basename $0`\ncase \"$prog\" in⟦⟧\nesac\n\nfor f in \"$@\"; do\n"
     "    if [ -f \"$f\" ]; then\n        cat \"$f\"\n    fi\ndone\n",
     "\n  *cmp) comp=${CMP-cmp}   ;;\n  *)    comp=${DIFF-diff} ;;"),
    # test_arm_spe_fork.sh: `then` / eight in, in a script of two
    ("f() {\n  a\n}\n\nif [ \"$x\" = \"$y\" ];\nthen⟦⟧\nfi\n\nif [ -n \"$z\" ]; then\n  b\nfi\n",
     "\n        echo FAIL\n        exit 1"),
], ids=["two-in-four", "eight-in-two"])
def test_a_keyword_block_nested_by_no_model_s_step_is_kept_as_written(
        marked: str, fill: str) -> None:
    """A model nests by four (the shipped one, most published ones): a fill whose keyword
    block is two in in a script of four, or eight in in one of two, was written so by
    the file's writer, even where the document shows that step nowhere else (the block
    was the file's only one), and stays.  Re-stepped to the file's unit, it changed the
    file (bzdiff's case arms; the request round trip's exact code, seed 1)."""
    assert _shaped(marked, fill, "bash") == fill


def test_a_namespace_body_at_a_blank_line_stays_at_the_header_s_column() -> None:
    marked = "namespace a {\n\nint g() {\n  return 1;\n}\n\n⟦⟧\n\n}  // namespace a\n"
    fill = "int f() {\n  return 0;\n}"
    assert _shaped(marked, fill, "cpp") == fill


def test_a_namespace_body_goes_a_step_right_where_the_file_indents_namespaces() -> None:
    """The rule is the file's: where its namespaces' bodies are a step in, a body the
    model writes at the header's column is moved there, as any block's."""
    marked = "namespace a {\n  int g() {\n    return 1;\n  }\n}\n\nnamespace b {⟦⟧\n}\n"
    assert _reindent(marked, "\nint f() {\n  return 0;\n}", "cpp") == (
        "\n  int f() {\n    return 0;\n  }")


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("python", "def f(a,\n      b):⟦⟧\n    return a\n", "\n    x = a + b"),
    ("go", "func f(a, b bool) int {\n\tif a &&\n\t\tb {⟦⟧\n\t}\n\treturn 0\n}\n",
     "\n\t\treturn 1"),
    ("swift", "    func on(queue: Queue,\n            perform handler: Handler) -> Self {⟦⟧\n"
              "    }\n", "\n        handler()\n        return self"),
    ("typescript", "export interface A\n    extends B {⟦⟧\n}\n", "\n    size: number;"),
    ("swift", "    func get(_ url: URL,\n             queue: Queue)\n        -> Self {⟦⟧\n    }\n",
     "\n        return self"),
    ("swift", "func f() {\n    if\n        let a = x,\n        let b = y {⟦⟧\n    }\n}\n",
     "\n        use(a, b)"),
], ids=["python-parameters", "go-condition", "swift-parameters", "typescript-extends",
        "swift-result-type", "swift-conditions"])
def test_a_block_whose_header_continues_a_statement_is_a_step_right_of_the_statement(
        language: str, marked: str, fill: str) -> None:
    """A header line that continues a statement (a parameter list aligned under its `(`,
    gofmt's condition on two lines, an `extends` or a result type on its own line, a
    Swift `if` with its conditions one a line) opens a body a step right of the line
    the statement begins on, left of the header or at its column:
    read as one step right of the header, a body written where the file has it was
    moved a step further (`def f(a,` / `      b):` put its body twelve columns in)."""
    assert _reindent(marked, fill, language) == fill


def test_closer_of_the_enclosing_block_keeps_its_level() -> None:
    marked = "function f(a) {\n    let b = 1;\n    ⟦⟧\n"
    fill = "b++;\n}\nfunction g() {"
    assert _reindent(marked, fill, "javascript") == fill


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    # `#` is code in JavaScript (a private field), not a comment hiding the `{`
    ("javascript", "class S {\n  #items = [];\n  push(x) {\n    ⟦⟧\n  }\n}\n",
     "this.#items.push({\n  value: x,\n});\nreturn this.#items.length;",
     "this.#items.push({\n      value: x,\n    });\n    return this.#items.length;"),
    # `//` is floor division in Python, not a comment hiding the `[`
    ("python", "def f(n):\n    if n:\n        ⟦⟧\n    return n\n",
     "x = g(n // 2, [\n    1,\n])\nreturn x",
     "x = g(n // 2, [\n            1,\n        ])\n        return x"),
    # a `{` in a comment opens no block (`//` in C, `--` in Lua)
    ("c", "int f(void) {\n    if (x) {\n        ⟦⟧\n    }\n}\n",
     "int a[] = {1, 2}; // {\nfor (;;) {\n    a[0]++;\n}\nreturn a[0];",
     "int a[] = {1, 2}; // {\n        for (;;) {\n            a[0]++;\n        }\n"
     "        return a[0];"),
    ("lua", "function f(t)\n  if t then\n    ⟦⟧\n  end\nend\n",
     "local n = #t -- count {\nfor i = 1, n do\n  print(t[i])\nend",
     "local n = #t -- count {\n    for i = 1, n do\n      print(t[i])\n    end"),
])
def test_brackets_and_comments_are_read_with_the_language_s_comment_syntax(
        language: str, marked: str, fill: str, expected: str) -> None:
    assert _reindent(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "above", "moved"), [
    ("javascript", "  if (this.#ready) {", False),  # '#' is code: the line opens a block
    ("python", "    if n // 2:", False),  # '//' divides: the line opens a block
    ("javascript", "  f(); // {", True),  # a '{' in a comment opens nothing
    ("rust", "  fn name(&self) -> &'a str { // borrowed", False),  # a lifetime is no quote
    ("rust", "  let c = '{'; // {", True),  # a character literal's '{' opens nothing
])
def test_the_line_above_is_read_with_the_language_s_comment_syntax(
        language: str, above: str, moved: bool) -> None:
    text, start, end = _span(f"x\n{above}\n  ⟦⟧\n")  # the cursor not in the block's body
    fill = "  y = 1\n      z = 2"
    assert (to_cursor_column(fill, text, start, end, language) != fill) == moved


@pytest.mark.parametrize("head", [
    "fn name(&self) -> &'a str {",  # a lifetime: no string starts at its quote
    "fn new() -> &'static str {",
    "'outer: for x in xs {",  # a loop label
    "if c == '\\'' || c == '}' {",  # character literals still hide what they quote
])
def test_rust_lifetimes_and_labels_are_not_quotes_when_brackets_are_counted(head: str) -> None:
    marked = "impl<'a> P<'a> {\n    fn f(&mut self) {\n        ⟦⟧\n    }\n}\n"
    fill = f"{head}\n    g();\n}}\nh();"  # written at column 0, four-space steps
    assert _reindent(marked, fill, "rust") == (
        f"{head}\n            g();\n        }}\n        h();")


def test_python_dedent_past_the_block_is_left_for_truncation() -> None:
    marked = "def f(x):\n    if x:\n        ⟦⟧\n"
    fill = "y = 1\n        return y\n    else:\n        return 2"
    assert _reindent(marked, fill, "python") == fill


def test_reindent_never_touches_the_first_line_or_code() -> None:
    marked = "int f(void) {\n\tint b = 1;\n\tif (b) {  ⟦⟧\n\t}\n}\n"
    fill = "  /* x */\nb++;\n    b--;\n"
    result = _reindent(marked, fill, "c")
    assert result.split("\n")[0] == fill.split("\n")[0]
    assert [line.lstrip() for line in result.split("\n")] == [
        line.lstrip() for line in fill.split("\n")]


def test_blank_lines_of_a_fill_carry_no_whitespace_but_its_last_line_keeps_it() -> None:
    fill = "y = 1\n       \n    z = 2\n\t\n    "  # the last line indents the suffix
    assert _reindent("def f(x):\n    ⟦⟧return y\n", fill, "python").split("\n") == [
        "y = 1", "", "    z = 2", "", "    "]


def test_a_fill_s_last_line_of_blanks_is_dropped_when_nothing_follows_it_on_its_line() -> None:
    fill = "y = 1\n       \n    z = 2\n\n       "  # it would indent nothing: trailing spaces
    assert _reindent("def f(x):\n    ⟦⟧\n    return y\n", fill, "python").split("\n") == [
        "y = 1", "", "    z = 2", "", ""]


def _at_column(marked: str, fill: str) -> str:
    text, start, end = _span(marked)
    return to_cursor_column(fill, text, start, end)


def test_a_fill_deeper_than_its_hole_moves_back_to_the_hole_s_column() -> None:
    marked = "def f(n):\n    if n < 2:\n        return n\n    ⟦⟧\n"
    fill = "    x = 1\n        y = 2\n\n        if y:\n            z = 3"
    assert _at_column(marked, fill) == "x = 1\n    y = 2\n\n    if y:\n        z = 3"


def test_tabs_move_back_as_spaces_do() -> None:
    assert _at_column("if (a) {\n\t\tb();\n\t⟦⟧\n}\n", "\tc();\n\t\td();") == "c();\n\td();"


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("javascript", "function f() {\n  ⟦⟧\n}\n", "  x();\n    if (a) {\n      y();\n    }",
     "x();\n  if (a) {\n    y();\n  }"),
    # left deeper, the fill's dedent to `return t` would match no level: IndentationError
    ("python", "def total(xs):\n    ⟦⟧\n    return t\n", "    t = 0\n        for x in xs:\n"
     "            t += x", "t = 0\n    for x in xs:\n        t += x"),
    ("go", "func f() int {\n\t⟦⟧\n\treturn t\n}\n", "\tt := 0\n\t\tt++", "t := 0\n\tt++"),
    ("rust", "fn f() -> i32 {\n    ⟦⟧\n}\n", "    let t = 0;\n        t", "let t = 0;\n    t"),
])
def test_a_block_s_fill_starts_at_a_cursor_that_already_stands_in_the_body(
        language: str, marked: str, fill: str, expected: str) -> None:
    text, start, end = _span(marked)
    assert to_cursor_column(fill, text, start, end, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("javascript", "  if (a) {\n  ⟦⟧\n", "  b();\n    c();"),  # at the header's column
    ("python", "def f(n):\n⟦⟧\n", "    x = 1\n        y = 2"),  # a cursor at column 0 too
    ("python", "    if n:\n    ⟦⟧\n", "    x = 1\n    y = 2"),
])
def test_a_fill_after_a_block_s_opening_line_keeps_its_indentation_outside_the_body(
        language: str, marked: str, fill: str) -> None:
    text, start, end = _span(marked)
    assert to_cursor_column(fill, text, start, end, language) == fill


@pytest.mark.parametrize(("marked", "fill"), [
    ("def f(n):\n    ⟦⟧\n", "    x = 1\n        y = 2"),  # the line above opens a block
    ("function f() {\n  ⟦⟧\n}\n", "  x();\n    y();"),  # a brace opens it
    ("def f(n):\n    return n\n⟦⟧\n", "    x = 1"),  # column 0 says nothing
    ("def f(n):\n    if n:\n        n += 1\n    ⟦⟧\n", "    x = 1\n    y = 2"),  # both levels
    ("x = 1\ny = ⟦⟧\n", "  2\n"),  # after code on the line
    ("x = 1\n    ⟦⟧\n", "y = 2\n    z = 3"),  # not deeper
    ("class A:\n    x = 1\n\n    ⟦⟧\n        return 2\n", "    y = 1"),  # code below is deeper
    # the same in columns where a tab block gets a fill in spaces
    ("def f(n):\n\tif n:\n\t\tn += 1\n\t⟦⟧\n", "    x = 1\n    y = 2"),
    ("class A:\n\tx = 1\n\n\t⟦⟧\n\t\treturn 2\n", "    y = 1"),
])
def test_a_fill_keeps_its_indentation_where_the_cursor_column_says_nothing_else(
        marked: str, fill: str) -> None:
    assert _at_column(marked, fill) == fill


def _shaped(marked: str, fill: str, language: str | None) -> str:
    """The multi-line fill as every backend offers it (`shape_fill`: at the cursor's column,
    re-indented, cut to whole units)."""
    text, start, end = _span(marked)
    req = InfillRequest(text, start, end, language)
    return shape_fill(fill, req, SpanPlan(MULTI_LINE, 48, 8, False), "", language,
                      local_text(text, start, end))


@pytest.mark.parametrize("marked, fill, expected", [
    # a hole's line: the line's own break follows (fixtures/hello.py, the Quick start's)
    ("def f(n):\n    if n < 2:\n        return n\n    ⟦<FILL>⟧\n\n\ndef main():\n    pass\n",
     "return n\n", "return n"),
    ("def f(xs):\n    total = 0\n    ⟦⟧\n    return total\n", "total = xs\n", "total = xs"),
    # a cursor on an empty line: the fill takes that line
    ("x = 1\n⟦⟧\ny = 2\n", "z = 3\n", "z = 3"),
    ("x = 1\r\n⟦⟧\r\ny = 2\r\n", "z = 3\r\n", "z = 3"),
    # a selection that took its line's break gets one back: the fill replaces it
    ("x = 1\n⟦y = 2\n⟧\nz = 3\n", "y = 4\n", "y = 4\n"),
    # blanks at the line's end go too (ghost text `#  `)
    ("def f(a):\n    ⟦⟧\n    return a\n", "#  ", "#"),
    # code after the span on its line: its end is the user's business
    ("x = ⟦⟧ + 1\n", "2\n", "2\n"),
    ("x = ⟦⟧ + 1\n", "2 ", "2 "),
    # the end of a file (or notebook cell) without a last line break: it still has none
    ("x = 1\n⟦⟧", "y = 2\n", "y = 2"),
    ("def f(a):\n    ⟦⟧", "return a\n\n\n\n\n", "return a"),
    ("x = 1\r\n⟦⟧", "y = 2\r\n\r\n", "y = 2"),
    ("x = 1\n⟦⟧", "y = 2  ", "y = 2"),
    ("for r in range(3):\n    ⟦⟧", "pass\n", "pass"),  # a cell's ghost text
    # a fill with no code keeps its line breaks, left to the checks that judge blanks,
    # but no blanks at a line's end (a JavaScript hole's fill " ": its line read "   ")
    ("x = 1\n    ⟦⟧\ny = 2\n", "\n", "\n"),
    ("function f() {\n  ⟦<FILL>⟧\n}\n", " ", ""),
    ("x = 1\n    ⟦⟧\ny = 2\n", "\n  \t", "\n"),
    ("x = f(⟦⟧ )\n", "  ", "  "),  # code follows on the line: the user's business
    # ... and at the end of a file without a last line break, none
    ("⟦<FILL>⟧", "\n" * 27, ""),
    ("x = 1\n⟦<FILL>⟧", "\n\n", ""),
    ("x = 1\n⟦⟧", "  \t", ""),
])
def test_a_fill_leaves_no_empty_line_where_the_document_s_own_line_break_follows_it(
        marked: str, fill: str, expected: str) -> None:
    """A fill's last line break before the line break that ends the span's line made an
    empty line nobody asked for (`dlm-lsp fill fixtures/hello.py`: three blank lines
    where the file had two); at the end of a file without one, a run of them."""
    language = "python" if "def " in marked else None
    assert _shaped(marked, fill, language) == expected


MODULE_DOCSTRING = '"""A module.\n\n' + "".join(
    f"It isn't line {i}: \"a\" or 'b'.\n" for i in range(30)) + '"""\n\n'


def test_a_fill_300_lines_below_a_module_docstring_is_shaped_as_the_file_reads() -> None:
    """The lines around the cursor are parsed on their own (`policy.local_text`); 300
    lines up was inside the module's docstring, whose prose starts at column 0, and
    parsed from there (an apostrophe opened a string) the fill's call was cut after its
    arguments, its `)` and the `return` below it left out (configparser.py)."""
    marked = (MODULE_DOCSTRING + "".join(f"x{i} = {i}\n" for i in range(270))
              + "class A:\n    @property\n    def f(self):\n        \"\"\"Deprecated.\"\"\"\n"
              "        ⟦⟧\n\n    def g(self):\n        pass\n")
    fill = "warnings.warn(\n    \"a\", stacklevel=2\n)\nreturn self.source"
    assert _shaped(marked, fill, "python") == (
        "warnings.warn(\n            \"a\", stacklevel=2\n        )\n        return self.source")


_TAB_BODY = "def f(x):\n\ty = 1\n\t⟦⟧\n"  # a cursor in a tab-indented function's body


@pytest.mark.parametrize(("marked", "fill", "expected"), [
    # the model takes the cursor's tab for one of its steps and indents in spaces
    (_TAB_BODY, "    if x:\n            y = 2\n        return y", "if x:\n\t\ty = 2\n\treturn y"),
    (_TAB_BODY, "  if x:\n      y = 2\n    return y", "if x:\n\t\ty = 2\n\treturn y"),
    (_SPACES + _TAB_BODY, "    if x:\n            y = 2\n        return y",
     "if x:\n\t\ty = 2\n\treturn y"),
    (_TAB_BODY, "    if x:\n\t\t\ty = 2\n\t\treturn y", "if x:\n\t\ty = 2\n\treturn y"),
    # tabs below a cursor in a space-indented body
    ("def f(x):\n    y = 1\n    ⟦⟧\n", "\tif x:\n\t\t\ty = 2\n\t\treturn y",
     "if x:\n        y = 2\n    return y"),
    # a method body that goes on from its class's spaces with a tab
    ("class A:\n    x = 1\n\n    def f(self):\n    \ty = 1\n    \t⟦⟧\n",
     "    if y:\n                y = 2\n            return y",
     "if y:\n    \t\ty = 2\n    \treturn y"),
], ids=["spaces-at-a-tab", "two-space-steps-at-a-tab", "tab-block-in-a-file-of-spaces",
        "spaces-then-tabs-at-a-tab", "tabs-at-spaces", "tab-after-class-spaces"])
def test_a_fill_deeper_than_the_cursor_in_other_characters_moves_back_by_its_columns(
        marked: str, fill: str, expected: str) -> None:
    """Depth in columns: eight spaces under a cursor after a tab are one level below
    "\t    ", not a line that comes back left of it (left deeper: IndentationError)."""
    result = _shaped(marked, fill, "python")
    assert result == expected  # the fill's levels, in the block's own characters
    text, start, end = _span(marked)
    compile(text[:start] + result + text[end:], "filled.py", "exec")


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("go", "func f() int {\n\tt := 0\n\t⟦⟧\n}\n",  # gofmt's tabs
     "    for i := range 3 {\n            t += i\n        }\n        return t",
     "for i := range 3 {\n\t\tt += i\n\t}\n\treturn t"),
    ("bash", "f() {\n\tlocal n=1\n\t⟦⟧\n}\n", "    if [ -n \"$n\" ]; then\n"
     "            echo \"$n\"\n        fi", "if [ -n \"$n\" ]; then\n\t\techo \"$n\"\n\tfi"),
    # a Makefile (no grammar here: the move alone) runs only the lines that begin with a tab
    (None, "all:\n\techo a\n\t⟦⟧\n", "    echo b\n        echo c", "echo b\n\techo c"),
], ids=["go", "bash", "makefile"])
def test_a_tab_indented_block_s_fill_in_spaces_moves_back_in_tabs(
        language: str | None, marked: str, fill: str, expected: str) -> None:
    assert _shaped(marked, fill, language) == expected


_PY_TWO_TABS = "class A:\n\tdef f(self, xs):\n\t\t⟦⟧\n\n\nx = 1\n"
_GO_TWO_TABS = ("package main\n\nfunc f(xs []int) int {\n\tif xs != nil {\n\t\t⟦⟧\n\t}\n"
                "\treturn 0\n}\n")


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("python", _PY_TWO_TABS, "t = 0\n        for x in xs: t += x\n        return t",
     "t = 0\n\t\tfor x in xs: t += x\n\t\treturn t"),  # four spaces a tab
    ("python", _PY_TWO_TABS, "t = 0\n                for x in xs: t += x\n                return t",
     "t = 0\n\t\tfor x in xs: t += x\n\t\treturn t"),  # eight spaces a tab
    ("go", _GO_TWO_TABS, "t := 0\n                t += len(xs)\n                return t",
     "t := 0\n\t\tt += len(xs)\n\t\treturn t"),
    ("c", "int f(int n)\n{\n\tif (n) {\n\t\t⟦⟧\n\t}\n\treturn 0;\n}\n",
     "n++;\n                n *= 2;\n                return n;",
     "n++;\n\t\tn *= 2;\n\t\treturn n;"),  # the Linux kernel's tabs of 8
], ids=["python-4", "python-8", "go-8", "c-8"])
def test_a_fill_at_one_column_below_two_tabs_stays_at_the_cursor_s_level(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A fill's lines all at one column show no step of their own: that column is the
    cursor's level in the model's spaces (eight for two tabs, four a tab), not one tab of
    eight; read so, a Python fill left its block at its second line and was cut to its
    first, and Go's and C's went two tabs too deep."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("python", _PY_TWO_TABS,
     "t = 0\n        for x in xs:\n                t += x\n        return t",
     "t = 0\n\t\tfor x in xs:\n\t\t\tt += x\n\t\treturn t"),  # four a tab, a block of eight
    ("python", _PY_TWO_TABS,
     "t = 0\n                for x in xs:\n                    t += x\n                return t",
     "t = 0\n\t\tfor x in xs:\n\t\t\tt += x\n\t\treturn t"),  # eight a tab, a block of four
    ("go", _GO_TWO_TABS, "t := 0\n                for _, x := range xs {\n"
                         "                    t += x\n                }\n                return t",
     "t := 0\n\t\tfor _, x := range xs {\n\t\t\tt += x\n\t\t}\n\t\treturn t"),
], ids=["python-4-8", "python-8-4", "go-8-4"])
def test_a_fill_at_two_columns_below_two_tabs_keeps_its_smallest_at_the_cursor_s_level(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A tab stood for one of the fill's steps read from column 0: 8 and 16 spaces came
    out one and two tabs (the Python fill left its method at its second line), 16 and 20
    four and five."""
    assert _shaped(marked, fill, language) == expected


def test_a_fill_at_two_columns_below_one_tab_is_read_by_its_columns() -> None:
    """Below one tab, 8 is the cursor's level in eight a tab and a level deeper in four
    a tab: the step of four the columns show keeps the old reading, two tabs and three."""
    marked = "class A:\n\t⟦⟧\n"
    assert _reindent(marked, "def f(self):\n        x = 1\n            y = 2",
                     "python") == "def f(self):\n\t\tx = 1\n\t\t\ty = 2"


_PY_TWO_TABS_BELOW = "class A:\n\tdef f(self, xs):\n\t\tt = 0\n\t\t⟦⟧\n\n\nx = 1\n"


@pytest.mark.parametrize(("fill", "expected"), [
    # four a tab (base 12), a block of eight past it
    ("    for x in xs:\n                    t += x\n            return t",
     "for x in xs:\n\t\t\tt += x\n\t\treturn t"),
    # four a tab (base 16), a block of eight: read as eight a tab, 16 sat between the
    # cursor's level and the base, and the fill stayed two tabs too deep
    ("        for x in xs:\n                        t += x\n                return t",
     "for x in xs:\n\t\t\tt += x\n\t\treturn t"),
    # eight a tab (base 20), a block of four
    ("    for x in xs:\n                        t += x\n                    return t",
     "for x in xs:\n\t\t\tt += x\n\t\treturn t"),
], ids=["four-a-tab-block-of-eight", "four-a-tab-base-16", "eight-a-tab-block-of-four"])
def test_a_fill_deeper_than_a_cursor_two_tabs_in_moves_back_by_its_own_step_past_its_base(
        fill: str, expected: str) -> None:
    """to_cursor_column read the step from column 0, where the cursor's tabs and the
    fill's blocks may be written in different widths."""
    text, start, end = _span(_PY_TWO_TABS_BELOW)
    assert to_cursor_column(fill, text, start, end, "python") == expected


def test_four_spaces_below_two_tabs_stay_one_tab_in() -> None:
    """A quotient of two is no model's step: four spaces below two tabs is read as the
    model's own dedent, one tab in, as before (it leaves the method: cut)."""
    assert _reindent(_PY_TWO_TABS, "return 1\n    y = 2", "python") == "return 1\n\ty = 2"


def test_a_continuation_below_code_two_tabs_in_keeps_its_depth() -> None:
    """Below code the fill's lines are a continuation, not the cursor's level: 16 spaces
    below `y := g(` two tabs in are two of the model's levels of four right of it."""
    marked = "package main\n\nfunc f() {\n\tif x {\n\t\ty := g(⟦⟧\n\t}\n}\n"
    assert _reindent(marked, "a,\n                b)", "go") == "a,\n\t\t\t\tb)"


# GNU style (GNU Emacs's default, GNU C and shell, libstdc++): levels four or two columns
# apart, each 8 columns of a line's indentation written as a tab, so `\t    ` is 12 columns
_GNU_SHELL = ("while [ -n \"$1\" ]; do\n    case \"$1\" in\n"
              "\t--version)\n\t    echo_version=yes\n\t    ;;\n"
              "\t--help)\n\t    if [ -n \"$2\" ]; then\n\t\tusage \"$2\"\n\t    fi\n\t    ;;\n"
              "    esac\n    shift\ndone\n")
_GNU_ARM = _GNU_SHELL.replace("\t    echo_version=yes\n\t    ;;\n", "\t    ⟦⟧\n")
# libstdc++: a declaration goes on a tab in, 8 columns, below a line 6 columns in
_GNU_CPP = ("namespace std\n{\n  template<typename _Tp>\n    struct node\n    {\n    protected:\n"
            "      typedef typename allocator<_Tp>::pointer\n\tpointer;\n\n      ⟦⟧\n    };\n}\n")


def test_a_gnu_style_document_reads_a_tab_as_8_columns_beside_levels_of_spaces() -> None:
    assert detect_indent(_GNU_SHELL, "bash") == IndentStyle(False, 4, gnu=True)
    assert detect_indent(_span(_GNU_CPP)[0], "cpp") == IndentStyle(False, 2, gnu=True)


@pytest.mark.parametrize(("language", "text"), [
    # the Linux kernel's: a tab a level, continuations aligned with spaces after the tabs
    # (here beside an initializer two spaces in)
    ("c", "static int ops[] = {\n  1, 2,\n};\n\nint f(int a,\n\t  int b)\n{\n\tif (a &&\n"
          "\t    b)\n\t\treturn 1;\n\treturn 0;\n}\n"),
    # a tab-indented function in a file of spaces
    ("bash", "f() {\n    if [ -n \"$1\" ]; then\n        echo \"$1\"\n    fi\n}\n\n"
             "g() {\n\tif [ -n \"$1\" ]; then\n\t\techo \"$1\"\n\tfi\n}\n"),
    # Python rejects a block whose lines mix them so (TabError): its own rule stands
    ("python", "def f(x):\n    if x:\n\treturn 1\n    return 2\n"),
    # a bundle's module one tab in, its own levels in spaces after it (json5's dist)
    ("javascript", "(function () {\n\tfunction parse(text) {\n\t  var i = 0;\n"
                   "\t  while (i < text.length) {\n\t    switch (text[i]) {\n"
                   "\t      case \"{\":\n\t        depth++;\n\t        push(i);\n"
                   "\t        break;\n\t      default:\n\t        i++;\n\t        continue;\n"
                   "\t    }\n\t  }\n\t}\n})();\n"),
    # levels three columns apart: not GNU's two or four
    ("c", "int\nf (void)\n{\n   if (x)\n      {\n\t y ();\n      }\n}\n"),
], ids=["kernel", "tab-function-in-spaces", "python", "bundle", "three-column-levels"])
def test_tabs_beside_spaces_are_not_gnu_style_unless_a_tab_is_8_columns_of_its_levels(
        language: str, text: str) -> None:
    assert not detect_indent(text, language).gnu


@pytest.mark.parametrize(("marked", "fill", "expected"), [
    (_GNU_ARM, "echo_version=yes\n\t    ;;", "echo_version=yes\n\t    ;;"),
    (_GNU_ARM, "echo_version=yes\n            ;;", "echo_version=yes\n\t    ;;"),  # in spaces
    (_GNU_ARM.replace("\t    ⟦⟧", "⟦⟧"), "\t    echo_version=yes\n\t    ;;",  # column 0
     "\t    echo_version=yes\n\t    ;;"),
    (_GNU_ARM, "if [ -n \"$2\" ]; then\n\t\techo_version=yes\n\t    fi\n\t    ;;",
     "if [ -n \"$2\" ]; then\n\t\techo_version=yes\n\t    fi\n\t    ;;"),
    # below an arm whose line the file slipped into 8 spaces: not copied onto its body's
    (_GNU_ARM.replace("\t--version)\n\t    ⟦⟧", "        --prefix)\n\t    ⟦⟧"),
     "echo_prefix=yes\n\t    if [ -n \"$2\" ]; then\n\t\tprefix=\"$2\"\n\t    fi",
     "echo_prefix=yes\n\t    if [ -n \"$2\" ]; then\n\t\tprefix=\"$2\"\n\t    fi"),
], ids=["gnu-fill", "fill-in-spaces", "column-0", "nested", "below-a-slip"])
def test_a_gnu_style_shell_fill_is_written_a_tab_for_each_8_columns(marked: str, fill: str,
                                                                    expected: str) -> None:
    """`\t    echo_version=yes` (12 columns) came back `\t\t` (16): the tab was read as one
    of the fill's steps, four columns (/usr/bin/libgcrypt-config, gcore)."""
    assert _shaped(marked, fill, "bash") == expected


def test_a_block_in_spaces_8_columns_in_keeps_them_in_a_gnu_style_document() -> None:
    """A function in spaces, another hand's, in a GNU-style script (/usr/bin/pg_buildext):
    where its lines 8 columns in and more begin with spaces, the fill's do too."""
    marked = _GNU_SHELL + ("\nupdate() {\n    for v in $(versions); do\n"
                           "        if [ -n \"$v\" ]; then\n            echo \"$v\"\n"
                           "            ⟦⟧\n        fi\n    done\n}\n")
    fill = "x=1\n            if [ -n \"$x\" ]; then\n                echo \"$x\"\n            fi"
    assert _shaped(marked, fill, "bash") == fill


def test_a_declaration_going_on_a_tab_in_stays_there_in_a_gnu_style_header() -> None:
    """A tab, 8 columns, below a line 6 columns in: it came back at 2 (a tab read as two
    columns, the file's step)."""
    fill = "typedef typename allocator<_Tp>::reference\n\treference;"
    assert _shaped(_GNU_CPP, fill, "cpp") == fill


def test_a_fill_on_another_step_is_put_on_a_gnu_style_document_s_in_its_columns() -> None:
    """The fill nests by four, in tabs of 8 columns and spaces; the file by two: put on
    two, the line 8 columns in written as a tab (the fill's tabs left it unread)."""
    marked = ("int\nf (int n)\n{\n  int i;\n\n  for (i = 0; i < n; i++)\n    {\n"
              "      if (i > 2)\n\treturn i;\n    }\n  ⟦⟧\n}\n")
    fill = ("while (n > 0) {\n      if (n % 2) {\n\t  if (n > 9) {\n\t      n--;\n\t  }\n"
            "      }\n      n /= 2;\n  }")
    assert _shaped(marked, fill, "c") == (
        "while (n > 0) {\n    if (n % 2) {\n      if (n > 9) {\n\tn--;\n      }\n"
        "    }\n    n /= 2;\n  }")


def test_a_fill_on_another_base_moves_by_its_own_step_in_a_gnu_style_document() -> None:
    """Written from column 8 (its lines left of the cursor's, 14): moved onto the cursor's
    column, its step of four (read from its tabs too) put on the file's two; read as a
    step of a tab, `c ();` went two levels deeper, not one."""
    marked = ("void\nf (int a, int b)\n{\n  while (a)\n    {\n      if (b)\n\t{\n"
              "\t  while (b)\n\t    {\n\t      b--;\n\t      ⟦⟧\n\t    }\n\t}\n    }\n}\n")
    assert _shaped(marked, "a--;\n\tif (b)\n\t    c ();", "c") == (
        "a--;\n\t      if (b)\n\t\tc ();")


def test_a_fill_deeper_than_the_cursor_moves_back_by_gnu_style_columns() -> None:
    """Below a cursor a tab in, a fill whose first line is four columns deeper and whose
    `if` body is 16 columns in: read as steps of four (a tab one of them), the body was
    flattened onto its `if`."""
    marked = ("f() {\n    if [ -n \"$1\" ]; then\n\techo \"$1\"\n    fi\n"
              "    while read -r x; do\n\t⟦⟧\n    done\n}\n")
    fill = "    echo \"$x\"\n\t    if [ \"$x\" = q ]; then\n\t\tbreak\n\t    fi"
    assert _shaped(marked, fill, "bash") == (
        "echo \"$x\"\n\tif [ \"$x\" = q ]; then\n\t    break\n\tfi")


_AFTER_RETURN = "def f(xs):\n    ys = xs\n    ⟦⟧\n\n\nprint(f(1))\n"  # a cursor in the body


@pytest.mark.parametrize(("marked", "fill", "expected"), [
    (_AFTER_RETURN, "return ys\nx = 1\n", "return ys"),
    (_AFTER_RETURN, "return ys\n\nx = 1", "return ys"),
    ("def f(xs):\n    return xs\n    ⟦⟧\n", "y = 1\nx = 1\n", "y = 1"),
    # its first line deeper than the cursor: moved back, the module code still left behind
    (_AFTER_RETURN, "    return ys\nx = 1\n", "return ys"),
    ("def f(xs):\n    ⟦⟧\n", "    return xs\nx = 1", "return xs"),
], ids=["after-the-return", "after-a-blank-line", "after-return-xs", "deeper-first-line",
        "deeper-first-line-below-the-header"])
def test_a_python_fill_s_module_code_is_cut_off_not_moved_into_the_body(
        marked: str, fill: str, expected: str) -> None:
    """A line at column 0 below a cursor in a function's body is a dedent (the model was
    shown the cursor's indentation): the fill has left the block there and ends, as
    `dlm_lsp.units` says.  Moved to the cursor's column, `x = 1` would run in the
    function, where the model did not write it."""
    assert _shaped(marked, fill, "python") == expected


@pytest.mark.parametrize(("marked", "fill"), [
    ("def f(xs):\n    return xs\n⟦⟧\n", "x = 1\ny = 2"),
    # (without a last line break: the line's own follows, and one of the fill's would
    # leave an empty line: test_a_fill_leaves_no_empty_line_where_...)
    ("def f(xs):\n    return xs\n⟦⟧\n", "\nx = 1"),
    ("def f(xs):\n    ys = xs\n⟦⟧\n", "    return ys\nx = 1"),
], ids=["module-code", "after-a-blank-line", "body-then-module-code"])
def test_a_python_fill_at_column_0_keeps_its_module_code_at_column_0(marked: str,
                                                                     fill: str) -> None:
    """At column 0 the cursor stands at module level: module code is in its block."""
    assert _shaped(marked, fill, "python") == fill


def test_a_python_continuation_left_of_the_cursor_inside_brackets_moves_to_it() -> None:
    """Inside brackets indentation means nothing: a line the model wrote at column 0
    there is on another base, not a dedent, and goes to the cursor's column."""
    fill = "ys = g(xs,\n1)\nreturn ys"
    assert _reindent("def f(xs):\n    ys = xs\n    ⟦⟧\n", fill, "python") == (
        "ys = g(xs,\n    1)\n    return ys")


def test_a_brace_language_fill_left_of_the_cursor_is_still_moved_to_it() -> None:
    """Indentation is layout in JavaScript: a fill written from column 0 is moved."""
    marked = "function f(a) {\n    let b = 1;\n    ⟦⟧\n}\n"
    assert _reindent(marked, "b++;\nreturn b;", "javascript") == "b++;\n    return b;"


def test_single_line_fill_is_not_reindented() -> None:
    assert _reindent("def f(x):\n    return ⟦⟧\n", "\tx") == "\tx"


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n\nputs f(1)\n", "y = 1\nend\n\nputs 2", "y = 1"),
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n", "y = 1\nz = 2\nend\n\nputs 2",
     "y = 1\n  z = 2"),
    ("lua", "local function f(a)\n  local x = a\n  ⟦⟧\nend\n", "local y = 1\nend\nprint(2)",
     "local y = 1"),
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n", "y = a\nif y\n  y += 1\nend\nend\nputs 2",
     "y = a\n  if y\n    y += 1\n  end"),
    ("bash", "if true; then\n  x=1\n  ⟦⟧\nfi\n\necho 2\n", "y=1\nfi\n\necho 3", "y=1"),
    ("bash", "for i in 1 2; do\n  x=1\n  ⟦⟧\ndone\n", "y=1\ndone\necho 3", "y=1"),
], ids=["ruby-end", "ruby-end-after-moved-lines", "lua-end", "ruby-end-after-its-own-block",
        "bash-fi", "bash-done"])
def test_a_keyword_block_fill_s_closer_left_of_the_cursor_ends_it(
        language: str, marked: str, fill: str, expected: str) -> None:
    """An `end` (`fi`, `done`) the model wrote left of the cursor's column, with no block
    of its own open, closes the cursor's block, whose closer the suffix already holds:
    the fill ends before it, as a Python fill ends at a dedent.  Moved onto the cursor's
    column with the lines above it, it was a second closer and the code after it ran in
    the block."""
    assert _shaped(marked, fill, language) == expected


def test_a_lua_end_left_of_the_cursor_stays_where_the_model_wrote_it() -> None:
    """Lua's grammar cut the moved `end` off too, but reindent alone must not move it."""
    marked = "local function f(a)\n  local x = a\n  ⟦⟧\nend\n"
    fill = "local y = 1\nend\nprint(2)"
    assert _reindent(marked, fill, "lua") == fill


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("ruby", "def f(a)\n  if a\n    x = a\n    ⟦⟧\n  end\nend\n", "y = a\nif y\n  y += 1\nend\ny",
     "y = a\n    if y\n      y += 1\n    end\n    y"),
    ("bash", "f() {\n  if true; then\n    x=1\n    ⟦⟧\n  fi\n}\n",
     "y=2\nfor i in 1 2; do\n  echo $i\ndone\necho $y",
     "y=2\n    for i in 1 2; do\n      echo $i\n    done\n    echo $y"),
], ids=["ruby-if", "bash-for"])
def test_a_keyword_block_fill_s_own_closer_moves_with_its_block(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A closer right after a block the fill opened is the fill's own: written from
    column 0, it moves onto the cursor's column with the rest."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("javascript", "function f() {\n  ⟦⟧\n}\n", "if (x) {\n    return 2;\n}",
     "if (x) {\n    return 2;\n  }"),
    ("javascript", "function f() {\n  ⟦⟧\n}\n",
     "if (x) {\n    for (;;) {\n        y();\n    }\n}\n}",
     "if (x) {\n    for (;;) {\n      y();\n    }\n  }"),
    ("javascript", "function f() {\n  ⟦⟧\n}\n", "if (x) {\n    a();\n} else {\n    b();\n}",
     "if (x) {\n    a();\n  } else {\n    b();\n  }"),
    ("c", "int f(int x) {\n  ⟦⟧\n}\n", "g(\n    x,\n);\nreturn x;",
     "g(\n    x,\n  );\n  return x;"),
    ("python", "def f(x):\n    ⟦⟧\n", "return g(\n        x,\n)", "return g(\n        x,\n    )"),
], ids=["js-if", "js-nested-then-the-function-s-brace", "js-if-else", "c-call-then-code",
        "python-call"])
def test_a_bracket_the_fill_opens_moves_with_its_closer_written_left_of_the_cursor(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A fill written from column 0, four spaces a level, below a cursor two in: its body
    sits right of the cursor, as if written from there, but the closer of the bracket its
    first line opens is at column 0.  A bracket closes its match whatever the column, so
    the fill was written from column 0: it moves onto the cursor's column, on the file's
    step.  The `}` stayed at column 0, left of the block it closes; in Python the `)` was
    read as a dedent out of the body and cut, leaving the call open."""
    assert _shaped(marked, fill, language) == expected


def test_a_brace_the_document_s_line_opens_does_not_show_the_fill_s_base() -> None:
    """At the end of `if (x) {`, a `}` the fill writes at column 0 closes the document's
    brace, not one of the fill's: it says nothing of where the fill was written from,
    and the body stays one step into the `if` (read as the fill's own, it went two)."""
    marked = "function f() {\n  if (x) {⟦⟧\n  }\n}\n"
    assert _shaped(marked, "\n      return 2;\n}", "javascript") == "\n    return 2;"


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("ruby", "if a\n  x = 1\n  ⟦⟧\nend\n", "y = 2\nelse\n  z = 3"),
    ("ruby", "if a\n  x = 1\n  ⟦⟧\nend\n", "y = 2\nelsif b\n  z = 3"),
    ("ruby", "case a\nwhen 1\n  x = 1\n  ⟦⟧\nend\n", "y = 2\nwhen 2\n  z = 3"),
    ("ruby", "def f(a)\n  x = 1\n  ⟦⟧\nrescue\n  nil\nend\n", "y = 2\nrescue\n  z = 3"),
    ("ruby", "def f(a)\n  x = 1\n  ⟦⟧\nend\n", "y = 2\nensure\n  z = 3"),
    ("lua", "if a then\n  x = 1\n  ⟦⟧\nend\n", "y = 2\nelse\n  z = 3"),
    ("lua", "if a then\n  x = 1\n  ⟦⟧\nend\n", "y = 2\nelseif b then\n  z = 3"),
    ("bash", "if true; then\n  x=1\n  ⟦⟧\nfi\n", "y=2\nelse\n  z=3"),
    ("bash", "if true; then\n  x=1\n  ⟦⟧\nfi\n", "y=2\nelif false; then\n  z=3"),
    ("bash", "case $a in\n  a)\n    x=1\n    ⟦⟧\n    ;;\nesac\n", "y=2\n;;\nb)\n  z=3"),
], ids=["ruby-else", "ruby-elsif", "ruby-when", "ruby-rescue", "ruby-ensure", "lua-else",
        "lua-elseif", "bash-else", "bash-elif", "bash-case-arm-end"])
def test_a_keyword_block_fill_s_next_clause_left_of_the_cursor_ends_it(
        language: str, marked: str, fill: str) -> None:
    """An `else` (`elsif`, `when`, `rescue`, `elif`...) the model wrote left of the
    cursor's column, with no block of its own open there, is the next clause of the
    cursor's block: the fill ends before it, as a Python fill ends at such an `else`.
    It was moved into the block's body with what followed (`y = 2\\n  else\\n    z = 3`
    below `if a`), an `else` indented as a statement of the `if`'s body."""
    assert _reindent(marked, fill, language) == fill
    assert _shaped(marked, fill, language) == fill.split("\n", 1)[0]


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n", "case a\nwhen 1\n  x\nelse\n  y\nend",
     "case a\n  when 1\n    x\n  else\n    y\n  end"),
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n", "y = 2\ncase a\nwhen 1\n  x\nend",
     "y = 2\n  case a\n  when 1\n    x\n  end"),
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n", "y = 2\nbegin\n  x\nrescue\n  y\nend",
     "y = 2\n  begin\n    x\n  rescue\n    y\n  end"),
    ("ruby", "def f(a)\n  x = a\n  ⟦⟧\nend\n", "y = if a\n  1\nelse\n  2\nend",
     "y = if a\n    1\n  else\n    2\n  end"),
    ("lua", "local function f(a)\n  local x = a\n  ⟦⟧\nend\n",
     "if x then\n  x = 1\nelse\n  x = 2\nend", "if x then\n    x = 1\n  else\n    x = 2\n  end"),
    ("bash", "f() {\n  x=1\n  ⟦⟧\n}\n", "if true; then\n  echo 1\nelse\n  echo 2\nfi",
     "if true; then\n    echo 1\n  else\n    echo 2\n  fi"),
], ids=["ruby-case-when", "ruby-when-below-its-case", "ruby-begin-rescue", "ruby-assigned-if",
        "lua-if-else", "bash-if-else"])
def test_a_keyword_block_fill_s_own_next_clause_moves_with_its_block(
        language: str, marked: str, fill: str, expected: str) -> None:
    """An `else` (`when`, `rescue`) of a block the fill opened is the fill's own: written
    from column 0, it moves onto the cursor's column with its header and closer."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("ruby", "class A\n  def f\n  end\n  ⟦⟧\nend\n", "def g\n  2\nend", "def g\n    2\n  end"),
    ("ruby", "class A\n  def f\n  end\n  ⟦⟧\nend\n", "def g\nend", "def g\n  end"),
    ("ruby", "def f(xs)\n  y = 0\n  ⟦⟧\nend\n", "xs.each do |x|\n  y += x\nend",
     "xs.each do |x|\n    y += x\n  end"),
    ("lua", "local function f(a)\n  local x = a\n  ⟦⟧\nend\n",
     "local function g()\n  return 2\nend", "local function g()\n    return 2\n  end"),
    ("bash", "f() {\n  x=1\n  ⟦⟧\n}\n", "if true; then\n  echo 1\nfi",
     "if true; then\n    echo 1\n  fi"),
    ("bash", "f() {\n  x=1\n  ⟦⟧\n}\n", "for i in 1 2; do\n  echo $i\ndone",
     "for i in 1 2; do\n    echo $i\n  done"),
], ids=["ruby-def", "ruby-empty-def", "ruby-do-block", "lua-function", "bash-if", "bash-for"])
def test_a_keyword_block_fill_that_opens_its_block_on_the_cursor_s_line_keeps_its_closer(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A fill whose first line opens a block (`def g`, `function g()`, `if ...; then`)
    and whose body is not indented past the cursor's column was written from column 0,
    as one after a `{` or `:` is: its lines move onto the cursor's column, its own `end`
    with them.  The `end` stayed at column 0, where units took it for the cursor's
    block's and cut it off (`def g\\n  2`, a method with no `end`); a `fi` stayed there
    too, the `if`'s body at the `if`'s own column."""
    assert _shaped(marked, fill, language) == expected


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("ruby", "x = 1\n⟦⟧\nputs x\n", "def g\n  2\nend", "def g\n  2\nend"),
    ("lua", "local x = 1\n⟦⟧\nprint(x)\n", "function g()\n  return 2\nend",
     "function g()\n  return 2\nend"),
    ("bash", "x=1\n⟦⟧\necho $x\n", "if true; then\n  echo 1\nfi", "if true; then\n  echo 1\nfi"),
    ("ruby", "class A\n  ⟦⟧\nend\n", "def g(x) = x\nend", "def g(x) = x"),
], ids=["ruby-def", "lua-function", "bash-if", "ruby-endless-def"])
def test_a_keyword_block_fill_at_column_0_or_without_a_block_stays_as_written(
        language: str, marked: str, fill: str, expected: str) -> None:
    """At column 0 a fill's block is already where it belongs, its closer kept; Ruby's
    endless method opens no block, so an `end` below it is the class's and ends the
    fill."""
    assert _reindent(marked, fill, language) == fill
    assert _shaped(marked, fill, language) == expected


_SHELL_CASE = "case $x in\n    a)\n      echo a\n      ;;\n    (b) echo b ;;\n  esac"


@pytest.mark.parametrize(("fill", "expected"), [
    (_SHELL_CASE, _SHELL_CASE),
    ("case $x in\n  a)\n    echo a\n    ;;\nesac",
     "case $x in\n    a)\n      echo a\n      ;;\n  esac"),
], ids=["at-the-cursor-s-column", "from-column-0"])
def test_a_shell_fill_s_case_is_kept_whole(fill: str, expected: str) -> None:
    """A case arm's `a)` closes no bracket: a fill's `case` keeps its arms and `esac`.
    The `)` was read as closing the function's `{`, and the fill cut at its first arm
    (`case $x in\\n    a`)."""
    assert _shaped("f() {\n  x=1\n  ⟦⟧\n}\n", fill, "bash") == expected


_RUBY_ELSE = "def f(a)\n  if a\n    x = 1\n  else⟦⟧\n  end\nend\n"  # a cursor after `else`


@pytest.mark.parametrize(("language", "marked", "fill", "expected"), [
    ("ruby", _RUBY_ELSE, "\n  y = 2\n  z = 3", "\n    y = 2\n    z = 3"),
    ("ruby", _RUBY_ELSE, "\n  y = 2\nend\nputs 1", "\n    y = 2"),
    ("ruby", "def f(a)\n  case a\n  when 1⟦⟧\n  end\nend\n", "\n  y = 2\nwhen 2\n  z",
     "\n    y = 2"),
    ("lua", "local function f(a)\n  if a then\n    x = 1\n  else⟦⟧\n  end\nend\n",
     "\n  y = 2\nend", "\n    y = 2"),
], ids=["ruby-else-body", "ruby-else-then-the-if-s-end", "ruby-when-then-the-next-when",
        "lua-else-then-the-if-s-end"])
def test_a_fill_after_a_keyword_clause_s_head_is_its_body(
        language: str, marked: str, fill: str, expected: str) -> None:
    """A cursor right after `else` (`when 1`) stands where the clause's body begins, as
    after Python's `else:`: a body written from column 0 moves one step past the
    clause's column (it stayed at the `else`'s own column), and the block's `end` or
    next clause below it is the cursor's block's, which the suffix holds: the fill ends
    before it."""
    assert _shaped(marked, fill, language) == expected


def test_a_shell_line_ending_in_the_word_do_opens_no_block() -> None:
    """`do` and `then` open a shell block after `;` or alone on their line; `echo to do`
    is a command, and the line below it at the cursor's column stays there."""
    marked = "f() {\n  x=1\n  ⟦⟧\n}\n"
    assert _shaped(marked, "echo to do\n  y=2", "bash") == "echo to do\n  y=2"


@pytest.mark.parametrize(("marked", "fill", "expected"), [
    ("f() {\n  if true; then\n    x=1\n    ⟦⟧\n  fi\n}\n", "y=2\nfi\necho 3", "y=2"),
    ("f() {\n  if true; then\n    x=1\n  else⟦⟧\n  fi\n}\n", "\n  y=2\nfi", "\n    y=2"),
], ids=["in-the-if-s-body", "after-the-if-s-else"])
def test_a_shell_fill_in_a_function_s_braces_ends_at_its_block_s_closer(
        marked: str, fill: str, expected: str) -> None:
    """A shell function's `{ ... }` body is a block like any other: a `fi` the model wrote
    left of the cursor's column ends the fill, as it does outside a function.  The
    braces were taken for brackets, inside which no dedent is read, and the `fi` kept:
    a second `fi`, and `echo 3` in the function."""
    assert _shaped(marked, fill, "bash") == expected


# --- lines whose indentation is no level: strings, heredocs, block comments, `#if` ------------


@pytest.mark.parametrize(("language", "marked", "fill"), [
    ("bash", "f() {\n    ⟦⟧\n}\n", "cat <<EOF\nhello\n  world\nEOF\n    echo done"),
    ("bash", "if true; then\n\t⟦⟧\nfi\n", "cat <<-EOF\n\thello\n\tEOF\n\techo done"),
    ("ruby", "def f\n  ⟦⟧\nend\n", "x = <<TXT\nhi\nTXT\n  puts x"),
    ("javascript", "function f() {\n  ⟦⟧\n}\n", "const s = `\nabc\n  def\n`;\n  return s;"),
    ("go", "package m\n\nfunc f() string {\n\t⟦⟧\n}\n", "s := `\nabc\n`\n\treturn s"),
    ("rust", "fn f() -> &'static str {\n    ⟦⟧\n}\n", 'let s = r"\nabc\n";\n    s'),
    ("lua", "function f()\n  ⟦⟧\nend\n", "local s = [[\nabc\n]]\n  return s"),
    ("cpp", "const char* f() {\n    ⟦⟧\n}\n", 'const char* s = R"(\nabc\n)";\n    return s;'),
    ("python", "def f():\n    ⟦⟧\n", "sql = '''\nSELECT *\n  FROM t\n'''\n    return sql"),
    ("c", "int f(int x) {\n    ⟦⟧\n}\n", "x++;\n#if A\n    x--;\n#endif\n    return x;"),
    ("javascript", "function f() {\n  let a = 1;\n  ⟦⟧\n}\n", "a++;\n// a note\n  return a;"),
    ("go", "package m\n\nfunc f() {\n\t⟦⟧\n}\n", "x := 1\n// a note\n\t_ = x"),
    ("ruby", "def f\n  x = 0\n  ⟦⟧\nend\n", "x += 1\n=begin\nc\n=end\n  x"),
], ids=["shell-heredoc", "shell-tab-heredoc", "ruby-heredoc", "js-template", "go-raw-string",
        "rust-raw-string", "lua-long-string", "cpp-raw-string", "python-sql", "c-if",
        "js-comment", "go-comment", "ruby-begin-end"])
def test_a_string_s_heredoc_s_or_directive_s_column_0_says_nothing_of_the_fill_s_base(
        language: str, marked: str, fill: str) -> None:
    """A line that starts inside a string or heredoc has content for whitespace, and a
    directive or a comment stands at column 0 in any block (JetBrains' editors comment
    code out there; Ruby's `=begin` must): the fill's code here is at the cursor's
    column, so it stays, and so does each of those lines.  Read as code, their column 0
    said the fill was written from column 0: every code line went a level deeper, a
    heredoc's `EOF` moved off column 0 (the heredoc then ran to the end of the file),
    a string's lines were indented (its value changed), or the fill was cut at them."""
    assert _shaped(marked, fill, language) == fill


def test_a_docstring_s_lines_move_with_the_line_that_opens_it() -> None:
    """A string's lines right of its opening line's indentation were written with it:
    put on a two-space class, the method's docstring stays under its quotes."""
    marked = "class A:\n  def g(self):\n    return 1\n\n  ⟦⟧\n"
    fill = 'def f(self):\n      """Doc.\n\n      More.\n      """\n      return 2'
    assert _shaped(marked, fill, "python") == (
        'def f(self):\n    """Doc.\n\n    More.\n    """\n    return 2')


def test_a_string_s_blank_line_keeps_its_whitespace() -> None:
    """A blank line's whitespace is dropped, but in a string it is the string's text."""
    fill = 's = """\n    a\n    \n    b\n    """\n    return s'
    assert _shaped("def f():\n    ⟦⟧\n", fill, "python") == fill


def test_a_block_comment_s_lines_move_with_the_code_around_them() -> None:
    """A comment's ` * ` lines sit one column right of the code they describe, at column
    1 here: they are no sign of the fill's base, but they go where its code goes."""
    marked = "function f() {\n  let a = 1;\n  ⟦⟧\n}\n"
    assert _shaped(marked, "/*\n * hi\n */\nreturn a;", "javascript") == (
        "/*\n   * hi\n   */\n  return a;")


def test_a_heredoc_line_at_column_0_is_no_dedent() -> None:
    """Below a cursor in a shell function, a line left of its column ends the fill (a
    `fi` the model wrote for an outer block), unless it is inside a heredoc."""
    text = "f() {\n    \n}\n"
    fill = "cat <<EOF\nhello\nEOF\n    echo done"
    assert truncate_to_units(text, 10, 10, fill, "bash") == fill


def test_a_heredoc_stays_where_it_was_written_when_its_command_moves() -> None:
    """A fill written from column 0 moves to the cursor's column, a heredoc's command with
    it, but not the heredoc: its `EOF` must stand at column 0 to end it."""
    marked = "f() {\n    x=0\n    ⟦⟧\n}\n"
    assert _shaped(marked, "x=1\ncat <<EOF\nhi\nEOF\necho", "bash") == (
        "x=1\n    cat <<EOF\nhi\nEOF\n    echo")


@pytest.mark.parametrize("fill", ["y = (1 +\n2)\n    return y", "y = 1 + \\\n2\n    return y"],
                         ids=["in-brackets", "after-a-backslash"])
def test_a_python_continuation_at_column_0_above_code_at_the_cursor_s_column_stays(
        fill: str) -> None:
    """A Python line that goes on a statement may stand at any column; with the next
    statement at the cursor's column the model wrote the fill there.  Read as a sign of a
    fill from column 0 it moved `return y` a level too deep, and read as a dedent it cut
    the fill in half a statement."""
    assert _shaped("def f():\n    x = 0\n    ⟦⟧\n", fill, "python") == fill
