"""Specification of dlm_lsp.policy: the task kind of a span, its length and its step budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm_lsp.config import DEFAULT_STEPS, InfillOptions, ServerConfig
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.policy import (
    BUDGET_SETTINGS,
    LOCAL_CHARS,
    LOCAL_LINES,
    MIN_CONTEXT_TOKENS,
    MULTI_LINE,
    REWRITE,
    SINGLE_LINE,
    Budget,
    LengthEstimate,
    SpanPlan,
    SpanTooLong,
    local_text,
    plan_span,
    rewrite_refusal,
    span_reach,
    step_budget,
    task_kind,
)
from dlm_lsp.span import CHARS_PER_TOKEN
from dlm_lsp.syntax import _grammar, _parse


@pytest.fixture(scope="module")
def tok(model_dir: Path) -> Tokenizer:
    """The small byte-level BPE of the session's tiny model (built once by `small_tokenizer`)."""
    return Tokenizer.from_file(model_dir / "tokenizer.json")


def _at(marked: str) -> tuple[str, int, int]:
    """'a|b' -> ('ab', 1, 1); 'a[b]c' -> ('abc', 1, 2)."""
    if "|" in marked:
        at = marked.index("|")
        return marked.replace("|", ""), at, at
    start, end = marked.index("["), marked.index("]") - 1
    return marked.replace("[", "").replace("]", ""), start, end


def _hole(text: str, marker: str = "<FILL>") -> tuple[str, int, int]:
    start = text.index(marker)
    return text, start, start + len(marker)


# --- task kind ----------------------------------------------------------------------------


@pytest.mark.parametrize("marked", [
    "x = foo(|)\n",
    "y = ret|\n",
    "|print(x)\n",
    "def f():\n    return |\n",
    "x = 1|",
])
def test_cursor_with_code_on_its_line_is_single_line(marked: str) -> None:
    assert task_kind(*_at(marked)) == SINGLE_LINE


@pytest.mark.parametrize("marked", [
    "def f():\n    |\n",
    "a = 1\n|\nb = 2\n",
    "a = 1\n   |   \nb = 2\n",
    "|",
    "a = 1\n|",
])
def test_cursor_on_an_empty_or_blank_line_is_multi_line(marked: str) -> None:
    assert task_kind(*_at(marked)) == MULTI_LINE


@pytest.mark.parametrize("marked", ["x = [foo(1)]\n", "def f():\n[    return 1\n]", "[a]"])
def test_non_empty_selection_is_a_rewrite(marked: str) -> None:
    assert task_kind(*_at(marked)) == REWRITE


@pytest.mark.parametrize("text", ["def f():\n    <FILL>\n", "<FILL>", "a = 1\n  <FILL>  \n"])
def test_hole_alone_on_its_line_is_multi_line(text: str) -> None:
    assert task_kind(*_hole(text), is_hole=True) == MULTI_LINE


@pytest.mark.parametrize("text", ["x = <FILL>\n", "<FILL>(1, 2)\n", "f(<FILL>)"])
def test_hole_inside_a_line_is_single_line(text: str) -> None:
    assert task_kind(*_hole(text), is_hole=True) == SINGLE_LINE


def test_neighbouring_lines_do_not_affect_the_kind() -> None:
    assert task_kind(*_at("a = 1\n|\nb = 2")) == MULTI_LINE
    assert task_kind(*_at("a = 1\nc|\nb = 2")) == SINGLE_LINE


# --- span plan ----------------------------------------------------------------------------


def _plan(marked: str, tok: Tokenizer, config: ServerConfig | None = None,
          is_hole: bool = False, **options) -> SpanPlan:
    text, start, end = _hole(marked) if is_hole else _at(marked)
    return plan_span(text, start, end, config or ServerConfig(), InfillOptions(**options), tok,
                     is_hole)


def test_single_line_plan_uses_the_single_line_defaults(tok: Tokenizer) -> None:
    cfg = ServerConfig()
    plan = _plan("y = ret|\n", tok)
    assert plan == SpanPlan(SINGLE_LINE, cfg.single_line_tokens, DEFAULT_STEPS[SINGLE_LINE], True)


