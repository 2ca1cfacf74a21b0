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


@pytest.fixture
def cuda_machine(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """A machine with CUDA as far as the engine can tell, on any machine: torch says CUDA
    is there ("auto" resolves to it), and the engine's loads give the model on the CPU
    whatever device they ask for.  Each load's (device, cudaGraphs) is recorded."""
    import torch

    import dlm_lsp.engine as engine_module
    from dlm_lsp.models import load_model

    loads: list[tuple[str, bool]] = []

    def load_on_the_cpu(spec: str, device: str, precision: str, graphs: bool):
        loads.append((device, graphs))
        return load_model(spec, "cpu", precision, graphs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(engine_module, "load_model", load_on_the_cpu)
    return loads


@pytest.fixture
def bench_engines(monkeypatch: pytest.MonkeyPatch) -> list:
    """The config of every engine a benchmark makes (`filling.bench_engine`), in order:
    what its fills really ran with, beside what its report says they ran with."""
    from dlm_lsp.bench import filling

    configs = []

    class Recording(filling.Engine):
        def __init__(self, config) -> None:
            configs.append(config)
            super().__init__(config)
    monkeypatch.setattr(filling, "Engine", Recording)
    return configs
