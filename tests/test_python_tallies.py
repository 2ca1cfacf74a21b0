"""Specification of tally hints (`tallyHints`, passes.InfillRun.tally_hint): where a loop
around a Python fill is there to update a local (`ans = 0` just before it, `return ans`
after) and the best fill leaves it as it began, one more pass begins the fill with that
local's name and offers it first.

Documents mark the span as ⟦⟧ (an insertion point), as in test_python_returns.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import planted_engine, spied_layouts
from marked import marked_document, marked_request, marked_verdict

from dlm_lsp import passes as passes_module
from dlm_lsp.engine import InfillRequest
from dlm_lsp.repair import DIFFUSION, REPAIR, TALLY

COUNT = ("def count_odd(xs):\n    ans = 0\n    for x in xs:\n        if x % 2:\n⟦⟧\n"
         "    return ans\n")
GATHER = "def gather(xs):\n    out = []\n    for x in xs:\n⟦⟧\n    return out\n"


def _idle(marked: str, fill: str, language: str = "python") -> list[str]:
    document, at = marked_document(marked, language)
    return document.idle_tallies(at, at, fill)


# --- what leaves a local idle -----------------------------------------------------------------

def test_a_counter_the_loop_never_updates_is_idle() -> None:
    assert _idle(COUNT, "            return x") == ["ans"]
    assert _idle(COUNT, "            other = 1") == ["ans"]
    assert _idle(COUNT, "            ans += 1") == []
    assert _idle(COUNT, "            ans = x") == []


def test_a_container_the_loop_never_fills_is_idle() -> None:
    assert _idle(GATHER, "        y = x") == ["out"]
    assert _idle(GATHER, "        out.append(x)") == []
    assert _idle(GATHER, "        out[x] = 1") == []
    assert _idle(GATHER, "        out += [x]") == []
    assert _idle(GATHER, "        print(out)") == []  # a call may fill it


@pytest.mark.parametrize("fill", [
    "            ans = 0",  # what it began as, again
    "            ans = ans",
    "            ans += 0",
    "            ans *= 0",
    "            ans *= 2",  # 0 * 2 is 0
    "            ans -= 0.0",
])
def test_an_update_that_leaves_the_value_as_it_began_changes_nothing(fill: str) -> None:
    assert _idle(COUNT, fill) == ["ans"]


def test_another_constant_is_a_change() -> None:
    """`found = True` in a loop is how a flag is set."""
    assert _idle(COUNT, "            ans = 1") == []
    assert _idle(COUNT, "            ans -= 1") == []
    assert _idle(GATHER, "        out = 0") == ["out"]  # a container's name to a constant


@pytest.mark.parametrize("marked", [
    # computed, not a constant it began with
    "def f(xs):\n    ans = len(xs)\n    for x in xs:\n⟦⟧\n    return ans\n",
    # read nowhere after the loop
    "def f(xs):\n    ans = 0\n    for x in xs:\n⟦⟧\n    return 1\n",
    # bound inside a block above the loop, not beside it
    "def f(xs):\n    if xs:\n        ans = 0\n    for x in xs:\n⟦⟧\n    return ans\n",
    # bound after the loop
    "def f(xs):\n    for x in xs:\n⟦⟧\n    ans = 0\n    return ans\n",
    # a parameter; declared global; read by a closure
    "def f(ans):\n    ans = 0\n    for x in []:\n⟦⟧\n    return ans\n",
    "def f(xs):\n    global ans\n    ans = 0\n    for x in xs:\n⟦⟧\n    return ans\n",
    "def f(xs):\n    ans = 0\n    g = lambda: ans\n    for x in xs:\n⟦⟧\n    return ans\n",
    # updated elsewhere in the loop, or changed in place after it
    "def f(xs):\n    ans = 0\n    for x in xs:\n⟦⟧\n        ans += x\n    return ans\n",
    "def f(xs):\n    out = []\n    for x in xs:\n⟦⟧\n    out.append(1)\n    return out\n",
    # a container the loop reads (passed to a call there)
    "def f(xs):\n    out = []\n    for x in xs:\n        helper(out, x)\n⟦⟧\n    return out\n",
    # the fill is not in a loop's body
    "def f(xs):\n    ans = 0\n⟦⟧\n    for x in xs:\n        pass\n    return ans\n",
])
def test_where_the_loop_is_not_the_local_s_only_hope_none_is_idle(marked: str) -> None:
    assert _idle(marked, "        y = 1") == []


def test_the_local_bound_nearest_above_its_loop_comes_first() -> None:
    marked = ("def f(xs):\n    total = 0\n    seen = []\n    for x in xs:\n⟦⟧\n"
              "    return total, seen\n")
    assert _idle(marked, "        y = x") == ["seen", "total"]


def test_each_loop_around_the_fill_counts() -> None:
    marked = ("def f(rows):\n    n = 0\n    for row in rows:\n        for x in row:\n⟦⟧\n"
              "    return n\n")
    assert _idle(marked, "            y = x") == ["n"]
    assert _idle(marked, "            n += x") == []


def test_only_python_is_judged() -> None:
    assert _idle(COUNT, "            return x", language="javascript") == []


# --- the hinted pass --------------------------------------------------------------------------

def _request(marked: str = COUNT) -> InfillRequest:
    return marked_request(marked, length=12, steps=4)


def _retry_writes(engine, monkeypatch: pytest.MonkeyPatch, fill: str) -> list:
    """The layouts of the hinted passes from now on; the planted model writes `fill` from
    the second on (the first retry)."""
    planted = engine.model._make.__self__
    hinted = []
    real = passes_module.denoise

    def retry_writes(model, layout, *args):
        if layout.init_ids is not None:
            hinted.append(layout)
            if len(hinted) == 2:
                ids = model.tokenizer.encode(layout.head + fill)
                planted.targets[True] = ids + [model.pad_id] * (planted.n - len(ids))
        return real(model, layout, *args)
    monkeypatch.setattr(passes_module, "denoise", retry_writes)
    return hinted


def test_a_fill_that_leaves_the_counter_idle_gives_way_to_one_begun_with_it(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x",
                                  "            ans += 1", request)
    layouts = spied_layouts(monkeypatch)
    result = engine.infill(request)
    best = result.candidates[0]
    assert (best.text, best.valid, best.path) == ("            ans += 1", True, TALLY)
    assert runs == [DIFFUSION, REPAIR]  # the first pass, then one from given tokens
    # begun with the name on the fill's indentation; the position after it goes on
    tok = engine.model.tokenizer
    hinted = layouts[1]
    begun = len(tok.encode(hinted.head + "            ans"))
    assert tok.decode(list(hinted.init_ids[:begun])).endswith("            ans")
    banned = {token for position, token in hinted.banned if position == begun}
    assert engine.model.pad_id in banned and tok.line_break_ids <= banned


def test_a_fill_that_updates_the_counter_costs_no_more_pass(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            ans += x",
                                  "            ans += 1", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("            ans += x", DIFFUSION)
    assert runs == [DIFFUSION]


def test_with_tally_hints_off_the_fill_stands(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x",
                                  "            ans += 1", request, tally_hints=False)
    assert engine.infill(request).candidates[0].path == DIFFUSION
    assert runs == [DIFFUSION]


@pytest.mark.parametrize("then", ["            ans += (", "            ans += y"])
def test_a_hinted_fill_that_fails_the_checks_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x", then,
                                  request)
    result = engine.infill(request)
    assert result.candidates[0].text == "            return x"
    assert TALLY not in [c.path for c in result.candidates]
    assert REPAIR in runs  # tried, and left out


def test_a_hinted_fill_that_changes_nothing_is_written_again_without_its_last_token(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ans += 0` leaves `ans` as it began: once more, the `0` barred where it stood."""
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x",
                                  "            ans += 0", request)
    layouts = spied_layouts(monkeypatch)
    hinted = _retry_writes(engine, monkeypatch, "            ans += 1")
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("            ans += 1", TALLY)
    assert len(hinted) == 2 and len(layouts) == 3
    tok = engine.model.tokenizer
    spelled = tok.encode(hinted[0].head + "            ans += 0")
    extra = set(hinted[1].banned) - set(hinted[0].banned)
    assert extra == {(len(spelled) - 1, spelled[-1])}  # the `0`, where it stood