def test_multi_line_plan_uses_the_multi_line_defaults(tok: Tokenizer) -> None:
    cfg = ServerConfig()
    plan = _plan("def f():\n    |\n", tok)
    assert plan == SpanPlan(MULTI_LINE, cfg.multi_line_tokens, DEFAULT_STEPS[MULTI_LINE], False)


def test_rewrite_is_sized_from_the_selected_text(tok: Tokenizer) -> None:
    selected = "total = sum(values)"
    plan = _plan(f"def f(values):\n    [{selected}]\n", tok)
    assert plan.kind == REWRITE and not plan.single_line
    assert plan.n_masked == len(tok.encode(selected)) + 8


def test_hole_plans_follow_the_hole_s_line(tok: Tokenizer) -> None:
    assert _plan("def f():\n    <FILL>\n", tok, is_hole=True).kind == MULTI_LINE
    assert _plan("x = <FILL>\n", tok, is_hole=True).single_line


@pytest.mark.parametrize("marked", ["y = ret|\n", "def f():\n    |\n", "x = [foo(1)]\n"])
def test_options_length_is_honoured(tok: Tokenizer, marked: str) -> None:
    assert _plan(marked, tok, length=5).n_masked == 5


def test_length_is_clamped_to_max_span_tokens(tok: Tokenizer) -> None:
    cfg = ServerConfig(max_span_tokens=10)
    assert _plan("y = ret|\n", tok, cfg, length=300).n_masked == 10
    assert _plan("def f():\n    |\n", tok, cfg).n_masked == 10  # default 48 clamped too


def test_a_rewrite_s_room_to_grow_is_clamped_to_max_span_tokens(tok: Tokenizer) -> None:
    """A rewrite may write 8 tokens more than its selection, but never past the cap."""
    cfg = ServerConfig(max_span_tokens=4)
    assert len(tok.encode("x")) < 4
    assert _plan("[x] = 1", tok, cfg).n_masked == 4


class _Counting:
    """A tokenizer that remembers how many characters it was given to encode."""

    def __init__(self, tok: Tokenizer) -> None:
        self.tok, self.encoded = tok, []

    def encode(self, text: str) -> list[int]:
        self.encoded.append(len(text))
        return self.tok.encode(text)


def test_a_selection_longer_than_a_rewrite_may_write_is_refused(tok: Tokenizer) -> None:
    """A rewrite writes at most maxSpanTokens tokens, so a longer selection could only
    come back shorter: it is refused, naming the setting, instead of being replaced by
    128 tokens.  A selected megabyte is not tokenized whole to find that out (that took
    1.8 s)."""
    text = "".join(f"value_{i} = compute({i})\n" for i in range(40_000))
    counting, cfg = _Counting(tok), ServerConfig()
    with pytest.raises(SpanTooLong, match=r"maxSpanTokens, 128\).*raise maxSpanTokens"):
        plan_span(text, 0, len(text), cfg, InfillOptions(), counting)
    assert max(counting.encoded) <= CHARS_PER_TOKEN * (cfg.max_span_tokens + 1)


def test_a_selection_of_as_many_tokens_as_a_rewrite_may_write_is_planned(tok) -> None:
    text = "".join(f"v{i} = f({i})\n" for i in range(200))
    tokens = len(tok.encode(text))
    plan = plan_span(text, 0, len(text), ServerConfig(max_span_tokens=tokens), InfillOptions(),
                     tok)
    assert plan.kind == REWRITE and plan.n_masked == tokens
    with pytest.raises(SpanTooLong, match=f"at least {tokens:,} tokens"):
        plan_span(text, 0, len(text), ServerConfig(max_span_tokens=tokens - 1), InfillOptions(),
                  tok)


def test_no_span_is_longer_than_the_model_can_write_beside_some_context(tok) -> None:
    """A model that reads 512 tokens writes at most 448 of them in one span, whatever
    maxSpanTokens allows; a rewrite of a longer selection is refused, saying so."""
    text = "".join(f"v{i} = f({i})\n" for i in range(400))
    cfg, reach = ServerConfig(max_span_tokens=4096), span_reach(512)
    assert reach == 512 - MIN_CONTEXT_TOKENS
    plan = plan_span(text, 0, 0, cfg, InfillOptions(length=4096), tok, reach=reach)
    assert plan.n_masked == reach
    with pytest.raises(SpanTooLong, match=f"more than a rewrite may write \\({reach} for this "
                                          "model, which reads 512 in all\\)"):
        plan_span(text, 0, len(text), cfg, InfillOptions(), tok, reach=reach)


