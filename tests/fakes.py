"""A fake DiffusionModel for testing the sampler and engine without a trained model."""

from __future__ import annotations

from collections.abc import Callable

import torch

import dlm_lsp.passes as passes_module
from dlm_lsp.models.tokenizer import MASK_TOKEN, PAD_TOKEN, Tokenizer
from dlm_lsp.repair import DIFFUSION, REPAIR
from dlm_lsp.span import borrowed_line_break, build_layout


class FakeModel:
    """A DiffusionModel whose logits come from `make(input_ids)`; counts its forward passes."""

    name = "fake"

    def __init__(self, tokenizer: Tokenizer,
                 make: Callable[[torch.Tensor], torch.Tensor] | None = None, seed: int = 0):
        self.tokenizer = tokenizer
        self.mask_id = tokenizer.token_id(MASK_TOKEN)
        self.pad_id = tokenizer.token_id(PAD_TOKEN)
        self.max_length = 1024
        self.device = torch.device("cpu")
        self.vocab = tokenizer.vocab_size
        self.calls = 0
        self._gen = torch.Generator().manual_seed(seed)
        self._make = make or self._random

    def _random(self, ids: torch.Tensor) -> torch.Tensor:
        return torch.randn(*ids.shape, self.vocab, generator=self._gen) * 3

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self._make(input_ids)


class Planted:
    """A fake model installed in `engine` that writes `broken` into the request's span
    until `fixed` is set, then `good` (default: an unclosed parenthesis, then fixed)."""

    def __init__(self, engine, request, broken: str = "a + (b", good: str = "a + b"):
        tok = engine.model.tokenizer
        self.fake = FakeModel(tok, self.logits)
        prefix, suffix = request.text[:request.start], request.text[request.end:]
        tail = borrowed_line_break(prefix, suffix)
        # the model is shown the context around the document too (a notebook's other cells)
        layout = build_layout(tok, request.shown_prefix(), tail + request.shown_suffix(),
                              request.options.length, engine.config.max_context_tokens,
                              max_length=self.fake.max_length)
        self.start, self.n = layout.span_start, layout.n_masked
        self.head_ids = tok.encode(layout.head) if layout.head else []  # the prefix's edge

        def spelled(fill: str) -> list[int]:
            ids = tok.encode(layout.head + fill)
            return ids + [self.fake.pad_id] * (self.n - len(ids))
        self.targets = {False: spelled(broken), True: spelled(good)}
        self.fixed = False
        engine._model = self.fake

    def spelled(self, fill: list[int]) -> list[int]:
        """The span's ids for the fill's own ids: the head's tokens first, pads after."""
        ids = self.head_ids + fill
        return ids + [self.fake.pad_id] * (self.n - len(ids))

    def logits(self, ids: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(*ids.shape, self.fake.vocab)
        for i, token in enumerate(self.targets[self.fixed]):
            out[:, self.start + i, token] = 10.0
        return out


def fixed_on_repair(monkeypatch, planted: Planted) -> list[str]:
    """Each denoising run's path (DIFFUSION or REPAIR), listed as the engine runs them;
    the planted model writes its good fill once repair starts."""
    runs = []
    real = passes_module.denoise

    def spy(model, layout, cfg, seed, *args):
        runs.append(DIFFUSION if layout.init_ids is None else REPAIR)
        planted.fixed = runs[-1] == REPAIR
        return real(model, layout, cfg, seed, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    return runs


def planted_engine(model_dir, monkeypatch, first: str, then: str, request, **settings):
    """An engine on the model in `model_dir` whose fake writes `first` until a pass starts
    from given tokens (a hinted one, a repair), then `then`; and the list of its
    denoising runs (see fixed_on_repair)."""
    from dlm_lsp.config import ServerConfig
    from dlm_lsp.engine import Engine

    engine = Engine(ServerConfig(model=str(model_dir), device="cpu", **settings))
    runs = fixed_on_repair(monkeypatch, Planted(engine, request, broken=first, good=then))
    return engine, runs


def spied_layouts(monkeypatch) -> list:
    """The layout of each denoising run the engine makes from now on, in order (after
    any spy installed before)."""
    layouts = []
    real = passes_module.denoise

    def spy(model, layout, *args):
        layouts.append(layout)
        return real(model, layout, *args)
    monkeypatch.setattr(passes_module, "denoise", spy)
    return layouts
