"""Model loading: a name or directory -> an adapter behind `DiffusionModel`."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from dlm_lsp.models.interface import DiffusionModel, ModelLoadError
from dlm_lsp.models.tiny import MODEL_TYPE, TinyModel

DEFAULT_MODEL_DIR = Path(__file__).resolve().parent.parent / "weights" / "default"

__all__ = ["DEFAULT_MODEL_DIR", "DiffusionModel", "ModelLoadError", "load_model", "pick_device"]


def pick_device(device: str) -> torch.device:
    """Resolve auto/cpu/cuda, failing clearly when CUDA is asked for but absent."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError("device 'cuda' was requested but CUDA is not available here; "
                             "set device to 'auto' or 'cpu'")
    return torch.device(device)


def load_model(spec: str, device: str = "auto", precision: str = "auto") -> DiffusionModel:
    """Load the shipped default (`spec == "default"`) or a model directory, running in
    `precision` (auto, fp32, bf16; see tiny.resolve_precision)."""
    path = DEFAULT_MODEL_DIR if spec == "default" else Path(spec).expanduser()
    if not path.is_dir():
        raise ModelLoadError(f"model '{spec}' not found: {path} is not a directory. "
                             "Use 'default' or the path of a model directory.")
    config_file = path / "config.json"
    try:
        model_type = json.loads(config_file.read_text()).get("model_type")
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"model '{spec}': cannot read {config_file}: {exc}") from exc
    if model_type != MODEL_TYPE:
        raise ModelLoadError(f"model '{spec}': model_type {model_type!r} is not supported "
                             f"(supported: {MODEL_TYPE!r})")
    return TinyModel.load(path, pick_device(device), name=spec, precision=precision)
