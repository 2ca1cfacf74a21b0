"""Specification of the context cache (dlm_lsp/models/cache.py) and its use by the engine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

import dlm_lsp.passes as passes
import dlm_lsp.sampler as sampler
from dlm_lsp.config import InfillOptions, ServerConfig, from_json
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models import load_model
from dlm_lsp.models.cache import CacheConfig, ContextCache
from dlm_lsp.sampler import SamplerConfig, denoise
from dlm_lsp.span import build_layout


@pytest.fixture(scope="module", params=["fp32", "bf16"])
def model(model_dir: Path, request: pytest.FixtureRequest):
    return load_model(str(model_dir), "cpu", request.param)


def _cache(model, layout, config: CacheConfig) -> ContextCache:
    """The cache the engine would make for this model (in its precision)."""
    return ContextCache(model.module, layout.span_start, layout.span_end, config,
                        bf16=model.precision == "bf16")


PREFIX = "import os\n\ndef walk(root):\n    for name in os.listdir(root):\n        "
SUFFIX = "\n    return None\n" * 6


def _layout(model, n: int = 12):
    return build_layout(model.tokenizer, PREFIX, SUFFIX, n, 400, max_length=model.max_length)


def test_the_full_pass_gives_the_model_s_own_logits(model) -> None:
    layout = _layout(model)
    ids = torch.tensor([layout.sequence(model.mask_id)])
    cache = _cache(model, layout, CacheConfig())
    full, own = cache.full(ids), model.logits(ids)
    # in bf16 the two passes round in different places: close, and the same choices
    assert torch.allclose(full, own, atol=1e-5 if model.precision == "fp32" else 3e-2)
    assert torch.equal(full.argmax(-1), own.argmax(-1))


def test_a_cached_step_recomputes_only_the_span_and_stays_close(model) -> None:
    layout = _layout(model)
    ids = torch.tensor([layout.sequence(model.mask_id)])
    cache = _cache(model, layout, CacheConfig(refresh=100, window=4))
    cache(ids)  # the full pass fills the store
    ids[0, layout.span_start] = 42  # the span changes; the context does not
    cached = cache(ids)
    exact = model.logits(ids)[:, layout.span_start:layout.span_end]
    assert cached.shape == exact.shape and cache.full_passes == 1
    assert (cached - exact).abs().max() < 0.5 * exact.abs().max()  # approximate, not wild
    assert (cached.argmax(-1) == exact.argmax(-1)).float().mean() > 0.5


@pytest.mark.parametrize("strategy", ["confidence", "random", "left-to-right"])
def test_refreshing_every_step_gives_exactly_the_uncached_output(model, strategy: str) -> None:
    layout = _layout(model)
    cfg = SamplerConfig(steps=6, strategy=strategy, temperatures=(0.0, 0.7))
    cache = _cache(model, layout, CacheConfig(refresh=1))
    cached = denoise(model, layout, cfg, 3, forward=cache)
    plain = denoise(model, layout, cfg, 3)
    assert cached.span_ids.tolist() == plain.span_ids.tolist()
    assert cache.full_passes == cached.steps


def test_a_cached_run_takes_a_full_pass_every_refresh_steps(model) -> None:
    layout = _layout(model)
    cache = _cache(model, layout, CacheConfig(refresh=4))
    out = denoise(model, layout, SamplerConfig(steps=10), 0, forward=cache)
    assert out.steps == 10 and cache.full_passes == 3  # steps 1, 5 and 9
    assert model.mask_id not in out.span_ids.tolist()[0]


def test_the_engine_uses_the_cache_when_switched_on(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = []

    class Recorded(ContextCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
    monkeypatch.setattr(passes, "ContextCache", Recorded)

    def fill(**settings):
        engine = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                                     repair_rounds=0, fallback=False, **settings))
        text = PREFIX + SUFFIX
        return engine.infill(InfillRequest(text, len(PREFIX), len(PREFIX), "python",
                                           options=InfillOptions(length=8, steps=4)))
    plain = fill(context_cache=False)
    assert made == []
    exact = fill(context_cache=True, cache_refresh=1)
    assert exact.candidates[0].text == plain.candidates[0].text
    approximate = fill(context_cache=True, cache_refresh=4)
    assert approximate.steps == plain.steps
    assert [c.full_passes for c in made] == [exact.steps, 1]  # steps 1..4: one full pass


def test_by_default_our_own_model_keeps_a_cache_on_the_cpu_and_not_on_cuda(model) -> None:
    """"auto": on the CPU a step is arithmetic, which the cache cuts; on CUDA our steps
    replay as graphs, which a cached step does not.  `true` and `false` say it outright."""
    assert ServerConfig().context_cache == "auto"
    assert passes.caches_context(model, ServerConfig())
    assert not passes.caches_context(model, ServerConfig(context_cache=False))
    on_cuda = object.__new__(type(model))  # the same model, as the engine would see it there
    on_cuda.__dict__.update(model.__dict__, device=torch.device("cuda", 0))
    assert not passes.caches_context(on_cuda, ServerConfig())
    assert passes.caches_context(on_cuda, ServerConfig(context_cache=True))


def test_auto_keeps_no_cache_for_a_fill_whose_span_may_grow(model) -> None:
    """`growForHead` is asked for; a cache's span is fixed, so "auto" yields to it (and
    `true` keeps its cache, the span not growing: the next test)."""
    assert not passes.caches_context(model, ServerConfig(), grows=True)
    assert passes.caches_context(model, ServerConfig(context_cache=True), grows=True)


def test_the_cache_s_setting_is_true_false_or_auto() -> None:
    for value in (True, False, "auto"):
        assert from_json(ServerConfig, {"contextCache": value}) == (
            ServerConfig(context_cache=value), [])
    for value in ("on", "true", 1, 0):
        config, problems = from_json(ServerConfig, {"contextCache": value})
        assert config.context_cache == "auto" and len(problems) == 1
        assert problems[0].endswith('should be true, false or "auto"; default kept'), problems


def test_a_cached_fill_starts_no_batching_worker(model_dir: Path) -> None:
    """A pass with a context cache runs alone (the cache is its own), so the engine's
    batching worker, a thread that keeps the model, is not started for it."""
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                                 repair_rounds=0, fallback=False, context_cache=True))
    text = PREFIX + SUFFIX
    engine.infill(InfillRequest(text, len(PREFIX), len(PREFIX), "python",
                                options=InfillOptions(length=8, steps=4)))
    assert engine._batcher is None
    engine.reconfigure(replace(engine.config, context_cache=False))
    engine.infill(InfillRequest(text, len(PREFIX), len(PREFIX), "python",
                                options=InfillOptions(length=8, steps=4)))
    assert engine._batcher is not None  # without the cache, fills share the worker


def test_a_cached_fill_keeps_its_span_where_a_head_s_chain_would_grow_it(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache holds a span of fixed length: with `growForHead`, a fill whose head's chain
    outgrew the head's own tokens is made as without it, not from a stale cache."""
    spelled = sampler.head_tokens

    def one_character_chain(chain, logits):  # a chain of one-space tokens: longer
        tok = engine.model.tokenizer
        boost = torch.zeros_like(logits)
        boost[:, [tok.token_id("Ġ"), tok.token_id("Ċ")]] = 100.0
        return spelled(chain, logits + boost)
    monkeypatch.setattr(sampler, "head_tokens", one_character_chain)
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", reuse_fills=False,
                                 repair_rounds=0, fallback=False, grow_for_head=True,
                                 context_cache=False))
    text = PREFIX + SUFFIX

    def fill():
        return engine.infill(InfillRequest(text, len(PREFIX), len(PREFIX), "python",
                                           options=InfillOptions(length=8, steps=4)))
    grown = fill()
    engine.reconfigure(replace(engine.config, grow_for_head=False))
    plain = fill()
    engine.reconfigure(replace(engine.config, grow_for_head=True, context_cache=True,
                               cache_refresh=1))
    cached = fill()
    assert grown.candidates[0].ids != plain.candidates[0].ids  # it grew without the cache
    assert cached.candidates[0].ids == plain.candidates[0].ids