def test_a_retry_that_still_changes_nothing_is_not_offered(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x",
                                  "            ans = ans", request)
    result = engine.infill(request)
    assert result.candidates[0].text == "            return x"
    # the hinted pass and its retry (which, its `ans` barred, writes another token there
    # and may take a repair round)
    assert runs[:3] == [DIFFUSION, REPAIR, REPAIR]


def _resets(marked: str, fill: str) -> bool:
    document, at = marked_document(marked)
    return document.resets(at, at, fill, "ans")


FLAG = ("def any_odd(xs):\n    ans = False\n    for x in xs:\n        if x % 2:\n⟦⟧\n"
        "    return ans\n")


def test_a_counter_set_to_a_number_once_more_is_reset() -> None:
    """`ans = 1` moves `ans`, but whatever the loop saw: the hint's pass tries again."""
    assert _resets(COUNT, "            ans = 1")
    assert _resets(COUNT, "            ans = -2.5")
    assert not _resets(COUNT, "            ans += 1")
    assert not _resets(COUNT, "            ans = x")
    assert not _resets(COUNT, "            other = 1")
    assert not _resets(FLAG, "            ans = True")  # a flag begun as a bool
    # a container begun empty, replaced by a name (HumanEval/132's `idx =i`); by a
    # constant it is left idle, which is asked otherwise
    assert _resets(GATHER.replace("out", "ans"), "        ans = x")
    assert not _resets(GATHER.replace("out", "ans"), "        ans = 1")
    assert not _resets(GATHER.replace("out", "ans"), "        ans = ans + [x]")
    assert not _resets(COUNT, "            return x")


