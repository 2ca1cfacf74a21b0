"""Shared fixtures: a random tiny model on disk (no hub, ever) and LSP clients."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # tests never touch a model hub
# One torch thread per process: the suite runs servers beside pytest on 2 cores, where
# competing OpenMP thread pools are many times slower than one thread each.
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).parent))

from tiny_model import write_random_model  # noqa: E402


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised tiny denoiser with its tokenizer, saved like a real model."""
    return write_random_model(tmp_path_factory.mktemp("models") / "tiny", d_model=96)
