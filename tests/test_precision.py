"""Specification of the `precision` setting: faster arithmetic, the same model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models import ModelLoadError, load_model, tiny


def test_bf16_scores_tokens_like_fp32(model_dir: Path) -> None:
    exact = load_model(str(model_dir), "cpu", "fp32")
    fast = load_model(str(model_dir), "cpu", "bf16")
    assert fast.precision == "bf16"
    ids = torch.randint(2, exact.tokenizer.vocab_size, (2, 64))
    a, b = exact.logits(ids), fast.logits(ids)
    assert b.dtype == torch.float32 and b.shape == a.shape
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.9


def _span_states(model, rows: int = 2) -> torch.Tensor:
    """Hidden states of a span: a slice of the sequence's, as the sampler asks the head."""
    ids = torch.randint(2, model.tokenizer.vocab_size, (rows, 64))
    return model.hidden(ids)[:, 20:36]


def test_the_bf16_head_on_a_cpu_gives_autocasts_logits_bit_for_bit(model_dir: Path) -> None:
    fast = load_model(str(model_dir), "cpu", "bf16")
    for rows in (1, 3):
        states = _span_states(fast, rows)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = (states @ fast.module.embed.weight.T).float()
        assert torch.equal(fast.head(states), autocast)


def _made_sizes(call) -> list[int]:
    """The sizes of the tensors `call()` makes (views, which copy nothing, left out)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Outputs(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[int] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view:
                self.sizes += [t.numel() for t in torch.utils._pytree.tree_leaves(out)
                               if isinstance(t, torch.Tensor)]
            return out

    with Outputs() as seen:
        call()
    return seen.sizes


def test_the_bf16_head_on_a_cpu_copies_no_weight_on_a_pass(model_dir: Path) -> None:
    fast = load_model(str(model_dir), "cpu", "bf16")
    states, size = _span_states(fast), fast.module.embed.weight.numel()
    fast.head(states)  # the first pass may cast the weight once
    # neither a cast of the weight nor a copy broadcast over the rows
    assert size not in _made_sizes(lambda: fast.head(states))


def test_a_context_cached_bf16_step_on_a_cpu_copies_no_head_weight(model_dir: Path) -> None:
    from dlm_lsp.passes import context_cache
    from dlm_lsp.span import build_layout

    fast = load_model(str(model_dir), "cpu", "bf16")
    layout = build_layout(fast.tokenizer, "def f(x):\n    return ", "\n", 6, 400,
                          max_length=fast.max_length)
    cache = context_cache(fast, ServerConfig(context_cache=True), layout)
    ids = torch.tensor([layout.sequence(fast.mask_id)])
    cache(ids)  # a full pass, and the head's weight cast once
    assert fast.module.embed.weight.numel() not in _made_sizes(lambda: cache(ids))


def test_the_bf16_head_follows_a_change_of_the_weight(model_dir: Path) -> None:
    fast = load_model(str(model_dir), "cpu", "bf16")
    states = _span_states(fast)
    before = fast.head(states)
    with torch.no_grad():
        fast.module.embed.weight.mul_(2)
    assert not torch.equal(fast.head(states), before)


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_bf16_on_a_cpu_with_native_bf16_and_fp32_elsewhere(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, native: bool) -> None:
    monkeypatch.setattr(tiny, "cpu_has_native_bf16", lambda: native)
    assert load_model(str(model_dir), "cpu").precision == ("bf16" if native else "fp32")
    assert load_model(str(model_dir), "cpu", "fp32").precision == "fp32"  # asked: kept


def test_native_bf16_is_read_from_the_cpu_flags(monkeypatch: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    monkeypatch.setattr(tiny, "CPUINFO", info)
    try:
        for flags, expected in (("fpu avx512f avx512_bf16 sse", True), ("fpu amx_bf16", True),
                                ("fpu avx2 avx512f", False), (None, False)):
            if flags is None:
                info.unlink()  # no /proc/cpuinfo (not Linux): no
            else:
                info.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
            tiny.cpu_has_native_bf16.cache_clear()
            assert tiny.cpu_has_native_bf16() is expected
    finally:
        tiny.cpu_has_native_bf16.cache_clear()


def test_an_unknown_precision_is_a_clear_error(model_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="not one of"):
        load_model(str(model_dir), "cpu", "int8")


def test_the_engine_serves_fills_in_the_configured_precision(model_dir: Path) -> None:
    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", precision="bf16"))
    result = engine.infill(InfillRequest("x = |\n".replace("|", ""), 4, 4, "python",
                                         options=InfillOptions(length=4, steps=2)))
    assert engine.model.precision == "bf16" and result.steps >= 1
    engine.reconfigure(ServerConfig(model=str(model_dir), device="cpu", precision="fp32"))
    assert engine.model.precision == "fp32"  # a new precision reloads the model


def _engine_timing_cheaply(monkeypatch: pytest.MonkeyPatch, config: ServerConfig) -> Engine:
    """An engine whose step cost is timed on one short length (the real one takes seconds)."""
    import dlm_lsp.engine as engine_module

    real_calibrate = engine_module.calibrate
    monkeypatch.setattr(engine_module, "calibrate",
                        lambda model: real_calibrate(model, lengths=(8,), repeats=1))
    return Engine(config)


@pytest.mark.parametrize("cuda, native, before, after", [
    (False, False, "auto", "fp32"), (False, False, "fp32", "auto"),
    (False, True, "auto", "bf16"), (False, True, "bf16", "auto"),
    (True, False, "auto", "bf16"), (True, False, "bf16", "auto")])
def test_naming_the_precision_auto_resolves_to_keeps_the_model_and_its_step_cost(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, cuda_machine: list, cuda: bool,
        native: bool, before: str, after: str) -> None:
    """"auto" is bf16 on CUDA and on a CPU with native bf16, else fp32: saying which loaded
    the same model again (seconds to minutes for a big checkpoint) and timed its step
    again."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(tiny, "cpu_has_native_bf16", lambda: native)
    config = ServerConfig(model=str(model_dir), precision=before)
    eng = _engine_timing_cheaply(monkeypatch, config)
    model, cost = eng.model, eng.step_cost()
    assert eng.reconfigure(replace(config, precision=after)) is False
    assert eng.model is model and eng.step_cost() is cost
    assert eng.status()["stepMs"] is not None and len(cuda_machine) == 1