def test_a_hinted_fill_that_sets_the_counter_is_written_again_without_its_equals_sign(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ans = 1` where `ans = 0` began it: once more, the `=` after the name barred."""
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x",
                                  "            ans = 1", request)
    hinted = _retry_writes(engine, monkeypatch, "            ans += 1")
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("            ans += 1", TALLY)
    assert len(hinted) == 2
    tok = engine.model.tokenizer
    name = len(tok.encode(hinted[0].head + "            ans"))
    spelled = tok.encode(hinted[0].head + "            ans = 1")
    extra = set(hinted[1].banned) - set(hinted[0].banned)
    assert extra == {(name, spelled[name])}  # the ` =`, where it stood


def test_a_set_counter_that_no_retry_updates_otherwise_is_kept(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flag may be written so (`flg = 1`): where the retries write nothing that moves
    the counter otherwise, the first hinted fill stands."""
    request = _request()
    engine, runs = planted_engine(model_dir, monkeypatch, "            return x",
                                  "            ans = 1", request)
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("            ans = 1", TALLY)
    assert runs.count(REPAIR) >= 2  # the hinted pass, and at least one retry


def test_a_method_of_the_container_named_and_not_called_goes_on_once_more(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`out.append` alone changes nothing: once more, the line may not end after it."""
    request = marked_request(GATHER, length=12, steps=4)
    engine, runs = planted_engine(model_dir, monkeypatch, "        y = x",
                                  "        out.append", request)
    hinted = _retry_writes(engine, monkeypatch, "        out.append(x)")
    best = engine.infill(request).candidates[0]
    assert (best.text, best.path) == ("        out.append(x)", TALLY)
    tok = engine.model.tokenizer
    named = len(tok.encode(hinted[0].head + "        out.append"))
    extra = set(hinted[1].banned) - set(hinted[0].banned)
    assert extra == {(named, token) for token in tok.line_break_ids | {engine.model.pad_id}}


# --- a number its updates never move (rejected, with checkNames) ------------------------------

PRODUCT = ("def product(ns):\n⟦⟧\n    for n in ns:\n        prod_value *= n\n"
           "    return prod_value\n")


def test_a_product_begun_at_zero_is_rejected_at_its_number() -> None:
    verdict = marked_verdict(PRODUCT, "    prod_value = 0")
    assert (verdict.valid, verdict.parses, verdict.names) == (False, True, ("prod_value",))
    assert "never moves" in verdict.reason
    text = PRODUCT.replace("⟦⟧", "    prod_value = 0")
    [(start, end)] = verdict.new_ranges  # the number, for repair to write again
    assert text[start:end] == "0"
    assert marked_verdict(PRODUCT, "    prod_value = 1").valid


@pytest.mark.parametrize(("update", "seed"), [
    ("x *= n", "0.0"), ("x &= n", "0"), ("x //= n", "0"), ("x %= n", "0"),
    ("x **= n", "1"), ("x |= n", "-1"), ("x <<= n", "0"),
])
def test_each_operator_that_leaves_its_number_as_it_is(update: str, seed: str) -> None:
    marked = f"def f(ns):\n⟦⟧\n    for n in ns:\n        {update}\n    return x\n"
    assert not marked_verdict(marked, f"    x = {seed}").valid


@pytest.mark.parametrize("marked", [
    # another operator moves it
    "def f(ns):\n⟦⟧\n    for n in ns:\n        x *= n\n        x += 1\n    return x\n",
    # bound again
    "def f(ns):\n⟦⟧\n    for n in ns:\n        x *= n\n    x = 5\n    return x\n",
    # never updated at all (a constant: nothing to say)
    "def f(ns):\n⟦⟧\n    return x\n",
    # the fill does not write the number: not its doing
    "def f(ns):\n    x = 0\n⟦⟧\n    for n in ns:\n        x *= n\n    return x\n",
])
def test_a_number_that_may_move_or_is_not_the_fill_s_passes(marked: str) -> None:
    fill = "    y = 1" if "    x = 0\n" in marked else "    x = 0"
    assert marked_verdict(marked, fill).valid