@pytest.mark.parametrize("lines", [1, 20, 100, 400, 20_000])
@pytest.mark.parametrize("reach", [None, 64])
def test_a_rewrite_is_told_too_long_before_it_is_asked_for_as_plan_span_refuses_it(
        tok: Tokenizer, lines: int, reach: int | None) -> None:
    """What a code action is told (`rewrite_refusal`) is what the rewrite would be refused
    with, and a rewrite that would be planned is not told anything."""
    text = "".join(f"value_{i} = compute({i})\n" for i in range(lines))
    cfg = ServerConfig()
    told = rewrite_refusal(text, cfg, tok, reach)
    try:
        plan_span(text, 0, len(text), cfg, InfillOptions(), tok, reach=reach)
    except SpanTooLong as exc:
        assert told == str(exc)
    else:
        assert told is None


def test_a_rewrite_is_told_too_long_from_its_first_characters_only(tok: Tokenizer) -> None:
    text = "".join(f"value_{i} = compute({i})\n" for i in range(40_000))
    counting, cfg = _Counting(tok), ServerConfig()
    assert "maxSpanTokens, 128" in rewrite_refusal(text, cfg, counting)
    assert max(counting.encoded) <= CHARS_PER_TOKEN * (cfg.max_span_tokens + 1)


def test_a_length_estimate_counts_characters_a_token() -> None:
    assert [len(LengthEstimate(4).encode("x" * n)) for n in (0, 1, 4, 5, 9)] == [0, 1, 1, 2, 3]


def test_a_rewrite_of_a_length_the_request_gives_is_not_refused(tok: Tokenizer) -> None:
    text = "".join(f"v{i} = f({i})\n" for i in range(200))
    plan = plan_span(text, 0, len(text), ServerConfig(), InfillOptions(length=32), tok)
    assert plan.kind == REWRITE and plan.n_masked == 32