@pytest.mark.parametrize("native, before, after", [
    (False, "auto", "bf16"), (True, "auto", "fp32"), (False, "fp32", "bf16")])
def test_a_precision_setting_that_resolves_to_another_reloads_the_model(
        model_dir: Path, monkeypatch: pytest.MonkeyPatch, native: bool, before: str,
        after: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(tiny, "cpu_has_native_bf16", lambda: native)
    config = ServerConfig(model=str(model_dir), precision=before)
    eng = Engine(config)
    model = eng.model
    assert eng.reconfigure(replace(config, precision=after))
    assert eng.model is not model and eng.model.precision == after


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_rotary_positions_rotate_each_channel_pair_bit_for_bit(dtype: torch.dtype) -> None:
    """The channels (2i, 2i+1) of a row at position p turn by p times the pair's angle,
    each product rounded in the row's dtype as the formula writes it."""
    x = (torch.randn(2, 3, 10, 8) * 3).to(dtype)
    start = 5
    cos, sin = tiny._rotation(8, 10_000.0, start + 10, x.device, dtype)
    cos, sin = cos[start:start + 10], sin[start:start + 10]
    out = tiny._rope(x, 10_000.0, start)
    for i in range(4):
        a, b = x[..., 2 * i], x[..., 2 * i + 1]
        assert torch.equal(out[..., 2 * i], a * cos[:, i] - b * sin[:, i])
        assert torch.equal(out[..., 2 * i + 1], a * sin[:, i] + b * cos[:, i])
