"""Build small random models in a directory, as the tests' stand-in for real weights."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from dlm_lsp.models.tiny import TinyConfig, TinyDenoiser, save_tiny
from dlm_lsp.models.tokenizer import Tokenizer
from dlm_lsp.training.data import train_tokenizer


def small_tokenizer(vocab_size: int = 1024) -> Tokenizer:
    """A byte-level BPE trained in well under a second on a few stdlib modules."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ("textwrap.py", "argparse.py", "json/encoder.py")
    return train_tokenizer([(stdlib / name).read_text() for name in names], vocab_size)


def write_random_model(directory: Path, d_model: int = 64, n_layers: int = 2, seed: int = 0,
                       max_length: int = 1024,
                       tokenizer: Tokenizer | None = None) -> Path:
    """Save a randomly initialised tiny denoiser with its tokenizer into `directory`."""
    import torch

    torch.manual_seed(seed)
    tok = tokenizer or small_tokenizer()
    cfg = TinyConfig(vocab_size=tok.vocab_size, d_model=d_model, n_layers=n_layers,
                     n_heads=4, max_length=max_length)
    save_tiny(TinyDenoiser(cfg), tok, directory, dtype=torch.float32)
    return directory