class _Coarse:
    """A tokenizer of tokens a hundred characters long."""

    def encode(self, text: str) -> list[int]:
        return [0] * -(-len(text) // 100)


def test_a_selection_of_fewer_tokens_than_its_start_suggests_is_counted_whole() -> None:
    text, start, end = _at(f"x = 1\n[{'y' * 5_000}]\n")
    plan = plan_span(text, start, end, ServerConfig(), InfillOptions(), _Coarse())
    assert plan.n_masked == 50 + 8


def test_per_kind_default_steps_follow_the_config(tok: Tokenizer) -> None:
    cfg = ServerConfig(steps_single_line=3, steps_multi_line=11)
    assert _plan("y = ret|\n", tok, cfg).steps == 3
    assert _plan("def f():\n    |\n", tok, cfg).steps == 11


def test_server_steps_override_the_per_kind_defaults(tok: Tokenizer) -> None:
    cfg = ServerConfig(steps=5)
    assert _plan("y = ret|\n", tok, cfg).steps == 5
    assert _plan("def f():\n    |\n", tok, cfg).steps == 5


def test_request_steps_override_the_server_steps(tok: Tokenizer) -> None:
    assert _plan("def f():\n    |\n", tok, ServerConfig(steps=5), steps=7).steps == 7


def test_a_kind_s_own_steps_override_the_server_steps_for_every_kind(tok: Tokenizer) -> None:
    """`steps: 20` with `stepsSingleLine: 4`: a single-line fill took 20 steps, the
    setting its user gave for exactly that kind ignored (Step budget: the most specific
    budget wins)."""
    cfg = ServerConfig(steps=20, steps_single_line=4)
    assert _plan("y = ret|\n", tok, cfg).steps == 4
    assert _plan("def f():\n    |\n", tok, cfg).steps == 20


# --- the step budget: one rule, the most specific budget given wins -------------------------

def _budget(kind: str = SINGLE_LINE, options: InfillOptions | None = None,
            **settings) -> Budget:
    return step_budget(ServerConfig(**settings), options or InfillOptions(), kind)


def test_a_latency_target_for_every_kind_bounds_each_kind() -> None:
    assert [_budget(kind, latency_ms=300).latency_ms for kind in DEFAULT_STEPS] == [300] * 3


def test_a_kind_s_own_latency_target_wins_over_the_one_for_every_kind() -> None:
    both = {"latency_ms": 300, "latency_ms_multi_line": 900}
    assert _budget(MULTI_LINE, **both).latency_ms == 900
    assert _budget(SINGLE_LINE, **both).latency_ms == 300


def test_a_kind_s_own_steps_win_over_the_latency_target_for_every_kind() -> None:
    assert _budget(SINGLE_LINE, latency_ms=300, steps_single_line=4) == Budget(4, None)
    assert _budget(REWRITE, latency_ms=300, steps_single_line=4).latency_ms == 300


def test_a_kind_s_own_latency_target_wins_over_the_steps_for_every_kind() -> None:
    assert _budget(SINGLE_LINE, steps=20, latency_ms_single_line=200).latency_ms == 200


def test_where_one_place_gives_both_the_latency_target_wins() -> None:
    assert _budget(latency_ms=300, steps=20).latency_ms == 300
    assert _budget(latency_ms_single_line=200, steps_single_line=4).latency_ms == 200
    asked = InfillOptions(steps=4, latency_ms=1000)
    assert _budget(options=asked, steps_single_line=2).latency_ms == 1000


def test_a_request_s_own_steps_win_over_every_setting_s_target() -> None:
    settings = {"latency_ms": 300, "latency_ms_single_line": 200}
    assert _budget(options=InfillOptions(steps=4), **settings) == Budget(4, None)


@pytest.mark.parametrize("name", BUDGET_SETTINGS)
def test_each_budget_setting_sets_a_budget_that_a_request_s_own_steps_replace(name) -> None:
    """BUDGET_SETTINGS is what a benchmark giving its fills steps refuses in --settings:
    each one must be read by step_budget, and lose to a request's own steps."""
    assert any(_budget(kind, **{name: 5}) != _budget(kind) for kind in DEFAULT_STEPS)
    assert {_budget(kind, InfillOptions(steps=3), **{name: 5}) for kind in DEFAULT_STEPS} == {
        Budget(3, None)}


def test_a_kind_with_no_budget_set_anywhere_takes_its_default_steps() -> None:
    assert [_budget(kind) for kind in DEFAULT_STEPS] == [
        Budget(steps, None) for steps in DEFAULT_STEPS.values()]


def test_steps_never_exceed_the_number_of_masked_tokens(tok: Tokenizer) -> None:
    plan = _plan("def f():\n    |\n", tok, length=3, steps=20)
    assert (plan.n_masked, plan.steps) == (3, 3)


@pytest.mark.parametrize("length", [1, 7, 16, 40])
def test_left_to_right_takes_one_step_per_token(tok: Tokenizer, length: int) -> None:
    plan = _plan("def f():\n    |\n", tok, length=length, strategy="left-to-right", steps=2)
    assert plan.steps == plan.n_masked == length


def test_left_to_right_from_the_server_config_takes_one_step_per_token(tok: Tokenizer) -> None:
    plan = _plan("y = ret|\n", tok, ServerConfig(strategy="left-to-right"))
    assert plan.steps == plan.n_masked == ServerConfig().single_line_tokens


def test_request_strategy_overrides_the_server_strategy(tok: Tokenizer) -> None:
    plan = _plan("y = ret|\n", tok, ServerConfig(strategy="left-to-right"), strategy="margin")
    assert plan.steps == DEFAULT_STEPS[SINGLE_LINE]


# --- the syntax tree decides where there is a grammar --------------------------------------


def _plan_in(tok: Tokenizer, marked: str, language: str | None) -> SpanPlan:
    text, start, end = _at(marked)
    return plan_span(text, start, end, ServerConfig(), InfillOptions(), tok, language=language)


def test_the_end_of_a_block_opening_line_is_a_multi_line_fill_with_a_grammar(tok) -> None:
    assert _plan_in(tok, "def f(a):|\n", None).kind == SINGLE_LINE  # text alone: code before
    assert _plan_in(tok, "def f(a):|\n", "python").kind == MULTI_LINE


def test_the_kind_of_block_caps_a_multi_line_fill_s_length(tok) -> None:
    inside_brackets = _plan_in(tok, "x = f(1,\n      |\n", "python")
    assert inside_brackets.kind == MULTI_LINE
    assert inside_brackets.n_masked <= ServerConfig().multi_line_tokens
    assert _plan_in(tok, "x = f(1,\n      |\n", None).n_masked == ServerConfig().multi_line_tokens


@pytest.mark.parametrize(("line", "end"), [(10, ""), (400, ""), (400, "?>\n")],
                         ids=["near-the-tag", "far-below-it", "far-below-it-closed"])
def test_a_php_function_s_body_is_multi_line_however_far_below_the_opening_tag(
        tok, line: int, end: str) -> None:
    """The span hint parses only the lines around the cursor (`local_text`): 300 lines
    below `<?php` they hold no opening tag (the `?>` that ends the file, if any), and the
    grammar of .php files read them as the HTML around one, a single `text` node: the
    end of `function f() {` was a single-line fill there, cut at its first line break (a
    body written below it came back empty)."""
    above = "".join(f"$x{i} = {i};\n" for i in range(line))
    marked = f"<?php\n{above}function f() {{|\n}}\n{end}"
    assert _plan_in(tok, marked, "php").kind == MULTI_LINE


def test_local_text_holds_whole_lines_around_the_span() -> None:
    text = "".join(f"line {i}\n" for i in range(1000))
    at = text.index("line 500")
    local, low = local_text(text, at, at, lines=3)
    assert local.splitlines() == [f"line {i}" for i in range(497, 504)]
    assert text[low:low + len(local)] == local


TABLE = "TABLE = {" + ", ".join(f'"key{k}": {k}' for k in range(40_000)) + "}\n"
CODE = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(100))


