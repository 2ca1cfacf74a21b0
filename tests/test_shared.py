"""Specification of dlm_lsp.shared: TCP clients fill on one engine with their own settings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dlm_lsp.backends import take_notices
from dlm_lsp.config import InfillOptions, ServerConfig, camel
from dlm_lsp.models import tiny
from dlm_lsp.results import InfillRequest
from dlm_lsp.server import build_server
from dlm_lsp.shared import ENGINE_SETTINGS, EnginePool

TEXT = "def area(w, h):\n    return \n"


def _fill(view) -> int:
    at = TEXT.index("return ") + len("return ")
    return view.infill(InfillRequest(TEXT, at, at, "python", "file:///a.py",
                                     InfillOptions(repair_rounds=0, fallback=False))).steps


def test_clients_share_one_engine_but_fill_with_their_own_settings(model_dir: Path) -> None:
    pool = EnginePool()
    base = ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False)
    one = pool.join(replace(base, steps=2))
    two = pool.join(replace(base, steps=5))
    assert one.engine is two.engine
    assert (_fill(one), _fill(two)) == (2, 5)  # each client's step budget, one model
    assert two.status()["clients"] == 2


def test_a_lone_client_sets_the_engine_and_a_sharing_one_is_told_it_cannot(
        model_dir: Path) -> None:
    pool = EnginePool()
    base = ServerConfig(model=str(model_dir), device="cpu", precision="fp32")
    one = pool.join(base)
    one.reconfigure(replace(base, batch_rows=4))  # alone: as over stdio
    assert one.engine.config.batch_rows == 4 and one.setting_problems == []
    two = pool.join(replace(base, precision="bf16", batch_rows=4))
    assert two.engine.config.precision == "fp32"
    assert "precision 'fp32'" in two.setting_problems[0]
    assert "batchRows" not in two.setting_problems[0]  # what agrees is not mentioned
    one.close()  # alone now: what it asked for applies
    assert two.engine.config.precision == "bf16" and two.setting_problems == []
    assert two.status()["clients"] == 1


def test_a_sharing_client_is_told_once_until_what_the_engine_keeps_changes(
        model_dir: Path) -> None:
    """Editors send every setting at each change: the note that the engine keeps its
    precision is not told again when only a fill setting changed."""
    pool = EnginePool()
    base = {"model": str(model_dir), "device": "cpu"}
    pool.join(ServerConfig(**base, precision="fp32"))
    ls = build_server(pool.join)
    problems = ls.apply_settings({**base, "precision": "bf16"}, initial=True)[0]
    assert ["precision 'fp32'" in p for p in problems] == [True]
    assert ls.apply_settings({"dlm": {**base, "precision": "bf16", "steps": 3}})[0] == []
    problems = ls.apply_settings({"dlm": {"batchRows": 2}})[0]  # something else kept: told
    assert ["batchRows 16" in p for p in problems] == [True]
    assert ls.apply_settings({"dlm": {"precision": "fp32", "batchRows": 16}})[0] == []
    problems = ls.apply_settings({"dlm": {"precision": "bf16"}})[0]  # asked again: told
    assert ["precision 'fp32'" in p for p in problems] == [True]


def test_a_sharing_client_has_no_model_load_to_show(model_dir: Path) -> None:
    """The engine keeps its settings while shared, so the server shows no load for the
    client's new ones; a client alone gets the engine's own answer."""
    pool = EnginePool()
    base = ServerConfig(model=str(model_dir), device="cpu", precision="fp32")
    one = pool.join(base)
    model = one.engine.model
    two = pool.join(base)
    assert two.reconfigure(replace(base, precision="bf16")) is False
    assert one.engine.model is model
    two.close()
    assert one.reconfigure(replace(base, precision="bf16")) is True


@pytest.mark.parametrize("cuda, asked, told", [
    (False, {"device": "cpu"}, set()),
    (False, {"precision": "fp32"}, set()),
    (False, {"cuda_graphs": False}, set()),
    (False, {"device": "cpu", "precision": "fp32", "cuda_graphs": False}, set()),
    (False, {"device": "cpu", "precision": "bf16", "batch_rows": 2}, {"precision", "batch_rows"}),
    (True, {"device": "cuda", "precision": "bf16"}, set()),
    (True, {"device": "cpu"}, {"device"}),
    (True, {"device": "cuda", "cuda_graphs": False}, {"cuda_graphs"})])
def test_a_sharing_client_is_told_only_of_engine_settings_that_load_another_model(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, cuda: bool, asked: dict,
        told: set[str]) -> None:
    """The engine's "auto" is the CPU, in fp32, without graphs (or the GPU, in bf16, with
    them): a client asking for it in other words gets the model it asks for, and was told
    that the engine keeps its own settings."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(tiny, "cpu_has_native_bf16", lambda: False)
    pool = EnginePool()
    base = ServerConfig(model=str(model_dir), device="auto", precision="auto")
    pool.join(base)
    two = pool.join(replace(base, **asked))
    said = " ".join(two.setting_problems)
    assert {name for name in ENGINE_SETTINGS if f"{camel(name)} " in said} == told


@pytest.mark.parametrize("loaded", [False, True])
def test_a_sharing_client_is_told_too_long_to_rewrite_by_its_own_max_span_tokens(
        model_dir: Path, loaded: bool) -> None:
    """`maxSpanTokens` is a fill setting, each client's own: a code action is told too
    long by the limit the client's rewrite is refused with, not by the engine's (the
    first client's), before the model is loaded and after."""
    pool = EnginePool()
    base = ServerConfig(model=str(model_dir), device="cpu")
    one = pool.join(replace(base, max_span_tokens=32))
    two = pool.join(replace(base, max_span_tokens=900))
    if loaded:
        one.preload()
    text = "".join(f"value_{i} = compute({i})\n" for i in range(50))  # ~1,100 characters
    told = one.rewrite_refusal(text)
    assert told is not None and "maxSpanTokens, 32" in told
    assert two.rewrite_refusal(text) is None


def test_notices_are_taken_once_oldest_first_and_none_is_left() -> None:
    """What the server shows, the shared engine hands to its client and the service sends
    with a fill: each notice once, in the order the backend said them."""
    from collections import deque

    notices = deque(["out of memory: now at most 4 rows", "falling back to the cpu"])
    assert take_notices(notices) == ["out of memory: now at most 4 rows",
                                     "falling back to the cpu"]
    assert not notices and take_notices(notices) == []
