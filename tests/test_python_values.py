"""Specification of value hints (`valueHints`, passes.InfillRun.value_hint): where the
function around a Python fill works a value out above it and, with the best fill in,
reads it nowhere, one more pass begins the fill's expression with that value's name and
offers it first.

Documents mark the span as ⟦⟧ (an insertion point), as in test_python_tallies.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import planted_engine, spied_layouts
from marked import marked_document, marked_request

from dlm_lsp.engine import InfillRequest
from dlm_lsp.python_values import value_slot
from dlm_lsp.repair import DIFFUSION, REPAIR, VALUE

BELOW = ("def below_zero(ops):\n    balance = 0\n    for op in ops:\n        balance += op\n"
         "⟦⟧\n            return True\n    return False\n")
PICK = ("def pick(arr):\n    ans = []\n    for row in arr:\n        val = min(row)\n⟦⟧\n"
        "    return ans\n")


def _unread(marked: str, fill: str, language: str = "python") -> list[str]:
    document, at = marked_document(marked, language)
    return document.unread_values(at, at, fill)


# --- what leaves a value unread ---------------------------------------------------------------

def test_a_value_worked_out_above_and_read_nowhere_is_unread() -> None:
    assert _unread(BELOW, "        if op < 0:") == ["balance"]
    assert _unread(BELOW, "        if balance < 0:") == []
    assert _unread(PICK, "        ans.append(row)") == ["val"]
    assert _unread(PICK, "        ans.append(val)") == []


def test_a_container_filled_in_place_and_never_read_is_unread() -> None:
    marked = ("def evens(n):\n    out = []\n    for i in range(n):\n        out.append(2 * i)\n"
              "⟦⟧\n")
    assert _unread(marked, "    return n") == ["out"]
    assert _unread(marked, "    return out") == []


@pytest.mark.parametrize("marked", [
    # read below the fill
    "def f(xs):\n    total = sum(xs)\n⟦⟧\n    return total\n",
    # an object whose methods are called for their effect is used by them
    "def f(p, s):\n    out = open(p)\n    out.write(s)\n⟦⟧\n",
    # a parameter; a name kept out of use on purpose
    "def f(total):\n    total = total + 1\n⟦⟧\n",
    "def f(xs):\n    _seen = len(xs)\n⟦⟧\n",
    # read by a nested function, or declared global
    "def f(xs):\n    total = len(xs)\n    g = lambda: total\n⟦⟧\n    return g\n",
    "def f(xs):\n    global total\n    total = len(xs)\n⟦⟧\n",
    # bound only below the fill: not a value the fill could read
    "def f(xs):\n⟦⟧\n    total = len(xs)\n",
    # outside every function
    "total = 0\n⟦⟧\n",
    # read by name: every local, and every parameter
    "def f(xs, n):\n    total = len(xs)\n⟦⟧\n    return '{total}'.format(**locals())\n",
    "def f(xs, n):\n    total = len(xs)\n⟦⟧\n    return eval('total + n')\n",
])
def test_where_nothing_is_left_unread_for_the_fill_none_is(marked: str) -> None:
    assert _unread(marked, "    y = 1") == []


def test_a_parameter_nothing_reads_is_unread_after_the_values() -> None:
    assert _unread("def add(x, y):\n⟦⟧\n", "    return x") == ["y"]
    assert _unread("def add(x, y):\n⟦⟧\n", "    return x + y") == []
    marked = "def f(xs, n):\n    total = sum(xs)\n⟦⟧\n"
    assert _unread(marked, "    return 0") == ["total", "n"]


@pytest.mark.parametrize("marked", [
    # a method takes what its caller passes, used or not
    "class C:\n    def f(self, x):\n⟦⟧\n",
    "class C:\n    def f(other, x):\n⟦⟧\n",
    # one whose class the check does not see, told by its first parameter
    "def f(self, x):\n⟦⟧\n",
    "def f(cls, x):\n⟦⟧\n",
    # decorated: what calls it is not this code
    "@app.route('/')\ndef f(x):\n⟦⟧\n",
    # kept out of use on purpose
    "def f(_x):\n⟦⟧\n",
])
def test_a_parameter_a_caller_may_pass_for_nothing_is_not_unread(marked: str) -> None:
    assert _unread(marked, "    return 1") == []


def test_a_name_the_fill_itself_binds_is_not_a_value_worked_out_above() -> None:
    """A fill that binds a name nothing reads is another fault (a name written wrong)."""
    assert _unread("def f(xs):\n    y = len(xs)\n⟦⟧\n    return y\n", "    tokens = []") == []


def test_only_python_is_judged() -> None:
    assert _unread(BELOW, "        if op < 0:", language="javascript") == []


@pytest.mark.parametrize(("line", "kept"), [
    ("    return 0", "    return "),
    ("        if op < 0:", "        if "),
    ("    elif x:", "    elif "),
    ("    while n > 0:", "    while "),
    ("    assert ok", "    assert "),
    ("    for i in range(n):", "    for i in "),
    ("        ans.append(i)", "        ans.append("),
    ("    x = 1", "    x = "),
    ("    seen[k] += 1", "    seen[k] += "),
    ("    n //= 2", "    n //= "),
])
def test_the_name_goes_where_the_line_s_expression_starts(line: str, kept: str) -> None:
    assert line[:value_slot(line)] == kept


@pytest.mark.parametrize("line", ["    else:", "    with open(p) as f:", "    x == y",
                                  "    pass", "    x <= y"])
def test_a_line_with_no_such_place_takes_no_name(line: str) -> None:
    assert value_slot(line) is None


# --- the hinted pass --------------------------------------------------------------------------

def _request(marked: str = PICK) -> InfillRequest:
    return marked_request(marked, length=12, steps=4)


def test_a_fill_that_leaves_the_value_unread_gives_way_to_one_that_reads_it(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "        ans.append(row)",
                                  "        ans.append(val)", request)
    layouts = spied_layouts(monkeypatch)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.valid, best.path) == ("        ans.append(val)", True, VALUE)
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then one from given tokens
    # the fill's line kept up to its call's parenthesis, then the name, which ends there
    tok = engine.model.tokenizer
    hinted = layouts[1]
    begun = len(tok.encode(hinted.head + "        ans.append(val"))
    assert tok.decode(list(hinted.init_ids[:begun])).endswith("        ans.append(val")
    banned = {token for position, token in hinted.banned if position == begun}
    assert tok.word_going_on_ids <= banned
    assert not banned & tok.line_break_ids  # `return largest` may end there


def test_a_fill_that_reads_the_value_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "        ans.append(val)",
                                  "        ans.append(row)", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("        ans.append(val)", DIFFUSION)
    assert runs == [DIFFUSION]


def test_with_value_hints_off_the_fill_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "        ans.append(row)",
                                  "        ans.append(val)", request, value_hints=False)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


def test_a_line_with_no_place_for_the_name_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request("def f(xs):\n    total = sum(xs)\n⟦⟧\n")
    engine, runs = planted_engine(model_dir, monkeypatch, "    pass", "    return total",
                                  request)
    assert engine.infill(request).candidates[0].text == "    pass"
    assert runs == [DIFFUSION]


@pytest.mark.parametrize("then", ["        ans.append(val, (", "        ans.append(val, y)"])
def test_a_hinted_fill_that_fails_the_checks_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "        ans.append(row)", then,
                                  request)
    result = engine.infill(request)
    assert result.candidates[0].text == "        ans.append(row)"
    assert VALUE not in [c.path for c in result.candidates]
    assert REPAIR in runs  # tried, and left out


def test_a_hinted_fill_that_leaves_another_value_unread_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`return y` for `return x` where `x + y` was wanted reads `y` and leaves `x`."""
    request = _request("def add(x, y):\n⟦⟧\n")
    engine, runs = planted_engine(model_dir, monkeypatch, "    return x", "    return y",
                                  request)
    result = engine.infill(request)
    assert result.candidates[0].text == "    return x"
    assert VALUE not in [c.path for c in result.candidates]
    assert REPAIR in runs  # tried, and left out