@pytest.mark.parametrize("where", ["above", "below", "outermost-above"])
def test_the_lines_around_a_span_stop_before_a_line_of_half_a_megabyte(where: str) -> None:
    """A generated module's table on one line, 600,000 characters: taken whole, it was
    parsed again for the hint and for every fill shaped (9 s of a request).  Nor is it
    the outermost line in reach, 400 indented lines up."""
    site = "def lookup(key):\n    \n"
    text = {"above": CODE + TABLE + site + CODE, "below": CODE + site + TABLE + CODE,
            "outermost-above": TABLE + "    x = 1\n" * 400 + site}[where]
    at = text.index(site) + site.index("    \n") + 4
    local, low = local_text(text, at, at)
    assert TABLE not in local and len(local) <= 3 * LOCAL_CHARS
    assert text[low:low + len(local)] == local and (low == 0 or text[low - 1] == "\n")
    assert "def lookup(key):\n    " in local


def test_a_cursor_in_a_line_of_megabytes_is_left_to_the_text(tok: Tokenizer) -> None:
    """A minified bundle is one line: its lines around the cursor were all of it, parsed
    for the hint at every request (0.6 s a megabyte)."""
    bundle = "".join(f"function a{k}(t){{return t+{k}}}" for k in range(40_000))
    at = bundle.index("return", len(bundle) // 2)
    assert local_text(bundle, at, at) is None
    plan = plan_span(bundle, at, at, ServerConfig(), InfillOptions(), tok,
                     language="javascript")
    assert plan.kind == task_kind(bundle, at, at) == SINGLE_LINE


LICENSE = "/*\n" + "".join(f" * Licensed under the Apache License, line {i}: \"AS IS\", "
                           "isn't it.\n" for i in range(14)) + " */\n"


@pytest.mark.parametrize(("language", "above", "function"), [
    ("kotlin", LICENSE + "package a\n\n" + "".join(f"val x{i} = {i}\n" for i in range(292)),
     "fun f() {\n}\n"),
    ("java", LICENSE + "package a;\n\nclass A {\n" + "".join(
        f"  /**\n   * The {i}th, isn't it.\n   */\n  int x{i} = 1;\n" for i in range(300)),
     "\n  void f() {\n  }\n}\n"),
], ids=["a-license-header", "javadocs-in-a-class"])
def test_the_lines_around_a_cursor_do_not_start_inside_a_block_comment(
        tok, language: str, above: str, function: str) -> None:
    """The span hint parses the lines around the cursor; 300 lines up may be a block
    comment's inside, whose prose (`isn't`) was read as code: the rest was a string,
    and the end of `void f() {` a single-line fill.  They start at the least indented
    line in reach instead (the comment's `/*`, a member's)."""
    text = above + function
    at = len(above) + function.index("{") + 1
    boundary = text.split("\n")[text.count("\n", 0, at) - LOCAL_LINES]
    assert boundary.lstrip().startswith("*")  # 300 lines up: inside a comment
    local, low = local_text(text, at, at)
    assert not local.lstrip(" \t").startswith("*") and text[low:low + len(local)] == local
    plan = plan_span(text, at, at, ServerConfig(), InfillOptions(), tok, language=language)
    assert plan.kind == MULTI_LINE


# 300 lines below the cursor fall inside a construct: a shell `case`, a C `switch`, between
# a Python decorator and its method
SHELL_CASE = ("f() {\n  if [ -n \"$1\" ]; then\n    echo \"$1\"\n  else|\n    echo none\n"
              "  fi\n}\n\n" + "".join(f"g{i}() {{\n  echo {i}\n}}\n\n" for i in range(70))
              + "run() {\n  case \"$1\" in\n"
              + "".join(f"    a{i})\n      echo {i}\n      ;;\n" for i in range(40))
              + "  esac\n}\n")
C_SWITCH = ("int f(int a)\n{\n    if (a) {|\n        return 1;\n    }\n    return 0;\n}\n\n"
            + "".join(f"int g{i}(void)\n{{\n    return {i};\n}}\n\n" for i in range(56))
            + "int run(int a)\n{\n    switch (a) {\n"
            + "".join(f"    case {i}:\n        return {i};\n" for i in range(60))
            + "    }\n    return 0;\n}\n")
PYTHON_DECORATED = ("class A:\n    def f(self):\n        |\n        y = 1\n        y = 2\n"
                    "        return 0\n\n" + "".join(f"    @property\n    def x{i}(self):\n"
                                                    f"        return {i}\n\n" for i in range(100)))


@pytest.mark.parametrize(("language", "marked", "cut"), [
    ("bash", SHELL_CASE, "run() {"), ("c", C_SWITCH, "int run(int a)"),
    ("python", PYTHON_DECORATED, "    @property\n    def x74"),
], ids=["shell-case", "c-switch", "python-decorator"])
def test_the_lines_around_a_span_end_after_a_whole_construct(language: str, marked: str,
                                                            cut: str) -> None:
    """The span hint parses the lines around the cursor; 300 lines down may be inside a
    construct, and read cut in half it is an error, whose recovery may reach back to the
    cursor (xdg-screensaver: the end of an `else` 300 lines above a cut `case` was read as
    inside a string, and a fill of its body cut as a single-line one).  The lines end
    instead after the last line in reach at the least indented level that ends a
    statement (a function's `}`, a method's `return`, not a decorator): they parse as the
    document does, without an error."""
    text, at, _ = _at(marked)
    local, low = local_text(text, at, at)
    assert text[low:low + len(local)] == local and text[low + len(local)] == "\n"
    _, parser = _grammar(language, text)
    assert not _parse(parser, text).root.has_error
    assert not _parse(parser, local).root.has_error
    assert text[low + len(local):].lstrip("\n").startswith(cut)  # the construct cut in half


def test_the_request_s_kind_overrides_the_policy(tok) -> None:
    text, start, end = _at("|print(x)\n")
    options = InfillOptions(kind=MULTI_LINE)
    plan = plan_span(text, start, end, ServerConfig(), options, tok, language="python")
    assert (plan.kind, plan.single_line) == (MULTI_LINE, False)
    assert plan.n_masked == ServerConfig().multi_line_tokens
