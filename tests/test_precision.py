"""Specification of the `precision` setting: faster arithmetic, the same model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from dlm_lsp.config import InfillOptions, ServerConfig
from dlm_lsp.engine import Engine, InfillRequest
from dlm_lsp.models import ModelLoadError, load_model


def test_bf16_scores_tokens_like_fp32(model_dir: Path) -> None:
    exact = load_model(str(model_dir), "cpu", "fp32")
    fast = load_model(str(model_dir), "cpu", "bf16")
    assert fast.precision == "bf16"
    ids = torch.randint(2, exact.tokenizer.vocab_size, (2, 64))
    a, b = exact.logits(ids), fast.logits(ids)
    assert b.dtype == torch.float32 and b.shape == a.shape
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.9


def test_auto_is_fp32_on_the_cpu(model_dir: Path) -> None:
    assert load_model(str(model_dir), "cpu").precision == "fp32"


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
